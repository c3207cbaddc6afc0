"""The recorder's per-step metrics (no Ray: the Recorder is a plain object)."""

from __future__ import annotations

import pytest
from plans import colocated_plan

from rlplex.runtime.recorder import Recorder
from rlplex.runtime.schedule import expand_plan


@pytest.mark.parametrize("scale", [0.0, 0.5, 1.0])
def test_planned_step_is_on_the_runs_time_scale(scale: float) -> None:
    """``--time-scale 0`` plans 0 s a step, as the run's summary predicts, not the unscaled
    plan (the progress line said "plan 241 s" beside "predicted 0.000 s")."""
    plan = colocated_plan()
    schedule = expand_plan(plan, 1)
    recorder = Recorder(schedule, plan, meta={"time_scale": scale})
    done = []
    for op in schedule.ops:
        done += recorder.add(op, 0.0, 0.01, ())
    [(step, metrics)] = done
    lo = min(op.planned_start_s for op in schedule.ops)
    hi = max(op.planned_end_s for op in schedule.ops)
    assert step == 0 and hi - lo > 0
    assert metrics["planned_step_s"] == pytest.approx((hi - lo) * scale)


def test_planned_step_without_a_time_scale_is_the_plans() -> None:
    plan = colocated_plan()
    schedule = expand_plan(plan, 1)
    recorder = Recorder(schedule, plan)
    done = []
    for op in schedule.ops:
        done += recorder.add(op, 0.0, 0.01, ())
    lo = min(op.planned_start_s for op in schedule.ops)
    hi = max(op.planned_end_s for op in schedule.ops)
    assert done[0][1]["planned_step_s"] == pytest.approx(hi - lo)
