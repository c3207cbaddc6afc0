"""Compare a run with its plan: measured period, per-stage durations, replay.

The simulator reports ``period_s`` as the mean time between the ends of
consecutive steps over the second half of a run; :func:`measured_period`
computes the same figure from a recorded Timeline, so predicted and measured
periods compare like with like. :func:`stage_durations` extracts what each
stage and transfer took, step by step, to replay the plan with measured durations
(``rlplex.sim.simulate(plan, config, steps=N, durations=...)``).
"""

from __future__ import annotations

from collections import defaultdict

from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, op_name
from rlplex.timeline.record import Timeline


def step_ends(timeline: Timeline) -> list[float]:
    """End of the last op of each step, in step order."""
    ends: dict[int, float] = defaultdict(float)
    for event in timeline.events:
        ends[event.step] = max(ends[event.step], event.end_s)
    return [ends[s] for s in sorted(ends)]


def measured_period(timeline: Timeline) -> float:
    """Mean time between consecutive step ends over the second half of the run."""
    ends = step_ends(timeline)
    if not ends:
        return 0.0
    steps = len(ends)
    half = steps // 2
    if half == 0:
        start = min(e.start_s for e in timeline.events)
        return ends[0] - start
    return (ends[-1] - ends[half - 1]) / (steps - half)


def stage_durations(timeline: Timeline) -> dict[int, dict[str, float]]:
    """``{step: {name: seconds}}`` as the simulator takes them.

    Names are the stages of run and weight_sync ops, and the op keys of
    offloads and reloads (``offload/actor_train/optimizer``): a transfer that
    moved nothing (a CPU run) must not be replayed at its modelled time.
    """
    out: dict[int, dict[str, float]] = defaultdict(dict)
    for event in timeline.events:
        if event.kind in COMPUTE_KINDS and event.stage:
            out[event.step][event.stage] = event.end_s - event.start_s
        elif event.kind in TRANSFER_KINDS:
            key = op_name(event.op)
            out[event.step][key] = event.end_s - event.start_s
    return dict(out)
