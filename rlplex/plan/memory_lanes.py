"""Memory over time of a plan, per group of GPUs and per node's host, for the pictures.

A table of peaks says how close a GPU comes to its capacity; it does not show
an ordering peak (weights reloaded before another role's offload is done,
verl PR #6685) unless one reads the op times. :func:`memory_lanes` turns a
plan into step functions a chart draws under the Gantt: for each group of GPUs
holding the same roles, the GB resident stacked by ``role.state`` plus the
running op's transient memory, with the capacity and the peak (when, during
which op); and for each kind of node, the host copies it holds
(:mod:`rlplex.plan.host`). The rules are the verifier's: a state holds GPU
memory from the start of its reload to the end of its offload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rlplex.config import Config
from rlplex.plan.fit import span
from rlplex.plan.host import host_intervals, host_resident, node_kinds
from rlplex.plan.model import Plan

TRANSIENT = "transient"
"""Stack key of a running op's transient memory."""


@dataclass(frozen=True)
class MemoryLane:
    """Memory of one GPU group (per GPU) or one kind of node (host), over time."""

    name: str
    """``GPUs 0-7`` or ``host of node 0-3``."""
    kind: Literal["gpu", "host"]
    """Whose memory: a GPU's or a node's host (a lane of memory, not an op kind)."""
    capacity_gb: float
    """``gpu_memory_gb`` or ``host_memory_gb``."""
    times: tuple[float, ...]
    """Breakpoints: the stacks hold from ``times[i]`` to ``times[i + 1]``."""
    stacks: dict[str, tuple[float, ...]]
    """``role.state`` (or ``transient``) -> GB at each breakpoint."""
    peak_gb: float
    """Most GB held at any instant, per GPU (a GPU lane) or per node (a host lane)."""
    peak_at_s: float
    """When the peak is first reached, seconds from the plan's start."""
    peak_op: str | None
    """The op running (GPU) or starting (host) when the peak is first reached."""

    @property
    def totals(self) -> tuple[float, ...]:
        n = len(self.times)
        return tuple(sum(v[i] for v in self.stacks.values()) for i in range(n))


def _series(
    name: str,
    kind: Literal["gpu", "host"],
    capacity: float,
    initial: dict[str, float],
    events: list[tuple[float, int, str, float, str]],
    t_end: float,
) -> MemoryLane:
    """Step functions from (time, order, key, delta, op) events; removals first at one instant."""
    events.sort(key=lambda e: (e[0], e[1]))
    keys = sorted({*initial, *(e[2] for e in events)}, key=lambda k: (k == TRANSIENT, k))
    level = dict.fromkeys(keys, 0.0)
    level.update(initial)
    times: list[float] = [0.0]
    rows: list[dict[str, float]] = [dict(level)]
    peak, peak_at, peak_op = sum(level.values()), 0.0, None
    running: dict[str, float] = {}
    i = 0
    while i < len(events):
        t = events[i][0]
        cause = None
        while i < len(events) and events[i][0] == t:
            _, _, key, delta, op = events[i]
            level[key] = level.get(key, 0.0) + delta
            if key == TRANSIENT:
                if delta > 0:
                    running[op] = delta
                else:
                    running.pop(op, None)
            if delta > 0:
                cause = op
            i += 1
        total = sum(level.values())
        if total > peak + 1e-9:
            peak, peak_at = total, t
            peak_op = next(iter(running), None) or cause
        if times[-1] == t:
            rows[-1] = dict(level)
        else:
            times.append(t)
            rows.append(dict(level))
    if times[-1] < t_end:
        times.append(t_end)
        rows.append(dict(level))
    stacks = {k: tuple(max(0.0, r.get(k, 0.0)) for r in rows) for k in keys}
    return MemoryLane(name, kind, capacity, tuple(times), stacks, peak, peak_at, peak_op)


def memory_lanes(plan: Plan, config: Config) -> list[MemoryLane]:
    """GPU memory per group of GPUs holding the same roles, then host memory per kind of node."""
    t_end = max((op.end_s for op in plan.ops), default=0.0)
    on: dict[int, list[str]] = {}
    for role, devices in plan.placement.items():
        for d in devices:
            on.setdefault(d, []).append(role)
    groups: dict[tuple[str, ...], list[int]] = {}
    for d in sorted(on):
        groups.setdefault(tuple(on[d]), []).append(d)
    lanes = []
    for roles, devices in groups.items():
        initial = {
            f"{r}.{s}": plan.states.get(r, {}).get(s, 0.0)
            for r in roles
            for s in plan.initial_residency.get(r, ())
        }
        events: list[tuple[float, int, str, float, str]] = []
        for op in plan.ops:
            if op.role not in roles:
                continue
            if op.kind == "reload" and op.state:
                gb = plan.states[op.role].get(op.state, 0.0)
                events.append((op.start_s, 1, f"{op.role}.{op.state}", gb, op.id))
            elif op.kind == "offload" and op.state:
                gb = plan.states[op.role].get(op.state, 0.0)
                events.append((op.end_s, 0, f"{op.role}.{op.state}", -gb, op.id))
            elif op.kind == "run" and op.memory_gb:
                events.append((op.start_s, 1, TRANSIENT, op.memory_gb, op.id))
                events.append((op.end_s, 0, TRANSIENT, -op.memory_gb, op.id))
        lanes.append(
            _series(f"GPUs {span(devices)}", "gpu", plan.capacity_gb, initial, events, t_end)
        )
    intervals = host_intervals(plan, config)
    capacity = plan.host_memory_gb or config.cluster.host_memory_gb
    for kind, nodes in node_kinds(plan.placement, config.cluster.gpus_per_node).items():
        count = dict(kind)
        events = []
        for (role, state), spans in intervals.items():
            gb = plan.states.get(role, {}).get(state, 0.0) * count.get(role, 0)
            if gb <= 0:
                continue
            for a, b in spans:
                events.append((a, 1, f"{role}.{state}", gb, f"{role}.{state}"))
                events.append((b, 0, f"{role}.{state}", -gb, f"{role}.{state}"))
        resident = host_resident(config, count)
        lanes.append(
            _series(f"host of node {span(nodes)}", "host", capacity, resident, events, t_end)
        )
    return lanes
