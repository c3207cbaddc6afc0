"""The GB each GPU role keeps per device: weights, gradients, optimizer, KV cache.

:func:`role_states` sizes a role's states from its model, precision, sharding and
LoRA adapter; the rollout's KV cache takes what its memory fraction leaves after
weights and the engine's transient buffers (:func:`kv_cache_gb`), times the steps
a streaming rollout holds at once.
"""

from __future__ import annotations

import math

from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.context import (
    ENGINE_KINDS,
    PREFILL_CHUNK_TOKENS,
    Context,
    RoleEstimate,
    engine_replicas,
    expert_layout,
    kv_precision,
    lora_params,
    role_head,
    shard_groups,
    stage_kind,
    stored_precision,
    stream_mode,
    weight_bytes_per_param,
    weight_precision,
)
from rlplex.estimate.specs import ModelSpec
from rlplex.resources.cluster import Role
from rlplex.resources.inputs import Rollout


def role_states(ctx: Context, role: Role) -> RoleEstimate:
    """GB per device of a GPU role's states (see docs/cost-model.md, "States")."""
    stages = ctx.stages_of.get(role.name, [])
    kinds = {stage_kind(s, role) for s in stages}
    spec = ctx.spec(role)
    head = role_head(role.name, stages)
    params = f.total_params(spec, head)
    tp, pp, dp = ctx.layout(role)
    par = role.parallel
    zero = 3 if par is not None and par.fsdp else (par.zero if par is not None else 0)
    b = f.BYTES_PER_ELEMENT[weight_precision(ctx, role)]
    ep, _ = expert_layout(ctx, role)
    # Expert parallelism gives each of ep ranks its own routed experts whole (expert tensor
    # parallel 1, Megatron-core's and vLLM's layout); the rest splits over tp as usual. ZeRO
    # shards each part over its own data-parallel group; hybrid sharding
    # (parallel.shard_group) over a part of it, replicated across the rest.
    group, egroup = shard_groups(ctx, role)
    experts = f.routed_expert_params(spec) if ep > 1 else 0
    dense = params - experts

    def per_device(zero_level: int) -> float:
        return dense / (tp * pp) / (group if zero >= zero_level else 1) + experts / (ep * pp) / (
            egroup if zero >= zero_level else 1
        )

    # LoRA adapters split over the devices as the weights they adapt do; a trained role's
    # gradients and optimizer state cover them alone (its base weights are frozen).
    adapters = lora_params(ctx, role) / params
    trained = adapters if role.lora is not None else 1.0
    held_b = weight_bytes_per_param(ctx, role)
    states: dict[str, float] = {"weights": per_device(3) * (1.0 + adapters) * held_b / f.GB}
    host_states: dict[str, float] = {}
    if "train" in kinds:
        per_param = f.optimizer_bytes_per_param(role.optimizer, role.precision)
        # A CPU optimizer (DeepSpeed's CPU Adam, Megatron's optimizer_cpu_offload) keeps its
        # master weights and moments in host memory, never on a GPU, beside an fp32 copy of
        # the gradients it steps with (Megatron's HybridDeviceOptimizer pins them on the host,
        # pin_cpu_grads; DeepSpeed's CPU Adam keeps fp32 gradient partitions there).
        if par is not None and par.cpu_optimizer:
            host_states["optimizer"] = per_device(1) * trained * (per_param + 4) / f.GB
        else:
            states["optimizer"] = per_device(1) * trained * per_param / f.GB
        states["grads"] = per_device(2) * trained * b / f.GB
    for state in role.host_states:  # the file keeps it in host memory: not on a GPU
        states.pop(state, None)
    if kinds & set(ENGINE_KINDS):
        given = role.states.get("kv_cache")
        if given is not None:
            states["kv_cache"] = float(given)
        else:
            weights = states["weights"]
            needs = [judge_kv_gb(ctx, role, spec, weights, s) for s in stages if s.judge]
            if "generate" in kinds:
                needs.append(kv_cache_gb(ctx, role, spec, weights))
            states["kv_cache"] = max(needs)
    return RoleEstimate(
        role=role.name,
        model=spec.name,
        params=params,
        devices=ctx.devices(role),
        tp=tp,
        pp=pp,
        dp=dp,
        states=states,
        host_states=host_states,
        activations_gb=0.0,
    )


def kv_cache_gb(ctx: Context, role: Role, spec: ModelSpec, weights_gb: float) -> float:
    """The KV cache an inference replica allocates, GB per device.

    The smaller of what its share of the batch needs at the longest prompt and
    response, and what the engine's memory share leaves after weights and the
    prefill chunk's activations.

    Raises:
        ConfigError: the weights leave no room for any KV cache.
    """
    w = ctx.inputs.workload
    assert w is not None
    per_replica = math.ceil(w.generated() / engine_replicas(ctx, role))
    longest = w.prompt_tokens.max + w.trajectory_max()
    return _engine_kv_gb(ctx, role, spec, weights_gb, per_replica * steps_held(ctx, role), longest)


def judge_kv_gb(
    ctx: Context, role: Role, spec: ModelSpec, weights_gb: float, stage: Stage
) -> float:
    """The KV cache a judge's engine allocates, GB per device: its judge prompts of the
    longest sample that run at once (``rollout.max_num_seqs``, at most its share of the
    samples), as :func:`kv_cache_gb` within the engine's memory share.

    Raises:
        ConfigError: the weights leave no room for any KV cache.
    """
    w = ctx.inputs.workload
    assert w is not None and stage.judge is not None
    per_replica = math.ceil(w.generated() * stage.share / engine_replicas(ctx, role))
    running = min(per_replica, (role.rollout or Rollout()).max_num_seqs)
    longest = (
        stage.judge.template_tokens + w.prompt_tokens.max + w.trajectory_max()
        + stage.judge.response_tokens
    )  # fmt: skip
    return _engine_kv_gb(ctx, role, spec, weights_gb, running, longest)


def _engine_kv_gb(
    ctx: Context, role: Role, spec: ModelSpec, weights_gb: float, sequences: int, longest: int
) -> float:
    """The smaller of what ``sequences`` sequences of ``longest`` tokens need and what the
    engine's memory share leaves after weights and the prefill chunk's activations."""
    tp, pp, _ = ctx.layout(role)
    per_token = f.kv_bytes_per_token(spec, kv_precision(role), tp, pp)
    # A hybrid model's linear-attention layers hold a fixed state per sequence instead.
    # vLLM keeps it in the model's dtype (mamba_cache_dtype "auto"), whatever kv_cache_dtype says.
    state = f.linear_state_bytes(spec, stored_precision(role.precision), tp, pp)
    # Windowed layers keep at most their window of each sequence.
    window = f.window_kv_bytes(spec, longest, kv_precision(role), tp, pp)
    one_gb = (longest * per_token + state + window) / f.GB
    need = sequences * one_gb
    transient = generate_transient_gb(spec, stored_precision(role.precision), tp, pp)
    fraction = (role.rollout or Rollout()).gpu_memory_utilization
    room = fraction * ctx.inputs.cluster.gpu_memory_gb - weights_gb - transient
    if room <= one_gb:
        raise ConfigError(
            f"cannot fit: {weights_gb:.1f} GB of weights per GPU (tp={tp}, pp={pp}) leave no room"
            f" for the KV cache of one {longest}-token sequence within"
            f" {fraction:g} x {ctx.inputs.cluster.gpu_memory_gb:g} GB;"
            f" raise roles.{role.name}.num_gpus_per_worker (tensor parallel)",
            field=f"roles.{role.name}.states.kv_cache",
            value=round(room, 2),
            file=ctx.inputs.file,
        )
    return min(need, room)


def steps_held(ctx: Context, role: Role) -> int:
    """Steps' sequences an inference engine holds at once: one in a sync pipeline; k in an
    async one of staleness k (NeMo RL's collector admits k steps' prompt groups); 1 + k for
    an engine that streams across steps (partial rollouts, :func:`estimate_generate`)."""
    staleness = ctx.inputs.pipeline.staleness
    if stream_mode(role.name, ctx.inputs.roles, ctx.inputs.pipeline) == "partial_rollout":
        return 1 + max(1, staleness)
    return max(1, staleness)


def generate_transient_gb(spec: ModelSpec, precision: str, tp: int, pp: int) -> float:
    """Activations of one prefill chunk (forward only), GB per device."""
    return (
        f.activation_bytes(
            spec, PREFILL_CHUNK_TOKENS, precision=precision, tp=tp, pp=pp, backward=False
        )
        / f.GB
        - PREFILL_CHUNK_TOKENS * spec.vocab_size * 4 / tp / f.GB  # logits only for last tokens
    )
