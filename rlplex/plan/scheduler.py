"""The list scheduler: places tasks one by one, evicting, reloading and prefetching.

Tasks are list-scheduled (Graham): among the tasks whose predecessors are
placed, the one that can start first, ties to the earlier step, then to the
longest remaining path within a step (HEFT's upward rank), then to definition
order; or in a fixed priority order (see :mod:`rlplex.plan.rescheduling`).
Placing a task evicts what its devices cannot hold (the victim chosen by
:func:`rlplex.plan.eviction.choose_victim`), reloads what it needs (as early
as the copy engine and the memory profile allow, which is prefetching) and
appends it to its compute lanes. Each GPU device class has a compute lane, a
copy lane and a memory profile (:class:`~rlplex.plan.memory.MemoryProfile`);
each CPU role has one lane. Start times are exactly the earliest times the
dependencies allow, so replaying the ops with the same durations gives back
the schedule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlplex.errors import InfeasibleError
from rlplex.plan.costs import transfer_seconds
from rlplex.plan.eviction import EvictionCandidate, choose_victim
from rlplex.plan.fit import span
from rlplex.plan.ids import OpKind, OpWork, transfer_name
from rlplex.plan.memory import MemoryProfile
from rlplex.plan.ops import PlanSchedule, SOp
from rlplex.plan.problem import Pair, Problem, Task
from rlplex.resources.cluster import COPIED_STATES


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
            self.mem.append(MemoryProfile(base))
        self.lane_free = [0.0] * problem.num_lanes
        self.lane_last = [-1] * problem.num_lanes
        self.copy_free = [0.0] * lay.num_classes
        self.copy_last = [-1] * lay.num_classes
        self.last_user: dict[Pair, int] = {}
        self.ops: list[SOp] = []
        self.task_op = [-1] * len(problem.tasks)
        self.scheduled = [False] * len(problem.tasks)
        self.transfer_count: dict[tuple[int, str, Pair], int] = {}
        self.transfer_works: dict[tuple[OpKind, Pair, float], OpWork] = {}

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

    def _transfer_name(self, kind: OpKind, pair: Pair, step: int) -> str:
        key = (step, kind, pair)
        n = self.transfer_count.get(key, 0) + 1
        self.transfer_count[key] = n
        return transfer_name(kind, pair[0], pair[1], n)

    def _transfer_work(self, kind: OpKind, pair: Pair, gb: float) -> OpWork:
        """What an offload or reload of ``pair`` moving ``gb`` does (one object for each)."""
        key = (kind, pair, gb)
        work = self.transfer_works.get(key)
        if work is None:
            work = self.transfer_works[key] = OpWork(kind, role=pair[0], state=pair[1], gb=gb)
        return work

    def _copy_engine(self, pair: Pair, not_before: float) -> tuple[list[int], float]:
        """The last transfers on ``pair``'s role's devices and when their copy engines are free."""
        classes = self.p.layout.role_classes[pair[0]]
        deps = [self.copy_last[c] for c in classes]
        start = max([not_before, *(self.copy_free[c] for c in classes)])
        return deps, start

    def _transfer(self, kind: OpKind, pair: Pair, step: int, start: float, deps: list[int]) -> int:
        """Add an offload or reload of ``pair`` from ``start``: memory, copy engines, residency."""
        reload = kind == OpKind.RELOAD
        cost = self.reload_cost(pair) if reload else self.offload_cost(pair)
        classes = self.p.layout.role_classes[pair[0]]
        size = self.p.sizes[pair]
        idx = self._new_op(
            SOp(
                work=self._transfer_work(kind, pair, size if cost > 0 else 0.0),
                step=step,
                name=self._transfer_name(kind, pair, step),
                classes=classes,
                start=start,
                end=start + cost,
                deps=_clean(deps),
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
        # A reloaded state whose host copy is released must be copied again to go back.
        self.dirty[pair] = reload and pair in self.p.options.drop_host
        return idx

    def offload(self, pair: Pair, step: int, not_before: float = 0.0) -> int:
        deps, start = self._copy_engine(pair, not_before)
        user = self.last_user.get(pair, -1)
        if user >= 0:
            deps.append(user)
            start = max(start, self.ops[user].end)
        return self._transfer(OpKind.OFFLOAD, pair, step, start, deps)

    def reload(self, pair: Pair, step: int, not_before: float = 0.0) -> int:
        deps, start = self._copy_engine(pair, not_before)
        size = self.p.sizes[pair]
        for c in self.p.layout.role_classes[pair[0]]:
            t, op = self.mem[c].earliest_fit(start, size, self.p.capacity)
            if t > start:
                start = t
            if op >= 0:
                deps.append(op)
        return self._transfer(OpKind.RELOAD, pair, step, start, deps)

    def _evict_for(self, task: Task, missing: list[Pair]) -> None:
        p = self.p
        needed = set(task.needs)
        for c in task.classes:
            mem = self.mem[c]
            extra = task.work.memory_gb + sum(
                p.sizes[m] for m in missing if c in p.layout.role_classes[m[0]]
            )
            while mem.final + extra > p.capacity + 1e-6:
                deficit = mem.final + extra - p.capacity
                victim = self._choose_victim(task, c, needed, deficit)
                if victim is None:
                    raise self._no_room(task, c, missing)
                self.offload(victim, task.step)

    def _choose_victim(self, task: Task, c: int, needed: set[Pair], deficit: float) -> Pair | None:
        """The victim of :func:`rlplex.plan.eviction.choose_victim` among class ``c``'s states."""
        p = self.p
        candidates = [
            EvictionCandidate(
                pair=pair,
                cost_s=self.offload_cost(pair) + self.reload_cost(pair),
                size_gb=p.sizes[pair],
                next_use=self.next_use(pair, task.idx),
                order=p.pair_index[pair],
            )
            for role in p.layout.class_roles[c]
            for pair in ((role, state) for state in p.config.roles[role].states)
            if pair not in needed and self.resident.get(pair)
        ]
        return choose_victim(candidates, deficit)

    def _no_room(self, task: Task, c: int, missing: list[Pair]) -> InfeasibleError:
        p = self.p
        pinned = [
            f"{r}.{s} {p.sizes[(r, s)]:g}" for (r, s) in task.needs if c in p.layout.role_classes[r]
        ]
        total = sum(p.sizes[x] for x in task.needs if c in p.layout.role_classes[x[0]])
        devices = p.layout.classes[c]
        work = task.work
        return InfeasibleError(
            f"stage {task.name!r} on role {work.role!r} needs {total + work.memory_gb:g} GB"
            f" per GPU on GPUs {span(devices)} ({' + '.join(pinned) or 'no states'}"
            f" + transient {work.memory_gb:g} GB) but a GPU has {p.capacity:g} GB"
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
        if task.work.memory_gb > 0:
            for c in task.classes:
                t, op = self.mem[c].earliest_fit(start, task.work.memory_gb, p.capacity)
                start = max(start, t)
                if op >= 0:
                    deps.append(op)
        end = start + task.duration
        idx = self._new_op(
            SOp(
                work=task.work,
                step=task.step,
                name=task.name,
                classes=task.classes,
                start=start,
                end=end,
                deps=_clean(deps),
            )
        )
        if task.work.memory_gb > 0:
            for c in task.classes:
                self.mem[c].add(start, task.work.memory_gb, idx)
                self.mem[c].add(end, -task.work.memory_gb, idx)
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
            roles = (
                [task.work.role]
                if task.work.kind == OpKind.RUN
                else [task.work.from_role, task.work.role]
            )
            for role in roles:
                if role in p.options.offload_after:
                    for state in p.config.roles[role].states:
                        if self.resident.get((role, state)):
                            self.offload((role, state), task.step)

    def run(self, priority: Sequence[float] | None = None) -> PlanSchedule:
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

    def result(self) -> PlanSchedule:
        return PlanSchedule(
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
