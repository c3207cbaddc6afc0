"""Formulas against hand-computed values (Qwen2.5-7B, Llama-3.1-8B) and published counts."""

from __future__ import annotations

import pytest

from rlplex.estimate import formulas as f
from rlplex.estimate.specs import match_preset, model_presets


def test_qwen25_7b_by_hand() -> None:
    s = model_presets()["qwen2.5-7b"]
    h, inter, layers, q, kv, vocab = 3584, 18944, 28, 28 * 128, 4 * 128, 152064
    attention = h * q + 2 * h * kv + q * h + (q + 2 * kv)  # projections + q/k/v biases
    assert attention == 29_364_736
    per_layer = attention + 3 * h * inter + 2 * h  # SwiGLU MLP, two RMSNorms
    blocks = layers * per_layer
    total = vocab * h + blocks + h + vocab * h  # embedding, blocks, final norm, LM head
    assert f.total_params(s) == total == 7_615_616_512  # "7.61B" on the model card
    assert f.active_params(s) == blocks + vocab * h
    assert f.kv_bytes_per_token(s) == 2 * layers * 4 * 128 * 2 == 57_344
    assert f.kv_bytes_per_token(s, tp=2) == 57_344 / 2
    assert f.kv_bytes_per_token(s, tp=8) == 57_344 / 4  # 4 KV heads: one per rank, replicated
    tokens = 1000
    assert f.forward_flops(s, tokens) == pytest.approx(
        2 * (blocks + vocab * h) * tokens + 2 * 28 * 128 * layers * tokens**2
    )
    assert f.optimizer_bytes_per_param("adamw", "bf16") == 12
    assert f.optimizer_bytes_per_param("adamw", "fp32") == 8


def test_llama31_8b_by_hand() -> None:
    s = model_presets()["llama-3.1-8b"]
    h, inter, layers, vocab = 4096, 14336, 32, 128256
    attention = 2 * h * h + 2 * h * 1024  # q, o; k, v with 8 KV heads of 128
    per_layer = attention + 3 * h * inter + 2 * h
    total = 2 * vocab * h + layers * per_layer + h
    assert f.total_params(s) == total == 8_030_261_248  # "8.03B"
    assert f.kv_bytes_per_token(s) == 2 * 32 * 8 * 128 * 2 == 131_072
    # Decode of one token at 2048 cached tokens: 2 x active params + 4 x layers x width x context
    assert f.decode_token_flops(s, 2048) == pytest.approx(
        2 * (layers * per_layer + vocab * h) + 2 * (2 * 32 * 128) * layers * 2048
    )


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [
        ("qwen2.5-0.5b", 0.49, None),
        ("qwen2.5-1.5b", 1.54, None),
        ("deepseek-r1-distill-qwen-1.5b", 1.78, None),
        ("deepseek-llm-7b", 6.91, None),
        ("qwen2.5-3b", 3.09, None),
        ("qwen2.5-14b", 14.7, None),
        ("qwen2.5-32b", 32.5, None),
        ("qwen2.5-72b", 72.7, None),
        ("qwen3-0.6b", 0.6, None),
        ("qwen3-8b", 8.2, None),
        ("qwen3-14b", 14.8, None),
        ("qwen3-32b", 32.8, None),
        ("qwen3-30b-a3b", 30.5, 3.3),
        ("qwen3-235b-a22b", 235.0, 22.0),
        ("llama-3.1-70b", 70.6, None),
        ("llama-3.2-1b", 1.24, None),
        ("llama-3.2-3b", 3.21, None),
        ("deepseek-v3", 671.0, 37.0),
        ("deepseek-v2-lite", 15.7, 2.4 + 102_400 * 2048 / 1e9),  # the card's 2.4B: no embedding
        ("moonlight-16b-a3b", 16.0, 3.0),
    ],
)
def test_published_parameter_counts(name: str, total_b: float, active_b: float | None) -> None:
    """Totals (and activated parameters, embedding included) as the model cards give them."""
    s = model_presets()[name]
    assert f.total_params(s) / 1e9 == pytest.approx(total_b, rel=0.02)
    if active_b is not None:
        embedding = s.vocab_size * s.hidden_size
        assert (f.active_params(s) + embedding) / 1e9 == pytest.approx(active_b, rel=0.03)


def test_moe_decode_reads_only_the_experts_it_touches() -> None:
    s = model_presets()["qwen3-30b-a3b"]
    one = f.decode_weight_bytes(s, 1, "bf16")
    many = f.decode_weight_bytes(s, 4096, "bf16")
    assert one < many <= f.total_params(s) * 2 + 1
    assert f.expected_experts_touched(s, 1) == pytest.approx(8)


def test_mla_kv_cache_is_the_latent() -> None:
    s = model_presets()["deepseek-v3"]
    assert f.kv_bytes_per_token(s) == 61 * (512 + 64) * 2
    assert f.kv_bytes_per_token(s, tp=8) == f.kv_bytes_per_token(s)  # kept whole on each rank


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
        ("/models/Qwen2.5-72B-Instruct/", "qwen2.5-72b"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b"),
        ("meta-llama/Llama-3.2-1B-Instruct", "llama-3.2-1b"),
        ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-v3"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-7b"),
        ("/models/Qwen3-VL-30B-A3B-Instruct", "qwen3-30b-a3b"),
        ("Qwen/Qwen3-VL-8B-Thinking", "qwen3-8b"),
        # fine-tunes named after their base: trailing words dropped down to a size
        ("virtuoussy/Qwen2.5-7B-Instruct-RLVR", "qwen2.5-7b"),
        ("/path/to/Qwen2.5-Coder-1.5B", "qwen2.5-1.5b"),
        ("Qwen/Qwen2.5-Coder-32B-Instruct", "qwen2.5-32b"),
        ("/ckpt/qwen3-30b-a3b-base-grpo-step100", "qwen3-30b-a3b"),
        # a reward model named after its base, words before the base's name
        ("Skywork/Skywork-Reward-V2-Qwen3-0.6B", "qwen3-0.6b"),
        ("Skywork/Skywork-Reward-V2-Llama-3.1-8B", "llama-3.1-8b"),
        ("moonshotai/Moonlight-16B-A3B-Instruct", "moonlight-16b-a3b"),
        ("deepseek-ai/DeepSeek-V2-Lite-Chat", "deepseek-v2-lite"),
        ("unsloth/gpt-oss-20b-BF16", "gpt-oss-20b"),
        ("google/gemma-3-27b-it", "gemma-3-27b"),
    ],
)
def test_hub_names_match_presets(name: str, preset: str) -> None:
    spec = match_preset(name)
    assert spec is not None and spec.name == preset


@pytest.mark.parametrize(
    "name",
    [
        "Qwen/Qwen2.5-7B-Instruct-distill-Qwen2.5-72B",  # a 7B student, two sizes
        "lmsys/sglang-EAGLE3-Llama-3.1-8B-Instruct",  # a one-layer draft head
        "RedHatAI/Qwen3-8B-speculator.eagle3",
        "lmms-lab/llava-onevision-qwen2-7b-ov",  # a vision model on a Qwen2 base
        "OpenGVLab/VideoChat-Flash-Qwen2-7B_res448",
        "Alibaba-NLP/gte-Qwen2-7B-instruct",  # an embedding model
        "acme/Mamba-Llama-3.1-8B",
    ],
)
def test_names_of_other_networks_match_no_preset(name: str) -> None:
    """A wrong match silently prices the wrong network: worse than asking for a config."""
    assert match_preset(name) is None


def test_a_vision_language_name_warns_its_encoder_is_not_counted() -> None:
    """A VL checkpoint matches the preset of its language model, with a warning saying so."""
    from rlplex.estimate.specs import resolve_model

    warnings: list[str] = []
    spec = resolve_model("Qwen/Qwen2.5-VL-7B-Instruct", warn=warnings)
    assert spec.name == "qwen2.5-7b"
    assert "the vision encoder is not counted" in warnings[0]
    resolve_model("Qwen/Qwen2.5-7B-Instruct", warn=warnings)
    assert "vision" not in warnings[1]


@pytest.mark.parametrize(
    "name",
    [
        "acme/SuperLM-13B",
        "Qwen/Qwen3.5-35B-A3B",
        "org/my-model-7b-x",
        "Qwen2.5",
        "qwen3-8b-a3b-something",  # never the dense qwen3-8b: its active size is kept
    ],
)
def test_unknown_names_match_nothing(name: str) -> None:
    """No preset, and no base name ending in a size once trailing words are dropped."""
    assert match_preset(name) is None


def test_checkpoint_tensor_counts_by_hand() -> None:
    """What a tensor-by-tensor weight sync moves one at a time."""
    presets = model_presets()
    # Llama-3.1-8B: per layer q, k, v, o, gate, up, down and two norms; embedding, norm, head.
    assert f.param_tensors(presets["llama-3.1-8b"]) == 32 * 9 + 3 == 291
    # Qwen2.5-7B adds the q/k/v biases; Qwen2.5-0.5B ties its head to the embedding.
    assert f.param_tensors(presets["qwen2.5-7b"]) == 28 * 12 + 3 == 339
    assert f.param_tensors(presets["qwen2.5-0.5b"]) == 24 * 12 + 2 == 290
    # Qwen3-30B-A3B: q/k norms, a router and 3 matrices for each of 128 experts per layer.
    assert f.param_tensors(presets["qwen3-30b-a3b"]) == 48 * (2 + 6 + 1 + 3 * 128) + 3 == 18_867
    # DeepSeek-V3: MLA (7 tensors), 3 dense layers, 58 MoE layers with a router, its score
    # bias, 256 x 3 expert matrices and a shared expert: NeMo RL's refit of it loads 45,395
    # tensors (NVIDIA-NeMo/RL docs/guides/checkpoint-engine-refit.md, "DeepSeek-V3 Benchmark").
    moe_layer = 2 + 7 + 2 + 3 * 256 + 3
    assert f.param_tensors(presets["deepseek-v3"]) == 3 * 12 + 58 * moe_layer + 3 == 45_395
    assert f.param_tensors(presets["llama-3.1-8b"], head="value") == 32 * 9 + 2 + 2


def test_eager_layers_keep_their_norms_fp32_copies_by_hand() -> None:
    """Hugging Face layers' RMSNorms keep an fp32 copy of their input for the backward:
    8 bytes per hidden element per token and layer; Qwen3's per-head q/k norms 4 + one
    element's bytes per query and key element (bench/saved_activations.py)."""
    qwen25 = model_presets()["qwen2.5-7b"]
    assert f.eager_saved_bytes_per_token(qwen25) == 8 * 3584
    qwen3 = model_presets()["qwen3-8b"]
    h, q, kv = 4096, 32 * 128, 8 * 128
    assert f.eager_saved_bytes_per_token(qwen3, "bf16") == 8 * h + 6 * (q + kv)
    assert f.eager_saved_bytes_per_token(qwen3, "fp32") == 8 * h + 8 * (q + kv)
    tokens, layers = 1000, 28
    fused = f.activation_bytes(qwen25, tokens)
    eager = f.activation_bytes(qwen25, tokens, eager=True)
    # The norms' fp32 copies, and SwiGLU's fourth tensor (silu(gate) apart from the product;
    # Megatron's fused bias-SwiGLU keeps its input and the product only): 18,944 wide, bf16.
    swiglu = 18_944 * 2
    assert eager - fused == pytest.approx(layers * (8 * 3584 + swiglu) * tokens)
    # Recomputation keeps one layer's full set: the extra of one layer.
    assert f.activation_bytes(qwen25, tokens, recompute=True, eager=True) - f.activation_bytes(
        qwen25, tokens, recompute=True
    ) == pytest.approx((8 * 3584 + swiglu) * tokens)
    # Sequence (tensor) parallel splits it with the rest.
    assert f.activation_bytes(qwen25, tokens, tp=4, eager=True) == pytest.approx(eager / 4)


def test_eager_layers_count_moe_and_mla_layers_by_hand() -> None:
    """An eager decode step's host work in dense layers (bench/vllm_eager_layers.py's ratios):
    a dense model's layers count 1 each; Qwen3-30B-A3B's 48 MoE layers 1 + 0.42 (routed
    experts, no shared expert, softmax top-k); DeepSeek-V3's 61 MLA layers 1 + 1.56 each and
    its 58 MoE layers 0.42 + 0.45 (shared expert) + 0.53 (grouped top-k) more."""
    presets = model_presets()
    assert f.eager_layers(presets["qwen2.5-7b"]) == 28
    assert f.eager_layers(presets["qwen3-30b-a3b"]) == pytest.approx(48 * 1.42)
    v3 = presets["deepseek-v3"]
    assert v3.expert_groups == 8 and v3.moe_layers == 58
    assert f.eager_layers(v3) == pytest.approx(61 * 2.56 + 58 * (0.42 + 0.45 + 0.53))


def test_expert_groups_come_from_the_config_json() -> None:
    """``n_group`` (DeepSeek's grouped top-k) is read from a Hugging Face config; a dense model
    has none whatever the file says."""
    from rlplex.estimate.specs import spec_from_hf_config

    base = {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
            "vocab_size": 128, "intermediate_size": 128}  # fmt: skip
    moe = {**base, "n_routed_experts": 16, "num_experts_per_tok": 2,
           "moe_intermediate_size": 32, "n_group": 4}  # fmt: skip
    assert spec_from_hf_config(moe, "c.json").expert_groups == 4
    assert spec_from_hf_config({**base, "n_group": 4}, "c.json").expert_groups == 0


@pytest.mark.parametrize(
    ("path", "preset"),
    [
        ("/path/to/model/DeepSeek-R1-Distill-Qwen-1.5B/", "deepseek-r1-distill-qwen-1.5b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2.5-7b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "qwen2.5-14b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "qwen2.5-32b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "llama-3.1-8b"),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "llama-3.1-70b"),
        ("Qwen/Qwen2.5-Math-7B", "qwen2.5-7b"),
        ("Qwen/Qwen2.5-Math-1.5B", "qwen2.5-1.5b"),
        ("Qwen/Qwen2-7B-Instruct", "qwen2.5-7b"),
        ("deepseek-ai/deepseek-llm-7b-chat", "deepseek-llm-7b"),
        ("~/models/deepseek-llm-7b-chat", "deepseek-llm-7b"),
    ],
)
def test_the_distilled_and_math_models_rl_runs_start_from(path: str, preset: str) -> None:
    """RLinf's and verl's reasoning examples train DeepSeek-R1-Distill and Qwen2.5-Math models:
    each matches the preset of its architecture (the 1.5B distill's untied head its own)."""
    from rlplex.estimate.specs import match_preset

    spec = match_preset(path)
    assert spec is not None and spec.name == preset


@pytest.mark.parametrize(
    ("name", "share", "transfers", "checkpoint"),
    [
        # NeMo RL's "XferDTensor fraction" (docs/design-docs/nccl-reshard-refit.md @ 36b5999a7):
        # Qwen3-4B 66.9 %, Qwen3-30B 95.0 %, DeepSeek-V3 97.6 %.
        ("qwen3-4b", 36 * 3 * 2560 * 9728 / 4_022_468_096, 36 * 3, 36 * 3),
        ("qwen3-30b-a3b", 48 * 128 * 3 * 2048 * 768 / 30_532_122_624, 48 * 3, 48 * 128 * 3),
        (
            "deepseek-v3",
            (3 * 3 * 7168 * 18432 + 58 * 256 * 3 * 7168 * 2048) / 671_026_419_200,
            (3 + 58) * 3,
            3 * 3 + 58 * 256 * 3,
        ),
    ],
)
def test_projection_share_is_what_a_shard_to_shard_refit_moves(
    name: str, share: float, transfers: int, checkpoint: int
) -> None:
    spec = model_presets()[name]
    assert f.projection_params(spec) / f.total_params(spec) == pytest.approx(share)
    published = {"qwen3-4b": 0.669, "qwen3-30b-a3b": 0.950, "deepseek-v3": 0.976}[name]
    assert round(share, 3) == published
    assert f.projection_tensors(spec) == transfers
    assert f.projection_checkpoint_tensors(spec) == checkpoint


def test_stacked_experts_are_two_transfers_a_layer() -> None:
    """gpt-oss stacks a layer's experts (gate_up_proj, down_proj): a shard-to-shard refit
    sends those two, not three matrices (a bug in the first version, found in review)."""
    spec = model_presets()["gpt-oss-20b"]
    assert f.projection_tensors(spec) == spec.moe_layers * 2 == 48
    assert f.projection_checkpoint_tensors(spec) == 48
