"""What every cost term of an estimate reads: the checked config and the result types.

A stage's seconds depend on the same few facts whatever the stage: the model's
spec and precision on a role, the role's devices and parallel layout, the
response-length distribution, the efficiencies in force, whether generation
streams into training. :class:`Context` holds them for one config, and the small
functions here derive them, so that the train pass, the log-prob pass,
generation and the weight sync (:mod:`~rlplex.estimate.passes`,
:mod:`~rlplex.estimate.generation`, :mod:`~rlplex.estimate.weight_sync`) price
one fact the same way. :class:`StageEstimate` and :class:`RoleEstimate` are what
they return.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlplex.dag.pipeline import Pipeline
from rlplex.dag.stage import GENERATION_PREFIXES, Stage
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.lengths import LengthDistribution, response_lengths
from rlplex.estimate.specs import GpuSpec, ModelSpec, efficiency_defaults, gpu_spec, resolve_model
from rlplex.resources.cluster import Cluster, Role
from rlplex.resources.inputs import Efficiency, Rollout, Workload
from rlplex.resources.placement import parallel_layout_problem, role_parallel_sizes

StageKind = Literal["train", "forward", "generate", "judge", "weight_sync", "cpu"]
ESTIMATED_KINDS: tuple[StageKind, ...] = ("train", "forward", "generate", "judge")
"""The kinds priced from the model and the GPUs (the rest: a weight sync's own rule, a CPU
stage's given seconds or a rule reward's overhead)."""
ENGINE_KINDS: tuple[StageKind, ...] = ("generate", "judge")
"""The kinds that run on an inference engine: its tensor parallel defaults to the worker's
GPUs, and it holds a KV cache."""
Bound = Literal["compute", "memory", "latency", "communication", "overhead", "given"]
"""The named cost terms of an estimated stage (see docs/cost-model.md, "Terms")."""

AUTO_ESTIMATED = "devices: auto; estimated as if on all"
"""The warning of a role placed by the search, estimated as read on the whole cluster (a
report that estimates every role on its own devices, as ``size`` does, leaves it out)."""
AUTO_PLANNED = "devices: auto; placed by the search and estimated again on the devices it chose"
"""What :data:`AUTO_ESTIMATED` becomes in a report whose figures come from the plan
(:func:`planned_warnings`)."""


def planned_warnings(warnings: Iterable[str]) -> list[str]:
    """``warnings`` as a report of the plan gives them: a role placed by the search is
    estimated again on the devices it chose (:func:`rlplex.plan.plan_with_config`), so its
    figures are not the whole cluster's that :data:`AUTO_ESTIMATED` says."""
    out = []
    for warning in warnings:
        head, found, _ = warning.partition(AUTO_ESTIMATED)
        out.append(f"{head}{AUTO_PLANNED}" if found else warning)
    return out


PREFILL_CHUNK_TOKENS = 8192
"""Tokens of one prefill chunk (vLLM's ``max_num_batched_tokens`` for chunked prefill)."""


class StageEstimate(BaseModel):
    """The estimated cost of one stage on its role's devices."""

    model_config = ConfigDict(frozen=True)

    stage: str
    """The stage's name in the pipeline."""
    kind: StageKind
    """Which formula priced it (:func:`stage_kind`): ``train``, ``forward`` (log-prob, value
    and GPU reward passes), ``generate``, ``judge`` (a generative judge's answers),
    ``weight_sync``, or ``cpu`` (a CPU or driver stage,
    or a GPU stage whose name the estimator does not know: its given seconds, or a rule
    reward's per-sequence overhead)."""
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
    """The role's name."""
    model: str
    """The model the role runs: the preset's name, or the path its config was read from."""
    params: int
    """Parameters of the role's model (its head included)."""
    devices: int
    """GPUs the role's states are spread over: its device count, or every GPU of the cluster
    for a role whose devices are ``auto`` (a warning says so)."""
    tp: int
    """Tensor-parallel size the estimate used (``parallel.tp``; default: the worker's GPUs for
    a generating role, else 1)."""
    pp: int
    """Pipeline-parallel size the estimate used (``parallel.pp``, default 1)."""
    dp: int
    """Data-parallel size the estimate used (``parallel.dp``; default: devices / (tp x pp))."""
    states: dict[str, float]
    """GB per device of each state."""
    host_states: dict[str, float] = {}
    """GB per device kept in host memory the whole step instead (a CPU optimizer's state)."""
    activations_gb: float
    """The largest transient memory of the role's stages, GB per device."""

    @property
    def peak_gb(self) -> float:
        return sum(self.states.values()) + self.activations_gb


def plain_detail(detail: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready figures of a stage's detail (numbers, flags, names)."""
    return {k: v for k, v in detail.items() if v is None or isinstance(v, (bool, int, float, str))}


class Inputs(BaseModel):
    """What the estimator reads, gathered from a config (before or after it is checked)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    cluster: Cluster
    """The machines; ``cluster.gpu`` names the GPU preset the estimator needs."""
    roles: dict[str, Role]
    """Roles by name: every GPU role the pipeline uses gets its states estimated, and the
    states it gives win (a given ``kv_cache`` caps generation's batch)."""
    pipeline: Pipeline
    """The step's stages; each is priced by its kind and name (:func:`stage_kind`)."""
    model: str | None = None
    """The config's ``model`` (preset name or local HF path); None: every GPU role the
    pipeline uses must name its own."""
    workload: Workload | None = None
    """Prompts per step, samples per prompt, prompt and response lengths; None: nothing can
    be estimated (:func:`missing_inputs` names it)."""
    efficiency: Efficiency | None = None
    """Achieved fractions of peak (a costs file's, or ``rlplex calibrate``'s); None, and any
    factor left unset: the published defaults (:func:`efficiency_value`)."""
    file: str | None = None
    """The config file, named in the errors the estimator raises; None: no file (built in
    Python)."""
    base_dir: Path | None = None
    """Folder a relative model path is read from (the config's folder); None: the current
    directory."""

    @classmethod
    def of_config(
        cls, config: Any, roles: Mapping[str, Role], pipeline: Pipeline | None = None
    ) -> Inputs:
        """A loaded config's inputs with ``roles`` (a placement tried, states the loader
        filled cleared) and ``pipeline`` (default: the config's) in place of its own."""
        return cls(
            cluster=config.cluster, roles=dict(roles),
            pipeline=config.pipeline if pipeline is None else pipeline,
            model=config.model, workload=config.workload, efficiency=config.efficiency,
            file=config.source,
            base_dir=Path(config.source).resolve().parent if config.source else None,
        )  # fmt: skip


def roles_afresh(config: Any) -> dict[str, Role]:
    """A loaded config's roles, the states its loader estimated cleared so that an estimate
    prices them afresh (given states stay)."""
    return {
        n: r.model_copy(update={"states": {}}) if config.is_estimated(f"roles.{n}.states") else r
        for n, r in config.roles.items()
    }


MISSING_HINTS = {
    "cluster.gpu": "--set cluster.gpu=h100",
    "model": "--set model=qwen2.5-7b",
    "workload": (
        "--set workload.prompts_per_step=64 --set workload.prompt_tokens.mean=256"
        " --set workload.prompt_tokens.max=1024 --set workload.response_tokens.mean=1024"
        " --set workload.response_tokens.max=4096"
    ),
    "workload.prompt_tokens": (
        "--set workload.prompt_tokens.mean=300 --set workload.prompt_tokens.max=600 (the"
        " prompt's tokens; in a multi-turn run the trajectory's first prompt, each environment"
        " reply being workload.turns.observation_tokens, 0 unless set)"
    ),
}
"""An example ``--set`` for each input the estimator needs, for the hint of a config that
lacks it."""


def missing_inputs(inputs: Inputs) -> list[str]:
    """The config fields the estimator still needs (empty: it can estimate)."""
    return lacking(inputs.cluster, inputs.roles, inputs.model, inputs.workload)


def lacking(
    cluster: Cluster, roles: Mapping[str, Role], model: str | None, workload: Workload | None
) -> list[str]:
    """Of ``model``, ``workload`` and ``cluster.gpu``, those the estimator still needs: a
    model named by neither the config nor any GPU role, no workload, no GPU preset."""
    missing = []
    if model is None and not any(r.model for r in roles.values() if r.is_gpu):
        missing.append("model")
    if workload is None:
        missing.append("workload")
    if cluster.gpu is None:
        missing.append("cluster.gpu")
    return missing


def efficiency_value(eff: Efficiency | None, key: str) -> float:
    """The efficiency factor ``key`` (given, else the published default)."""
    given = getattr(eff, key, None) if eff is not None else None
    return float(given) if given is not None else float(efficiency_defaults()[key]["value"])


def stage_kind(stage: Stage, role: Role | None) -> StageKind:
    """Which formula estimates ``stage``: a weight sync's; on a CPU role (or none) ``cpu``;
    on a GPU role ``train`` for a train stage, ``judge`` for a stage with a ``judge``,
    ``generate`` for a name starting with generate/rollout/gen, ``forward`` for a log-prob,
    reward, values or ref pass, and ``cpu`` (not estimated) for any other name."""
    if stage.is_weight_sync:
        return "weight_sync"
    if role is None or not role.is_gpu:
        return "cpu"
    if stage.kind == "train":
        return "train"
    if stage.judge is not None:
        return "judge"
    name = stage.name.lower()
    if name.startswith(GENERATION_PREFIXES):
        return "generate"
    # A reward on GPUs is a reward model's pass, one per domain as well (ROLL's
    # ``reward_NAME`` clusters): its name said it, whatever the suffix.
    if "logprob" in name or "log_prob" in name or name.startswith("reward"):
        return "forward"
    if name in ("values", "value", "ref"):
        return "forward"
    return "cpu"


def role_head(name: str, role_stages: list[Stage]) -> f.Head:
    """The head a role's model ends in: the LM head (a policy, a reference, a generative
    judge), a critic's value head, or a reward model's score head."""
    names = {s.name for s in role_stages}
    if any(s.judge is not None for s in role_stages):
        return "lm"  # a generative judge writes its answer with the LM head
    if "critic" in name or names & {"values", "critic_train"}:
        return "value"
    # A reward model's pass, ROLL's per-domain ``reward_NAME`` clusters' too.
    if "reward" in name or any(n.startswith("reward") for n in names):
        return "score"
    return "lm"


class Context:
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

    def for_stage(self, stage: Stage) -> Context:
        """This context as ``stage``'s pass sees it: its own ``packing`` over the
        workload's where it gives one (the caches shared)."""
        w = self.inputs.workload
        if stage.packing is None or w is None or stage.packing == w.packing:
            return self
        own = copy.copy(self)
        workload = w.model_copy(update={"packing": stage.packing})
        own.inputs = self.inputs.model_copy(update={"workload": workload})
        return own

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
            f"roles.{role.name}: {AUTO_ESTIMATED}"
            f" {self.inputs.cluster.num_gpus} GPUs of the cluster"
        )
        if note not in self.warnings:
            self.warnings.append(note)
        return self.inputs.cluster.num_gpus

    def placed(self, role: Role) -> Role:
        """``role`` on the devices its estimate assumes: its own, or, for a role the search
        places (``devices: auto``), the whole cluster's, as :meth:`devices` counts them (a
        weight sync between an auto role and another on every GPU is then a device copy, not
        a network broadcast between sets it took as disjoint)."""
        if role.devices or not role.auto:
            return role
        return role.with_devices(tuple(range(self.devices(role))))

    def layout(self, role: Role) -> tuple[int, int, int]:
        """(tp, pp, dp) of the role."""
        par = role.parallel
        generates = any(
            stage_kind(s, role) in ENGINE_KINDS for s in self.stages_of.get(role.name, [])
        )
        tp, pp, _ = role_parallel_sizes(role, generates)
        d = self.devices(role)
        problem = parallel_layout_problem(d, tp, pp, 1, par.sp if par else 1)
        if problem is not None:
            raise ConfigError(
                problem[1],
                field=f"roles.{role.name}.{problem[0]}",
                value=par.model_dump(exclude_defaults=True) if par else {"tp": tp},
                file=self.inputs.file,
            )
        heads = self.spec(role).num_heads
        if heads % tp:
            # vLLM and Megatron both assert it: each tensor-parallel rank takes whole heads.
            field = "parallel.tp" if par and par.tp else "num_gpus_per_worker"
            raise ConfigError(
                f"tensor-parallel size {tp} does not divide the model's {heads} attention heads",
                field=f"roles.{role.name}.{field}", value=tp, file=self.inputs.file,
            )  # fmt: skip
        dp = par.dp if par and par.dp else d // (tp * pp)
        return tp, pp, dp


def workload_tokens(w: Workload) -> tuple[int, float, int]:
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


def weight_precision(ctx: Context, role: Role) -> str:
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


def lora_params(ctx: Context, role: Role, *, active: bool = False) -> float:
    """The role's LoRA adapter weights (0 without ``lora``; ``active``: a token's, for FLOPs)."""
    if role.lora is None:
        return 0.0
    spec = ctx.spec(role)
    return float(f.lora_params(spec, role.lora.rank, role.lora.targets, active=active))


def trainable_params(ctx: Context, role: Role, params: float) -> float:
    """What a trained role updates: every one of its ``params``, or its LoRA adapters only."""
    return params if role.lora is None else lora_params(ctx, role)


def weight_bytes_per_param(ctx: Context, role: Role) -> float:
    """Bytes a role's held weights take per parameter: its weight precision's, or a trained
    LoRA role's frozen base at ``lora.frozen_precision`` beside its adapters."""
    b = f.BYTES_PER_ELEMENT[weight_precision(ctx, role)]
    lora = role.lora
    trains = any(stage_kind(s, role) == "train" for s in ctx.stages_of.get(role.name, []))
    if lora is None or lora.frozen_precision == "bf16" or not trains:
        return float(b)
    share = lora_params(ctx, role) / f.total_params(ctx.spec(role))
    return (f.BYTES_PER_ELEMENT[lora.frozen_precision] + share * b) / (1.0 + share)


def expert_layout(ctx: Context, role: Role) -> tuple[int, int]:
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


def shard_groups(ctx: Context, role: Role) -> tuple[int, int]:
    """(dense, expert) ranks over which a role's sharded states split: the data-parallel
    and expert data-parallel ranks (:func:`expert_layout`), or with ``parallel.shard_group``
    (hybrid sharding) that group, and the experts' ranks over the dp / group replicas
    (VeOmni's and TorchTitan's expert shards carve ep out of the shard group; Megatron's
    optimizer instances split the expert data-parallel ranks alike).

    Raises:
        ConfigError: the group does not divide dp, or the replicas the expert ranks.
    """
    _, _, dp = ctx.layout(role)
    ep, edp = expert_layout(ctx, role)
    par = role.parallel
    group = par.shard_group if par is not None else None
    if group is None or group == dp:
        return dp, edp
    field = f"roles.{role.name}.parallel.shard_group"
    if dp % group:
        raise ConfigError(
            f"shard_group {group} does not divide the role's {dp} data-parallel ranks:"
            " they form dp / shard_group replicas of one group each",
            field=field, value=group, file=ctx.inputs.file,
        )  # fmt: skip
    replicas = dp // group
    if ep <= 1:
        return group, edp  # no routed experts split apart: only the dense group matters
    if edp % replicas:
        raise ConfigError(
            f"shard_group {group} makes {replicas} replicas, which do not divide the"
            f" {edp} expert data-parallel ranks (parallel.ep) that hold each expert",
            field=field, value=group, file=ctx.inputs.file,
        )  # fmt: skip
    return group, edp // replicas


def shard_replicas(ctx: Context, role: Role) -> int:
    """How many replicas of its sharded states a role keeps: dp / ``parallel.shard_group``
    (1 without hybrid sharding)."""
    _, _, dp = ctx.layout(role)
    return dp // shard_groups(ctx, role)[0]


def shard_fraction(ctx: Context, role: Role, params: int) -> float:
    """The share of a rank's model parameters that is its own optimizer shard: the dense
    part over the data-parallel ranks, the routed experts over the expert data-parallel
    ones (Megatron's distributed optimizer, ZeRO), each within its shard group
    (:func:`shard_groups`), against what the rank holds whole."""
    spec = ctx.spec(role)
    tp, pp, _ = ctx.layout(role)
    ep, _ = expert_layout(ctx, role)
    dp, edp = shard_groups(ctx, role)
    experts = f.routed_expert_params(spec) if ep > 1 else 0
    dense = params - experts
    whole = dense / (tp * pp) + experts / (ep * pp)
    own = dense / (tp * pp * dp) + experts / (ep * pp * edp)
    return own / whole if whole > 0 else 1.0


def engine_replicas(ctx: Context, role: Role) -> int:
    tp, pp, _ = ctx.layout(role)
    return max(1, ctx.devices(role) // (tp * pp))


def stage_factor(eff: Efficiency | None, stage: str) -> float:
    return eff.stages.get(stage, 1.0) if eff is not None else 1.0


REFERENCE_TFLOPS = 989.5
"""Peak of the GPU the size factors are stated for (H100 SXM): a small kernel's fixed
latency costs a GPU in proportion to its peak, so the halves scale with it."""


def width_factor(ctx: Context, spec: ModelSpec, width: int | None = None) -> float:
    """Matmul efficiency of a model of this width (or of matmuls ``width`` wide) relative to
    a very wide one."""
    half = efficiency_value(ctx.inputs.efficiency, "width_half")
    half *= ctx.gpu.peak_tflops / REFERENCE_TFLOPS
    w = spec.hidden_size if width is None else width
    return w / (w + half)


def tokens_factor(ctx: Context, tokens: float) -> float:
    """Matmul efficiency of a micro-batch of ``tokens`` tokens per GPU relative to a large one."""
    half = efficiency_value(ctx.inputs.efficiency, "tokens_half")
    half *= ctx.gpu.peak_tflops / REFERENCE_TFLOPS
    return tokens / (tokens + half) if tokens > 0 else 0.0


def sample_lengths(ctx: Context) -> LengthDistribution:
    """Tokens after the prompt per trained sample: the response, or with ``workload.turns`` a
    whole trajectory's answers and observations, or a turn's with the context before it
    (``turns.samples: turn``, in the default shape)."""
    w = ctx.inputs.workload
    assert w is not None
    if w.turns is None or w.turns.samples == "trajectory":
        return trajectory_lengths(ctx)
    # A share of trajectories at their cap says little of the samples' (only a capped
    # trajectory's last turn reaches it): the samples take the default shape.
    return response_lengths(
        w.continuation_mean(), w.continuation_max(), None,
        field="workload.response_tokens", file=ctx.inputs.file,
    )  # fmt: skip


def trajectory_lengths(ctx: Context) -> LengthDistribution:
    """Tokens after the prompt per generated sequence: the response, or a whole trajectory's
    answers and observations (the default shape over trajectories)."""
    w = ctx.inputs.workload
    assert w is not None
    return response_lengths(
        w.trajectory_mean(), w.trajectory_max(), w.response_tokens.clip_ratio,
        field="workload.response_tokens", file=ctx.inputs.file,
    )  # fmt: skip


def fp8_speedup(ctx: Context, role: Role) -> float:
    """How much faster an fp8 role's weight matmuls run than in bf16 (1 without FP8 tensor
    cores); attention stays bf16 (Transformer Engine, vLLM)."""
    if role.precision != "fp8" or not ctx.gpu.fp8:
        return 1.0
    return efficiency_value(ctx.inputs.efficiency, "fp8_matmul_speedup")


def spans_nodes(ctx: Context, group: int) -> bool:
    """Whether a group of ``group`` consecutive GPUs leaves its NVLink fabric (node or rack)."""
    return group > ctx.inputs.cluster.fabric_gpus


def link_gb_per_s(ctx: Context, role: Role) -> float:
    """Collective bandwidth per device among the role's devices (NVLink; network across
    NVLink fabrics)."""
    c = ctx.inputs.cluster
    if role.devices:
        fabrics = len({c.fabric_of(d) for d in role.devices})
    else:
        fabrics = max(1, ctx.devices(role) // c.fabric_gpus)
    return c.network_gb_per_s if fabrics > 1 else c.device_copy_gb_per_s


def shard_link_gb_per_s(ctx: Context, role: Role) -> float:
    """Collective bandwidth per device within a role's shard groups (``parallel.shard_group``
    consecutive data-parallel ranks, each ``tp`` consecutive devices): NVLink while every
    group stays inside one NVLink fabric, else the network; without hybrid sharding the
    role's own link (:func:`link_gb_per_s`)."""
    par = role.parallel
    if par is None or par.shard_group is None:
        return link_gb_per_s(ctx, role)
    c = ctx.inputs.cluster
    tp, _, _ = ctx.layout(role)
    span = tp * shard_groups(ctx, role)[0]
    devices = list(role.devices) if role.devices else list(range(ctx.devices(role)))
    for start in range(0, len(devices), span):
        if len({c.fabric_of(d) for d in devices[start : start + span]}) > 1:
            return c.network_gb_per_s
    return c.device_copy_gb_per_s


def layer_kernels(role: Role) -> str:
    """``fused`` or ``eager``: how the role's layers run (:attr:`Parallel.kernels`, whose
    default is eager under FSDP or ZeRO-2/3, the Hugging Face models those shard)."""
    par = role.parallel
    if par is not None and par.kernels is not None:
        return par.kernels
    return "eager" if par is not None and (par.fsdp or par.zero >= 2) else "fused"


def uses_cpu_optimizer(role: Role) -> bool:
    return role.parallel is not None and role.parallel.cpu_optimizer


def optimizer_kernel(role: Role) -> str:
    """``foreach`` or ``fused``: how the role's optimizer step runs. FSDP trainers (verl's,
    NeMo RL's DTensor workers, RLinf's) step PyTorch's ``torch.optim.AdamW`` (multi-tensor
    by default on CUDA); Megatron-Core steps Apex's or Transformer Engine's fused Adam, and
    DeepSpeed its FusedAdam when the config names Adam (OpenRLHF). A DeepSpeed engine given
    ``torch.optim.AdamW`` as its client optimizer (rlplex's own ZeRO backend) steps it
    multi-tensor: ``efficiency.optimizer_fused: 0.28`` says so for such a run."""
    return "foreach" if role.parallel is not None and role.parallel.fsdp else "fused"


def is_rule_reward(stage: Stage, role: Role | None) -> bool:
    """A rule-based reward stage: named ``reward*`` on a CPU role (or the driver), not a
    judge (a judge on a CPU role asks a remote model: its seconds are the file's)."""
    return (
        (role is None or not role.is_gpu)
        and stage.judge is None
        and stage.name.lower().startswith("reward")
    )


def combine_terms(
    stage: Stage, kind: StageKind, terms: dict[str, float], **fields: Any
) -> StageEstimate:
    """A stage estimate whose seconds are the sum of its terms, bound by the largest."""
    kept = {k: v for k, v in terms.items() if v > 0}
    bound = max(kept, key=kept.__getitem__) if kept else "compute"
    return StageEstimate(
        stage=stage.name, kind=kind, seconds=sum(kept.values()), bound=bound,  # type: ignore[arg-type]
        terms=kept, **fields,
    )  # fmt: skip


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
