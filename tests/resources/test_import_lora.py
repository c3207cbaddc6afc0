"""LoRA runs of verl and ROLL import with their adapters, as each framework runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.resources.importers.common import lora
from rlplex.resources.inputs import LORA_TARGETS, Rollout

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers"
VERL = FIXTURES / "verl" / "grpo.yaml"
ROLL = FIXTURES / "roll" / "agentic_partial_gpu.yaml"


def _stage_roles(cfg) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    return {s.name: s.role for s in cfg.pipeline.stages}


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        (None, None),
        ("all-linear", None),
        (["q_proj", "v_proj"], ["q", "v"]),
        ("q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", None),
        (["linear_qkv", "linear_proj"], ["q", "k", "v", "o"]),
        (["linear_fc1", "linear_fc2"], ["gate", "up", "down"]),
        (["model.layers.0.self_attn.q_proj", "c_attn"], ["q"]),
        (["c_attn"], None),  # no name rlplex knows: every projection
    ],
)
def test_framework_module_names_map_to_projections(targets: object, expected: object) -> None:
    out = lora(16, targets)
    assert out is not None and out["rank"] == 16
    assert out.get("targets") == expected


@pytest.mark.parametrize("rank", [None, 0, -1, "16", True])
def test_no_positive_rank_means_no_lora(rank: object) -> None:
    assert lora(rank, "all-linear") is None


def test_verl_fsdp_lora_trains_adapters_and_serves_them() -> None:
    """``model.lora_rank``: the actor trains adapters, vLLM applies them (enable_lora), and the
    reference log-probs come from the actor with its adapters off (ref_in_actor): no
    reference role."""
    cfg = load_config(
        VERL,
        overrides=[
            "actor_rollout_ref.model.lora_rank=32",
            "actor_rollout_ref.model.target_modules=[q_proj,v_proj]",
            "actor_rollout_ref.actor.use_kl_loss=true",
        ],
    )
    for name in ("actor_train", "actor_infer"):
        adapters = cfg.roles[name].lora
        assert adapters is not None and (adapters.rank, adapters.targets) == (32, ("q", "v"))
    assert "reference" not in cfg.roles
    assert _stage_roles(cfg)["ref_logprob"] == "actor_train"
    # The legacy FSDP worker keeps the configured sleep level (2): the base weights go with
    # the adapters every step; the new engine workers sleep at level 1 and send adapters only.
    assert (cfg.roles["actor_infer"].rollout or Rollout()).sleep_level == 2
    engine = load_config(
        VERL,
        overrides=[
            "actor_rollout_ref.model.lora_rank=32",
            "trainer.use_legacy_worker_impl=disable",
        ],
    ).roles["actor_infer"]
    assert engine.rollout is not None and engine.rollout.sleep_level == 1
    assert engine.lora is not None and engine.lora.targets == LORA_TARGETS


def test_verl_without_lora_keeps_its_reference() -> None:
    cfg = load_config(VERL, overrides=["actor_rollout_ref.actor.use_kl_loss=true"])
    assert "reference" in cfg.roles and cfg.roles["actor_train"].lora is None
    assert _stage_roles(cfg)["ref_logprob"] == "reference"


@pytest.mark.parametrize(("merge", "served"), [(False, True), (True, False)])
def test_verl_megatron_lora_merges_or_serves(merge: bool, served: bool) -> None:
    """Megatron-Bridge LoRA (``model.lora.rank``): ``merge`` hands vLLM merged weights (no
    adapters at run time); otherwise vLLM serves them and sleeps at level 1."""
    cfg = load_config(
        VERL,
        overrides=[
            "actor_rollout_ref.actor.strategy=megatron",
            "actor_rollout_ref.model.lora.rank=16",
            f"actor_rollout_ref.model.lora.merge={str(merge).lower()}",
            "actor_rollout_ref.model.lora.target_modules=[linear_qkv,linear_proj]",
        ],
    )
    train = cfg.roles["actor_train"].lora
    assert train is not None and train.targets == ("q", "k", "v", "o")
    assert (cfg.roles["actor_infer"].lora is not None) is served
    assert ((cfg.roles["actor_infer"].rollout or Rollout()).sleep_level == 1) is served


def test_roll_lora_roles_and_the_reference_in_the_actor() -> None:
    """ROLL trains adapters on a role whose ``model_args.lora_target`` is set (rank 8 unless
    ``lora_rank``), vLLM serves them, and the reference runs in the actor (use_ref_model is
    false under LoRA)."""
    cfg = load_config(
        ROLL,
        overrides=[
            "actor_train.model_args.lora_target=all-linear",
            "actor_train.model_args.lora_rank=64",
            "actor_infer.model_args.lora_target=all",
        ],
    )
    train, infer = cfg.roles["actor_train"].lora, cfg.roles["actor_infer"].lora
    assert train is not None and (train.rank, train.targets) == (64, LORA_TARGETS)
    assert infer is not None and infer.rank == 8
    assert "reference" not in cfg.roles
    assert _stage_roles(cfg)["ref_logprob"] == "actor_train"
    plain = load_config(ROLL)
    assert "reference" in plain.roles and plain.roles["actor_train"].lora is None


@pytest.mark.parametrize(
    ("overrides", "frozen"),
    [
        ([], "fp32"),
        (["actor_rollout_ref.actor.fsdp_config.model_dtype=bf16"], "bf16"),
        (["actor_rollout_ref.actor.strategy=megatron"], "bf16"),
    ],
)
def test_verl_fsdp_keeps_the_frozen_base_in_fp32(overrides: list[str], frozen: str) -> None:
    """verl's FSDP actor loads its model in fp32 unless ``fsdp_config.model_dtype`` says
    otherwise (fsdp_workers.py); Megatron holds bf16 weights. The engine's are bf16."""
    cfg = load_config(VERL, overrides=["actor_rollout_ref.model.lora_rank=16", *overrides])
    train, infer = cfg.roles["actor_train"].lora, cfg.roles["actor_infer"].lora
    assert train is not None and train.frozen_precision == frozen
    assert infer is not None and infer.frozen_precision == "bf16"


def test_verl_critic_lora_keeps_its_frozen_base_in_fp32() -> None:
    """``critic.model.lora_rank``: the critic trains adapters; verl's FSDP critic loads its
    model in fp32 as the actor does (fsdp_workers.py)."""
    cfg = load_config(VERL, overrides=["algorithm.adv_estimator=gae", "critic.model.lora_rank=8"])
    critic = cfg.roles["critic"].lora
    assert critic is not None and (critic.rank, critic.frozen_precision) == (8, "fp32")
    assert cfg.roles["actor_train"].lora is None
