"""A scripted stand-in for one CUDA device's memory counters (tests on CPU).

Behaves like torch's caching-allocator statistics: one ``allocated`` counter
and one peak per device and process, shared by every thread; ``reset_peak``
sets the peak to what is allocated now, as ``torch.cuda.reset_peak_memory_stats``.
Tests script allocations over time with :meth:`FakeCudaMemory.alloc` and
:meth:`FakeCudaMemory.free`, from any thread.
"""

from __future__ import annotations

import threading

GB = 2**30


class FakeCudaMemory:
    """A fake :class:`rlplex.runtime.memory_stats.MemorySource`; every figure in bytes."""

    def __init__(self, allocated: int = 0, reserved: int = 0, process_used: int | None = None):
        self._lock = threading.Lock()
        self._allocated = allocated
        self._peak = allocated
        self._reserved = max(reserved, allocated)
        self._process_used = process_used
        self.resets = 0
        """How many times the peak was reset."""

    def alloc(self, nbytes: int) -> None:
        with self._lock:
            self._allocated += nbytes
            self._peak = max(self._peak, self._allocated)
            self._reserved = max(self._reserved, self._allocated)

    def free(self, nbytes: int) -> None:
        with self._lock:
            assert nbytes <= self._allocated, "freeing more than is allocated"
            self._allocated -= nbytes

    def allocated(self) -> int:
        with self._lock:
            return self._allocated

    def peak_allocated(self) -> int:
        with self._lock:
            return self._peak

    def reset_peak(self) -> None:
        with self._lock:
            self._peak = self._allocated
            self.resets += 1

    def reserved(self) -> int:
        with self._lock:
            return self._reserved

    def process_used(self) -> int | None:
        with self._lock:
            if self._process_used is None:
                return None
            return self._process_used + self._reserved
