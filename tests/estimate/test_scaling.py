"""What-if scaling exponents from the estimator."""

from __future__ import annotations

from pathlib import Path

from rlplex.config import load_config
from rlplex.estimate.scaling import estimator_exponents

ROOT = Path(__file__).resolve().parents[2]


def test_passes_scale_below_ideal_and_latency_bound_generation_barely() -> None:
    path = ROOT / "examples" / "estimate_verl_quickstart.yaml"
    exps = estimator_exponents(
        load_config(path, overrides=["roles.actor_infer.rollout.vllm_v0=false"])
    )
    # Compute shrinks with the GPUs; per-step overhead, launches and the optimizer do not.
    assert 0.5 < exps["values"] <= 1.0
    assert 0.0 < exps["train"] < exps["values"]
    assert 0.0 <= exps["generate"] < 0.5  # 256 responses wait for the longest one
    assert "advantage" not in exps  # a driver stage: not estimated
    # vLLM's V0 engine works per running sequence on the host, which more replicas share.
    v0 = estimator_exponents(load_config(path))
    assert exps["generate"] < v0["generate"] < exps["values"]


def test_no_inputs_no_exponents() -> None:
    assert estimator_exponents(load_config(ROOT / "examples" / "grpo.yaml")) == {}


def test_whatif_uses_them_unless_given() -> None:
    from rlplex.sim.whatif import whatif
    from rlplex.timeline.importers import import_record

    cfg = load_config(ROOT / "examples" / "estimate_verl_quickstart.yaml")
    run = import_record(ROOT / "examples" / "records" / "verl_quickstart.jsonl")
    result = whatif(run, cfg, [], scaling={"train": 0.5})
    assert result.exponents["train"] == 0.5
    assert result.exponents["generate"] == estimator_exponents(cfg)["generate"] < 1.0
    assert any("exponents from the estimator" in n for n in result.notes)
