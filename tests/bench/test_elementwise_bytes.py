"""bench/elementwise_bytes.py: the count behind ``formulas.EAGER_EXCESS_BYTES``."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from bench_loader import load_bench

from rlplex.estimate import formulas as f

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    return load_bench("elementwise_bytes")


def test_a_hugging_face_layer_moves_what_the_eager_constants_say() -> None:
    """The counted forward bytes of a Qwen2 layer are the fused layer's plus the excess the
    estimator charges (hidden 512, q/k 640, MLP 1,536), and backward moves 2.3x."""
    bench = _bench()
    shape = bench.Shape(512, 1536, 8, 2, 64, False)
    forward, backward = bench.per_token(shape)
    fused = 24 * shape.hidden + 4 * shape.attn + 6 * shape.mlp  # Transformer Engine's kernels
    c = f.EAGER_EXCESS_BYTES
    excess = c["hidden"] * shape.hidden + c["attn"] * shape.attn + c["mlp"] * shape.mlp
    assert forward == pytest.approx(fused + excess, rel=0.02)
    assert backward / forward == pytest.approx(f.EAGER_BACKWARD_RATIO, abs=0.05)


def test_the_count_skips_views_and_matmuls() -> None:
    bench = _bench()
    assert {"view", "transpose", "mm", "addmm", "bmm"} <= bench.SKIPPED
    assert "mul" not in bench.SKIPPED and "add" not in bench.SKIPPED
