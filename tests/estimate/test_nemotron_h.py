"""Nemotron-H: hybrid models whose every layer is one block (a Mamba-2 mixer, attention, an
MLP or an MoE).

Nemotron-3 Nano interleaves 23 Mamba-2 mixers, 6 attention layers and 23 MoE blocks, each
behind its own norm; its MLPs are squared-ReLU (up and down, no gate). The parameter and
checkpoint-tensor counts are checked against tiny models transformers builds; the preset's
sizes, its cache and state, its activations and its per-layer latencies by hand.
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
from rlplex.estimate.specs import (
    efficiency_defaults,
    match_preset,
    model_presets,
    spec_from_hf_config,
)

TINY: dict[str, Any] = {
    "model_type": "nemotron_h", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 96,
    "layers_block_type": ["mamba", "moe", "attention", "mlp", "mamba", "moe"],
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "mamba_num_heads": 8,
    "mamba_head_dim": 8, "ssm_state_size": 16, "n_groups": 2, "conv_kernel": 4,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
    "moe_shared_expert_intermediate_size": 40, "n_shared_experts": 1,
    "tie_word_embeddings": False,
}  # fmt: skip

NANO_CONFIG: dict[str, Any] = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
    "attention_bias": False, "conv_kernel": 4, "expand": 2, "head_dim": 128,
    "hidden_size": 2688, "intermediate_size": 1856, "mamba_head_dim": 64,
    "mamba_num_heads": 64, "mlp_hidden_act": "relu2", "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "n_groups": 8,
    "n_routed_experts": 128, "n_shared_experts": 1, "num_attention_heads": 32,
    "num_experts_per_tok": 6, "num_hidden_layers": 52, "num_key_value_heads": 2,
    "ssm_state_size": 128, "tie_word_embeddings": False, "vocab_size": 131072,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
}  # fmt: skip
"""nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's config.json, the keys rlplex reads."""


def _tiny_model(transformers: Any, keys: dict[str, Any]) -> tuple[Any, Any]:
    config = transformers.NemotronHConfig(**{k: v for k, v in keys.items() if k != "model_type"})
    return config, transformers.NemotronHForCausalLM(config)


@pytest.mark.parametrize(
    "keys",
    [
        {},
        {"layers_block_type": ["mamba", "mlp", "attention", "mlp", "mamba", "mlp"],
         "n_routed_experts": 0},
        {"layers_block_type": ["mamba", "mlp", "moe", "attention"]},
        {"moe_latent_size": 16},
    ],
    ids=["moe-hybrid", "dense-hybrid", "moe-and-mlp-blocks", "latent-moe"],
)  # fmt: skip
def test_tiny_nemotron_h_counts_match_transformers(keys: dict[str, Any], tmp_path: Path) -> None:
    """Every parameter (and the routers' score bias, a buffer transformers saves) and every
    tensor of the checkpoint save_pretrained writes, as the formulas count them; the config
    transformers 5 writes names the layers by kind only (no num_hidden_layers)."""
    transformers = pytest.importorskip("transformers")
    safetensors = pytest.importorskip("safetensors")
    if not hasattr(transformers, "NemotronHConfig"):
        pytest.skip("this transformers has no Nemotron-H")
    _, model = _tiny_model(transformers, {**TINY, **keys})
    model.save_pretrained(tmp_path)

    written = json.loads((tmp_path / "config.json").read_text())
    spec = spec_from_hf_config(written, "tiny-h/config.json")
    weights = sum(p.numel() for p in model.parameters())
    weights += sum(b.numel() for n, b in model.named_buffers() if "e_score_correction" in n)
    assert f.total_params(spec) == weights
    saved = 0
    for shard in tmp_path.glob("*.safetensors"):
        with safetensors.safe_open(str(shard), "pt") as handle:
            saved += len(list(handle.keys()))
    assert f.param_tensors(spec) == saved


def test_lora_adapters_of_a_dense_nemotron_h_match_peft() -> None:
    """peft's all-linear adapts a Mamba-2 mixer's input projection (not its output one, which
    peft refuses on Mamba models and NeMo RL's recipes exclude), attention's four, and an
    ungated MLP's up and down projections."""
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    if not hasattr(transformers, "NemotronHConfig"):
        pytest.skip("this transformers has no Nemotron-H")
    from rlplex.resources.inputs import LORA_TARGETS

    keys = {**TINY, "layers_block_type": ["mamba", "mlp", "attention", "mlp"]}
    keys["n_routed_experts"] = 0
    config, model = _tiny_model(transformers, keys)
    model = peft.get_peft_model(
        model, peft.LoraConfig(r=8, target_modules="all-linear", exclude_modules=["out_proj"])
    )
    adapters = [(n, p) for n, p in model.named_parameters() if "lora_" in n]
    spec = spec_from_hf_config({**config.to_dict(), "model_type": "nemotron_h"}, "m/config.json")
    assert f.lora_params(spec, 8, LORA_TARGETS) == sum(p.numel() for _, p in adapters)
    assert f.lora_tensors(spec, LORA_TARGETS) == len(adapters)


def test_nano_preset_is_its_config_json_and_the_published_size() -> None:
    """The preset and the config.json give the same model: 31.6B parameters, 3.2B multiplying
    each token (3.6B with the input embedding, the model card's figure)."""
    spec = model_presets()["nemotron-3-nano-30b-a3b"]
    read = spec_from_hf_config(NANO_CONFIG, "nano/config.json")
    assert f.total_params(read) == f.total_params(spec)
    assert f.param_tensors(read) == f.param_tensors(spec)
    assert (read.mixer_only_layers, read.mlp_only_layers) == (29, 23)
    assert (read.attention_layers, read.linear_attention_layers, read.moe_layers) == (6, 23, 23)
    assert read.linear_mixer == "mamba2" and read.linear_state_fp32 and not read.gated_mlp
    h = 2688
    mamba = (h * (2 * 4096 + 2 * 8 * 128 + 64) + (4096 + 2048) * 4 + (4096 + 2048)
             + 3 * 64 + 4096 + 4096 * h)  # fmt: skip
    attention = h * 32 * 128 + 2 * h * 2 * 128 + 32 * 128 * h
    moe = 128 * 2 * h * 1856 + 2 * h * 3712 + h * 128 + 128
    embeddings = 131072 * h
    total = 23 * mamba + 6 * attention + 23 * moe + 52 * h + h + 2 * embeddings
    assert f.total_params(spec) == total == 31_577_940_288
    active = 23 * mamba + 6 * attention + 23 * (6 * 2 * h * 1856 + 2 * h * 3712 + h * 128 + 128)
    active += 52 * h + embeddings  # the LM head's matmul, not the lookup
    assert f.active_params(spec) == active
    assert (f.active_params(spec) + embeddings) / 1e9 == pytest.approx(3.6, abs=0.05)
    for name in (
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-Base-BF16",
    ):
        assert match_preset(name) == spec


def test_only_attention_caches_keys_and_the_mamba_state_is_fp32_by_hand() -> None:
    """6 attention layers x K and V x 2 KV heads x 128 x 2 bytes a token; each sequence's 23
    Mamba-2 mixers hold 64 heads' 128 x 64 states in fp32 and the convolution's last 3 inputs
    over x, B and C (4,096 + 2 x 1,024) in bf16."""
    spec = model_presets()["nemotron-3-nano-30b-a3b"]
    assert f.kv_bytes_per_token(spec) == 6 * 2 * 2 * 128 * 2 == 6144
    state = 23 * (64 * 128 * 64 * 4 + 3 * (4096 + 2 * 1024) * 2)
    assert f.linear_state_bytes(spec) == state == 49_082_368
    assert f.linear_state_bytes(spec, tp=4) == pytest.approx(state / 4)
    bf16 = spec.model_copy(update={"linear_state_fp32": False})
    assert f.linear_state_bytes(bf16) == 23 * (64 * 128 * 64 + 3 * 6144) * 2


def test_activations_count_each_block_once_by_hand() -> None:
    """Per token, over the 52 blocks: each block's norm in and out (2h); the attention
    layers' q, o, k, v; the Mamba mixers' 4 x (x width + B width); each MoE block's two kept
    tensors (fused squared ReLU) of its 6 experts and shared expert, and 2 x 6 routed copies."""
    spec = model_presets()["nemotron-3-nano-30b-a3b"]
    h = 2688
    attention = 2 * 32 * 128 + 2 * 2 * 128
    mamba = 4 * 8 * 128 + 4 * 64 * 64
    moe = 2 * (6 * 1856 + 3712) + 2 * 6 * h
    expected = (2 * h * 52 + 6 * attention + 23 * mamba + 23 * moe) / 52
    assert f.layer_activation_elements(spec, swiglu_tensors=3) == pytest.approx(expected)


def _nano_config(base: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(base)
    config["model"] = "nemotron-3-nano-30b-a3b"
    config["roles"]["actor_infer"]["num_gpus_per_worker"] = 4
    config["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    return config


def test_decode_floor_counts_blocks_as_half_layers_by_hand(base: dict[str, Any]) -> None:
    """A tp-4 engine's floor: the step's fixed cost, 26 layers' worth of small kernels (52
    blocks, each a mixer or an MLP alone), the 23 MoE blocks' routing, and one all-reduce per
    block (52, not 2 x 52)."""
    est = estimate_config(config_from_dict(_nano_config(base), file="t.yaml"))
    eff = {key: value["value"] for key, value in efficiency_defaults().items()}
    floor = (
        eff["decode_step_s"] + 26 * eff["decode_layer_s"] + 23 * eff["decode_moe_layer_s"]
        + 52 * eff["allreduce_s"]
    )  # fmt: skip
    assert est.stages["generate"].detail["step_floor_s"] == pytest.approx(floor)


def test_tp_collectives_run_once_per_block_by_hand(base: dict[str, Any]) -> None:
    """Megatron's tensor parallel exchanges activations after each mixer and each MLP: 52
    blocks, 2 exchanges (an all-gather and a reduce-scatter) each per pass, forward and
    backward, half of each device's 1/4 of the tokens leaving it (tp 2, dp 4), bf16."""
    from rlplex.estimate.context import Context, Inputs
    from rlplex.estimate.passes import _tp_activation_s

    config = _nano_config(base)
    config["roles"]["actor_train"]["parallel"] = {"tp": 2, "zero": 3}
    loaded = config_from_dict(config, file="t.yaml")
    est = estimate_config(loaded)
    inputs = Inputs(cluster=loaded.cluster, roles=loaded.roles, pipeline=loaded.pipeline,
                    model=loaded.model, workload=loaded.workload)  # fmt: skip
    spec = model_presets()["nemotron-3-nano-30b-a3b"]
    tokens = 1e6
    moved = 2 * 2 * 52 * tokens / 4 * 2688 * 2 * (2 - 1) / 2
    seconds = _tp_activation_s(
        Context(inputs), spec, loaded.roles["actor_train"], est.roles["actor_train"], tokens,
        True, False,
    )  # fmt: skip
    assert seconds == pytest.approx(moved / (loaded.cluster.device_copy_gb_per_s * 1e9))


@pytest.mark.parametrize(
    ("keys", "field", "message"),
    [
        ({"hybrid_override_pattern": "MEX*"}, "hybrid_override_pattern", "X"),
        ({"hybrid_override_pattern": "ME*"}, "hybrid_override_pattern", "names 3 layers"),
        ({"hybrid_override_pattern": None}, "hybrid_override_pattern", "layers' kinds"),
    ],
)
def test_bad_nemotron_h_config_json_says_what(
    keys: dict[str, Any], field: str, message: str
) -> None:
    data = {**NANO_CONFIG, "num_hidden_layers": 4, "hybrid_override_pattern": "ME*E", **keys}
    with pytest.raises(ConfigError) as err:
        spec_from_hf_config(data, "h/config.json")
    text = str(err.value)
    assert field in text and message in text and "h/config.json" in text


def test_estimate_names_the_mamba_layers(base: dict[str, Any], tmp_path: Path) -> None:
    """The assumptions say which layers are Mamba-2 and each sequence's state per GPU (49.08 MB
    over tp 4: 12.27 MB)."""
    import yaml
    from typer.testing import CliRunner

    from rlplex.cli import app

    path = tmp_path / "nano.yaml"
    path.write_text(yaml.safe_dump(_nano_config(base)))
    result = CliRunner().invoke(app, ["estimate", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert (
        "52 layers, each one block: 23 Mamba-2, 6 attention, 23 MoE, 12.271 MB of state per"
        " sequence" in text
    )


def test_a_latent_moe_moves_and_multiplies_the_latent_width_by_hand() -> None:
    """Nemotron-3 Super's latent MoE: the routed experts read and write 1,024 wide, not the
    4,096 of the hidden state; each MoE layer adds its two projections (h x 1,024 each); the
    expert-parallel all-to-all moves tokens at the latent width."""
    from rlplex.estimate.passes import _expert_flop_share

    nano = model_presets()["nemotron-3-nano-30b-a3b"]
    latent = nano.model_copy(update={"moe_latent_size": 1024})
    h, width = 2688, 1856
    assert f.expert_params(latent) == 2 * 1024 * width
    per_layer = 128 * 2 * 1024 * width + 2 * h * 3712 + h * 128 + 128 + 2 * h * 1024
    assert f.moe_layer_params(latent, 128) == per_layer
    assert f.param_tensors(latent) == f.param_tensors(nano) + 2 * 23
    share = 23 * 6 * 2 * 1024 * width / f.active_params(latent)
    assert _expert_flop_share(latent, "lm") == pytest.approx(share)
    moe = 2 * (6 * width + 3712) + 2 * 6 * 1024 + 2 * 1024
    attention = 2 * 32 * 128 + 2 * 2 * 128
    mamba = 4 * 8 * 128 + 4 * 64 * 64
    expected = (2 * h * 52 + 6 * attention + 23 * mamba + 23 * moe) / 52
    assert f.layer_activation_elements(latent, swiglu_tensors=3) == pytest.approx(expected)


def test_a_latent_moe_config_json_is_read() -> None:
    """``moe_latent_size`` in a Nemotron-H config.json is the latent width (null: none)."""
    spec = spec_from_hf_config({**NANO_CONFIG, "moe_latent_size": 1024}, "s/config.json")
    assert spec.moe_latent_size == 1024 and spec.expert_input_size == 1024
    plain = spec_from_hf_config({**NANO_CONFIG, "moe_latent_size": None}, "n/config.json")
    assert plain.moe_latent_size == 0 and plain.expert_input_size == 2688


def test_the_expert_all_to_all_moves_the_latent_width_by_hand(base: dict[str, Any]) -> None:
    """Dispatch and combine send each token's k copies at the experts' width: 7/8 of them
    leave the rank over ep 8 in one node, 1,024 bf16 elements each for a latent MoE."""
    from rlplex.estimate.context import Context, Inputs
    from rlplex.estimate.passes import _expert_all_to_all_s

    config = _nano_config(base)
    config["roles"]["actor_train"]["parallel"] = {"ep": 8, "zero": 1}
    loaded = config_from_dict(config, file="t.yaml")
    inputs = Inputs(cluster=loaded.cluster, roles=loaded.roles, pipeline=loaded.pipeline,
                    model=loaded.model, workload=loaded.workload)  # fmt: skip
    latent = model_presets()["nemotron-3-nano-30b-a3b"].model_copy(update={"moe_latent_size": 1024})
    tokens = 1e5
    sent = 2 * tokens * 6 * 1024 * 2 * 23 * 2 * (8 - 1) / 8
    seconds = _expert_all_to_all_s(Context(inputs), latent, loaded.roles["actor_train"], tokens, 2)
    assert seconds == pytest.approx(sent / (loaded.cluster.device_copy_gb_per_s * 1e9))


def test_lora_of_a_latent_moe_matches_peft_beside_the_experts() -> None:
    """peft's all-linear adapts a latent MoE's down- and up-projections (plain linears) and the
    shared expert, not the stacked routed experts transformers 5 keeps as 3D parameters: the
    formulas less the routed experts' adapters (rank x (latent + width) x 2 each) are
    peft's count. Bug: the latent projections carried no adapters."""
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    if not hasattr(transformers, "NemotronHConfig"):
        pytest.skip("this transformers has no Nemotron-H")
    from rlplex.resources.inputs import LORA_TARGETS

    config, model = _tiny_model(transformers, {**TINY, "moe_latent_size": 16})
    model = peft.get_peft_model(
        model, peft.LoraConfig(r=8, target_modules="all-linear", exclude_modules=["out_proj"])
    )
    adapters = [(n, p) for n, p in model.named_parameters() if "lora_" in n]
    assert not any(".experts." in n for n, _ in adapters)
    spec = spec_from_hf_config({**config.to_dict(), "model_type": "nemotron_h"}, "m/config.json")
    routed = 8 * 2 * 4 * 2 * (16 + 24)  # 2 MoE layers x 4 experts x up and down
    assert f.lora_params(spec, 8, LORA_TARGETS) - routed == sum(p.numel() for _, p in adapters)
    assert f.lora_tensors(spec, LORA_TARGETS) - 2 * 2 * 4 * 2 == len(adapters)


def test_keys_neither_transformers_nor_vllm_honour_are_not_read() -> None:
    """Nemotron-H's head is never tied and its attention has no biases (transformers' and
    vLLM's classes ignore the keys); n_groups defaults to transformers' 8."""
    data = {**NANO_CONFIG, "tie_word_embeddings": True, "attention_bias": True}
    data.pop("n_groups")
    spec = spec_from_hf_config(data, "h/config.json")
    assert not spec.tied_embeddings and not spec.qkv_bias
    assert spec.linear_num_key_heads == 8
    assert f.total_params(spec) == f.total_params(model_presets()["nemotron-3-nano-30b-a3b"])


@pytest.mark.parametrize(
    ("key", "value"), [("use_bias", True), ("mlp_bias", True), ("use_conv_bias", False)]
)
def test_biases_rlplex_does_not_count_are_refused(key: str, value: bool) -> None:
    with pytest.raises(ConfigError) as err:
        spec_from_hf_config({**NANO_CONFIG, key: value}, "h/config.json")
    assert key in str(err.value) and "h/config.json" in str(err.value)


def test_moe_layers_and_dense_layers_keep_their_own_activations_by_hand() -> None:
    """Qwen3-30B-A3B with its first 2 layers dense (width 6,144): all 48 layers together keep
    2 dense and 46 MoE layers' tensors (the mean over 48); one layer's recomputation holds the
    largest, an MoE layer (fused: 3 tensors of the 8 experts' width, 2 x 8 routed copies)."""
    spec = model_presets()["qwen3-30b-a3b"].model_copy(
        update={"first_dense_layers": 2, "intermediate_size": 6144}
    )
    h = 2048
    attention = 2 * 32 * 128 + 2 * 4 * 128
    dense = 3 * 6144
    moe = 3 * 8 * 768 + 2 * 8 * h
    mean = (48 * (4 * h + attention) + 2 * dense + 46 * moe) / 48
    assert f.layer_activation_elements(spec, swiglu_tensors=3) == pytest.approx(mean)
    largest = 4 * h + attention + max(dense, moe)
    assert f.layer_activation_elements(spec, swiglu_tensors=3, largest=True) == largest
    tokens = 1000
    recomputed = f.activation_bytes(spec, tokens, recompute=True, head="value")
    stored = 48 * h * 2 * tokens
    assert recomputed == pytest.approx(stored + largest * 2 * tokens + tokens * 1 * 8)


def test_a_nemotron_h_forward_holds_its_largest_block_by_hand() -> None:
    """A forward pass holds one block at a time: Nemotron-3 Nano's largest is an MoE block
    (its norm's 2h, 2 tensors of the 6 experts' and the shared expert's widths, 12 routed
    copies), not the mean over its blocks."""
    spec = model_presets()["nemotron-3-nano-30b-a3b"]
    h = 2688
    largest = 2 * h + 2 * (6 * 1856 + 3712) + 2 * 6 * h
    assert f.layer_activation_elements(spec, swiglu_tensors=3, largest=True) == largest
    assert f.activation_bytes(spec, 100, backward=False, head="value") == pytest.approx(
        largest * 2 * 100 + 100 * 4
    )


@pytest.mark.parametrize(
    ("keys", "field"),
    [
        ({"mamba_num_heads": "x"}, "mamba_num_heads"),
        ({"moe_latent_size": "big"}, "moe_latent_size"),
        ({"linear_num_value_heads": -1}, "linear_num_value_heads"),
        ({"head_dim": True}, "head_dim"),
        ({"hybrid_override_pattern": None, "layers_block_type": [["moe"]]}, "layers_block_type"),
    ],
)
def test_a_count_that_is_not_one_is_an_error_not_a_traceback(
    keys: dict[str, Any], field: str
) -> None:
    """Bug: a string where config.json has a count raised ValueError from int()."""
    with pytest.raises(ConfigError) as err:
        spec_from_hf_config({**NANO_CONFIG, **keys}, "h/config.json")
    assert field in str(err.value) and "h/config.json" in str(err.value)
