"""The host cost of a Megatron-Core MoE layer against a dense one: is ``layer_s`` enough for MoE?

Run: ``python bench/moe_layer_overhead.py [--layers 8] [--rounds 15] [--experts 128,16,8]``
from an environment that has megatron-core (it is not a dependency of this project)::

    python3.11 -m venv /tmp/mcvenv
    /tmp/mcvenv/bin/pip install torch==2.13.0 megatron-core==0.16.1 transformers
    /tmp/mcvenv/bin/python bench/moe_layer_overhead.py

``bench/layer_overhead.py`` measures ``layer_s``, the host (Python and
dispatcher) seconds one dense transformer layer costs per micro-batch and
pass, on a Hugging Face Qwen2 stack made so narrow that arithmetic is
negligible. NeMo RL's and verl's Megatron trainers run MoE models (Qwen3-30B-A3B:
128 experts, top-8) through Megatron-Core's ``MoELayer`` with the token-dropless
``alltoall`` dispatcher, and that layer does much more on the host: a router
(gating, top-k, an auxiliary loss in training), a permutation of the tokens by
expert, a loop or grouped GEMM over the experts, and an unpermutation. It also
reads the per-expert token counts back to the host once per MoE layer and
forward pass (``MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize``: a
``.to("cpu", non_blocking=True)`` on a side stream, then a blocking
``event.synchronize()``; without TE's fused permutation, the two
``masked_select`` of ``moe_utils.permute`` synchronise as well), so on a GPU
the host cannot run ahead of the device past that point, and the host time of
the layer adds to the device time instead of hiding behind it.

This script builds, on this machine's CPU and with the same narrow shapes
(hidden 64, 4 heads, 2 KV groups, FFN 128, 4 x 16 tokens, one thread), three
stacks and times them interleaved, round by round, so that their ratios
survive a noisy machine:

- the Hugging Face Qwen2 stack of ``bench/layer_overhead.py`` (the reference);
- a dense Megatron-Core GPT stack (local, non Transformer-Engine layer spec,
  RMSNorm, SwiGLU, QKV bias, rotary embeddings);
- the same stack with ``MoELayer`` in place of the MLP, top-8 routing, the
  ``alltoall`` dispatcher, expert parallel 1, once per expert count in
  ``--experts``. Without Transformer Engine or the ``grouped_gemm`` package the
  experts are ``SequentialMLP``, a Python loop over *every* local expert (an
  expert that received no token still runs on an empty tensor), which a GPU
  run with grouped GEMM does not do; the expert counts are there to split the
  layer's time into a part independent of the expert count (attention, router,
  dispatcher) and a part per expert (a least-squares line through them).

Megatron-Core 0.16.1 insists on CUDA in a few places; the script replaces
them for the run, and counts what they would have done: the dispatcher's
side stream and event (``torch.cuda.Stream``, ``current_stream``, ``stream``,
``Event.synchronize``: counted as the layer's blocking syncs), the tensors the
dispatcher copies to the host (``maybe_move_tensor_to_cpu``, counted), the
CUDA RNG tracker the attention dropout forks (a CPU generator stands in), the
router gating's move of its weight to the GPU (skipped), and ``te_general_gemm``,
which megatron-core leaves undefined when Transformer Engine is absent (set to
``None``, as it means). A causal mask is passed explicitly, since the default
one is built on ``cuda``.

It prints, per stack: operators per layer in a forward pass (top-level ``aten``
ops, ``torch.profiler``), the ``masked_select`` and ``nonzero`` among them
(each a host-device synchronisation on a GPU), the dispatcher's blocking syncs
and host copies per layer in a forward and in a forward + backward, the number
of experts that received tokens, milliseconds per layer for a forward pass (no
grad) and for forward + backward (medians over ``--rounds``), the share of the
forward spent inside the experts module, and the ratios to the Hugging Face
dense layer; then the fit over expert counts.

On a GPU each operator also pays a kernel launch on top (not measured here),
and Transformer Engine's layers (fused LayerNorm-linear, fused attention,
grouped GEMM, fused permutation) issue other operators than the local spec;
read these figures as ratios of host cost between layer kinds, not as the host
cost of a production MoE layer.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import warnings

HIDDEN = 64
HEADS = 4
KV_GROUPS = 2
FFN = 128
VOCAB = 256
BATCH = 4
SEQ = 16
TOPK = 8

_COUNTS = {"syncs": 0, "copies": 0}


def _require_megatron() -> None:
    try:
        import megatron.core  # noqa: F401
    except ImportError:
        print(
            "megatron-core is not importable here; run this from a throwaway venv: "
            "pip install torch==2.13.0 megatron-core==0.16.1 transformers"
        )
        sys.exit(0)


class _Event:
    """Stands in for the dispatcher's DtoH ``torch.cuda.Event``: counts its synchronize."""

    def synchronize(self) -> None:
        _COUNTS["syncs"] += 1


class _Stream:
    """Stands in for ``torch.cuda.Stream``: the dispatcher's side stream and the current one."""

    def wait_stream(self, other) -> None:
        pass

    def record_event(self, event=None) -> _Event:
        return _Event()


def _cpu_shims() -> None:
    """Replace what megatron-core 0.16.1 does on CUDA only, counting the syncs and copies."""
    import torch
    from megatron.core.tensor_parallel import random as rnd
    from megatron.core.transformer.moe import moe_utils, router, token_dispatcher

    main_stream = _Stream()
    token_dispatcher.MoEAlltoAllTokenDispatcher.cuda_dtoh_stream = _Stream()
    torch.cuda.current_stream = lambda device=None: main_stream
    torch.cuda.stream = lambda stream: contextlib.nullcontext()
    torch.cuda.current_device = lambda: torch.device("cpu")  # rotary inv_freq, once a pass

    to_cpu = token_dispatcher.maybe_move_tensor_to_cpu

    def counted_to_cpu(tensor, as_numpy=False, record_stream=False):
        if torch.is_tensor(tensor):
            _COUNTS["copies"] += 1
        return to_cpu(tensor, as_numpy=as_numpy, record_stream=record_stream)

    token_dispatcher.maybe_move_tensor_to_cpu = counted_to_cpu

    if not hasattr(moe_utils, "te_general_gemm"):  # undefined without Transformer Engine
        moe_utils.te_general_gemm = None

    def gating(self, input):  # Router.gating without moving a CPU weight to the GPU
        dtype = {"fp32": torch.float32, "fp64": torch.float64}.get(
            self.config.moe_router_dtype, input.dtype
        )
        return router.router_gating_linear(input, self.weight, self.bias, dtype)

    router.Router.gating = gating

    generator = torch.Generator()  # the CUDA generator the RNG tracker forks
    rnd._get_cuda_rng_state = lambda device="cuda", clone=False, graph_safe=False: (
        generator.get_state()
    )
    rnd._set_cuda_rng_state = lambda state, device=-1, graph_safe=False: generator.set_state(
        state
    )
    tracker = rnd.get_cuda_rng_tracker()
    for name in (rnd._MODEL_PARALLEL_RNG_TRACKER_NAME, rnd.get_expert_parallel_rng_tracker_name()):
        tracker.states_[name] = generator.get_state()
    tracker._is_initialized = True


def _init_parallel() -> None:
    import torch
    from megatron.core import parallel_state

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)


def _build_megatron(layers: int, experts: int):
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.manual_seed(0)
    moe = {}
    if experts:
        moe = dict(
            num_moe_experts=experts,
            moe_router_topk=TOPK,
            moe_ffn_hidden_size=FFN,
            moe_token_dispatcher_type="alltoall",
            moe_router_load_balancing_type="aux_loss",
            moe_aux_loss_coeff=1e-3,
            moe_router_dtype="fp32",
            moe_grouped_gemm=False,
            moe_permute_fusion=False,
        )
    config = TransformerConfig(
        num_layers=layers,
        hidden_size=HIDDEN,
        ffn_hidden_size=FFN,
        num_attention_heads=HEADS,
        num_query_groups=KV_GROUPS,
        normalization="RMSNorm",
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        add_bias_linear=False,
        add_qkv_bias=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        use_cpu_initialization=True,
        **moe,
    )
    spec = get_gpt_layer_local_spec(
        num_experts=experts or None, moe_grouped_gemm=False, normalization="RMSNorm"
    )
    return GPTModel(
        config=config,
        transformer_layer_spec=spec,
        vocab_size=VOCAB,
        max_sequence_length=256,
        position_embedding_type="rope",
    )


class _Stack:
    """One model with its forward and forward + backward closures and its counters."""

    def __init__(self, name: str, model, layers: int, megatron: bool, experts: int = 0):
        import torch

        self.name, self.model, self.layers, self.experts = name, model, layers, experts
        self.fwd: list[float] = []
        self.both: list[float] = []
        ids = torch.randint(0, VOCAB, (BATCH, SEQ))
        if megatron:
            pos = torch.arange(SEQ).unsqueeze(0).expand(BATCH, -1)
            causal = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), 1)[None, None]
            kwargs = dict(input_ids=ids, position_ids=pos, attention_mask=causal)
        else:
            kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
        model.train()

        def run():
            out = model(**kwargs)
            return out if megatron else out.logits

        def forward() -> None:
            with torch.no_grad():
                run()

        def train() -> None:
            run().float().sum().backward()

        self.forward, self.train = forward, train


def _per_layer_counts(stack: _Stack) -> dict:
    from torch.profiler import profile

    with profile() as prof:
        stack.forward()
    events = prof.events()
    top = [e for e in events if e.name.startswith("aten::") and e.cpu_parent is None]
    syncing = [e for e in events if e.name in ("aten::masked_select", "aten::nonzero")]
    counts = {"ops": len(top) / stack.layers, "syncing_ops": len(syncing) / stack.layers}
    for label, fn in (("fwd", stack.forward), ("both", stack.train)):
        _COUNTS.update(syncs=0, copies=0)
        fn()
        counts[f"syncs_{label}"] = _COUNTS["syncs"] / stack.layers
        counts[f"copies_{label}"] = _COUNTS["copies"] / stack.layers
    return counts


def _moe_probe(stack: _Stack) -> tuple[float, float]:
    """Experts that received tokens (mean over layers) and the forward share inside experts."""
    import torch

    hit: list[int] = []
    inside = [0.0]
    start = [0.0]
    handles = []
    for layer in stack.model.decoder.layers:
        mlp = layer.mlp
        handles.append(
            mlp.router.register_forward_hook(
                lambda m, i, o: hit.append(int(o[1].any(dim=0).sum()))
            )
        )
        handles.append(
            mlp.experts.register_forward_pre_hook(
                lambda m, i: start.__setitem__(0, time.perf_counter())
            )
        )
        handles.append(
            mlp.experts.register_forward_hook(
                lambda m, i, o: inside.__setitem__(0, inside[0] + time.perf_counter() - start[0])
            )
        )
    shares = []
    for _ in range(5):
        hit.clear()
        inside[0] = 0.0
        t0 = time.perf_counter()
        stack.forward()
        shares.append(inside[0] / (time.perf_counter() - t0))
    for handle in handles:
        handle.remove()
    del torch
    return statistics.mean(hit), statistics.median(shares)


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares line t = a + b * experts; returns (a, b)."""
    xs, ys = zip(*points)
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--experts", default="128,16,8", help="comma-separated expert counts (>= 8)"
    )
    args = parser.parse_args()
    experts = [int(e) for e in args.experts.split(",") if e]
    if any(e < TOPK for e in experts):
        parser.error(f"each expert count must be at least the top-k, {TOPK}")

    warnings.filterwarnings("ignore")  # megatron-core warns about absent TE and Apex
    _require_megatron()
    import torch

    torch.set_num_threads(1)
    _init_parallel()
    _cpu_shims()

    stacks = []
    try:
        from layer_overhead import _build as build_hf

        stacks.append(_Stack("HF Qwen2 dense", build_hf(args.layers), args.layers, False))
    except ImportError as exc:
        print(f"(no Hugging Face reference: {exc})")
    stacks.append(_Stack("Megatron dense", _build_megatron(args.layers, 0), args.layers, True))
    for count in experts:
        model = _build_megatron(args.layers, count)
        stacks.append(_Stack(f"Megatron MoE {count}e", model, args.layers, True, count))

    counts = {s.name: _per_layer_counts(s) for s in stacks}
    probes = {s.name: _moe_probe(s) for s in stacks if s.experts}
    for stack in stacks:  # warm up
        for _ in range(3):
            stack.forward()
            stack.train()
    for _ in range(args.rounds):  # interleaved, so that drift hits every stack alike
        for stack in stacks:
            t0 = time.perf_counter()
            stack.forward()
            t1 = time.perf_counter()
            stack.train()
            t2 = time.perf_counter()
            stack.fwd.append((t1 - t0) / stack.layers)
            stack.both.append((t2 - t1) / stack.layers)

    ref = stacks[0]
    ref_fwd, ref_both = statistics.median(ref.fwd), statistics.median(ref.both)
    print(
        f"{args.layers} layers, hidden {HIDDEN}, {HEADS} heads / {KV_GROUPS} KV groups, "
        f"FFN {FFN}, {BATCH} x {SEQ} tokens, top-{TOPK}, 1 CPU thread, "
        f"torch {torch.__version__}, median of {args.rounds} interleaved rounds"
    )
    print(f"ratios are to: {ref.name}")
    header = (
        f"{'stack':<18}{'fwd ms':>8}{'f+b ms':>8}{'fwd x':>7}{'f+b x':>7}{'ops':>6}"
        f"{'msel/nz':>8}{'syncs f':>8}{'syncs fb':>9}{'D2H f':>6}{'hit':>7}{'in exp':>7}"
    )
    print(header)
    print("-" * len(header))
    for stack in stacks:
        fwd, both = statistics.median(stack.fwd), statistics.median(stack.both)
        c = counts[stack.name]
        hit, share = probes.get(stack.name, (None, None))
        hit_s = f"{hit:.0f}/{stack.experts}" if hit is not None else "-"
        share_s = f"{share:.0%}" if share is not None else "-"
        print(
            f"{stack.name:<18}{fwd * 1e3:>8.3f}{both * 1e3:>8.3f}{fwd / ref_fwd:>7.1f}"
            f"{both / ref_both:>7.1f}{c['ops']:>6.0f}{c['syncing_ops']:>8.0f}"
            f"{c['syncs_fwd']:>8.0f}{c['syncs_both']:>9.0f}{c['copies_fwd']:>6.0f}"
            f"{hit_s:>7}{share_s:>7}"
        )
    moe = [s for s in stacks if s.experts]
    if len({s.experts for s in moe}) >= 2:
        for label, attr in (("forward", "fwd"), ("forward + backward", "both")):
            a, b = _fit([(s.experts, statistics.median(getattr(s, attr))) for s in moe])
            print(
                f"fit, {label}: {a * 1e3:.3f} ms per layer + {b * 1e6:.1f} us per expert "
                f"(SequentialMLP loop); the constant is "
                f"{a / statistics.median(getattr(ref, attr)):.1f}x {ref.name}"
            )
    print(
        "columns: ms per layer (forward no grad; forward + backward); x = ratio; ops = top-level"
        " aten ops per layer, forward; msel/nz = masked_select + nonzero per layer (each syncs"
        " on a GPU); syncs = dispatcher event syncs per layer (forward; forward + backward);"
        " D2H = tensors the dispatcher copies to the host per layer; hit = experts with tokens;"
        " in exp = share of the forward inside the experts module"
    )


if __name__ == "__main__":
    main()
