"""The simulator replays plans: same times with the model, delays with recorded durations."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.plan import make_plan
from rlplex.sim import simulate
from rlplex.timeline.record import Timeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def grpo():
    cfg = load_config(EXAMPLES / "grpo.yaml")
    return cfg, make_plan(cfg)


def test_model_durations_reproduce_the_plan(grpo):
    cfg, plan = grpo
    timeline = simulate(plan, cfg, steps=3)
    planned = {op.id: (op.start_s, op.end_s) for op in plan.ops}
    for event in timeline.step_events(0):
        assert (event.start_s, event.end_s) == pytest.approx(planned[event.op])
    for step in range(3):
        assert timeline.metrics[step]["step_s"] == pytest.approx(plan.period_s)
        assert len(timeline.step_events(step)) == len(plan.ops)
    assert timeline.meta["period_s"] == pytest.approx(plan.period_s)


def test_recorded_slow_generate_delays_its_dependents(grpo):
    cfg, plan = grpo
    slow = simulate(plan, cfg, steps=4, durations={2: {"generate": 150.0}})
    base = simulate(plan, cfg, steps=4)
    assert slow.metrics[2]["step_s"] == pytest.approx(base.metrics[2]["step_s"] + 30)
    ev = {e.op: e for e in slow.events}
    assert ev["s2/generate"].end_s - ev["s2/generate"].start_s == pytest.approx(150)
    assert ev["s2/train"].start_s == pytest.approx(
        {e.op: e for e in base.events}["s2/train"].start_s + 30
    )
    assert ev["s3/generate"].start_s >= ev["s2/weight_sync"].end_s - 1e-9
    called = simulate(plan, cfg, steps=2, durations=lambda s, st: 1.0 if st == "train" else None)
    train = next(e for e in called.events if e.op == "s1/train")
    assert train.end_s - train.start_s == pytest.approx(1.0)


def test_jitter_is_seeded(grpo):
    cfg, plan = grpo
    a = simulate(plan, cfg, steps=5, jitter=0.1, seed=7)
    b = simulate(plan, cfg, steps=5, jitter=0.1, seed=7)
    c = simulate(plan, cfg, steps=5, jitter=0.1, seed=8)
    assert [e.end_s for e in a.events] == [e.end_s for e in b.events]
    assert [e.end_s for e in a.events] != [e.end_s for e in c.events]
    for step in range(5):
        assert a.metrics[step]["step_s"] == pytest.approx(plan.period_s, rel=0.15)


def test_async_steady_state_and_jsonl_round_trip(tmp_path):
    cfg = load_config(EXAMPLES / "async.yaml")
    plan = make_plan(cfg)
    timeline = simulate(plan, cfg, steps=12)
    assert timeline.meta["period_s"] == pytest.approx(plan.period_s, rel=1e-3)
    ev = {e.op: e for e in timeline.events}
    # One step off: generation of step t+1 overlaps training of step t.
    assert ev["s4/generate"].start_s < ev["s3/train"].end_s
    assert ev["s5/generate"].start_s >= ev["s3/weight_sync"].end_s - 1e-9
    path = tmp_path / "timeline.jsonl"
    timeline.write_jsonl(path)
    back = Timeline.read_jsonl(path)
    assert len(back.events) == len(timeline.events)
    assert back.metrics[3]["step_s"] == pytest.approx(timeline.metrics[3]["step_s"])


def test_ten_thousand_steps_are_simulated(grpo):
    """Speed is bench/planner.py's to measure (2 s target), not a timed unit test's."""
    cfg, plan = grpo
    timeline = simulate(plan, cfg, steps=10_000)
    assert len(timeline.metrics) == 10_000


def test_recorded_transfer_durations_are_honoured():
    """A recorded offload or reload (keyed by its op id without the step) replaces the model."""
    cfg = load_config(EXAMPLES / "ppo.yaml")
    plan = make_plan(cfg, baseline="sequential")
    transfer = next(op for op in plan.ops if op.kind in ("offload", "reload") and op.gb > 0)
    key = transfer.id.partition("/")[2]
    slow = simulate(plan, cfg, steps=2, durations={1: {key: 100.0}})
    event = next(e for e in slow.events if e.op == f"s1/{key}")
    assert event.end_s - event.start_s == pytest.approx(100.0)
    jittered = simulate(plan, cfg, steps=2, jitter=0.5, jitter_transfers=True, seed=3)
    event = next(e for e in jittered.events if e.op == f"s1/{key}")
    assert event.end_s - event.start_s != pytest.approx(transfer.end_s - transfer.start_s)


def test_a_pattern_step_that_does_not_repeat_is_refused():
    """The first unrolled step of an async plan lacks its predecessors: it cannot repeat."""
    from rlplex.sim.simulate import PatternError

    cfg = load_config(EXAMPLES / "async.yaml")
    plan = make_plan(cfg)
    last = plan.model_copy(update={"pattern_step": plan.unrolled_steps - 1})
    with pytest.raises(PatternError):
        simulate(last, cfg, steps=3)


@pytest.mark.parametrize("steps", [6, 10, 40])
def test_colocated_async_period_is_the_plans_not_the_drains(steps: int) -> None:
    """With generation and training on the same GPUs the last step ends a whole
    ``generate`` early; the simulator's period must not count it (it fell below the
    lower bound: 216 s for 10 steps against a plan and bound of 240 s)."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan

    cfg = load_config(
        "examples/grpo.yaml", overrides=["pipeline.mode=async", "pipeline.max_staleness=1"]
    )
    plan = make_plan(cfg)
    timeline = simulate(plan, cfg, steps=steps)
    assert timeline.meta["period_s"] == pytest.approx(plan.period_s)
    assert timeline.meta["period_s"] >= plan.lower_bound_s - 1e-6


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"steps": 0}, "steps"),
        ({"steps": 2, "jitter": float("nan")}, "jitter"),
        ({"steps": 2, "durations": {0: {"generate": -100.0}}}, "durations"),
        ({"steps": 2, "durations": {1: {"generate": float("nan")}}}, "durations"),
    ],
)
def test_bad_inputs_are_refused_not_simulated(kwargs: dict, field: str) -> None:
    """Found in review (2026-11-29): steps=0 gave an empty timeline, a negative recorded
    duration an op ending before it began, NaN jitter NaN times."""
    from rlplex.config import load_config
    from rlplex.errors import ConfigError
    from rlplex.plan import make_plan
    from rlplex.sim import simulate

    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / "grpo.yaml")
    with pytest.raises(ConfigError) as info:
        simulate(make_plan(cfg), cfg, **kwargs)
    assert info.value.field == field
