"""Perfetto / Chrome trace export of a Timeline, and import back.

ui.perfetto.dev and chrome://tracing already zoom, search and measure
millions of slices, so a timeline exported here opens there with no tool of
ours. Layout of the ``traceEvents`` JSON: a process per node with a thread per
GPU and a separate copy-engine thread per GPU (transfers overlap compute); one
``cpu`` process with a thread per CPU role and the driver (more threads when a
role's ops overlap); complete (``X``) events in microseconds; flow arrows
(``s``/``f``) for the ``deps`` a record carries; metadata events naming
processes and threads. Each slice carries its op's fields in ``args`` and the
trace keeps the timeline's meta and metrics under ``rlplex``, so
:func:`read_trace` rebuilds the same Timeline (times within 1 µs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError
from rlplex.plan.ids import TRANSFER_KINDS
from rlplex.timeline.record import Event, Timeline

CPU_PID = 1_000_000
"""Process id of the CPU roles and the driver (nodes use their index + 1)."""
_SLICE_FIELDS = ("op", "step", "kind", "stage", "role", "state", "bytes")


def _gpu_thread(device: int, gpus_per_node: int, copy: bool) -> tuple[int, int]:
    """(pid, tid) of a GPU's compute or copy-engine thread."""
    local = device % gpus_per_node
    return device // gpus_per_node + 1, 2 * local + (2 if copy else 1)


def _cpu_threads(events: tuple[Event, ...]) -> dict[int, int]:
    """A tid per CPU event: one per role, extra ones where a role's ops overlap.

    Chrome's format needs the slices of one thread to nest, so overlapping
    ops (async steps) go to the role's next free thread.
    """
    roles: dict[str, list[float]] = {}
    base: dict[str, int] = {}
    tids: dict[int, int] = {}
    order = sorted(
        (i for i, e in enumerate(events) if not e.devices),
        key=lambda i: (events[i].start_s, i),
    )
    for index in order:
        event = events[index]
        role = event.role or "?"
        if role not in base:
            base[role] = len(base) * 100 + 1
            roles[role] = []
        ends = roles[role]
        for row, end in enumerate(ends):
            if end <= event.start_s + 1e-9:
                ends[row] = event.end_s
                tids[index] = base[role] + row
                break
        else:
            tids[index] = base[role] + len(ends)
            ends.append(event.end_s)
    return tids


def _args(event: Event, device: int | None) -> dict[str, Any]:
    fields = event.model_dump(mode="json", exclude_none=True)
    fields.pop("devices", None)
    args = {k: fields[k] for k in _SLICE_FIELDS if k in fields}
    args.update({k: v for k, v in fields.items() if k not in args})
    # Exact seconds ride along: ts/dur in microseconds would round them.
    args["device"] = device
    return args


def to_trace(timeline: Timeline, gpus_per_node: int | None = None) -> dict[str, Any]:
    """The trace object (``{"traceEvents": [...], ...}``) of ``timeline``."""
    gpn = int(gpus_per_node or timeline.meta.get("gpus_per_node") or 8)
    events = timeline.events
    out: list[dict[str, Any]] = []
    named: set[tuple[int, int]] = set()
    processes: set[int] = set()

    def name_thread(pid: int, tid: int, process: str, thread: str, sort: int) -> None:
        if pid not in processes:
            processes.add(pid)
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                        "args": {"name": process}})  # fmt: skip
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                        "args": {"sort_index": pid}})  # fmt: skip
        if (pid, tid) not in named:
            named.add((pid, tid))
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                        "args": {"name": thread}})  # fmt: skip
            out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                        "args": {"sort_index": sort}})  # fmt: skip

    cpu_tids = _cpu_threads(events)
    # Where each op's first slice is, for flow arrows.
    anchor: dict[tuple[int, str], tuple[int, int]] = {}
    slices: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        copy = event.kind in TRANSFER_KINDS
        name = event.stage or (f"{event.kind} {event.state}" if event.state else event.kind)
        cat = event.kind
        ts, dur = event.start_s * 1e6, event.duration_s * 1e6
        shared = _args(event, None)
        if event.devices:
            # Full fields on the first device's slice; the others name the op
            # only, which keeps 1,024-GPU traces small.
            brief = {k: shared[k] for k in ("op", "step", "kind") if k in shared}
            for position, device in enumerate(event.devices):
                args = shared if position == 0 else brief
                pid, tid = _gpu_thread(device, gpn, copy)
                thread = f"gpu {device}" + (" copy engine" if copy else "")
                name_thread(pid, tid, f"node {device // gpn}", thread, tid)
                slices.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                               "ts": ts, "dur": dur,
                               "args": {**args, "device": device}})  # fmt: skip
                anchor.setdefault((event.step, event.op), (pid, tid))
        else:
            tid = cpu_tids[index]
            role = event.role or "?"
            name_thread(CPU_PID, tid, "cpu", role if tid % 100 == 1 else f"{role} #{tid % 100}",
                        tid)  # fmt: skip
            slices.append({"ph": "X", "name": name, "cat": cat, "pid": CPU_PID, "tid": tid,
                           "ts": ts, "dur": dur, "args": shared})  # fmt: skip
            anchor.setdefault((event.step, event.op), (CPU_PID, tid))
    out.extend(slices)

    # Flow arrows dep -> op, when the record lists deps.
    by_op: dict[str, Event] = {}
    for event in events:
        by_op.setdefault(event.op, event)
    by_key = {(e.step, e.op): e for e in events}
    flow = 0
    for event in events:
        for dep_id in getattr(event, "deps", None) or ():
            dep = by_key.get((event.step, dep_id)) or by_op.get(dep_id)
            if dep is None:
                continue
            src = anchor[(dep.step, dep.op)]
            dst = anchor[(event.step, event.op)]
            flow += 1
            # "s" binds to the dep's slice (its start is inside it); "f" with
            # bp "e" binds to the slice enclosing the op's start.
            out.append({"ph": "s", "id": flow, "name": "dep", "cat": "dep", "pid": src[0],
                        "tid": src[1], "ts": dep.start_s * 1e6})  # fmt: skip
            out.append({"ph": "f", "bp": "e", "id": flow, "name": "dep", "cat": "dep",
                        "pid": dst[0], "tid": dst[1], "ts": event.start_s * 1e6})  # fmt: skip
    return {
        "traceEvents": out,
        "displayTimeUnit": "ms",
        "rlplex": {
            "format": 1,
            "gpus_per_node": gpn,
            "meta": timeline.meta,
            "metrics": {str(k): v for k, v in timeline.metrics.items()},
        },
    }


def write_trace(timeline: Timeline, path: str | Path, gpus_per_node: int | None = None) -> Path:
    """Write the trace JSON of ``timeline`` to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_trace(timeline, gpus_per_node), separators=(",", ":")),
                    encoding="utf-8")  # fmt: skip
    return path


def from_trace(trace: dict[str, Any], file: str | None = None) -> Timeline:
    """The Timeline of a trace written by :func:`to_trace`.

    Raises:
        ConfigError: the object has no ``traceEvents`` list, or none of its
            slices carries rlplex's ``args.op`` (a trace not written by rlplex).
    """
    raw = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(raw, list):
        raise ConfigError("not a Chrome/Perfetto trace: no traceEvents list", file=file)
    merged: dict[tuple[int, str], dict[str, Any]] = {}
    for item in raw:
        if not isinstance(item, dict) or item.get("ph") != "X":
            continue
        args = item.get("args") or {}
        if "op" not in args or "step" not in args:
            continue
        key = (int(args["step"]), str(args["op"]))
        entry = merged.get(key)
        if entry is None:
            start = float(item["ts"]) / 1e6
            end = start + float(item.get("dur", 0)) / 1e6
            entry = {"start_s": start, "end_s": end, "devices": []}
            merged[key] = entry
        # Only one slice per op carries every field (and exact seconds);
        # merge whatever each slice has, in any order.
        for name, value in args.items():
            if name in ("start_s", "end_s") or (name != "device" and name not in entry):
                entry[name] = value
        if args.get("device") is not None:
            entry["devices"].append(int(args["device"]))
    if not merged:
        raise ConfigError("no rlplex slices (args.op) in this trace", file=file)
    events = tuple(Event.model_validate(e) for e in merged.values())
    info = trace.get("rlplex") or {}
    metrics = {int(k): v for k, v in (info.get("metrics") or {}).items()}
    return Timeline(events=events, metrics=metrics, meta=dict(info.get("meta") or {}))


def read_trace(path: str | Path) -> Timeline:
    """Read a trace file written by :func:`write_trace` as a Timeline."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not JSON: {exc.msg}", file=str(path), line=exc.lineno) from None
    return from_trace(data, file=str(path))


def is_trace_file(path: str | Path) -> bool:
    """Whether ``path`` looks like a trace (a JSON object with ``traceEvents``), not JSONL."""
    try:
        with Path(path).open(encoding="utf-8") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.lstrip().startswith("{") and '"traceEvents"' in head


def read_timeline(path: str | Path, skip_bad_lines: bool = False) -> Timeline:
    """A Timeline from a JSONL record or from a trace written by rlplex.

    Raises:
        ConfigError: the file is missing, is not UTF-8 text (an image, say), or
            is neither format.
    """
    try:
        if is_trace_file(path):
            return read_trace(path)
        return Timeline.read_jsonl(path, skip_bad_lines=skip_bad_lines)
    except UnicodeDecodeError:
        raise ConfigError(
            "not a text file: expected an rlplex timeline (JSONL) or a trace rlplex wrote",
            file=str(path),
        ) from None
