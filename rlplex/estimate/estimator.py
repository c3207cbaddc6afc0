"""Stage seconds and state GB of a config, from its model, workload and GPU.

:func:`estimate` takes the checked pieces of a config (cluster, roles,
pipeline, model, workload, efficiency) and returns an :class:`Estimate`: per
stage its seconds, FLOPs, bytes and what bounds it; per role the GB per device
of every state and its peak; and every assumption made, so that nothing is
assumed silently. Formulas: :mod:`rlplex.estimate.formulas` and
``docs/cost-model.md``.

Which formula a stage gets follows from its kind and name:

- ``kind: train`` (``train``, ``critic_train``): forward + backward, 6 x active
  params x tokens (8 x with recomputation), plus attention;
- a name starting with ``generate`` / ``rollout``: prefill + decode;
- ``*logprob*``, ``values``, and ``reward`` on a GPU role: one forward pass;
- ``weight_sync``: the destination's weights over the copy speeds (the cost
  model's own rule);
- anything else (CPU and driver stages) cannot be estimated: give ``seconds``.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlplex.dag.pipeline import Pipeline
from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.decode import (
    IN_FLIGHT_MAX_SEQUENCES,
    PromptGroup,
    StepCosts,
    simulate_decode,
    simulate_in_flight,
    stream_decode,
)
from rlplex.estimate.lengths import LengthDistribution, mean_windowed_square, response_lengths
from rlplex.estimate.specs import GpuSpec, ModelSpec, efficiency_defaults, gpu_spec, resolve_model
from rlplex.estimate.turns import multi_turn
from rlplex.resources.cluster import Cluster, Role
from rlplex.resources.inputs import Efficiency, Parallel, Rollout, Workload
from rlplex.resources.placement import parallel_layout_problem, role_parallel_sizes

StageKind = Literal["train", "forward", "generate", "weight_sync", "cpu"]
Bound = Literal["compute", "memory", "latency", "communication", "overhead", "given"]
"""The named cost terms of an estimated stage (see docs/cost-model.md, "Terms")."""

PREFILL_CHUNK_TOKENS = 8192
"""Tokens of one prefill chunk (vLLM's ``max_num_batched_tokens`` for chunked prefill)."""


class StageEstimate(BaseModel):
    """The estimated cost of one stage on its role's devices."""

    model_config = ConfigDict(frozen=True)

    stage: str
    kind: StageKind
    seconds: float | None
    """Estimated duration; None when the stage cannot be estimated (CPU/driver stages)."""
    flops: float = 0.0
    """Floating-point operations of the stage, all devices together."""
    bytes: float = 0.0
    """Bytes moved: read from device memory (decode), sent (weight sync), communicated
    (data-parallel gradient reduction and ZeRO-3/FSDP gathers, per device)."""
    bound: Bound = "compute"
    """The largest of its terms: compute, memory traffic, per-step latency floor,
    communication, fixed overhead (or ``given`` seconds)."""
    terms: dict[str, float] = Field(default_factory=dict)
    """Seconds of each named term; the stage's seconds are their sum (a roofline of memory
    and compute is taken step by step inside generation and reported split)."""
    memory_gb: float = 0.0
    """Transient GB per device while it runs (activations of the largest micro-batch)."""
    detail: dict[str, Any] = Field(default_factory=dict)
    """The intermediate figures (prefill and decode seconds, batch, devices ...)."""

    @property
    def outside_s(self) -> float:
        """Seconds of this stage that stand for time outside every stage: the per-step
        framework overhead (``step_overhead_s``, with the per-sequence controller work when
        no reward stage holds it) that the trained policy's train stage carries so that the
        planned step includes it. A framework's own timing of the stage (verl's
        ``update_actor``) does not contain them."""
        return float(self.detail.get("step_overhead_s", 0.0))


class RoleEstimate(BaseModel):
    """The estimated state sizes of one GPU role, in GB per device."""

    model_config = ConfigDict(frozen=True)

    role: str
    model: str
    params: int
    """Parameters of the role's model (its head included)."""
    devices: int
    tp: int
    pp: int
    dp: int
    states: dict[str, float]
    """GB per device of each state."""
    host_states: dict[str, float] = {}
    """GB per device kept in host memory the whole step instead (a CPU optimizer's state)."""
    activations_gb: float
    """The largest transient memory of the role's stages, GB per device."""

    @property
    def peak_gb(self) -> float:
        return sum(self.states.values()) + self.activations_gb


class Estimate(BaseModel):
    """Everything estimated for one config, with the assumptions behind it."""

    model_config = ConfigDict(frozen=True)

    stages: dict[str, StageEstimate]
    roles: dict[str, RoleEstimate]
    assumptions: dict[str, Any]
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``rlplex estimate --json`` document (see issue 10)."""
        return {
            "stages": {
                n: {
                    "seconds": s.seconds,
                    "flops": s.flops,
                    "bytes": s.bytes,
                    "bound": s.bound,
                    "terms": dict(s.terms),
                    "detail": _plain(s.detail),
                }
                for n, s in self.stages.items()
            },
            "roles": {
                n: {
                    "states": dict(r.states),
                    "host_states": dict(r.host_states),
                    "peak_gb": r.peak_gb,
                }
                for n, r in self.roles.items()
            },
            "assumptions": self.assumptions,
        }


def _plain(detail: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready figures of a stage's detail (numbers, flags, names)."""
    return {k: v for k, v in detail.items() if v is None or isinstance(v, (bool, int, float, str))}


class Inputs(BaseModel):
    """What the estimator reads, gathered from a config (before or after it is checked)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    cluster: Cluster
    roles: dict[str, Role]
    pipeline: Pipeline
    model: str | None = None
    workload: Workload | None = None
    efficiency: Efficiency | None = None
    file: str | None = None
    base_dir: Path | None = None


def missing_inputs(inputs: Inputs) -> list[str]:
    """The config fields the estimator still needs (empty: it can estimate)."""
    missing = []
    if inputs.model is None and not any(r.model for r in inputs.roles.values() if r.is_gpu):
        missing.append("model")
    if inputs.workload is None:
        missing.append("workload")
    if inputs.cluster.gpu is None:
        missing.append("cluster.gpu")
    return missing


def efficiency_value(eff: Efficiency | None, key: str) -> float:
    """The efficiency factor ``key`` (given, else the published default)."""
    given = getattr(eff, key, None) if eff is not None else None
    return float(given) if given is not None else float(efficiency_defaults()[key]["value"])


def stage_kind(stage: Stage, role: Role | None) -> StageKind:
    """Which formula estimates ``stage`` (see the module docstring)."""
    if stage.is_weight_sync:
        return "weight_sync"
    if role is None or not role.is_gpu:
        return "cpu"
    if stage.kind == "train":
        return "train"
    name = stage.name.lower()
    if name.startswith(("generate", "rollout", "gen")):
        return "generate"
    if "logprob" in name or "log_prob" in name or name in ("values", "value", "reward", "ref"):
        return "forward"
    return "cpu"


def _role_head(name: str, role_stages: list[Stage]) -> f.Head:
    names = {s.name for s in role_stages}
    if "critic" in name or names & {"values", "critic_train"}:
        return "value"
    if "reward" in name or "reward" in names:
        return "score"
    return "lm"


class _Ctx:
    """Per-call caches: model specs by name, roles' parallel layout."""

    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self.gpu: GpuSpec = gpu_spec(inputs.cluster.gpu or "", file=inputs.file)
        self.warnings: list[str] = []
        self._specs: dict[str, ModelSpec] = {}
        self.stages_of: dict[str, list[Stage]] = {}
        for stage in inputs.pipeline.stages:
            for r in stage.roles:
                self.stages_of.setdefault(r, []).append(stage)

    def spec(self, role: Role) -> ModelSpec:
        name = role.model or self.inputs.model
        field = f"roles.{role.name}.model" if role.model else "model"
        if name is None:
            raise ConfigError(
                "is required to estimate this role (a preset name or a Hugging Face path)",
                field=field,
                file=self.inputs.file,
            )
        if name not in self._specs:
            self._specs[name] = resolve_model(
                name, field=field, file=self.inputs.file, base_dir=self.inputs.base_dir,
                warn=self.warnings,
            )  # fmt: skip
        return self._specs[name]

    def devices(self, role: Role) -> int:
        if role.devices:
            return len(role.devices)
        note = (
            f"roles.{role.name}: devices: auto; estimated as if on all"
            f" {self.inputs.cluster.num_gpus} GPUs of the cluster"
        )
        if note not in self.warnings:
            self.warnings.append(note)
        return self.inputs.cluster.num_gpus

    def layout(self, role: Role) -> tuple[int, int, int]:
        """(tp, pp, dp) of the role."""
        par = role.parallel
        generates = any(
            stage_kind(s, role) == "generate" for s in self.stages_of.get(role.name, [])
        )
        tp, pp, _ = role_parallel_sizes(role, generates)
        d = self.devices(role)
        problem = parallel_layout_problem(d, tp, pp, 1)
        if problem is not None:
            raise ConfigError(
                problem[1],
                field=f"roles.{role.name}.{problem[0]}",
                value=par.model_dump(exclude_defaults=True) if par else {"tp": tp},
                file=self.inputs.file,
            )
        dp = par.dp if par and par.dp else d // (tp * pp)
        return tp, pp, dp


def _tokens(w: Workload) -> tuple[int, float, int]:
    """(sequences per step, mean tokens per sequence, max tokens per sequence); a sequence
    is a prompt and its response, or a whole multi-turn trajectory (``workload.turns``)."""
    return w.sequences(), w.sequence_mean(), w.prompt_tokens.max + w.continuation_max()


def stored_precision(precision: str) -> str:
    """What an fp8 role keeps in memory besides an engine's quantized weights: bf16.

    FP8 training (Transformer Engine, Megatron's FP8 recipes without ``fp8_param``)
    keeps bf16 weights, gradients and activations and casts each GEMM's inputs to
    FP8; vLLM's FP8 engines keep bf16 activations and, at its default
    ``kv_cache_dtype`` ("auto"), a bf16 KV cache.
    """
    return "bf16" if precision == "fp8" else precision


def weight_precision(ctx: _Ctx, role: Role) -> str:
    """Precision of a role's stored weights: fp8 only in an inference engine (vLLM's FP8
    quantization); a trainer or log-prob role keeps bf16 weights."""
    kinds = {stage_kind(s, role) for s in ctx.stages_of.get(role.name, [])}
    if role.precision == "fp8" and "generate" in kinds and "train" not in kinds:
        return "fp8"
    return stored_precision(role.precision)


def kv_precision(role: Role) -> str:
    """Precision of an engine's KV cache: ``rollout.kv_cache_dtype``, or the model's
    activations (vLLM's "auto")."""
    rollout = role.rollout or Rollout()
    return "fp8" if rollout.kv_cache_dtype == "fp8" else stored_precision(role.precision)


def lora_params(ctx: _Ctx, role: Role, *, active: bool = False) -> float:
    """The role's LoRA adapter weights (0 without ``lora``; ``active``: a token's, for FLOPs)."""
    if role.lora is None:
        return 0.0
    spec = ctx.spec(role)
    return float(f.lora_params(spec, role.lora.rank, role.lora.targets, active=active))


def trainable_params(ctx: _Ctx, role: Role, params: float) -> float:
    """What a trained role updates: every one of its ``params``, or its LoRA adapters only."""
    return params if role.lora is None else lora_params(ctx, role)


def weight_bytes_per_param(ctx: _Ctx, role: Role) -> float:
    """Bytes a role's held weights take per parameter: its weight precision's, or a trained
    LoRA role's frozen base at ``lora.frozen_precision`` beside its adapters."""
    b = f.BYTES_PER_ELEMENT[weight_precision(ctx, role)]
    lora = role.lora
    trains = any(stage_kind(s, role) == "train" for s in ctx.stages_of.get(role.name, []))
    if lora is None or lora.frozen_precision == "bf16" or not trains:
        return float(b)
    share = lora_params(ctx, role) / f.total_params(ctx.spec(role))
    return (f.BYTES_PER_ELEMENT[lora.frozen_precision] + share * b) / (1.0 + share)


def role_states(ctx: _Ctx, role: Role) -> RoleEstimate:
    """GB per device of a GPU role's states (see docs/cost-model.md, "States")."""
    stages = ctx.stages_of.get(role.name, [])
    kinds = {stage_kind(s, role) for s in stages}
    spec = ctx.spec(role)
    head = _role_head(role.name, stages)
    params = f.total_params(spec, head)
    tp, pp, dp = ctx.layout(role)
    par = role.parallel
    zero = 3 if par is not None and par.fsdp else (par.zero if par is not None else 0)
    b = f.BYTES_PER_ELEMENT[weight_precision(ctx, role)]
    ep, edp = _expert_layout(ctx, role)
    # Expert parallelism gives each of ep ranks its own routed experts whole (expert tensor
    # parallel 1, Megatron-core's and vLLM's layout); the rest splits over tp as usual. ZeRO
    # shards each part over its own data-parallel group.
    experts = f.routed_expert_params(spec) if ep > 1 else 0
    dense = params - experts

    def per_device(zero_level: int) -> float:
        return dense / (tp * pp) / (dp if zero >= zero_level else 1) + experts / (ep * pp) / (
            edp if zero >= zero_level else 1
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
    if "generate" in kinds:
        given = role.states.get("kv_cache")
        states["kv_cache"] = (
            float(given) if given is not None else kv_cache_gb(ctx, role, spec, states["weights"])
        )
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


def _expert_layout(ctx: _Ctx, role: Role) -> tuple[int, int]:
    """(ep, expert data-parallel size) of a role: the routed experts split over ep ranks.

    Raises:
        ConfigError: ep does not divide the role's devices per pipeline stage.
    """
    par = role.parallel
    ep = par.ep if par is not None else 1
    if ep <= 1:
        return 1, 1
    tp, pp, _ = ctx.layout(role)
    ranks = ctx.devices(role) // pp
    problem = parallel_layout_problem(ctx.devices(role), tp, pp, ep)
    if problem is not None:
        raise ConfigError(
            problem[1], field=f"roles.{role.name}.{problem[0]}", value=ep, file=ctx.inputs.file
        )
    return ep, ranks // ep


def _shard_fraction(ctx: _Ctx, role: Role, params: int) -> float:
    """The share of a rank's model parameters that is its own optimizer shard: the dense
    part over the data-parallel ranks, the routed experts over the expert data-parallel
    ones (Megatron's distributed optimizer, ZeRO), against what the rank holds whole."""
    spec = ctx.spec(role)
    tp, pp, dp = ctx.layout(role)
    ep, edp = _expert_layout(ctx, role)
    experts = f.routed_expert_params(spec) if ep > 1 else 0
    dense = params - experts
    whole = dense / (tp * pp) + experts / (ep * pp)
    own = dense / (tp * pp * dp) + experts / (ep * pp * edp)
    return own / whole if whole > 0 else 1.0


def _replicas(ctx: _Ctx, role: Role) -> int:
    tp, pp, _ = ctx.layout(role)
    return max(1, ctx.devices(role) // (tp * pp))


def kv_cache_gb(ctx: _Ctx, role: Role, spec: ModelSpec, weights_gb: float) -> float:
    """The KV cache an inference replica allocates, GB per device.

    The smaller of what its share of the batch needs at the longest prompt and
    response, and what the engine's memory share leaves after weights and the
    prefill chunk's activations.

    Raises:
        ConfigError: the weights leave no room for any KV cache.
    """
    w = ctx.inputs.workload
    assert w is not None
    tp, pp, _ = ctx.layout(role)
    n, longest = w.generated(), w.prompt_tokens.max + w.trajectory_max()
    per_replica = math.ceil(n / _replicas(ctx, role))
    per_token = f.kv_bytes_per_token(spec, kv_precision(role), tp, pp)
    # A hybrid model's linear-attention layers hold a fixed state per sequence instead.
    # vLLM keeps it in the model's dtype (mamba_cache_dtype "auto"), whatever kv_cache_dtype says.
    state = f.linear_state_bytes(spec, stored_precision(role.precision), tp, pp)
    # Windowed layers keep at most their window of each sequence.
    window = f.window_kv_bytes(spec, longest, kv_precision(role), tp, pp)
    one_gb = (longest * per_token + state + window) / f.GB
    need = per_replica * _steps_held(ctx, role) * one_gb
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


def _steps_held(ctx: _Ctx, role: Role) -> int:
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


def _stage_factor(eff: Efficiency | None, stage: str) -> float:
    return eff.stages.get(stage, 1.0) if eff is not None else 1.0


REFERENCE_TFLOPS = 989.5
"""Peak of the GPU the size factors are stated for (H100 SXM): a small kernel's fixed
latency costs a GPU in proportion to its peak, so the halves scale with it."""


def _width_factor(ctx: _Ctx, spec: ModelSpec, width: int | None = None) -> float:
    """Matmul efficiency of a model of this width (or of matmuls ``width`` wide) relative to
    a very wide one."""
    half = efficiency_value(ctx.inputs.efficiency, "width_half")
    half *= ctx.gpu.peak_tflops / REFERENCE_TFLOPS
    w = spec.hidden_size if width is None else width
    return w / (w + half)


def _tokens_factor(ctx: _Ctx, tokens: float) -> float:
    """Matmul efficiency of a micro-batch of ``tokens`` tokens per GPU relative to a large one."""
    half = efficiency_value(ctx.inputs.efficiency, "tokens_half")
    half *= ctx.gpu.peak_tflops / REFERENCE_TFLOPS
    return tokens / (tokens + half) if tokens > 0 else 0.0


def _lengths(ctx: _Ctx) -> LengthDistribution:
    """Tokens after the prompt per trained sample: the response, or with ``workload.turns`` a
    whole trajectory's answers and observations, or a turn's with the context before it
    (``turns.samples: turn``, in the default shape)."""
    w = ctx.inputs.workload
    assert w is not None
    if w.turns is None or w.turns.samples == "trajectory":
        return _trajectory_lengths(ctx)
    # A share of trajectories at their cap says little of the samples' (only a capped
    # trajectory's last turn reaches it): the samples take the default shape.
    return response_lengths(
        w.continuation_mean(), w.continuation_max(), None,
        field="workload.response_tokens", file=ctx.inputs.file,
    )  # fmt: skip


def _trajectory_lengths(ctx: _Ctx) -> LengthDistribution:
    """Tokens after the prompt per generated sequence: the response, or a whole trajectory's
    answers and observations (the default shape over trajectories)."""
    w = ctx.inputs.workload
    assert w is not None
    return response_lengths(
        w.trajectory_mean(), w.trajectory_max(), w.response_tokens.clip_ratio,
        field="workload.response_tokens", file=ctx.inputs.file,
    )  # fmt: skip


def _sequence_tokens(ctx: _Ctx) -> tuple[float, float]:
    """(sum of tokens, sum of squared tokens) over one step's sequences, prompt + response.

    Packed sequences cost their own length; padded ones (``packing: false``)
    cost the longest prompt plus the longest response, as frameworks pad them.
    """
    w = ctx.inputs.workload
    assert w is not None
    n, _, longest = _tokens(w)
    if not w.packing:
        return n * longest, n * longest**2
    dist = _lengths(ctx)
    p = w.prompt_tokens.mean
    mean_square = p * p + 2 * p * dist.mean + dist.mean_square()
    return n * (p + dist.mean), n * mean_square


def _attention_squares(ctx: _Ctx, spec: ModelSpec) -> float:
    """Sum over one step's sequences of their layer-weighted squared lengths
    (:func:`formulas.attention_squares`: ``L**2`` per full-attention layer, less beyond the
    window per windowed one); times ``attention_width``, a forward pass's attention FLOPs."""
    w = ctx.inputs.workload
    assert w is not None
    n, _, longest = _tokens(w)
    if not w.packing:
        return n * f.attention_squares(spec, longest)
    _, squares = _sequence_tokens(ctx)
    windowed = 0.0
    if spec.sliding_window_layers:
        dist = _lengths(ctx)
        windowed = n * mean_windowed_square(dist, w.prompt_tokens.mean, spec.sliding_window)
    return spec.full_attention_layers * squares + spec.sliding_window_layers * windowed


def _pass_flops(ctx: _Ctx, spec: ModelSpec, head: f.Head) -> tuple[float, float]:
    """(matmul, causal attention) FLOPs of one forward pass over the step's sequences."""
    tokens, _ = _sequence_tokens(ctx)
    return (
        f.token_flops(spec, head) * tokens,
        f.attention_width(spec) * _attention_squares(ctx, spec),
    )


def _straggler_factor(
    ctx: _Ctx, spec: ModelSpec, head: f.Head, groups: int, sequences: float
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
    n, _, _ = _tokens(w)
    # Squares weighted by layer: a windowed layer's attention stops growing at its window.
    mean_len, mean_square = tokens / n, _attention_squares(ctx, spec) / n
    linear = f.token_flops(spec, head)
    width = f.attention_width(spec)
    longest = w.prompt_tokens.mean + _lengths(ctx).longest_of(max(1, int(sequences)))
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


def _micro_batch_straggler(ctx: _Ctx, groups: int, sequences: int) -> float:
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
    dist = _lengths(ctx)
    mean = w.prompt_tokens.mean + dist.mean
    spread = math.sqrt(max(0.0, dist.mean_square() - dist.mean**2))
    z = statistics.NormalDist().inv_cdf((groups - 0.375) / (groups + 0.25))
    longest = w.prompt_tokens.mean + dist.cap
    return min(1.0 + z * spread / (math.sqrt(sequences) * mean), longest / mean)


def _fp8_speedup(ctx: _Ctx, role: Role) -> float:
    """How much faster an fp8 role's weight matmuls run than in bf16 (1 without FP8 tensor
    cores); attention stays bf16 (Transformer Engine, vLLM)."""
    if role.precision != "fp8" or not ctx.gpu.fp8:
        return 1.0
    return efficiency_value(ctx.inputs.efficiency, "fp8_matmul_speedup")


def _spans_nodes(ctx: _Ctx, group: int) -> bool:
    """Whether a group of ``group`` consecutive GPUs leaves its NVLink fabric (node or rack)."""
    return group > ctx.inputs.cluster.fabric_gpus


def _link_gb_per_s(ctx: _Ctx, role: Role) -> float:
    """Collective bandwidth per device among the role's devices (NVLink; network across
    NVLink fabrics)."""
    c = ctx.inputs.cluster
    if role.devices:
        fabrics = len({c.fabric_of(d) for d in role.devices})
    else:
        fabrics = max(1, ctx.devices(role) // c.fabric_gpus)
    return c.network_gb_per_s if fabrics > 1 else c.device_copy_gb_per_s


def _scores_generated(stage: Stage) -> bool:
    """A reward stage: it scores every generated sequence, not only the trained ones."""
    return stage.name == "reward" or stage.name.startswith("reward_")


def _micro_batch(w: Workload, backward: bool) -> tuple[int, int | None]:
    """(sequences, packed token budget) of one micro-batch: a forward-only pass takes the
    log-prob settings where the config gives them, and the training ones otherwise."""
    if backward:
        return w.micro_batch_size, w.micro_batch_tokens
    return (
        w.logprob_micro_batch_size or w.micro_batch_size,
        w.logprob_micro_batch_tokens or w.micro_batch_tokens,
    )


def _pass_terms(
    ctx: _Ctx, stage: Stage, role: Role, est: RoleEstimate, *, backward: bool
) -> tuple[dict[str, float], dict[str, Any], float]:
    """Terms shared by train and log-prob passes: (terms, detail, micro-batches per rank)."""
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = _role_head(role.name, ctx.stages_of.get(role.name, []))
    par = role.parallel
    recompute = bool(par and par.recompute) and backward
    sp = par.sp if par else 1
    _, mean_len, longest = _tokens(w)
    tokens, _ = _sequence_tokens(ctx)
    matmul_flops, attention_flops = _pass_flops(ctx, spec, head)
    if _scores_generated(stage):  # a reward model scores dynamic sampling's dropped groups too
        scale = w.scored() / max(1, _tokens(w)[0])
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
        weight_passes * matmul_flops / _fp8_speedup(ctx, role) + passes * other_flops
    ) * epochs
    kind_key = "train" if backward else "forward"
    groups = max(1, est.devices // (est.tp * est.pp * sp))
    syncs = max(1, w.mini_batches) if backward else 1
    # A data-parallel group's tokens per optimizer step: no micro-batch spans two steps.
    per_sync = tokens / groups / syncs
    mb_size, mb_budget = _micro_batch(w, backward)
    if mb_budget is not None and w.packing:
        # Balanced micro-batches under the budget (verl's rearrange_micro_batches: as few as
        # the budget allows, the tokens spread evenly over them).
        mb_tokens = per_sync / max(1, math.ceil(per_sync / mb_budget))
    else:
        mb_tokens = mb_size * (mean_len if w.packing else longest)
    mb_tokens_per_gpu = mb_tokens / sp
    eff = (
        efficiency_value(ctx.inputs.efficiency, kind_key)
        * _stage_factor(ctx.inputs.efficiency, stage.name)
        * _width_factor(ctx, spec)
        * _tokens_factor(ctx, mb_tokens_per_gpu)
    )
    peak = ctx.gpu.peak_tflops * 1e12
    n, _, _ = _tokens(w)
    straggler = _straggler_factor(ctx, spec, head, groups, n / syncs)
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
        slower = (_width_factor(ctx, spec) * _tokens_factor(ctx, mb_tokens_per_gpu)) / (
            _width_factor(ctx, spec, expert_width) * _tokens_factor(ctx, per_expert)
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
    bubble_s = 0.0
    if est.pp > 1:
        per_step = max(1.0, micro_batches / max(1, w.mini_batches if backward else 1))
        bubble_s = (compute_s + a2a_s + tp_comm_s + eager_s) * (est.pp - 1) / per_step
    controller_s, controller_gb, padded_to = controller_transfer(ctx, role, est)
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
    return terms, detail, micro_batches


def _controller_note(ctx: _Ctx, padded_to: float, mean_len: float) -> str:
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


def controller_transfer(ctx: _Ctx, role: Role, est: RoleEstimate) -> tuple[float, float, float]:
    """(seconds, GB, padded tokens per sequence) of the single controller moving one GPU
    pass's batch to the role's workers and their results back (``workload.controller``).

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
    n, mean, longest = _tokens(w)
    if c.padding == "max":
        padded = float(longest)
    elif c.padding == "packed":
        padded = mean
    else:
        padded = min(float(longest), w.prompt_tokens.mean + _lengths(ctx).longest_of(n))
    ranks = est.tp * est.pp * (role.parallel.sp if role.parallel else 1)
    sent = c.bytes_per_token * (ranks if c.per_rank else 1)
    returned = c.returned_bytes_per_token * (ranks if c.returned_per_rank else 1)
    gb = n * padded * (sent + returned) / f.GB
    return gb / efficiency_value(ctx.inputs.efficiency, "controller_gb_s"), gb, padded


def layer_kernels(role: Role) -> str:
    """``fused`` or ``eager``: how the role's layers run (:attr:`Parallel.kernels`, whose
    default is eager under FSDP or ZeRO-2/3, the Hugging Face models those shard)."""
    par = role.parallel
    if par is not None and par.kernels is not None:
        return par.kernels
    return "eager" if par is not None and (par.fsdp or par.zero >= 2) else "fused"


def _cpu_optimizer(role: Role) -> bool:
    return role.parallel is not None and role.parallel.cpu_optimizer


def optimizer_kernel(role: Role) -> str:
    """``foreach`` or ``fused``: how the role's optimizer step runs. FSDP trainers (verl's,
    NeMo RL's DTensor workers, RLinf's) step PyTorch's ``torch.optim.AdamW`` (multi-tensor
    by default on CUDA); Megatron-Core steps Apex's or Transformer Engine's fused Adam, and
    DeepSpeed its FusedAdam when the config names Adam (OpenRLHF). A DeepSpeed engine given
    ``torch.optim.AdamW`` as its client optimizer (rlplex's own ZeRO backend) steps it
    multi-tensor: ``efficiency.optimizer_fused: 0.28`` says so for such a run."""
    return "foreach" if role.parallel is not None and role.parallel.fsdp else "fused"


def _tp_activation_s(
    ctx: _Ctx,
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
    speed = c.network_gb_per_s if _spans_nodes(ctx, tp) else c.device_copy_gb_per_s
    return per_device / (speed * f.GB)


def _logits_s(
    ctx: _Ctx, spec: ModelSpec, head: f.Head, est: RoleEstimate, tokens: float, passes: float
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
    ctx: _Ctx, spec: ModelSpec, role: Role, tokens_per_device: float, passes: float
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
    speed = c.network_gb_per_s if _spans_nodes(ctx, ep) else c.device_copy_gb_per_s
    return sent / (speed * f.GB)


def is_rule_reward(stage: Stage, role: Role | None) -> bool:
    """A rule-based reward stage: named ``reward*`` on a CPU role (or the driver)."""
    return (role is None or not role.is_gpu) and stage.name.lower().startswith("reward")


def _controller_stage(ctx: _Ctx) -> str | None:
    """The CPU reward stage that holds the per-sequence controller work (its given seconds,
    or ``sequence_overhead_s`` per sequence); without one the train stage carries it."""
    for s in ctx.inputs.pipeline.stages:
        role = ctx.inputs.roles.get(s.role or "")
        if not s.is_weight_sync and is_rule_reward(s, role):
            return s.name
    return None


def _sequence_overhead_s(ctx: _Ctx, *, scored: bool = False) -> float:
    """Controller seconds of one step's sequences: rewards, collation, moves between workers;
    ``scored``: every sequence the reward scores, dynamic sampling's dropped ones too (a
    reward stage), else the trained ones (the trainer's per-step share)."""
    w = ctx.inputs.workload
    assert w is not None
    n = w.scored() if scored else _tokens(w)[0]
    return n * efficiency_value(ctx.inputs.efficiency, "sequence_overhead_s")


def estimate_reward_cpu(ctx: _Ctx, stage: Stage) -> StageEstimate:
    """A rule-based reward stage on CPUs: the per-sequence controller work of the step.

    Frameworks score each response on CPUs and move it between workers; where
    the pipeline draws that as its own stage (NeMo RL's async trajectory
    collector scores rollouts beside generation, off the trainer's path), its
    seconds are ``sequence_overhead_s`` per sequence, and the train stage keeps
    only the fixed per-step overhead.
    """
    seconds = _sequence_overhead_s(ctx, scored=True)
    return _combine(stage, "cpu", {"overhead": seconds}, detail={"sequence_overhead_s": seconds})


def _step_overhead_stage(ctx: _Ctx) -> str | None:
    """The train stage that carries the per-step framework overhead (the trained policy's)."""
    stages = ctx.inputs.pipeline.stages
    sources = {s.from_role for s in stages if s.is_weight_sync}
    trains = [s for s in stages if s.kind == "train"]
    for s in trains:
        if s.role in sources:
            return s.name
    return trains[0].name if trains else None


def _combine(
    stage: Stage, kind: StageKind, terms: dict[str, float], **fields: Any
) -> StageEstimate:
    """A stage estimate whose seconds are the sum of its terms, bound by the largest."""
    kept = {k: v for k, v in terms.items() if v > 0}
    bound = max(kept, key=kept.__getitem__) if kept else "compute"
    return StageEstimate(
        stage=stage.name, kind=kind, seconds=sum(kept.values()), bound=bound,  # type: ignore[arg-type]
        terms=kept, **fields,
    )  # fmt: skip


def _gathered_bytes(ctx: _Ctx, role: Role, est: RoleEstimate) -> float:
    """Bytes one device receives to gather a sharded (FSDP / ZeRO-3) role's weights once: the
    dense part's shard over the data-parallel ranks, the routed experts' (``parallel.ep``)
    over the expert data-parallel ranks only (:func:`_expert_layout`)."""
    b = f.BYTES_PER_ELEMENT[stored_precision(role.precision)]
    spec = ctx.spec(role)
    ep, edp = _expert_layout(ctx, role)
    if est.dp <= 1:
        return 0.0
    experts = f.routed_expert_params(spec) if ep > 1 else 0
    dense = est.params - experts
    return (
        dense / (est.tp * est.pp) * (est.dp - 1) / est.dp
        + experts / (ep * est.pp) * (edp - 1) / max(edp, 1)
    ) * b


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


def estimate_train(ctx: _Ctx, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    """Forward + backward (+ recomputation) over the step's tokens, and the optimizer steps.

    Terms: compute (FLOPs at an efficiency that falls for narrow models and small
    micro-batches), communication (data-parallel gradient reduction and FSDP/ZeRO-3
    gathers not hidden behind compute), latency (pipeline bubbles), memory (the
    optimizer step reading and writing every state, a language-model head's logits),
    overhead (host launches beyond compute, parameter/optimizer offload, a CPU
    optimizer, the per-step framework overhead).
    """
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = _role_head(role.name, ctx.stages_of.get(role.name, []))
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
    trained = trainable / est.params
    sharded = par is not None and (par.fsdp or par.zero >= 3)
    steps = w.mini_batches * w.epochs
    comm = 0.0
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
    comm_s = comm / (_link_gb_per_s(ctx, role) * f.GB)
    exposed_s = _overlap_communication(terms, detail, comm_s, packed=w.packing)
    if exposed_s > 0.1 * terms["compute"] and par is not None and (par.fsdp or par.zero >= 2):
        note = (
            f"pipeline.stages.{stage.name}: {role.name}'s data-parallel traffic ({comm_s:.1f} s:"
            f" {'weights gathered and ' if sharded else ''}gradients reduce-scattered every one"
            f" of its {micro_batches:,} micro-batches per rank) exceeds its compute"
            f" ({terms['compute']:.1f} s); larger micro-batches (workload.micro_batch_tokens)"
            " amortise it, sharding within a node (fewer data-parallel ranks across the"
            " network) shortens it"
        )
        if note not in ctx.warnings:
            ctx.warnings.append(note)
    # Optimizer step: read and write weights, grads and optimizer state once per step; a
    # sharded optimizer (ZeRO-1/2, Megatron's distributed optimizer) updates its rank's
    # 1/dp of the weights from its 1/dp of the gradients (then gathers them, above).
    # (ZeRO-2 holds only its gradient shard already, ZeRO-3 and FSDP every state's.)
    zero = 0 if par is None else (3 if par.fsdp else par.zero)
    own = _shard_fraction(ctx, role, est.params) if 1 <= zero < 3 else 1.0
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
        params_per_device = shard_trainable / (est.dp if sharded or par.zero else 1)
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
    micro_tokens = _micro_batch_tokens_per_rank(w, role, detail, backward=True)
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
    return _combine(stage, "train", terms, flops=flops, bytes=comm, memory_gb=act, detail=detail)


def _scores_sequence(spec: ModelSpec, role: Role, w: Workload, tokens: float) -> float:
    """The row length of the score matrices a pass keeps (0: none, a flash kernel runs):
    the longest sequence in padded rows, the whole row packed (``tokens`` per rank, the
    row split over ``parallel.sp``)."""
    _, mean, longest = _tokens(w)
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
    w: Workload, role: Role, detail: Mapping[str, Any], *, backward: bool
) -> float:
    """Tokens whose activations one rank holds at its largest micro-batch: padded, every
    sequence at the longest; packed with a token budget (verl's dynamic batches, NeMo RL's
    packing), the micro-batches the budget makes of a group's share of an optimizer step,
    as few as it allows with the tokens spread evenly (at least the longest sequence, which
    goes alone if longer than the budget); packed by count, the micro-batch that holds the
    step's longest sequence beside mean ones. Split
    over the sequence / context-parallel ranks, which each hold a slice of every sequence
    (Ulysses, Megatron's context parallel)."""
    size, budget = _micro_batch(w, backward)
    _, mean, longest = _tokens(w)
    if not w.packing:
        tokens = size * longest
    elif budget is not None:
        tokens = max(float(longest), detail["micro_batch_tokens"])
    else:
        tokens = min(size * longest, (size - 1) * mean + longest)
    sp = role.parallel.sp if role.parallel else 1
    return tokens / sp


def estimate_forward(ctx: _Ctx, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    """One forward pass over the step's tokens (log-probs, values, reward scores)."""
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = _role_head(role.name, ctx.stages_of.get(role.name, []))
    terms, detail, micro_batches = _pass_terms(ctx, stage, role, est, backward=False)
    # FSDP / ZeRO-3 gathers the weights for every micro-batch's forward (reshard after
    # forward: verl's and NeMo RL's log-prob loops run micro-batch after micro-batch).
    par = role.parallel
    comm = 0.0
    if par is not None and (par.fsdp or par.zero >= 3) and est.dp > 1:
        comm = _gathered_bytes(ctx, role, est) * micro_batches
    comm_s = comm / (_link_gb_per_s(ctx, role) * f.GB)
    exposed_s = _overlap_communication(terms, detail, comm_s, packed=w.packing)
    detail.update({"comm_s": comm_s, "comm_exposed_s": exposed_s})
    micro_tokens = _micro_batch_tokens_per_rank(w, role, detail, backward=False)
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
    return _combine(stage, "forward", terms, flops=flops, bytes=comm, memory_gb=act, detail=detail)


def _decode_floor(ctx: _Ctx, spec: ModelSpec, role: Role, tp: int, pp: int) -> float:
    """Fixed seconds of one decode step: scheduling and sampling, every layer's small kernels,
    eager launches, all-reduces, and an engine's messages between hosts when it spans them.

    A pipeline-parallel engine keeps pp micro-batches in flight, each through every stage
    once per step: each device runs its stage's layers pp times a step, so the per-layer
    latencies count every layer, as without pp, plus pp hand-offs."""
    eff = ctx.inputs.efficiency
    rollout = role.rollout or Rollout()
    floor = efficiency_value(eff, "decode_step_s")
    # Every layer's small kernels (norms, rotary, cache writes, activations; MoE routing and
    # sorting) take a few microseconds each even replayed from a CUDA graph; a hybrid's block
    # that is a mixer or an MLP alone runs half a layer's.
    floor += efficiency_value(eff, "decode_layer_s") * spec.layer_units
    if spec.is_moe:
        floor += efficiency_value(eff, "decode_moe_layer_s") * spec.moe_layers
    if not rollout.cuda_graphs:
        # Each layer's kernels issued from Python; MoE and MLA layers issue more of them.
        floor += efficiency_value(eff, "eager_layer_s") * f.eager_layers(spec)
    if role.lora is not None:
        # An engine serving adapters runs vLLM's LoRA kernels (a buffer, a shrink and an
        # expand per wrapped linear layer) beside every layer's own small kernels.
        kernels = f.lora_decode_kernels(rollout.vllm_v0) * spec.layer_units
        floor += efficiency_value(eff, "decode_layer_s") / f.DECODE_LAYER_KERNELS * kernels
        if not rollout.cuda_graphs:
            floor += efficiency_value(eff, "eager_layer_s") / f.EAGER_LAYER_OPERATORS * kernels
    group = tp * pp

    def latency(gpus: int) -> float:
        key = "allreduce_inter_node_s" if _spans_nodes(ctx, gpus) else "allreduce_s"
        return efficiency_value(eff, key)

    if tp > 1:  # one per mixer and MLP, within the tp group, whatever the stages span
        floor += spec.sublayers * latency(tp)
    if pp > 1:
        floor += pp * latency(group)
    if group > ctx.inputs.cluster.gpus_per_node:
        floor += efficiency_value(eff, "cross_host_step_s")
    ep = role.parallel.ep if role.parallel else 1
    if spec.is_moe and ep > 1:  # dispatch and combine all-to-all per MoE layer
        # Over the expert-parallel group, which may span more GPUs than one replica's tp x pp.
        floor += 2 * spec.moe_layers * latency(max(group, ep))
    return floor


def _weight_reader(
    spec: ModelSpec,
    precision: str,
    group: int,
    state_bytes: float = 0.0,
    window_bytes: float = 0.0,
) -> Callable[[float], float]:
    """Bytes one device moves per decode step of ``b`` sequences besides their growing KV
    cache (computed once per role): the weights (MoE: the experts the batch touches), each
    sequence's linear-attention state (``state_bytes`` per device), read and written back,
    and its windowed layers' cache (``window_bytes`` per device), read."""
    states = 2.0 * state_bytes + window_bytes
    # An untied embedding is looked up: each sequence's row (decode_weight_bytes).
    row = 0.0 if spec.tied_embeddings else spec.hidden_size * f.BYTES_PER_ELEMENT[precision]
    per_sequence = states + row / group
    if not spec.is_moe:
        dense = (f.decode_weight_bytes(spec, 1, precision) - row) / group
        return lambda b: dense + b * per_sequence
    everything = f.decode_weight_bytes(spec, 1e9, precision) - min(1e9, spec.vocab_size) * row
    one = f.decode_weight_bytes(spec, 1, precision) - row
    touched_one = f.expected_experts_touched(spec, 1)
    per_expert = (everything - one) / max(spec.num_experts - touched_one, 1e-9)
    base = one - touched_one * per_expert

    def read(b: float) -> float:
        touched = f.expected_experts_touched(spec, b) * per_expert
        return (base + touched) / group + b * per_sequence

    return read


NOT_ASYNC_FOR_PARTIAL = (
    "the pipeline is not async with max_staleness >= 1 (it is priced as a drained engine)"
)
"""Why an engine cannot stream across steps (partial rollouts, in-flight weight updates) in a
sync or staleness-0 pipeline."""


def streaming_field(role: Role) -> str | None:
    """The ``rollout`` field by which ``role``'s engine asks to stream across steps
    (``partial_rollout`` or ``in_flight_weight_updates``; they exclude each other), or None."""
    rollout = role.rollout
    if rollout is None:
        return None
    if rollout.partial_rollout:
        return "partial_rollout"
    if rollout.in_flight_weight_updates:
        return "in_flight_weight_updates"
    return None


def partial_rollout_inactive(
    name: str, roles: Mapping[str, Role], pipeline: Pipeline
) -> str | None:
    """Why role ``name``'s engine cannot stream across steps as its ``rollout`` asks
    (``partial_rollout`` or ``in_flight_weight_updates``; None: it does, or the role does not
    ask). As verl honours ``partial_rollout`` only with ``staleness_threshold`` > 0 and NeMo
    RL in-flight updates only in async GRPO: an engine streams across steps only when
    generation may run ahead of training (async, ``max_staleness`` >= 1) on GPUs no trained
    role shares (a colocated engine sleeps while the trainer runs)."""
    role = roles[name]
    if streaming_field(role) is None:
        return None
    if pipeline.staleness < 1:
        return NOT_ASYNC_FOR_PARTIAL
    trained = {s.role for s in pipeline.stages if s.kind == "train" and s.role}
    if name in trained:
        return "the engine's own role trains on its GPUs (it is priced as a drained engine)"
    mine = set(role.devices)
    for other in sorted(trained):
        if other in roles and mine & set(roles[other].devices):
            return (
                f"the engine shares GPUs with {other}, which trains there (it is priced as a"
                " drained engine)"
            )
    return None


def stream_mode(name: str, roles: Mapping[str, Role], pipeline: Pipeline) -> str | None:
    """How role ``name``'s engine goes on across steps where it can: ``partial_rollout`` or
    ``in_flight_weight_updates`` (:func:`streaming_field`), None where it drains each step."""
    if partial_rollout_inactive(name, roles, pipeline) is not None:
        return None
    return streaming_field(roles[name])


def in_flight_turn(
    pipeline: Pipeline, stage: Stage, seconds_of: Callable[[Stage], float | None]
) -> tuple[float, float]:
    """(trainer seconds, sync seconds) of one step as an engine with in-flight weight updates
    sees them: every GPU stage after ``stage`` and before the last weight sync into its role,
    one after another (NeMo RL's trainer runs its log-prob passes and its training in turn;
    its rewards are scored in the collector, beside generation), and that sync. Without a
    sync into the role the engine never receives weights: every later GPU stage, no pause.
    ``seconds_of`` gives a stage's seconds, None for a stage that is not the trainer's
    (a CPU or driver stage): it counts 0."""
    by_name = {s.name: s for s in pipeline.stages}
    later: set[str] = set()
    frontier = [stage.name]
    while frontier:
        name = frontier.pop()
        for s in pipeline.stages:
            if name in s.after and s.name not in later:
                later.add(s.name)
                frontier.append(s.name)
    syncs = [s for s in pipeline.stages if s.is_weight_sync and s.to_role == stage.role]
    syncs = [s for s in syncs if s.name in later]
    if not syncs:
        return sum(seconds_of(by_name[n]) or 0.0 for n in sorted(later)), 0.0
    # The last sync into the role: the one no other sync into it comes after.
    sync = next(s for s in reversed(syncs) if not any(s.name in _before(pipeline, o.name)
                                                      for o in syncs))  # fmt: skip
    between = sorted((later & _before(pipeline, sync.name)) - {stage.name})
    return sum(seconds_of(by_name[n]) or 0.0 for n in between), seconds_of(sync) or 0.0


def _before(pipeline: Pipeline, name: str) -> set[str]:
    """Names of every stage that ``name`` waits for, directly or not."""
    by_name = {s.name: s for s in pipeline.stages}
    before: set[str] = set()
    frontier = [name]
    while frontier:
        for other in by_name[frontier.pop()].after:
            if other not in before:
                before.add(other)
                frontier.append(other)
    return before


@functools.lru_cache(maxsize=256)
def prompt_groups(
    dist: LengthDistribution, prompts: int, samples: int, replicas: int, slots: int
) -> tuple[tuple[PromptGroup, ...], float]:
    """One step's prompt groups as one of ``replicas`` engines sees them, and how many
    sequences each walked one stands for (:func:`decode.simulate_in_flight`).

    NeMo RL sends each response of a group to the next engine in turn, so a replica holds
    ``samples / replicas`` responses of each group (the nearest whole number, at least one:
    with fewer samples than replicas each of its responses stands for a group of its own;
    ``stands_for`` makes up the fraction), and the group frees its place when its longest of
    ``samples`` responses ends. The replica's own responses are the distribution's
    representative lengths, evenly spread; the group's others, elsewhere, a second such set.
    A replica of more than :data:`~decode.IN_FLIGHT_MAX_SEQUENCES` sequences is walked at
    fewer groups, each sequence standing for several (their count rounded so that
    ``slots / stands_for`` comes out near a whole number)."""
    per_replica = math.ceil(prompts * samples / replicas)
    share = samples / replicas
    own = max(1, round(share))
    here = prompts if share >= 1 else per_replica  # groups with a response on this replica
    walked = min(here, max(1, IN_FLIGHT_MAX_SEQUENCES // own))
    if walked < here:
        walked_slots = max(1, round(slots * walked * own / per_replica))
        walked = min(here, max(1, math.ceil(per_replica * walked_slots / (slots * own))))
    mine = dist.lengths(walked * own)
    elsewhere = samples - own
    others = dist.lengths(walked * elsewhere) if elsewhere > 0 else []
    groups = tuple(
        PromptGroup(
            lengths=tuple(mine[i * own : (i + 1) * own]),
            longest=max(
                mine[i * own : (i + 1) * own] + others[i * elsewhere : (i + 1) * elsewhere]
            ),
        )
        for i in range(walked)
    )
    return groups, per_replica / (walked * own)


TURN_STEP = 1.005
"""The trainer's turn and the sync an in-flight loop is simulated with are taken on a
geometric grid of this ratio (within 0.25 %), so that a placement search that meets the same
turn again reuses the loop (:func:`in_flight_grid`)."""


def in_flight_grid(turn: tuple[float, float]) -> tuple[float, float]:
    """``turn`` (trainer seconds, sync seconds) on the :data:`TURN_STEP` grid."""
    return tuple(  # type: ignore[return-value]
        0.0 if v <= 0 else TURN_STEP ** round(math.log(v) / math.log(TURN_STEP)) for v in turn
    )


def _in_flight(ctx: _Ctx, role: Role) -> bool:
    """Whether ``role``'s engine keeps decoding through weight syncs here."""
    mode = stream_mode(role.name, ctx.inputs.roles, ctx.inputs.pipeline)
    return mode == "in_flight_weight_updates"


def estimate_generate(
    ctx: _Ctx,
    stage: Stage,
    role: Role,
    est: RoleEstimate,
    turn: tuple[float, float] = (0.0, 0.0),
    *,
    throughput_bound: bool = False,
) -> StageEstimate:
    """Prefill (compute-bound) plus decode under continuous batching (:mod:`decode`).

    The replica that gets the step's longest response decides when the stage
    ends, unless the engine streams across steps: with ``rollout.partial_rollout``
    its slots stay full and each sync's interrupted sequences are prefilled
    again; with ``rollout.in_flight_weight_updates`` the collector's loop is
    simulated with the trainer's ``turn`` (:func:`in_flight_turn`: its seconds
    and the sync's), and the stage is the engine's decoding per step. Terms:
    compute (prefill, and decode steps bound by FLOPs), memory (decode steps
    bound by reading weights and KV cache), latency (the per-step floor over
    every decode step), overhead (host time per running sequence).

    ``throughput_bound``: an in-flight engine is priced at its steady state instead of
    simulated (every step at full slots, each sequence at the token-weighted mean context):
    what its loop averages at best, whatever the trainer's turn (:func:`generate_bound_at`).
    """
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    eff_in = ctx.inputs.efficiency
    rollout = role.rollout or Rollout()
    factor = _stage_factor(eff_in, stage.name)
    width = _width_factor(ctx, spec)
    eff_prefill = efficiency_value(eff_in, "prefill") * factor * width
    eff_decode = efficiency_value(eff_in, "decode") * factor
    tp, pp = est.tp, est.pp
    group = tp * pp
    replicas = _replicas(ctx, role)
    n = w.generated()
    generated_prompts = w.generated_prompts()
    per_replica = math.ceil(n / replicas)
    peak = ctx.gpu.peak_tflops * 1e12
    bandwidth = ctx.gpu.memory_gb_per_s * 1e9
    prompt = w.prompt_tokens
    dist = _trajectory_lengths(ctx)
    turns = multi_turn(w)
    prefill_flops = (f.forward_flops(spec, prompt.mean) + turns.prefill_flops(spec)) * per_replica
    prefill_matmul = f.token_flops(spec) * (prompt.mean + turns.prefill_tokens)
    prefill_matmul *= per_replica
    prefill_s = (prefill_flops - prefill_matmul * (1 - 1 / _fp8_speedup(ctx, role))) / (
        group * peak * eff_prefill
    )
    # The engine decodes a trajectory's answers only: its observations are prefilled.
    decoded = dist.scaled(w.generated_share())
    # An async pipeline whose generation runs k steps ahead feeds the engine k steps'
    # requests at once (NeMo RL's trajectory collector admits prompts_per_step x
    # max_trajectory_age_steps prompt groups), so continuous batching shares one tail among
    # k steps: decode k steps' sequences together and charge a step its 1/k.
    mode = stream_mode(role.name, ctx.inputs.roles, ctx.inputs.pipeline)
    streams = mode == "partial_rollout"
    in_flight = mode == "in_flight_weight_updates"
    depth = 1 if mode is not None else _steps_held(ctx, role)
    lengths = decoded.lengths(per_replica * depth)
    # The slowest replica holds the step's longest response.
    longest = decoded.longest_of(n * depth)
    if lengths and longest > max(lengths):
        lengths[lengths.index(max(lengths))] = longest
    per_token = f.kv_bytes_per_token(spec, kv_precision(role), tp, pp)
    state = f.linear_state_bytes(spec, stored_precision(role.precision), tp, pp)
    kv_gb = role.states.get("kv_cache", est.states.get("kv_cache", 0.0))
    running_context = prompt.mean + dist.mean_square() / (2 * max(dist.mean, 1.0))
    # A windowed layer's cache and attention stop growing at its window: per running
    # sequence a fixed read (at the mean running context, at most the window), like a
    # linear-attention state.
    window_kv = f.window_kv_bytes(spec, running_context, kv_precision(role), tp, pp)
    window_keys = spec.sliding_window_layers * min(running_context, spec.sliding_window)
    kv_slots = int(kv_gb * f.GB // max(running_context * per_token + state + window_kv, 1.0))
    # What a decoding sequence holds besides its own answers: its prompt, and a trajectory's
    # observations so far (half of them on average over its turns).
    base_context = prompt.mean + turns.observation_context
    slots = max(1, min(rollout.max_num_seqs, kv_slots))
    costs = StepCosts(
        # A pipeline-parallel engine's step passes every stage: each device reads its
        # 1/(tp x pp) of the weights once per micro-batch in flight (pp of them), so a
        # step's weight reads cost W / tp per device, as without pp (KV and FLOPs split).
        weight_bytes=_weight_reader(spec, weight_precision(ctx, role), tp, state, window_kv),
        kv_bytes_per_token=per_token,
        flops_per_token=(f.token_flops(spec) + 2.0 * f.decode_attention_width(spec) * window_keys)
        / group,
        attention_flops_per_context=(
            2.0 * f.decode_attention_width(spec) * spec.full_attention_layers / group
        ),
        bandwidth=bandwidth * eff_decode,
        flop_rate=peak * eff_prefill,
        floor_s=_decode_floor(ctx, spec, role, tp, pp),
        per_sequence_s=efficiency_value(
            eff_in, "decode_sequence_v0_s" if rollout.vllm_v0 else "decode_sequence_s"
        ),
    )
    resumed_s = 0.0
    loop_detail: dict[str, Any] = {}
    held = 0.0  # trajectories an engine that streams holds at once (its steady state)
    if streams:
        # A streaming engine: no tail, but the sequences a weight sync interrupts are prefilled
        # again afterwards (their KV cache was computed with the old weights and freed).
        held = per_replica * _steps_held(ctx, role)
        slots = max(1, min(slots, held))
        dec = stream_decode(per_replica * decoded.mean, running_context, slots, costs)
        resumed_flops = slots * f.forward_flops(spec, running_context)
        resumed_matmul = f.token_flops(spec) * running_context * slots
        resumed_s = (resumed_flops - resumed_matmul * (1 - 1 / _fp8_speedup(ctx, role))) / (
            group * peak * eff_prefill
        )
        prefill_flops += resumed_flops
    elif in_flight and throughput_bound:
        # The loop's own inputs (its walked responses, each standing for ``stands_for``, and
        # its walked slots), so that the bound differs from it by the dynamics alone.
        k = max(1, ctx.inputs.pipeline.staleness)
        held = per_replica * k
        slots = max(1, min(slots, held))
        groups, stands_for = prompt_groups(decoded, generated_prompts,
                                           w.samples_per_prompt, replicas, slots)  # fmt: skip
        walked = [max(1.0, float(x)) for g in groups for x in g.lengths]
        full = max(1, round(slots / stands_for)) * stands_for
        context = base_context + sum(x * x for x in walked) / (2 * sum(walked))
        dec = stream_decode(stands_for * sum(walked), context, full, costs)
    elif in_flight:
        k = max(1, ctx.inputs.pipeline.staleness)
        slots = max(1, min(slots, per_replica * k))
        groups, stands_for = prompt_groups(decoded, generated_prompts,
                                           w.samples_per_prompt, replicas, slots)  # fmt: skip
        loop = simulate_in_flight(
            groups, base_context, slots, k, *in_flight_grid(turn), costs, stands_for
        )
        dec = loop.per_step
        loop_detail = {
            "in_flight_weight_updates": True, "trainer_s": turn[0], "sync_s": turn[1],
            "loop_period_s": loop.period_s, "idle_s": loop.idle_s,
        }  # fmt: skip
    else:
        dec = simulate_decode(lengths, base_context, slots, costs).per_step(depth)
    # Trajectories wait for their environment between turns. A step that waits for its
    # longest trajectory (in-flight updates too: the simulated loop keeps its tail) waits for
    # that one's environment, turn after turn; an engine at its steady state (streaming, or
    # in-flight's throughput bound) hides the waits behind other trajectories' decoding only
    # as far as it holds enough of them (Little's law).
    if held:
        env_wait_s = turns.streamed_wait_s(dec.total_s, per_replica, dec.slots, held)
    else:
        env_wait_s = turns.env_wait_s(longest) / depth
    terms = {
        "compute": prefill_s + resumed_s + dec.compute_s,
        "memory": dec.memory_s,
        "latency": dec.floor_s + env_wait_s,
        "overhead": dec.host_s,
    }
    response_tokens = sum(lengths) / depth
    return _combine(
        stage, "generate", terms,
        flops=(prefill_flops + response_tokens * costs.flops_per_token * group) * replicas,
        bytes=dec.steps * costs.weight_bytes(dec.mean_batch) * group * replicas,
        memory_gb=generate_transient_gb(spec, stored_precision(role.precision), tp, pp),
        detail={
            "replicas": replicas, "tp": tp, "pp": pp, "sequences_per_replica": per_replica,
            "slots": dec.slots, "kv_slots": kv_slots, "mean_batch": round(dec.mean_batch, 2),
            "decode_steps": dec.steps, "longest_response": longest,
            "clip_ratio": round(dist.clip_ratio, 6), "prefill_s": prefill_s,
            "partial_rollout": streams, "resumed_prefill_s": resumed_s,
            "steps_in_flight": depth,
            "decode_s": dec.total_s, "step_floor_s": costs.floor_s,
            "eff_prefill": eff_prefill, "eff_decode": eff_decode, **loop_detail,
            **turns.detail(longest, env_wait_s),
            **({"windowed_layers": spec.sliding_window_layers,
                "attention_layers": spec.attention_layers,
                "sliding_window": spec.sliding_window} if spec.sliding_window_layers else {}),
        },
    )  # fmt: skip


def _full_model_gb(ctx: _Ctx, role: Role) -> float:
    """GB of the whole model as the trainer holds and exports it (bf16 for an fp8 trainer:
    :func:`stored_precision`)."""
    precision = stored_precision(role.precision)
    return f.total_params(ctx.spec(role)) * f.BYTES_PER_ELEMENT[precision] / f.GB


def nodes_network_gb_per_s(cluster: Any, devices: Sequence[int]) -> float:
    """GB/s per device of a collective across nodes over a communicator that holds
    ``devices``: NCCL runs a ring through the NIC of each member GPU of a node, so the bytes
    cross into a node once over its members' NICs and reach them over NVLink; the node with
    the fewest members bounds it, and no GPU receives faster than NVLink (NVIDIA-NeMo/.github
    ``discussions/posts/nemo-rl-async-refit-performance``: 8 x 50 GB/s on a DGX H100)."""
    members = Counter(cluster.node_of(d) for d in devices)
    fewest = min(members.values()) if members else 1
    return min(cluster.device_copy_gb_per_s, fewest * cluster.network_gb_per_s)


def _gather_s(
    ctx: _Ctx,
    role: Role,
    *,
    every_nic: bool = True,
    share: float = 1.0,
    dense_only: bool = False,
) -> tuple[float, float]:
    """(GB, seconds) for one trainer device to gather the whole model from its shards.

    What the device lacks arrives over NVLink while the ranks that hold distinct
    shards (tensor x pipeline x expert parallel, and data parallel under
    ZeRO-3/FSDP, laid out on consecutive devices) share an NVLink fabric. Across
    nodes the gather's collectives hold every trainer rank, so the node's NICs
    share the bytes (:func:`nodes_network_gb_per_s`) and the export reaches
    ``refit_gather`` of that (measured on NeMo RL's refit); ``every_nic`` false
    (verl's syncs to a rollout on other GPUs) keeps the one NIC per device their
    published times were fitted with. ``share``: the part of the model that moves (a LoRA
    trainer's adapters). ``dense_only``: ``share`` of the model is weights outside the routed
    experts (a resharded sync's rest), split over tensor x pipeline ranks (and data parallel
    under ZeRO-3/FSDP), never over expert parallel ones.
    """
    tp, pp, dp = ctx.layout(role)
    par = role.parallel
    zero = 3 if par is not None and par.fsdp else (par.zero if par is not None else 0)
    if dense_only:
        shards = tp * pp * (dp if zero >= 3 else 1)
        missing_gb = _full_model_gb(ctx, role) * share * (1.0 - 1.0 / shards)
    else:
        own_gb = role.states.get("weights", 0.0) * (
            f.BYTES_PER_ELEMENT[stored_precision(role.precision)]
            / weight_bytes_per_param(ctx, role)
        )
        missing_gb = max(0.0, _full_model_gb(ctx, role) - own_gb) * share
    # Expert-parallel ranks are carved out of the data-parallel ones (_expert_layout).
    ep = par.ep if par is not None else 1
    group = min(tp * pp * (dp if zero >= 3 else ep), ctx.devices(role))
    c = ctx.inputs.cluster
    if not _spans_nodes(ctx, group):
        speed = c.device_copy_gb_per_s
    elif every_nic:
        devices = role.devices or tuple(range(ctx.devices(role)))
        light = nodes_network_gb_per_s(c, devices)
        speed = light * efficiency_value(ctx.inputs.efficiency, "refit_gather")
    else:
        speed = c.network_gb_per_s
    return missing_gb, missing_gb / speed


def estimate_weight_sync(ctx: _Ctx, stage: Stage, roles: Mapping[str, Role]) -> StageEstimate:
    """Move the trained weights into the inference engine.

    verl and NeMo RL hand the engine full Hugging Face tensors: the trainer
    gathers each one from its shards, every engine rank receives it whole and
    keeps its slice. So the trainer side gathers the whole model (``gather``,
    :func:`_gather_s`) whatever the engine's layout.

    Shared devices (colocated): every device gathers the whole model and hands it
    to the engine beside it; the engine loads its weights at ``reshard_gb_s``, and
    ``load_tensor_s`` for each checkpoint tensor (:func:`formulas.param_tensors`), and
    is woken and put back to sleep (``engine_switch_s``) every step, a level-1 sleep
    also copying its weights to host memory and back (:func:`_sleep_copy_s`).

    Disjoint devices: every engine device receives the whole model (a broadcast,
    over the network when the two roles span NVLink fabrics). An
    ``overlapped`` sync (NeMo RL's refit) gathers one bucket while broadcasting
    the last (the slower move bounds it), both over the NICs of the nodes' member
    GPUs (:func:`nodes_network_gb_per_s`; the gather at ``refit_gather`` of it); a
    ``bucketed`` one (verl's checkpoint engine) does both in turn at one NIC per
    device, a ``bucketed_overlapped`` one overlaps them. The engine loads each checkpoint
    tensor (``load_tensor_s``: name mapping, its weight loader's copy into the fused
    layout): after its bucket arrives on a ``bucketed`` sync, beside the next bucket's
    moves on an overlapped one (the slowest of the three bounds it). A ``per_tensor`` one
    pays ``sync_tensor_s`` for each tensor instead (its collectives' latency and the load).
    A ``resharded`` one (NeMo RL's ``nccl_reshard``) moves the MLP and expert projections
    shard to shard first (:func:`_resharded`), then the rest as an overlapped one.
    """
    inputs = ctx.inputs
    src, dst = roles.get(stage.from_role or ""), roles.get(stage.to_role or "")
    held_gb = dst.states.get("weights", 0.0) if dst is not None else 0.0
    same = src is not None and dst is not None and sorted(src.devices) == sorted(dst.devices)
    shared = src is not None and dst is not None and bool(set(src.devices) & set(dst.devices))
    share = adapter_share(ctx, src, dst, shared)
    # The engine holds the base weights and the adapters: of them, the adapters move.
    gb = held_gb * share / (1.0 + share) if share < 1.0 else held_gb
    speed = inputs.cluster.device_copy_gb_per_s if same else inputs.cluster.network_gb_per_s
    terms = {"communication": gb / speed}
    detail: dict[str, Any] = {"gb_per_device": gb, "gb_per_s": speed}
    eff = inputs.efficiency
    estimable = bool(src is not None and dst is not None and src.devices and dst.devices)
    if shared:  # the engine sleeps while the trainer runs on its GPUs
        assert dst is not None and src is not None
        sleep_copy_s = _sleep_copy_s(ctx, dst, held_gb)
        tensors = _sync_tensors(ctx, src, share) if estimable else 0
        load_s = tensors * efficiency_value(eff, "load_tensor_s")
        terms["overhead"] = (
            gb / efficiency_value(eff, "reshard_gb_s")
            + load_s
            + efficiency_value(eff, "engine_switch_s")
            + sleep_copy_s
        )
        detail["path"] = "device copy" if same else "network"
        detail["colocated"] = True
        detail["sleep_level"] = (dst.rollout or Rollout()).sleep_level
        detail["sleep_copy_s"] = sleep_copy_s
        detail.update({"tensors": tensors, "load_s": load_s})
        if estimable:
            gather_gb, gather_s = _gather_s(ctx, src, share=share)
            terms["communication"] += gather_s
            detail.update({"gather_gb": gather_gb, "gather_s": gather_s})
    elif estimable:
        full_gb = _full_model_gb(ctx, src) * share
        c = inputs.cluster
        fabrics = {c.fabric_of(d) for d in (*src.devices, *dst.devices)}
        method = (dst.rollout or Rollout()).weight_sync
        # NeMo RL's packed refit broadcasts over a communicator of every trainer and engine
        # rank (so every member GPU's NIC carries it); verl's syncs keep the one NIC per
        # device their published times were fitted with.
        every_nic = method in ("overlapped", "resharded")
        members = (*src.devices, *dst.devices)
        network = nodes_network_gb_per_s(c, members) if every_nic else c.network_gb_per_s
        broadcast_speed = network if len(fabrics) > 1 else c.device_copy_gb_per_s
        resharded = _resharded(ctx, src, dst, share, full_gb) if method == "resharded" else None
        # What goes as whole tensors: everything, or what a shard-to-shard refit leaves.
        whole = 1.0 - (resharded["share"] if resharded else 0.0)
        broadcast_s = full_gb * whole / broadcast_speed
        gather_gb, gather_s = _gather_s(
            ctx, src, every_nic=every_nic, share=share * whole, dense_only=bool(resharded)
        )
        tensors = _sync_tensors(ctx, src, share)
        if resharded:
            tensors -= f.projection_checkpoint_tensors(ctx.spec(src))
        load_s = tensors * efficiency_value(eff, "load_tensor_s")
        if method in ("overlapped", "bucketed_overlapped", "resharded"):
            moves_s = max(broadcast_s, gather_s)
            terms = {"communication": moves_s}
            if load_s > moves_s:  # the engine's loads outlast the moves they overlap
                terms["overhead"] = load_s - moves_s
                detail["load_bound"] = True
            if resharded:  # the slices go first, then the rest (nccl_reshard_refit.md)
                terms["communication"] += resharded["seconds"]
                terms["overhead"] = terms.get("overhead", 0.0) + resharded["transfers_s"]
                detail["resharded"] = resharded
                # The loads bound only the rest's moves; the sync is bound by its largest term.
                detail.pop("load_bound", None)
        elif method == "per_tensor":
            load_s = tensors * efficiency_value(eff, "sync_tensor_s")
            terms = {"communication": broadcast_s + gather_s, "overhead": load_s}
        else:
            terms = {"communication": broadcast_s + gather_s, "overhead": load_s}
        detail.update({
            "path": "broadcast", "method": method, "full_model_gb": full_gb, "tensors": tensors,
            "broadcast_s": broadcast_s, "gather_gb": gather_gb, "gather_s": gather_s,
            "gb_per_s": broadcast_speed, "load_s": load_s,
        })  # fmt: skip
    else:
        detail["path"] = "device copy" if same else "network"
    if share < 1.0:
        detail["adapters_only"] = True
    if stage.seconds is not None:
        return StageEstimate(
            stage=stage.name, kind="weight_sync", seconds=float(stage.seconds), bytes=gb * f.GB,
            bound="given", terms={"given": float(stage.seconds)}, detail=detail,
        )  # fmt: skip
    # Bytes one engine device receives: the whole model on a broadcast (a resharded one: its
    # slice of the projections and the rest whole), its share otherwise.
    received = detail.get("full_model_gb", gb) * f.GB
    if "resharded" in detail:
        r = detail["resharded"]
        received = (detail["full_model_gb"] - r["gb"] + r["received_gb"]) * f.GB
    return StageEstimate(
        stage=stage.name, kind="weight_sync", seconds=sum(terms.values()), bytes=received,
        bound="overhead" if detail.get("load_bound") else max(terms, key=terms.__getitem__),
        terms=terms, detail=detail,
    )  # fmt: skip


def _resharded(
    ctx: _Ctx, src: Role, dst: Role, share: float, full_gb: float
) -> dict[str, Any] | None:
    """The shard-to-shard part of a ``resharded`` sync (NeMo RL's ``nccl_reshard`` refit):
    the dense MLPs' and routed experts' projections (:func:`formulas.projection_params`).

    NeMo RL's transfer (``nemo_rl/weight_sync/xferdtensor_python.py``, what runs without
    nccl4py's M2N reshard) moves each engine slice once: its stripes into the members of the
    replica group that holds it (the engine replicas' same-rank devices), then an all-gather
    among them. So an engine device's slice, the projections over the engine's tensor x
    pipeline ranks (vLLM splits experts over them too), arrives in two phases: its stripe,
    while the trainer's sending devices (at most :data:`formulas.RESHARD_STREAMS` pipeline
    stages' at a time) share out the projections once, the slower of the two bounding it;
    then the other replicas' stripes. Each moves over one NIC per device across NVLink
    fabrics, else over NVLink; each projection is one transfer (``sync_tensor_s``). None
    for adapters only (LoRA), which go whole.
    """
    if share < 1.0:
        return None
    spec = ctx.spec(src)
    projection = f.projection_params(spec) / f.total_params(spec)
    gb = full_gb * projection
    tp, pp, replicas = ctx.layout(dst)
    slice_gb = gb / (tp * pp)
    _, src_pp, _ = ctx.layout(src)
    senders = len(src.devices) * min(1.0, f.RESHARD_STREAMS / src_pp)
    sent_gb = gb / max(1.0, senders)
    c = ctx.inputs.cluster
    fabrics = {c.fabric_of(d) for d in (*src.devices, *dst.devices)}
    speed = c.network_gb_per_s if len(fabrics) > 1 else c.device_copy_gb_per_s
    receive_s = max(slice_gb / replicas, sent_gb) / speed
    across = len({c.fabric_of(d) for d in dst.devices}) > 1
    gather_speed = c.network_gb_per_s if across else c.device_copy_gb_per_s
    gather_s = slice_gb * (replicas - 1) / replicas / gather_speed
    transfers = f.projection_tensors(spec)
    return {
        "share": projection, "gb": gb, "received_gb": slice_gb, "sent_gb": sent_gb,
        "senders": senders, "replicas": replicas, "gb_per_s": speed,
        "receive_s": receive_s, "replica_gather_s": gather_s, "seconds": receive_s + gather_s,
        "transfers": transfers,
        "transfers_s": transfers * efficiency_value(ctx.inputs.efficiency, "sync_tensor_s"),
    }  # fmt: skip


def _sync_tensors(ctx: _Ctx, src: Role, share: float) -> int:
    """Checkpoint tensors a weight sync hands the engine: the LoRA adapters' when only they
    move (``share`` < 1), else every tensor of the trainer's checkpoint."""
    spec = ctx.spec(src)
    if share < 1.0 and src.lora is not None:
        return f.lora_tensors(spec, src.lora.targets)
    return f.param_tensors(spec)


def adapter_share(ctx: _Ctx, src: Role | None, dst: Role | None, shared: bool) -> float:
    """What a weight sync moves, as a share of the trainer's checkpoint: its LoRA adapters'
    weights over the model's when the trainer trains adapters and the engine applies them at
    run time (verl's FSDP LoRA and ROLL's LoRA roles), else 1: all of it (merged weights). A
    colocated engine that drops its weights while it sleeps (sleep level 2) needs its base
    weights back every step: all of it (verl forces sleep level 1 for adapter-only syncs for
    that reason)."""
    if src is None or dst is None or src.lora is None or dst.lora is None:
        return 1.0
    if shared and (dst.rollout or Rollout()).sleep_level == 2:
        return 1.0
    return lora_params(ctx, src) / f.total_params(ctx.spec(src))


def _sleep_copy_s(ctx: _Ctx, engine: Role, gb: float) -> float:
    """Seconds a level-1 sleep adds each step: the engine's ``gb`` of weights per device
    copied to host memory when it sleeps and back when it wakes (vLLM sleep mode level 1),
    each way over the host link (``cluster.host_gb_per_s``, which ``host_copy`` fills). Level 2
    drops them: nothing to copy."""
    if (engine.rollout or Rollout()).sleep_level != 1:
        return 0.0
    return 2.0 * gb / ctx.inputs.cluster.host_gb_per_s


def streaming_flips(config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]) -> bool:
    """Whether a partial-rollout engine's generation streams on ``devices`` (role -> devices)
    but not on the config's own placement, or the other way round: a colocated candidate of a
    split config, or a split one of a colocated config, is then priced again
    (:func:`generate_seconds_at`) rather than scaled."""
    role = config.roles.get(stage.role or "")
    if role is None or streaming_field(role) is None:
        return False
    placed = {
        n: r.with_devices(tuple(devices[n])) if n in devices else r for n, r in config.roles.items()
    }
    here = partial_rollout_inactive(role.name, placed, config.pipeline) is None
    return here != (partial_rollout_inactive(role.name, config.roles, config.pipeline) is None)


def trainer_seconds(config: Any, stage: Stage) -> float | None:
    """A stage's seconds as :func:`in_flight_turn` counts them: a GPU stage's or a weight
    sync's, None for a CPU or driver stage."""
    role = config.roles.get(stage.role or "")
    if stage.is_weight_sync or (role is not None and role.is_gpu):
        return stage.seconds
    return None


def in_flight_at(config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]) -> bool:
    """Whether generation ``stage``'s engine decodes through weight syncs (in-flight weight
    updates) with the roles on ``devices`` (role -> devices)."""
    role = config.roles.get(stage.role or "")
    if role is None or streaming_field(role) != "in_flight_weight_updates":
        return False
    placed = {
        n: r.with_devices(tuple(devices[n])) if n in devices else r for n, r in config.roles.items()
    }
    return stream_mode(role.name, placed, config.pipeline) == "in_flight_weight_updates"


def generate_seconds_at(
    config: Any,
    stage: Stage,
    devices: Mapping[str, Sequence[int]],
    turn: tuple[float, float] | None = None,
    *,
    throughput_bound: bool = False,
) -> float | None:
    """A generation stage's estimated seconds with the roles on ``devices`` (role -> devices);
    None when it cannot be estimated. ``turn``: the trainer's turn an engine with in-flight
    weight updates sees (:func:`in_flight_turn`; default: as the config's seconds give it).
    ``throughput_bound``: such an engine's steady state instead of its loop
    (:func:`generate_bound_at`)."""
    roles = {
        n: r.with_devices(tuple(devices[n])) if n in devices else r for n, r in config.roles.items()
    }
    name = stage.role or ""
    if name not in roles:
        return None
    if config.is_estimated(f"roles.{name}.states"):
        roles[name] = roles[name].model_copy(update={"states": {}})
    source = Path(config.source).resolve().parent if config.source else None
    inputs = Inputs(
        cluster=config.cluster, roles=roles, pipeline=config.pipeline, model=config.model,
        workload=config.workload, efficiency=config.efficiency, file=config.source,
        base_dir=source,
    )  # fmt: skip
    if missing_inputs(inputs):
        return None
    try:
        ctx = _Ctx(inputs)
        est = role_states(ctx, roles[name])
        role = roles[name].model_copy(update={"states": dict(roles[name].states or est.states)})
        if turn is None and not throughput_bound:  # as the config's seconds give it
            turn = in_flight_turn(config.pipeline, stage, lambda s: trainer_seconds(config, s))
        return estimate_generate(
            ctx, stage, role, est, turn or (0.0, 0.0), throughput_bound=throughput_bound
        ).seconds
    except ConfigError:
        return None


def generate_bound_at(
    config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]
) -> float | None:
    """What an in-flight engine's generation costs a step at least, on ``devices``, whatever
    the trainer's turn: its prefill plus one step's tokens decoded at full slots, each running
    sequence at the token-weighted mean context (a sequence of ``L`` tokens holds on average
    its prompt plus ``E[L^2] / 2E[L]`` while it decodes). The loop
    (:func:`decode.simulate_in_flight`) runs fewer sequences while it drains, and a step of
    fewer costs each token more (the weights and the floor are shared by fewer), so it
    averages no less: the bound takes the loop's own walked responses and slots, so the two
    differ by the dynamics and by the loop's measuring window alone, which
    :data:`IN_FLIGHT_BOUND_SLACK` covers. A placement search ranks and prunes candidates
    with it: milliseconds where the loop takes a simulation per trainer turn. None where it
    cannot be estimated."""
    seconds = generate_seconds_at(config, stage, devices, throughput_bound=True)
    return None if seconds is None else seconds * (1.0 - IN_FLIGHT_BOUND_SLACK)


IN_FLIGHT_BOUND_SLACK = 0.01
"""Share :func:`generate_bound_at` takes off the steady state: the loop averages a window of
whole steps, whose tokens may sit a little earlier in their responses (less KV cache) than
the steady state's. A review's scratch scripts (2026-11-25) found the steady state at most
0.062 % above the loop over about 9,000 loops: the published NeMo RL configs' engines at
several sizes and trainer turns, and random workloads with k from 1 to 8."""


def weight_sync_seconds_at(
    config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]
) -> float | None:
    """A weight sync's estimated seconds with its two roles on ``devices`` (role -> devices).

    The loader fills an estimable sync's ``seconds`` for the config's own
    placement; a plan on other devices (``plan --auto``, a what-if alternative)
    prices the sync again here: colocated or split, over NVLink or the network,
    with the trainer sharded over its new device count. Only the two roles'
    states are estimated, so this is cheap. None when it cannot be estimated.
    """
    names = [n for n in (stage.from_role, stage.to_role) if n]
    roles = dict(config.roles)
    for name in names:
        if name not in roles or name not in devices:
            return None
        role = roles[name]
        if config.is_estimated(f"roles.{name}.states"):
            role = role.model_copy(update={"states": {}})
        roles[name] = role.with_devices(tuple(devices[name]))
    source = Path(config.source).resolve().parent if config.source else None
    inputs = Inputs(
        cluster=config.cluster, roles=roles, pipeline=config.pipeline, model=config.model,
        workload=config.workload, efficiency=config.efficiency, file=config.source,
        base_dir=source,
    )  # fmt: skip
    if missing_inputs(inputs):
        return None
    try:
        ctx = _Ctx(inputs)
        effective = dict(roles)
        for name in names:
            role = roles[name]
            if role.is_gpu and name in ctx.stages_of:
                states = role.states or role_states(ctx, role).states
                effective[name] = role.model_copy(update={"states": dict(states)})
        return estimate_weight_sync(
            ctx, stage.model_copy(update={"seconds": None}), effective
        ).seconds
    except ConfigError:
        return None


def estimate(inputs: Inputs) -> Estimate:
    """Estimate every stage and every GPU role of a config.

    Roles with given ``states`` keep them (the KV cache a given ``kv_cache``
    allows caps generation's batch); stages with given ``seconds`` are still
    estimated (for ``rlplex estimate`` to compare), the config keeps its own.

    Raises:
        ConfigError: an input is missing or wrong (model, workload, cluster.gpu,
            parallel sizes), or a state cannot fit even alone on a GPU.
    """
    missing = missing_inputs(inputs)
    if missing:
        raise ConfigError(
            "cannot estimate: the config needs " + ", ".join(missing)
            + " (see docs/cost-model.md)",
            field=missing[0],
            file=inputs.file,
        )  # fmt: skip
    ctx = _Ctx(inputs)
    roles: dict[str, RoleEstimate] = {}
    for name, role in inputs.roles.items():
        if role.is_gpu and name in ctx.stages_of:
            roles[name] = role_states(ctx, role)
    # Estimated states stand in for missing ones when sizing the weight sync: a role that
    # gives some states (its KV cache) keeps the estimates of the others (its weights).
    effective = {
        n: r.model_copy(update={"states": {**roles[n].states, **r.states}}) if n in roles else r
        for n, r in inputs.roles.items()
    }
    stages: dict[str, StageEstimate] = {}
    for stage in inputs.pipeline.stages:
        role = effective.get(stage.role or "")
        kind = stage_kind(stage, role)
        if kind == "weight_sync":
            stages[stage.name] = estimate_weight_sync(ctx, stage, effective)
            continue
        if kind == "cpu" and is_rule_reward(stage, role):
            # Every rule reward scores the step's responses on its own CPU workers (ROLL's
            # reward clusters, one per domain, run beside one another).
            stages[stage.name] = estimate_reward_cpu(ctx, stage)
            continue
        if kind == "cpu" or role is None:
            stages[stage.name] = StageEstimate(
                stage=stage.name, kind="cpu", seconds=stage.seconds, bound="given",
                detail={"why": "CPU and driver stages (and unknown GPU stage names) are not"
                        " estimated: give seconds"},
            )  # fmt: skip
            continue
        if kind == "generate" and _in_flight(ctx, role):
            continue  # priced below, with the trainer's turn
        fn = {"train": estimate_train, "forward": estimate_forward, "generate": estimate_generate}
        stages[stage.name] = fn[kind](ctx, stage, role, roles[role.name])

    def used(s: Stage) -> float | None:
        """What the plan will take of a trainer's stage: the given seconds, else the
        estimate; None for a CPU or driver stage (not the trainer's)."""
        if s.name in stages and stages[s.name].kind == "cpu":
            return None
        if s.seconds is not None or s.name not in stages:
            return s.seconds
        return stages[s.name].seconds

    for stage in inputs.pipeline.stages:
        role = effective.get(stage.role or "")
        if stage.name in stages or role is None:
            continue
        turn = in_flight_turn(inputs.pipeline, stage, used)
        stages[stage.name] = estimate_generate(ctx, stage, role, roles[role.name], turn)
    stages = {s.name: stages[s.name] for s in inputs.pipeline.stages}
    for name, est in roles.items():
        transient = max(
            (stages[s.name].memory_gb for s in ctx.stages_of.get(name, []) if s.name in stages),
            default=0.0,
        )
        roles[name] = est.model_copy(update={"activations_gb": transient})
    _check_fits(inputs, roles)
    return Estimate(
        stages=stages, roles=roles, assumptions=assumptions(ctx, roles, stages),
        warnings=tuple(ctx.warnings),
    )  # fmt: skip


def _check_fits(inputs: Inputs, roles: Mapping[str, RoleEstimate]) -> None:
    """A role whose states alone exceed a GPU cannot run even with the rest offloaded."""
    cap = inputs.cluster.gpu_memory_gb
    for name, est in roles.items():
        given = inputs.roles[name].states
        states = given or est.states
        for state, gb in states.items():
            if gb > cap:
                raise ConfigError(
                    f"the estimated {state} alone take {gb:.1f} GB per GPU (model"
                    f" {est.model}, {est.params / 1e9:.2f}B params, tp={est.tp} pp={est.pp}"
                    f" dp={est.dp}) but a GPU has {cap:g} GB, so it cannot fit even with"
                    f" everything else offloaded; {state_remedy(inputs.roles[name], state)}",
                    field=f"roles.{name}.states.{state}",
                    value=round(gb, 2),
                    file=inputs.file,
                )


ACTIVATION_KNOBS = (
    "parallel.recompute, workload.micro_batch_size or its token budget workload.micro_batch_tokens"
)
"""What lowers a pass's activations, for the remedies that name them."""


def activation_remedy(role: Role) -> str:
    """What would make a stage's activations fit on its role's GPUs (recomputation only
    where it is off). A micro-batch holds at least its longest sequence, so a budget alone
    cannot shrink a long one: splitting each sequence (``sp``) or the model (``tp``) can."""
    recompute = role.parallel is not None and role.parallel.recompute
    first = "" if recompute else f"turn on roles.{role.name}.parallel.recompute, "
    return (
        f"{first}lower workload.micro_batch_size (or its token budget,"
        " workload.micro_batch_tokens), split each sequence over sequence-parallel ranks"
        f" (roles.{role.name}.parallel.sp), or split the model (tp)"
    )


def state_remedy(role: Role, state: str, factor: float | None = None) -> str:
    """What would make a role's ``state`` fit on its GPUs: sharding it where it is not, else
    more GPUs; LoRA for a trained role's gradients or optimizer state. ``factor``: how many
    times too large it is, when known (said as how much further to split)."""
    par = role.parallel
    sharded = {"weights": 3, "grads": 2, "optimizer": 1}.get(state)
    by = f" {factor:.1f}x further" if factor is not None else ""
    if sharded is not None and not (par and (par.fsdp or par.zero >= sharded)):
        text = (
            f"shard it over data-parallel ranks (roles.{role.name}.parallel: zero: {sharded}"
            f" or fsdp: true), or split the model (tp, pp){by}"
        )
    elif factor is not None:
        text = (
            f"spread it over {factor:.1f}x the GPUs (roles.{role.name}.devices), or split the"
            " model further (parallel: tp, pp)"
        )
    else:
        text = (
            f"give roles.{role.name} more GPUs (its {state} is split over all of them),"
            " or split the model further (parallel: tp, pp)"
        )
    if state in ("grads", "optimizer") and role.lora is None:
        text += (
            f", or train LoRA adapters instead (roles.{role.name}.lora: {{rank: 32}}: {state}"
            " for the adapters only)"
        )
    return text


def assumptions(
    ctx: _Ctx,
    roles: Mapping[str, RoleEstimate],
    stages: Mapping[str, StageEstimate] | None = None,
) -> dict[str, Any]:
    """Every input and default the estimate used, for ``rlplex estimate`` to print."""
    inputs = ctx.inputs
    w = inputs.workload
    eff = {key: efficiency_value(inputs.efficiency, key) for key in efficiency_defaults()}
    if inputs.efficiency is not None and inputs.efficiency.stages:
        eff["stages"] = dict(inputs.efficiency.stages)
    return {
        "gpu": {
            "preset": ctx.gpu.key,
            "name": ctx.gpu.name,
            "peak_tflops": ctx.gpu.peak_tflops,
            "memory_gb": inputs.cluster.gpu_memory_gb,
            "memory_gb_per_s": ctx.gpu.memory_gb_per_s,
        },
        "workload": w.model_dump() if w is not None else None,
        "models": {
            name: {
                "model": est.model,
                "params_b": round(est.params / 1e9, 4),
                "tp": est.tp,
                "pp": est.pp,
                "dp": est.dp,
                "precision": inputs.roles[name].precision,
                "optimizer": inputs.roles[name].optimizer
                if "optimizer" in {**est.states, **est.host_states}
                else None,
                "optimizer_step": optimizer_kernel(inputs.roles[name])
                if "optimizer" in est.states and not _cpu_optimizer(inputs.roles[name])
                else None,
                "sharding": _sharding(inputs.roles[name]),
                "recompute": bool(
                    inputs.roles[name].parallel and inputs.roles[name].parallel.recompute
                ),
                "parallel": (
                    inputs.roles[name].parallel.model_dump()
                    if inputs.roles[name].parallel
                    else None
                ),
                "lora": _lora_assumption(ctx, inputs.roles[name], est),
                "linear_attention": _linear_assumption(ctx, inputs.roles[name], est),
                "attention_scores": _scores_assumption(ctx, name, stages),
            }
            for name, est in roles.items()
        },
        "efficiency": eff,
        "dispatch_s": inputs.cluster.dispatch_s,
        "prefill_chunk_tokens": PREFILL_CHUNK_TOKENS,
        "rollout": {
            name: {
                **(inputs.roles[name].rollout or Rollout()).model_dump(),
                # what the estimate used: ignored where the engine cannot stream
                "partial_rollout": stream_mode(name, inputs.roles, inputs.pipeline)
                == "partial_rollout",
                "in_flight_weight_updates": stream_mode(name, inputs.roles, inputs.pipeline)
                == "in_flight_weight_updates",
                # an eager step's host work, the model's layers counted in dense layers
                "layers": ctx.spec(inputs.roles[name]).num_layers,
                "eager_layers": f.eager_layers(ctx.spec(inputs.roles[name])),
                # vLLM's LoRA kernels per layer and decode step, when it serves adapters
                "lora_kernels_per_layer": (
                    f.lora_decode_kernels((inputs.roles[name].rollout or Rollout()).vllm_v0)
                    if inputs.roles[name].lora is not None
                    else 0
                ),
            }
            for name, est in roles.items()
            if "kv_cache" in est.states
        },
        "response_length": _length_assumption(ctx) if w is not None else None,
        "weight_syncs": {
            name: _sync_assumption(ctx.inputs.pipeline.stage(name), est)
            for name, est in (stages or {}).items()
            if est.kind == "weight_sync" and est.terms and "given" not in est.terms
        },
        "stragglers": {
            name: round(est.detail["straggler"], 4)
            for name, est in (stages or {}).items()
            if est.detail.get("straggler", 1.0) > 1.005
        },
    }


def _scores_assumption(
    ctx: _Ctx, name: str, stages: Mapping[str, StageEstimate] | None
) -> dict[str, Any] | None:
    """Score matrices a role's passes keep (fp32 attention without a flash kernel): GB per
    device of one layer's for its largest micro-batch; None where a flash kernel runs."""
    per_layer = [
        est.detail["scores_gb_per_layer"]
        for stage, est in (stages or {}).items()
        if "scores_gb_per_layer" in est.detail and ctx.inputs.pipeline.stage(stage).role == name
    ]
    if not per_layer:
        return None
    role = ctx.inputs.roles[name]
    return {
        "why": "fp32, no flash kernel: "
        + (
            "grouped KV heads and no mask, PyTorch's math path"
            if layer_kernels(role) == "eager"
            else "Transformer Engine's unfused attention"
        ),
        "gb_per_layer": round(max(per_layer), 4),
        "layers": ctx.spec(role).attention_layers,
    }


def _linear_assumption(ctx: _Ctx, role: Role, est: RoleEstimate) -> dict[str, Any] | None:
    """A hybrid model's linear-attention layers and, on an engine, each sequence's state per
    device (what takes the place of their KV cache); None for a plain transformer."""
    spec = ctx.spec(role)
    if not spec.linear_attention_layers:
        return None
    return {
        "layers": spec.linear_attention_layers,
        "of": spec.num_layers,
        "mixer": "Mamba-2" if spec.linear_mixer == "mamba2" else "linear attention",
        # A hybrid whose layers are single blocks (Nemotron-H): what the others are.
        **(
            {"blocks": {"attention": spec.attention_layers,
                        "moe" if spec.is_moe else "mlp": spec.mlp_layers}}
            if spec.mixer_only_layers or spec.mlp_only_layers
            else {}
        ),
        "state_mb_per_sequence": (
            round(f.linear_state_bytes(spec, stored_precision(role.precision), est.tp, est.pp)
                  / 1e6, 3)
            if "kv_cache" in est.states
            else None
        ),
    }  # fmt: skip


def _lora_assumption(ctx: _Ctx, role: Role, est: RoleEstimate) -> dict[str, Any] | None:
    """A LoRA role's adapters: rank, projections, and their weights against the model's."""
    if role.lora is None:
        return None
    adapters = lora_params(ctx, role)
    return {
        "rank": role.lora.rank,
        "targets": list(role.lora.targets),
        "adapter_params": adapters,
        "share": adapters / est.params,
    }


def _sync_assumption(stage: Stage, est: StageEstimate) -> dict[str, Any]:
    """How a weight sync was priced: its path, the GB each move carries, the tensors."""
    d = est.detail
    keys = ("path", "colocated", "method", "full_model_gb", "gather_gb", "gather_s",
            "gb_per_device", "gb_per_s", "tensors", "load_s", "sleep_level", "sleep_copy_s",
            "adapters_only", "resharded")  # fmt: skip
    return {"from": stage.from_role, "to": stage.to_role, **{k: d[k] for k in keys if k in d}}


def _length_assumption(ctx: _Ctx) -> dict[str, Any]:
    dist = _trajectory_lengths(ctx)
    w = ctx.inputs.workload
    turns = w.turns.model_dump() if w is not None and w.turns is not None else None
    return {
        "mean": dist.mean,
        "max": dist.cap,
        "clip_ratio": round(dist.clip_ratio, 6),
        "clip_ratio_given": dist.given_clip,
        "shape": "gamma(2) body, truncated at max (docs/cost-model.md)",
        **({"turns": turns} if turns else {}),
    }


def _sharding(role: Role) -> str:
    par = role.parallel
    if par is None:
        return "none (every data-parallel rank holds full states)"
    if par.fsdp:
        return "fsdp (weights, grads, optimizer over dp)"
    return {0: "none", 1: "zero-1 (optimizer)", 2: "zero-2 (optimizer, grads)",
            3: "zero-3 (weights, grads, optimizer)"}[par.zero]  # fmt: skip


def estimate_config(config: Any) -> Estimate:
    """:func:`estimate` for a loaded :class:`~rlplex.config.Config`.

    Raises:
        ConfigError: the config lacks ``model``, ``workload`` or ``cluster.gpu``
            (naming the first missing one), or an input is wrong.
    """
    source = Path(config.source).resolve().parent if config.source else None
    # States the loader filled from an earlier estimate are not given: estimate them afresh.
    roles = {
        n: r.model_copy(update={"states": {}}) if config.is_estimated(f"roles.{n}.states") else r
        for n, r in config.roles.items()
    }
    # So are the weight syncs' seconds it filled (a colocated sync's resharding).
    stages = tuple(
        s.model_copy(update={"seconds": None})
        if s.is_weight_sync and config.is_estimated(f"pipeline.stages.{s.name}.seconds")
        else s
        for s in config.pipeline.stages
    )
    pipeline = config.pipeline.model_copy(update={"stages": stages})
    return estimate(
        Inputs(cluster=config.cluster, roles=roles, pipeline=pipeline,
               model=config.model, workload=config.workload, efficiency=config.efficiency,
               file=config.source, base_dir=source)
    )  # fmt: skip
