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
    row = next(r for r in rows if r.case == "verl-osp-7b-fsdp2-colocate-16xH20"
               and r.phase == "update_actor")  # fmt: skip
    case = next(c for c in published.CORPUS_CASES if c.id == row.case)
    train = estimate_config(load_config(published.CONFIGS / case.config)).stages["train"]
    assert train.outside_s > 0
    assert row.other_s == pytest.approx(train.seconds - train.terms["compute"] - train.outside_s)


def test_medians_by_gpu() -> None:
    bench = load_bench("trainer_residuals")
    rows = [
        bench.Residual("a", "p", "train", "h100", 8, False, 10.0, 1.0, 13.0, 1.2),
        bench.Residual("b", "p", "train", "h100", 8, False, 10.0, 1.0, 15.0, 1.4),
        bench.Residual("c", "p", "train", "h20", 8, True, 10.0, 1.0, 9.0, 0.8),
    ]
    assert bench.by_gpu(rows) == {
        "h100": {"phases": 2, "median_k": pytest.approx(1.3)},
        "h20": {"phases": 1, "median_k": 0.8},
    }
