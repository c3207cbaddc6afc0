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


def test_a_model_file_beside_the_config_is_found_from_any_folder(
    tmp_path: Path, monkeypatch: object
) -> None:
    """A ``model:`` path relative to its config is read from the config's folder, not the
    working one (the exponents were empty when run from elsewhere)."""
    import json

    import yaml

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({
        "num_hidden_layers": 24, "hidden_size": 896, "num_attention_heads": 14,
        "num_key_value_heads": 2, "vocab_size": 151936, "intermediate_size": 4864,
    }))  # fmt: skip
    raw = yaml.safe_load((ROOT / "examples" / "estimate_verl_quickstart.yaml").read_text())
    raw["model"] = "model/config.json"
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = load_config(tmp_path / "run.yaml")
    monkeypatch.chdir(elsewhere)  # type: ignore[attr-defined]
    exps = estimator_exponents(config)
    assert 0.0 < exps["train"] < 1.0
