"""The memory tracker: each window gets the device peak over its own span, however they overlap."""

from __future__ import annotations

import subprocess
import sys
import types
from typing import Any

import pytest
from fake_memory import GB, FakeCudaMemory
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplex.runtime import memory_stats
from rlplex.runtime.memory_stats import (
    CudaMemory,
    MemoryReading,
    MemoryTracker,
    cuda_memory,
    process_used_bytes,
)


def test_a_window_gets_its_own_peak_not_one_from_before_it_opened() -> None:
    memory = FakeCudaMemory(allocated=2 * GB)
    tracker = MemoryTracker(memory)
    memory.alloc(5 * GB)  # a peak of 7 GB before the window
    memory.free(5 * GB)
    window = tracker.open()
    memory.alloc(3 * GB)
    memory.free(2 * GB)
    reading = tracker.close(window)
    assert reading.peak_allocated == 5 * GB
    assert reading.allocated == 3 * GB
    assert reading.reserved == 7 * GB


def test_overlapping_windows_each_get_their_own_peak() -> None:
    memory = FakeCudaMemory(allocated=1 * GB)
    tracker = MemoryTracker(memory)
    stage = tracker.open()
    memory.alloc(6 * GB)  # the stage's peak: 7 GB
    memory.free(6 * GB)
    transfer = tracker.open()  # opens and later closes while the stage is open
    memory.alloc(2 * GB)
    memory.free(2 * GB)
    assert tracker.close(transfer).peak_allocated == 3 * GB
    memory.alloc(4 * GB)
    memory.free(4 * GB)
    assert tracker.close(stage).peak_allocated == 7 * GB


def test_interleaved_windows() -> None:
    memory = FakeCudaMemory()
    tracker = MemoryTracker(memory)
    first = tracker.open()
    memory.alloc(4 * GB)
    second = tracker.open()  # starts at 4 GB allocated
    memory.free(3 * GB)
    assert tracker.close(first).peak_allocated == 4 * GB
    memory.alloc(1 * GB)
    assert tracker.close(second).peak_allocated == 4 * GB


def test_a_reading_resets_nothing() -> None:
    memory = FakeCudaMemory(allocated=1 * GB)
    tracker = MemoryTracker(memory)
    memory.alloc(8 * GB)
    memory.free(8 * GB)
    reading = tracker.reading()
    assert reading.peak_allocated is None and reading.allocated == 1 * GB
    assert memory.resets == 0 and memory.peak_allocated() == 9 * GB


def test_closing_a_window_twice_is_an_error() -> None:
    tracker = MemoryTracker(FakeCudaMemory())
    window = tracker.open()
    tracker.close(window)
    with pytest.raises(ValueError, match="closed twice"):
        tracker.close(window)
    with pytest.raises(ValueError, match="not opened by this tracker"):
        MemoryTracker(FakeCudaMemory()).close(tracker.open())


def test_reading_fields_leave_out_what_is_unknown() -> None:
    assert MemoryReading(allocated=1, reserved=2).stats() == {
        "allocated_bytes": 1,
        "reserved_bytes": 2,
    }
    assert MemoryReading(allocated=1, reserved=2, process_used=3, peak_allocated=4).stats() == {
        "allocated_bytes": 1,
        "reserved_bytes": 2,
        "process_used_bytes": 3,
        "peak_allocated_bytes": 4,
    }


actions = st.lists(
    st.tuples(st.sampled_from(["alloc", "free", "open", "close"]), st.integers(0, 50)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(actions)
def test_every_window_peak_is_the_true_peak_over_its_span(script: list[tuple[str, int]]) -> None:
    memory = FakeCudaMemory(allocated=10)
    tracker = MemoryTracker(memory)
    open_windows: list[tuple[Any, int]] = []  # (window, its true peak so far)
    for action, n in script:
        if action == "alloc":
            memory.alloc(n)
            now = memory.allocated()
            open_windows = [(w, max(truth, now)) for w, truth in open_windows]
        elif action == "free":
            memory.free(min(n, memory.allocated()))
        elif action == "open":
            open_windows.append((tracker.open(), memory.allocated()))
        elif open_windows:
            window, truth = open_windows.pop(n % len(open_windows))
            assert tracker.close(window).peak_allocated == truth
    for window, truth in open_windows:
        assert tracker.close(window).peak_allocated == truth


# -- the CUDA source, with stand-ins for torch and pynvml -------------------------


class FakeProcess:
    def __init__(self, pid: int, used: int | None) -> None:
        self.pid = pid
        self.usedGpuMemory = used


class FakeNvml:
    def __init__(self, processes: list[FakeProcess], fail: bool = False) -> None:
        self.processes = processes
        self.fail = fail
        self.uuids: list[str] = []

    def nvmlInit(self) -> None:
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.uuids.append(uuid)
        return f"handle:{uuid}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[FakeProcess]:
        assert handle.startswith("handle:")
        return self.processes


def fake_torch(memory: FakeCudaMemory, available: bool = True) -> Any:
    cuda = types.SimpleNamespace(
        is_available=lambda: available,
        memory_allocated=memory.allocated,
        max_memory_allocated=memory.peak_allocated,
        reset_peak_memory_stats=memory.reset_peak,
        memory_reserved=memory.reserved,
        current_device=lambda: 0,
        get_device_properties=lambda index: types.SimpleNamespace(uuid="1234-abcd"),
    )
    return types.SimpleNamespace(cuda=cuda)


def test_process_used_is_this_process_only() -> None:
    nvml = FakeNvml([FakeProcess(7, 3 * GB), FakeProcess(8, 5 * GB), FakeProcess(7, None)])
    assert process_used_bytes(nvml, "handle:x", 7) == 3 * GB
    assert process_used_bytes(nvml, "handle:x", 9) is None  # not listed (another pid namespace)


def test_cuda_source_reads_torch_and_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    memory = FakeCudaMemory(allocated=2 * GB, reserved=4 * GB)
    nvml = FakeNvml([FakeProcess(os.getpid(), 5 * GB)])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    source = CudaMemory(fake_torch(memory))
    memory.alloc(1 * GB)
    assert (source.allocated(), source.peak_allocated(), source.reserved()) == (
        3 * GB,
        3 * GB,
        4 * GB,
    )
    source.reset_peak()
    assert memory.resets == 1
    assert source.process_used() == 5 * GB
    assert nvml.uuids == ["GPU-1234-abcd"]  # NVML numbers physical GPUs: found by UUID


@pytest.mark.parametrize("nvml", [None, FakeNvml([], fail=True)], ids=["absent", "no-driver"])
def test_without_nvml_process_used_is_left_out(monkeypatch: pytest.MonkeyPatch, nvml: Any) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", nvml)  # None: ``import pynvml`` fails
    source = CudaMemory(fake_torch(FakeCudaMemory(allocated=GB)))
    assert source.process_used() is None
    assert MemoryTracker(source).reading().stats() == {
        "allocated_bytes": GB,
        "reserved_bytes": GB,
    }


def test_cuda_memory_needs_torch_already_imported_and_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert cuda_memory() is None
    monkeypatch.setitem(sys.modules, "torch", fake_torch(FakeCudaMemory(), available=False))
    assert cuda_memory() is None
    monkeypatch.setitem(sys.modules, "torch", fake_torch(FakeCudaMemory(allocated=GB)))
    source = cuda_memory()
    assert source is not None and source.allocated() == GB


def test_importing_the_module_does_not_import_torch() -> None:
    code = f"import {memory_stats.__name__}, sys; assert 'torch' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
