"""Async rescheduling: make an unrolled schedule repeat one step in the steady state.

The earliest-start list schedule of unrolled async steps usually settles into
a repeating step. When its device order alternates between steps, or one
stage drifts ever further ahead of another on the same GPUs, the tasks are
scheduled again in fixed orders that shift by a constant per step, so that
every interior step places its stages in the same order.
"""

from __future__ import annotations

from rlplex.plan.ops import PlanSchedule
from rlplex.plan.problem import Pair, Problem
from rlplex.plan.scheduler import Scheduler

EPS = 1e-9


def unrolled_schedule(
    problem: Problem, resident: dict[Pair, bool], dirty: dict[Pair, bool]
) -> PlanSchedule:
    """Schedule unrolled (async) steps so that one step's ops repeat in the steady state.

    The earliest-start list schedule usually settles into a repeating step.
    When its device order alternates between steps, or one stage drifts ever
    further ahead of another on the same GPUs, the tasks are scheduled again
    in fixed orders that shift by a constant per step (see :func:`priorities`),
    so that every interior step places its stages in the same order; the
    repeating schedule with the shortest period wins.
    """
    first = Scheduler(problem, resident, dirty).run().with_steady_state()
    if first.steady_period is not None or first.steps <= 2:
        return first
    best = first
    for priority in priorities(problem, first):
        again = Scheduler(problem, resident, dirty).run(priority).with_steady_state()
        if again.steady_period is not None and (
            best.steady_period is None or again.steady_period < best.steady_period - EPS
        ):
            best = again
    if best.steady_period is None:
        # A first schedule whose weight syncs lag ever further behind its stages ends its
        # steps together at the end and gives no pace: the busiest lane's work per step
        # (the period no schedule beats) does.
        for priority in priorities(problem, first, pace=busiest_lane(problem)):
            again = Scheduler(problem, resident, dirty).run(priority).with_steady_state()
            if again.steady_period is not None and (
                best.steady_period is None or again.steady_period < best.steady_period - EPS
            ):
                best = again
    return best


def busiest_lane(problem: Problem) -> float:
    """The most work one lane does per step (a step's task durations on it, summed)."""
    load: dict[object, float] = {}
    for t in problem.tasks:
        if t.step == 0:
            for lane in t.lanes:
                load[lane] = load.get(lane, 0.0) + t.duration
    return max(load.values(), default=0.0)


def priorities(
    problem: Problem, first: PlanSchedule, pace: float | None = None
) -> list[list[float]]:
    """Fixed task orders for rescheduling: ``step * pace + offset of the stage``.

    ``pace`` is, unless given, the first schedule's time per step. The offsets
    are the stage's earliest start within one step (longest path of durations
    before it), or its start in the first schedule's middle step.
    """
    last, low = first.window()
    if pace is None:
        pace = max(first.makespan / first.steps, EPS)
        ends = first.step_ends()
        if last > low and ends[last] > ends[low]:
            pace = (ends[last] - ends[low]) / (last - low)
    pace = max(pace, EPS)
    head: dict[str, float] = {}
    for t in problem.tasks:  # topological order
        if t.step == 0:
            head[t.name] = max(
                (head[problem.tasks[p].name] + problem.tasks[p].duration for p in t.preds),
                default=0.0,
            )
    middle = last - 1
    start = {op.name: op.start - middle * pace for op in first.ops if op.step == middle}
    return [
        [t.step * pace + head[t.name] for t in problem.tasks],
        [t.step * pace + start.get(t.name, head[t.name]) for t in problem.tasks],
    ]
