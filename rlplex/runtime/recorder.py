"""Record what a run did, op by op, in the Timeline format, flushed step by step.

For each op the recorder keeps the actual start and end on the driver's clock
(seconds from the start of the run: when the op was issued and when its last
worker call was seen done), the time the workers spent inside the call
(``worker_s``, the slowest worker), bytes moved per device by transfers and
weight syncs, the device memory on CUDA (:data:`MEMORY_FIELDS`, in bytes, the
largest over the op's workers), and the dispatch latency (from the moment the
driver saw the op's last dependency finish to the moment its calls were
issued). A step is written, with its ``step_s`` metric, as soon as
it and every earlier step are complete, and the file is fsynced, so a crash
loses at most the steps in flight. The plan is saved beside the record
(``run.jsonl`` -> ``run.plan.json``).

Output faults are found early and end cleanly: :func:`claim_record` checks,
before Ray starts, that the record can be written (not a directory, its folder
a folder and writable, the file not read-only, some disk space free) and takes
an exclusive lock (``run.jsonl.lock``, ``flock``) so two runs cannot write one
record; a write that fails mid-run (a full disk) raises :class:`RecordError`
naming the file and the steps already kept, which stops the run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlplex.errors import RlplexError
from rlplex.plan.ids import OpKind
from rlplex.plan.model import Plan
from rlplex.runtime.schedule import ExecOp, RunSchedule
from rlplex.timeline.record import Event, Timeline, TimelineWriter

MIN_FREE_BYTES = 16 * 2**20
"""Refuse to start a run whose record's disk has less free space than this."""

MEMORY_FIELDS = (
    "peak_allocated_bytes",
    "allocated_bytes",
    "reserved_bytes",
    "process_used_bytes",
)
"""Per-op device memory (:mod:`rlplex.runtime.memory_stats`), each the largest over the workers.

``peak_allocated_bytes``: run and weight_sync ops, the peak allocated by
tensors over the op's own calls (an overlapping transfer does not reset it);
``allocated_bytes``: allocated when the call ended (a transfer: resident after
it); ``reserved_bytes``: held by torch's caching allocator when it ended;
``process_used_bytes``: what NVML counts as used by the worker's process when
it ended (CUDA context, NCCL buffers and engine pools included), absent
without ``pynvml``. All absent without CUDA.
"""

TRANSFER_PHASE_FIELDS = {"copy_s": "copy_s", "release_s": "empty_cache_s"}
"""Record field -> the offload backend's ``last_phases`` key, for transfers, each the largest
over the workers: ``copy_s``, seconds waiting for the copies (offload, reload); ``release_s``,
seconds handing the freed memory back to the driver (offload: ``torch.cuda.empty_cache``).
Absent where the backend does not time its phases (vLLM, DeepSpeed, rehearsals)."""


class RecordError(RlplexError):
    """The record cannot be written (before the run, or mid-run: the run stops)."""


def plan_path(record: str | Path) -> Path:
    """Where the plan of a record is saved: ``run.jsonl`` -> ``run.plan.json``."""
    record = Path(record)
    return record.with_name(record.stem + ".plan.json")


def check_record_target(record: str | Path) -> Path:
    """Refuse a record path that cannot be written, before anything starts.

    Raises:
        RecordError: the path is a directory, a parent is a file, the folder or
            the file is not writable, or the disk is (nearly) full.
    """
    record = Path(record)
    if record.is_dir():
        raise RecordError(f"{record}: is a directory; give --record a file path")
    ancestor = record.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise RecordError(f"{record}: {ancestor} is a file, not a folder")
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecordError(f"{record}: cannot create its folder: {exc.strerror or exc}") from None
    for path in (record, plan_path(record)):
        target = path if path.exists() else path.parent
        if not os.access(target, os.W_OK):
            what = "the file is read-only" if path.exists() else "its folder is not writable"
            raise RecordError(f"{path}: cannot write the record: {what}")
    if shutil.disk_usage(record.parent).free < MIN_FREE_BYTES:
        raise RecordError(f"{record}: the disk is full (under {MIN_FREE_BYTES // 2**20} MB free)")
    return record


@contextlib.contextmanager
def claim_record(record: str | Path) -> Iterator[Path]:
    """Check the record path and hold an exclusive lock on it for the run.

    The lock is ``flock`` on ``RECORD.lock`` (released by the kernel if the
    process dies, so a crashed run never blocks the next one).

    Raises:
        RecordError: the path cannot be written (:func:`check_record_target`), or
            another run holds the lock (naming its pid).
    """
    record = check_record_target(record)
    if record.exists() and not record.is_file():
        # A device or pipe (``--record /dev/null``): nothing to protect, and no lock file
        # belongs next to it.
        yield record
        return
    lock_path = record.with_name(record.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RecordError(f"{lock_path}: cannot create the lock: {exc.strerror or exc}") from None
    try:
        import fcntl
    except ImportError:  # no flock (Windows): run unlocked
        fcntl = None  # type: ignore[assignment]
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                raise RecordError(
                    f"{record}: in use by another rlplex run (pid {owner}); give another --record"
                ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield record
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        os.close(fd)


class Recorder:
    """Collects events of a run and writes complete steps to a JSONL record."""

    def __init__(
        self,
        schedule: RunSchedule,
        plan: Plan,
        path: str | Path | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.t0 = time.perf_counter()
        """Driver clock origin: ``now()`` is seconds since the recorder started."""
        self.meta = dict(meta or {})
        self.path = Path(path) if path is not None else None
        self._writer: TimelineWriter | None = None
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                plan_path(self.path).write_text(plan.to_json(), encoding="utf-8")
                self._writer = TimelineWriter(self.path, meta=self.meta)
            except OSError as exc:
                raise RecordError(
                    f"{self.path}: cannot write the record: {exc.strerror or exc}"
                ) from None
        self._steps = schedule.steps
        self._remaining: dict[int, int] = defaultdict(int)
        self._planned: dict[int, tuple[float, float]] = {}
        for op in schedule.ops:
            self._remaining[op.step] += 1
            lo, hi = self._planned.get(op.step, (op.planned_start_s, op.planned_end_s))
            self._planned[op.step] = (min(lo, op.planned_start_s), max(hi, op.planned_end_s))
        self._events: dict[int, list[Event]] = defaultdict(list)
        self._metrics: dict[int, dict[str, Any]] = defaultdict(dict)
        self._next = 0
        self.flushed: list[int] = []
        """Steps written so far, in order."""

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def add(
        self,
        op: ExecOp,
        start_s: float,
        end_s: float,
        stats: Sequence[Mapping[str, Any]],
        *,
        gpus_per_worker: int = 1,
        dispatch_s: float = 0.0,
        extra: Mapping[str, Any] | None = None,
    ) -> list[tuple[int, dict[str, Any]]]:
        """Record a finished op; returns the steps this completed, with their metrics."""
        fields: dict[str, Any] = {
            "step": op.step,
            "op": op.id,
            "kind": op.work.kind,
            "devices": list(op.work.devices),
            "start_s": start_s,
            "end_s": end_s,
            "bytes": int(
                max((s.get("bytes", 0) for s in stats), default=0) // max(gpus_per_worker, 1)
            ),
            "planned_start_s": op.planned_start_s,
            "planned_end_s": op.planned_end_s,
            "dispatch_s": dispatch_s,
        }
        for key in ("stage", "role", "state", "from_role"):
            value = getattr(op.work, key)
            if value is not None:
                fields[key] = value
        if op.work.kind == OpKind.OFFLOAD:
            fields["dead"] = op.work.dead
        if stats:
            fields["worker_s"] = max(s.get("worker_s", 0.0) for s in stats)
            for key in MEMORY_FIELDS:
                values = [s[key] for s in stats if s.get(key) is not None]
                if values:
                    fields[key] = int(max(values))
            for key, phase in TRANSFER_PHASE_FIELDS.items():
                times = [s["phases"][phase] for s in stats if phase in (s.get("phases") or {})]
                if times:
                    fields[key] = max(times)
            for s in stats:
                if s.get("metrics"):
                    for k, v in s["metrics"].items():
                        self._metrics[op.step].setdefault(k, v)
        fields.update(extra or {})
        self._events[op.step].append(Event.model_validate(fields))
        self._remaining[op.step] -= 1
        return self._flush_ready()

    def _flush_ready(self) -> list[tuple[int, dict[str, Any]]]:
        done = []
        while self._next < self._steps and self._remaining[self._next] == 0:
            step = self._next
            metrics = self._step_metrics(step)
            if self._writer is not None:
                self._write(step, self._events[step], metrics)
            self.flushed.append(step)
            done.append((step, metrics))
            self._next += 1
        return done

    def _write(self, step: int, events: Sequence[Event], metrics: dict[str, Any] | None) -> None:
        """Write one step; a failure (disk full) stops the run, keeping the steps written."""
        assert self._writer is not None
        try:
            self._writer.write_step(step, events, metrics)
        except OSError as exc:
            kept = f"steps 0-{self.flushed[-1]}" if self.flushed else "no step"
            writer, self._writer = self._writer, None
            with contextlib.suppress(OSError):
                writer.close()
            raise RecordError(
                f"{self.path}: writing step {step} failed: {exc.strerror or exc};"
                f" the record keeps {kept}"
            ) from None

    def _step_metrics(self, step: int) -> dict[str, Any]:
        events = self._events[step]
        start = min(e.start_s for e in events)
        end = max(e.end_s for e in events)
        lo, hi = self._planned[step]
        # planned_step_s on the run's own time scale: a rehearsal at --time-scale X sleeps
        # X times the planned seconds, so its step_s compares with X times the plan's
        # (--time-scale 0 too: its plan is 0 s, as the run's summary predicts).
        scale = self.meta.get("time_scale")
        scale = 1.0 if scale is None else scale
        planned = (hi - lo) * scale
        metrics = {"step_s": end - start, "planned_step_s": planned, **self._metrics.get(step, {})}
        self._metrics[step] = metrics
        return metrics

    def close(self, failure: str | None = None) -> None:
        """Write the finished ops of unfinished steps (and the failure, as metrics); close."""
        for step in range(self._next, self._steps):
            events = self._events.get(step, [])
            if not events and failure is None:
                continue
            if self._writer is not None and (events or failure):
                metrics = {"incomplete": True, **({"failure": failure} if failure else {})}
                self._write(step, events, metrics if events or failure else None)
                self._metrics[step] = metrics
            failure = None  # the failure is reported once, on the first unfinished step
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()
            except OSError as exc:
                raise RecordError(f"{self.path}: closing the record failed: {exc}") from None

    def timeline(self) -> Timeline:
        events = tuple(e for step in sorted(self._events) for e in self._events[step])
        metrics = {s: m for s, m in self._metrics.items() if m}
        return Timeline(events=events, metrics=metrics, meta=self.meta)
