"""The host cost of a Megatron-Core MoE layer against a dense one: is ``layer_s`` enough for MoE?

Run: ``python bench/moe_layer_overhead.py [--layers 8] [--rounds 8] [--experts 128,16]``
from an environment that has megatron-core, which this project does not depend on::

    python3.11 -m venv /tmp/mcvenv
    /tmp/mcvenv/bin/pip install torch==2.13.0 megatron-core==0.16.1 transformers
    /tmp/mcvenv/bin/python bench/moe_layer_overhead.py

``bench/layer_overhead.py`` measures ``layer_s``, the host (Python and
dispatcher) seconds one dense transformer layer costs per micro-batch and
pass, on a Hugging Face Qwen2 stack made so narrow that arithmetic is
negligible. NeMo RL's and verl's Megatron trainers run MoE models
(Qwen3-30B-A3B: 128 experts, top-8) through Megatron-Core's ``MoELayer`` with
the token-dropless ``alltoall`` dispatcher, and that layer does much more on
the host: a router (gating, top-k, an auxiliary loss in training), a
permutation of the tokens by expert, the experts, and an unpermutation. It
also reads the per-expert token counts back to the host once per MoE layer and
forward pass (``MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize``: a
``.to("cpu", non_blocking=True)`` on a side stream, then a blocking
``event.synchronize()``; without Transformer Engine's fused permutation, the
two ``masked_select`` of ``moe_utils.permute`` synchronise too). On a GPU the
host therefore cannot run ahead of the device past any MoE layer, and the
layer's host time can no longer hide behind the device time of other layers.

This script builds on this machine's CPU, with the narrow shapes of
``bench/layer_overhead.py`` (hidden 64, 4 heads, 2 KV groups, FFN 128, 4 x 16
tokens, one thread), and times in interleaved rounds, so that their ratios
survive a noisy machine:

- the Hugging Face Qwen2 stack of ``bench/layer_overhead.py`` (the reference);
- a dense Megatron-Core GPT stack (the local, non Transformer-Engine layer
  spec: RMSNorm, SwiGLU, QKV bias, rotary embeddings);
- the same stack with ``MoELayer`` as MLP (top-8, ``alltoall`` dispatcher,
  expert parallel 1, expert FFN 32, auxiliary loss), once per count in
  ``--experts``. Without Transformer Engine or the ``grouped_gemm`` package
  the experts are ``SequentialMLP``: a Python loop over *every* local expert
  (one that received no token still runs on an empty tensor), which a GPU run
  with grouped GEMM does not do. So each MoE stack is timed twice, the second
  time ("1 call") with the loop replaced by one expert's MLP on all the tokens,
  a stand-in for one grouped GEMM: that row is the router and dispatcher cost,
  and the difference, per expert, the cost of the loop.

Megatron-Core 0.16.1 insists on CUDA in a few places; for the run the script
replaces them, counting what they would have done: the dispatcher's side
stream and DtoH event (``torch.cuda.Stream``, ``current_stream``, ``stream``;
each ``Event.synchronize`` is counted as a blocking sync), its copies to the
host (``maybe_move_tensor_to_cpu``, counted), the CUDA RNG state the
attention dropout forks (a CPU generator stands in), the router gating's move
of its weight to the GPU (skipped), and ``te_general_gemm``, which megatron-core
leaves undefined without Transformer Engine (set to ``None``, as it means). A
causal mask is passed, since the default one is built on ``cuda``. The large
MoE stacks are frozen out of the garbage collector, and each timed pass follows
passes of the same kind, so that they do not slow the small stacks down.

It prints three tables and a summary, all per layer (whole-model figures over
``--layers``): milliseconds for a forward pass (no grad) and for forward +
backward (medians) with their ratios to the Hugging Face layer and the
top-level ``aten`` operators of a forward (``torch.profiler``); the
dispatcher's blocking syncs (forward; forward + backward), its host copies,
the ``masked_select`` and ``nonzero`` ops (each a sync on a GPU) and the
experts that received tokens; the forward's milliseconds in attention and in
the MLP, and for MoE in the router, the dispatcher (the rest of the MLP) and
the experts (module hooks); then the cost per expert of the loop and the
ratio of the one-call layer to the Hugging Face layer.

On a GPU each operator also pays a kernel launch (not measured here), and
Transformer Engine's modules (fused LayerNorm-linear, fused attention, grouped
GEMM, fused permutation) issue other operators than the local spec: read the
figures as ratios of host cost between layer kinds, not as the host cost of a
production MoE layer.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import os
import statistics
import sys
import time
import warnings

HIDDEN = 64
HEADS = 4
KV_GROUPS = 2
FFN = 128
MOE_FFN = 32  # Qwen3-30B-A3B: 768 per expert against hidden 2048; small keeps arithmetic out
VOCAB = 256
BATCH = 4
SEQ = 16
TOPK = 8
BLOCK = 4

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
    rnd._set_cuda_rng_state = lambda state, device=-1, graph_safe=False: generator.set_state(state)
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
            moe_ffn_hidden_size=MOE_FFN,
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


def _one_call(experts):
    """SequentialMLP.forward as if it held one expert: a stand-in for one grouped GEMM call."""

    def forward(hidden_states, tokens_per_expert, probs):
        tokens_per_expert.tolist()  # as TEGroupedMLP does (a host tensor by now: no sync)
        return experts.local_experts[0](hidden_states, probs)

    return forward


class _Stack:
    """One model with its forward and forward + backward closures and its counters."""

    def __init__(
        self,
        name: str,
        model,
        layers: int,
        seq: int,
        megatron: bool,
        experts: int = 0,
        one_call: bool = False,
    ):
        import torch

        self.name, self.model, self.layers, self.experts = name, model, layers, experts
        self.megatron, self.one_call = megatron, one_call
        self.fwd: list[float] = []
        self.both: list[float] = []
        ids = torch.randint(0, VOCAB, (BATCH, seq))
        if megatron:
            pos = torch.arange(seq).unsqueeze(0).expand(BATCH, -1)
            causal = torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)[None, None]
            kwargs = dict(input_ids=ids, position_ids=pos, attention_mask=causal)
            model.train()  # the router's auxiliary loss runs in training only
        else:
            kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
        modules = [layer.mlp.experts for layer in model.decoder.layers] if one_call else []

        def run():
            for module in modules:
                module.forward = _one_call(module)
            try:
                out = model(**kwargs)
            finally:
                for module in modules:
                    del module.forward
            return out if megatron else out.logits

        def forward() -> None:
            with torch.no_grad():
                run()

        def train() -> None:
            run().float().sum().backward()

        self.forward, self.train = forward, train


def _per_layer_counts(stack: _Stack) -> dict:
    from torch.profiler import profile

    counts = {}
    for label, fn in (("fwd", stack.forward), ("both", stack.train)):
        _COUNTS.update(syncs=0, copies=0)
        with profile() as prof:
            fn()
        counts[f"syncs_{label}"] = _COUNTS["syncs"] / stack.layers
        counts[f"copies_{label}"] = _COUNTS["copies"] / stack.layers
        events = prof.events()
        syncing = [e for e in events if e.name in ("aten::masked_select", "aten::nonzero")]
        counts[f"syncing_ops_{label}"] = len(syncing) / stack.layers
        if label == "fwd":
            top = [e for e in events if e.name.startswith("aten::") and e.cpu_parent is None]
            counts["ops"] = len(top) / stack.layers
    return counts


def _breakdown(stack: _Stack) -> dict:
    """One forward's seconds per layer in attention, MLP, router, experts (hooks); hits."""
    clock = time.perf_counter
    spent: dict[str, float] = {}
    open_at: dict[str, float] = {}
    hit: list[int] = []
    handles = []

    def timed(module, key: str) -> None:
        def pre(m, i):
            open_at[key] = clock()

        def post(m, i, o):
            spent[key] = spent.get(key, 0.0) + clock() - open_at[key]

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))

    for layer in stack.model.decoder.layers:
        timed(layer.self_attention, "attention")
        timed(layer.mlp, "mlp")
        if stack.experts:
            timed(layer.mlp.router, "router")
            timed(layer.mlp.experts, "experts")
            handles.append(
                layer.mlp.router.register_forward_hook(
                    lambda m, i, o: hit.append(int(o[1].any(dim=0).sum()))
                )
            )
    try:
        stack.forward()
    finally:
        for handle in handles:
            handle.remove()
    if stack.experts:
        spent["dispatch"] = spent["mlp"] - spent["router"] - spent["experts"]
    out = {key: value / stack.layers for key, value in spent.items()}
    if hit:
        out["hit"] = statistics.mean(hit)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seq", type=int, default=SEQ, help=f"tokens per sequence, {BATCH} seqs")
    parser.add_argument("--experts", default="128,16", help="comma-separated expert counts (>= 8)")
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

    layers, seq = args.layers, args.seq
    stacks = []
    try:
        from layer_overhead import _build as build_hf

        stacks.append(_Stack("HF Qwen2 dense", build_hf(layers), layers, seq, False))
    except ImportError as exc:
        print(f"(no Hugging Face reference: {exc})")
    stacks.append(_Stack("Megatron dense", _build_megatron(layers, 0), layers, seq, True))
    for count in experts:
        model = _build_megatron(layers, count)
        stacks.append(_Stack(f"Megatron MoE {count}e", model, layers, seq, True, count))
        stacks.append(_Stack(f"  {count}e, 1 call", model, layers, seq, True, count, one_call=True))

    # The MoE stacks hold far more Python objects than the dense ones; keep them out of the
    # garbage collector's scans, or they slow down whichever stack is timed.
    gc.collect()
    gc.freeze()
    counts = {s.name: _per_layer_counts(s) for s in stacks}
    parts: dict[str, dict[str, list[float]]] = {}
    for stack in stacks:  # warm up
        for _ in range(3):
            stack.forward()
            stack.train()
    # Interleaved rounds, so that drift on a shared machine hits every stack alike; in each,
    # every stack runs an untimed pass then BLOCK timed ones of each kind back to back, so that
    # they find the caches warm as bench/layer_overhead.py's do.
    for _ in range(args.rounds):
        for stack in stacks:
            for fn, samples in ((stack.forward, stack.fwd), (stack.train, stack.both)):
                fn()
                for _ in range(BLOCK):
                    start = time.perf_counter()
                    fn()
                    samples.append((time.perf_counter() - start) / layers)
                if stack.megatron and fn is stack.forward:  # after warm forwards
                    for key, value in _breakdown(stack).items():
                        parts.setdefault(stack.name, {}).setdefault(key, []).append(value)

    def med(stack: _Stack, attr: str) -> float:
        return statistics.median(getattr(stack, attr))

    ref = stacks[0]
    print(
        f"\n{layers} layers, hidden {HIDDEN}, {HEADS} heads / {KV_GROUPS} KV groups, FFN {FFN} "
        f"(expert FFN {MOE_FFN}), "
        f"{BATCH} x {seq} tokens, top-{TOPK}, 1 CPU thread, torch {torch.__version__}, "
        f"median of {args.rounds} interleaved rounds; x = ratio to {ref.name}"
    )
    print(f"\n{'ms per layer':<18}{'fwd':>8}{'fwd+bwd':>9}{'fwd x':>7}{'f+b x':>7}{'ops/fwd':>9}")
    for stack in stacks:
        fwd, both = med(stack, "fwd"), med(stack, "both")
        print(
            f"{stack.name:<18}{fwd * 1e3:>8.3f}{both * 1e3:>9.3f}{fwd / med(ref, 'fwd'):>7.1f}"
            f"{both / med(ref, 'both'):>7.1f}{counts[stack.name]['ops']:>9.0f}"
        )

    print(
        f"\n{'per layer':<18}{'syncs f':>8}{'syncs fb':>9}{'D2H f':>7}"
        f"{'msel/nz f':>10}{'msel/nz fb':>11}{'experts hit':>12}"
    )
    for stack in stacks:
        c = counts[stack.name]
        hits = parts.get(stack.name, {}).get("hit")
        hit = statistics.median(hits) if hits else None
        print(
            f"{stack.name:<18}{c['syncs_fwd']:>8.0f}{c['syncs_both']:>9.0f}"
            f"{c['copies_fwd']:>7.0f}{c['syncing_ops_fwd']:>10.0f}{c['syncing_ops_both']:>11.0f}"
            f"{f'{hit:.0f}/{stack.experts}' if hit is not None else '-':>12}"
        )

    keys = ("attention", "mlp", "router", "dispatch", "experts")
    print(f"\n{'fwd ms per layer':<18}" + "".join(f"{k:>10}" for k in keys))
    for name, part in parts.items():
        cells = "".join(
            f"{statistics.median(part[k]) * 1e3:>10.3f}" if k in part else f"{'-':>10}"
            for k in keys
        )
        print(f"{name:<18}{cells}")

    print()
    for full, one in itertools.pairwise(stacks):
        if not one.one_call:
            continue
        per = [(med(full, a) - med(one, a)) / (full.experts - 1) for a in ("fwd", "both")]
        rest = [med(one, a) / med(ref, a) for a in ("fwd", "both")]
        print(
            f"{full.name}: per expert beyond the first {per[0] * 1e6:.0f} us fwd, "
            f"{per[1] * 1e6:.0f} us fwd+bwd; the layer with one expert call is "
            f"{rest[0]:.1f}x / {rest[1]:.1f}x {ref.name} (fwd / fwd+bwd)"
        )
    print(
        "\nsyncs: the dispatcher's blocking event syncs (forward; forward + backward); D2H:"
        " tensors it copies to the host in a forward; msel/nz: masked_select and nonzero ops,"
        " each a sync on a GPU; mlp = router + dispatch + experts for MoE, where dispatch is"
        " the rest (permutation, token counts, unpermutation); experts is SequentialMLP's loop"
    )


if __name__ == "__main__":
    main()
