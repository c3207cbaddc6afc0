"""Plain-data summaries of a plan, for ``rlplex plan`` and the benchmark.

Counting transfers and their seconds, the gap to the bound and the speed-up
over the ``sequential`` baseline is done here once, as pure functions of a
plan, so the CLI only formats and the tests check numbers, not text.
:func:`plan_report` is the whole of ``rlplex plan`` as one result object: the
table, the JSON and the pictures all render it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlplex.config import Config
from rlplex.plan.costs import is_gpu_role, reference_devices
from rlplex.plan.model import Plan
from rlplex.plan.peaks import DeviceMemory, peak_memory_by_device
from rlplex.plan.placement import ScoredPlacement, resolve_placement
from rlplex.plan.planner import make_plan, plan_for_placement
from rlplex.plan.search import SearchProgress
from rlplex.plan.verify import verify_plan
from rlplex.timeline.record import Timeline, timeline_from_plan


@dataclass(frozen=True)
class PlanSummary:
    """The figures ``rlplex plan`` prints."""

    period_s: float
    """Steady-state step time."""
    makespan_s: float
    """First op start to last op end."""
    lower_bound_s: float
    """Proven lower bound for the placement."""
    gap: float
    """period / bound - 1."""
    offloads: int
    """Offload ops per step."""
    offload_s: float
    """Seconds of offload per step (sum of op durations)."""
    reloads: int
    """Reload ops per step."""
    reload_s: float
    """Seconds of reload per step."""
    sequential_s: float | None
    """Period of the ``sequential`` baseline, when computed."""

    @property
    def speedup(self) -> float | None:
        if not self.sequential_s or not self.period_s:
            return None
        return self.sequential_s / self.period_s


def summarize(plan: Plan, sequential_s: float | None = None) -> PlanSummary:
    """Figures of ``plan``; transfer counts are per step (async: of the pattern step)."""
    step = plan.pattern_step if plan.unrolled_steps > 1 and plan.mode == "async" else None
    counts = {"offload": [0, 0.0], "reload": [0, 0.0]}
    for op in plan.ops:
        if op.kind in counts and (step is None or op.step == step):
            counts[op.kind][0] += 1
            counts[op.kind][1] += op.end_s - op.start_s
    repeat = plan.unrolled_steps if plan.mode == "sync" and plan.unrolled_steps > 1 else 1
    return PlanSummary(
        period_s=plan.period_s,
        makespan_s=plan.makespan_s,
        lower_bound_s=plan.lower_bound_s,
        gap=plan.gap,
        offloads=int(counts["offload"][0]) // repeat,
        offload_s=float(counts["offload"][1]) / repeat,
        reloads=int(counts["reload"][0]) // repeat,
        reload_s=float(counts["reload"][1]) / repeat,
        sequential_s=sequential_s,
    )


def placed_config(config: Config, plan: Plan) -> Config:
    """``config`` with every GPU role on the plan's devices (auto roles resolved).

    Each GPU stage keeps the device count its ``seconds`` were measured on
    (``at_devices`` is pinned before the roles move), so planning the placed
    config prices stages exactly as the plan did.
    """
    stages = tuple(
        stage.model_copy(update={"at_devices": reference_devices(config, stage)})
        if not stage.is_weight_sync and is_gpu_role(config, stage.role or "")
        else stage
        for stage in config.pipeline.stages
    )
    roles = {
        name: role.with_devices(tuple(plan.placement[name])) if name in plan.placement else role
        for name, role in config.roles.items()
    }
    pipeline = config.pipeline.model_copy(update={"stages": stages})
    return config.model_copy(update={"roles": roles, "pipeline": pipeline})


@dataclass(frozen=True)
class PlanReport:
    """Everything ``rlplex plan`` shows, computed once."""

    config: Config
    """The config as planned: every GPU role on the plan's devices."""
    plan: Plan
    """The plan (the planner's, or the baseline asked for)."""
    summary: PlanSummary
    """Its figures, with the sequential baseline's period."""
    candidates: tuple[ScoredPlacement, ...] = ()
    """The placements the search scored, best first (empty without a search)."""
    notes: tuple[str, ...] = ()
    """What the placement search decided that the user should know (the staleness it picked)."""
    verified: bool = False
    """Whether every validity rule was checked (and held)."""
    memory: dict[int, DeviceMemory] = field(default_factory=dict)
    """Each GPU's peak memory over the step: when, what is resident, the headroom."""

    def timeline(self) -> Timeline:
        """The plan's ops as a Timeline, for the pictures."""
        return timeline_from_plan(self.plan)


def plan_report(
    config: Config,
    *,
    auto: bool = False,
    baseline: str | None = None,
    verify: bool = False,
    progress: SearchProgress | None = None,
) -> PlanReport:
    """Plan ``config`` (searching the placement of every GPU role with ``auto``).

    Raises:
        InfeasibleError: no placement can run the pipeline.
        PlanVerificationError: ``verify`` and a validity rule is broken.
    """
    resolved = resolve_placement(config, auto=auto, progress=progress)
    config = resolved.config
    plan = plan_for_placement(config, resolved.placement, baseline=baseline)
    candidates = list(resolved.candidates)
    if verify:
        verify_plan(plan, config)
    placed = placed_config(config, plan)
    sequential = plan if baseline == "sequential" else make_plan(placed, baseline="sequential")
    return PlanReport(
        memory=peak_memory_by_device(plan),
        config=placed,
        plan=plan,
        summary=summarize(plan, sequential.period_s),
        candidates=tuple(candidates),
        verified=verify,
        notes=resolved.notes,
    )
