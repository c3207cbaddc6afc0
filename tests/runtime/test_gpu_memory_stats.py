"""On CUDA: the memory tracker over torch's real counters, with a transfer thread overlapping.

Skips, with the reason, without CUDA (tests/conftest.py). The CPU tests with a
scripted device are in ``test_memory_stats.py`` and ``test_worker_memory.py``.
"""

from __future__ import annotations

import threading

import pytest

pytestmark = pytest.mark.gpu

MB = 2**20


def test_a_stage_window_keeps_its_peak_across_a_transfer_on_another_thread() -> None:
    torch = pytest.importorskip("torch")
    from rlplex.runtime.memory_stats import MemoryTracker, cuda_memory

    source = cuda_memory()
    assert source is not None
    tracker = MemoryTracker(source)
    base = source.allocated()
    peaked, transferred = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def transfer() -> None:
        assert peaked.wait(60)
        buffer = torch.empty(64 * MB, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        del buffer
        seen["transfer"] = tracker.reading()
        transferred.set()

    thread = threading.Thread(target=transfer)
    thread.start()
    window = tracker.open()
    block = torch.empty(512 * MB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    del block
    peaked.set()
    assert transferred.wait(60)
    reading = tracker.close(window)
    thread.join(60)
    assert reading.peak_allocated is not None
    assert reading.peak_allocated >= base + 512 * MB
    assert reading.reserved >= reading.allocated
    transfer_reading = seen["transfer"]
    assert transfer_reading.peak_allocated is None  # type: ignore[attr-defined]
    if reading.process_used is not None:  # pynvml present and this pid listed
        assert reading.process_used >= reading.reserved
