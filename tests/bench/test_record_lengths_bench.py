"""bench/record_lengths.py: a fit with the record's lengths carries; one with the guess does not."""

from __future__ import annotations

from bench_loader import load_bench


def test_the_measured_lengths_carry_generation_to_the_other_backend() -> None:
    """NeMo RL v0.3's Llama-3.1-8B rows (Megatron -> DTensor, the same vLLM generation):
    fitted with the published 795-token mean, the target's generation comes within 10 %;
    fitted with the importer's guess (half the 3,996 maximum) it comes out far too short."""
    result = load_bench("record_lengths").transfer("8b-megatron", "8b-dtensor")
    measured, guess = result["record_lengths"], result["guess"]
    assert abs(measured["generation_error"]) < 0.10, measured
    assert guess["generation_error"] < -0.3, guess
    assert any("response mean 795 tokens" in n for n in measured["notes"])
    assert not guess["notes"]
