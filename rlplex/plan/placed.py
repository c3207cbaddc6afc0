"""The plan of a config on an explicit placement: schedule, host memory, the plan JSON.

:func:`plan_for_placement` is what ``rlplex plan`` gives a placement, and what the
placement search scores its kept candidates with (:mod:`rlplex.plan.placement`), so
that a period the search reports is the one the plan of that placement has: host
memory included. It lives apart from :mod:`rlplex.plan.planner`, which resolves the
placement first and so imports the search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from rlplex.config import Config
from rlplex.errors import InfeasibleError
from rlplex.plan.bound import lower_bound
from rlplex.plan.host import HostPeak, host_peaks
from rlplex.plan.ids import OpWork, format_id
from rlplex.plan.model import Op, Plan
from rlplex.plan.ops import PlanSchedule, SOp
from rlplex.plan.policy import plan_options
from rlplex.plan.problem import Options
from rlplex.plan.schedule import schedule
from rlplex.resources.cluster import COPIED_STATES


def plan_for_placement(
    config: Config,
    placement: Mapping[str, Sequence[int]],
    *,
    baseline: str | None = None,
    steps: int | None = None,
) -> Plan:
    """The plan of ``config`` on an explicit placement (role -> devices).

    A plan whose host copies overflow a node's ``host_memory_gb`` is made again
    keeping fewer host copies (each copied state's host copy released when it
    is reloaded); if that overflows too, the planner's plan is not made (a
    baseline's is returned as it is, its ``host_peaks`` showing the overflow).

    Raises:
        InfeasibleError: a stage does not fit a GPU, or a node's host memory
            overflows (naming the node, the peak and what its host holds).
    """
    options = plan_options(config, placement, baseline, steps)
    bound = lower_bound(config, placement).value
    plan, over = _plan_once(config, placement, options, bound, baseline)
    if over is None:
        return plan
    fewer = frozenset(
        (role, state)
        for role, states in plan.states.items()
        for state in states
        if state in COPIED_STATES
    )
    options = replace(options, drop_host=fewer)
    plan, over = _plan_once(config, placement, options, bound, baseline)
    if over is not None and baseline is None:
        raise InfeasibleError(over.describe())
    # A baseline is what a framework would do: its plan is shown, overflow included
    # (its host_peaks say so, and --verify names the node).
    return plan


def _plan_once(
    config: Config,
    placement: Mapping[str, Sequence[int]],
    options: Options,
    bound: float,
    baseline: str | None,
) -> tuple[Plan, HostPeak | None]:
    """One plan with its host peaks, and the node whose host memory overflows most (or None).

    An async schedule in which no unrolled step repeats (rare: a weight sync no
    staleness gate holds back, stages of no duration) cannot be run or
    simulated step after step; such a config is planned one step at a time
    instead (each step after the previous one: a valid, slower plan).
    """
    sched = schedule(config, placement, options)
    if sched.steps > 2 and sched.steady_period is None:
        options = replace(options, steps=1, cyclic=True)
        sched = schedule(config, placement, options)
    plan = to_plan(config, sched, bound, options, baseline)
    peaks = host_peaks(plan, config)
    plan = plan.model_copy(
        update={
            "host_memory_gb": config.cluster.host_memory_gb,
            "host_peaks": {n: round(p.peak_gb, 6) for n, p in sorted(peaks.items())},
        }
    )
    over = [p for p in peaks.values() if p.over]
    return plan, max(over, key=lambda p: (p.peak_gb, -p.node)) if over else None


def to_plan(
    config: Config,
    sched: PlanSchedule,
    lower_bound_s: float,
    options: Options,
    baseline: str | None = None,
) -> Plan:
    """Package an internal schedule as the plan JSON's model."""
    lay = sched.layout
    placed: dict[tuple[int, tuple[int, ...]], OpWork] = {}

    def work_on(op: SOp) -> OpWork:
        """``op``'s work with its device classes mapped to GPU ranks (once per distinct one)."""
        key = (id(op.work), op.classes)  # the works are shared and alive: ids are stable
        found = placed.get(key)
        if found is None:
            found = placed[key] = replace(op.work, devices=lay.devices_of(op.classes))
        return found

    period = sched.period()
    raw = sched.ops
    ids = [format_id(o.step, o.name) for o in raw]
    ops = [
        Op.placed(
            work_on(o),
            id=ids[i],
            step=o.step,
            start_s=o.start,
            end_s=o.end,
            deps=tuple(ids[d] for d in o.deps),
        )
        for i, o in enumerate(raw)
    ]
    ops.sort(key=lambda op: (op.start_s, op.id))
    residency = {
        role: [s for s in config.roles[role].states if sched.initial.get((role, s))]
        for role in lay.placement
    }
    return Plan(
        mode=config.pipeline.mode,
        makespan_s=sched.makespan,
        period_s=period,
        lower_bound_s=lower_bound_s,
        capacity_gb=config.cluster.gpu_memory_gb,
        placement={r: list(d) for r, d in lay.placement.items()},
        states={r: {s: float(v) for s, v in config.roles[r].states.items()} for r in lay.placement},
        initial_residency=residency,
        ops=ops,
        staleness=options.staleness,
        unrolled_steps=sched.steps,
        pattern_step=sched.pattern_step if sched.steps > 1 else 0,
        baseline=baseline,
        dispatch_s=config.cluster.dispatch_s,
    )
