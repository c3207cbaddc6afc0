"""Logical GPUs on a machine with fewer real ones: every worker runs on CPU tensors alike."""

from __future__ import annotations

import os
from typing import Any

import pytest

from rlplex.runtime import cluster as rc


def test_an_embedded_ray_with_more_gpus_than_the_machine_hides_cuda_from_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ray

    seen: dict[str, Any] = {}
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kwargs: seen.update(kwargs))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(rc, "real_gpu_count", lambda: 1)
    assert rc.connect(None, num_gpus=4) is True
    assert seen["num_gpus"] == 4
    assert seen["runtime_env"]["env_vars"]["RLPLEX_LOGICAL_GPUS"] == "1"
    seen.clear()
    assert rc.connect(None, num_gpus=1) is True  # the real GPU: used as it is
    assert "RLPLEX_LOGICAL_GPUS" not in seen["runtime_env"]["env_vars"]


def test_a_worker_on_logical_gpus_hides_the_real_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlplex.runtime.context import WorkerInfo
    from rlplex.runtime.worker import LOGICAL_GPUS_ENV, RoleWorker

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv(LOGICAL_GPUS_ENV, "1")
    RoleWorker(WorkerInfo(role="actor_train", rank=0, world_size=1, devices=(0,)), None, {})
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
