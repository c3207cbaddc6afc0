"""LoRA: adapters' weights, a frozen base's cheaper backward, adapter-only weight syncs, and an
engine's LoRA kernels, each against a hand-computed value."""

from __future__ import annotations

from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import estimate_config
from rlplex.estimate.specs import model_presets

P = 8_030_261_248  # llama-3.1-8b parameters (tests/estimate/test_formulas.py)
ALL = ("q", "k", "v", "o", "gate", "up", "down")
# llama-3.1-8b, rank 64 on every projection: per layer q 4,096 -> 4,096, k and v 4,096 ->
# 1,024, o 4,096 -> 4,096, gate and up 4,096 -> 14,336, down 14,336 -> 4,096; 32 layers.
A = 64 * 32 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096) + 3 * (4096 + 14336))


def test_adapter_weights_are_what_peft_reports() -> None:
    """peft prints ``trainable params: 167,772,160`` for Llama-3.1-8B and 161,480,704 for
    Qwen2.5-7B at r=64 on all linear layers; the count by hand gives the same."""
    presets = model_presets()
    assert A == 167_772_160
    assert f.lora_params(presets["llama-3.1-8b"], 64, ALL) == A
    # qwen2.5-7b: hidden 3,584, 28 / 4 heads of 128, MLP 18,944, 28 layers
    qwen = 64 * 28 * ((3584 * 2) + 2 * (3584 + 512) + (3584 * 2) + 3 * (3584 + 18944))
    assert qwen == 161_480_704
    assert f.lora_params(presets["qwen2.5-7b"], 64, ALL) == qwen
    # q and v only
    qv = 64 * 32 * ((4096 + 4096) + (4096 + 1024))
    assert f.lora_params(presets["llama-3.1-8b"], 64, ("q", "v")) == qv
    assert f.lora_tensors(presets["llama-3.1-8b"], ALL) == 2 * 7 * 32


def test_moe_adapters_count_every_expert_and_a_token_its_own() -> None:
    """Qwen3-30B-A3B (hidden 2,048, 32 / 4 heads of 128, 128 experts of 768, 8 per token, 48
    layers): every expert's gate, up and down carry adapters; a token multiplies by its 8."""
    spec = model_presets()["qwen3-30b-a3b"]
    attention = (2048 + 4096) + 2 * (2048 + 512) + (4096 + 2048)
    expert = 3 * (2048 + 768)
    assert f.lora_params(spec, 64, ALL) == 64 * 48 * (attention + 128 * expert)
    assert f.lora_params(spec, 64, ALL, active=True) == 64 * 48 * (attention + 8 * expert)


def test_mla_keys_and_values_share_their_adapters() -> None:
    """MLA compresses keys and values through one down- and one up-projection: adapting
    either adapts both."""
    spec = model_presets()["deepseek-v3"]
    k = f.lora_params(spec, 16, ("k",))
    assert k == f.lora_params(spec, 16, ("v",)) == f.lora_params(spec, 16, ("k", "v"))
    kv = (7168 + 512 + 64) + (512 + 128 * (128 + 128))
    assert k == 16 * 61 * kv


def test_adapter_elementwise_bytes_by_hand() -> None:
    """bench/lora_bytes.py: forward 10 bytes per output element, backward 4 per output and 6
    per input element of every adapted projection."""
    d_out = 4096 + 1024 + 1024 + 4096 + 2 * 14336 + 4096
    d_in = 5 * 4096 + 4096 + 14336
    fwd, bwd = f.lora_elementwise_bytes(model_presets()["llama-3.1-8b"], ALL)
    assert (fwd, bwd) == (10 * d_out, 4 * d_out + 6 * d_in)


def test_lora_decode_kernels() -> None:
    """vLLM V1: a buffer, a shrink and an expand per wrapped linear layer (4 a layer); V0: per
    slice (q, k, v, o, gate, up, down)."""
    assert f.lora_decode_kernels(vllm_v0=False) == 12
    assert f.lora_decode_kernels(vllm_v0=True) == 21


def _lora(base: dict[str, Any], rank: int = 64, **infer: Any) -> dict[str, Any]:
    base["roles"]["actor_train"]["lora"] = {"rank": rank}
    base["roles"]["actor_infer"]["lora"] = {"rank": rank}
    base["roles"]["actor_infer"]["rollout"] = infer
    return base


def test_trained_adapters_hold_the_grads_and_optimizer_state(base: dict[str, Any]) -> None:
    """ZeRO-1 over 8 ranks: the frozen weights stay, grads and AdamW state cover the adapters."""
    est = estimate_config(config_from_dict(_lora(base), file="t.yaml"))
    train = est.roles["actor_train"].states
    assert train["weights"] == pytest.approx((P + A) * 2 / 1e9)
    assert train["grads"] == pytest.approx(A * 2 / 1e9)
    assert train["optimizer"] == pytest.approx(A * 12 / 8 / 1e9)
    assert est.roles["actor_infer"].states["weights"] == pytest.approx((P + A) * 2 / 2 / 1e9)


def test_a_frozen_base_skips_its_weight_gradients(base: dict[str, Any]) -> None:
    """Padded, 256 sequences x 800 tokens: full training does 3 matmul passes; LoRA does 2 over
    the base weights, attention stays at 3, and the adapters take 3 x 2 FLOPs per weight and
    token. The data-parallel reduction covers the adapters only."""
    base["workload"]["packing"] = False
    full = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    lora = estimate_config(config_from_dict(_lora(base), file="t.yaml")).stages["train"]
    spec = model_presets()["llama-3.1-8b"]
    tokens = 256 * 800
    active = f.active_params(spec)
    adapters = f.lora_params(spec, 64, ALL, active=True)
    assert lora.flops == pytest.approx(full.flops - 2 * active * tokens + 3 * 2 * adapters * tokens)
    assert full.bytes == pytest.approx(2 * P * 2 * 7 / 8)  # ZeRO-1: reduce-scatter + gather
    assert lora.bytes == pytest.approx(2 * A * 2 * 7 / 8)


def test_adapter_operators_add_their_traffic(base: dict[str, Any]) -> None:
    """The trainer runs fused layers (ZeRO-1): all of its eager traffic is the adapters',
    forward and backward over each rank's 25,600 padded tokens and 32 layers."""
    base["workload"]["packing"] = False
    train = estimate_config(config_from_dict(_lora(base), file="t.yaml")).stages["train"]
    fwd, bwd = f.lora_elementwise_bytes(model_presets()["llama-3.1-8b"], ALL)
    assert train.detail["eager_traffic_s"] == pytest.approx(
        256 * 800 / 8 * 32 * (fwd + bwd) / 3350e9
    )


def test_an_adapter_engine_pays_its_lora_kernels(base: dict[str, Any]) -> None:
    """12 small kernels a layer at decode_layer_s / 8 each, over 32 layers; eager also 12
    operators at eager_layer_s / 20; vLLM V0 launches 21 a layer."""
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    graphs = estimate_config(config_from_dict(_lora(base), file="t.yaml")).stages["generate"]
    extra = graphs.detail["step_floor_s"] - plain.detail["step_floor_s"]
    assert extra == pytest.approx(12 * 3e-5 / 8 * 32)
    base["roles"]["actor_infer"].pop("lora")
    base["roles"]["actor_infer"]["rollout"] = {"cuda_graphs": False}
    eager_plain = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    eager = estimate_config(config_from_dict(_lora(base, cuda_graphs=False), file="t.yaml")).stages[
        "generate"
    ]
    extra = eager.detail["step_floor_s"] - eager_plain.detail["step_floor_s"]
    assert extra == pytest.approx(12 * 3e-5 / 8 * 32 + 12 * 3e-4 / 20 * 32)
    v0 = estimate_config(config_from_dict(_lora(base, vllm_v0=True), file="t.yaml"))
    base["roles"]["actor_infer"].pop("lora")
    v0_plain = estimate_config(config_from_dict(base, file="t.yaml"))
    extra = v0.stages["generate"].detail["step_floor_s"]
    extra -= v0_plain.stages["generate"].detail["step_floor_s"]
    assert extra == pytest.approx(21 * 3e-5 / 8 * 32)


def test_an_adapter_sync_moves_the_adapters_only(base: dict[str, Any]) -> None:
    """Colocated, the engine keeping its base weights across sleeps (level 1): each engine
    device (tp 2) loads its half of the adapters. At level 2 it lost its base weights and
    takes the whole model again; an engine without adapters takes the merged weights."""
    sync = estimate_config(config_from_dict(_lora(base, sleep_level=1), file="t.yaml"))
    sync_stage = sync.stages["weight_sync"]
    assert sync_stage.detail["gb_per_device"] == pytest.approx(A * 2 / 2 / 1e9)
    assert sync_stage.detail["adapters_only"] is True
    whole = (P + A) * 2 / 2 / 1e9
    level2 = estimate_config(config_from_dict(_lora(base, sleep_level=2), file="t.yaml"))
    assert level2.stages["weight_sync"].detail["gb_per_device"] == pytest.approx(whole)
    base["roles"]["actor_infer"].pop("lora")
    merged = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert merged.detail["gb_per_device"] == pytest.approx(P * 2 / 2 / 1e9)
    assert "adapters_only" not in merged.detail


def test_a_split_adapter_sync_broadcasts_the_adapters(base: dict[str, Any]) -> None:
    """Trainer on GPUs 0-3, engine on 4-7: every engine device receives the adapters whole
    (A x 2 bytes), tensor by tensor: an A and a B per adapted projection."""
    base["roles"]["actor_train"]["devices"] = "0-3"
    base["roles"]["reference"]["devices"] = "0-3"
    base["roles"]["actor_infer"]["devices"] = "4-7"
    split = _lora(base, weight_sync="per_tensor")
    split["pipeline"]["mode"] = "async"
    split["pipeline"]["max_staleness"] = 1
    sync = estimate_config(config_from_dict(split, file="t.yaml")).stages["weight_sync"]
    assert sync.detail["full_model_gb"] == pytest.approx(A * 2 / 1e9)
    assert sync.detail["tensors"] == 2 * 7 * 32
    assert sync.terms["overhead"] == pytest.approx(2 * 7 * 32 * 0.00077)
    # A resharded sync of adapters alone sends them whole, as the overlapped refit does.
    resharded = _lora(base, weight_sync="resharded")
    resharded["pipeline"] = split["pipeline"]
    whole = estimate_config(config_from_dict(resharded, file="t.yaml")).stages["weight_sync"]
    assert "resharded" not in whole.detail
    assert whole.detail["full_model_gb"] == pytest.approx(A * 2 / 1e9)


@pytest.mark.parametrize(
    ("lora", "field"),
    [
        ({"rank": 0}, "rank"),
        ({"rank": -8}, "rank"),
        ({"rank": 8, "targets": []}, "targets"),
        ({"rank": 8, "targets": ["q_proj"]}, "targets"),
        ({"rank": 8, "alpha": 16}, "alpha"),
    ],
)
def test_bad_lora_values_name_the_field(
    base: dict[str, Any], lora: dict[str, Any], field: str
) -> None:
    base["roles"]["actor_train"]["lora"] = lora
    with pytest.raises(ConfigError) as err:
        config_from_dict(base, file="t.yaml")
    assert f"roles.actor_train.lora.{field}" in str(err.value)


def test_adapters_add_host_work_per_layer(base: dict[str, Any]) -> None:
    """Padded passes pay every launch: 16 micro-batches x 0.8 ms x 32 layers x 4.6 (a forward
    and a backward's 3.6), times 1.94 with peft's adapters (bench/layer_overhead.py --lora); a
    forward pass 1.79."""
    base["workload"]["packing"] = False
    est = estimate_config(config_from_dict(_lora(base), file="t.yaml"))
    train, old = est.stages["train"], est.stages["old_logprob"]
    assert train.detail["host_s"] == pytest.approx(16 * 0.0008 * 32 * 4.6 * 1.94)
    assert old.detail["host_s"] == pytest.approx(16 * 0.0008 * 32 * 1.79)
    assert est.stages["ref_logprob"].detail["host_s"] == pytest.approx(16 * 0.0008 * 32)


def test_reference_log_probs_of_a_lora_actor_run_its_base_model(base: dict[str, Any]) -> None:
    """verl (ref_in_actor) and ROLL (disable_adapter) compute the reference log-probs on the
    LoRA actor with its adapters off: the base model's pass, as a plain reference's."""
    base["workload"]["packing"] = False
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages["old_logprob"]
    base["roles"].pop("reference")
    base["pipeline"]["stages"]["ref_logprob"]["role"] = "actor_train"
    est = estimate_config(config_from_dict(_lora(base), file="t.yaml"))
    ref = est.stages["ref_logprob"]
    assert ref.flops == pytest.approx(plain.flops)
    assert ref.detail["host_s"] == pytest.approx(plain.detail["host_s"])
    assert ref.detail["eager_traffic_s"] == pytest.approx(plain.detail["eager_traffic_s"])
    assert est.stages["old_logprob"].flops > plain.flops


def test_estimate_says_what_the_adapters_change(base: dict[str, Any], tmp_path: Any) -> None:
    """``rlplex estimate`` prints the adapters of each LoRA role, the engine's LoRA kernels
    and an adapter-only sync."""
    import yaml
    from typer.testing import CliRunner

    from rlplex.cli import app

    path = tmp_path / "lora.yaml"
    path.write_text(yaml.safe_dump(_lora(base, sleep_level=1)))
    result = CliRunner().invoke(app, ["estimate", str(path)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "serves LoRA adapters (12 more small kernels per layer and decode step" in text
    assert (
        "LoRA rank 64 on q,k,v,o,gate,up,down: 167.8M adapter weights (2.09% of the model),"
        " the rest frozen" in text
    )
    assert "applied at run time" in text
    assert "per actor_infer device (the LoRA adapters only)" in text


def test_an_optimizer_that_does_not_fit_suggests_lora(base: dict[str, Any]) -> None:
    """Llama-3.1-70B's AdamW state over 8 FSDP ranks is 105 GB a GPU: the error names LoRA
    among the ways out; with adapters the optimizer state fits."""
    base["model"] = "llama-3.1-70b"
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    base["roles"]["actor_infer"]["num_gpus_per_worker"] = 8
    with pytest.raises(ConfigError) as err:
        config_from_dict(base, file="t.yaml")
    assert "roles.actor_train.states.optimizer" in str(err.value)
    assert "train LoRA adapters instead (roles.actor_train.lora: {rank: 32}" in str(err.value)
    base["roles"]["actor_train"]["lora"] = {"rank": 32}
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    assert est.roles["actor_train"].states["optimizer"] < 1.0


def test_an_fp32_frozen_base_doubles_the_weights_not_the_sync(base: dict[str, Any]) -> None:
    """verl's FSDP actor keeps its frozen base in fp32 (no master copy to stand in for it):
    (4 P + 2 A) bytes of weights; what it gathers for a merged sync is still the bf16 model."""
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    base["roles"]["actor_train"]["lora"] = {"rank": 64}
    bf16 = estimate_config(config_from_dict(base, file="t.yaml"))
    base["roles"]["actor_train"]["lora"] = {"rank": 64, "frozen_precision": "fp32"}
    fp32 = estimate_config(config_from_dict(base, file="t.yaml"))
    assert bf16.roles["actor_train"].states["weights"] == pytest.approx((P + A) * 2 / 8 / 1e9)
    assert fp32.roles["actor_train"].states["weights"] == pytest.approx((P * 4 + A * 2) / 8 / 1e9)
    merged_bf16, merged_fp32 = bf16.stages["weight_sync"], fp32.stages["weight_sync"]
    assert merged_fp32.detail["gather_gb"] == pytest.approx(merged_bf16.detail["gather_gb"])
    # an engine's own weights are bf16 whatever the setting says
    base["roles"]["actor_infer"]["lora"] = {"rank": 64, "frozen_precision": "fp32"}
    engine = estimate_config(config_from_dict(base, file="t.yaml")).roles["actor_infer"]
    assert engine.states["weights"] == pytest.approx((P + A) * 2 / 2 / 1e9)


def test_a_checkpoint_engine_sync_sends_the_whole_model(base: dict[str, Any]) -> None:
    """verl's checkpoint engine (``server_loaded``) with a LoRA trainer on other GPUs: the
    actor exports ``get_per_tensor_param()`` with ``base_sync_done`` false, the whole model
    (engine_workers.py @ 1dda039b9), so every engine device receives and loads P x 2 bytes,
    not the adapters' A x 2; rlplex priced the adapters alone."""
    base["roles"]["actor_train"]["devices"] = "0-3"
    base["roles"]["reference"]["devices"] = "0-3"
    base["roles"]["actor_infer"]["devices"] = "4-7"
    split = _lora(base, weight_sync="server_loaded")
    split["pipeline"]["mode"] = "async"
    split["pipeline"]["max_staleness"] = 1
    sync = estimate_config(config_from_dict(split, file="t.yaml")).stages["weight_sync"]
    assert sync.detail["full_model_gb"] == pytest.approx(P * 2 / 1e9)
    assert "adapters_only" not in sync.detail
    assert sync.seconds == pytest.approx(0.3 + P * 2 / 1e9 / 3.6 + 291 * 7.1e-5)
