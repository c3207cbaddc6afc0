"""Train and forward passes: the seconds of ``train``, log-prob, values and reward stages.

A pass is priced as named terms (``docs/cost-model.md``): compute at the role's
efficiency (by model width and tokens per micro-batch), the attention squares of
the length distribution, the slowest micro-batch and data-parallel rank,
tensor-parallel activations, expert all-to-all, logits, FSDP/ZeRO gathers and
gradient reduction not hidden behind compute, the optimizer step (GPU or CPU),
the controller's batch transfer, and the per-sequence and per-step framework
overheads the trained policy's pass carries.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from rlplex.dag.stage import Stage
from rlplex.estimate import formulas as f
from rlplex.estimate.context import (
    Context,
    RoleEstimate,
    StageEstimate,
    combine_terms,
    efficiency_value,
    expert_layout,
    fp8_speedup,
    is_rule_reward,
    layer_kernels,
    link_gb_per_s,
    lora_params,
    optimizer_kernel,
    role_head,
    sample_lengths,
    shard_fraction,
    shard_groups,
    shard_link_gb_per_s,
    shard_replicas,
    spans_nodes,
    stage_factor,
    stored_precision,
    tokens_factor,
    trainable_params,
    width_factor,
    workload_tokens,
)
from rlplex.estimate.lengths import mean_windowed_square
from rlplex.estimate.specs import ModelSpec
from rlplex.resources.cluster import Role
from rlplex.resources.inputs import Parallel, Workload


def _sequence_tokens(ctx: Context) -> tuple[float, float]:
    """(sum of tokens, sum of squared tokens) over one step's sequences, prompt + response.

    Packed sequences cost their own length; padded ones (``packing: false``)
    cost the longest prompt plus the longest response, as frameworks pad them.
    """
    w = ctx.inputs.workload
    assert w is not None
    n, _, longest = workload_tokens(w)
    if not w.packing:
        return n * longest, n * longest**2
    dist = sample_lengths(ctx)
    p = w.prompt_tokens.mean
    mean_square = p * p + 2 * p * dist.mean + dist.mean_square()
    return n * (p + dist.mean), n * mean_square


def _attention_squares(ctx: Context, spec: ModelSpec) -> float:
    """Sum over one step's sequences of their layer-weighted squared lengths
    (:func:`formulas.attention_squares`: ``L**2`` per full-attention layer, less beyond the
    window per windowed one); times ``attention_width``, a forward pass's attention FLOPs."""
    w = ctx.inputs.workload
    assert w is not None
    n, _, longest = workload_tokens(w)
    if not w.packing:
        return n * f.attention_squares(spec, longest)
    _, squares = _sequence_tokens(ctx)
    windowed = 0.0
    if spec.sliding_window_layers:
        dist = sample_lengths(ctx)
        windowed = n * mean_windowed_square(dist, w.prompt_tokens.mean, spec.sliding_window)
    return spec.full_attention_layers * squares + spec.sliding_window_layers * windowed


def _pass_flops(ctx: Context, spec: ModelSpec, head: f.Head) -> tuple[float, float]:
    """(matmul, causal attention) FLOPs of one forward pass over the step's sequences."""
    tokens, _ = _sequence_tokens(ctx)
    return (
        f.token_flops(spec, head) * tokens,
        f.attention_width(spec) * _attention_squares(ctx, spec),
    )


def _straggler_factor(
    ctx: Context, spec: ModelSpec, head: f.Head, groups: int, sequences: float
) -> float:
    """Busiest data-parallel group's FLOPs over the mean, for ``sequences`` split over
    ``groups`` and synchronised once (an optimizer step; a log-prob pass's end).

    A sequence runs whole on one group (its tensor, pipeline and sequence/context-parallel
    ranks share it), so a group cannot finish before the step's longest sequence, and
    frameworks balance groups by token count (NeMo RL's sequence packing; verl's
    ``_balance_batch`` before volcengine/verl#3605, October 2025), not by attention FLOPs: the
    group holding the longest sequence also carries its quadratic attention beyond the mean.
    (verl since #3605 balances by ``24576 L + L**2``, which spreads that attention: for it
    this overcharges by up to the attention excess.) With ``T`` the mean tokens per group, ``L`` the
    longest sequence and ``a`` the mean attention FLOPs per token, the busiest group does
    ``max(T, L)`` tokens of matmuls, ``L``'s attention, and ``max(0, T - L)`` tokens at ``a``.
    Padded batches (``packing: false``) cost every sequence the same: no straggler.
    """
    w = ctx.inputs.workload
    assert w is not None
    if not w.packing or groups <= 1 or sequences <= 0:
        return 1.0
    tokens, _ = _sequence_tokens(ctx)
    n, _, _ = workload_tokens(w)
    # Squares weighted by layer: a windowed layer's attention stops growing at its window.
    mean_len, mean_square = tokens / n, _attention_squares(ctx, spec) / n
    linear = f.token_flops(spec, head)
    width = f.attention_width(spec)
    longest = w.prompt_tokens.mean + sample_lengths(ctx).longest_of(max(1, int(sequences)))
    per_group = sequences / groups * mean_len
    mean_load = sequences / groups * (linear * mean_len + width * mean_square)
    busiest = (
        max(per_group, longest) * linear
        + width * f.attention_squares(spec, longest)
        + max(0.0, per_group - longest) * width * mean_square / mean_len
    )
    return max(1.0, busiest / mean_load)


def _meets_every_micro_batch(par: Parallel | None, backward: bool) -> bool:
    """Whether a role's data-parallel ranks synchronise within every micro-batch: FSDP and
    ZeRO-3 gather each layer's weights (forward and backward), ZeRO-2 reduce-scatters every
    backward's gradients; DDP, ZeRO-1 and Megatron's distributed optimizer meet once a step."""
    if par is None:
        return False
    return par.fsdp or par.zero >= 3 or (backward and par.zero >= 2)


def _micro_batch_straggler(ctx: Context, groups: int, sequences: int) -> float:
    """The busiest of ``groups`` ranks' micro-batch of ``sequences`` sequences against the
    mean, for micro-batches cut by count from the step's sequences (no token budget).

    A micro-batch's tokens are a sum of ``sequences`` lengths: mean ``b m`` and standard
    deviation ``sqrt(b) s`` (the length distribution's), nearly normal; the largest of ``G``
    such sums is ``z_G`` standard deviations above the mean (Blom's approximation of the
    expected maximum of G normal draws), at most ``b`` sequences at the longest. Budgeted
    micro-batches (verl's dynamic batches, NeMo RL's packing) hold the same tokens: 1.
    """
    w = ctx.inputs.workload
    assert w is not None
    if groups <= 1 or sequences <= 0:
        return 1.0
    dist = sample_lengths(ctx)
    mean = w.prompt_tokens.mean + dist.mean
    spread = math.sqrt(max(0.0, dist.mean_square() - dist.mean**2))
    z = statistics.NormalDist().inv_cdf((groups - 0.375) / (groups + 0.25))
    longest = w.prompt_tokens.mean + dist.cap
    return min(1.0 + z * spread / (math.sqrt(sequences) * mean), longest / mean)


def _scores_generated(stage: Stage) -> bool:
    """A reward stage: it scores every generated sequence, not only the trained ones."""
    return stage.name == "reward" or stage.name.startswith("reward_")


def _micro_batch(w: Workload, backward: bool, stage: Stage) -> tuple[int, int | None]:
    """(sequences, packed token budget) of one micro-batch of ``stage``'s pass: the stage's
    own where it gives them (a budget of 0: none); else a forward-only pass takes the
    log-prob settings where the config gives them, and the training ones otherwise."""
    if backward:
        size, budget = w.micro_batch_size, w.micro_batch_tokens
    else:
        size = w.logprob_micro_batch_size or w.micro_batch_size
        budget = w.logprob_micro_batch_tokens or w.micro_batch_tokens
    if stage.micro_batch_tokens is not None:
        budget = stage.micro_batch_tokens or None
    return stage.micro_batch_size or size, budget


def _pass_terms(
    ctx: Context, stage: Stage, role: Role, est: RoleEstimate, *, backward: bool
) -> tuple[dict[str, float], dict[str, Any], float]:
    """Terms shared by train and log-prob passes: (terms, detail, micro-batches per rank)."""
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = role_head(role.name, ctx.stages_of.get(role.name, []))
    par = role.parallel
    recompute = bool(par and par.recompute) and backward
    sp = par.sp if par else 1
    _, mean_len, longest = workload_tokens(w)
    tokens, _ = _sequence_tokens(ctx)
    matmul_flops, attention_flops = _pass_flops(ctx, spec, head)
    # A stage that scores its share of the samples (one domain's reward model, one of several
    # teachers) passes over that share of the step's sequences, in micro-batches as before.
    scale = stage.share
    if _scores_generated(stage):  # a reward model scores dynamic sampling's dropped groups too
        scale *= w.scored() / max(1, workload_tokens(w)[0])
    if scale != 1.0:
        tokens, matmul_flops, attention_flops = (
            tokens * scale,
            matmul_flops * scale,
            attention_flops * scale,
        )
    passes = (4.0 if recompute else 3.0) if backward else 1.0
    epochs = w.epochs if backward else 1
    # A LoRA role's reference log-probs are its base model's: the adapters switched off
    # (verl's ref_in_actor, ROLL's disable_adapter).
    lora = None if stage.name.startswith("ref_logprob") else role.lora
    # Frozen (LoRA) weights get no weight gradients: the backward computes input gradients
    # only, one matmul pass fewer; the adapters themselves take every pass.
    weight_passes = passes - 1.0 if backward and lora is not None else passes
    adapters = lora_params(ctx, role, active=True) if lora is not None else 0.0
    other_flops = attention_flops + 2.0 * adapters * tokens
    flops = (weight_passes * matmul_flops + passes * other_flops) * epochs
    # What the FLOPs cost at bf16 speed: fp8 weight matmuls run faster.
    bf16_flops = (
        weight_passes * matmul_flops / fp8_speedup(ctx, role) + passes * other_flops
    ) * epochs
    kind_key = "train" if backward else "forward"
    groups = max(1, est.devices // (est.tp * est.pp * sp))
    syncs = max(1, w.mini_batches) if backward else 1
    # A data-parallel group's tokens per optimizer step: no micro-batch spans two steps.
    per_sync = tokens / groups / syncs
    mb_size, mb_budget = _micro_batch(w, backward, stage)
    if mb_budget is not None and not w.packing:
        note = (
            f"{stage.name}: its token budget ({mb_budget:,} tokens a micro-batch) is not"
            " priced: padded micro-batches (workload.packing false) are counted at"
            f" {mb_size} sequence(s) of the longest"
        )
        if note not in ctx.warnings:
            ctx.warnings.append(note)
    if mb_budget is not None and w.packing:
        # Balanced micro-batches under the budget (verl's rearrange_micro_batches: as few as
        # the budget allows, the tokens spread evenly over them).
        mb_tokens = per_sync / max(1, math.ceil(per_sync / mb_budget))
    else:
        mb_tokens = mb_size * (mean_len if w.packing else longest)
    mb_tokens_per_gpu = mb_tokens / sp
    eff = (
        efficiency_value(ctx.inputs.efficiency, kind_key)
        * stage_factor(ctx.inputs.efficiency, stage.name)
        * width_factor(ctx, spec)
        * tokens_factor(ctx, mb_tokens_per_gpu)
    )
    peak = ctx.gpu.peak_tflops * 1e12
    n, _, _ = workload_tokens(w)
    straggler = _straggler_factor(ctx, spec, head, groups, n * stage.share / syncs)
    if _meets_every_micro_batch(par, backward) and w.packing and mb_budget is None:
        # Sharded ranks meet at every layer's gather (and a backward's reduce-scatter) of
        # every micro-batch: each micro-batch waits for the rank holding its most tokens.
        straggler = max(straggler, _micro_batch_straggler(ctx, groups, mb_size))
    compute_s = bf16_flops / (est.devices * peak * eff) * straggler
    micro_batches = epochs * syncs * math.ceil(per_sync / mb_tokens - 1e-9)
    launches = efficiency_value(ctx.inputs.efficiency, "layer_s") * spec.layer_units / est.pp
    if lora is not None:  # peft wraps each adapted projection in Python
        launches *= 1.0 + (f.LORA_HOST_TRAIN if backward else f.LORA_HOST_FORWARD)
    # A backward's host work is several forwards' (autograd's nodes, every parameter's
    # gradient accumulation), a recomputation one forward more.
    host_passes = (1.0 + f.HOST_BACKWARD_PASSES + (1.0 if recompute else 0.0)) if backward else 1.0
    host_s = micro_batches * launches * host_passes
    # The host issues each layer's kernels ahead of the device, so only what exceeds the
    # compute shows; padded batches through Hugging Face attention synchronise once per
    # layer (the unpadding reads the sequence lengths back), so there host and device add.
    overhead_s = host_s if not w.packing else max(0.0, host_s - compute_s)
    # Parameters offloaded between passes are loaded for each one (and the trained ones
    # written back); the host link is the role's per-device share.
    host = ctx.inputs.cluster.host_gb_per_s
    weights_gb = est.states.get("weights", 0.0)
    offload_s = 0.0
    if par is not None and par.offload_params:
        # A backward also writes back what it trained: every weight, or only the adapters.
        written = trainable_params(ctx, role, est.params) / est.params if backward else 0.0
        offload_s += weights_gb / host * (1.0 + written)
    if spec.is_moe:
        # Routed experts run grouped GEMMs as narrow as one expert's MLP on the tokens routed
        # to each expert, and the busiest expert rank sets their pace.
        expert_share = _expert_flop_share(spec, head)
        ep = par.ep if par else 1
        # Megatron runs an MoE under tensor parallel with sequence parallel (expert tensor
        # parallel 1): each rank routes its own 1/tp of the micro-batch's tokens.
        per_expert = mb_tokens_per_gpu / est.tp * spec.experts_per_token * ep / spec.num_experts
        # A latent MoE's experts are as narrow as the narrower of the latent and their width.
        expert_width = min(spec.moe_intermediate_size, spec.moe_latent_size or 1 << 30)
        slower = (width_factor(ctx, spec) * tokens_factor(ctx, mb_tokens_per_gpu)) / (
            width_factor(ctx, spec, expert_width) * tokens_factor(ctx, per_expert)
        )
        imbalance = efficiency_value(ctx.inputs.efficiency, "moe_imbalance")
        compute_s *= 1.0 - expert_share + expert_share * slower * imbalance
    # The backward of a dispatch or combine is one all-to-all of the same size (the
    # activations' gradients): traffic passes are forward, backward (and recomputation), not
    # the FLOP passes' two for the backward.
    traffic_passes = (3.0 if recompute else 2.0) if backward else 1.0
    a2a_s = _expert_all_to_all_s(ctx, spec, role, tokens * epochs / est.devices, traffic_passes)
    tp_comm_s = _tp_activation_s(ctx, spec, role, est, tokens * epochs, backward, recompute)
    logits_s = _logits_s(ctx, spec, head, est, tokens * epochs, 3.0 if backward else 1.0)
    eager_s = 0.0
    if layer_kernels(role) == "eager":
        # Hugging Face modules run each norm, rotary embedding, activation and residual add as
        # a chain of operators over whole activation tensors: the traffic beyond fused
        # kernels, per token and layer, split like the layer over tensor (or sequence)
        # parallel ranks; backward moves 2.3x the forward's, a recomputation once more.
        dp = max(1, est.devices // (est.tp * est.pp))
        times = (1.0 + f.EAGER_BACKWARD_RATIO + (1.0 if recompute else 0.0)) if backward else 1.0
        traffic = (
            tokens * epochs / dp * spec.num_layers / est.pp
            * f.eager_excess_bytes_per_token(spec) / est.tp * times
        )  # fmt: skip
        eager_s = traffic / (ctx.gpu.memory_gb_per_s * 1e9)
    if lora is not None:
        # LoRA adapters scale and add their output as separate operators (peft and
        # Megatron-Bridge alike), whatever runs the layer's own kernels.
        dp = max(1, est.devices // (est.tp * est.pp))
        fwd, bwd = f.lora_elementwise_bytes(spec, lora.targets)
        per_token = fwd * ((2.0 if recompute else 1.0) if backward else 1.0)
        per_token += bwd if backward else 0.0
        traffic = tokens * epochs / dp * spec.num_layers / est.pp * per_token / est.tp
        eager_s += traffic / (ctx.gpu.memory_gb_per_s * 1e9)
    # Pipeline bubble: (pp - 1) idle slots per optimizer step of m micro-batches (1F1B), each
    # slot as long as one micro-batch's work on a stage: its matmuls (grouped expert GEMMs
    # included), its expert all-to-alls, tensor-parallel collectives and unfused operators.
    # micro_batches counts every epoch's, so the optimizer steps do too.
    bubble_s = 0.0
    if est.pp > 1:
        steps = w.mini_batches * epochs if backward else 1
        per_step = max(1.0, micro_batches / max(1, steps))
        bubble_s = (compute_s + a2a_s + tp_comm_s + eager_s) * (est.pp - 1) / per_step
    controller_s, controller_gb, padded_to = controller_transfer(ctx, role, est, stage.share)
    if controller_s > 0.25 * compute_s and controller_s >= 1.0:
        note = _controller_note(ctx, padded_to, mean_len)
        if note not in ctx.warnings:
            ctx.warnings.append(note)
    terms = {
        "compute": compute_s,
        "communication": a2a_s + tp_comm_s,
        "latency": bubble_s,
        "memory": logits_s + eager_s,
        "overhead": overhead_s + offload_s + controller_s,
    }
    detail = {
        "devices": est.devices, "efficiency": eff, "tokens": tokens * epochs, "passes": passes,
        "micro_batch_tokens": mb_tokens, "micro_batches_per_rank": micro_batches,
        "group_tokens_per_sync": per_sync,
        "pipeline_bubble_s": bubble_s, "launch_overhead_s": overhead_s, "host_s": host_s,
        "param_offload_s": offload_s, "flops": flops, "expert_all_to_all_s": a2a_s,
        "straggler": straggler,
        "tp_activation_s": tp_comm_s, "eager_traffic_s": eager_s,
        "controller_s": controller_s, "controller_gb": controller_gb,
        "controller_padded_tokens": padded_to,
        "attention_flop_share": attention_flops / max(1.0, matmul_flops + attention_flops),
    }  # fmt: skip
    # A stage's own micro-batch, said where it replaces the workload's (the pass line).
    if stage.micro_batch_size is not None:
        detail["own_micro_batch_size"] = stage.micro_batch_size
    if stage.micro_batch_tokens is not None:
        detail["own_micro_batch_tokens"] = stage.micro_batch_tokens
    if stage.share != 1.0:
        detail["share"] = stage.share
    return terms, detail, micro_batches


def _controller_note(ctx: Context, padded_to: float, mean_len: float) -> str:
    """What to do when the controller's batch moves take more than a quarter of a pass."""
    w = ctx.inputs.workload
    assert w is not None
    c = w.controller
    fixes = []
    if c.padding == "max" and padded_to > 2 * mean_len:
        fixes.append(
            f"the batch is padded to {padded_to:,.0f} tokens a sequence against a mean of"
            f" {mean_len:,.0f}: a lower response cap shrinks it"
        )
    if c.per_rank:
        fixes.append("ray.put each shard once (NeMo RL v0.7) instead of once per rank")
    fixes.append(
        "a data plane that hands workers references, not tensors, removes it (verl's"
        " transfer_queue.enable or trainer.data_plane=neoproto, ROLL's TransferQueue"
        " transfer_backend)"
    )
    return (
        "workload.controller: the single controller's batch moves take more than a quarter of"
        " a pass's compute (it serializes every pass's batch alone, whatever the GPU count); "
        + "; ".join(fixes)
    )


def controller_transfer(
    ctx: Context, role: Role, est: RoleEstimate, share: float = 1.0
) -> tuple[float, float, float]:
    """(seconds, GB, padded tokens per sequence) of the single controller moving one GPU
    pass's batch (``share`` of the step's sequences) to the role's workers and their
    results back (``workload.controller``).

    Every sequence is padded to the same length (verl: the prompt and response maxima;
    NeMo RL: the step's longest sequence, its mean prompt plus the expected longest of its
    responses; packed: the mean); ``per_rank`` serializes each data-parallel shard once per
    tensor-, pipeline- and context-parallel rank, ``returned_per_rank`` fetches the results
    from each of them. One process does it for the whole cluster, so the seconds do not
    fall with more GPUs.
    """
    w = ctx.inputs.workload
    assert w is not None
    c = w.controller
    if c.padding == "none" or c.bytes_per_token + c.returned_bytes_per_token == 0:
        return 0.0, 0.0, 0.0
    n, mean, longest = workload_tokens(w)
    n = n * share if share != 1.0 else n
    if c.padding == "max":
        padded = float(longest)
    elif c.padding == "packed":
        padded = mean
    else:
        longest_of = sample_lengths(ctx).longest_of(max(1, int(n)))
        padded = min(float(longest), w.prompt_tokens.mean + longest_of)
    ranks = est.tp * est.pp * (role.parallel.sp if role.parallel else 1)
    sent = c.bytes_per_token * (ranks if c.per_rank else 1)
    returned = c.returned_bytes_per_token * (ranks if c.returned_per_rank else 1)
    gb = n * padded * (sent + returned) / f.GB
    return gb / efficiency_value(ctx.inputs.efficiency, "controller_gb_s"), gb, padded


def _tp_activation_s(
    ctx: Context,
    spec: ModelSpec,
    role: Role,
    est: RoleEstimate,
    tokens: float,
    backward: bool,
    recompute: bool,
) -> float:
    """Tensor parallel's activation collectives in a train or log-prob pass.

    Megatron's tensor (and sequence) parallelism exchanges each layer's
    activations: one all-reduce per mixer and per MLP forward (two per transformer layer)
    and as many backward, i.e. two all-gathers or reduce-scatters per mixer and per MLP,
    of ``tokens x hidden`` each way (Korthikanti
    et al., "Reducing Activation Recomputation in Large Transformer Models",
    2022, section 4.2.2). They sit between the matmuls that need them and are not
    overlapped unless Transformer Engine's ``tp_comm_overlap`` is set (off by
    default), so they add. Each device moves ``(tp-1)/tp`` of each tensor.
    """
    tp = est.tp
    if tp <= 1:
        return 0.0
    b = f.BYTES_PER_ELEMENT[stored_precision(role.precision)]
    dp = max(1, est.devices // (tp * est.pp))
    rounds = (1.0 + 1.0 + (1.0 if recompute else 0.0)) if backward else 1.0
    per_device = (
        rounds * 2 * spec.sublayers / est.pp * tokens / dp * spec.hidden_size * b * (tp - 1) / tp
    )
    c = ctx.inputs.cluster
    speed = c.network_gb_per_s if spans_nodes(ctx, tp) else c.device_copy_gb_per_s
    return per_device / (speed * f.GB)


def _logits_s(
    ctx: Context, spec: ModelSpec, head: f.Head, est: RoleEstimate, tokens: float, passes: float
) -> float:
    """Memory traffic of a language-model head's logits: each data-parallel rank's tokens
    times its tensor-parallel share of the vocabulary, ``logits_bytes`` each per pass."""
    if head != "lm":
        return 0.0
    eff = ctx.inputs.efficiency
    dp = max(1, est.devices // (est.tp * est.pp))
    elements = tokens / dp * spec.vocab_size / est.tp
    traffic = passes * elements * efficiency_value(eff, "logits_bytes")
    return traffic / (ctx.gpu.memory_gb_per_s * 1e9)


def _expert_flop_share(spec: ModelSpec, head: f.Head) -> float:
    """Share of a token's matmul FLOPs spent in its routed experts."""
    routed = spec.moe_layers * spec.experts_per_token * f.expert_params(spec)
    return routed / f.active_params(spec, head)


def _expert_all_to_all_s(
    ctx: Context, spec: ModelSpec, role: Role, tokens_per_device: float, passes: float
) -> float:
    """Expert-parallel dispatch and combine: each token's hidden state to its k experts' ranks
    and back, per MoE layer and pass, the share that leaves the rank, over the EP group's link."""
    ep = role.parallel.ep if role.parallel else 1
    if not spec.is_moe or ep <= 1:
        return 0.0
    b = f.BYTES_PER_ELEMENT[stored_precision(role.precision)]
    per_layer = 2 * tokens_per_device * spec.experts_per_token * spec.expert_input_size * b
    sent = per_layer * spec.moe_layers * passes * (ep - 1) / ep
    c = ctx.inputs.cluster
    speed = c.network_gb_per_s if spans_nodes(ctx, ep) else c.device_copy_gb_per_s
    return sent / (speed * f.GB)


def _controller_stage(ctx: Context) -> str | None:
    """The CPU reward stage that holds the per-sequence controller work (its given seconds,
    or ``sequence_overhead_s`` per sequence); without one the train stage carries it."""
    for s in ctx.inputs.pipeline.stages:
        role = ctx.inputs.roles.get(s.role or "")
        if not s.is_weight_sync and is_rule_reward(s, role):
            return s.name
    return None


def _sequence_overhead_s(ctx: Context, *, scored: bool = False) -> float:
    """Controller seconds of one step's sequences: rewards, collation, moves between workers;
    ``scored``: every sequence the reward scores, dynamic sampling's dropped ones too (a
    reward stage), else the trained ones (the trainer's per-step share)."""
    w = ctx.inputs.workload
    assert w is not None
    n = w.scored() if scored else workload_tokens(w)[0]
    return n * efficiency_value(ctx.inputs.efficiency, "sequence_overhead_s")


def estimate_reward_cpu(ctx: Context, stage: Stage) -> StageEstimate:
    """A rule-based reward stage on CPUs: the per-sequence controller work of the step.

    Frameworks score each response on CPUs and move it between workers; where
    the pipeline draws that as its own stage (NeMo RL's async trajectory
    collector scores rollouts beside generation, off the trainer's path), its
    seconds are ``sequence_overhead_s`` per sequence, and the train stage keeps
    only the fixed per-step overhead. A stage with a ``share`` scores that share of
    the sequences (ROLL's reward clusters, one per domain, side by side).
    """
    seconds = _sequence_overhead_s(ctx, scored=True) * stage.share
    detail: dict[str, Any] = {"sequence_overhead_s": seconds}
    if stage.share != 1.0:
        detail["share"] = stage.share
    return combine_terms(stage, "cpu", {"overhead": seconds}, detail=detail)


def _step_overhead_stage(ctx: Context) -> str | None:
    """The train stage that carries the per-step framework overhead (the trained policy's)."""
    stages = ctx.inputs.pipeline.stages
    sources = {s.from_role for s in stages if s.is_weight_sync}
    trains = [s for s in stages if s.kind == "train"]
    for s in trains:
        if s.role in sources:
            return s.name
    return trains[0].name if trains else None


def _gathered_bytes(ctx: Context, role: Role, est: RoleEstimate) -> float:
    """Bytes one device receives to gather a sharded (FSDP / ZeRO-3) role's weights once: the
    dense part's shard over the data-parallel ranks, the routed experts' (``parallel.ep``)
    over the expert data-parallel ranks only (:func:`expert_layout`); with hybrid sharding
    over the ranks of its shard group only (:func:`shard_groups`)."""
    b = f.BYTES_PER_ELEMENT[stored_precision(role.precision)]
    spec = ctx.spec(role)
    ep, _ = expert_layout(ctx, role)
    if est.dp <= 1:
        return 0.0
    group, egroup = shard_groups(ctx, role)
    experts = f.routed_expert_params(spec) if ep > 1 else 0
    dense = est.params - experts
    return (
        dense / (est.tp * est.pp) * (group - 1) / group
        + experts / (ep * est.pp) * (egroup - 1) / max(egroup, 1)
    ) * b


def _replica_all_reduce_elements(ctx: Context, role: Role, est: RoleEstimate) -> float:
    """Elements one device sends (and receives) to all-reduce its gradient shard across the
    replicas of hybrid sharding (``parallel.shard_group``): a ring all-reduce of the shard
    (the dense part over the group, the experts over theirs) among dp / group ranks moves
    2 (r - 1) / r of it (PyTorch HSDP: reduce-scatter within the group, then all-reduce
    across the replicate dimension). 0 without replicas."""
    replicas = shard_replicas(ctx, role) if est.dp > 1 else 1
    if replicas <= 1:
        return 0.0
    spec = ctx.spec(role)
    ep, _ = expert_layout(ctx, role)
    group, egroup = shard_groups(ctx, role)
    experts = f.routed_expert_params(spec) if ep > 1 else 0
    shard = (est.params - experts) / (est.tp * est.pp) / group + experts / (ep * est.pp) / egroup
    return 2 * shard * (replicas - 1) / replicas


def _overlap_communication(
    terms: dict[str, float], detail: dict[str, Any], comm_s: float, *, packed: bool
) -> float:
    """Put a pass's data-parallel traffic of ``comm_s`` seconds into its terms; the exposed
    seconds.

    Gathers and reductions prefetch behind compute: only what exceeds it shows. The host
    runs ahead of a device busy with compute and then with the exposed communication: with
    packed batches its launches show only beyond both (max(compute, comm, host), one
    overlap, so a faster compute never makes the pass longer).
    """
    exposed_s = max(0.0, comm_s - terms["compute"])
    terms["communication"] += exposed_s
    if exposed_s > 0.0 and packed:
        launches_s = max(0.0, detail["host_s"] - terms["compute"] - exposed_s)
        terms["overhead"] -= detail["launch_overhead_s"] - launches_s
        detail["launch_overhead_s"] = launches_s
    return exposed_s


def estimate_train(ctx: Context, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    """Forward + backward (+ recomputation) over the step's tokens, and the optimizer steps.

    Terms: compute (FLOPs at an efficiency that falls for narrow models and small
    micro-batches), communication (data-parallel gradient reduction and FSDP/ZeRO-3
    gathers not hidden behind compute), latency (pipeline bubbles), memory (the
    optimizer step reading and writing every state, a language-model head's logits),
    overhead (host launches beyond compute, parameter/optimizer offload, a CPU
    optimizer, the per-step framework overhead).
    """
    ctx = ctx.for_stage(stage)
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = role_head(role.name, ctx.stages_of.get(role.name, []))
    terms, detail, micro_batches = _pass_terms(ctx, stage, role, est, backward=True)
    par = role.parallel
    recompute = bool(par and par.recompute)
    b = f.BYTES_PER_ELEMENT[stored_precision(role.precision)]
    # Gradients, their reduction and the optimizer cover what is trained (LoRA: the adapters).
    trainable = trainable_params(ctx, role, est.params)
    shard_trainable = trainable / (est.tp * est.pp)
    # One collective over the (expert) data-parallel ranks moves this much per device, for
    # every weight at b bytes; the gradients' share of it is the trained weights'.
    collective = _gathered_bytes(ctx, role, est) / b
    # Hybrid sharding: the collectives above stay within a shard group; the gradient shards
    # are then all-reduced across the replicas, over the role's own link.
    across = _replica_all_reduce_elements(ctx, role, est)
    trained = trainable / est.params
    sharded = par is not None and (par.fsdp or par.zero >= 3)
    steps = w.mini_batches * w.epochs
    comm = replica_comm = 0.0
    if est.dp > 1:
        if par is not None and (par.fsdp or par.zero >= 2):
            # Sharded gradients: no rank keeps a whole gradient, so each micro-batch's backward
            # reduce-scatters its own as it ends, not once per optimizer step (verl's actor and
            # NeMo RL's DTensor worker call backward per micro-batch without no_sync; DeepSpeed
            # ZeRO-2/3 reduce outside accumulation boundaries too). FSDP reduces in fp32 (both
            # set reduce_dtype float32), DeepSpeed in the model's type (its default
            # communication_data_type).
            reduce_b = f.BYTES_PER_ELEMENT["fp32"] if par.fsdp else b
            comm = collective * trained * reduce_b * micro_batches
            replica_comm = across * trained * reduce_b * micro_batches
            if sharded:
                # The weights gathered for the forward and again for the backward; a
                # recomputed forward runs inside the backward on the weights its pre-backward
                # hook gathered (FSDP2's _pre_forward returns early in the pre-backward
                # state, FSDP1 alike): no third gather.
                comm += 2 * collective * b * micro_batches
            else:  # ZeRO-2: each optimizer step's updated shards gathered once
                comm += collective * trained * b * steps
        else:
            # Whole gradients accumulate locally and are reduced once per optimizer step: an
            # all-reduce (DDP), or a reduce-scatter and the updated weights' gather (ZeRO-1,
            # Megatron's distributed optimizer).
            comm = 2 * collective * trained * b * steps
            replica_comm = across * trained * b * steps
    comm_s = comm / (shard_link_gb_per_s(ctx, role) * f.GB) + replica_comm / (
        link_gb_per_s(ctx, role) * f.GB
    )
    comm += replica_comm
    exposed_s = _overlap_communication(terms, detail, comm_s, packed=w.packing)
    if exposed_s > 0.1 * terms["compute"] and par is not None and (par.fsdp or par.zero >= 2):
        note = (
            f"pipeline.stages.{stage.name}: {role.name}'s data-parallel traffic ({comm_s:.1f} s:"
            f" {'weights gathered and ' if sharded else ''}gradients reduce-scattered every one"
            f" of its {micro_batches:,} micro-batches per rank) exceeds its compute"
            f" ({terms['compute']:.1f} s); larger micro-batches (workload.micro_batch_tokens)"
            " amortise it, sharding within a node (fewer data-parallel ranks across the"
            f" network: roles.{role.name}.parallel.shard_group) shortens it"
        )
        if note not in ctx.warnings:
            ctx.warnings.append(note)
    # Optimizer step: read and write weights, grads and optimizer state once per step; a
    # sharded optimizer (ZeRO-1/2, Megatron's distributed optimizer) updates its rank's
    # 1/dp of the weights from its 1/dp of the gradients (then gathers them, above).
    # (ZeRO-2 holds only its gradient shard already, ZeRO-3 and FSDP every state's.)
    zero = 0 if par is None else (3 if par.fsdp else par.zero)
    own = shard_fraction(ctx, role, est.params) if 1 <= zero < 3 else 1.0
    states_gb = (
        est.states.get("weights", 0.0) * trainable / est.params * own
        + est.states.get("grads", 0.0) * (own if zero == 1 else 1.0)
        + est.states.get("optimizer", 0.0)
    )
    host = ctx.inputs.cluster.host_gb_per_s
    opt_s = opt_memory_s = 0.0
    if par is not None and par.cpu_optimizer:
        per_node = efficiency_value(ctx.inputs.efficiency, "cpu_adam_params_per_s")
        gpn = ctx.inputs.cluster.gpus_per_node
        ranks_per_node = min(gpn, est.devices)
        params_per_device = shard_trainable / (
            shard_groups(ctx, role)[0] if sharded or par.zero else 1
        )
        cpu_s = params_per_device * ranks_per_node / per_node
        copy_s = 2 * est.states.get("grads", 0.0) / host  # grads down, weights up
        opt_s = (cpu_s + copy_s) * steps
        terms["overhead"] += opt_s
    else:
        bandwidth = (
            ctx.gpu.memory_gb_per_s
            * 1e9
            * efficiency_value(ctx.inputs.efficiency, f"optimizer_{optimizer_kernel(role)}")
        )
        opt_memory_s = 2 * states_gb * f.GB / bandwidth * steps
        terms["memory"] += opt_memory_s
        if par is not None and par.offload_optimizer:
            terms["overhead"] += 2 * est.states.get("optimizer", 0.0) / host
    if _step_overhead_stage(ctx) == stage.name:
        step_s = efficiency_value(ctx.inputs.efficiency, "step_overhead_s")
        if _controller_stage(ctx) is None:
            step_s += _sequence_overhead_s(ctx)
        terms["overhead"] += step_s
        detail["step_overhead_s"] = step_s
    # 1F1B: the first pipeline stage holds up to pp micro-batches' activations at once.
    per_step = micro_batches / max(1, steps)
    micro_tokens = _micro_batch_tokens_per_rank(w, role, stage, detail, backward=True)
    scores = _scores_sequence(spec, role, w, micro_tokens)
    act = f.activation_bytes(
        spec, micro_tokens,
        precision=stored_precision(role.precision), tp=est.tp, pp=est.pp, recompute=recompute,
        backward=True, in_flight=min(est.pp, max(1, math.ceil(per_step - 1e-9))),
        sequence_parallel=par.sequence_parallel if par is not None else True,
        head=head,
        eager=layer_kernels(role) == "eager",
        logits_bytes=_logits_bytes(role, backward=True),
        scores_sequence=scores,
    ) / f.GB  # fmt: skip
    if scores:
        detail["scores_gb_per_layer"] = spec.num_heads * micro_tokens * scores * 4 / est.tp / f.GB
    detail.update({
        "optimizer_steps": steps, "comm_s": comm_s, "comm_exposed_s": exposed_s,
        "cpu_optimizer_s": opt_s, "optimizer_s": opt_memory_s,
    })  # fmt: skip
    flops = detail.pop("flops")
    return combine_terms(
        stage, "train", terms, flops=flops, bytes=comm, memory_gb=act, detail=detail
    )


def _scores_sequence(spec: ModelSpec, role: Role, w: Workload, tokens: float) -> float:
    """The row length of the score matrices a pass keeps (0: none, a flash kernel runs):
    the longest sequence in padded rows, the whole row packed (``tokens`` per rank, the
    row split over ``parallel.sp``)."""
    _, mean, longest = workload_tokens(w)
    masked = w.packing or mean < longest
    kernels = layer_kernels(role)
    if not f.keeps_attention_scores(spec, stored_precision(role.precision), kernels, masked=masked):
        return 0.0
    if w.packing:
        return tokens * (role.parallel.sp if role.parallel else 1)
    return float(longest)


def _logits_bytes(role: Role, *, backward: bool) -> float:
    """Bytes per logit a pass of ``role`` holds at its peak (``parallel.logits``)."""
    logits = role.parallel.logits if role.parallel is not None else "fp32"
    if logits == "fp32":
        return 4.0 * (2 if backward else 1)
    if logits == "fp32_log_softmax":
        return f.PLAIN_LOGPROB_TRAIN_BYTES if backward else f.PLAIN_LOGPROB_FORWARD_BYTES
    if logits.startswith("fp32_log_softmax_entropy"):
        if not backward:
            return f.PLAIN_ENTROPY_FORWARD_BYTES
        trains_entropy = logits == "fp32_log_softmax_entropy"
        return f.PLAIN_ENTROPY_TRAIN_BYTES if trains_entropy else f.PLAIN_LOGPROB_TRAIN_BYTES
    entropy = 0.0
    if logits == "bf16_entropy_compiled":
        entropy = f.ENTROPY_COMPILED_TRAIN_BYTES if backward else f.ENTROPY_FORWARD_BYTES
    elif logits == "bf16_entropy" or (logits == "bf16_entropy_forward" and not backward):
        entropy = f.ENTROPY_TRAIN_BYTES if backward else f.ENTROPY_FORWARD_BYTES
    return 2.0 + entropy


def _micro_batch_tokens_per_rank(
    w: Workload, role: Role, stage: Stage, detail: Mapping[str, Any], *, backward: bool
) -> float:
    """Tokens whose activations one rank holds at its largest micro-batch: padded, every
    sequence at the longest; packed with a token budget (verl's dynamic batches, NeMo RL's
    packing), the micro-batches the budget makes of a group's share of an optimizer step,
    as few as it allows with the tokens spread evenly (at least the longest sequence, which
    goes alone if longer than the budget); packed by count, the micro-batch that holds the
    step's longest sequence beside mean ones. Split
    over the sequence / context-parallel ranks, which each hold a slice of every sequence
    (Ulysses, Megatron's context parallel)."""
    size, budget = _micro_batch(w, backward, stage)
    _, mean, longest = workload_tokens(w)
    if not w.packing:
        tokens = size * longest
    elif budget is not None:
        tokens = max(float(longest), detail["micro_batch_tokens"])
    else:
        tokens = min(size * longest, (size - 1) * mean + longest)
    sp = role.parallel.sp if role.parallel else 1
    return tokens / sp


def estimate_forward(ctx: Context, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    """One forward pass over the step's tokens (log-probs, values, reward scores)."""
    ctx = ctx.for_stage(stage)
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = role_head(role.name, ctx.stages_of.get(role.name, []))
    terms, detail, micro_batches = _pass_terms(ctx, stage, role, est, backward=False)
    # FSDP / ZeRO-3 gathers the weights for every micro-batch's forward (reshard after
    # forward: verl's and NeMo RL's log-prob loops run micro-batch after micro-batch).
    par = role.parallel
    comm = 0.0
    if par is not None and (par.fsdp or par.zero >= 3) and est.dp > 1:
        comm = _gathered_bytes(ctx, role, est) * micro_batches
    comm_s = comm / (shard_link_gb_per_s(ctx, role) * f.GB)
    exposed_s = _overlap_communication(terms, detail, comm_s, packed=w.packing)
    detail.update({"comm_s": comm_s, "comm_exposed_s": exposed_s})
    micro_tokens = _micro_batch_tokens_per_rank(w, role, stage, detail, backward=False)
    scores = _scores_sequence(spec, role, w, micro_tokens)
    act = f.activation_bytes(
        spec, micro_tokens,
        precision=stored_precision(role.precision), tp=est.tp, pp=est.pp,
        backward=False,
        sequence_parallel=role.parallel.sequence_parallel if role.parallel else True,
        head=head,
        eager=layer_kernels(role) == "eager",
        logits_bytes=_logits_bytes(role, backward=False),
        scores_sequence=scores,
    ) / f.GB  # fmt: skip
    if scores:
        detail["scores_gb_per_layer"] = spec.num_heads * micro_tokens * scores * 4 / est.tp / f.GB
    flops = detail.pop("flops")
    return combine_terms(
        stage, "forward", terms, flops=flops, bytes=comm, memory_gb=act, detail=detail
    )
