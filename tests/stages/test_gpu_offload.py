"""On CUDA: TorchOffload of a >= 1 GB LLM with AdamW, and DeepSpeed offload/reload (``-m gpu``).

Each runs ``bench/gpu_offload.py`` in a fresh process and checks its figures;
the speed targets themselves (>= 90 % of a raw pinned copy) are the bench's,
reported in docs/benchmarks.md; here a floor catches a per-tensor regression.
Without CUDA these skip, with the reason (tests/conftest.py).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_torch_offload_of_a_1b_llama_with_adamw_is_bit_identical_and_fast(run_bench) -> None:
    result = run_bench("gpu_offload.py", "--part", "llama")["llama"]
    assert result["params"] >= 1e9 and result["weights_gb"] >= 1.0
    assert result["bit_identical"], result
    assert result["next_loss_equals_twin"], result
    assert result["freed_fraction_min"] >= 0.95, result
    assert result["offload_vs_pinned"] >= 0.5 and result["reload_vs_pinned"] >= 0.5, result


def test_deepspeed_offload_and_reload_on_cuda(run_bench) -> None:
    result = run_bench("gpu_offload.py", "--part", "deepspeed", "--small")["deepspeed"]
    for stage in ("zero1", "zero2"):
        for mover in ("rlplex", "deepspeed"):
            assert result[stage][mover]["bit_identical"], (stage, mover, result[stage])
        assert result[stage]["rlplex"]["freed_fraction_min"] >= 0.9, result[stage]
