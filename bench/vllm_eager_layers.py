"""The host cost of vLLM's decoder layers in an eager decode step, MoE and MLA against dense:
the source of the ``EAGER_*_LAYERS`` ratios in ``rlplex.estimate.formulas``.

Run: ``.venv/bin/python bench/vllm_eager_layers.py [--tokens 16] [--repeats 300] [--json]``.

Without CUDA graphs (``enforce_eager``, verl's default for years) every decode step issues each
layer's kernels from Python, and the host, not the GPU, sets the pace: ``eager_layer_s`` prices
a dense layer at 0.3 ms (a published measurement, docs/cost-model.md). An MoE layer issues
more: a router, a top-k, the tokens' alignment by expert, two grouped-GEMM (Triton) kernels and
their combination, and DeepSeek's a grouped top-k in plain PyTorch operators, shared experts,
and a low-rank (MLA) attention with its own projections and norms. How much more is what this
script measures, with vLLM's own layer code.

It installs vLLM 0.6.3 as ``bench/vllm_v0_host.py`` does (the wheel without dependencies,
once) and builds, on the CPU at narrow widths (hidden 64, one head, MLPs 16 wide: the host's
work does not depend on the width, and the arithmetic left is negligible), one decoder layer
of each kind from vLLM's model files: Qwen2 (dense), Qwen2-MoE without and with its shared
expert (128 experts, top 8: Qwen3-30B-A3B's routing), and DeepSeek-V2 dense and MoE (MLA; 160
experts, top 6, grouped top-k, 2 shared experts). It runs
each on a decode batch of ``--tokens`` sequences with vLLM's CUDA kernels replaced by counting
stand-ins (RMSNorm, rotary embedding, SiLU-and-mul, top-k softmax, the alignment, the MoE sum,
the Triton GEMMs, and attention itself, which is the same call in every layer): what is timed is
vLLM's Python, PyTorch's dispatcher and the PyTorch operators it issues, the host's share of an
eager step. It prints, per layer, the median host milliseconds, the kernels it would launch on a
GPU (PyTorch operators that launch one, and the stand-ins), and its ratio to the dense layer.
From the ratios it derives what each part adds, in dense layers: routed experts in place of
the dense MLP, shared experts, MLA in place of grouped-query attention, and a grouped top-k in
place of a softmax top-k; ``rlplex.estimate.formulas.eager_layers`` prices an eager decode step's
layers as that many dense layers at ``eager_layer_s``: the ratios carry the GPU measurement of
the dense layer over to the others. A GPU adds a launch per kernel (a few
microseconds) and Triton's launcher (tens of microseconds) that the stand-ins do not pay, so
the MoE ratio is a floor.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

# The shared installer sits beside this script (on the path when it runs; appended for tests,
# after every installed package).
sys.path.append(str(Path(__file__).resolve().parent))
from vllm_v0_host import VLLM_VERSION, default_target, install, use

LAUNCHING_OPS = {
    "mm", "addmm", "bmm", "add", "mul", "div", "sub", "sigmoid", "softmax", "_softmax",
    "topk", "sum", "cat", "copy_", "fill_", "masked_fill", "masked_fill_", "scatter",
    "scatter_", "gather", "index_select", "neg", "cos", "sin", "pow", "rsqrt", "mean",
    "max", "amax", "exp", "zeros_like", "zero_", "where", "stack", "clone", "repeat",
    "repeat_interleave", "index", "index_put_", "_to_copy", "silu", "sort", "argsort",
}  # fmt: skip
"""PyTorch operators that launch a kernel on a GPU (views, ``empty`` and transposes do not)."""


def _stand_ins(launches: collections.Counter[str]) -> None:
    """vLLM's CUDA kernels and tensor-parallel groups, replaced by counting stand-ins."""
    flash = types.ModuleType("vllm.vllm_flash_attn")
    flash.flash_attn_varlen_func = flash.flash_attn_with_kvcache = lambda *a, **k: None
    sys.modules["vllm.vllm_flash_attn"] = flash
    import vllm.model_executor.layers.fused_moe.fused_moe
    from vllm import _custom_ops as ops

    # The package re-exports the function fused_moe under the module's name: take the module.
    fused = sys.modules["vllm.model_executor.layers.fused_moe.fused_moe"]

    def counted(name: str) -> Any:
        def launch(*args: Any, **kwargs: Any) -> None:
            launches[name] += 1

        return launch

    # In-place kernels: the stand-ins write nothing (values do not change the host's work).
    for name in ("rms_norm", "fused_add_rms_norm", "rotary_embedding", "silu_and_mul",
                 "topk_softmax", "moe_align_block_size", "moe_sum"):  # fmt: skip
        setattr(ops, name, counted(name))
    fused.invoke_fused_moe_kernel = counted("fused_moe_kernel (Triton)")
    import vllm.platforms

    # The tuned MoE kernel configs are looked up by device name (lru-cached on a GPU).
    vllm.platforms.current_platform.get_device_name = lambda *a, **k: "CPU"
    import vllm.distributed.parallel_state as parallel_state

    class OneRank:
        world_size = 1
        rank_in_group = 0
        rank = 0
        ranks = (0,)
        is_first_rank = True
        is_last_rank = True

        def all_reduce(self, x: Any) -> Any:
            return x

    parallel_state._TP = parallel_state._PP = parallel_state._WORLD = OneRank()
    import vllm.attention.layer as attention_layer
    from vllm.attention import Attention
    from vllm.attention.backends.flash_attn import FlashAttentionBackend

    attention_layer.get_attn_backend = lambda *a, **k: FlashAttentionBackend

    def attention(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        launches["attention"] += 1
        return query

    Attention.forward = attention


def _layers() -> dict[str, Any]:
    from transformers import Qwen2Config, Qwen2MoeConfig

    # One 64-wide head (the narrowest FlashAttention takes), MLPs 16 wide: the arithmetic
    # left on the CPU is negligible next to the host's work.
    shape = {"hidden_size": 64, "num_attention_heads": 1, "num_key_value_heads": 1,
             "num_hidden_layers": 2, "vocab_size": 256}  # fmt: skip
    dense = Qwen2Config(intermediate_size=16, **shape)
    moe = {"intermediate_size": 16, "moe_intermediate_size": 8, "num_experts": 128,
           "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
           "mlp_only_layers": []}  # fmt: skip
    qwen3_moe = Qwen2MoeConfig(shared_expert_intermediate_size=0, **moe, **shape)
    qwen2_moe = Qwen2MoeConfig(shared_expert_intermediate_size=16, **moe, **shape)
    for config in (dense, qwen3_moe, qwen2_moe):
        # A newer transformers writes {"rope_type": "default"}, which vLLM 0.6.3 reads as none.
        config.rope_scaling = None
    # A plain namespace: vLLM 0.6.3 reads the attributes; a newer transformers' config would
    # rewrite the rope parameters.
    deepseek = types.SimpleNamespace(
        hidden_size=64, num_attention_heads=1, num_hidden_layers=2, vocab_size=256,
        intermediate_size=16, moe_intermediate_size=8, n_routed_experts=160,
        num_experts_per_tok=6, n_shared_experts=2, n_group=8, topk_group=3,
        routed_scaling_factor=16.0, norm_topk_prob=False, first_k_dense_replace=1,
        moe_layer_freq=1, q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=32,
        qk_rope_head_dim=32, v_head_dim=32, hidden_act="silu", rms_norm_eps=1e-6,
        max_position_embeddings=8192, rope_theta=10000,
        rope_scaling={"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                      "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
    )  # fmt: skip
    import torch

    arange = torch.arange

    def host_arange(*args: Any, **kwargs: Any) -> Any:
        # DeepSeek's YaRN rotary embedding builds its tables on "cuda" by name.
        if kwargs.get("device") == "cuda":
            kwargs["device"] = "cpu"
        return arange(*args, **kwargs)

    torch.arange = host_arange
    try:
        return _build(dense, qwen3_moe, qwen2_moe, deepseek)
    finally:
        torch.arange = arange


def _build(dense: Any, qwen3_moe: Any, qwen2_moe: Any, deepseek: Any) -> dict[str, Any]:
    from vllm.model_executor.models.deepseek_v2 import DeepseekV2DecoderLayer
    from vllm.model_executor.models.qwen2 import Qwen2DecoderLayer
    from vllm.model_executor.models.qwen2_moe import Qwen2MoeDecoderLayer

    return {
        "Qwen2 dense": Qwen2DecoderLayer(dense, None, None),
        "Qwen2-MoE, no shared expert (Qwen3-MoE's routing)": Qwen2MoeDecoderLayer(
            qwen3_moe, 0, None, None
        ),
        "Qwen2-MoE, shared expert": Qwen2MoeDecoderLayer(qwen2_moe, 0, None, None),
        "DeepSeek-V2 dense (MLA)": DeepseekV2DecoderLayer(deepseek, "model.layers.0"),
        "DeepSeek-V2 MoE (MLA, grouped top-k, shared experts)": DeepseekV2DecoderLayer(
            deepseek, "model.layers.1"
        ),
    }


def measure(tokens: int, repeats: int) -> list[dict[str, Any]]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    launches: collections.Counter[str] = collections.Counter()
    _stand_ins(launches)

    class CountOperators(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
            self.ops[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    torch.set_num_threads(1)
    positions = torch.arange(tokens)
    hidden = torch.randn(tokens, 64)
    rows = []
    with contextlib.redirect_stdout(io.StringIO()):  # vLLM 0.6.3's rotary table prints its shape
        layers = _layers()
    for layer in layers.values():
        layer.eval()
    with torch.no_grad():

        def step(layer: Any) -> Any:
            return layer(positions, hidden, None, None, None)

        for name, layer in layers.items():
            for _ in range(20):
                step(layer)
            launches.clear()
            with CountOperators() as counter:
                step(layer)
            stand_ins = dict(launches)
            rows.append({"layer": name, "stand_ins": stand_ins, "operators": dict(counter.ops)})
        # Interleaved rounds, so that a noisy machine slows every layer alike.
        samples: dict[str, list[float]] = {name: [] for name in layers}
        for _ in range(repeats):
            for name, layer in layers.items():
                start = time.perf_counter()
                step(layer)
                samples[name].append(time.perf_counter() - start)
    dense = statistics.median(samples["Qwen2 dense"])
    for row in rows:
        host = statistics.median(samples[row["layer"]])
        kernels = sum(n for op, n in row["operators"].items() if op in LAUNCHING_OPS)
        row.update({
            "host_ms": host * 1e3, "ratio_to_dense": host / dense,
            "kernels": kernels + sum(row["stand_ins"].values()),
            "triton_launches": row["stand_ins"].get("fused_moe_kernel (Triton)", 0),
        })  # fmt: skip
    return rows


def components(rows: list[dict[str, Any]]) -> dict[str, float]:
    """What each part of a layer adds to a dense layer's eager host work, in dense layers: the
    differences of the measured ratios."""
    r = {row["layer"]: row["ratio_to_dense"] for row in rows}
    dense = r["Qwen2 dense"]
    routed = r["Qwen2-MoE, no shared expert (Qwen3-MoE's routing)"]
    shared = r["Qwen2-MoE, shared expert"]
    mla = r["DeepSeek-V2 dense (MLA)"]
    deepseek = r["DeepSeek-V2 MoE (MLA, grouped top-k, shared experts)"]
    return {
        "routed experts in place of the dense MLP (EAGER_MOE_LAYERS)": routed - dense,
        "shared experts (EAGER_SHARED_EXPERT_LAYERS)": shared - routed,
        "MLA attention in place of GQA (EAGER_MLA_LAYERS)": mla - dense,
        "grouped top-k in place of a softmax top-k (EAGER_GROUPED_TOPK_LAYERS)": (deepseek - mla)
        - (shared - dense),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=16, help="sequences in the decode batch")
    parser.add_argument("--repeats", type=int, default=300, help="timed rounds (median)")
    parser.add_argument(
        "--target", type=Path, default=default_target(), help="where vLLM 0.6.3 is installed"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    install(args.target)
    use(args.target)
    rows = measure(args.tokens, args.repeats)
    if args.json:
        print(json.dumps({"layers": rows, "components": components(rows)}, indent=2))
        return
    print(
        f"vLLM {VLLM_VERSION} decoder layers, eager decode of {args.tokens} sequences,"
        " host time on this CPU (CUDA kernels stood in for):"
    )
    for r in rows:
        print(
            f"  {r['layer']:<54} {r['host_ms']:6.3f} ms  x{r['ratio_to_dense']:.2f}"
            f"  {r['kernels']:3d} kernels ({r['triton_launches']} Triton)"
        )
    print("each part's extra eager host work, in dense layers (rlplex.estimate.formulas):")
    for name, value in components(rows).items():
        print(f"  {name:<62} {value:5.2f}")


if __name__ == "__main__":
    main()
