"""Compare a run with its plan: per-stage durations, to replay it.

:func:`stage_durations` extracts what each stage and transfer took, step by
step, to replay the plan with measured durations
(``rlplex.sim.simulate(plan, config, steps=N, durations=...)``). The measured
period is :func:`rlplex.timeline.periods.measured_period`.
"""

from __future__ import annotations

from collections import defaultdict

from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, op_name
from rlplex.timeline.record import Timeline


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
