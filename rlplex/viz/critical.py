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
from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise

from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, op_name
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
    touching: dict[int, list[int]] = defaultdict(list)
    for index, event in enumerate(events):
        for device in event.devices:
            touching[device].append(index)
    groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for device in sorted(touching):
        groups[tuple(touching[device])].append(device)
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
    on it instead of every op of a long record.
    """
    events = timeline.events
    by_id: dict[tuple[int, str], int] = {}
    by_op: dict[str, int] = {}
    for index, event in enumerate(events):
        by_id[(event.step, event.op)] = index
        by_op.setdefault(event.op, index)
    groups = device_groups(events)
    member: dict[int, list[object]] = defaultdict(list)
    # Each resource as (ends sorted, indices in that order) for bisecting.
    lanes: dict[object, tuple[list[float], list[int]]] = {}
    for key, indices in _resources(events, groups).items():
        ordered = sorted(indices, key=lambda i: events[i].end_s)
        lanes[key] = ([events[i].end_s for i in ordered], ordered)
        for i in indices:
            member[i].append(key)
    every = sorted(range(len(events)), key=lambda i: events[i].end_s)
    every_ends = [events[i].end_s for i in every]

    def latest_before(ends: list[float], order: list[int], t: float, me: int) -> int | None:
        pos = bisect.bisect_right(ends, t + TOLERANCE_S) - 1
        while pos >= 0:
            candidate = order[pos]
            # Skip the event itself, and a zero-length op at the very instant
            # a zero-length op happens: their order is unknowable.
            cand, ev = events[candidate], events[me]
            instant = cand.start_s == cand.end_s == ev.start_s == ev.end_s
            if candidate != me and cand.start_s <= ev.start_s and not instant:
                return candidate
            pos -= 1
        return None

    def release(index: int) -> int | None:
        event = events[index]
        candidates: list[int] = []
        for dep in (event.__pydantic_extra__ or {}).get("deps") or ():
            found = by_id.get((event.step, dep), by_op.get(dep))
            if found is not None and found != index:
                candidates.append(found)
        for key in member[index]:
            ends, order = lanes[key]
            found = latest_before(ends, order, event.start_s, index)
            if found is not None:
                candidates.append(found)
        best = max(candidates, key=lambda i: (events[i].end_s, i), default=None)
        if best is None or events[best].end_s < event.start_s - TOLERANCE_S:
            fallback = latest_before(every_ends, every, event.start_s, index)
            if (
                fallback is not None and events[fallback].end_s >= event.start_s - TOLERANCE_S
            ) or best is None:
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
    last = max(
        range(len(events)),
        key=lambda i: (events[i].end_s, events[i].kind in COMPUTE_KINDS, -i),
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

    Without ``meta["period_s"]`` it is the median time between the ends of
    successive steps (a single step: its span). A Ray record's meta is never
    trusted for it: records written before ``meta["plan"]`` existed carried the
    plan's prediction there, not a measurement.
    """
    if timeline.meta.get("period_s") and timeline.meta.get("source") != "ray":
        return float(timeline.meta["period_s"])
    steps = [s for s in timeline.steps if timeline.step_events(s)]
    if not steps:
        return 0.0
    ends = [timeline.step_span(s)[1] for s in steps]
    if len(ends) == 1:
        start, end = timeline.step_span(steps[0])
        return end - start
    diffs = sorted(b - a for a, b in pairwise(ends))
    return diffs[len(diffs) // 2]


def stage_table(timeline: Timeline, critical: tuple[int, ...] | None = None) -> list[StageRow]:
    """One row per stage and transfer kind, in order of first start."""
    if critical is None:
        critical = critical_path(timeline)
    # The chart and the printed table ask for the same rows of one timeline.
    key = f"stages/{hash(critical)}"
    return _cached(key, timeline.events, lambda: _stage_table(timeline, critical))


def _stage_table(timeline: Timeline, critical: tuple[int, ...]) -> list[StageRow]:
    on_path = {event_label(timeline.events[i]) for i in critical}
    steps = max(len({e.step for e in timeline.events}), 1)
    totals: dict[str, float] = {}
    first: dict[str, tuple[float, Event]] = {}
    for event in timeline.events:
        name = event_label(event)
        totals[name] = totals.get(name, 0.0) + event.duration_s
        if name not in first or event.start_s < first[name][0]:
            first[name] = (event.start_s, event)
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
