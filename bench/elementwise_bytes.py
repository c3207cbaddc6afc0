"""Memory traffic of a Hugging Face decoder layer's non-matmul operators: the source of the
eager-kernel term.

Run: ``.venv/bin/python bench/elementwise_bytes.py [--json]``.

A trainer that runs Hugging Face modules (verl's FSDP workers, NeMo RL's DTensor path,
RLinf, DeepSpeed trainers) computes each RMSNorm, rotary embedding, activation and
residual add as a chain of PyTorch operators, each reading and writing whole activation
tensors; Megatron-Core with Transformer Engine runs each as one fused kernel or folds it
into a matmul. Bytes moved do not depend on the device, so they are counted here, on the
CPU: a ``TorchDispatchMode`` sums the bytes of every tensor each ATen operator reads and
writes in one Qwen2/Qwen3 decoder layer's forward and backward (bf16), skipping views,
allocations, the matmuls and attention (priced by their own terms), at two token counts;
the difference is the traffic per token, free of per-call constants. It then fits
``a · hidden + b · (query + key widths) + c · MLP width`` (and, for Qwen3, the per-head
query/key RMSNorm) over several layer shapes and prints each shape's count against the
fit, and the backward-to-forward ratio. ``rlplex/estimate/formulas.py`` (``EAGER_*``)
holds the figures this prints; ``tests/bench/test_elementwise_bytes.py`` checks one shape.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, NamedTuple

SKIPPED = frozenset({
    # no data moved: views and allocations
    "view", "_unsafe_view", "reshape", "_reshape_alias", "transpose", "t", "expand", "slice",
    "select", "unsqueeze", "squeeze", "permute", "alias", "detach", "as_strided", "split",
    "split_with_sizes", "unbind", "chunk", "narrow", "lift_fresh", "empty", "empty_like",
    "zeros", "zeros_like", "ones", "ones_like", "full", "new_empty", "new_zeros",
    "empty_strided", "new_empty_strided", "arange", "scalar_tensor", "_local_scalar_dense",
    "is_same_size", "_has_compatible_shallow_copy_type",
    # priced by their own terms: matmuls (compute) and attention
    "mm", "addmm", "bmm", "matmul", "linear", "baddbmm", "scaled_dot_product_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
})  # fmt: skip


class Shape(NamedTuple):
    hidden: int
    mlp: int
    heads: int
    kv_heads: int
    head_dim: int
    qk_norm: bool

    @property
    def attn(self) -> int:
        """Widths the rotary embedding (and a Qwen3 q/k norm) run over: query + key."""
        return (self.heads + self.kv_heads) * self.head_dim


SHAPES = (
    Shape(512, 1536, 8, 2, 64, False),
    Shape(1024, 2816, 8, 2, 128, False),
    Shape(1024, 4096, 16, 4, 64, False),
    Shape(768, 2048, 12, 12, 64, False),
    Shape(1536, 4096, 12, 2, 128, False),
    Shape(1024, 3072, 16, 8, 128, True),
    Shape(2048, 6144, 16, 8, 128, True),
)


def layer_bytes(shape: Shape, tokens: int, lora_rank: int | None = None) -> tuple[int, int]:
    """Bytes the non-matmul operators of one decoder layer move: (forward, backward).

    ``lora_rank``: the layer's weights frozen and, unless 0, Hugging Face peft's LoRA
    adapters of that rank injected into every projection (``bench/lora_bytes.py``; needs
    peft importable).
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ in SKIPPED:
                return out
            tensors, _ = tree_flatten((args, kwargs or {}, out))
            self.total += sum(
                t.numel() * t.element_size()
                for t in tensors
                if isinstance(t, torch.Tensor) and t.numel() > 1
            )
            return out

    if shape.qk_norm:
        from transformers import Qwen3Config as Config
        from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer as Layer
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding as Rope
    else:
        from transformers import Qwen2Config as Config
        from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer as Layer
        from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding as Rope
    torch.manual_seed(0)
    config = Config(
        hidden_size=shape.hidden, intermediate_size=shape.mlp, num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim, num_hidden_layers=1,
        max_position_embeddings=4096,
    )  # fmt: skip
    config._attn_implementation = "sdpa"
    layer = Layer(config, 0).to(torch.bfloat16)
    if lora_rank is not None:
        layer.requires_grad_(False)
        if lora_rank:
            from peft import LoraConfig, inject_adapter_in_model

            targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
            adapters = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules=targets)
            layer = inject_adapter_in_model(adapters, layer).to(torch.bfloat16)
    x = torch.randn(1, tokens, shape.hidden, dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(tokens).unsqueeze(0)
    cos, sin = (t.detach() for t in Rope(config)(x, positions))
    forward = Counter()
    with forward:
        out = layer(x, position_embeddings=(cos, sin), attention_mask=None, position_ids=positions)
        y = out[0] if isinstance(out, tuple) else out
    grad = torch.randn_like(y)
    backward = Counter()
    with backward:
        y.backward(grad)
    return forward.total, backward.total


def per_token(shape: Shape) -> tuple[float, float]:
    """(forward, backward) bytes per token: the difference between two token counts."""
    f1, b1 = layer_bytes(shape, 64)
    f2, b2 = layer_bytes(shape, 128)
    return (f2 - f1) / 64, (b2 - b1) / 64


def fit(rows: list[tuple[Shape, float]]) -> dict[str, float]:
    """Least squares of bytes per token on hidden, q+k widths, MLP width, q+k norm widths."""
    import numpy as np

    a = np.array(
        [[s.hidden, s.attn, s.mlp, s.attn if s.qk_norm else 0] for s, _ in rows], dtype=float
    )
    y = np.array([b for _, b in rows], dtype=float)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return dict(zip(("hidden", "attn", "mlp", "qk_norm"), (float(c) for c in coef), strict=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    measured = [(s, *per_token(s)) for s in SHAPES]
    forward = fit([(s, f) for s, f, _ in measured])
    ratio = sum(b for _, _, b in measured) / sum(f for _, f, _ in measured)
    rows: list[dict[str, Any]] = []
    for s, f, b in measured:
        predicted = (
            forward["hidden"] * s.hidden + forward["attn"] * s.attn + forward["mlp"] * s.mlp
            + (forward["qk_norm"] * s.attn if s.qk_norm else 0.0)
        )  # fmt: skip
        rows.append({
            "shape": s._asdict(), "forward_bytes_per_token": f, "backward_bytes_per_token": b,
            "fit_forward": predicted, "fit_error": predicted / f - 1.0,
        })  # fmt: skip
    if args.json:
        print(json.dumps({"forward_fit": forward, "backward_over_forward": ratio, "rows": rows},
                         indent=2))  # fmt: skip
        return
    print("bytes per token per decoder layer, non-matmul operators, bf16 (Hugging Face Qwen2/3)")
    print("hidden  mlp    heads kv  hd   qk_norm  forward   backward  bwd/fwd  fit fwd  err")
    for r in rows:
        s = r["shape"]
        print(
            f"{s['hidden']:6d} {s['mlp']:6d} {s['heads']:5d} {s['kv_heads']:3d} {s['head_dim']:4d}"
            f"  {s['qk_norm']!s:7s} {r['forward_bytes_per_token']:9.0f}"
            f" {r['backward_bytes_per_token']:9.0f}"
            f"  {r['backward_bytes_per_token'] / r['forward_bytes_per_token']:6.2f}"
            f"  {r['fit_forward']:8.0f}  {r['fit_error'] * 100:+.2f}%"
        )
    print(
        "forward fit: "
        + ", ".join(f"{k} {v:.2f}" for k, v in forward.items())
        + f" bytes per element; backward / forward {ratio:.3f}"
    )


if __name__ == "__main__":
    main()
