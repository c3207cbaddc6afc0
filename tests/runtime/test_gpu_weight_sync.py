"""On CUDA: weight sync by IPC buckets between two actors on one GPU; NCCL with two GPUs.

Runs ``bench/gpu_weight_sync.py --check`` in a fresh process (its own Ray with
the real GPUs). Without CUDA (or with one GPU, for NCCL) these skip with the
reason (tests/conftest.py).
"""

from __future__ import annotations

import pytest


@pytest.mark.gpu
def test_ipc_weight_sync_checksums_equal(run_bench) -> None:
    result = run_bench("gpu_weight_sync.py", "--check")
    assert result["ipc_checksum_equal"] and result["store_checksum_equal"], result
    assert result["buckets"] > 1, result  # several buckets: the chained protocol ran


@pytest.mark.gpu(min_gpus=2)
def test_nccl_bucketed_broadcast_checksums_equal(run_bench) -> None:
    result = run_bench("gpu_weight_sync.py", "--check")
    assert result["nccl_checksum_equal"], result
