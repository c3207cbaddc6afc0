"""Reserving GPUs and reading their physical ids (Ray placement groups)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlplex.runtime import cluster as rc


def _graceful_gpu_exits(logs: Path) -> int:
    """Worker processes that exited because a GPU task's ``max_calls=1`` was reached."""
    return sum(
        path.read_text(errors="replace").count("reached max_calls")
        for path in logs.glob("python-core-worker-*.log")
    )


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_gpu_probes_read_each_bundle_and_end_without_a_graceful_worker_exit() -> None:
    """Issue 13, defect 10: probe *tasks* asked for a GPU, so each worker exited after its
    one call (max_calls=1) through Ray's graceful shutdown, which now and then aborted
    with "Mutex corrupt" under load. The probes are tasks with ``max_calls=0`` now: their
    workers stay in Ray's pool for the next task or actor, so there is no such exit."""
    import ray

    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    before = _graceful_gpu_exits(logs)
    node = rc.alive_gpu_nodes()[0]
    reservation = rc.reserve({0: 4}, {0: node.node_id}, timeout_s=60)
    try:
        ids = rc.probe_gpu_ids(reservation, 8, timeout_s=120)
    finally:
        rc.release(reservation)
    assert sorted(ids) == [0, 1, 2, 3]
    assert len(set(ids.values())) == 4  # four distinct GPUs, one per bundle
    time.sleep(3)  # a max_calls exit is logged within a second of the task's return
    assert _graceful_gpu_exits(logs) == before


def test_a_started_ray_is_a_new_local_one_not_one_left_on_the_machine(monkeypatch) -> None:
    """Found on an H200: a ``ray.init()`` without an address joined the cluster a test had
    left in /tmp/ray/ray_current_cluster and refused the GPU count (a ValueError)."""
    import ray

    calls: list[dict] = []
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # connect() sets it; restored after
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    monkeypatch.setattr(rc, "real_gpu_count", lambda: 0)
    assert rc.connect(None, num_gpus=2, num_cpus=2) is True
    assert calls[0]["address"] == "local"
    assert calls[0]["num_gpus"] == 2
