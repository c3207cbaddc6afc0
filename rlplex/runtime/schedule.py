"""Unroll a Plan into the ops of an N-step run, with every ordering made explicit.

A plan holds one step (sync) or a few unrolled steps (async), each op with its
devices, planned times and dependencies. A run needs N steps, and the
dispatcher needs each op's *complete* set of predecessors, so this module
unrolls the plan's :class:`~rlplex.plan.pattern.StepPattern` with
:meth:`~rlplex.plan.pattern.StepPattern.unroll` (the one unrolling, which the
simulator computes too, so a run's per-device order is the simulator's) into
a list of :class:`ExecOp` whose ``deps`` say everything. Each op holds its
pattern op's :class:`~rlplex.plan.ids.OpWork`; an edge is a (step, pattern
index) pair (:data:`OpKey`) all the way to the dispatcher, and an id string is
formatted only where a record or a message is written (:attr:`ExecOp.id`,
:meth:`RunSchedule.op_id`). A pattern whose device order does not repeat is
refused (:meth:`~rlplex.plan.pattern.StepPattern.check_repeats`), as the
simulator refuses it.

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
  (zero-length ops) never deadlock.

Pure Python, no Ray: tested on its own.
"""

from __future__ import annotations

import graphlib
import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from rlplex.plan.costs import split_op_seconds
from rlplex.plan.ids import DeviceLane, OpWork, format_id
from rlplex.plan.model import Plan
from rlplex.plan.pattern import StepPatternError, is_dead_offload, step_pattern
from rlplex.runtime.errors import PlanScheduleError

__all__ = ["ExecOp", "OpKey", "RunSchedule", "expand_plan", "is_dead_offload"]


OpKey = tuple[int, int]
"""(run step, op index in the step pattern): an op of the run, and what an edge points to."""


@dataclass(frozen=True, slots=True)
class ExecOp:
    """One op of the run: a pattern op placed at a concrete step."""

    step: int
    """The run step."""
    index: int
    """The op's index in the step pattern (:attr:`rlplex.plan.pattern.StepPattern.ops`)."""
    name: str
    """The id without the ``s{step}/`` prefix."""
    template: str
    """The plan op this one repeats."""
    work: OpWork
    """What the op does (kind, devices, stage, role, state, bytes, memory)."""
    deps: tuple[OpKey, ...]
    """Every op this one waits for: the plan's, barrier, staleness and lane edges."""
    planned_start_s: float
    """Planned start, seconds from the start of the run (periods added)."""
    planned_end_s: float
    """Planned end."""
    work_s: float
    """The planned seconds of the stage's own work: what a rehearsal sleeps (scaled)."""
    overhead_s: float = 0.0
    """Planned seconds of the executor's per-op overhead, not work (the plan's
    ``dispatch_s``, for run and weight_sync ops)."""
    plan_deps: tuple[OpKey, ...] = ()
    """The dependencies written in the plan, a subset of ``deps``."""

    @property
    def key(self) -> OpKey:
        """(step, pattern index): how edges name this op."""
        return (self.step, self.index)

    @property
    def id(self) -> str:
        """``s{step}/{name}``: the op id a record or a message writes."""
        return format_id(self.step, self.name)

    @property
    def planned_s(self) -> float:
        return self.planned_end_s - self.planned_start_s

    @property
    def lane(self) -> DeviceLane:
        """``compute`` or ``transfer``."""
        return self.work.lane


@dataclass(frozen=True)
class RunSchedule:
    """The ops of an N-step run in dispatch order, with per-lane planned orders."""

    ops: tuple[ExecOp, ...]
    """Every op, by planned start (the dispatcher's priority order)."""
    steps: int
    """Number of steps."""
    names: tuple[str, ...] = ()
    """Name of each pattern op (what an :data:`OpKey`'s index points to)."""
    lanes: dict[tuple[int, DeviceLane], tuple[OpKey, ...]] = field(default_factory=dict)
    """``(device, lane) -> ops`` in the order they must run."""

    def op_id(self, key: OpKey) -> str:
        """The written id of the op ``key`` names."""
        return format_id(key[0], self.names[key[1]])

    def dep_ids(self, op: ExecOp) -> tuple[str, ...]:
        """``op``'s dependencies as written ids (for messages and records)."""
        return tuple(self.op_id(k) for k in op.deps)

    def lane_ids(self) -> dict[tuple[int, DeviceLane], tuple[str, ...]]:
        """:attr:`lanes` as written ids."""
        return {lane: tuple(self.op_id(k) for k in keys) for lane, keys in self.lanes.items()}

    def by_id(self) -> dict[str, ExecOp]:
        return {op.id: op for op in self.ops}

    def by_key(self) -> dict[OpKey, ExecOp]:
        return {op.key: op for op in self.ops}

    def step_ops(self, step: int) -> tuple[ExecOp, ...]:
        return tuple(op for op in self.ops if op.step == step)


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
            the edges form a cycle (the message lists it), or the pattern step's
            device order does not repeat (naming the GPU lane and its ops).
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
    try:
        unrolled = list(pattern.unroll(steps))
    except StepPatternError as exc:
        raise PlanScheduleError(str(exc), op=exc.op) from None
    for t, j, deps in unrolled:
        op = pattern.ops[j]
        work_s, overhead = split_op_seconds(op.duration_s, op.work.kind, plan.dispatch_s)
        ops.append(
            ExecOp(
                step=t,
                index=j,
                name=op.name,
                template=op.template,
                work=op.work,
                deps=tuple(deps),
                plan_deps=tuple(pattern.plan_deps_at(t, j, steps)),
                planned_start_s=op.start_s + t * period,
                planned_end_s=op.end_s + t * period,
                work_s=work_s,
                overhead_s=overhead,
            )
        )
    names = tuple(op.name for op in pattern.ops)
    ops = _planned_order(ops, index, names)
    # The pattern's device-order edges make each lane one chain; the lanes are read
    # off the dispatch order (which respects them).
    lanes: dict[tuple[int, DeviceLane], list[OpKey]] = defaultdict(list)
    lane_deps: dict[OpKey, set[OpKey]] = defaultdict(set)
    for op in ops:
        for device in op.work.devices:
            lane = lanes[(device, op.lane)]
            if lane:
                lane_deps[op.key].add(lane[-1])
            lane.append(op.key)
    ops = [_with_deps(op, lane_deps.get(op.key, ())) for op in ops]
    return RunSchedule(
        ops=tuple(ops),
        steps=steps,
        names=names,
        lanes={key: tuple(v) for key, v in lanes.items()},
    )


def _with_deps(op: ExecOp, more: Iterable[OpKey]) -> ExecOp:
    new = [d for d in more if d not in op.deps and d != op.key]
    if not new:
        return op
    return replace(op, deps=(*op.deps, *sorted(new)))


def _planned_order(
    ops: Sequence[ExecOp], index: Mapping[str, int], names: Sequence[str]
) -> list[ExecOp]:
    """A topological order of ``ops`` that takes the earliest planned start whenever it can.

    For a consistent plan (every op starts after its dependencies end) this is
    the planned-start order; for a plan whose repeated step is not exactly
    periodic it still respects every dependency, so the lane edges derived
    from it never close a cycle.

    Raises:
        PlanScheduleError: an unknown dependency, or a cycle (listed).
    """
    by_key = {op.key: op for op in ops}
    waiting: dict[OpKey, int] = {}
    users: dict[OpKey, list[OpKey]] = defaultdict(list)
    for op in ops:
        for dep in op.deps:
            if dep not in by_key:
                dep_id = format_id(dep[0], names[dep[1]])
                raise PlanScheduleError(
                    f"op {op.id!r} depends on {dep_id!r}, which is not in the run", op=op.id
                )
            users[dep].append(op.key)
        waiting[op.key] = len(op.deps)

    def key(op: ExecOp) -> tuple[float, int, int, int]:
        return (op.planned_start_s, op.step, index[op.template], op.index)

    ready = [(key(op), op.key) for op in ops if waiting[op.key] == 0]
    heapq.heapify(ready)
    order: list[ExecOp] = []
    while ready:
        op = by_key[heapq.heappop(ready)[1]]
        order.append(op)
        for user in users[op.key]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (key(by_key[user]), user))
    if len(order) < len(ops):
        sorter: graphlib.TopologicalSorter[OpKey] = graphlib.TopologicalSorter(
            {op.key: op.deps for op in ops}
        )
        try:
            sorter.prepare()
        except graphlib.CycleError as exc:
            cycle = " -> ".join(format_id(s, names[k]) for s, k in exc.args[1])
            raise PlanScheduleError(f"the plan's ops form a cycle: {cycle}") from None
    return order
