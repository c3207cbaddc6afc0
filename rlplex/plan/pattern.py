"""The step pattern: one plan step that repeats, with every ordering made explicit.

A plan holds one step (sync) or a few unrolled steps (async) of which one,
``plan.pattern_step``, repeats in the steady state. Both the simulator
(:mod:`rlplex.sim.simulate`) and the executor's schedule
(:mod:`rlplex.runtime.schedule`) run N steps of that pattern; they take it
from here, made once, so that what runs is by construction what was
simulated. A :class:`StepPattern` lists the pattern's ops and, for each, every
op it waits for as an (step offset, op index) edge:

- the plan's own dependencies (a dependency on an earlier step keeps its
  distance in steps);
- **device order**: each device has a compute lane (``run``, ``weight_sync``)
  and a copy lane (``offload``, ``reload``); an op waits for the op before it
  on every lane it uses, in the plan's order (planned start, then dependency
  depth for ops at one instant, so the order never contradicts a dependency);
- **bounded staleness**: a run of the weight-sync destination role (generation)
  of step t waits for the weight syncs of step t - k - 1;
- **sync barrier**: in sync mode the ops that wait for nothing in their step
  wait for the last ops (sinks) of the previous step.

Unrolling (:meth:`StepPattern.unroll`, :meth:`StepPattern.deps_at`) keeps an
edge when the step it points to is inside the run; it is the only unrolling of
a plan into N steps. A pattern whose device order does not repeat is refused
by both the simulator and the executor (:meth:`StepPattern.check_repeats`).
Pure Python: no config, no durations beyond the plan's.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from rlplex.errors import RlplexError
from rlplex.plan.ids import DeviceLane, OpId, OpKind, OpWork, lane_of, op_name
from rlplex.plan.model import Op, Plan
from rlplex.plan.steady import lane_repeats

Edge = tuple[int, int]
"""(step offset, op index) of a dependency: op ``index`` of step ``n + offset``."""
LaneKey = tuple[int, DeviceLane]
"""(device, ``compute`` or ``transfer``)."""


class StepPatternError(RlplexError):
    """A plan cannot be made into a step pattern (unknown dependency, cycle, no pattern ops)."""

    def __init__(self, message: str, op: str | None = None) -> None:
        super().__init__(message)
        self.op = op


@dataclass(frozen=True, slots=True)
class PatternOp:
    """One op of the repeating step: what it does and where it sits in the pattern."""

    name: str
    """Its id without the ``s{step}/`` prefix."""
    template: str
    """The plan op it repeats."""
    work: OpWork
    """What it does."""
    start_s: float
    """Planned start, seconds from the pattern step's first start."""
    end_s: float
    """Planned end."""
    plan_deps: tuple[Edge, ...]
    """The dependencies the plan writes."""
    deps: tuple[Edge, ...]
    """Every dependency: the plan's, device order, staleness gate, sync barrier."""
    lane_preds: tuple[tuple[LaneKey, Edge], ...] = ()
    """The op just before this one on each of its device lanes."""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class StepPattern:
    """The repeating step of a plan, made once for the simulator and the executor."""

    ops: tuple[PatternOp, ...]
    """The pattern step's ops in plan order (planned start, then id)."""
    step: int
    """The plan's pattern step."""
    period_s: float
    """Planned time per step (the plan's period, else its makespan)."""
    barrier: bool
    """Sync: steps do not overlap (the barrier edges are in ``deps`` too)."""
    staleness: int | None
    """k of the staleness gates added (None: only the plan's edges)."""
    lanes: dict[LaneKey, tuple[Edge, ...]]
    """Each device lane's ops around the pattern step, in lane order, as (offset, index)."""
    irregular: str | None = None
    """Why repeating the step would not keep one chain of ops per device lane (the
    lane and its ops), or None when it repeats."""
    irregular_op: str | None = None
    """The first pattern op on the lane that does not repeat."""
    _within: dict[tuple[int, int, int], tuple[Edge, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )
    """Cache of :meth:`deps_within` for ops near either end of a run, by (op, back, room)."""
    op_reach: tuple[int, ...] = field(default=(), repr=False, compare=False)
    """Per op: the furthest step ahead it waits for (0: none); derived from ``ops``."""
    op_back: tuple[int, ...] = field(default=(), repr=False, compare=False)
    """Per op: the furthest step back it waits for (0: none); derived from ``ops``."""

    def __post_init__(self) -> None:
        reach = tuple(max((off for off, _ in op.deps), default=0) for op in self.ops)
        object.__setattr__(self, "op_reach", reach)
        back = tuple(max((-off for off, _ in op.deps), default=0) for op in self.ops)
        object.__setattr__(self, "op_back", back)

    @property
    def repeats(self) -> bool:
        """Whether repeating the step keeps one chain of ops per device lane."""
        return self.irregular is None

    @property
    def reach(self) -> int:
        """The furthest step ahead any op waits for (0 when none looks ahead)."""
        return max(self.op_reach, default=0)

    def check_repeats(self) -> None:
        """The one policy for a pattern whose device order does not repeat: refuse it.

        Repeating such a step would run two ops at once on a GPU (the simulator
        would overlap them, the executor would order them by a guess), so both
        refuse it before running anything.

        Raises:
            StepPatternError: naming the device lane and its ops.
        """
        if self.irregular is not None:
            raise StepPatternError(
                f"step {self.step} of the plan does not repeat: {self.irregular}, so"
                " repeating it would run two ops at once on a GPU (make the plan again"
                " with `rlplex plan`, or point its pattern_step at a step that repeats)",
                op=self.irregular_op,
            )

    def unroll(self, steps: int) -> Iterator[tuple[int, int, list[tuple[int, int]]]]:
        """The ops of a ``steps``-step run, step by step: (step, op index, its (step, index) deps).

        The one unrolling of the pattern (the executor's schedule builds its ops
        from it; the simulator computes the same :meth:`deps_at` in the order its
        rounds need). Refuses a pattern that does not repeat (:meth:`check_repeats`).
        """
        self.check_repeats()
        for step in range(steps):
            for j in range(len(self.ops)):
                yield step, j, self.deps_at(step, j, steps)

    def op_id(self, step: int, j: int) -> OpId:
        """The id of op ``j`` at run step ``step``."""
        return OpId(step, self.ops[j].name)

    def deps_at(self, step: int, j: int, steps: int) -> list[tuple[int, int]]:
        """Op ``j`` of run step ``step``: the (step, op index) it waits for within ``steps``.

        Near either end of a run, see :meth:`deps_within`.
        """
        deps = self.deps_within(j, step, steps - 1 - step)
        return [(step + off, k) for off, k in deps if 0 <= step + off < steps]

    def deps_within(self, j: int, back: int, room: int) -> tuple[Edge, ...]:
        """Op ``j``'s edges when ``back`` steps precede its step in the run and ``room`` follow.

        A device-order edge to an op of a step outside the run (past its end:
        generation of a later step that would run before this training; before
        its start: the previous step's weight sync that a step's training runs
        after) is replaced by the op before *that* one on the same lane, and so
        on, until one inside the run: the device still runs one op at a time at
        both ends of a run. Other edges outside the run are dropped (what they
        wait for does not happen).
        """
        if room >= self.op_reach[j] and back >= self.op_back[j]:
            return self.ops[j].deps
        key = (j, back, room)
        cached = self._within.get(key)
        if cached is not None:
            return cached
        op = self.ops[j]
        preds = [dict(o.lane_preds) for o in self.ops]
        out: list[Edge] = []
        for edge in op.deps:
            if -back <= edge[0] <= room:
                if edge not in out:
                    out.append(edge)
                continue
            for lane, pred in op.lane_preds:
                if pred != edge:
                    continue
                off, k = edge
                for _ in range(len(self.ops) * (room + back + 2) + 1):
                    if -back <= off <= room:
                        break
                    nxt = preds[k].get(lane)
                    if nxt is None:
                        break
                    off, k = off + nxt[0], nxt[1]
                if -back <= off <= room and (off, k) != (0, j) and (off, k) not in out:
                    out.append((off, k))
        result = tuple(out)
        self._within[key] = result
        return result

    def plan_deps_at(self, step: int, j: int, steps: int) -> list[tuple[int, int]]:
        """Like :meth:`deps_at`, the plan's own dependencies only."""
        return [(step + off, k) for off, k in self.ops[j].plan_deps if 0 <= step + off < steps]


def plan_lanes(plan: Plan) -> dict[LaneKey, list[Op]]:
    """Each device lane's ops of the whole plan in order: planned start, then dependency depth.

    Raises:
        StepPatternError: an unknown dependency or a dependency cycle.
    """
    depth = dependency_depths(plan.ops)
    lanes: dict[LaneKey, list[Op]] = {}
    for op in sorted(plan.ops, key=lambda o: (o.start_s, depth[o.id], o.end_s, o.id)):
        lane = lane_of(op.kind)
        for d in op.devices:
            lanes.setdefault((d, lane), []).append(op)
    return lanes


def dependency_depths(ops: Sequence[Op]) -> dict[str, int]:
    """Length of the longest dependency chain before each op.

    Raises:
        StepPatternError: an unknown dependency or a cycle (listed).
    """
    ids = {op.id for op in ops}
    for op in ops:
        for dep in op.deps:
            if dep not in ids:
                raise StepPatternError(
                    f"op {op.id!r} depends on {dep!r}, which is not in the plan", op=op.id
                )
    graph = {op.id: op.deps for op in ops}
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter(graph)
    try:
        order = list(sorter.static_order())
    except graphlib.CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise StepPatternError(f"the plan's ops form a cycle: {cycle}") from None
    depth: dict[str, int] = {}
    for op_id in order:
        depth[op_id] = 1 + max((depth[d] for d in graph[op_id]), default=-1)
    return depth


def device_order_repeats(plan: Plan, step: int) -> bool:
    """Whether repeating ``step``'s device order gives each device lane one chain of ops.

    See :func:`rlplex.plan.steady.lane_repeats`. Sync plans always repeat (a
    step starts when the previous one has ended).
    """
    if plan.unrolled_steps <= 1:
        return True
    return irregular_lane(plan_lanes(plan), step) is None


def is_dead_offload(op: Op, sync_destinations: Iterable[str]) -> bool:
    """Whether an offload drops its state instead of copying it.

    The plan says so with an extra ``dead`` field when the planner writes one;
    otherwise the cost model decides: a free (0 GB) offload of the weights of a
    weight-sync destination happens between their last read and the overwrite.
    """
    if op.kind != OpKind.OFFLOAD:
        return False
    extra = op.model_extra or {}
    if "dead" in extra:
        return bool(extra["dead"])
    return op.state == "weights" and op.role in set(sync_destinations) and op.gb == 0


def step_pattern(plan: Plan, *, staleness: int | None = -1) -> StepPattern:
    """The repeating step of ``plan`` with all its edges.

    Args:
        plan: a plan (one step, or several unrolled steps of which
            ``plan.pattern_step`` repeats).
        staleness: k of the staleness gates; -1 (default) takes the plan's
            ``staleness``; None adds no gates beyond the plan's own edges.

    Raises:
        StepPatternError: the plan has no ops at its pattern step, an op
            depends on an unknown op, or the dependencies form a cycle.
    """
    if staleness == -1:
        staleness = plan.staleness
    m = plan.pattern_step
    template = [op for op in plan.ops if op.step == m]
    if not template:
        raise StepPatternError(f"the plan has no ops at its pattern step {m}")
    names = [op_name(op.id) for op in template]
    if len(set(names)) != len(names):
        raise StepPatternError("the plan has two ops with the same id within a step")
    index = {name: i for i, name in enumerate(names)}
    step_of = {op.id: op.step for op in plan.ops}
    lanes_of_plan = plan_lanes(plan)

    def edge(dep_id: str) -> Edge | None:
        key = op_name(dep_id)
        if key in index and dep_id in step_of:
            return (step_of[dep_id] - m, index[key])
        return None

    plan_deps: list[list[Edge]] = []
    for op in template:
        mine: list[Edge] = []
        for dep in op.deps:
            e = edge(dep)
            if e is not None and e not in mine:
                mine.append(e)
        plan_deps.append(mine)
    deps = [list(d) for d in plan_deps]
    lane_preds: list[list[tuple[LaneKey, Edge]]] = [[] for _ in template]
    # Device order: the op before each pattern op on each of its lanes.
    lanes: dict[LaneKey, tuple[Edge, ...]] = {}
    position = {op.id: i for i, op in enumerate(template)}
    for key, lane in lanes_of_plan.items():
        lanes[key] = tuple(e for e in (edge(o.id) for o in lane) if e is not None)
        for prev, op in pairwise(lane):
            j = position.get(op.id)
            if j is None:
                continue
            e = edge(prev.id)
            if e is not None and e != (0, j):
                lane_preds[j].append((key, e))
                if e not in deps[j]:
                    deps[j].append(e)
    destinations = {op.role for op in plan.ops if op.kind == OpKind.WEIGHT_SYNC and op.role}
    if staleness is not None:
        syncs = [j for j, op in enumerate(template) if op.kind == OpKind.WEIGHT_SYNC]
        for j, op in enumerate(template):
            if op.kind == OpKind.RUN and op.role in destinations:
                for s in syncs:
                    e = (-staleness - 1, s)
                    if e not in deps[j]:
                        deps[j].append(e)
    barrier = plan.mode == "sync" or plan.unrolled_steps <= 1
    if barrier:
        used = {k for d in plan_deps for off, k in d if off == 0}
        sinks = [(-1, k) for k in range(len(template)) if k not in used]
        for j in range(len(template)):
            if not any(off == 0 for off, _ in plan_deps[j]):
                deps[j] += [e for e in sinks if e not in deps[j]]
    origin = min(op.start_s for op in template)
    ops = tuple(
        PatternOp(
            name=names[j],
            template=op.id,
            work=op.work(dead=is_dead_offload(op, destinations)),
            start_s=op.start_s - origin,
            end_s=op.end_s - origin,
            plan_deps=tuple(plan_deps[j]),
            deps=tuple(deps[j]),
            lane_preds=tuple(lane_preds[j]),
        )
        for j, op in enumerate(template)
    )
    irregular = None if barrier else irregular_lane(lanes_of_plan, m)
    return StepPattern(
        ops=ops,
        step=m,
        period_s=plan.period_s if plan.period_s > 0 else plan.makespan_s,
        barrier=barrier,
        staleness=staleness,
        lanes=lanes,
        irregular=irregular[0] if irregular else None,
        irregular_op=irregular[1] if irregular else None,
    )


def irregular_lane(lanes: dict[LaneKey, list[Op]], step: int) -> tuple[str, str | None] | None:
    """The first device lane whose order does not repeat around ``step``, or None.

    Returns the lane and its ops in words, and the first of its ops at ``step``
    (see :func:`rlplex.plan.steady.lane_repeats`).
    """
    for (device, lane), ops in sorted(lanes.items(), key=lambda item: item[0]):
        if not lane_repeats([(op.step, op_name(op.id)) for op in ops], step):
            mine = [op.id for op in ops if op.step == step]
            names = ", ".join(mine) or "none of its ops"
            text = f"GPU {device}'s {lane} order differs from its neighbours' ({names})"
            return text, (mine[0] if mine else None)
    return None
