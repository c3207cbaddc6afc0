"""bench/trainer_residuals.py: the compute multiplier each published trainer phase implies."""

from __future__ import annotations

import pytest
from bench_loader import load_bench


def test_each_phase_is_its_stage_less_what_the_phase_does_not_hold() -> None:
    """k puts the published seconds back together: other + k x compute; the per-step
    overhead the estimator puts on the policy's train stage is not in verl's update_actor."""
    from rlplex.config import load_config
    from rlplex.estimate.estimator import estimate_config

    bench = load_bench("trainer_residuals")
    published = load_bench("published")
    rows = bench.residuals()
    assert any(r.heldout for r in rows) and any(not r.heldout for r in rows)
    for r in rows:
        assert r.other_s + r.k * r.compute_s == pytest.approx(r.published_s)
        assert 0.0 <= r.attention_share < 1.0
    assert {r.trainer for r in rows} == {"fsdp", "megatron", "unsharded"}
    row = next(r for r in rows if r.case == "verl-osp-7b-fsdp2-colocate-16xH20"
               and r.phase == "update_actor")  # fmt: skip
    case = next(c for c in published.CORPUS_CASES if c.id == row.case)
    train = estimate_config(load_config(published.CONFIGS / case.config)).stages["train"]
    assert train.outside_s > 0
    assert row.other_s == pytest.approx(train.seconds - train.terms["compute"] - train.outside_s)


def test_medians_by_gpu_and_trainer_leave_out_what_is_over_peak() -> None:
    """A k that puts the compute above the GPU's peak (efficiency 0.5 over k 0.4: 1.25) is
    flagged and left out of its median."""
    bench = load_bench("trainer_residuals")

    def row(name: str, gpu: str, trainer: str, k: float) -> object:
        return bench.Residual(name, "p", "train", gpu, trainer, 8, False, 10.0, 1.0,
                              1.0 + 10.0 * k, k, 0.5, 0.1)  # fmt: skip

    rows = [row("a", "h100", "fsdp", 1.2), row("b", "h100", "fsdp", 1.4),
            row("c", "h20", "fsdp", 0.8), row("d", "h20", "fsdp", 0.4),
            row("e", "h20", "megatron", 1.1)]  # fmt: skip
    assert not rows[3].consistent and rows[3].implied_efficiency == pytest.approx(1.25)
    assert bench.by_gpu(rows) == {
        "h100 fsdp": {"phases": 2, "median_k": pytest.approx(1.3), "least_k": 1.2,
                      "most_k": 1.4, "inconsistent": 0},
        "h20 fsdp": {"phases": 1, "median_k": 0.8, "least_k": 0.8, "most_k": 0.8,
                     "inconsistent": 1},
        "h20 megatron": {"phases": 1, "median_k": 1.1, "least_k": 1.1, "most_k": 1.1,
                         "inconsistent": 0},
    }  # fmt: skip
