"""The Timeline: what happened (or was predicted) op by op, as JSON lines.

The simulator, the Ray executor and the log importers all produce this one
type, so predicted and measured steps are drawn, compared and replayed with
the same code. On disk it is JSON lines (DESIGN.md, "The timeline record"):
one object per op, plus one ``{"step": N, "metrics": {...}}`` object per step.
:class:`TimelineWriter` flushes each step as it completes, so a crash loses at
most the step in flight.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlplex.errors import ConfigError

REQUIRED_EVENT_FIELDS = ("step", "op", "kind", "devices", "start_s", "end_s")


class Event(BaseModel):
    """One op as it happened: required fields of DESIGN.md plus any extras."""

    model_config = ConfigDict(frozen=True, extra="allow")

    step: int
    """The RL step."""
    op: str
    """The op id, as in the plan (``s3/train``)."""
    kind: str
    """``run``, ``offload``, ``reload`` or ``weight_sync``."""
    devices: tuple[int, ...] = ()
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

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(sorted({e.step for e in self.events} | set(self.metrics)))

    def step_events(self, step: int) -> tuple[Event, ...]:
        return tuple(e for e in self.events if e.step == step)

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
    def read_jsonl(cls, path: str | Path) -> Timeline:
        """Read a record; a truncated last line (a crash mid-write) is tolerated."""
        events: list[Event] = []
        metrics: dict[int, dict[str, Any]] = {}
        meta: dict[str, Any] = {}
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise ConfigError("file not found", file=str(path)) from None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):
                    break
                raise ConfigError(
                    "not a JSON object", file=str(path), line=number, value=line[:80]
                ) from None
            if not isinstance(obj, dict):
                raise ConfigError("not a JSON object", file=str(path), line=number, value=line[:80])
            if "meta" in obj and "step" not in obj:
                meta.update(obj["meta"])
            elif "metrics" in obj and "op" not in obj:
                metrics.setdefault(int(obj["step"]), {}).update(obj["metrics"])
            else:
                try:
                    events.append(Event.model_validate(obj))
                except ValidationError as exc:
                    first = exc.errors()[0]
                    field = ".".join(str(p) for p in first["loc"])
                    raise ConfigError(
                        f"bad event: {first['msg']}", file=str(path), line=number, field=field
                    ) from None
        return cls(events=tuple(events), metrics=metrics, meta=meta)


class TimelineWriter:
    """Appends a record step by step, flushing and syncing after each step."""

    def __init__(self, path: str | Path, meta: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = self.path.open("w", encoding="utf-8")
        if meta:
            self._write({"meta": meta})
            self._flush()

    def _write(self, obj: dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, separators=(", ", ": ")) + "\n")

    def _flush(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def write_step(
        self,
        step: int,
        events: Iterable[Event | dict[str, Any]],
        metrics: dict[str, Any] | None = None,
    ) -> None:
        """Write one step's events (and metrics, if any) and flush them to disk."""
        for event in events:
            if isinstance(event, Event):
                self._write(event.model_dump(mode="json", exclude_none=True))
            else:
                self._write(event)
        if metrics is not None:
            self._write({"step": step, "metrics": metrics})
        self._flush()

    def close(self) -> None:
        if not self._file.closed:
            self._flush()
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
        moved = round(gb * 2**30)
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
