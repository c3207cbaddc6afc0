"""The critical path of a timeline and the per-stage time table.

Knowing which ops *determined* the step time tells a user what to speed up:
shortening an op off the critical path changes nothing. For each op we find
the op that released it: among its ``deps`` (when the record has them) and the
ops that ran before it on the same device (compute or copy engine) or the
same CPU role, the one that ended last. Walking back from the op that ends
last gives the critical path. Records without ``deps`` (measured runs) still
work: the resource chain, and failing that the op that ended just before,
stands in for the missing edges.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass

from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, op_name
from rlplex.timeline.periods import median_period
from rlplex.timeline.record import Event, Timeline

TOLERANCE_S = 1e-6
"""Slack under which an op counts as having started when its predecessor ended."""


_CACHE: dict[str, tuple[tuple[Event, ...], object]] = {}
"""One result per function for the last events tuple seen: a chart and its table ask
for the same groups and critical path of one timeline (the tuple is immutable)."""


def _cached(name: str, events: tuple[Event, ...], compute):  # type: ignore[no-untyped-def]
    hit = _CACHE.get(name)
    if hit is not None and hit[0] is events:
        return hit[1]
    value = compute()
    _CACHE[name] = (events, value)
    return value


def device_groups(events: tuple[Event, ...]) -> dict[tuple[int, ...], tuple[int, ...]]:
    """Devices grouped by the exact set of events that touch them.

    Keys are the event-index signatures, values the devices in rank order.
    Devices in one group are indistinguishable to every view, so work is
    done once per group instead of once per GPU (1,024 GPUs often fall into
    a handful of groups).
    """
    return _cached("groups", events, lambda: _device_groups(events))


def _device_groups(events: tuple[Event, ...]) -> dict[tuple[int, ...], tuple[int, ...]]:
    # Events grouped by device set first: a record has a handful of sets, so each
    # device's event list is a merge of a few lists, not an append per event and GPU.
    by_set: dict[tuple[int, ...], list[int]] = {}
    for index, event in enumerate(events):
        if event.devices:
            by_set.setdefault(event.devices, []).append(index)
    sets_of_device: dict[int, list[int]] = defaultdict(list)
    for number, devices in enumerate(by_set):
        for device in dict.fromkeys(devices):
            sets_of_device[device].append(number)
    lists = list(by_set.values())
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    signature_of: dict[tuple[int, ...], tuple[int, ...]] = {}
    for device in sorted(sets_of_device):
        member = tuple(sets_of_device[device])
        sig = signature_of.get(member)
        if sig is None:
            merged = (
                lists[member[0]]
                if len(member) == 1
                else sorted(index for number in member for index in lists[number])
            )
            sig = signature_of[member] = tuple(merged)
        groups[sig].append(device)
    return {sig: tuple(devs) for sig, devs in groups.items()}


def _resources(
    events: tuple[Event, ...], groups: dict[tuple[int, ...], tuple[int, ...]]
) -> dict[object, list[int]]:
    """Event indices per resource: one per device group, one per CPU role."""
    resources: dict[object, list[int]] = {}
    # Keyed by the group's position, not its signature: a signature is a tuple of up to
    # every event index, and hashing it on each lookup made the walk quadratic.
    for number, sig in enumerate(groups):
        resources[("gpus", number)] = list(sig)
    for index, event in enumerate(events):
        if not event.devices:
            resources.setdefault(("cpu", event.role or "?"), []).append(index)
    return resources


def predecessors(timeline: Timeline) -> list[int | None]:
    """For each event, the index of the event that released it (None: nothing did)."""
    release = predecessor_finder(timeline)
    return [release(index) for index in range(len(timeline.events))]


def predecessor_finder(timeline: Timeline):  # type: ignore[no-untyped-def]
    """A function ``index -> the event that released it`` (None: nothing did).

    The indexes are built once; each question then costs a few bisections, so
    the critical path (a walk back from the last op) asks only about the ops
    on it instead of every op of a long record. Times are read into plain
    lists first: on a 300,000-op record, attribute reads were most of the walk.
    """
    events = timeline.events
    starts = [event.start_s for event in events]
    ends = [event.end_s for event in events]
    # Built on first use: measured records have no deps, and most questions are
    # answered by a resource without the fallback over every op.
    by_id: dict[tuple[int, str], int] = {}
    by_op: dict[str, int] = {}
    every: list[int] = []
    every_ends: list[float] = []

    def index_ids() -> None:
        for index, event in enumerate(events):
            by_id[(event.step, event.op)] = index
            by_op.setdefault(event.op, index)

    def index_ends() -> None:
        every.extend(sorted(range(len(events)), key=ends.__getitem__))
        every_ends.extend(ends[i] for i in every)

    groups = device_groups(events)
    # Each resource as (ends sorted, indices in that order) for bisecting.
    lanes: dict[object, tuple[list[float], list[int]]] = {}
    for key, indices in _resources(events, groups).items():
        ordered = sorted(indices, key=ends.__getitem__)
        lanes[key] = ([ends[i] for i in ordered], ordered)
    # The resources of an event depend only on its device set (or CPU role): a record
    # has a handful of those, so they are resolved once per set, not once per event.
    group_of_device = {
        device: ("gpus", number) for number, devs in enumerate(groups.values()) for device in devs
    }
    lanes_of_devices: dict[tuple[int, ...], tuple[tuple[list[float], list[int]], ...]] = {}

    def lanes_of(event: Event) -> tuple[tuple[list[float], list[int]], ...]:
        if not event.devices:
            return (lanes[("cpu", event.role or "?")],)
        found = lanes_of_devices.get(event.devices)
        if found is None:
            keys = dict.fromkeys(group_of_device[d] for d in event.devices)
            found = lanes_of_devices[event.devices] = tuple(lanes[k] for k in keys)
        return found

    def latest_before(lane_ends: list[float], order: list[int], me: int) -> int | None:
        start = starts[me]
        instant_me = start == ends[me]
        pos = bisect.bisect_right(lane_ends, start + TOLERANCE_S) - 1
        while pos >= 0:
            candidate = order[pos]
            # Skip the event itself, and a zero-length op at the very instant
            # a zero-length op happens: their order is unknowable.
            cand_start = starts[candidate]
            instant = instant_me and cand_start == ends[candidate] == start
            if candidate != me and cand_start <= start and not instant:
                return candidate
            pos -= 1
        return None

    def release(index: int) -> int | None:
        event = events[index]
        # The candidate that ended last (ties: the later index) wins.
        best: int | None = None
        best_end = -math.inf
        extra = event.__pydantic_extra__
        for dep in extra.get("deps") or () if extra else ():
            if not by_op:
                index_ids()
            found = by_id.get((event.step, dep), by_op.get(dep))
            if found is not None and found != index:
                end = ends[found]
                if end > best_end or (end == best_end and found > best):  # type: ignore[operator]
                    best, best_end = found, end
        for lane_ends, order in lanes_of(event):
            found = latest_before(lane_ends, order, index)
            if found is not None:
                end = ends[found]
                if end > best_end or (end == best_end and found > best):  # type: ignore[operator]
                    best, best_end = found, end
        start = starts[index]
        if best is None or best_end < start - TOLERANCE_S:
            if not every:
                index_ends()
            fallback = latest_before(every_ends, every, index)
            if (fallback is not None and ends[fallback] >= start - TOLERANCE_S) or best is None:
                best = fallback
        return best

    return release


def critical_path(timeline: Timeline) -> tuple[int, ...]:
    """Indices of the events on the critical path, first to last.

    The path ends at the event that ends last (a compute op on ties) and
    follows :func:`predecessors` back to an op nothing released.
    """
    events = timeline.events
    if not events:
        return ()
    return _cached("critical", events, lambda: _critical_path(timeline))


def _critical_path(timeline: Timeline) -> tuple[int, ...]:
    events = timeline.events
    release = predecessor_finder(timeline)
    # The op that ends last; on ties a compute op, then the earliest recorded.
    t_end = max(event.end_s for event in events)
    last = min(
        (i for i, event in enumerate(events) if event.end_s == t_end),
        key=lambda i: (events[i].kind not in COMPUTE_KINDS, i),
    )
    path = [last]
    seen = {last}
    while (prev := release(path[-1])) is not None and prev not in seen:
        path.append(prev)
        seen.add(prev)
    return tuple(reversed(path))


def event_label(event: Event) -> str:
    """The name of an event's row in tables: the stage, or ``offload role/state``."""
    if event.kind in TRANSFER_KINDS:
        return f"{event.kind} {event.role}/{event.state}"
    return event.stage or op_name(event.op)


@dataclass(frozen=True)
class StageRow:
    """Time spent in one stage (or one kind of transfer) per step."""

    name: str
    """Stage name, or ``offload role/state`` / ``reload role/state``."""
    role: str
    """The role it runs on (weight_sync: the destination)."""
    kind: str
    """run, offload, reload or weight_sync."""
    seconds: float
    """Mean seconds per step (sum of the durations of its ops in a step)."""
    share: float
    """Its share of the work: ``seconds`` over the sum of every row's seconds (rows add up
    to 1, also in async runs, where stages of several steps overlap within one period)."""
    critical: bool
    """Whether one of its ops lies on the critical path."""


def period_of(timeline: Timeline) -> float:
    """Steady-state seconds per step: the recorded ``period_s`` or an estimate.

    Without ``meta["period_s"]`` it is :func:`~rlplex.timeline.periods.median_period`.
    A Ray record's meta is never trusted for it: records written before
    ``meta["plan"]`` existed carried the plan's prediction there, not a measurement.
    """
    if timeline.meta.get("period_s") and timeline.meta.get("source") != "ray":
        return float(timeline.meta["period_s"])
    return median_period(timeline)


def stage_table(timeline: Timeline, critical: tuple[int, ...] | None = None) -> list[StageRow]:
    """One row per stage and transfer kind, in order of first start."""
    if critical is None:
        critical = critical_path(timeline)
    # The chart and the printed table ask for the same rows of one timeline, one with
    # the path in walk order and one sorted: only membership matters.
    key = f"stages/{hash(tuple(sorted(critical)))}"
    return _cached(key, timeline.events, lambda: _stage_table(timeline, critical))


def _stage_table(timeline: Timeline, critical: tuple[int, ...]) -> list[StageRow]:
    labels = [event_label(event) for event in timeline.events]
    on_path = {labels[i] for i in critical}
    steps = max(len({e.step for e in timeline.events}), 1)
    totals: dict[str, float] = {}
    first: dict[str, tuple[float, Event]] = {}
    for event, name in zip(timeline.events, labels, strict=True):
        start = event.start_s
        totals[name] = totals.get(name, 0.0) + (event.end_s - start)
        if name not in first or start < first[name][0]:
            first[name] = (start, event)
    rows = []
    work = sum(totals.values())
    for name in sorted(first, key=lambda n: (first[n][0], n)):
        event = first[name][1]
        rows.append(
            StageRow(
                name=name,
                role=event.role or "",
                kind=event.kind,
                seconds=totals[name] / steps,
                share=totals[name] / work if work > 0 else 0.0,
                critical=name in on_path,
            )
        )
    return rows


def format_seconds(seconds: float) -> str:
    """A duration readable at any scale: ``241.02 s``, ``3.14 s``, ``12.5 ms``, ``40 µs``."""
    size = abs(seconds)
    if size == 0:
        return "0 s"
    if size >= 0.1:
        return f"{seconds:.2f} s"
    if size >= 1e-4:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"
