"""Hybrid models: linear-attention (Gated DeltaNet) layers beside softmax attention.

Qwen3-Next and Qwen3.5 replace three of every four attention layers with Gated DeltaNet: a
fixed recurrent state per sequence instead of a growing KV cache, and work linear in the
sequence. The parameter and tensor counts are checked against tiny models that transformers
builds from the same config.json keys; the state, cache and FLOP terms by hand.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import estimate_config
from rlplex.estimate.specs import match_preset, model_presets, spec_from_hf_config

TINY_NEXT: dict[str, Any] = {
    "vocab_size": 320, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 8,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4, "num_experts": 4,
    "num_experts_per_tok": 2, "moe_intermediate_size": 24,
    "shared_expert_intermediate_size": 40, "full_attention_interval": 4,
    "tie_word_embeddings": False,
}  # fmt: skip


def test_tiny_qwen3_next_counts_match_transformers(tmp_path: Path) -> None:
    """Every parameter, and every tensor of the checkpoint save_pretrained writes (routed
    experts one matrix each), as the formulas count them."""
    transformers = pytest.importorskip("transformers")
    safetensors = pytest.importorskip("safetensors")
    config = transformers.Qwen3NextConfig(**TINY_NEXT)
    model = transformers.Qwen3NextForCausalLM(config)
    spec = spec_from_hf_config(config.to_dict(), "tiny-next/config.json")
    assert spec.linear_attention_layers == 6 and spec.attention_layers == 2
    assert spec.attention_output_gate and spec.qk_norm
    assert f.total_params(spec) == sum(p.numel() for p in model.parameters())
    model.save_pretrained(tmp_path)
    saved = 0
    for shard in tmp_path.glob("*.safetensors"):
        with safetensors.safe_open(str(shard), "pt") as handle:
            saved += len(list(handle.keys()))
    assert f.param_tensors(spec) == saved


def test_tiny_qwen3_5_dense_counts_match_transformers() -> None:
    """Qwen3.5's dense text model names its layers in ``layer_types`` and gates its attention
    by default."""
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "Qwen3_5TextConfig"):
        pytest.skip("this transformers has no Qwen3.5")
    keys = {k: v for k, v in TINY_NEXT.items() if "expert" not in k}
    keys.pop("full_attention_interval")
    config = transformers.Qwen3_5TextConfig(
        **{**keys, "num_hidden_layers": 4},
        layer_types=["linear_attention"] * 3 + ["full_attention"],
    )
    model = transformers.Qwen3_5ForCausalLM(config)
    spec = spec_from_hf_config(config.to_dict(), "tiny-3.5/config.json")
    assert spec.linear_attention_layers == 3 and spec.attention_output_gate
    assert f.total_params(spec) == sum(p.numel() for p in model.parameters())


def test_qwen3_next_preset_is_the_published_model() -> None:
    """Qwen3-Next-80B-A3B: 80B parameters, 79B of them not embeddings, 3B activated (the
    model card); hub names match it."""
    spec = model_presets()["qwen3-next-80b-a3b"]
    embeddings = 2 * spec.vocab_size * spec.hidden_size  # input embedding and untied head
    assert f.total_params(spec) / 1e9 == pytest.approx(80, rel=0.01)
    assert (f.total_params(spec) - embeddings) / 1e9 == pytest.approx(79, rel=0.01)
    head = spec.vocab_size * spec.hidden_size
    assert (f.active_params(spec) - head) / 1e9 == pytest.approx(3.0, rel=0.1)
    for name in ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Thinking"):
        assert match_preset(name) == spec


def test_only_softmax_layers_cache_keys_and_values_by_hand() -> None:
    """12 softmax layers x K and V x 2 KV heads x 256 x 2 bytes per token; each sequence's
    36 Gated DeltaNet layers hold 32 value heads' 128 x 128 states and the convolution's last
    3 inputs over q, k and v (2 x 2,048 + 4,096), in bf16; split over tp ranks."""
    spec = model_presets()["qwen3-next-80b-a3b"]
    assert f.kv_bytes_per_token(spec) == 12 * 2 * 2 * 256 * 2 == 24_576
    state = 36 * (32 * 128 * 128 + 3 * (2 * 2048 + 4096)) * 2
    assert f.linear_state_bytes(spec) == state == 39_518_208
    assert f.linear_state_bytes(spec, tp=4) == pytest.approx(state / 4)
    assert f.linear_state_bytes(model_presets()["qwen3-8b"]) == 0.0


def test_only_softmax_layers_pay_quadratic_attention_by_hand() -> None:
    """A forward pass over 4,096 tokens: matmuls, the 36 recurrences' 4 x 32 x 128 x 128
    FLOPs per token, and attention over the 12 softmax layers only."""
    spec = model_presets()["qwen3-next-80b-a3b"]
    tokens = 4096
    recurrence = 36 * 4 * 32 * 128 * 128
    assert f.linear_state_flops(spec) == recurrence
    width = 2 * 16 * 256
    expected = (2 * f.active_params(spec) + recurrence) * tokens + width * 12 * tokens**2
    assert f.forward_flops(spec, tokens) == pytest.approx(expected)
    assert f.decode_token_flops(spec, 1000) == pytest.approx(
        2 * f.active_params(spec) + recurrence + 2 * width * 12 * 1000
    )


def test_engine_memory_holds_each_sequences_state(base: dict[str, Any]) -> None:
    """The engine's cache holds, per sequence, the KV of its longest possible length (800
    tokens) and its linear-attention state: 64 x 4 sequences over 8 replicas of tp 4."""
    config = copy.deepcopy(base)
    config["model"] = "qwen3-next-80b-a3b"
    config["cluster"]["nodes"] = 4
    for role in ("actor_train", "reference", "actor_infer"):
        config["roles"][role]["devices"] = "0-31"
    config["roles"]["actor_infer"]["num_gpus_per_worker"] = 4
    for role in ("actor_train", "reference"):
        config["roles"][role]["parallel"] = {"fsdp": True}
    est = estimate_config(config_from_dict(config, file="t.yaml"))
    spec = model_presets()["qwen3-next-80b-a3b"]
    per_sequence = 800 * f.kv_bytes_per_token(spec, tp=4) + f.linear_state_bytes(spec, tp=4)
    assert est.roles["actor_infer"].states["kv_cache"] == pytest.approx(32 * per_sequence / 1e9)
    assert est.stages["generate"].seconds > 0


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"full_attention_interval": 0}, "full_attention_interval"),
        ({"layer_types": ["linear_attention"] * 9}, "linear_attention_layers (9) exceeds"),
    ],
)
def test_bad_hybrid_config_json_says_what(keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        spec_from_hf_config({**TINY_NEXT, "model_type": "qwen3_next", **keys}, "m/config.json")
    assert message in str(err.value) and "m/config.json" in str(err.value)


def test_multimodal_config_reads_its_text_model() -> None:
    """Qwen3.5's released checkpoints nest the language model under ``text_config``."""
    text = {**TINY_NEXT, "model_type": "qwen3_5_moe_text"}
    text.pop("tie_word_embeddings")
    spec = spec_from_hf_config(
        {"model_type": "qwen3_5_moe", "text_config": text, "tie_word_embeddings": True},
        "vl/config.json",
    )
    assert spec.linear_attention_layers == 6 and spec.tied_embeddings
    assert "vision encoder is not counted" in spec.source


def test_sparse_steps_and_dense_only_layers_count_as_transformers_does() -> None:
    """Qwen-MoE's ``decoder_sparse_step`` and ``mlp_only_layers``: layer i has experts unless
    listed or ``(i + 1) % step != 0``. Bug: the step was ignored (every layer MoE)."""
    transformers = pytest.importorskip("transformers")
    for keys in ({"decoder_sparse_step": 2}, {"mlp_only_layers": [0, 3]}):
        config = transformers.Qwen3NextConfig(**{**TINY_NEXT, **keys})
        model = transformers.Qwen3NextForCausalLM(config)
        spec = spec_from_hf_config(config.to_dict(), "m/config.json")
        assert f.total_params(spec) == sum(p.numel() for p in model.parameters())
    spec = spec_from_hf_config({**TINY_NEXT, "decoder_sparse_step": 2}, "m/config.json")
    assert spec.moe_layers == 4


def test_multimodal_tie_is_the_top_level_flag() -> None:
    """transformers ties a multimodal model's head by the top-level ``tie_word_embeddings``,
    whatever its ``text_config`` says (both are written by ``to_dict``)."""
    text = {**TINY_NEXT, "model_type": "qwen3_5_moe_text", "tie_word_embeddings": False}
    data = {"model_type": "qwen3_5_moe", "text_config": text, "tie_word_embeddings": True}
    assert spec_from_hf_config(data, "vl/config.json").tied_embeddings


def test_other_linear_attentions_without_their_fields_are_plain_layers() -> None:
    """A config that names ``linear_attention`` layers without the Gated DeltaNet fields
    (MiniMax's lightning attention) loads as before, its layers priced as softmax ones."""
    data = {k: v for k, v in TINY_NEXT.items() if not k.startswith("linear_")}
    data.pop("full_attention_interval")
    data["layer_types"] = ["linear_attention", "full_attention"] * 4
    assert spec_from_hf_config(data, "m/config.json").linear_attention_layers == 0


def test_qwen2_vl_text_models_keep_their_qkv_biases() -> None:
    """Every qwen2* model type has q/k/v biases unless ``attention_bias`` says otherwise."""
    keys = {k: v for k, v in TINY_NEXT.items() if "expert" not in k and "linear" not in k}
    keys.pop("full_attention_interval")
    data = {"model_type": "qwen2_5_vl", "text_config": {**keys, "model_type": "qwen2_5_vl_text"}}
    assert spec_from_hf_config(data, "vl/config.json").qkv_bias


def test_lora_adapters_of_a_hybrid_model_match_peft() -> None:
    """peft's all-linear adapts the Gated DeltaNet mixers' input and output projections too,
    and a gated query projection is twice as wide (Qwen3.5: four input projections)."""
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    from rlplex.resources.inputs import LORA_TARGETS

    keys = {k: v for k, v in TINY_NEXT.items() if "expert" not in k}
    keys.pop("full_attention_interval")
    config = transformers.Qwen3_5TextConfig(
        **{**keys, "num_hidden_layers": 4},
        layer_types=["linear_attention"] * 3 + ["full_attention"],
    )
    model = peft.get_peft_model(
        transformers.Qwen3_5ForCausalLM(config), peft.LoraConfig(r=8, target_modules="all-linear")
    )
    adapters = [(n, p) for n, p in model.named_parameters() if "lora_" in n]
    spec = spec_from_hf_config(config.to_dict(), "m/config.json")
    assert spec.linear_in_projections == 4
    assert f.lora_params(spec, 8, LORA_TARGETS) == sum(p.numel() for _, p in adapters)
    assert f.lora_tensors(spec, LORA_TARGETS) == len(adapters)


def test_the_linear_state_keeps_the_models_dtype_under_an_fp8_kv_cache(
    base: dict[str, Any],
) -> None:
    """vLLM's fp8 KV cache halves the softmax layers' cache, not the Gated DeltaNet state
    (its dtype is the model's)."""
    config = copy.deepcopy(base)
    config["model"] = "qwen3-next-80b-a3b"
    config["cluster"]["nodes"] = 4
    for role in ("actor_train", "reference", "actor_infer"):
        config["roles"][role]["devices"] = "0-31"
    config["roles"]["actor_infer"].update(
        {"num_gpus_per_worker": 4, "rollout": {"kv_cache_dtype": "fp8"}}
    )
    for role in ("actor_train", "reference"):
        config["roles"][role]["parallel"] = {"fsdp": True}
    est = estimate_config(config_from_dict(config, file="t.yaml"))
    spec = model_presets()["qwen3-next-80b-a3b"]
    per_sequence = 800 * f.kv_bytes_per_token(spec, "fp8", tp=4) + f.linear_state_bytes(
        spec, "bf16", tp=4
    )
    assert est.roles["actor_infer"].states["kv_cache"] == pytest.approx(32 * per_sequence / 1e9)


def test_estimate_says_the_model_is_hybrid(base: dict[str, Any], tmp_path: Path) -> None:
    """The assumptions name the linear-attention layers and, for the engine, each sequence's
    state per GPU (39.52 MB over tp 4: 9.88 MB)."""
    import yaml
    from typer.testing import CliRunner

    from rlplex.cli import app

    config = copy.deepcopy(base)
    config["model"] = "qwen3-next-80b-a3b"
    config["cluster"]["nodes"] = 4
    for role in ("actor_train", "reference", "actor_infer"):
        config["roles"][role]["devices"] = "0-31"
    config["roles"]["actor_infer"]["num_gpus_per_worker"] = 4
    for role in ("actor_train", "reference"):
        config["roles"][role]["parallel"] = {"fsdp": True}
    path = tmp_path / "next.yaml"
    path.write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(app, ["estimate", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "36 of 48 layers linear attention, 9.88 MB of state per sequence" in text
    result = CliRunner().invoke(app, ["estimate", str(path), "--json"])
    linear = json.loads(result.stdout)["assumptions"]["models"]["actor_train"]["linear_attention"]
    assert linear == {
        "layers": 36,
        "of": 48,
        "mixer": "linear attention",
        "state_mb_per_sequence": None,
    }
