"""bench/controller_bytes.py: the measurement behind ``efficiency.controller_gb_s``."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_loader import load_bench

from rlplex.resources.inputs import Controller

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    return load_bench("controller_bytes")


def test_the_batch_has_verls_layout_and_the_default_bytes_lie_between_its_passes() -> None:
    """verl's log-prob batch: 32 bytes per prompt slot and 44 per response slot; a train pass
    adds five fp32 tensors over the responses. The format's default sits between the two."""
    import torch

    prompt, response = 2048, 20480
    batch = _bench()._batch(torch, 2, prompt, response)
    sent = sum(t.numel() * t.element_size() for t in batch.values()) / 2
    assert sent == 32 * prompt + 44 * response
    log_prob = sent / (prompt + response)
    train = (sent + 20 * response) / (prompt + response)
    assert log_prob < Controller().bytes_per_token < train
    assert Controller().returned_bytes_per_token == pytest.approx(
        (8 + 4 + 0) / 3 * response / (prompt + response), rel=0.2
    )  # old log-probs + entropies, reference log-probs, nothing from the train pass


@pytest.mark.slow
def test_a_round_trip_through_ray_workers(ray_session: Any) -> None:
    rows = _bench().measure(16, 64, 256, workers=2, reps=2, start_ray=False)
    assert [r["path"] for r in rows] == ["torch.save", "pickle"]
    for r in rows:
        assert r["out_gb"] == pytest.approx(16 * (32 * 64 + 44 * 256) / 1e9)
        assert r["back_gb"] == pytest.approx(16 * 256 * 8 / 1e9)
        assert r["submit_s"] > 0 and r["gather_s"] > 0 and r["gb_per_s"] > 0
