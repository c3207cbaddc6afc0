"""bench/lora_bytes.py: the count behind ``formulas.LORA_EAGER_*``."""

from __future__ import annotations

from types import ModuleType

import pytest
from bench_loader import load_bench

from rlplex.estimate import formulas as f


def _bench() -> ModuleType:
    return load_bench("lora_bytes")


def test_peft_adapters_move_what_the_lora_constants_say() -> None:
    """peft's LoRA on every projection of a Qwen2 layer (hidden 512, 8 / 2 heads of 64, MLP
    1,536) adds 10 bytes per output element forward, 4 per output and 6 per input element
    backward, whatever the rank."""
    bench = _bench()
    shape = bench.Shape(512, 1536, 8, 2, 64, False)
    d_out, d_in = bench.widths(shape)
    assert (d_out, d_in) == (512 + 2 * 128 + 512 + 2 * 1536 + 512, 5 * 512 + 512 + 1536)
    for rank in (4, 32):
        forward, backward = bench.adapter_bytes(bench.per_token(shape, rank))
        assert forward == pytest.approx(f.LORA_EAGER_FORWARD_OUT * d_out)
        assert backward == pytest.approx(
            f.LORA_EAGER_BACKWARD_OUT * d_out + f.LORA_EAGER_BACKWARD_IN * d_in
        )


def test_the_fit_recovers_known_coefficients() -> None:
    bench = _bench()
    rows = [(s, 3.0 * bench.widths(s)[0] + 5.0 * bench.widths(s)[1]) for s in bench.SHAPES]
    fit = bench.fit(rows)
    assert fit["d_out"] == pytest.approx(3.0) and fit["d_in"] == pytest.approx(5.0)


def test_adapter_bytes_are_the_adapted_minus_the_frozen() -> None:
    bench = _bench()
    assert bench.adapter_bytes({"lora": (30.0, 50.0), "frozen": (10.0, 20.0)}) == (20.0, 30.0)
