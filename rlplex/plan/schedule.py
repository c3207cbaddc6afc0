"""The scheduler: stage order, offload/reload insertion and start times for one placement.

Stages whose roles sit on disjoint devices run in parallel; stages that share
devices are sequenced; colocated roles stay resident while they fit, and when
they do not, the states used furthest in the future are offloaded (Belady),
free ones (scratch, clean, dead) first. The result is a list of internal ops
with explicit dependencies whose start times are exactly the earliest times
those dependencies allow, so that replaying the ops (the simulator) with the
same durations gives back the plan.

How it works, in one paragraph: steps are unrolled (one step in sync mode,
several with cross-step weight-sync edges in async mode) into tasks; tasks are
list-scheduled (Graham): among the tasks whose predecessors are placed, the one
that can start first, ties to the earlier step, then to the longest remaining
path within a step (HEFT's upward rank), then to definition order. Async
schedules must repeat one step in the steady state; when they do not, they are
scheduled again in a fixed per-step order (:func:`_unrolled`,
:mod:`rlplex.plan.steady`). Placing a task evicts what its devices
cannot hold, reloads what it needs (as early as the copy engine and the memory
profile allow, which is prefetching) and appends it to its compute lanes. Each
GPU device class has a compute lane, a copy lane and a memory profile; each
CPU role has one lane.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rlplex.config import Config
from rlplex.errors import InfeasibleError
from rlplex.plan.costs import stage_dirties, stage_needs, stage_seconds, transfer_seconds
from rlplex.plan.layout import Layout, build_layout
from rlplex.plan.steady import pick_pattern
from rlplex.resources.cluster import COPIED_STATES, DRIVER

EPS = 1e-9
Pair = tuple[str, str]


@dataclass(slots=True)
class SOp:
    """One scheduled op (internal form of :class:`rlplex.plan.model.Op`)."""

    kind: str
    """run, weight_sync, offload or reload."""
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
    stage: str | None = None
    """Stage of run / weight_sync ops."""
    role: str | None = None
    """Role (weight_sync: destination)."""
    state: str | None = None
    """State of transfers."""
    from_role: str | None = None
    """weight_sync: source role."""
    memory_gb: float = 0.0
    """Transient GB per device while a run op runs."""
    gb: float = 0.0
    """GB per device moved (0 for free transfers)."""


@dataclass(slots=True)
class Task:
    """A stage of one step, to be placed."""

    idx: int
    step: int
    order: int
    """Definition order of the stage."""
    name: str
    kind: str
    """run or weight_sync."""
    role: str
    """Run role, or destination for a weight sync."""
    from_role: str | None
    classes: tuple[int, ...]
    lanes: tuple[int, ...]
    """Compute lanes: class ids, CPU lanes after them, the serial lane last."""
    duration: float
    needs: tuple[Pair, ...]
    dirties: tuple[Pair, ...]
    memory_gb: float
    preds: list[int] = field(default_factory=list)
    succs: list[int] = field(default_factory=list)
    rank: float = 0.0
    reads_dest: bool = False
    """Reads the weights a weight sync overwrites (generate)."""


@dataclass(frozen=True)
class Options:
    """How to schedule: the planner's policy or a baseline's."""

    steps: int = 1
    """Steps to unroll."""
    staleness: int = 0
    """k of the cross-step edges (0 in sync mode)."""
    cyclic: bool = True
    """Sync steady state: the step ends with the residency it starts with."""
    serial: bool = False
    """One stage at a time over the whole cluster (the ``sequential`` baseline)."""
    offload_after: tuple[str, ...] = ()
    """Roles that offload all their states after each of their stages."""
    start_empty: bool = False
    """Start with nothing resident (instead of everything, when it fits)."""


@dataclass
class Schedule:
    """Result of one scheduling run."""

    layout: Layout
    ops: list[SOp]
    initial: dict[Pair, bool]
    """Residency at the start."""
    final: dict[Pair, bool]
    """Residency at the end."""
    initial_dirty: dict[Pair, bool]
    final_dirty: dict[Pair, bool]
    steps: int
    staleness: int
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

        When no unrolled step repeats (never seen from :func:`schedule`, which
        reschedules in a fixed order then), the makespan per step: a proven
        upper bound on the steady state and never below the lower bound.
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
            if op.kind in ("offload", "reload"):
                keys = [("copy", c) for c in op.classes]
            elif op.classes:
                keys = [("gpu", c) for c in op.classes]
            else:
                keys = [("cpu", op.role)]
            for key in keys:
                lanes.setdefault(key, []).append(entry)
        return list(lanes.values())

    def with_steady_state(self) -> Schedule:
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


class Problem:
    """The unrolled tasks of a config on a placement, with ranks and lanes."""

    def __init__(self, config: Config, placement: Mapping[str, Sequence[int]], options: Options):
        self.config = config
        self.options = options
        self.layout = build_layout(placement)
        self.capacity = config.cluster.gpu_memory_gb
        pipeline = config.pipeline
        lay = self.layout
        ncls = lay.num_classes
        cpu_roles = [n for n, r in config.roles.items() if not r.is_gpu]
        self.cpu_lane = {r: ncls + i for i, r in enumerate([*cpu_roles, DRIVER])}
        self.serial_lane = ncls + len(self.cpu_lane)
        self.num_lanes = self.serial_lane + 1
        self.sizes: dict[Pair, float] = {}
        for name, role in config.roles.items():
            if name in lay.placement:
                for state, gb in role.states.items():
                    self.sizes[(name, state)] = float(gb)
        self.pairs: list[Pair] = list(self.sizes)
        self.pair_index = {p: i for i, p in enumerate(self.pairs)}
        stages = pipeline.stages
        order = {s.name: i for i, s in enumerate(stages)}
        topo = pipeline.topological_order()
        role_states = config.role_states()
        self.dest_roles: dict[str, str] = {}  # weight-sync stage -> destination role
        readers: set[str] = set()
        for s in stages:
            if s.is_weight_sync and s.to_role in lay.placement:
                self.dest_roles[s.name] = s.to_role or ""
                readers.update(pipeline.weight_readers(s, role_states))
        per_stage = {}
        for s in stages:
            if s.is_weight_sync:
                roles = [r for r in (s.from_role, s.to_role) if r in lay.placement]
                classes = tuple(sorted({c for r in roles for c in lay.role_classes[r]}))
                lanes: tuple[int, ...] = classes
                role = s.to_role or ""
            elif s.role in lay.placement:
                classes = lay.role_classes[s.role or ""]
                lanes = classes
                role = s.role or ""
            else:
                classes = ()
                role = s.role or DRIVER
                lanes = (self.cpu_lane[role],)
            if options.serial:
                lanes = (*lanes, self.serial_lane)
            per_stage[s.name] = (
                s,
                role,
                classes,
                lanes,
                stage_seconds(config, s, lay.placement),
                stage_needs(config, s),
                stage_dirties(config, s),
            )
        self.tasks: list[Task] = []
        self.task_of: dict[tuple[int, str], int] = {}
        for step in range(options.steps):
            for name in topo:
                s, role, classes, lanes, dur, needs, dirties = per_stage[name]
                task = Task(
                    idx=len(self.tasks),
                    step=step,
                    order=order[name],
                    name=name,
                    kind="weight_sync" if s.is_weight_sync else "run",
                    role=role,
                    from_role=s.from_role if s.is_weight_sync else None,
                    classes=classes,
                    lanes=lanes,
                    duration=dur,
                    needs=needs,
                    dirties=dirties,
                    memory_gb=s.memory_gb if classes and not s.is_weight_sync else 0.0,
                    reads_dest=name in readers,
                )
                self.task_of[(step, name)] = task.idx
                self.tasks.append(task)
        self._add_edges(pipeline)
        self._rank()
        # Tasks that read each weight-sync destination, and its weight syncs by step.
        self.readers_of: dict[str, list[int]] = {}
        self.ws_of: dict[str, dict[int, int]] = {}
        for t in self.tasks:
            if t.kind == "weight_sync" and t.name in self.dest_roles:
                self.ws_of.setdefault(t.role, {}).setdefault(t.step, t.idx)
        for t in self.tasks:
            if t.reads_dest and t.role in self.ws_of:
                self.readers_of.setdefault(t.role, []).append(t.idx)
        # Static order for Belady's next use: step, then longest remaining path.
        static = sorted(self.tasks, key=lambda t: (t.step, -t.rank, t.order))
        self.position = [0] * len(self.tasks)
        for pos, t in enumerate(static):
            self.position[t.idx] = pos
        self.users: dict[Pair, list[int]] = {p: [] for p in self.pairs}
        for t in static:
            for p in t.needs:
                if p in self.users:
                    self.users[p].append(t.idx)

    def _add_edges(self, pipeline) -> None:
        opts = self.options
        tasks = self.tasks
        for t in tasks:
            stage = pipeline.stage(t.name)
            for dep in stage.after:
                t.preds.append(self.task_of[(t.step, dep)])
        if opts.steps > 1:
            role_states = self.config.role_states()
            for edge in pipeline.cross_step_edges(role_states):
                lag = 1 + opts.staleness
                for step in range(lag, opts.steps):
                    dst = self.task_of[(step, edge.dst)]
                    tasks[dst].preds.append(self.task_of[(step - lag, edge.src)])
            # Each role's stages of step t+1 after its stages of step t (weight syncs apart).
            by_role: dict[tuple[str, bool], list[str]] = {}
            for s in pipeline.stages:
                key = (s.to_role or "", True) if s.is_weight_sync else (s.role or "", False)
                by_role.setdefault(key, []).append(s.name)
            for names in by_role.values():
                for step in range(1, opts.steps):
                    for dst in names:
                        for src in names:
                            tasks[self.task_of[(step, dst)]].preds.append(
                                self.task_of[(step - 1, src)]
                            )
        for t in tasks:
            t.preds = sorted(set(t.preds))
            for p in t.preds:
                tasks[p].succs.append(t.idx)

    def _rank(self) -> None:
        """HEFT upward rank within one step: the duration plus the longest path after it.

        Only successors of the same step count, so a stage has the same rank in
        every unrolled step: ties are then broken the same way in every step and
        each device runs the same order of stages every step (a rank over the
        whole unrolled DAG would depend on the distance to the last step and
        could flip two stages' order between odd and even steps).
        """
        for t in reversed(self.tasks):  # tasks are created in topological order
            best = 0.0
            for s in t.succs:
                succ = self.tasks[s]
                if succ.step == t.step and succ.rank > best:
                    best = succ.rank
            t.rank = t.duration + best


class _Memory:
    """Memory profile of one device class: usage over time as sorted change events."""

    __slots__ = ("base", "events", "final")

    def __init__(self, base: float) -> None:
        self.base = base
        self.events: list[tuple[float, int, float, int]] = []  # time, alloc?, delta, op
        self.final = base

    def add(self, time: float, delta: float, op: int) -> None:
        bisect.insort(self.events, (time, 0 if delta < 0 else 1, delta, op))
        self.final += delta

    def earliest_fit(self, lb: float, amount: float, capacity: float) -> tuple[float, int]:
        """Earliest time >= lb from which ``amount`` more GB fit forever; and the op freeing it."""
        events = self.events
        cur = self.final
        limit = capacity + 1e-6
        for i in range(len(events) - 1, -1, -1):
            time = events[i][0]
            later = events[i + 1][0] if i + 1 < len(events) else None
            if (later is None or later > time) and cur + amount > limit:
                if later is None:
                    return float("inf"), -1
                return (later, events[i + 1][3]) if later > lb else (lb, -1)
            cur -= events[i][2]
        if cur + amount > limit and events:
            t0 = events[0][0]
            return (t0, events[0][3]) if t0 > lb else (lb, -1)
        return lb, -1


class Scheduler:
    """One scheduling run of a :class:`Problem` from a given residency."""

    def __init__(
        self,
        problem: Problem,
        resident: Mapping[Pair, bool],
        dirty: Mapping[Pair, bool],
    ) -> None:
        self.p = problem
        lay = problem.layout
        self.resident = dict(resident)
        self.dirty = dict(dirty)
        self.initial = dict(resident)
        self.initial_dirty = dict(dirty)
        self.mem = []
        for c in range(lay.num_classes):
            base = sum(
                problem.sizes[(r, s)]
                for r in lay.class_roles[c]
                for s in problem.config.roles[r].states
                if resident.get((r, s))
            )
            self.mem.append(_Memory(base))
        self.lane_free = [0.0] * problem.num_lanes
        self.lane_last = [-1] * problem.num_lanes
        self.copy_free = [0.0] * lay.num_classes
        self.copy_last = [-1] * lay.num_classes
        self.last_user: dict[Pair, int] = {}
        self.ops: list[SOp] = []
        self.task_op = [-1] * len(problem.tasks)
        self.scheduled = [False] * len(problem.tasks)
        self.transfer_count: dict[str, int] = {}

    # -- state facts -------------------------------------------------------------

    def is_dead(self, pair: Pair) -> bool:
        """Whether the state's next access is a weight sync that overwrites it."""
        role, state = pair
        p = self.p
        if state != "weights" or role not in p.ws_of:
            return False
        s_min = p.options.steps
        for idx in p.readers_of.get(role, ()):
            if not self.scheduled[idx]:
                s_min = min(s_min, p.tasks[idx].step)
        t = s_min - p.options.staleness - 1
        if t < 0:
            return False
        ws = p.ws_of[role].get(t)
        return ws is not None and not self.scheduled[ws]

    def offload_cost(self, pair: Pair) -> float:
        if pair[1] not in COPIED_STATES or not self.dirty.get(pair) or self.is_dead(pair):
            return 0.0
        return transfer_seconds(self.p.config, pair[1], self.p.sizes[pair], free=False)

    def reload_cost(self, pair: Pair) -> float:
        return transfer_seconds(self.p.config, pair[1], self.p.sizes[pair], free=self.is_dead(pair))

    def next_use(self, pair: Pair, current: int) -> float:
        p = self.p
        first_all = None
        for idx in p.users[pair]:
            if idx == current:
                continue
            if first_all is None:
                first_all = p.position[idx]
            if not self.scheduled[idx]:
                return p.position[idx]
        if p.options.cyclic and first_all is not None:
            return first_all + len(p.tasks)  # the same stage of the next step
        return float("inf")

    # -- op creation -------------------------------------------------------------

    def _new_op(self, op: SOp) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    def _transfer_name(self, kind: str, pair: Pair, step: int) -> str:
        base = f"{kind}/{pair[0]}/{pair[1]}"
        key = f"{step}/{base}"
        n = self.transfer_count.get(key, 0) + 1
        self.transfer_count[key] = n
        return base if n == 1 else f"{base}#{n}"

    def _copy_engine(self, pair: Pair, not_before: float) -> tuple[list[int], float]:
        """The last transfers on ``pair``'s role's devices and when their copy engines are free."""
        classes = self.p.layout.role_classes[pair[0]]
        deps = [self.copy_last[c] for c in classes]
        start = max([not_before, *(self.copy_free[c] for c in classes)])
        return deps, start

    def _transfer(self, kind: str, pair: Pair, step: int, start: float, deps: list[int]) -> int:
        """Add an offload or reload of ``pair`` from ``start``: memory, copy engines, residency."""
        reload = kind == "reload"
        cost = self.reload_cost(pair) if reload else self.offload_cost(pair)
        classes = self.p.layout.role_classes[pair[0]]
        size = self.p.sizes[pair]
        idx = self._new_op(
            SOp(
                kind=kind,
                step=step,
                name=self._transfer_name(kind, pair, step),
                classes=classes,
                start=start,
                end=start + cost,
                deps=_clean(deps),
                role=pair[0],
                state=pair[1],
                gb=size if cost > 0 else 0.0,
            )
        )
        for c in classes:
            # A reload holds memory from its start, an offload until its end.
            if reload:
                self.mem[c].add(start, size, idx)
            else:
                self.mem[c].add(start + cost, -size, idx)
            self.copy_free[c] = start + cost
            self.copy_last[c] = idx
        self.resident[pair] = reload
        self.dirty[pair] = False
        return idx

    def offload(self, pair: Pair, step: int, not_before: float = 0.0) -> int:
        deps, start = self._copy_engine(pair, not_before)
        user = self.last_user.get(pair, -1)
        if user >= 0:
            deps.append(user)
            start = max(start, self.ops[user].end)
        return self._transfer("offload", pair, step, start, deps)

    def reload(self, pair: Pair, step: int, not_before: float = 0.0) -> int:
        deps, start = self._copy_engine(pair, not_before)
        size = self.p.sizes[pair]
        for c in self.p.layout.role_classes[pair[0]]:
            t, op = self.mem[c].earliest_fit(start, size, self.p.capacity)
            if t > start:
                start = t
            if op >= 0:
                deps.append(op)
        return self._transfer("reload", pair, step, start, deps)

    def _evict_for(self, task: Task, missing: list[Pair]) -> None:
        p = self.p
        needed = set(task.needs)
        for c in task.classes:
            mem = self.mem[c]
            extra = task.memory_gb + sum(
                p.sizes[m] for m in missing if c in p.layout.role_classes[m[0]]
            )
            while mem.final + extra > p.capacity + 1e-6:
                deficit = mem.final + extra - p.capacity
                victim = self._choose_victim(task, c, needed, deficit)
                if victim is None:
                    raise self._no_room(task, c, missing)
                self.offload(victim, task.step)

    def _choose_victim(self, task: Task, c: int, needed: set[Pair], deficit: float) -> Pair | None:
        """Free states first; then the one used furthest ahead (Belady); among equals, the
        cheapest that alone frees enough, else the largest."""
        p = self.p
        best = None
        best_key = None
        for role in p.layout.class_roles[c]:
            for state in p.config.roles[role].states:
                pair = (role, state)
                if pair in needed or not self.resident.get(pair):
                    continue
                cost = self.offload_cost(pair) + self.reload_cost(pair)
                size = p.sizes[pair]
                enough = size >= deficit - 1e-9
                key = (
                    cost > 0,
                    -self.next_use(pair, task.idx),
                    not enough,
                    cost if enough else -size,
                    p.pair_index[pair],
                )
                if best_key is None or key < best_key:
                    best, best_key = pair, key
        return best

    def _no_room(self, task: Task, c: int, missing: list[Pair]) -> InfeasibleError:
        p = self.p
        pinned = [
            f"{r}.{s} {p.sizes[(r, s)]:g}" for (r, s) in task.needs if c in p.layout.role_classes[r]
        ]
        total = sum(p.sizes[x] for x in task.needs if c in p.layout.role_classes[x[0]])
        devices = p.layout.classes[c]
        return InfeasibleError(
            f"stage {task.name!r} on role {task.role!r} needs {total + task.memory_gb:g} GB"
            f" per GPU on GPUs {_span(devices)} ({' + '.join(pinned) or 'no states'}"
            f" + transient {task.memory_gb:g} GB) but a GPU has {p.capacity:g} GB"
        )

    def place(self, task: Task) -> None:
        p = self.p
        missing = [x for x in task.needs if not self.resident.get(x)]
        if task.classes:
            self._evict_for(task, missing)
        reloads = [self.reload(x, task.step) for x in missing]
        deps = [self.task_op[x] for x in task.preds]
        start = 0.0
        for d in deps:
            start = max(start, self.ops[d].end)
        for lane in task.lanes:
            if self.lane_last[lane] >= 0:
                deps.append(self.lane_last[lane])
            start = max(start, self.lane_free[lane])
        for r in reloads:
            deps.append(r)
            start = max(start, self.ops[r].end)
        if task.memory_gb > 0:
            for c in task.classes:
                t, op = self.mem[c].earliest_fit(start, task.memory_gb, p.capacity)
                start = max(start, t)
                if op >= 0:
                    deps.append(op)
        end = start + task.duration
        idx = self._new_op(
            SOp(
                kind=task.kind,
                step=task.step,
                name=task.name,
                classes=task.classes,
                start=start,
                end=end,
                deps=_clean(deps),
                stage=task.name,
                role=task.role,
                from_role=task.from_role,
                memory_gb=task.memory_gb,
                gb=p.sizes.get((task.role, "weights"), 0.0) if task.kind == "weight_sync" else 0.0,
            )
        )
        if task.memory_gb > 0:
            for c in task.classes:
                self.mem[c].add(start, task.memory_gb, idx)
                self.mem[c].add(end, -task.memory_gb, idx)
        for lane in task.lanes:
            self.lane_free[lane] = end
            self.lane_last[lane] = idx
        for pair in task.needs:
            self.last_user[pair] = idx
        for pair in task.dirties:
            self.dirty[pair] = True
        self.task_op[task.idx] = idx
        self.scheduled[task.idx] = True
        if p.options.offload_after:
            roles = [task.role] if task.kind == "run" else [task.from_role, task.role]
            for role in roles:
                if role in p.options.offload_after:
                    for state in p.config.roles[role].states:
                        if self.resident.get((role, state)):
                            self.offload((role, state), task.step)

    def run(self, priority: Sequence[float] | None = None) -> Schedule:
        """List-schedule every task; by earliest start, or in a fixed ``priority`` order.

        With ``priority`` (one number per task, lower first) the order in which
        tasks are placed, hence each device's order, does not depend on start
        times: a priority that shifts by a constant per step gives every
        interior step the same device order.
        """
        p = self.p
        tasks = p.tasks
        waiting = [len(t.preds) for t in tasks]
        ready = [t.idx for t in tasks if not t.preds]
        while ready:
            best = None
            best_key = None
            for idx in ready:
                t = tasks[idx]
                if priority is not None:
                    at = priority[idx]
                else:  # the earliest start
                    at = 0.0
                    for d in t.preds:
                        at = max(at, self.ops[self.task_op[d]].end)
                    for lane in t.lanes:
                        at = max(at, self.lane_free[lane])
                key = (round(at, 9), t.step, -t.rank, t.order)
                if best_key is None or key < best_key:
                    best, best_key = idx, key
            assert best is not None
            ready.remove(best)
            self.place(tasks[best])
            for s in tasks[best].succs:
                waiting[s] -= 1
                if waiting[s] == 0:
                    ready.append(s)
        return self.result()

    def restore(self, target: Mapping[Pair, bool]) -> None:
        """Append the transfers that bring residency back to ``target`` (end of a sync step)."""
        end = max((o.end for o in self.ops), default=0.0)
        step = self.p.options.steps - 1
        for pair in self.p.pairs:
            if self.resident.get(pair) and not target.get(pair):
                self.offload(pair, step, end)
        for pair in self.p.pairs:
            if target.get(pair) and not self.resident.get(pair):
                self.reload(pair, step, end)

    def result(self) -> Schedule:
        return Schedule(
            layout=self.p.layout,
            ops=self.ops,
            initial=self.initial,
            final=dict(self.resident),
            initial_dirty=self.initial_dirty,
            final_dirty=dict(self.dirty),
            steps=self.p.options.steps,
            staleness=self.p.options.staleness,
        )


def _clean(deps: list[int]) -> list[int]:
    return sorted({d for d in deps if d >= 0})


def _span(devices: Sequence[int]) -> str:
    if len(devices) > 1 and devices[-1] - devices[0] == len(devices) - 1:
        return f"{devices[0]}-{devices[-1]}"
    return ",".join(map(str, devices))


def all_fit(problem: Problem) -> bool:
    """Whether every role's states fit together on every device (plus any stage's transient)."""
    lay = problem.layout
    for c in range(lay.num_classes):
        total = sum(
            problem.sizes[(r, s)]
            for r in lay.class_roles[c]
            for s in problem.config.roles[r].states
        )
        transient = max((t.memory_gb for t in problem.tasks if c in t.classes), default=0.0)
        if total + transient > problem.capacity + 1e-6:
            return False
    return True


def schedule(config: Config, placement: Mapping[str, Sequence[int]], options: Options) -> Schedule:
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
        return _unrolled(problem, resident, dirty)
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


def _unrolled(problem: Problem, resident: dict[Pair, bool], dirty: dict[Pair, bool]) -> Schedule:
    """Schedule unrolled (async) steps so that one step's ops repeat in the steady state.

    The earliest-start list schedule usually settles into a repeating step.
    When its device order alternates between steps, or one stage drifts ever
    further ahead of another on the same GPUs, the tasks are scheduled again
    in fixed orders that shift by a constant per step (see :func:`_priorities`),
    so that every interior step places its stages in the same order; the
    repeating schedule with the shortest period wins.
    """
    first = Scheduler(problem, resident, dirty).run().with_steady_state()
    if first.steady_period is not None or first.steps <= 2:
        return first
    best = first
    for priority in _priorities(problem, first):
        again = Scheduler(problem, resident, dirty).run(priority).with_steady_state()
        if again.steady_period is not None and (
            best.steady_period is None or again.steady_period < best.steady_period - EPS
        ):
            best = again
    return best


def _priorities(problem: Problem, first: Schedule) -> list[list[float]]:
    """Fixed task orders for rescheduling: ``step * pace + offset of the stage``.

    ``pace`` is the first schedule's time per step. The offsets are the stage's
    earliest start within one step (longest path of durations before it), or
    its start in the first schedule's middle step.
    """
    pace = max(first.makespan / first.steps, EPS)
    ends = first.step_ends()
    last, low = first.window()
    if last > low and ends[last] > ends[low]:
        pace = (ends[last] - ends[low]) / (last - low)
    head: dict[str, float] = {}
    for t in problem.tasks:  # topological order
        if t.step == 0:
            head[t.name] = max(
                (head[problem.tasks[p].name] + problem.tasks[p].duration for p in t.preds),
                default=0.0,
            )
    middle = last - 1
    start = {op.name: op.start - middle * pace for op in first.ops if op.step == middle}
    return [
        [t.step * pace + head[t.name] for t in problem.tasks],
        [t.step * pace + start.get(t.name, head[t.name]) for t in problem.tasks],
    ]


def check_fits(problem: Problem) -> None:
    """Each stage alone must fit a GPU: its needed states plus transient memory.

    Raises:
        InfeasibleError: naming the stage, the role and the GB figures.
    """
    cap = problem.capacity
    lay = problem.layout
    seen: set[str] = set()
    for t in problem.tasks:
        if t.name in seen or not t.classes:
            continue
        seen.add(t.name)
        for c in t.classes:
            parts = [
                (f"{r}.{s}", problem.sizes[(r, s)])
                for (r, s) in t.needs
                if c in lay.role_classes[r]
            ]
            total = sum(gb for _, gb in parts) + t.memory_gb
            if total > cap + 1e-6:
                detail = " + ".join(f"{n} {gb:g}" for n, gb in parts)
                if t.memory_gb:
                    detail += f" + transient {t.memory_gb:g}"
                role = (
                    f"roles {t.from_role!r} and {t.role!r}"
                    if t.kind == "weight_sync"
                    else f"role {t.role!r}"
                )
                largest = max([*parts, ("transient memory", t.memory_gb)], key=lambda p: p[1])
                raise InfeasibleError(
                    f"stage {t.name!r} on {role} needs {total:g} GB per GPU"
                    f" ({detail} GB) on GPUs {_span(lay.classes[c])}, but a GPU has"
                    f" {cap:g} GB (gpu_memory_gb); it overflows by {total - cap:g} GB while"
                    f" {t.name!r} runs, the largest part being {largest[0]} ({largest[1]:g} GB)"
                )
