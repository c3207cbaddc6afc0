"""Filling a config's missing figures from the estimate (rlplex.estimate.fill)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.plan.costs import stage_seconds

SEVEN_B = Path(__file__).resolve().parents[2] / "examples" / "estimate_7b.yaml"
ROLES = ("actor_train", "actor_infer", "reference")


def test_a_role_set_to_auto_is_priced_on_the_gpus_it_was_estimated_on() -> None:
    """``--set roles.R.devices=auto`` over a file that gives the role 8 GPUs: the estimator
    prices the role as if on all 16 GPUs of the cluster, and its stages were then scaled
    from the file's 8 (twice too fast on 16: generation 19.68 s where --set devices=0-15
    says 39.36 s, so a plan of the search's placement was 43 % short)."""

    def on(devices: str):
        return load_config(
            SEVEN_B, overrides=["cluster.nodes=2", *(f"roles.{r}.devices={devices}" for r in ROLES)]
        )

    auto, placed = on("auto"), on("0-15")
    everywhere = {r: tuple(range(16)) for r in ROLES}
    for name in ("generate", "ref_logprob", "old_logprob", "train"):
        want = stage_seconds(placed, placed.pipeline.stage(name), everywhere)
        got = stage_seconds(auto, auto.pipeline.stage(name), everywhere)
        assert got == pytest.approx(want, rel=1e-9), name
    # On 8 of them it takes longer, as the estimate of 16 scaled down says.
    half = {r: tuple(range(8)) for r in ROLES}
    generate = auto.pipeline.stage("generate")
    assert stage_seconds(auto, generate, half) > stage_seconds(auto, generate, everywhere)
