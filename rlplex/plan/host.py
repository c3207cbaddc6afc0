"""Host memory over a plan: what each node's RAM holds during the step, and its peak.

Offloading a copied state (``weights``, ``optimizer``) puts its host copy in the
memory of the nodes its role's devices sit on: the state's GB per device times
the role's devices on that node (DESIGN.md, "Host memory"). That is where
colocated runs die (verl#3453, OpenRLHF#1013), so a plan tracks it like GPU
memory. The rules, read from the plan's ops alone (so that the planner and
``--verify`` compute the same figure from any plan):

- an offload that copies (takes time, state not dead) makes the host copy at
  its start;
- a free offload of a state that is not dead is a clean one: it needs the host
  copy kept since the last offload;
- a free offload or a reload of a dead state (DESIGN.md: from its last read
  until a weight sync overwrites it) holds nothing on the host, and releases a
  held copy;
- after a reload the copy is kept only if the state's next event is a clean
  offload (kept while clean); otherwise it is released when the reload ends;
- an op that dirties the state (a ``train`` stage, a weight sync into it)
  releases a held copy when it starts;
- scratch states (``grads``, ``kv_cache``) hold nothing on the host;
- a role's ``host_states`` (a CPU optimizer's state, which never sits on a GPU)
  are held the whole step, under every copy.

A sync step is cyclic: what is held at its start is what its end holds. The
rollout engine's weight backup while it sleeps is its ``weights`` offloaded
while not dead, so it counts with no special case.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from rlplex.config import Config
from rlplex.plan.ids import COMPUTE_KINDS, OpKind
from rlplex.plan.model import Op, Plan
from rlplex.resources.cluster import COPIED_STATES

Pair = tuple[str, str]
TOL = 1e-6

_OFF_COPY, _OFF_CLEAN, _DROP, _RELOAD, _DIRTY = range(5)


@dataclass(frozen=True)
class HostPeak:
    """The host-memory peak of one node over a plan."""

    node: int
    """Node index (global rank // gpus_per_node)."""
    peak_gb: float
    """Most GB the node's host memory holds at one instant."""
    capacity_gb: float
    """``cluster.host_memory_gb``."""
    at_s: float
    """When the peak is first reached, seconds from the plan's start."""
    held: dict[str, float] = field(default_factory=dict)
    """``role.state`` -> GB the node holds at the peak."""

    @property
    def over(self) -> bool:
        return self.peak_gb > self.capacity_gb + TOL

    def describe(self) -> str:
        """One line: the node, the peak, what is held and by whom, the capacity."""
        parts = " + ".join(
            f"{k} {v:.1f}" for k, v in sorted(self.held.items(), key=lambda kv: -kv[1])
        )
        return (
            f"node {self.node}'s host memory peaks at {self.peak_gb:.1f} GB at {self.at_s:.2f} s"
            f" ({parts or 'nothing'} GB in host memory) but a node has {self.capacity_gb:g} GB"
            " (cluster.host_memory_gb)"
        )


def time_order(ops: Sequence[Op]) -> list[Op]:
    """Ops by start, then end, then id (the plan's own order is by start and id)."""
    return sorted(ops, key=lambda o: (o.start_s, o.end_s, o.id))


def dead_predicate(ops: Sequence[Op], config: Config, cyclic: bool) -> Callable[[Pair, int], bool]:
    """``dead(pair, pos)``: whether the pair's next access after position ``pos`` overwrites it.

    Only the ``weights`` of a weight-sync destination can be dead. ``ops`` is in
    time order; positions index it.
    """
    dests = {s.to_role for s in config.pipeline.stages if s.is_weight_sync}
    accesses: dict[str, list[tuple[int, bool]]] = {d or "": [] for d in dests}
    stages = {s.name: s for s in config.pipeline.stages}
    for pos, op in enumerate(ops):
        if op.kind not in COMPUTE_KINDS or op.stage is None:
            continue
        stage = stages.get(op.stage)
        if stage is None:
            continue
        if op.kind == OpKind.WEIGHT_SYNC:
            for role in {stage.from_role, stage.to_role}:
                if role in accesses:
                    accesses[role].append((pos, role == stage.to_role))
        elif op.role in accesses and (stage.needs is None or "weights" in stage.needs):
            accesses[op.role].append((pos, False))

    def dead(pair: Pair, pos: int) -> bool:
        role, state = pair
        if state != "weights" or role not in accesses:
            return False
        acc = accesses[role]
        i = bisect.bisect_left(acc, (pos, False))
        if i < len(acc):
            return acc[i][1]
        return bool(cyclic and acc and acc[0][1])

    return dead


def _dirtiers(config: Config, op: Op) -> tuple[Pair, ...]:
    if op.kind == OpKind.WEIGHT_SYNC:
        return ((op.role or "", "weights"),)
    if op.kind != OpKind.RUN or op.stage is None:
        return ()
    try:
        stage = config.pipeline.stage(op.stage)
    except KeyError:
        return ()
    if stage.kind != "train":
        return ()
    role = config.roles.get(op.role or "")
    if role is None:
        return ()
    names = tuple(role.states) if stage.needs is None else tuple(stage.needs)
    return tuple((role.name, s) for s in role.states if s in names and s in COPIED_STATES)


def host_intervals(
    plan: Plan,
    config: Config,
    ops: Sequence[Op] | None = None,
    dead: Callable[[Pair, int], bool] | None = None,
) -> dict[Pair, list[tuple[float, float]]]:
    """When each copied state has a host copy: (from, to) intervals in plan seconds.

    ``ops`` is the plan's ops in time order (default :func:`time_order`), and
    ``dead`` a predicate over positions in it (default :func:`dead_predicate`).
    """
    cyclic = plan.mode == "sync" and plan.unrolled_steps <= 1
    ops = time_order(plan.ops) if ops is None else ops
    dead = dead_predicate(ops, config, cyclic) if dead is None else dead
    t_end = max((o.end_s for o in ops), default=0.0)
    t_start = min((o.start_s for o in ops), default=0.0)
    events: dict[Pair, list[tuple[int, float, float]]] = {}
    pairs = [
        (r, s)
        for r, states in plan.states.items()
        for s in states
        if s in COPIED_STATES and r in plan.placement
    ]
    for p in pairs:
        events[p] = []
    for pos, op in enumerate(ops):
        if op.kind == OpKind.OFFLOAD or op.kind == OpKind.RELOAD:
            pair = (op.role or "", op.state or "")
            if pair not in events:
                continue
            if dead(pair, pos):
                kind = _DROP
            elif op.kind == OpKind.RELOAD:
                kind = _RELOAD
            else:
                kind = _OFF_COPY if op.end_s - op.start_s > TOL else _OFF_CLEAN
            events[pair].append((kind, op.start_s, op.end_s))
        elif op.kind in COMPUTE_KINDS:
            for pair in _dirtiers(config, op):
                if pair in events:
                    events[pair].append((_DIRTY, op.start_s, op.end_s))
    out: dict[Pair, list[tuple[float, float]]] = {}
    for pair in pairs:
        resident = pair[1] in plan.initial_residency.get(pair[0], ())
        out[pair] = _walk(events[pair], resident, cyclic, t_start, t_end)
    return out


def _keeps(evs: Sequence[tuple[int, float, float]], i: int, cyclic: bool) -> bool:
    """After event ``i`` (a reload, or the start when i = -1): is the next event a clean offload?"""
    n = len(evs)
    j = i + 1
    if j >= n:
        if not cyclic or not n:
            return False
        j = 0
    return evs[j][0] == _OFF_CLEAN


def _walk(
    evs: Sequence[tuple[int, float, float]],
    resident: bool,
    cyclic: bool,
    t_start: float,
    t_end: float,
) -> list[tuple[float, float]]:
    n = len(evs)
    if not n:
        return [] if resident else [(t_start, t_end)]
    if cyclic:
        last = evs[-1][0]
        held = last in (_OFF_COPY, _OFF_CLEAN) or (last == _RELOAD and _keeps(evs, n - 1, True))
    elif resident:
        held = _keeps(evs, -1, False)
    else:
        held = evs[0][0] != _DROP
    out: list[tuple[float, float]] = []
    since = t_start if held else None
    for i, (kind, start, end) in enumerate(evs):
        if kind in (_OFF_COPY, _OFF_CLEAN):
            if since is None:
                since = start
        elif kind in (_DROP, _DIRTY):
            if since is not None:
                out.append((since, start))
                since = None
        else:  # a reload of a live state needs the copy; kept only while clean
            if since is None:
                since = start
            if not _keeps(evs, i, cyclic):
                out.append((since, end))
                since = None
    if since is not None:
        out.append((since, t_end))
    return out


def host_peaks(
    plan: Plan,
    config: Config,
    ops: Sequence[Op] | None = None,
    dead: Callable[[Pair, int], bool] | None = None,
) -> dict[int, HostPeak]:
    """Each node's host-memory peak over ``plan`` (nodes with GPU roles only)."""
    cluster = config.cluster
    per_node = cluster.gpus_per_node
    intervals = host_intervals(plan, config, ops, dead)
    kinds = node_kinds(plan.placement, per_node)
    out: dict[int, HostPeak] = {}
    for kind, nodes in kinds.items():
        on = dict(kind)
        peak, at, held = _sweep(plan, intervals, on)
        # States kept in host memory all step (a CPU optimizer's) sit under every copy.
        resident = host_resident(config, on)
        held.update(resident)
        peak += sum(resident.values())
        for node in nodes:
            out[node] = HostPeak(node, peak, cluster.host_memory_gb, at, held)
    return out


def host_resident(config: Config, on: Mapping[str, int]) -> dict[str, float]:
    """GB a node's host memory holds all step for roles' ``host_states`` (a CPU optimizer's
    state), by ``role.state (host-resident)``; ``on``: each role's GPUs on the node."""
    out: dict[str, float] = {}
    for role, count in on.items():
        spec = config.roles.get(role)
        for state, gb in (spec.host_states if spec is not None else {}).items():
            if gb * count > 0:
                out[f"{role}.{state} (host-resident)"] = gb * count
    return out


def node_kinds(
    placement: Mapping[str, Sequence[int]], per_node: int
) -> dict[tuple[tuple[str, int], ...], list[int]]:
    """Nodes grouped by what they hold: (role, GPUs of the role on the node) -> nodes.

    Nodes holding the same roles on as many GPUs hold the same host copies, so
    one sweep serves them all. A role on a contiguous block of ranks is counted
    by arithmetic (4,096 GPUs cost as little as 8); others node by node.
    """
    blocks: dict[str, tuple[int, int]] = {}
    irregular: dict[str, dict[int, int]] = {}
    cuts: set[int] = set()
    for role, devices in placement.items():
        if not devices:
            continue
        lo, hi = min(devices), max(devices)
        if hi - lo + 1 == len(devices) and len(set(devices)) == len(devices):
            blocks[role] = (lo, hi)
            cuts.update((lo // per_node, lo // per_node + 1, hi // per_node, hi // per_node + 1))
        else:
            counts = dict(Counter(d // per_node for d in devices))
            irregular[role] = counts
            for node in counts:
                cuts.update((node, node + 1))
    edges = sorted(cuts)
    kinds: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for a, b in pairwise(edges):
        kind = []
        for role, (lo, hi) in blocks.items():
            n = min(hi, a * per_node + per_node - 1) - max(lo, a * per_node) + 1
            if n > 0:
                kind.append((role, n))
        for role, counts in irregular.items():
            if counts.get(a):
                kind.append((role, counts[a]))
        if kind:
            kinds.setdefault(tuple(sorted(kind)), []).extend(range(a, b))
    return kinds


def _sweep(
    plan: Plan, intervals: Mapping[Pair, list[tuple[float, float]]], on: Mapping[str, int]
) -> tuple[float, float, dict[str, float]]:
    events: list[tuple[float, int, float, str]] = []
    for (role, state), spans in intervals.items():
        count = on.get(role, 0)
        gb = plan.states.get(role, {}).get(state, 0.0) * count
        if gb <= 0:
            continue
        key = f"{role}.{state}"
        for a, b in spans:
            if b - a > TOL:
                events.append((a, 1, gb, key))
                events.append((b, 0, -gb, key))
    events.sort()
    level = 0.0
    peak, at = 0.0, 0.0
    held: dict[str, float] = {}
    now: dict[str, float] = {}
    for time, _, delta, key in events:
        level += delta
        now[key] = now.get(key, 0.0) + delta
        if delta > 0 and level > peak + 1e-9:
            peak, at = level, time
            held = {k: v for k, v in now.items() if v > 1e-9}
    return peak, at, held


def host_overflow(plan: Plan, config: Config) -> HostPeak | None:
    """The node whose host memory overflows most, or None when every node fits."""
    peaks = [p for p in host_peaks(plan, config).values() if p.over]
    return max(peaks, key=lambda p: (p.peak_gb, -p.node)) if peaks else None
