"""Each period definition in rlplex/timeline/periods.py, on timelines whose answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.timeline.periods import (
    measured_period,
    median_period,
    period_over_steps,
    steady_period,
    step_ends,
    step_gaps,
)
from rlplex.timeline.record import Event, Timeline


def _timeline(spans: list[tuple[int, float, float]], **meta) -> Timeline:
    events = tuple(
        Event(step=step, op=f"s{step}/run/{i}", kind="run", start_s=a, end_s=b)
        for i, (step, a, b) in enumerate(spans)
    )
    return Timeline(events=events, meta=meta)


# Steps end at 10, 20, 30, 70 (step 3 was slow); step 0 starts at 1.
RUN = _timeline([(0, 1, 4), (0, 4, 10), (1, 10, 20), (2, 20, 30), (3, 30, 70)])


def test_step_ends_are_the_end_of_each_steps_last_op() -> None:
    assert step_ends(RUN) == {0: 10, 1: 20, 2: 30, 3: 70}
    assert step_ends(Timeline(events=(), metrics={0: {"step_s": 1.0}})) == {}


def test_step_gaps_start_at_start_and_never_go_back() -> None:
    assert step_gaps([10, 20, 30, 70], start=1) == [9, 10, 10, 40]
    assert step_gaps([5, 3, 8]) == [5, 0, 3]  # step 1 "ended" before step 0: counted 0


def test_steady_period_is_the_second_half_without_the_drain() -> None:
    assert steady_period([9, 10, 10, 40]) == 25
    assert steady_period([9, 10, 10, 40, 1, 1], drain=2) == 40  # second half is 40, 1, 1
    assert steady_period([5], drain=3) == 5  # too short to leave the drain out
    assert steady_period([]) == 0


def test_a_run_whose_second_half_is_all_drain_takes_the_steps_before_it() -> None:
    """simulate --steps 6 of a split async k = 2 plan said 268.23 s where the plan's period
    is 283.68 s: its second half (steps 3-5) held the short drain step."""
    times = [378.1, 283.7, 283.7, 283.7, 283.7, 237.3]
    assert steady_period(times, drain=3) == pytest.approx(283.7)  # steps 1 and 2
    assert steady_period(times[:4], drain=3) == pytest.approx(378.1)  # step 0, before drain


def test_measured_period_is_the_simulators_definition_on_a_record() -> None:
    assert measured_period(RUN) == 25  # (70 - 20) / 2
    assert measured_period(_timeline([(0, 2, 7)])) == 5  # one step: its span
    assert measured_period(Timeline()) == 0


def test_period_over_steps_needs_the_step_before() -> None:
    ends = step_ends(RUN)
    assert period_over_steps(ends, [1, 2]) == 10
    assert period_over_steps(ends, [0, 3]) == 40  # step 0 has no step before it
    assert period_over_steps(ends, [0, 9]) is None


def test_median_period_ignores_one_slow_step() -> None:
    assert median_period(RUN) == 10
    assert median_period(_timeline([(0, 2, 7)])) == 5
    assert median_period(Timeline()) == 0


def test_a_simulated_sync_run_measures_as_the_simulator_reports() -> None:
    """Predicted and measured periods compare like with like (the reason for one module)."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan
    from rlplex.sim import simulate

    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / "ppo.yaml")
    run = simulate(make_plan(cfg), cfg, steps=6)
    assert measured_period(run) == pytest.approx(run.meta["period_s"])
