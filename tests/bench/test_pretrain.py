"""bench/pretrain.py: a pretraining row becomes a one-train-stage config, priced without an
RL framework's overheads."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from bench_loader import load_bench

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    return load_bench("pretrain")


def test_a_row_is_one_train_step_of_full_sequences_without_rl_overheads() -> None:
    bench = _bench()
    row = bench.Row("llama-3.1-8b", "h100", 8, 64, 1, 4096, False, 1, 1, 1, 10_000, "test")
    raw = bench.row_config(row, recompute=False)
    w = raw["workload"]
    assert w["prompts_per_step"] * (w["prompt_tokens"]["mean"] + w["response_tokens"]["mean"]) == (
        64 * 4096
    )
    assert raw["efficiency"] == {
        "moe_imbalance": 1.0, "step_overhead_s": 0.0, "sequence_overhead_s": 0.0,
    }  # fmt: skip
    assert raw["roles"]["actor_train"]["parallel"]["zero"] == 1
    result = bench.predict(row)
    assert not result["recompute"]
    # tokens / s / GPU from the stage's seconds, and the error signed against the published
    seconds = sum(result["terms"].values())
    assert result["predicted"] == pytest.approx(64 * 4096 / (seconds * 8))
    assert result["error"] == pytest.approx(result["predicted"] / 10_000 - 1)


def test_a_row_that_does_not_fit_is_planned_with_full_recomputation() -> None:
    bench = _bench()
    big = next(r for r in bench.ROWS if r.fsdp)  # Llama-3 70B, micro-batch 2 of 8,192 tokens
    assert bench.predict(big)["recompute"]
