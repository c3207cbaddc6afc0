"""Per-op device memory that means what it says, though a worker's ops overlap.

A worker runs compute calls (stages, weight sync) and transfers
(offload/reload) on two threads of one process. Torch's peak counter
(``torch.cuda.max_memory_allocated``) is one per device and process, not one
per thread: an op that reads it and resets it takes whatever the other thread
allocated, and erases the peak the other op was building. A transfer that
overlapped a stage used to reset the stage's peak.

:class:`MemoryTracker` is the only reader and resetter of that counter. Each
compute op opens a :class:`Window`; whenever a window opens or closes, the
tracker reads the device's peak since its last reset, folds it into every
window still open, and resets the counter. Each window thus ends with the
device's peak over exactly its own span, however windows overlap or nest.
Transfers open no window: they report the bytes they moved (their own figure)
and the memory resident after them (:meth:`MemoryTracker.reading`), and reset
nothing.

The device is read through a :class:`MemorySource`: :class:`CudaMemory` (the
current CUDA device through torch, and the process's used memory through
NVML when ``pynvml``, from ``nvidia-ml-py``, imports); tests script a fake one.
Torch is imported only by :func:`cuda_memory`, when user code already has it.

Limits: between reading the peak and resetting it, another thread's
allocation that is freed again within those microseconds is missed (the reset
sets the peak to the memory allocated at that moment, so nothing that stays
allocated is). The peak is the device's, not one thread's: a transfer's copy
buffers count in the peak of the stage it overlaps (they are on the device
while the stage runs).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol


class MemorySource(Protocol):
    """One device's memory counters, in bytes."""

    def allocated(self) -> int:
        """Bytes allocated by tensors now (``torch.cuda.memory_allocated``)."""
        ...

    def peak_allocated(self) -> int:
        """Most bytes allocated since the last :meth:`reset_peak`."""
        ...

    def reset_peak(self) -> None:
        """Start a new peak from the bytes allocated now."""
        ...

    def reserved(self) -> int:
        """Bytes held by the caching allocator now (``torch.cuda.memory_reserved``)."""
        ...

    def process_used(self) -> int | None:
        """Bytes the driver counts as used by this process on the device; None: unknown."""
        ...


@dataclass(frozen=True)
class MemoryReading:
    """What one worker call saw of its device's memory, in bytes."""

    allocated: int
    """Allocated by tensors at the end of the call (resident after a transfer)."""
    reserved: int
    """Held by the caching allocator at the end of the call."""
    process_used: int | None = None
    """Used by this process on the device per NVML (context, NCCL, pools); None: unknown."""
    peak_allocated: int | None = None
    """Peak allocated over the call's own window (compute calls); None for transfers."""

    def stats(self) -> dict[str, int]:
        """The record's fields (``*_bytes``); unknown figures are left out."""
        out = {"allocated_bytes": self.allocated, "reserved_bytes": self.reserved}
        if self.peak_allocated is not None:
            out["peak_allocated_bytes"] = self.peak_allocated
        if self.process_used is not None:
            out["process_used_bytes"] = self.process_used
        return out


@dataclass(eq=False)
class Window:
    """One open compute call; ``peak`` grows as the tracker folds device peaks into it."""

    peak: int
    """Most bytes allocated on the device since the window opened (at first, the bytes
    allocated when it opened)."""
    closed: bool = field(default=False)
    """Whether :meth:`MemoryTracker.close` has ended it (closing it again is refused)."""


class MemoryTracker:
    """Shares one device peak counter among overlapping windows (see the module docstring).

    Thread-safe: both of a worker's concurrency groups call it.
    """

    def __init__(self, source: MemorySource) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._open: list[Window] = []

    def _fold(self) -> None:
        """Give the device's peak since the last reset to every open window; reset it."""
        peak = self.source.peak_allocated()
        self.source.reset_peak()
        for window in self._open:
            window.peak = max(window.peak, peak)

    def open(self) -> Window:
        """Start a window at the bytes allocated now (earlier peaks go to older windows)."""
        with self._lock:
            self._fold()
            window = Window(peak=self.source.allocated())
            self._open.append(window)
            return window

    def close(self, window: Window) -> MemoryReading:
        """End ``window``: its peak, and the memory now.

        Raises:
            ValueError: the window is not open on this tracker (closed twice).
        """
        with self._lock:
            if window.closed or window not in self._open:
                raise ValueError("memory window closed twice or not opened by this tracker")
            self._fold()
            self._open.remove(window)
            window.closed = True
            return self._now(peak=window.peak)

    def reading(self) -> MemoryReading:
        """The memory now, without a peak; resets nothing (for transfers)."""
        with self._lock:
            return self._now(peak=None)

    def _now(self, peak: int | None) -> MemoryReading:
        return MemoryReading(
            allocated=self.source.allocated(),
            reserved=self.source.reserved(),
            process_used=self.source.process_used(),
            peak_allocated=peak,
        )


class CudaMemory:
    """The current CUDA device of this process, through torch (and NVML where it imports)."""

    def __init__(self, torch: Any) -> None:
        self._cuda = torch.cuda
        self._nvml: Any = None
        self._handle: Any = None
        self._nvml_tried = False

    def allocated(self) -> int:
        return int(self._cuda.memory_allocated())

    def peak_allocated(self) -> int:
        return int(self._cuda.max_memory_allocated())

    def reset_peak(self) -> None:
        self._cuda.reset_peak_memory_stats()

    def reserved(self) -> int:
        return int(self._cuda.memory_reserved())

    def process_used(self) -> int | None:
        if not self._nvml_tried:
            self._nvml_tried = True
            self._nvml, self._handle = _nvml_handle(self._cuda)
        if self._handle is None:
            return None
        return process_used_bytes(self._nvml, self._handle, os.getpid())


def _nvml_handle(cuda: Any) -> tuple[Any, Any]:
    """``(pynvml, handle of the current device)``, or ``(None, None)`` when NVML is unusable.

    The device is found by its UUID, since NVML numbers the physical GPUs and
    ignores ``CUDA_VISIBLE_DEVICES``.
    """
    try:
        import pynvml

        pynvml.nvmlInit()
        uuid = str(cuda.get_device_properties(cuda.current_device()).uuid)
        if not uuid.startswith(("GPU-", "MIG-")):
            uuid = "GPU-" + uuid
        return pynvml, pynvml.nvmlDeviceGetHandleByUUID(uuid)
    except Exception:  # no pynvml, no driver library, an old torch, a MIG slice: leave it out
        return None, None


def process_used_bytes(nvml: Any, handle: Any, pid: int) -> int | None:
    """Bytes NVML counts as used on ``handle`` by process ``pid``; None: not listed or unknown.

    A process in a container with its own pid namespace is listed under its
    host pid, so it is not found and the figure is left out.
    """
    try:
        processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:
        return None
    used = [p.usedGpuMemory for p in processes if p.pid == pid and p.usedGpuMemory is not None]
    return int(sum(used)) if used else None


def cuda_memory() -> CudaMemory | None:
    """The current CUDA device's memory, if user code has imported torch and it sees a GPU.

    Never imports torch itself (``import rlplex`` and CPU workers stay torch-free).
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return CudaMemory(torch)
