"""Unroll a Plan into the ops of an N-step run, with every ordering made explicit.

A plan holds one step (sync) or a few unrolled steps (async), each op with its
devices, planned times and dependencies. A run needs N steps, and the
dispatcher needs each op's *complete* set of predecessors, so this module
unrolls the plan's :class:`~rlplex.plan.pattern.StepPattern` (the one the
simulator replays, so a run's per-device order is the simulator's) into a
list of :class:`ExecOp` whose ``deps`` say everything:

- **Repetition.** Every step repeats the ops of the plan's steady-state step
  (``plan.pattern_step``, as the simulator does), shifted by whole periods; a
  dependency on an earlier step keeps its distance in steps
  (``s{t-1}/weight_sync`` stays one step back) and is dropped before step 0.
- **Sync barrier.** In sync mode steps do not overlap: the first ops of step
  ``t`` wait for the last ops of step ``t - 1``.
- **Bounded staleness.** With ``staleness = k``, an op of the weight-sync
  destination role (generation) of step ``t`` waits for the weight sync of step
  ``t - k - 1``, whether or not the planner wrote that edge.
- **Device order.** Each device has a compute lane (``run``, ``weight_sync``)
  and a transfer lane (``offload``, ``reload``, the copy engine). Ops on a lane
  run in the pattern's order (the simulator's): each waits for its predecessor
  on every lane it uses. The dispatch order is a topological order of the
  dependencies that takes the earliest planned start first, so ties
  (zero-length ops) and a pattern that is not exactly periodic never deadlock.

Pure Python, no Ray: tested on its own.
"""

from __future__ import annotations

import graphlib
import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from rlplex.plan.ids import COMPUTE_KINDS, OpId, format_id
from rlplex.plan.model import Plan
from rlplex.plan.pattern import StepPatternError, is_dead_offload, lane_of, step_pattern
from rlplex.runtime.errors import PlanScheduleError

__all__ = ["ExecOp", "RunSchedule", "expand_plan", "is_dead_offload", "split_id"]


@dataclass(frozen=True, slots=True)
class ExecOp:
    """One op of the run: a plan op placed at a concrete step."""

    id: str
    """``s{step}/...`` as in the plan, renumbered to the run's step."""
    kind: str
    """``run``, ``offload``, ``reload`` or ``weight_sync``."""
    step: int
    """The run step."""
    devices: tuple[int, ...]
    """Global GPU ranks the op occupies."""
    deps: tuple[str, ...]
    """Every op this one waits for: the plan's, barrier, staleness and lane edges."""
    planned_start_s: float
    """Planned start, seconds from the start of the run (periods added)."""
    planned_end_s: float
    """Planned end."""
    template: str
    """The plan op this one repeats."""
    stage: str | None = None
    """The stage, for run and weight_sync ops."""
    role: str | None = None
    """The role (weight_sync: the destination)."""
    state: str | None = None
    """The state moved by a transfer."""
    from_role: str | None = None
    """weight_sync: the source role."""
    gb: float = 0.0
    """Planned GB per device moved."""
    memory_gb: float = 0.0
    """Planned transient GB per device of a run op."""
    dead: bool = False
    """An offload of a dead state: dropped, not copied (vLLM sleep level 2)."""
    plan_deps: tuple[str, ...] = ()
    """The dependencies written in the plan (renumbered), a subset of ``deps``."""
    overhead_s: float = 0.0
    """Seconds of ``planned_s`` that are the executor's per-op overhead, not work
    (the plan's ``dispatch_s``, for run and weight_sync ops)."""

    @property
    def planned_s(self) -> float:
        return self.planned_end_s - self.planned_start_s

    @property
    def work_s(self) -> float:
        """The planned seconds of the stage's own work: what a rehearsal sleeps (scaled)."""
        return max(0.0, self.planned_s - self.overhead_s)

    @property
    def lane(self) -> str:
        """``compute`` or ``transfer``."""
        return lane_of(self.kind)


@dataclass(frozen=True)
class RunSchedule:
    """The ops of an N-step run in dispatch order, with per-lane planned orders."""

    ops: tuple[ExecOp, ...]
    """Every op, by planned start (the dispatcher's priority order)."""
    steps: int
    """Number of steps."""
    lanes: dict[tuple[int, str], tuple[str, ...]] = field(default_factory=dict)
    """``(device, lane) -> op ids`` in the order they must run."""
    dropped: tuple[str, ...] = ()
    """Plan edges to later steps dropped because the repeated pattern was cyclic."""

    def by_id(self) -> dict[str, ExecOp]:
        return {op.id: op for op in self.ops}

    def step_ops(self, step: int) -> tuple[ExecOp, ...]:
        return tuple(op for op in self.ops if op.step == step)


def split_id(op_id: str, step: int) -> tuple[int, str]:
    """``("s3/train", _) -> (3, "train")``; ids without the prefix keep ``step``."""
    parsed = OpId.parse(op_id, step)
    return parsed.step, parsed.name


def expand_plan(plan: Plan, steps: int, *, staleness: int | None = None) -> RunSchedule:
    """The ops of a ``steps``-step run following ``plan``.

    Args:
        plan: the plan (one step, or several unrolled steps for async, of which
            ``plan.pattern_step`` repeats).
        steps: how many steps to run (>= 1).
        staleness: ``k`` of bounded staleness; ``None`` adds no staleness edges
            beyond the plan's (sync runs get the barrier instead).

    Raises:
        PlanScheduleError: the plan has no ops, an op depends on an unknown op,
            or the edges form a cycle (the message lists it).
    """
    if steps < 1:
        raise PlanScheduleError(f"steps must be >= 1 (got {steps})")
    if not plan.ops:
        raise PlanScheduleError("the plan has no ops")
    try:
        pattern = step_pattern(plan, staleness=staleness)
    except StepPatternError as exc:
        raise PlanScheduleError(str(exc), op=exc.op) from None
    period = pattern.period_s
    index = {op.id: i for i, op in enumerate(plan.ops)}
    ops: list[ExecOp] = []
    for t in range(steps):
        for j, op in enumerate(pattern.ops):
            pdeps = tuple(
                format_id(s, pattern.ops[k].name) for s, k in pattern.plan_deps_at(t, j, steps)
            )
            deps = tuple(format_id(s, pattern.ops[k].name) for s, k in pattern.deps_at(t, j, steps))
            ops.append(
                ExecOp(
                    id=format_id(t, op.name),
                    kind=op.kind,
                    step=t,
                    devices=op.devices,
                    deps=deps,
                    plan_deps=pdeps,
                    planned_start_s=op.start_s + t * period,
                    planned_end_s=op.end_s + t * period,
                    template=op.template,
                    stage=op.stage,
                    role=op.role,
                    state=op.state,
                    from_role=op.from_role,
                    gb=op.gb,
                    memory_gb=op.memory_gb,
                    dead=op.dead,
                    overhead_s=plan.dispatch_s if op.kind in COMPUTE_KINDS else 0.0,
                )
            )
    dropped: tuple[str, ...] = ()
    try:
        ops = _planned_order(ops, index)
    except PlanScheduleError:
        # A repeated pattern can be cyclic when the planner's steady-state step is
        # not exactly periodic (an op waiting for a *later* step that waits for
        # it). Edges to later steps are then dropped; device lanes still order
        # those ops, by planned start.
        forward = {(op.id, d) for op in ops for d in op.deps if split_id(d, op.step)[0] > op.step}
        if not forward:
            raise
        dropped = tuple(sorted(f"{a} -> {b}" for a, b in forward))
        ops = [
            replace(
                op,
                deps=tuple(d for d in op.deps if (op.id, d) not in forward),
                plan_deps=tuple(d for d in op.plan_deps if (op.id, d) not in forward),
            )
            for op in ops
        ]
        ops = _planned_order(ops, index)
    # The pattern's device-order edges make each lane one chain; the lanes are read
    # off the dispatch order (which respects them), and any op a dropped edge left
    # unordered still waits for its predecessor on the lane.
    lanes: dict[tuple[int, str], list[str]] = defaultdict(list)
    lane_deps: dict[str, set[str]] = defaultdict(set)
    for op in ops:
        for device in op.devices:
            lane = lanes[(device, op.lane)]
            if lane:
                lane_deps[op.id].add(lane[-1])
            lane.append(op.id)
    ops = [_with_deps(op, lane_deps.get(op.id, ())) for op in ops]
    return RunSchedule(
        ops=tuple(ops),
        steps=steps,
        lanes={key: tuple(v) for key, v in lanes.items()},
        dropped=dropped,
    )


def _with_deps(op: ExecOp, more: Iterable[str]) -> ExecOp:
    new = [d for d in more if d not in op.deps and d != op.id]
    if not new:
        return op
    return replace(op, deps=(*op.deps, *sorted(new)))


def _planned_order(ops: Sequence[ExecOp], index: Mapping[str, int]) -> list[ExecOp]:
    """A topological order of ``ops`` that takes the earliest planned start whenever it can.

    For a consistent plan (every op starts after its dependencies end) this is
    the planned-start order; for a plan whose repeated step is not exactly
    periodic it still respects every dependency, so the lane edges derived
    from it never close a cycle.

    Raises:
        PlanScheduleError: an unknown dependency, or a cycle (listed).
    """
    by_id = {op.id: op for op in ops}
    waiting: dict[str, int] = {}
    users: dict[str, list[str]] = defaultdict(list)
    for op in ops:
        for dep in op.deps:
            if dep not in by_id:
                raise PlanScheduleError(
                    f"op {op.id!r} depends on {dep!r}, which is not in the run", op=op.id
                )
            users[dep].append(op.id)
        waiting[op.id] = len(op.deps)

    def key(op: ExecOp) -> tuple[float, int, int, str]:
        return (op.planned_start_s, op.step, index[op.template], op.id)

    ready = [key(op) for op in ops if waiting[op.id] == 0]
    heapq.heapify(ready)
    order: list[ExecOp] = []
    while ready:
        op = by_id[heapq.heappop(ready)[3]]
        order.append(op)
        for user in users[op.id]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, key(by_id[user]))
    if len(order) < len(ops):
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter(
            {op.id: op.deps for op in ops}
        )
        try:
            sorter.prepare()
        except graphlib.CycleError as exc:
            cycle = " -> ".join(exc.args[1])
            raise PlanScheduleError(f"the plan's ops form a cycle: {cycle}") from None
    return order
