"""A worker's per-op memory: a transfer overlapping a stage leaves the stage's peak alone.

The worker's two concurrency groups are two threads here, calling a plain
``RoleWorker`` (no Ray) whose device is a scripted :class:`FakeCudaMemory`.
Events, not sleeps, fix the interleaving.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from fake_memory import GB, FakeCudaMemory
from plans import colocated_plan

from rlplex.runtime.context import WorkerInfo
from rlplex.runtime.errors import RemoteStageError
from rlplex.runtime.recorder import MEMORY_FIELDS, Recorder
from rlplex.runtime.schedule import expand_plan
from rlplex.runtime.worker import LOGICAL_GPUS_ENV, RoleWorker
from rlplex.stages.offload import BookkeepingOffload

WAIT_S = 30.0


def wait(event: threading.Event) -> None:
    assert event.wait(WAIT_S), "the other thread never got there"


class ScriptedOffload(BookkeepingOffload):
    """Offloads 4 GB of optimizer state once the stage has passed its peak."""

    def __init__(self, memory: FakeCudaMemory, go: threading.Event) -> None:
        super().__init__(resident=("weights", "optimizer"))
        self.memory = memory
        self.go = go

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        wait(self.go)
        self.memory.alloc(1 * GB)  # a staging buffer
        self.memory.free(1 * GB)
        self.memory.free(4 * GB)  # the optimizer leaves the device
        super().offload(states, dead=dead)
        return 4 * GB


def make_worker(memory: FakeCudaMemory, monkeypatch: pytest.MonkeyPatch, **impls: Any) -> Any:
    monkeypatch.delenv(LOGICAL_GPUS_ENV, raising=False)
    info = WorkerInfo(role="actor_train", devices=(0,), initial_residency=("weights", "optimizer"))
    return RoleWorker(info, None, impls, memory=memory)


def run_meta(stage: str) -> dict[str, Any]:
    return {"stage": stage, "step": 0, "planned_s": 0.0, "inputs": []}


def test_a_transfer_overlapping_a_stage_does_not_lower_its_peak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory = FakeCudaMemory(allocated=10 * GB, reserved=12 * GB)
    stage_freed, transfer_done = threading.Event(), threading.Event()

    def train(ctx: Any) -> str:
        memory.alloc(6 * GB)  # activations: the stage's peak is 16 GB
        memory.free(6 * GB)
        stage_freed.set()
        wait(transfer_done)  # the transfer ran and was measured in between
        memory.alloc(1 * GB)
        memory.free(1 * GB)
        return "trained"

    worker = make_worker(memory, monkeypatch, train=train)
    worker.offloader = ScriptedOffload(memory, go=stage_freed)
    worker._has_backend = True
    out: dict[str, Any] = {}

    def compute() -> None:
        out["result"], out["stage"] = worker.run(run_meta("train"))

    def transfer() -> None:
        try:
            out["transfer"] = worker.transfer("offload", ["optimizer"], False, 0.0)
        finally:
            transfer_done.set()

    threads = [threading.Thread(target=compute), threading.Thread(target=transfer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert out["result"] == "trained"
    stage, moved = out["stage"], out["transfer"]
    assert stage["peak_allocated_bytes"] == 16 * GB  # not the 10 GB left after the transfer
    assert stage["allocated_bytes"] == 6 * GB
    assert stage["reserved_bytes"] == 16 * GB
    # The transfer's own figures: what it moved and what is resident after it.
    assert moved["bytes"] == 4 * GB
    assert moved["allocated_bytes"] == 6 * GB
    assert "peak_allocated_bytes" not in moved
    assert moved["resident"] == ["weights"]


def test_a_failed_stage_closes_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    memory = FakeCudaMemory(allocated=1 * GB)

    def broken(ctx: Any) -> None:
        memory.alloc(2 * GB)
        raise RuntimeError("CUDA out of memory")

    worker = make_worker(memory, monkeypatch, broken=broken, fine=lambda: None)
    with pytest.raises(RemoteStageError, match="CUDA out of memory"):
        worker.run(run_meta("broken"))
    assert worker._tracker._open == []
    memory.free(2 * GB)
    _, stats = worker.run(run_meta("fine"))
    assert stats["peak_allocated_bytes"] == 1 * GB  # the failed stage's 3 GB is not in it


def test_without_a_gpu_there_are_no_memory_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)
    monkeypatch.delenv(LOGICAL_GPUS_ENV, raising=False)
    worker = RoleWorker(WorkerInfo(role="rewards"), None, {"score": lambda: 1})
    _, stats = worker.run(run_meta("score"))
    assert not set(MEMORY_FIELDS) & set(stats)
    assert not set(MEMORY_FIELDS) & set(worker.transfer("offload", ["weights"], False, 0.0))


def test_the_record_keeps_the_largest_figure_over_the_workers() -> None:
    plan = colocated_plan()
    schedule = expand_plan(plan, 1)
    recorder = Recorder(schedule, plan)
    run = next(op for op in schedule.ops if op.work.kind == "run" and op.work.role == "actor_train")
    offload = next(op for op in schedule.ops if op.work.kind == "offload")
    recorder.add(
        run,
        0.0,
        1.0,
        [
            {"worker_s": 1.0, "peak_allocated_bytes": 9, "allocated_bytes": 3,
             "reserved_bytes": 12},
            {"worker_s": 1.0, "peak_allocated_bytes": 7, "allocated_bytes": 5,
             "reserved_bytes": 10, "process_used_bytes": 20},
        ],
    )  # fmt: skip
    recorder.add(offload, 1.0, 2.0, [{"worker_s": 1.0, "bytes": 4, "allocated_bytes": 2}])
    events = {e.op: e.model_extra or {} for e in recorder.timeline().events}
    assert {k: events[run.id][k] for k in MEMORY_FIELDS} == {
        "peak_allocated_bytes": 9,
        "allocated_bytes": 5,
        "reserved_bytes": 12,
        "process_used_bytes": 20,
    }
    assert events[offload.id]["allocated_bytes"] == 2
    assert not {"peak_allocated_bytes", "reserved_bytes", "process_used_bytes"} & set(
        events[offload.id]
    )


def test_a_bucketed_weight_sync_measures_the_source_over_the_whole_sync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    from rlplex.stages import weight_sync

    source_memory = FakeCudaMemory(allocated=1 * GB)
    target_memory = FakeCudaMemory(allocated=1 * GB)
    share_packed, release = weight_sync.share_packed, weight_sync.release

    def scripted_share(named: Any, bucket: Any) -> Any:
        source_memory.alloc(2 * GB)  # the packed bucket on the source's device
        return share_packed(named, bucket)

    def scripted_release(shared: Any) -> None:
        source_memory.free(2 * GB)
        release(shared)

    monkeypatch.setattr(weight_sync, "share_packed", scripted_share)
    monkeypatch.setattr(weight_sync, "release", scripted_release)

    class Weights:
        def __init__(self, value: float) -> None:
            self.weights = {"a": torch.full((256,), value), "b": torch.full((256,), value)}

        def named_weights(self) -> dict[str, Any]:
            return self.weights

    source = make_worker(source_memory, monkeypatch)
    target = make_worker(target_memory, monkeypatch)
    source.state, target.state = Weights(1.0), Weights(0.0)
    layout = source.weight_buckets(1024)  # one tensor (1 KiB) per bucket
    assert len(layout) == 2
    source.prepare_sync("sync", layout)
    source_memory.alloc(5 * GB)  # a peak before the sync is not the sync's
    source_memory.free(5 * GB)
    imports = []
    for index in range(len(layout)):
        shared = source.export_bucket("sync", index)
        imports.append(target.import_bucket(shared))
    stats = source.release_export("sync")
    assert stats["peak_allocated_bytes"] == 3 * GB  # one bucket at a time on top of 1 GB
    assert stats["allocated_bytes"] == 1 * GB
    assert stats["bytes"] == 2 * 1024
    assert all(s["peak_allocated_bytes"] == 1 * GB for s in imports)
    assert torch.equal(target.state.weights["b"], torch.ones(256))


class TimedOffload(BookkeepingOffload):
    """A backend that times its phases, as TorchOffload does."""

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        self.last_phases = {"queue_s": 0.001, "copy_s": 0.12, "free_s": 0.0, "empty_cache_s": 0.02}
        return super().offload(states, dead=dead)


def test_a_transfer_says_where_its_time_went(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found on an H200: an offload's copies ran at the pinned copy's speed and a sixth of
    its time was torch.cuda.empty_cache; the record keeps both, the slowest worker's."""
    worker = make_worker(FakeCudaMemory(), monkeypatch)
    worker.offloader = TimedOffload(resident=("weights", "optimizer"))
    worker._has_backend = True
    stats = worker.transfer("offload", ["optimizer"], False, 0.0)
    assert stats["phases"]["empty_cache_s"] == 0.02
    plan = colocated_plan()
    schedule = expand_plan(plan, 1)
    recorder = Recorder(schedule, plan)
    offload = next(op for op in schedule.ops if op.work.kind == "offload")
    slower = {**stats, "phases": {**stats["phases"], "copy_s": 0.2}}
    recorder.add(offload, 0.0, 1.0, [stats, slower])
    run = next(op for op in schedule.ops if op.work.kind == "run")
    recorder.add(run, 1.0, 2.0, [{"worker_s": 1.0}])
    events = {e.op: e.model_extra or {} for e in recorder.timeline().events}
    assert events[offload.id]["copy_s"] == 0.2
    assert events[offload.id]["release_s"] == 0.02
    assert "copy_s" not in events[run.id]
    # A rehearsal (no backend) reports no phases, whatever its stand-in keeps.
    worker._has_backend = False
    assert "phases" not in worker.transfer("reload", ["optimizer"], False, 0.0)
