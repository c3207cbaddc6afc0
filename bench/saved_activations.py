"""What Hugging Face decoder layers keep for the backward: the source of the eager activations.

Run: ``.venv/bin/python bench/saved_activations.py`` (CPU, about a minute).

The estimator's activation memory per layer (``layer_activation_elements``:
norm inputs and outputs, queries, keys, values, attention output, SwiGLU's four
tensors) is what a fused layer keeps. A Hugging Face layer (what FSDP and ZeRO-3
trainers run) keeps more: its RMSNorm upcasts the input to fp32 first. This
script counts every tensor autograd saves in a forward pass (a
``saved_tensors_hooks`` pack hook, each storage once, parameters excluded) for
Llama, Qwen2 and Qwen3 stacks of 4 and 8 layers (SDPA attention, 2 x 512
tokens), takes the per-layer difference, and prints it against the formula and
against the extra the estimator adds (``eager_saved_bytes_per_token``). Which
tensors are saved does not depend on the device, apart from the attention
kernel's own (SDPA's flash and memory-efficient kernels keep the output and a
log-sum-exp row per head, as the formula assumes).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from rlplex.estimate import formulas as f
from rlplex.estimate.specs import spec_from_hf_config

SHAPE = {
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "attn_implementation": "sdpa",
}
TOKENS = (2, 512)


def _model(arch: str, layers: int, shape: dict[str, Any] = SHAPE) -> Any:
    import transformers as tf

    config_cls, model_cls = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM),
    }[arch]
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    extra = {"head_dim": head_dim} if arch == "qwen3" else {}
    config = config_cls(num_hidden_layers=layers, **shape, **extra)
    torch.manual_seed(0)
    return config, model_cls(config)


def per_layer(
    arch: str, dtype: torch.dtype, shape: dict[str, Any] = SHAPE, tokens: tuple[int, int] = TOKENS
) -> tuple[float, Any]:
    """Saved bytes per token of one layer (8 layers' count minus 4 layers', over 4), and the
    model's config."""
    config, small = _model(arch, 4, shape)
    _, large = _model(arch, 8, shape)
    difference = saved_bytes(large, dtype, shape, tokens) - saved_bytes(small, dtype, shape, tokens)
    return difference / 4 / (tokens[0] * tokens[1]), config


def saved_bytes(
    model: Any, dtype: torch.dtype, shape: dict[str, Any] = SHAPE, tokens: tuple[int, int] = TOKENS
) -> int:
    """Bytes of every distinct storage autograd saves in one forward pass, parameters excluded."""
    model = model.to(dtype)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen.setdefault(storage.data_ptr(), storage.nbytes())
        return t

    ids = torch.randint(3, shape["vocab_size"], tokens)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids)
    return sum(seen.values())


def main() -> int:
    print(f"{'model':7} {'dtype':9} {'saved B/token/layer':>19} {'fused formula':>14}"
          f" {'measured extra':>15} {'rlplex extra':>13}")  # fmt: skip
    worst = 0.0
    for arch in ("llama", "qwen2", "qwen3"):
        for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "fp32")):
            saved, config = per_layer(arch, dtype)
            spec = spec_from_hf_config(config.to_dict(), arch)
            fused = f.layer_activation_elements(spec) * f.BYTES_PER_ELEMENT[name]
            model_extra = f.eager_saved_bytes_per_token(spec, name)
            extra = saved - fused
            worst = max(worst, abs(extra - model_extra) / saved)
            print(f"{arch:7} {name:9} {saved:19,.0f} {fused:14,.0f} {extra:15,.0f}"
                  f" {model_extra:13,.0f}")  # fmt: skip
    print(f"largest gap between the estimator's eager layer and the measured one: {worst:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
