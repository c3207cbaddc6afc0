"""One step pattern: the simulator and the executor run the same ops in the same order."""

from __future__ import annotations

from itertools import groupby, pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from test_plan_properties import configs

from rlplex.config import config_from_dict, load_config
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


def _async_zero_stages(seconds: list[float], train_gpus: str, gen: tuple[str, float]) -> Any:
    """Hypothesis's shrunk counterexamples: five stages of r0 (some of no duration), one of
    another role, a weight sync r0 -> r1; r1, r2 and r3 share GPUs 0-3."""
    other = "0-3" if train_gpus == "4-7" else "4-7"
    roles: dict[str, Any] = {
        "r0": {"devices": train_gpus, "states": {"weights": 1.0}},
        "r1": {"devices": other if gen[0] == "r1" else "0-3", "states": {"weights": 1.0}},
        "r2": {"devices": "0-3", "states": {"weights": 1.0}},
        "r3": {"devices": "0-3", "states": {"weights": 1.0}},
        "cpu": {"world_size": 2},
    }
    stages: dict[str, Any] = {f"st{i}": {"role": "r0", "seconds": s} for i, s in enumerate(seconds)}
    stages["st5"] = {"role": gen[0], "seconds": gen[1]}
    stages["sync"] = {"kind": "weight_sync", "from": "r0", "to": "r1", "after": ["st5"]}
    return config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu_memory_gb": 40.0,
                        "host_gb_per_s": 25.0, "device_copy_gb_per_s": 200.0,
                        "network_gb_per_s": 25.0},
            "roles": roles,
            "pipeline": {"mode": "async", "max_staleness": 1, "stages": stages},
        },
        file="t.yaml",
    )  # fmt: skip


def _lanes_agree(cfg: Any, steps: int = 4) -> None:
    plan = make_plan(cfg)
    timeline = simulate(plan, cfg, steps=steps)
    sched = expand_plan(plan, steps, staleness=cfg.pipeline.staleness)
    sim = _sim_lanes(timeline)
    for key, groups in sim.items():
        assert _grouped(sched.lane_ids()[key], groups) == groups, key
    for lane in sim.values():  # one op at a time on a device lane
        spans = sorted((e.start_s, e.end_s) for e in timeline.events if {e.op} & set().union(*lane))
        assert all(a[1] <= b[0] + 1e-9 for a, b in pairwise(spans) if a[1] > a[0])


def test_the_first_step_waits_on_its_device_like_every_other() -> None:
    """Regression: a step's stage waits on its GPUs for the previous step's weight sync,
    which waits for this step's other stage; in the run's first step that sync does not
    exist, and the edge was dropped, so st3 and st4 ran at once on GPUs 0-3. The edge now
    falls back to the op before it on the lane (st4), as at the end of a run."""
    _lanes_agree(_async_zero_stages([0.0, 0.0, 0.0, 1.0, 2.0], "0-3", ("r1", 2.0)))


def test_a_lagging_weight_sync_is_rescheduled_into_a_repeating_step() -> None:
    """Regression: a sync whose destination runs nothing is gated by no staleness; the first
    schedule ran every step's generation before any sync, and the fixed-order reschedules
    took their pace from that schedule (steps all ending together), so no step repeated and
    simulate refused the plan. The busiest lane's work per step is now also tried as pace."""
    cfg = _async_zero_stages([9.0, 0.0, 0.0, 0.0, 0.0], "4-7", ("r2", 8.0))
    plan = make_plan(cfg)
    assert plan.period_s == pytest.approx(9.04)
    _lanes_agree(cfg)


def test_an_async_config_no_schedule_repeats_still_gets_a_plan_that_runs() -> None:
    """Regression: stages of no duration around offloads and reloads (80 GB GPUs shared by
    three roles) left no unrolled step repeating even after rescheduling, and simulate
    refused the plan; the planner now plans such a config one step at a time."""
    roles: dict[str, Any] = {
        "r0": {"devices": "0-3", "states": {"weights": 1.0, "optimizer": 29.0}},
        "r1": {"devices": "4-7", "states": {"weights": 1.0}},
        "r2": {"devices": "0-3", "states": {"weights": 1.0, "optimizer": 1.0}},
        "r3": {"devices": "0-3", "states": {"weights": 19.0, "optimizer": 30.0}},
        "cpu": {"world_size": 2},
    }
    stages: dict[str, Any] = {
        "st0": {"role": "r0", "seconds": 0.0}, "st1": {"role": "r0", "seconds": 0.0},
        "st2": {"role": "r2", "seconds": 0.0}, "st3": {"role": "r3", "seconds": 0.0},
        "sync": {"kind": "weight_sync", "from": "r0", "to": "r1", "after": ["st3"]},
    }  # fmt: skip
    cfg = config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu_memory_gb": 80.0,
                        "host_gb_per_s": 25.0, "device_copy_gb_per_s": 200.0,
                        "network_gb_per_s": 25.0},
            "roles": roles,
            "pipeline": {"mode": "async", "max_staleness": 1, "stages": stages},
        },
        file="t.yaml",
    )  # fmt: skip
    _lanes_agree(cfg, steps=6)


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


def test_pattern_ops_hold_their_plan_ops_work() -> None:
    plan = make_plan(load_config("examples/async.yaml"))
    sp = step_pattern(plan)
    by_id = {op.id: op for op in plan.ops}
    for op in sp.ops:
        assert op.work == by_id[op.template].work(dead=op.work.dead)


def test_the_runtime_schedule_is_the_patterns_one_unrolling() -> None:
    cfg = load_config("examples/async.yaml")
    plan = make_plan(cfg)
    steps = 7
    sp = step_pattern(plan, staleness=cfg.pipeline.staleness)
    sched = expand_plan(plan, steps, staleness=cfg.pipeline.staleness)
    by_key = sched.by_key()
    unrolled = list(sp.unroll(steps))
    assert [(t, j) for t, j, _ in unrolled] == [
        (t, j) for t in range(steps) for j in range(len(sp.ops))
    ]
    assert set(by_key) == {(t, j) for t, j, _ in unrolled}
    for t, j, deps in unrolled:
        op = by_key[(t, j)]
        assert op.work == sp.ops[j].work and op.name == sp.ops[j].name
        assert set(deps) <= set(op.deps)  # plus the lane edges read off the dispatch order
        assert all(0 <= s < steps for s, _ in op.deps)


def _non_repeating():
    """Pointing an async plan at its last unrolled step: it lacks the later steps'
    generation, so its device order differs from its neighbours'."""
    cfg = load_config("examples/async.yaml")
    plan = make_plan(cfg)
    return cfg, plan.model_copy(update={"pattern_step": plan.unrolled_steps - 1})


def test_a_pattern_that_does_not_repeat_is_refused_alike_by_simulator_and_executor() -> None:
    from rlplex.runtime.errors import PlanScheduleError
    from rlplex.sim.simulate import PatternError

    cfg, plan = _non_repeating()
    sp = step_pattern(plan)
    assert not sp.repeats and sp.irregular_op is not None
    with pytest.raises(StepPatternError, match="does not repeat: GPU 0's compute order") as found:
        list(sp.unroll(3))
    message = str(found.value)
    assert sp.irregular_op in message and found.value.op == sp.irregular_op
    with pytest.raises(PlanScheduleError) as run_error:
        expand_plan(plan, 3, staleness=cfg.pipeline.staleness)
    assert str(run_error.value) == message and run_error.value.op == sp.irregular_op
    with pytest.raises(PatternError) as sim_error:
        simulate(plan, cfg, steps=3)
    assert str(sim_error.value) == message


def test_rlplex_run_refuses_a_non_repeating_plan_before_starting_ray(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``execute`` (behind ``rlplex run``) unrolls before it opens a Ray session.

    Whether this process already holds a Ray (another test's, on the same xdist worker) says
    nothing; opening a session is what must not happen.
    """
    from rlplex.runtime import executor
    from rlplex.runtime.errors import PlanScheduleError

    opened: list[bool] = []

    def no_session(*args: object, **kwargs: object) -> None:
        opened.append(True)
        raise AssertionError("execute opened a Ray session for a plan it should refuse")

    monkeypatch.setattr(executor, "open_session", no_session)
    cfg, plan = _non_repeating()
    with pytest.raises(PlanScheduleError, match="does not repeat"):
        executor.execute(plan, cfg, steps=3)
    assert not opened
