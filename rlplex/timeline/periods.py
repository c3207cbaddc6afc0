"""What "period" means: each definition of a step's time, once, with the question it answers.

A period is the time one training step takes once a run is steady. Records,
simulations and plans each give it, and they must be computed so that they
compare like with like. Every definition that works from step ends lives
here; the ones that need a plan or a simulation live with them and say so:

- :func:`step_ends`: when did each step of a timeline finish?
- :func:`step_gaps`: how long did each step take, end to end?
- :func:`steady_period`: the simulator's ``period_s`` (second half, drain left out);
- :func:`measured_period`: the period ``rlplex run`` reports for a recorded run;
- :func:`period_over_steps`: the period of chosen steps (``rlplex calibrate``'s fit and check);
- :func:`median_period`: the period drawn and compared for a record that states none;
- the plan's own ``period_s``: :meth:`rlplex.plan.ops.PlanSchedule.period`
  (sync: the makespan; async: the steady state of the repeating step);
- a replay's period: :func:`rlplex.sim.replay.cyclic_period` (recorded steps
  repeated end to end, each counted once).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from rlplex.timeline.record import Timeline


def step_ends(timeline: Timeline) -> dict[int, float]:
    """When did each step finish? The end of its last op, by step (steps with ops only)."""
    ends = {}
    for step in timeline.steps:
        events = timeline.step_events(step)
        if events:
            ends[step] = max(e.end_s for e in events)
    return ends


def step_gaps(ends: Sequence[float], start: float = 0.0) -> list[float]:
    """How long did each step take? The time between consecutive step ends, the first
    from ``start``; a step never counts as ending before the one before it."""
    out, prev = [], start
    for end in ends:
        end = max(end, prev)
        out.append(end - prev)
        prev = end
    return out


def steady_period(times: Sequence[float], drain: int = 0) -> float:
    """What is a step's time once the run is steady? The mean step time over the second
    half of a run, without its last ``drain`` steps.

    This is the simulator's ``period_s`` (``drain``: the steps that drain an
    async pipeline, :func:`rlplex.sim.simulate.drain_steps`). A run whose second half
    is all drain takes the second half of the steps before the drain (6 steps at k = 2:
    steps 1 and 2, where its second half, steps 3-5, ends in the short drain step); a run
    with no step before the drain keeps them.
    """
    start, end = len(times) // 2, len(times) - drain
    if end > start:
        tail = list(times[start:end])
    elif end > 0:
        tail = list(times[end // 2 : end])
    else:
        tail = list(times[start:]) or [0.0]
    return sum(tail) / len(tail)


def measured_period(timeline: Timeline) -> float:
    """How long did a step of this recorded run take once it was steady (``rlplex run``)?

    :func:`steady_period` of the record's step gaps, the first step timed from
    the run's first op: the simulator's definition applied to a measurement,
    so that predicted and measured periods compare like with like. A single
    step: its span.
    """
    ends = step_ends(timeline)
    if not ends:
        return 0.0
    start = min(e.start_s for e in timeline.events)
    return steady_period(step_gaps([ends[s] for s in sorted(ends)], start))


def period_over_steps(ends: Mapping[int, float], steps: Iterable[int]) -> float | None:
    """How long did these steps take? The mean of ``end(s) - end(s - 1)`` over ``steps``
    whose step before was recorded (None when none was): ``rlplex calibrate`` fits on
    some steps of a record and checks on the others."""
    gaps = [ends[s] - ends[s - 1] for s in steps if s in ends and s - 1 in ends]
    return statistics.fmean(gaps) if gaps else None


def median_period(timeline: Timeline) -> float:
    """Which period to draw and compare for a record that states none? The median time
    between consecutive step ends (one slow step does not move it); a single step: its span."""
    ends = step_ends(timeline)
    if not ends:
        return 0.0
    if len(ends) == 1:
        (step,) = ends
        start, end = timeline.step_span(step)
        return end - start
    ordered = [ends[s] for s in sorted(ends)]
    diffs = sorted(b - a for a, b in pairwise(ordered))
    return diffs[len(diffs) // 2]
