"""On CUDA: GRPO learns under the executor with every role colocated on one GPU.

Runs ``bench/gpu_grpo.py --model tiny --steps 60`` in a fresh process (Ray
with the real GPU, torch offloads, weight sync by CUDA IPC). Without CUDA it
skips with the reason (tests/conftest.py).
"""

from __future__ import annotations

import pytest


@pytest.mark.gpu
def test_grpo_learns_on_cuda_colocated(run_bench) -> None:
    result = run_bench("gpu_grpo.py", "--model", "tiny", "--steps", "60", timeout_s=1200)
    assert result["reward_first5"] <= 0.3 and result["reward_last5"] >= 0.8, result
    assert set(result["weight_sync_method"].values()) == {"ipc"}, result
