"""What the scheduler produces: internal ops and the schedule with its steady state.

:class:`SOp` is the internal form of a plan op (devices as device classes,
dependencies as indices); :class:`PlanSchedule` holds one scheduling run's ops
and residencies, and knows its makespan, its period and (async) which
unrolled step repeats in the steady state (see :mod:`rlplex.plan.steady`).
:func:`rlplex.plan.placed.to_plan` turns it into a :class:`~rlplex.plan.model.Plan`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlplex.plan.ids import TRANSFER_KINDS, OpWork
from rlplex.plan.layout import Layout
from rlplex.plan.problem import Pair
from rlplex.plan.steady import pick_pattern


@dataclass(slots=True)
class SOp:
    """One scheduled op (internal form of :class:`rlplex.plan.model.Op`).

    What it does is its :class:`~rlplex.plan.ids.OpWork` (shared by every op of
    one stage, or of one transfer of one state); the scheduler places on device
    classes, so the work's ``devices`` stay empty until :func:`to_plan` maps
    ``classes`` to GPU ranks.
    """

    work: OpWork
    """What the op does (``devices`` empty: see ``classes``)."""
    step: int
    """Step the op belongs to (transfers: the step of the task they serve)."""
    name: str
    """Id without the ``s{step}/`` prefix: ``train`` or ``offload/actor_train/optimizer``."""
    classes: tuple[int, ...]
    """GPU device classes occupied."""
    start: float
    """Start, seconds."""
    end: float
    """End, seconds."""
    deps: list[int]
    """Indices of the ops waited for."""


@dataclass
class PlanSchedule:
    """Result of one scheduling run."""

    layout: Layout
    """The placement's device classes the ops' ``classes`` index."""
    ops: list[SOp]
    """Every op scheduled (runs, weight syncs, offloads, reloads), in the order placed; their
    ``deps`` index this list."""
    initial: dict[Pair, bool]
    """Residency at the start."""
    final: dict[Pair, bool]
    """Residency at the end."""
    initial_dirty: dict[Pair, bool]
    """Whether each (role, state) is dirty at the start (changed on the device since its
    host copy was made, so that an offload must copy it)."""
    final_dirty: dict[Pair, bool]
    """Whether each (role, state) is dirty at the end; a sync steady state starts as it ends."""
    steps: int
    """Steps unrolled: several in async mode with ``max_staleness`` >= 1, else 1 (sync, or an
    async plan in which no step repeats, planned one step at a time)."""
    staleness: int
    """k of the cross-step edges (the pipeline's ``max_staleness`` in async mode, 0 in sync)."""
    pattern_step: int = 0
    """The step whose ops repeat in the steady state (async: see :mod:`rlplex.plan.steady`)."""
    steady_period: float | None = None
    """Async: the exact period of repeating ``pattern_step``; None when no step repeats."""

    @property
    def makespan(self) -> float:
        if not self.ops:
            return 0.0
        return max(o.end for o in self.ops) - min(o.start for o in self.ops)

    def step_ends(self) -> list[float]:
        ends = [0.0] * self.steps
        for op in self.ops:
            if op.end > ends[op.step]:
                ends[op.step] = op.end
        return ends

    def period(self) -> float:
        """Sync: the makespan. Async: the steady-state period of the repeating step.

        When no unrolled step repeats (the planner then plans the config one step
        at a time instead), the makespan per step: a proven upper bound on the
        steady state and never below the lower bound.
        """
        if self.steps == 1:
            return self.makespan
        if self.steady_period is not None:
            return self.steady_period
        return self.makespan / self.steps

    def window(self) -> tuple[int, int]:
        """Steps (last, first) in the steady state: the last k+1 steps lack the competition
        of later generations, the first ones that of earlier training."""
        last = max(1, self.steps - 2 - self.staleness)
        first = max(0, min(last - 1, self.staleness + 1, last - 2))
        return last, first

    def signatures(self) -> list[dict]:
        """Per step: each op's name with its dependencies as (step offset, op name)."""
        out: list[dict] = [{} for _ in range(self.steps)]
        ops = self.ops
        for op in ops:
            out[op.step][op.name] = frozenset((ops[d].step - op.step, ops[d].name) for d in op.deps)
        return out

    def lanes(self) -> list[list[tuple[int, str]]]:
        """Each lane's ops as (step, name) in the order it runs them (creation order).

        Lanes: the compute lane of each device class, one per CPU role, and the
        copy engine of each device class.
        """
        lanes: dict[tuple[str, object], list[tuple[int, str]]] = {}
        for op in self.ops:
            entry = (op.step, op.name)
            if op.work.kind in TRANSFER_KINDS:
                keys = [("copy", c) for c in op.classes]
            elif op.classes:
                keys = [("gpu", c) for c in op.classes]
            else:
                keys = [("cpu", op.work.role)]
            for key in keys:
                lanes.setdefault(key, []).append(entry)
        return list(lanes.values())

    def with_steady_state(self) -> PlanSchedule:
        """This schedule with its pattern step and exact period (async; sync is unchanged)."""
        if self.steps <= 2:
            return self
        durations: list[dict] = [{} for _ in range(self.steps)]
        for op in self.ops:
            durations[op.step][op.name] = op.end - op.start
        found = pick_pattern(
            self.signatures(), durations, self.lanes(), prefer=self.window()[0] - 1
        )
        if found is None:
            return self
        self.pattern_step, self.steady_period = found
        return self
