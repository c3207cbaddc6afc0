"""The Timeline: what happened (or was predicted) op by op, as JSON lines.

The simulator, the Ray executor and the log importers all produce this one
type, so predicted and measured steps are drawn, compared and replayed with
the same code. On disk it is JSON lines (DESIGN.md, "The timeline record"):
one object per op, plus one ``{"step": N, "metrics": {...}}`` object per step.
:class:`TimelineWriter` flushes each step as it completes, so a crash loses at
most the step in flight.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PrivateAttr,
    ValidationError,
)

from rlplex.errors import ConfigError
from rlplex.resources.cluster import BYTES_PER_GB

REQUIRED_EVENT_FIELDS = ("step", "op", "kind", "devices", "start_s", "end_s")


class Event(BaseModel):
    """One op as it happened: required fields of DESIGN.md plus any extras."""

    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)

    step: int = Field(ge=0)
    """The RL step (from 0)."""
    op: str
    """The op id, as in the plan (``s3/train``)."""
    kind: str
    """``run``, ``offload``, ``reload`` or ``weight_sync`` (an
    :class:`~rlplex.plan.ids.OpKind` value). Text on the wire: a record made
    elsewhere is read as it is, so a view can show an op kind rlplex does not run."""
    devices: tuple[NonNegativeInt, ...] = ()
    """Global GPU ranks; empty for CPU and driver stages."""
    start_s: float
    """Seconds from the start of the run."""
    end_s: float
    """Seconds from the start of the run."""
    stage: str | None = None
    """The stage, for run and weight_sync ops."""
    role: str | None = None
    """The role (weight_sync: the destination)."""
    state: str | None = None
    """The state moved by a transfer."""
    bytes: int = 0
    """Bytes moved per device by a transfer or weight sync."""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


class Timeline(BaseModel):
    """Events and per-step metrics of a run, predicted or measured."""

    model_config = ConfigDict(frozen=True)

    events: tuple[Event, ...] = ()
    """Ops in the order they were recorded."""
    metrics: dict[int, dict[str, Any]] = Field(default_factory=dict)
    """Per-step metrics (``reward/mean``, ``step_s``, ...)."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form facts about the run: source, config file, device name."""

    _by_step: tuple[tuple[Event, ...], dict[int, tuple[Event, ...]]] | None = PrivateAttr(None)
    """Cache of :meth:`_step_index`: the events tuple it was built from and its events per
    step; None until first asked (rebuilt when ``events`` is another tuple)."""

    def _step_index(self) -> dict[int, tuple[Event, ...]]:
        """Events per step, built once per events tuple (scanning per step was quadratic)."""
        cached = self._by_step
        if cached is None or cached[0] is not self.events:
            groups: dict[int, list[Event]] = {}
            for event in self.events:
                groups.setdefault(event.step, []).append(event)
            cached = (self.events, {step: tuple(evs) for step, evs in groups.items()})
            self._by_step = cached
        return cached[1]

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(sorted(set(self._step_index()) | set(self.metrics)))

    def step_events(self, step: int) -> tuple[Event, ...]:
        return self._step_index().get(step, ())

    def step_span(self, step: int) -> tuple[float, float]:
        """Start of the first and end of the last op of ``step``."""
        events = self.step_events(step)
        if not events:
            raise KeyError(step)
        return min(e.start_s for e in events), max(e.end_s for e in events)

    def write_jsonl(self, path: str | Path) -> None:
        with TimelineWriter(path, meta=self.meta) as writer:
            by_step: dict[int, list[Event]] = {}
            for event in self.events:
                by_step.setdefault(event.step, []).append(event)
            for step in self.steps:
                writer.write_step(step, by_step.get(step, ()), self.metrics.get(step))

    @classmethod
    def read_jsonl(cls, path: str | Path, skip_bad_lines: bool = False) -> Timeline:
        """Read a record; a truncated last line (a crash mid-write) is tolerated.

        A bad line (not JSON, an event missing a field, a NaN or negative
        duration, an op of a step seen before) is a ConfigError naming the file
        and line, or, with ``skip_bad_lines``, skipped and counted; the warnings
        are in ``meta["read_warnings"]``. Lines are streamed, and event lines go
        straight from JSON to :class:`Event` in pydantic's parser (most of the
        time of reading a large record).
        """
        from rlplex.bulk import gc_paused

        with gc_paused():
            return cls._read_jsonl(path, skip_bad_lines)

    @classmethod
    def _read_jsonl(cls, path: str | Path, skip_bad_lines: bool) -> Timeline:
        from rlplex.timeline.importers.base import Collector, parse_json, read_lines

        out = Collector("rlplex", str(path), skip_bad_lines)
        events: list[Event] = []
        metrics: dict[int, dict[str, Any]] = {}
        meta: dict[str, Any] = {}
        validate = Event.__pydantic_validator__.validate_json
        seen = out.first_seen
        for number, line, is_last in read_lines(path):
            if '"metrics"' not in line and '"meta"' not in line:
                # The fast path of a well-formed event (nearly every line of a large record):
                # the bookkeeping of the checks is paid only by a line that fails one.
                try:
                    event = validate(line)
                except (ValidationError, RecursionError):
                    pass  # the slow path below says what is wrong
                else:
                    key = (event.step, event.op)
                    if event.end_s >= event.start_s - 1e-9 and key not in seen:
                        seen[key] = number
                        events.append(event)
                        continue
                    out.at(number, line, is_last)
                    if _positive(event, out) and out.first_time(key, f"op {event.op!r}"):
                        events.append(event)
                    continue
            out.at(number, line, is_last)
            obj, why = parse_json(line)
            if why is not None or not isinstance(obj, dict):
                out.bad_line(number, why or "not a JSON object", line, is_last)
                continue
            step = obj.get("step")
            if "meta" in obj and "step" not in obj:
                if isinstance(obj["meta"], dict):
                    meta.update(obj["meta"])
                else:
                    out.bad_line(number, "'meta' must be an object", line, is_last)
            elif "metrics" in obj and "op" not in obj:
                if isinstance(step, bool) or not isinstance(step, int):
                    out.bad_line(number, "metrics need an integer 'step'", line, is_last)
                elif not isinstance(obj["metrics"], dict):
                    out.bad_line(number, "'metrics' must be an object", line, is_last)
                elif out.first_time(("metrics", step), f"the metrics of step {step}"):
                    metrics.setdefault(step, {}).update(obj["metrics"])
            else:
                try:
                    event = Event.model_validate(obj)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    # A whole-event check (end before start) has no location: name end_s.
                    field = ".".join(str(p) for p in first["loc"]) or "end_s"
                    if out.skip_bad_lines or is_last:
                        out.bad_line(number, f"bad event: {field}: {first['msg']}", line, is_last)
                        continue
                    raise ConfigError(
                        f"bad event: {first['msg']}",
                        file=str(path),
                        line=number,
                        field=field or None,
                    ) from None
                if _positive(event, out) and out.first_time(
                    (event.step, event.op), f"op {event.op!r}"
                ):
                    events.append(event)
        warnings = out.result().warnings
        if warnings:
            meta = {**meta, "read_warnings": list(warnings)}
        return cls(events=tuple(events), metrics=metrics, meta=meta)


def _positive(event: Event, out: Any) -> bool:
    """An event that ends before it starts is a bad line (checked here, not by a
    validator on :class:`Event`: a Python validator per event costs a third of the
    time of reading a large record)."""
    if event.end_s >= event.start_s - 1e-9:
        return True
    number, text, _ = out.current
    out.bad_line(
        number,
        f"op {event.op!r}: end_s {event.end_s!r} is before start_s {event.start_s!r}"
        " (a negative duration)",
        text,
        False,
    )
    return False


class TimelineWriter:
    """Appends a record step by step, flushing and syncing after each step.

    A step is written whole or not at all: its lines go to the file in one
    write, and a write that fails (a full disk) truncates the file back to
    the end of the last step written before the error is raised, so a record
    never ends in half a step.
    """

    def __init__(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = self.path.open("wb", buffering=0)
        self._size = 0
        if meta:
            self._append([{"meta": meta}])

    def _append(self, objects: Iterable[dict[str, Any]]) -> None:
        data = "".join(json.dumps(obj, separators=(", ", ": ")) + "\n" for obj in objects)
        encoded = data.encode("utf-8")
        view = memoryview(encoded)
        fd = self._file.fileno()
        try:
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            # Drop the part of this write that made it (truncating frees space on a full disk).
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
                os.lseek(fd, self._size, os.SEEK_SET)
            raise
        self._size += len(encoded)

    def write_step(
        self,
        step: int,
        events: Iterable[Event | dict[str, Any]],
        metrics: dict[str, Any] | None = None,
    ) -> None:
        """Write one step's events (and metrics, if any), whole, and sync them to disk."""
        objects = [
            event.model_dump(mode="json", exclude_none=True) if isinstance(event, Event) else event
            for event in events
        ]
        if metrics is not None:
            objects.append({"step": step, "metrics": metrics})
        self._append(objects)

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> TimelineWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def timeline_from_plan(plan: Any, meta: dict[str, Any] | None = None) -> Timeline:
    """The plan's ops as a predicted Timeline (bytes per device from each op's GB)."""
    events = []
    for op in plan.ops:
        fields = op.model_dump(exclude_none=True)
        gb = fields.pop("gb", 0.0)
        fields.pop("id")
        fields.pop("memory_gb", None)
        moved = round(gb * BYTES_PER_GB)
        events.append(
            Event.model_validate({**fields, "op": op.id, "bytes": moved, "memory_gb": op.memory_gb})
        )
    info = {
        "source": "plan",
        "mode": plan.mode,
        "period_s": plan.period_s,
        "lower_bound_s": plan.lower_bound_s,
        "makespan_s": plan.makespan_s,
    }
    return Timeline(events=tuple(events), meta={**info, **(meta or {})})
