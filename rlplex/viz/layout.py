"""Where every bar of a Gantt chart goes: lanes, rows, colours and the header figures.

The HTML and PNG charts (and the side-by-side comparison) draw the same
picture, so the decisions are made once here, on plain data: one lane per GPU
grouped by node (or, past :data:`COLLAPSE_ABOVE` GPUs, one band per group of
GPUs that ran exactly the same ops, labelled with its count), a thin
copy-engine sub-lane under each GPU lane for offloads and reloads (they may
overlap compute), lanes for CPU roles and the driver, step boundaries, weight
syncs spanning the lanes they join, the critical path, and the header
figures (period, lower bound, gap, offload/reload seconds, utilisation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from rlplex.dag.export import role_colour
from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, OpKind
from rlplex.resources.cluster import BYTES_PER_GB
from rlplex.resources.devices import format_devices
from rlplex.timeline.record import Event, Timeline
from rlplex.viz.critical import critical_path, device_groups, period_of

COLLAPSE_ABOVE = 32
"""GPU lanes beyond which identical lanes collapse into bands (auto mode)."""
COLLAPSE_BARS_ABOVE = 200_000
"""GPU bars (an op times the GPUs it runs on) beyond which identical lanes collapse too:
a long record on 8 GPUs draws each op 8 times, which no one reads and which costs seconds."""
MAX_BANDS = 48
"""Bands beyond which GPUs are grouped by the roles they host instead of by identical ops."""
DRIVER = "driver"


@dataclass(frozen=True)
class Lane:
    """One horizontal lane: a GPU, a band of identical GPUs, a CPU role or the driver."""

    label: str
    """Text at the left: ``gpu 3``, ``gpu 0-255 ×256``, ``rewards (cpu)``, ``driver``."""
    group: str
    """Heading the lane sits under: ``node 0``, ``nodes 0-31``, ``cpu``."""
    kind: Literal["gpu", "cpu", "driver"]
    """What the row stands for: a view's own vocabulary, not an op kind."""
    devices: tuple[int, ...]
    """GPUs this lane stands for (empty for CPU lanes)."""
    rows: int
    """Compute rows: 1 for GPUs; more for CPU lanes whose ops overlap."""
    utilisation: float
    """Share of the drawn span the lane computes (mean over its GPUs)."""

    @property
    def count(self) -> int:
        return max(len(self.devices), 1)

    @property
    def has_copy_lane(self) -> bool:
        return self.kind == "gpu"


class Bar(NamedTuple):
    """One op drawn in one lane (a named tuple: a large chart has millions of them)."""

    lane: int
    """Index into :attr:`GanttLayout.lanes`."""
    row: int
    """Compute row within the lane, or -1 for the copy-engine sub-lane."""
    event: int
    """Index into the timeline's events."""


@dataclass(frozen=True)
class Summary:
    """The header figures of a chart."""

    period_s: float
    """Steady-state seconds per step."""
    lower_bound_s: float | None
    """The planner's lower bound on the period, when known."""
    gap: float | None
    """``period / lower bound - 1`` when the bound is known."""
    offload_s: float
    """Total seconds of offload ops (each op counted once, not per GPU)."""
    reload_s: float
    """Total seconds of reload ops."""
    moved_gb: float
    """GB moved by transfers and weight syncs, over all GPUs."""
    utilisation_mean: float
    """Mean over GPUs of the share of the span spent computing."""
    utilisation_min: float
    """Least busy GPU."""
    utilisation_max: float
    """Busiest GPU."""
    gpus: int
    """GPUs that appear in the record."""
    steps: int
    """Steps in the record."""
    span_s: float
    """From the first op's start to the last op's end."""

    def items(self) -> list[tuple[str, str]]:
        """Label/value pairs for headers, in display order."""
        out = [("period", f"{self.period_s:.2f} s")]
        if self.lower_bound_s is not None:
            out.append(("lower bound", f"{self.lower_bound_s:.2f} s"))
        if self.gap is not None:
            out.append(("gap", f"{self.gap * 100:.1f} %"))
        out += [
            ("offload", f"{self.offload_s:.2f} s"),
            ("reload", f"{self.reload_s:.2f} s"),
            (
                "GPU utilisation",
                f"{self.utilisation_mean * 100:.0f} % "
                f"(min {self.utilisation_min * 100:.0f}, max {self.utilisation_max * 100:.0f})",
            ),
            ("GPUs", str(self.gpus)),
            ("steps", str(self.steps)),
        ]
        return out


@dataclass(frozen=True)
class GanttLayout:
    """Everything a renderer needs to draw one timeline."""

    timeline: Timeline
    """The record drawn."""
    title: str
    """Chart title."""
    lanes: tuple[Lane, ...]
    """Lanes top to bottom."""
    bars: tuple[Bar, ...]
    """Bars to draw (zero-length ops are left out)."""
    critical: frozenset[int]
    """Event indices on the critical path."""
    t0: float
    """Start of the first op."""
    t1: float
    """End of the last op."""
    step_starts: tuple[tuple[int, float], ...]
    """(step, start of its first op), for boundary marks."""
    syncs: tuple[tuple[int, int, int], ...]
    """(event, first lane, last lane) of each weight sync, drawn across the lanes."""
    colours: dict[str, str]
    """Colour of each role."""
    summary: Summary
    """Header figures."""
    collapsed: bool
    """Whether GPU lanes were collapsed into bands."""
    lane_events: tuple[tuple[int, ...], ...] = field(default=())
    """Event indices per lane (bars included or not), for tooltips and tests."""

    def colour(self, event: Event) -> str:
        return self.colours.get(colour_role(event), "#888888")


def colour_role(event: Event) -> str:
    """The role whose colour an event takes: the source of a weight sync, else its role."""
    if event.kind == OpKind.WEIGHT_SYNC:
        # An extra field: read the extras directly (pydantic's attribute fallback is slow
        # on a record of 300,000 ops).
        return (event.__pydantic_extra__ or {}).get("from_role") or event.role or ""
    return event.role or ""


def role_colour_map(timeline: Timeline, colours: dict[str, str] | None = None) -> dict[str, str]:
    """The colour of every role in ``timeline``: ``colours`` first, then by role name alone."""
    out = dict(colours or {})
    # Roles in first-seen order; only weight syncs need a look at each event's extras.
    roles: dict[str, None] = {}
    for event in timeline.events:
        roles[colour_role(event) if event.kind == OpKind.WEIGHT_SYNC else event.role or ""] = None
    for role in roles:
        if role and role not in out:
            out[role] = role_colour(role)
    return out


def _busy(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of the (start, end) intervals."""
    intervals.sort()
    total, cur_start, cur_end = 0.0, None, None
    for start, end in intervals:
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def _rows(events: tuple[Event, ...], indices: list[int]) -> tuple[dict[int, int], int]:
    """Greedy row per event so that overlapping ops in one lane stack."""
    row_end: list[float] = []
    rows: dict[int, int] = {}
    for index in sorted(indices, key=lambda i: (events[i].start_s, i)):
        event = events[index]
        for row, end in enumerate(row_end):
            if end <= event.start_s + 1e-9:
                rows[index] = row
                row_end[row] = event.end_s
                break
        else:
            rows[index] = len(row_end)
            row_end.append(event.end_s)
    return rows, max(len(row_end), 1)


_new_bar = tuple.__new__


def _node_span(devices: tuple[int, ...], gpus_per_node: int) -> str:
    nodes = sorted({d // gpus_per_node for d in devices})
    text = format_devices(nodes)
    return f"node {text}" if len(nodes) == 1 else f"nodes {text}"


def build_layout(
    timeline: Timeline,
    *,
    title: str = "",
    gpus_per_node: int | None = None,
    collapse: bool | None = None,
    colours: dict[str, str] | None = None,
) -> GanttLayout:
    """Lay out ``timeline``; ``collapse=None`` collapses past :data:`COLLAPSE_ABOVE` GPUs
    or :data:`COLLAPSE_BARS_ABOVE` GPU bars."""
    events = timeline.events
    gpn = int(gpus_per_node or timeline.meta.get("gpus_per_node") or 8)
    # Plain lists read once: a record can hold 300,000 ops.
    starts = [e.start_s for e in events]
    ends = [e.end_s for e in events]
    compute = [e.kind in COMPUTE_KINDS for e in events]
    t0 = min(starts, default=0.0)
    t1 = max(ends, default=0.0)
    span = max(t1 - t0, 1e-12)
    groups = device_groups(events)
    num_gpus = sum(len(d) for d in groups.values())
    if collapse is None:
        # Each event is drawn once per GPU it ran on: once per device of its group.
        bars = sum(len(sig) * len(devs) for sig, devs in groups.items())
        collapse = num_gpus > COLLAPSE_ABOVE or bars > COLLAPSE_BARS_ABOVE

    # Utilisation is computed once per group of identical GPUs.
    # (Keyed by device, never by signature: hashing a signature of every event index
    # on each lookup is what made drawing quadratic in the record.)
    device_util = {}
    for sig, devs in groups.items():
        util = _busy([(starts[i], ends[i]) for i in sig if compute[i]]) / span
        device_util.update(dict.fromkeys(devs, util))
    device_sig = {d: sig for sig, devs in groups.items() for d in devs}

    # (devices, event indices) per GPU lane.
    gpu_lanes: list[tuple[tuple[int, ...], list[int]]] = []
    if not collapse:
        for device in sorted(device_sig):
            gpu_lanes.append(((device,), list(device_sig[device])))
    else:
        bands: list[tuple[tuple[int, ...], tuple[int, ...]]] = list(groups.items())
        if len(bands) > MAX_BANDS:
            # Too many distinct lanes (jittered measured runs): group by hosted roles.
            by_roles: dict[tuple[str, ...], tuple[list[int], set[int]]] = {}
            for sig, devs in bands:
                roles = tuple(sorted({events[i].role or "" for i in sig}))
                entry = by_roles.setdefault(roles, ([], set()))
                entry[0].extend(devs)
                entry[1].update(sig)
            bands = [(tuple(sorted(s)), tuple(sorted(d))) for d, s in by_roles.values()]
        for sig, devs in sorted(bands, key=lambda b: min(b[1])):
            gpu_lanes.append((tuple(devs), list(sig)))

    lanes: list[Lane] = []
    lane_events: list[tuple[int, ...]] = []
    bars: list[Bar] = []
    # Per event once, not per lane: drawn at all (positive length), and its GPU row.
    drawn = [end > start for start, end in zip(starts, ends, strict=True)]
    gpu_row = [-1 if e.kind in TRANSFER_KINDS else 0 for e in events]
    for devs, indices in gpu_lanes:
        if collapse:
            label = f"gpu {format_devices(devs)}" + (f" ×{len(devs)}" if len(devs) > 1 else "")
        else:
            label = f"gpu {devs[0]}"
        utils = [device_util[d] for d in devs]
        lane_index = len(lanes)
        lanes.append(Lane(label, _node_span(devs, gpn), "gpu", devs, 1, sum(utils) / len(utils)))
        lane_events.append(tuple(indices))
        # tuple.__new__ skips the named tuple's Python-level __new__ (a million bars).
        bars.extend(_new_bar(Bar, (lane_index, gpu_row[i], i)) for i in indices if drawn[i])

    cpu_roles: dict[str, list[int]] = {}
    for index, event in enumerate(events):
        if not event.devices:
            cpu_roles.setdefault(event.role or "?", []).append(index)
    for role in sorted(cpu_roles, key=lambda r: (r == DRIVER, list(cpu_roles).index(r))):
        indices = cpu_roles[role]
        rows, count = _rows(events, indices)
        kind: Literal["cpu", "driver"] = "driver" if role == DRIVER else "cpu"
        util = _busy([(starts[i], ends[i]) for i in indices]) / span
        lane_index = len(lanes)
        label = DRIVER if role == DRIVER else f"{role} (cpu)"
        lanes.append(Lane(label, "cpu", kind, (), count, util))
        lane_events.append(tuple(indices))
        bars.extend(_new_bar(Bar, (lane_index, rows[i], i)) for i in indices if drawn[i])

    # Weight syncs: the first and last lane holding one of their devices.
    lanes_of_device: dict[int, int] = {}
    for lane_index, lane in enumerate(lanes):
        for device in lane.devices:
            lanes_of_device[device] = lane_index
    syncs = []
    for index, event in enumerate(events):
        if event.kind == OpKind.WEIGHT_SYNC and event.devices:
            touched = {lanes_of_device[d] for d in event.devices if d in lanes_of_device}
            if touched:
                syncs.append((index, min(touched), max(touched)))

    first_start: dict[int, float] = {}
    offload_s = reload_s = 0.0
    moved_bytes = 0
    for event, start, end in zip(events, starts, ends, strict=True):
        step = event.step
        if step not in first_start or start < first_start[step]:
            first_start[step] = start
        kind = event.kind
        if kind == OpKind.OFFLOAD:
            offload_s += end - start
        elif kind == OpKind.RELOAD:
            reload_s += end - start
        if event.bytes:
            moved_bytes += event.bytes * (len(event.devices) or 1)
    steps = sorted(first_start)
    step_starts = tuple((s, first_start[s]) for s in steps)
    path = critical_path(timeline)

    period = period_of(timeline)
    lower = timeline.meta.get("lower_bound_s")
    lower_bound = float(lower) if lower else None
    utils_all = list(device_util.values()) or [0.0]
    summary = Summary(
        period_s=period,
        lower_bound_s=lower_bound,
        gap=(period / lower_bound - 1.0) if lower_bound else None,
        offload_s=offload_s,
        reload_s=reload_s,
        moved_gb=moved_bytes / BYTES_PER_GB,
        utilisation_mean=sum(utils_all) / len(utils_all),
        utilisation_min=min(utils_all),
        utilisation_max=max(utils_all),
        gpus=num_gpus,
        steps=len(steps),
        span_s=t1 - t0,
    )
    return GanttLayout(
        timeline=timeline,
        title=title or str(timeline.meta.get("title") or timeline.meta.get("source") or "timeline"),
        lanes=tuple(lanes),
        bars=tuple(bars),
        critical=frozenset(path),
        t0=t0,
        t1=t1,
        step_starts=step_starts,
        syncs=tuple(syncs),
        colours=role_colour_map(timeline, colours or timeline.meta.get("role_colours")),
        summary=summary,
        collapsed=collapse,
        lane_events=tuple(lane_events),
    )
