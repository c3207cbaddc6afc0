"""Predicted against measured memory, per op and per device: does the plan's memory hold?

A plan says what each role holds on its devices at every moment: a state from
the start of its reload to the end of its offload (``initial_residency`` from
the step's start), plus a running op's ``memory_gb``. A record made on a GPU
says what each op's own process reached: ``peak_allocated_bytes`` of a run or
weight sync (the op's own window, :mod:`rlplex.runtime.memory_stats`), and what
each process held after any op (``allocated_bytes``) and used in all
(``process_used_bytes``, from NVML: CUDA context and allocator cache included).

:func:`memory_check` sets them side by side:

- per op: the plan's GB for the op's role during the op (the role's states
  resident at any moment of it, plus the op's transient memory) against the
  median over the record's steps of the op's measured peak;
- per device: the plan's peak (:func:`rlplex.plan.peaks.peak_memory_by_device`)
  against the largest total the record shows, an op's own peak plus what every
  other process on the device held at that moment (its latest
  ``allocated_bytes``), and the same total in NVML's terms when the record has them.
  The plan must never be under the allocated total: a device it under-predicts is
  one that can run out of memory at launch.

Sizes are the config's: GB of 10^9 bytes, per device.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlplex.plan.model import Op, Plan
from rlplex.plan.peaks import peak_memory_by_device
from rlplex.resources.cluster import BYTES_PER_GB as GB
from rlplex.timeline.record import Event, Timeline

MEASURED_KINDS = ("run", "weight_sync")
"""Op kinds whose record holds their own peak (transfers hold the bytes after them)."""


@dataclass(frozen=True)
class OpMemory:
    """One op of the step: the plan's GB for its role against the measured peak."""

    op: str
    """The op's id without its step (``train``, ``weight_sync``)."""
    role: str
    """The role whose process the peak is of: a weight sync's source, which packs the
    buckets and records the sync's window (:class:`~rlplex.runtime.worker.RoleWorker`)."""
    predicted_gb: float
    """The role's states resident during the op plus the op's ``memory_gb``, per device."""
    measured_gb: float
    """Median over the compared steps of the op's ``peak_allocated_bytes``, in GB."""
    steps: int
    """Steps the median is over."""

    @property
    def error_pct(self) -> float | None:
        """Predicted against measured, percent (positive: the plan says more)."""
        if self.measured_gb <= 0:
            return None
        return 100.0 * (self.predicted_gb - self.measured_gb) / self.measured_gb


@dataclass(frozen=True)
class DevicePeak:
    """One device: the plan's peak against the largest total the record shows."""

    device: int
    """The GPU's global rank."""
    predicted_gb: float
    """The plan's peak on the device (:func:`~rlplex.plan.peaks.peak_memory_by_device`), GB."""
    measured_gb: float
    """The largest sum over the device's processes of allocated memory, in GB."""
    during: str
    """The op (``s3/train``) whose peak gave :attr:`measured_gb`."""
    used_gb: float | None
    """The largest sum of NVML's per-process used memory (context and cache included)."""

    @property
    def under_predicted(self) -> bool:
        return self.predicted_gb < self.measured_gb


@dataclass(frozen=True)
class MemoryCheck:
    """Per op and per device, predicted against measured; the steps compared."""

    ops: tuple[OpMemory, ...]
    """Each run and weight-sync op of the plan's repeating step on GPUs that the record
    measured, in plan order."""
    devices: tuple[DevicePeak, ...]
    """Each GPU that both the plan and the record's measured ops use, by rank."""
    steps: tuple[int, ...]
    """The record's steps compared: all but the first (warm-up), or the only one."""

    def within(self, tolerance_pct: float) -> int:
        """How many ops' predictions are within ``tolerance_pct`` of the measured peak."""
        return sum(
            1 for o in self.ops if o.error_pct is not None and abs(o.error_pct) <= tolerance_pct
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": list(self.steps),
            "ops": [
                {
                    "op": o.op,
                    "role": o.role,
                    "predicted_gb": o.predicted_gb,
                    "measured_gb": o.measured_gb,
                    "error_pct": o.error_pct,
                    "steps": o.steps,
                }
                for o in self.ops
            ],
            "devices": [
                {
                    "device": d.device,
                    "predicted_gb": d.predicted_gb,
                    "measured_gb": d.measured_gb,
                    "during": d.during,
                    "used_gb": d.used_gb,
                    "under_predicted": d.under_predicted,
                }
                for d in self.devices
            ],
        }


def _bytes(event: Event, field: str) -> int | None:
    value = getattr(event, field, None)
    if value is None and event.model_extra:
        value = event.model_extra.get(field)
    return int(value) if isinstance(value, int | float) and math.isfinite(value) else None


def has_memory(timeline: Timeline) -> bool:
    """Whether any op of ``timeline`` carries its own measured peak."""
    return any(_bytes(e, "peak_allocated_bytes") is not None for e in timeline.events)


def _local_id(op_id: str) -> str:
    return op_id.split("/", 1)[1] if op_id.startswith("s") and "/" in op_id else op_id


def _pattern_ops(plan: Plan) -> list[Op]:
    """The ops of one step of the plan: its repeating step when it unrolls several."""
    ops = [op for op in plan.ops if op.step == plan.pattern_step]
    return ops or list(plan.ops)


def _residency(plan: Plan) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(role, state) -> the intervals it holds its devices, over the plan's ops."""
    spans: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    since: dict[tuple[str, str], float] = {
        (role, state): 0.0 for role, states in plan.initial_residency.items() for state in states
    }
    for op in sorted(plan.ops, key=lambda o: (o.start_s, o.kind != "offload")):
        if not (op.role and op.state):
            continue
        key = (op.role, op.state)
        if op.kind == "reload" and key not in since:
            since[key] = op.start_s
        elif op.kind == "offload" and key in since:
            spans[key].append((since.pop(key), op.end_s))
    for key, start in since.items():
        spans[key].append((start, math.inf))
    return spans


def measured_role(op: Op) -> str:
    """Whose process ``op``'s recorded memory is: a weight sync's source, else the op's role.

    A sync's figures are the largest over its workers (source and destinations); the source
    holds the trainer's states and packs the buckets, so colocated it is the larger."""
    return (op.from_role if op.kind == "weight_sync" else None) or op.role or ""


def predicted_op_gb(
    plan: Plan, op: Op, spans: dict[tuple[str, str], list[tuple[float, float]]]
) -> float:
    """GB per device the plan gives the role :func:`measured_role` names while ``op`` runs:
    every state of it resident at any moment of the op, plus the op's ``memory_gb``."""
    role = measured_role(op)
    held = 0.0
    for (owner, state), intervals in spans.items():
        if owner != role:
            continue
        # Overlapping the op, or holding at its start (a zero-length op overlaps nothing).
        if any((start < op.end_s and end > op.start_s) or start <= op.start_s < end
               for start, end in intervals):  # fmt: skip
            held += plan.states.get(role, {}).get(state, 0.0)
    return held + op.memory_gb


def _event_role(event: Event) -> str:
    """Whose process ``event``'s memory figures are: a weight sync's source (its record names
    the destination as ``role`` and the source as ``from_role``), else its role."""
    source = (event.model_extra or {}).get("from_role") if event.kind == "weight_sync" else None
    return str(source or event.role or "")


def _device_totals(
    events: Iterable[Event],
) -> tuple[dict[int, tuple[float, str]], dict[int, float]]:
    """Per device: the largest allocated total (GB, the op giving it) and NVML total (GB)."""
    allocated: dict[int, dict[str, int]] = defaultdict(dict)  # device -> role -> bytes
    used: dict[int, dict[str, int]] = defaultdict(dict)
    best: dict[int, tuple[float, str]] = {}
    best_used: dict[int, float] = {}
    for event in sorted(events, key=lambda e: (e.end_s, e.start_s)):
        role = _event_role(event)
        peak = _bytes(event, "peak_allocated_bytes")
        for device in event.devices:
            if peak is not None and event.kind in MEASURED_KINDS:
                others = sum(b for r, b in allocated[device].items() if r != role)
                total = (peak + others) / GB
                if total > best.get(device, (-1.0, ""))[0]:
                    best[device] = (total, event.op)
            after = _bytes(event, "allocated_bytes")
            if after is not None:
                allocated[device][role] = after
            nvml = _bytes(event, "process_used_bytes")
            if nvml is not None:
                used[device][role] = nvml
                best_used[device] = max(best_used.get(device, 0.0), sum(used[device].values()) / GB)
    return best, best_used


def memory_check(plan: Plan, timeline: Timeline, warmup: int = 1) -> MemoryCheck | None:
    """Predicted against measured memory of ``timeline``'s steps after ``warmup``.

    Returns None when the record has no per-op memory (made without CUDA, or by
    another framework)."""
    if not has_memory(timeline):
        return None
    steps = sorted({e.step for e in timeline.events})
    compared = tuple(steps[warmup:] or steps)
    events = [e for e in timeline.events if e.step in set(compared)]
    peaks: dict[str, list[int]] = defaultdict(list)
    for event in events:
        peak = _bytes(event, "peak_allocated_bytes")
        if peak is not None and event.kind in MEASURED_KINDS:
            peaks[_local_id(event.op)].append(peak)
    spans = _residency(plan)
    ops = []
    for op in _pattern_ops(plan):
        local = _local_id(op.id)
        if op.kind not in MEASURED_KINDS or local not in peaks or not op.devices:
            continue  # CPU roles (rewards, the driver) hold no device memory
        ops.append(
            OpMemory(
                op=local,
                role=measured_role(op),
                predicted_gb=predicted_op_gb(plan, op, spans),
                measured_gb=statistics.median(peaks[local]) / GB,
                steps=len(peaks[local]),
            )
        )
    measured, used = _device_totals(events)
    planned = peak_memory_by_device(plan)
    devices = tuple(
        DevicePeak(
            device=d,
            predicted_gb=planned[d].peak_gb,
            measured_gb=measured[d][0],
            during=measured[d][1],
            used_gb=used.get(d),
        )
        for d in sorted(measured)
        if d in planned
    )
    return MemoryCheck(ops=tuple(ops), devices=devices, steps=compared)
