"""One step pattern: the simulator and the executor run the same ops in the same order."""

from __future__ import annotations

from itertools import groupby, pairwise

import pytest
from hypothesis import HealthCheck, assume, given, settings
from test_plan_properties import configs

from rlplex.config import load_config
from rlplex.errors import InfeasibleError
from rlplex.plan import make_plan
from rlplex.plan.pattern import StepPatternError, step_pattern
from rlplex.runtime.schedule import expand_plan
from rlplex.sim import simulate
from rlplex.sim.simulate import extract_pattern

EXAMPLES = ("grpo", "ppo", "async", "disaggregated", "verl")


def _sim_lanes(timeline) -> dict[tuple[int, str], list[frozenset[str]]]:
    """Each device lane's ops by start (ops at one instant with one end: a set)."""
    lanes: dict[tuple[int, str], list] = {}
    for e in timeline.events:
        lane = "compute" if e.kind in ("run", "weight_sync") else "transfer"
        for d in e.devices:
            lanes.setdefault((d, lane), []).append(e)
    return {
        key: [
            frozenset(e.op for e in group)
            for _, group in groupby(
                sorted(evs, key=lambda e: (e.start_s, e.end_s)), key=lambda e: (e.start_s, e.end_s)
            )
        ]
        for key, evs in lanes.items()
    }


def _grouped(order: tuple[str, ...], groups: list[frozenset[str]]) -> list[frozenset[str]]:
    out, i = [], 0
    for g in groups:
        out.append(frozenset(order[i : i + len(g)]))
        i += len(g)
    return out


ASYNC_COLOCATED = ["pipeline.mode=async", "pipeline.max_staleness=1"]


@pytest.mark.parametrize(
    ("name", "overrides"),
    [*((n, []) for n in EXAMPLES), ("grpo", ASYNC_COLOCATED), ("ppo", ASYNC_COLOCATED)],
)
def test_simulator_and_runtime_schedule_share_every_device_order(
    name: str, overrides: list[str]
) -> None:
    cfg = load_config(f"examples/{name}.yaml", overrides=overrides)
    plan = make_plan(cfg)
    steps = 6
    timeline = simulate(plan, cfg, steps=steps)
    sched = expand_plan(plan, steps, staleness=cfg.pipeline.staleness)
    assert {e.op for e in timeline.events} == {o.id for o in sched.ops}
    sim = _sim_lanes(timeline)
    assert set(sim) == set(sched.lanes)
    for key, groups in sim.items():
        assert _grouped(sched.lane_ids()[key], groups) == groups, key


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_random_plans_order_every_device_lane_alike(cfg) -> None:
    try:
        plan = make_plan(cfg)
    except InfeasibleError:
        assume(False)
        return
    steps = 4
    timeline = simulate(plan, cfg, steps=steps)
    sched = expand_plan(plan, steps, staleness=cfg.pipeline.staleness)
    sim = _sim_lanes(timeline)
    assert set(sim) == set(sched.lanes)
    for key, groups in sim.items():
        assert _grouped(sched.lane_ids()[key], groups) == groups, key


def test_async_and_sync_examples_are_both_covered() -> None:
    modes = {load_config(f"examples/{n}.yaml").pipeline.mode for n in EXAMPLES}
    assert modes == {"sync", "async"}


def test_the_simulator_and_runtime_read_one_pattern() -> None:
    cfg = load_config("examples/async.yaml")
    plan = make_plan(cfg)
    sp = step_pattern(plan)
    pat = extract_pattern(plan, cfg)
    assert pat.keys == tuple(op.name for op in sp.ops)
    assert pat.deps == tuple(op.deps for op in sp.ops)
    sched = expand_plan(plan, 8, staleness=plan.staleness)
    by_id = sched.by_id()
    for j, op in enumerate(sp.ops):
        for step in range(8):
            assert set(sp.deps_at(step, j, 8)) <= set(by_id[f"s{step}/{op.name}"].deps)


def test_async_pattern_gates_generation_k_plus_one_steps_back() -> None:
    cfg = load_config("examples/async.yaml")
    k = cfg.pipeline.staleness
    sp = step_pattern(make_plan(cfg))
    names = [op.name for op in sp.ops]
    gen, ws = names.index("generate"), names.index("weight_sync")
    assert (-k - 1, ws) in sp.ops[gen].deps
    assert not sp.barrier and sp.repeats


def test_sync_pattern_sources_wait_for_the_previous_steps_sinks() -> None:
    sp = step_pattern(make_plan(load_config("examples/grpo.yaml")))
    assert sp.barrier
    sources = [op for op in sp.ops if not any(off == 0 for off, _ in op.plan_deps)]
    assert sources and all(any(off == -1 for off, _ in op.deps) for op in sources)


def test_the_last_step_keeps_one_op_at_a_time_per_device() -> None:
    """Colocated async: training of step t runs after generation of step t+1 on the same
    GPUs. In the last step there is no later generation; training must still wait for
    the op before that generation (the previous weight sync), not overlap it."""
    cfg = load_config("examples/grpo.yaml", overrides=ASYNC_COLOCATED)
    plan = make_plan(cfg)
    for steps in (3, 5):
        timeline = simulate(plan, cfg, steps=steps)
        for lane in _sim_lanes(timeline).values():
            flat = sorted(
                (e for e in timeline.events if e.op in set().union(*lane)),
                key=lambda e: (e.start_s, e.end_s),
            )
            for a, b in pairwise(flat):
                assert b.start_s >= a.end_s - 1e-9, (a.op, b.op)


def test_a_plan_without_a_pattern_step_is_refused() -> None:
    plan = make_plan(load_config("examples/grpo.yaml"))
    with pytest.raises(StepPatternError, match="pattern step 5"):
        step_pattern(plan.model_copy(update={"pattern_step": 5}))
