"""Every example config plans, verifies and simulates; plans do not depend on the hash seed."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.plan import BASELINES, PlanVerificationError, make_plan, verify_plan
from rlplex.sim import simulate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plans_verify_and_simulate(path):
    cfg = load_config(path)
    plan = make_plan(cfg)
    verify_plan(plan, cfg)
    assert plan.period_s >= plan.lower_bound_s - 1e-9
    for name in BASELINES:
        base = make_plan(cfg, baseline=name)
        verify_plan(base, cfg)
        assert base.baseline == name
        assert base.period_s >= plan.period_s - 1e-6
    timeline = simulate(plan, cfg, steps=6)
    assert timeline.meta["period_s"] == pytest.approx(plan.period_s, rel=1e-3)
    assert len(timeline.metrics) == 6


def test_sequential_baseline_offloads_after_every_call():
    cfg = load_config(ROOT / "examples" / "grpo.yaml")
    plan = make_plan(cfg, baseline="sequential")
    runs = [op for op in plan.ops if op.kind in ("run", "weight_sync")]
    for a, b in itertools.pairwise(runs):
        assert b.start_s >= a.end_s - 1e-9  # one stage at a time
    assert plan.initial_residency == {r: [] for r in plan.placement}
    offloaded = {(op.role, op.state) for op in plan.ops if op.kind == "offload"}
    assert ("actor_train", "optimizer") in offloaded
    # The dirty optimizer costs 8 GB / 25 GB/s each way after train.
    train_off = [
        op
        for op in plan.ops
        if op.id.endswith("offload/actor_train/optimizer#2")
        or (op.id.endswith("offload/actor_train/optimizer") and op.start_s > 200)
    ]
    assert any(op.end_s - op.start_s == pytest.approx(0.32) for op in train_off)


_SCRIPT = (
    "import sys; from rlplex.config import load_config; from rlplex.plan import make_plan;"
    "print(make_plan(load_config(sys.argv[1])).to_json())"
)


def test_plan_json_does_not_depend_on_hash_seed():
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(ROOT / "examples" / "ppo.yaml")],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        outputs.add(out)
    assert len(outputs) == 1
    data = json.loads(outputs.pop())
    for key in (
        "mode",
        "makespan_s",
        "period_s",
        "lower_bound_s",
        "capacity_gb",
        "placement",
        "states",
        "initial_residency",
        "ops",
    ):
        assert key in data
    for op in data["ops"]:
        assert {"id", "kind", "step", "devices", "start_s", "end_s", "deps"} <= set(op)
        assert op["kind"] in ("run", "offload", "reload", "weight_sync")


def _tampered(plan, op_id, **changes):
    ops = [op.model_copy(update=changes) if op.id == op_id else op for op in plan.ops]
    return plan.model_copy(update={"ops": ops})


def test_verify_names_the_first_violation():
    cfg = load_config(ROOT / "examples" / "ppo.yaml")
    plan = make_plan(cfg)
    train = plan.op("s0/train")
    early = _tampered(plan, "s0/train", start_s=train.start_s - 5, end_s=train.end_s - 5)
    with pytest.raises(PlanVerificationError) as info:
        verify_plan(early, cfg)
    assert info.value.rule == "deps" and info.value.op == "s0/train"
    short = _tampered(plan, "s0/train", end_s=train.start_s + 1)
    with pytest.raises(PlanVerificationError) as info:
        verify_plan(short, cfg)
    assert info.value.rule == "duration"
    # Everything resident up front overflows the 80 GB GPUs of ppo.yaml.
    crowded = plan.model_copy(
        update={"initial_residency": {r: list(states) for r, states in plan.states.items()}}
    )
    with pytest.raises(PlanVerificationError) as info:
        verify_plan(crowded, cfg)
    assert info.value.rule in ("memory", "residency")


def test_verify_catches_a_free_offload_of_a_dirty_optimizer():
    cfg = load_config(ROOT / "examples" / "grpo.yaml")
    plan = make_plan(cfg, baseline="sequential")
    costly = next(op for op in plan.ops if op.kind == "offload" and op.gb > 0)
    cheat = _tampered(plan, costly.id, end_s=costly.start_s)
    with pytest.raises(PlanVerificationError) as info:
        verify_plan(cheat, cfg)
    assert info.value.rule == "duration" and info.value.op == costly.id


def test_verify_catches_a_missing_reload():
    cfg = load_config(ROOT / "examples" / "grpo.yaml")
    plan = make_plan(cfg, baseline="sequential")
    reload = next(op for op in plan.ops if op.kind == "reload" and op.role == "reference")
    ops = [op for op in plan.ops if op.id != reload.id]
    ops = [
        op.model_copy(update={"deps": tuple(d for d in op.deps if d != reload.id)}) for op in ops
    ]
    with pytest.raises(PlanVerificationError) as info:
        verify_plan(plan.model_copy(update={"ops": ops}), cfg)
    assert info.value.rule == "residency"


def test_a_config_built_in_python_is_checked_before_planning() -> None:
    """Found in review (2026-11-29): a Config built in Python skips the loader, and a stage
    on an unknown role met the planner as a bare KeyError; make_plan(steps=-3) planned."""
    import rlplex
    from rlplex.dag.pipeline import UnknownRoleError
    from rlplex.errors import ConfigError
    from rlplex.plan import make_plan

    root = Path(__file__).resolve().parents[2]
    cfg = rlplex.load_config(root / "examples" / "python.yaml")
    b = rlplex.PipelineBuilder()
    b.stage("reward", role="nonexistent", seconds=10, after=[b.stage("generate",
            role="actor_infer", seconds=120)])  # fmt: skip
    wrong = rlplex.Config(cluster=cfg.cluster, roles=cfg.roles, pipeline=b.build())
    with pytest.raises(UnknownRoleError, match="stage 'reward' uses role 'nonexistent'"):
        make_plan(wrong)
    with pytest.raises(ConfigError) as info:
        make_plan(cfg, steps=-3)
    assert info.value.field == "steps"
