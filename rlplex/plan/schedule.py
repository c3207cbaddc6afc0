"""Scheduling one placement: the sync fixed point and the async steady state.

:func:`schedule` is what the planner and the placement search call. Sync
steps are made steady-state cyclic: a step starts with the residency it ends
with, found by scheduling again from the last run's final residency until it
repeats. Async steps are unrolled and, when the list schedule does not settle
into a repeating step, rescheduled in fixed orders
(:mod:`rlplex.plan.rescheduling`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlplex.config import Config
from rlplex.plan.fit import all_fit, check_fits
from rlplex.plan.ops import PlanSchedule
from rlplex.plan.problem import Options, Problem
from rlplex.plan.rescheduling import unrolled_schedule
from rlplex.plan.scheduler import Scheduler
from rlplex.resources.cluster import COPIED_STATES


def schedule(
    config: Config, placement: Mapping[str, Sequence[int]], options: Options
) -> PlanSchedule:
    """Schedule ``config`` on ``placement``; sync steps are made steady-state cyclic.

    Raises:
        InfeasibleError: a stage's states plus transient memory exceed a GPU.
    """
    problem = Problem(config, placement, options)
    check_fits(problem)
    everything = not options.start_empty and all_fit(problem)
    resident = {pair: everything for pair in problem.pairs}
    dirty = {pair: False for pair in problem.pairs}
    if not options.cyclic:
        return unrolled_schedule(problem, resident, dirty)
    for _ in range(8):
        result = Scheduler(problem, resident, dirty).run()
        if result.final == resident and result.final_dirty == dirty:
            return result
        resident, dirty = result.final, result.final_dirty
    # No fixed point: assume every resident copied state dirty (never under-costs),
    # and append the transfers that restore the starting residency.
    dirty = {pair: resident[pair] and pair[1] in COPIED_STATES for pair in problem.pairs}
    scheduler = Scheduler(problem, resident, dirty)
    scheduler.run()
    scheduler.restore(resident)
    return scheduler.result()
