"""A stage that processes a share of the step's samples (``share``: one reward cluster's
domain, one of several teachers), priced by hand over that share.

The ``base`` fixture (tests/estimate/conftest.py) is llama-3.1-8b on one node of 8 H100:
989.5 TFLOP/s, 3,350 GB/s of HBM; 64 prompts x 4 samples = 256 sequences, micro-batches of
2 sequences. Padded (``packing: false``) every sequence is 200 + 600 = 800 tokens.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import Estimate, estimate_config
from rlplex.estimate.specs import model_presets

P = 8_030_261_248  # llama-3.1-8b parameters
H100 = 989.5e12  # peak bf16 FLOP/s
HBM = 3350e9  # bytes/s
NVLINK = 450 * 0.8  # GB/s per device
FORWARD = 0.6  # efficiency.yaml defaults
WIDTH_HALF, TOKENS_HALF = 1024, 512
LAYER_S = 0.0008  # host seconds per layer per micro-batch
LOGITS_BYTES = 16
SEQUENCE_OVERHEAD_S = 0.004
PADDED = 200 + 600


def _estimate(config: dict[str, Any]) -> Estimate:
    return estimate_config(config_from_dict(copy.deepcopy(config), file="t.yaml"))


def test_a_forward_pass_over_a_quarter_of_the_samples(base: dict[str, Any]) -> None:
    """The reference's log-probs over 0.25 of the step: 64 of the 256 padded sequences, in
    micro-batches of 2 as before. Compute is a quarter of the whole step's; the per-micro-
    batch terms follow the 4 micro-batches a rank now runs (16 before); the activations of
    one micro-batch are what they were."""
    base["workload"]["packing"] = False
    base["roles"]["reference"]["parallel"] = {"fsdp": True, "kernels": "fused"}
    whole = _estimate(base).stages["ref_logprob"]
    base["pipeline"]["stages"]["ref_logprob"]["share"] = 0.25
    part = _estimate(base).stages["ref_logprob"]
    assert part.terms["compute"] == pytest.approx(whole.terms["compute"] / 4)

    spec = model_presets()["llama-3.1-8b"]
    sequences = 256 // 4
    flops = f.forward_flops(spec, PADDED) * sequences
    eff = FORWARD * 4096 / (4096 + WIDTH_HALF) * (2 * PADDED) / (2 * PADDED + TOKENS_HALF)
    compute = flops / (8 * H100 * eff)
    assert part.flops == pytest.approx(flops)
    assert part.detail["efficiency"] == pytest.approx(eff)
    assert part.terms["compute"] == pytest.approx(compute)
    # Each rank: 64 x 800 / 8 = 6,400 tokens in micro-batches of 2 x 800.
    micro_batches = 6_400 // (2 * PADDED)
    assert micro_batches == 4 and part.detail["micro_batches_per_rank"] == 4
    assert whole.detail["micro_batches_per_rank"] == 16
    # Logits: each rank's tokens x the vocabulary x 16 bytes, once.
    logits = sequences * PADDED / 8 * spec.vocab_size * LOGITS_BYTES / HBM
    assert part.terms["memory"] == pytest.approx(logits)
    # Host launches per micro-batch and layer (padded: they add to the device's time), and
    # the controller's padded batch, 52 bytes a token out and 4 back.
    host = micro_batches * LAYER_S * 32
    controller = sequences * PADDED * (52 + 4) / 1e9 / 0.5
    assert part.terms["overhead"] == pytest.approx(host + controller)
    # FSDP gathers the weights' other 7/8 for every micro-batch, hidden behind compute.
    gathers = P * 2 * 7 / 8 * micro_batches / (NVLINK * 1e9)
    assert part.detail["comm_s"] == pytest.approx(gathers) and gathers < compute
    assert "communication" not in part.terms
    assert part.seconds == pytest.approx(compute + logits + host + controller)
    assert part.memory_gb == whole.memory_gb
    assert part.detail["share"] == 0.25 and "share" not in whole.detail


def test_a_rule_reward_scores_its_share_of_the_sequences(base: dict[str, Any]) -> None:
    """A CPU reward cluster of one domain (0.4 of the prompts) pays ``sequence_overhead_s``
    for its 0.4 x 256 sequences; the train stage's overhead does not change."""
    base["pipeline"]["stages"]["reward"].pop("seconds")
    whole = _estimate(base)
    base["pipeline"]["stages"]["reward"]["share"] = 0.4
    part = _estimate(base)
    assert part.stages["reward"].seconds == pytest.approx(0.4 * 256 * SEQUENCE_OVERHEAD_S)
    assert part.stages["reward"].terms == {"overhead": pytest.approx(0.4096)}
    assert whole.stages["reward"].seconds == pytest.approx(256 * SEQUENCE_OVERHEAD_S)
    assert part.stages["train"].seconds == pytest.approx(whole.stages["train"].seconds)


def test_a_share_straggles_more_on_packed_ranks(base: dict[str, Any]) -> None:
    """Packed ranks that meet once per pass wait for the busiest: with a quarter of the
    sequences per rank, the longest weighs more against the mean (the straggler factor is
    taken over the stage's own sequences)."""
    base["roles"]["reference"]["parallel"] = {"zero": 1}
    whole = _estimate(base).stages["ref_logprob"]
    base["pipeline"]["stages"]["ref_logprob"]["share"] = 0.25
    part = _estimate(base).stages["ref_logprob"]
    assert part.detail["straggler"] > whole.detail["straggler"] > 1.0
    assert part.terms["compute"] == pytest.approx(
        whole.terms["compute"] / 4 * part.detail["straggler"] / whole.detail["straggler"]
    )


def test_given_seconds_are_taken_whatever_the_share(base: dict[str, Any]) -> None:
    """``share`` prices an estimate; seconds a config gives are what the stage takes."""
    base["pipeline"]["stages"]["reward"]["share"] = 0.5
    cfg = config_from_dict(copy.deepcopy(base), file="t.yaml")
    assert cfg.pipeline.stage("reward").seconds == 3
