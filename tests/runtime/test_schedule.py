"""Unrolling a plan into a run: repetition, barriers, staleness gates, device lanes."""

from __future__ import annotations

import itertools

import pytest
from plans import colocated_config, colocated_plan, op

from rlplex.config import load_config
from rlplex.plan import make_plan
from rlplex.plan.model import Plan
from rlplex.runtime.errors import PlanScheduleError
from rlplex.runtime.schedule import expand_plan

EXAMPLES = "examples"


def test_steps_repeat_the_plan_with_renumbered_ids_and_shifted_times() -> None:
    plan = colocated_plan()
    sched = expand_plan(plan, 3)
    assert len(sched.ops) == 3 * len(plan.ops)
    by_id = sched.by_id()
    assert by_id["s2/train"].template == "s0/train"
    assert by_id["s2/train"].planned_start_s == pytest.approx(3.8 + 2 * 6.0)
    train = by_id["s1/train"]
    assert set(sched.op_id(k) for k in train.plan_deps) == {
        "s1/advantage",
        "s1/reload/actor_train/optimizer",
    }


def test_sync_steps_wait_for_the_previous_step() -> None:
    sched = expand_plan(colocated_plan(), 2)
    first = sched.by_id()["s1/offload/actor_train/optimizer"]
    # the only sink of step 0 is the weight sync
    assert "s0/weight_sync" in sched.dep_ids(first)


def test_lanes_keep_the_planned_order_per_device() -> None:
    plan = colocated_plan()
    sched = expand_plan(plan, 2)
    lanes = sched.lane_ids()
    compute = [o for o in lanes[(0, "compute")] if o.startswith("s0/")]
    assert compute == ["s0/generate", "s0/train", "s0/weight_sync"]
    transfer = [o for o in lanes[(1, "transfer")] if o.startswith("s0/")]
    assert transfer == [
        "s0/offload/actor_train/optimizer",
        "s0/reload/actor_infer/kv_cache",
        "s0/offload/actor_infer/kv_cache",
        "s0/reload/actor_train/optimizer",
    ]
    by_key = sched.by_key()
    for lane in sched.lanes.values():
        for before, after in itertools.pairwise(lane):
            assert before in by_key[after].deps


def test_async_plan_gates_generation_k_steps_ahead() -> None:
    cfg = load_config(f"{EXAMPLES}/async.yaml")
    plan = make_plan(cfg)
    k = cfg.pipeline.staleness
    sched = expand_plan(plan, 6, staleness=k)
    by_id = sched.by_id()
    for t in range(k + 1, 6):
        assert f"s{t - k - 1}/weight_sync" in sched.dep_ids(by_id[f"s{t}/generate"])
    # generation of step 1 does not wait for training of step 0
    assert "s0/weight_sync" not in sched.dep_ids(by_id["s1/generate"])


def test_every_example_plan_unrolls_without_cycles() -> None:
    for name in ("ppo", "grpo", "async", "disaggregated", "verl"):
        cfg = load_config(f"{EXAMPLES}/{name}.yaml")
        sched = expand_plan(make_plan(cfg), 4, staleness=cfg.pipeline.staleness)
        assert len({o.id for o in sched.ops}) == len(sched.ops)


def test_zero_length_ties_follow_dependencies() -> None:
    ops = [
        op(
            "s0/reload/r/kv_cache",
            "reload",
            0.0,
            0.0,
            ("s0/offload/r/weights",),
            devices=(0,),
            role="r",
            state="kv_cache",
        ),
        op(
            "s0/offload/r/weights", "offload", 0.0, 0.0, (), devices=(0,), role="r", state="weights"
        ),
    ]
    plan = Plan(
        makespan_s=0,
        period_s=0,
        lower_bound_s=0,
        capacity_gb=1,
        placement={"r": [0]},
        states={},
        initial_residency={},
        ops=ops,
    )
    sched = expand_plan(plan, 1)
    assert sched.lane_ids()[(0, "transfer")] == ("s0/offload/r/weights", "s0/reload/r/kv_cache")


def test_unknown_dependency_and_cycle_are_refused() -> None:
    bad = Plan(
        makespan_s=1,
        period_s=1,
        lower_bound_s=1,
        capacity_gb=1,
        placement={},
        states={},
        initial_residency={},
        ops=[op("s0/a", "run", 0, 1, ("s0/nope",), role="driver")],
    )
    with pytest.raises(PlanScheduleError, match="s0/nope"):
        expand_plan(bad, 1)
    cyclic = bad.model_copy(
        update={
            "ops": [
                op("s0/a", "run", 0, 1, ("s0/b",), role="driver"),
                op("s0/b", "run", 0, 1, ("s0/a",), role="driver"),
            ]
        }
    )
    with pytest.raises(PlanScheduleError, match="cycle"):
        expand_plan(cyclic, 1)


def test_dead_offload_is_read_from_the_cost_model() -> None:
    ops = [
        op(
            "s0/offload/inf/weights", "offload", 0, 0, (), devices=(0,), role="inf", state="weights"
        ),
        op(
            "s0/weight_sync",
            "weight_sync",
            0,
            1,
            ("s0/offload/inf/weights",),
            devices=(0,),
            role="inf",
            from_role="tr",
        ),
        op(
            "s0/offload/tr/weights",
            "offload",
            1,
            2,
            ("s0/weight_sync",),
            devices=(0,),
            role="tr",
            state="weights",
            gb=1.0,
        ),
    ]
    plan = Plan(
        makespan_s=2,
        period_s=2,
        lower_bound_s=2,
        capacity_gb=1,
        placement={},
        states={},
        initial_residency={},
        ops=ops,
    )
    by_id = expand_plan(plan, 1).by_id()
    assert by_id["s0/offload/inf/weights"].work.dead
    assert not by_id["s0/offload/tr/weights"].work.dead


def test_exec_ops_carry_the_plans_work_and_overhead_apart() -> None:
    """The executor's ops hold the work and the dispatch overhead as the plan splits them;
    the two add up to the planned duration (nothing in the runtime subtracts)."""
    config = colocated_config()
    cluster = config.cluster.model_copy(update={"dispatch_s": 0.05})
    plan = make_plan(config.model_copy(update={"cluster": cluster}))
    assert plan.dispatch_s == 0.05
    for exec_op in expand_plan(plan, steps=2).ops:
        planned = exec_op.planned_end_s - exec_op.planned_start_s
        assert exec_op.overhead_s == (0.05 if exec_op.work.kind in ("run", "weight_sync") else 0.0)
        assert exec_op.work_s + exec_op.overhead_s == pytest.approx(planned)
