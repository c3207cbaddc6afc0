"""The scheduling problem: a config's stages on a placement, unrolled into tasks.

A :class:`Problem` is everything the scheduler needs that does not change
while it schedules: the device classes of the placement (see
:mod:`rlplex.plan.layout`), each stage's duration, needed and dirtied states
and compute lanes, the steps unrolled (one in sync mode, several with
cross-step weight-sync edges in async mode), the dependencies between tasks
and their HEFT upward rank, and the static order Belady's eviction looks
ahead in. :class:`Options` says how to schedule (the planner's policy or a
baseline's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rlplex.config import Config
from rlplex.plan.costs import stage_dirties, stage_needs, stage_seconds
from rlplex.plan.ids import OpKind, OpWork
from rlplex.plan.layout import group_device_classes
from rlplex.resources.cluster import DRIVER

Pair = tuple[str, str]
"""A (role, state) pair."""


@dataclass(slots=True)
class Task:
    """A stage of one step, to be placed."""

    idx: int
    """Its index in :attr:`Problem.tasks`, by which other tasks name it."""
    step: int
    """The unrolled step it belongs to, from 0."""
    order: int
    """Definition order of the stage."""
    name: str
    """The stage's name."""
    work: OpWork
    """What its op does (``run`` or ``weight_sync``; role: the run role, or the
    destination of a weight sync), shared by the stage's tasks of every step."""
    classes: tuple[int, ...]
    """Device classes (:mod:`rlplex.plan.layout`) its op occupies: its role's, both roles' for
    a weight sync; empty for a CPU or driver stage."""
    lanes: tuple[int, ...]
    """Compute lanes: class ids, CPU lanes after them, the serial lane last."""
    duration: float
    """Seconds its op takes on the placement, ``cluster.dispatch_s`` included."""
    needs: tuple[Pair, ...]
    """(role, state) pairs that must be resident while it runs."""
    dirties: tuple[Pair, ...]
    """(role, state) pairs it leaves changed on the device (a train stage's weights and
    optimizer, a weight sync's destination weights)."""
    preds: list[int] = field(default_factory=list)
    """Tasks it waits for: its stage's ``after`` in the same step, cross-step weight-sync
    edges, and its role's stages of the step before; sorted, each once."""
    succs: list[int] = field(default_factory=list)
    """Tasks that wait for it (the inverse of ``preds``)."""
    rank: float = 0.0
    """HEFT upward rank, in seconds: its duration plus the longest path after it within its
    step; 0 until :meth:`Problem._rank` sets it."""
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
    drop_host: frozenset[tuple[str, str]] = frozenset()
    """Copied states whose host copy is released when they are reloaded (fewer host
    copies kept: their next offload copies again)."""


class Problem:
    """The unrolled tasks of a config on a placement, with ranks and lanes."""

    def __init__(self, config: Config, placement: Mapping[str, Sequence[int]], options: Options):
        self.config = config
        self.options = options
        self.layout = group_device_classes(placement)
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
        works = {}
        for name, (s, role, classes, *_) in per_stage.items():
            sync = s.is_weight_sync
            works[name] = OpWork(
                OpKind.WEIGHT_SYNC if sync else OpKind.RUN,
                stage=name,
                role=role,
                from_role=s.from_role if sync else None,
                gb=self.sizes.get((role, "weights"), 0.0) if sync else 0.0,
                memory_gb=s.memory_gb if classes and not sync else 0.0,
            )
        for step in range(options.steps):
            for name in topo:
                s, role, classes, lanes, dur, needs, dirties = per_stage[name]
                task = Task(
                    idx=len(self.tasks),
                    step=step,
                    order=order[name],
                    name=name,
                    work=works[name],
                    classes=classes,
                    lanes=lanes,
                    duration=dur,
                    needs=needs,
                    dirties=dirties,
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
            if t.work.kind == OpKind.WEIGHT_SYNC and t.name in self.dest_roles:
                self.ws_of.setdefault(t.work.role or "", {}).setdefault(t.step, t.idx)
        for t in self.tasks:
            if t.reads_dest and t.work.role in self.ws_of:
                self.readers_of.setdefault(t.work.role or "", []).append(t.idx)
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
