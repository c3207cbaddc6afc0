"""Windowed (sliding-window) attention: gpt-oss, Gemma 3, Mistral v0.1.

A windowed layer lets each token attend to the last ``sliding_window`` tokens only, so its
attention work and its KV cache stop growing at the window. The parameter and tensor counts
are checked against tiny models transformers builds from the same config.json keys; the
attention, cache and decode terms by hand.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import estimate_config
from rlplex.estimate.lengths import mean_windowed_square, response_lengths
from rlplex.estimate.specs import ModelSpec, model_presets, spec_from_hf_config
from rlplex.estimate.turns import multi_turn
from rlplex.resources.inputs import Workload

TINY_GPT_OSS: dict[str, Any] = {
    "vocab_size": 320, "hidden_size": 64, "intermediate_size": 48, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 8,
    "tie_word_embeddings": False,
}  # fmt: skip


def _saved_tensors(folder: Path) -> int:
    safetensors = pytest.importorskip("safetensors")
    count = 0
    for shard in folder.glob("*.safetensors"):
        with safetensors.safe_open(str(shard), "pt") as handle:
            count += len(list(handle.keys()))
    return count


def test_tiny_gpt_oss_counts_match_transformers(tmp_path: Path) -> None:
    """Alternating windowed layers, experts of width intermediate_size, biases on attention
    and router, the experts stacked in the checkpoint; the sinks (one number per head) are
    the only parameters the formulas leave out."""
    transformers = pytest.importorskip("transformers")
    config = transformers.GptOssConfig(**TINY_GPT_OSS)
    model = transformers.GptOssForCausalLM(config)
    spec = spec_from_hf_config(config.to_dict(), "tiny-oss/config.json")
    windows = (spec.sliding_window, spec.sliding_window_layers, spec.full_attention_layers)
    assert windows == (8, 2, 2)
    assert spec.num_experts == 4 and spec.moe_intermediate_size == 48 and spec.moe_layers == 4
    assert spec.router_bias and spec.qkv_bias and spec.fused_expert_tensors
    counted = sum(p.numel() for p in model.parameters())
    sinks = 4 * 4  # one per head and layer
    o_bias = 4 * 64  # the output projection's bias
    expert_biases = 4 * 4 * (2 * 48 + 64)  # gate_up and down biases of every expert
    assert f.total_params(spec) == counted - sinks - o_bias - expert_biases
    model.save_pretrained(tmp_path)
    # Per layer the formulas count 4 projections, 3 q/k/v biases, 2 norms, the router and its
    # bias and 4 stacked expert tensors; the checkpoint adds the o bias and the sinks.
    assert f.param_tensors(spec) == _saved_tensors(tmp_path) - 2 * 4


def test_tiny_gemma3_counts_and_windowed_layers_match_transformers() -> None:
    """Gemma 3's text model: five windowed layers to a global one, tied embeddings, q/k norms
    (its two extra norms per layer are the only weights left out)."""
    transformers = pytest.importorskip("transformers")
    keys = {
        "vocab_size": 320, "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 12, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "sliding_window": 8,
    }  # fmt: skip
    config = transformers.Gemma3TextConfig(**keys)
    model = transformers.Gemma3ForCausalLM(config)
    spec = spec_from_hf_config(config.to_dict(), "tiny-gemma/config.json")
    assert (spec.sliding_window_layers, spec.full_attention_layers) == (10, 2)
    assert spec.tied_embeddings and spec.qk_norm
    extra_norms = 12 * 2 * 64
    assert f.total_params(spec) == sum(p.numel() for p in model.parameters()) - extra_norms
    # A hub config that gives only the window (Gemma 3's class default pattern, 6).
    bare = {**keys, "model_type": "gemma3_text"}
    assert spec_from_hf_config(bare, "c.json").sliding_window_layers == 10


@pytest.mark.parametrize(
    ("extra", "windowed"),
    [
        ({"sliding_window": 4096}, 32),  # Mistral v0.1: every layer
        ({"sliding_window": 131072, "use_sliding_window": False}, 0),  # Qwen2: named, unused
        ({"sliding_window": None}, 0),
        ({"sliding_window": 512, "sliding_window_pattern": 4}, 24),
        ({"sliding_window": 512, "layer_types": ["full_attention"] * 32}, 0),
    ],
)
def test_which_layers_a_config_windows(extra: dict[str, Any], windowed: int) -> None:
    base = {
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
    }  # fmt: skip
    assert spec_from_hf_config({**base, **extra}, "c.json").sliding_window_layers == windowed


def test_mixtral_style_local_experts_read_as_moe() -> None:
    """``num_local_experts`` (Mixtral, gpt-oss): every layer's MLP is experts of width
    ``intermediate_size``."""
    data = {
        "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
        "num_local_experts": 8, "num_experts_per_tok": 2, "model_type": "mixtral",
    }  # fmt: skip
    spec = spec_from_hf_config(data, "c.json")
    assert (spec.num_experts, spec.moe_intermediate_size, spec.moe_layers) == (8, 14336, 32)
    assert 46.6e9 < f.total_params(spec) < 46.8e9  # Mixtral-8x7B: 46.7B


def test_presets_have_their_published_sizes() -> None:
    presets = model_presets()
    sizes = {  # total, active (B): the model cards
        "gpt-oss-20b": (20.9, 3.6), "gpt-oss-120b": (116.8, 5.1), "gemma-3-1b": (1.0, 1.0),
        "gemma-3-4b": (3.88, 3.88), "gemma-3-12b": (11.77, 11.77), "gemma-3-27b": (27.0, 27.0),
    }  # fmt: skip
    for name, (total, active) in sizes.items():
        s = presets[name]
        assert f.total_params(s) / 1e9 == pytest.approx(total, abs=0.06), name
        assert f.active_params(s) / 1e9 == pytest.approx(active, abs=0.06), name


def _windowed(window: int = 100, layers: int = 6) -> ModelSpec:
    spec = model_presets()["llama-3.1-8b"]
    return spec.model_copy(update={"sliding_window": window, "sliding_window_layers": layers})


def test_attention_terms_by_hand() -> None:
    """Token i attends to min(i, W) keys: L**2 up to the window, 2 W L - W**2 beyond."""
    assert f.windowed_square(80, 100) == 6400
    assert f.windowed_square(300, 100) == 2 * 100 * 300 - 100**2
    assert f.windowed_square(300, 0) == 300**2
    s = _windowed()  # 26 full layers, 6 windowed
    assert f.attention_squares(s, 300) == 26 * 300**2 + 6 * (60_000 - 10_000)
    assert f.attended_keys(s, 300) == 26 * 300 + 6 * 100
    assert f.attended_keys(s, 40) == 32 * 40
    width = 2 * 32 * 128
    assert f.forward_flops(s, 300) == pytest.approx(
        f.token_flops(s) * 300 + width * (26 * 300**2 + 6 * 50_000)
    )
    # KV cache: 8 KV heads x 128 wide, K and V, bf16, per layer and token; tp 2 halves it.
    assert f.kv_bytes_per_token(s, tp=2) == 2 * 26 * 4 * 128 * 2
    assert f.kv_bytes_per_token(s, tp=2, windowed=True) == 2 * 6 * 4 * 128 * 2
    assert f.window_kv_bytes(s, 300, tp=2) == 100 * 2 * 6 * 4 * 128 * 2
    assert f.window_kv_bytes(s, 60, tp=2) == 60 * 2 * 6 * 4 * 128 * 2
    assert f.window_kv_bytes(model_presets()["llama-3.1-8b"], 300) == 0


def test_mean_windowed_square_against_the_sampled_lengths() -> None:
    """The closed form of E[g(prompt + R)] against the distribution's own representative
    lengths, below, across and beyond the window, with and without a truncated share."""
    for mean, cap, clip, prompt, window in [
        (600, 1436, None, 100, 128), (1500, 4000, 0.1, 300, 1024), (500, 2000, None, 2000, 1024),
    ]:  # fmt: skip
        dist = response_lengths(mean, cap, clip)
        sampled = dist.lengths(100_000)
        by_hand = sum(f.windowed_square(prompt + r, window) for r in sampled) / len(sampled)
        assert mean_windowed_square(dist, prompt, window) == pytest.approx(by_hand, rel=1e-3)
        full = prompt**2 + 2 * prompt * dist.mean + dist.mean_square()
        assert mean_windowed_square(dist, prompt, 0) == pytest.approx(full)


def _gpt_oss(base: dict[str, Any]) -> dict[str, Any]:
    cfg = copy.deepcopy(base)
    cfg["model"] = "gpt-oss-20b"
    cfg["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    return cfg


def test_a_windowed_model_trains_on_less_attention(base: dict[str, Any]) -> None:
    """Padded batches cost every sequence the longest (200 + 600 tokens): per windowed layer
    2 W L - W**2 of the full layer's L**2."""
    cfg = _gpt_oss(base)
    cfg["workload"]["packing"] = False
    est = estimate_config(config_from_dict(cfg, file="t.yaml"))
    spec = model_presets()["gpt-oss-20b"]
    attention = f.attention_width(spec) * (12 * 800**2 + 12 * (2 * 128 * 800 - 128**2)) * 256
    matmuls = f.token_flops(spec) * 800 * 256
    assert est.stages["ref_logprob"].flops == pytest.approx(matmuls + attention)


def test_a_windowed_engine_caches_at_most_the_window(base: dict[str, Any]) -> None:
    """Each of the 64 sequences of a replica (tp 2) holds its 800 tokens in the 12 full layers
    and 128 in the 12 windowed ones: 8 KV heads over 2 ranks, 64 wide, bf16."""
    est = estimate_config(config_from_dict(_gpt_oss(base), file="t.yaml"))
    per_layer_token = 2 * 4 * 64 * 2
    one = 800 * 12 * per_layer_token + 128 * 12 * per_layer_token
    assert est.roles["actor_infer"].states["kv_cache"] == pytest.approx(64 * one / 1e9)


def test_windowed_layers_decode_a_fixed_cache_per_sequence(base: dict[str, Any]) -> None:
    """The same engine with its windows taken away reads every token's cache in all 24
    layers: the windowed one's decode steps are cheaper, its cache grows slower."""
    windowed = estimate_config(config_from_dict(_gpt_oss(base), file="t.yaml"))
    spec = model_presets()["gpt-oss-20b"]
    assert f.decode_token_flops(spec, 1000) == pytest.approx(
        f.token_flops(spec) + 2 * f.attention_width(spec) * (12 * 1000 + 12 * 128)
    )
    full_spec = spec.model_copy(update={"sliding_window": 0, "sliding_window_layers": 0})
    assert f.kv_bytes_per_token(full_spec) == 2 * f.kv_bytes_per_token(spec)
    gen = windowed.stages["generate"]
    assert gen.terms["memory"] > 0
    assert (
        windowed.roles["actor_infer"].states["kv_cache"]
        < 64 * 800 * f.kv_bytes_per_token(full_spec, tp=2) / 1e9
    )


def test_turn_prefill_attends_within_the_window() -> None:
    """Turns 2 and 3 of a three-turn trajectory (prompt p = 100, answers of 200, observations
    o = 100: u = 300 a turn): with prefix caching turn j's observation attends to
    p + j u - o/2 keys, at most the window (500) in a windowed layer; without it turn j
    prefills p + j u tokens from scratch, g(p + j u) in a windowed layer."""
    spec = _windowed(window=500, layers=6)
    base = {"prompts_per_step": 1, "prompt_tokens": {"mean": 100, "max": 200},
            "response_tokens": {"mean": 200, "max": 400}}  # fmt: skip
    turns = {"mean": 3, "max": 6, "observation_tokens": 100}
    width = f.attention_width(spec)
    cached = multi_turn(Workload.model_validate({**base, "turns": turns}))
    keys = [100 + j * 300 - 50 for j in (1, 2)]  # 350, 650
    assert cached.prefill_flops(spec) == pytest.approx(
        f.token_flops(spec) * 200 + 2 * width * 100 * (26 * sum(keys) + 6 * (350 + 500))
    )
    again = multi_turn(
        Workload.model_validate({**base, "turns": {**turns, "prefix_caching": False}})
    )
    squares = sum(26 * L**2 + 6 * f.windowed_square(L, 500) for L in (400, 700))
    assert again.prefill_flops(spec) == pytest.approx(
        f.token_flops(spec) * again.prefill_tokens + width * squares
    )


def test_estimate_says_which_layers_are_windowed() -> None:
    from typer.testing import CliRunner

    from rlplex.cli import app

    examples = Path(__file__).resolve().parents[2] / "examples"
    args = ["estimate", str(examples / "estimate_7b.yaml"), "--set", "model=gpt-oss-20b"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "12 of 24 attention layers windowed" in result.stdout
    assert "stop at 128 tokens a sequence" in result.stdout


@pytest.mark.parametrize(
    ("extra", "windowed"),
    [
        ({"use_sliding_window": True, "max_window_layers": 28}, 0),  # every layer full
        ({"use_sliding_window": True, "max_window_layers": 21}, 7),  # the layers from 21 on
        ({}, 0),  # use_sliding_window absent: Qwen2's default false
    ],
)
def test_qwen2_windows_only_the_layers_past_max_window_layers(
    extra: dict[str, Any], windowed: int
) -> None:
    data = {
        "model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584,
        "intermediate_size": 18944, "num_attention_heads": 28, "num_key_value_heads": 4,
        "vocab_size": 152064, "sliding_window": 131072, **extra,
    }  # fmt: skip
    assert spec_from_hf_config(data, "c.json").sliding_window_layers == windowed


def test_an_unknown_local_experts_layout_is_refused() -> None:
    """Llama 4 interleaves MoE and dense layers and adds a shared expert of another width:
    read as Mixtral's layout it came out 101.7B / 10.1B active for Scout (109B / 17B)."""
    from rlplex.errors import ConfigError

    data = {
        "model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_attention_heads": 40,
        "num_key_value_heads": 8, "vocab_size": 202048, "num_local_experts": 16,
        "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"num_local_experts.*llama4_text"):
        spec_from_hf_config(data, "c.json")


def test_a_window_that_never_binds_gives_the_full_turn_prefill() -> None:
    """A fractional mean turn count: the windowed share is the full one less what passes the
    window, so a window longer than every context changes nothing."""
    spec = model_presets()["llama-3.1-8b"]
    wide = spec.model_copy(update={"sliding_window": 10**9, "sliding_window_layers": 6})
    base = {"prompts_per_step": 1, "prompt_tokens": {"mean": 100, "max": 200},
            "response_tokens": {"mean": 200, "max": 400}}  # fmt: skip
    for caching in (True, False):
        turns = {"mean": 2.5, "max": 6, "observation_tokens": 100, "prefix_caching": caching}
        t = multi_turn(Workload.model_validate({**base, "turns": turns}))
        assert t.prefill_flops(wide) == pytest.approx(t.prefill_flops(spec), rel=1e-12)
