"""bench/serving.py: a serving row becomes a one-engine config whose decode step is hand-checked."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from bench_loader import load_bench

from rlplex.estimate import formulas as f
from rlplex.estimate.specs import model_presets
from rlplex.resources.yaml_io import load_yaml_file

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    return load_bench("serving")


ROW = {
    "source": "test", "model": "meta-llama/Llama-3.1-8B-Instruct", "precision": "bf16",
    "gpu": "H100", "tp": 1, "isl": 128, "osl": 128, "concurrency": 1, "tpot_ms": 7.0,
}  # fmt: skip


def test_one_sequence_on_one_h100_by_hand() -> None:
    """One sequence: every step reads the weights and the KV cache of its context (128 prompt
    tokens and, on average, 64 generated ones) at 60 % of 3,350 GB/s, plus the step floor
    (4.1 ms + 32 layers x 30 us) and one sequence's host time (5 us)."""
    pred = _bench().predict_tpot_ms(ROW)
    s = model_presets()["llama-3.1-8b"]
    read = f.decode_weight_bytes(s, 1, "bf16") + (128 + 64) * f.kv_bytes_per_token(s)
    expected = read / (3350e9 * 0.6) + 0.0041 + 32 * 3e-5 + 5e-6
    assert pred["predicted_ms"] == pytest.approx(expected * 1e3, rel=1e-3)
    assert pred["floor_ms"] == pytest.approx((0.0041 + 32 * 3e-5) * 1e3)


def test_rows_with_speculative_decoding_are_left_out_and_errors_are_signed() -> None:
    bench = _bench()
    rows = [dict(ROW), {**ROW, "spec_decode": True}]
    results = bench.run(rows)
    assert len(results) == 1
    r = results[0]
    assert r["error"] == pytest.approx(r["predicted_ms"] / 7.0 - 1)
    assert bench.summary(results)["dense"]["rows"] == 1
    assert bench.summary(results)["moe"] == {"rows": 0}


def test_the_committed_rows_all_estimate() -> None:
    data = load_yaml_file(ROOT / "bench" / "serving" / "serving_tpot.yaml")
    results = _bench().run(data["rows"])
    assert results and all(r["predicted_ms"] > 0 for r in results)
