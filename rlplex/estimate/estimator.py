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

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlplex.dag.pipeline import Pipeline
from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.specs import GpuSpec, ModelSpec, efficiency_defaults, gpu_spec, resolve_model
from rlplex.resources.cluster import Cluster, Role
from rlplex.resources.inputs import Efficiency, Workload

StageKind = Literal["train", "forward", "generate", "weight_sync", "cpu"]
Bound = Literal["compute", "memory", "latency", "link", "given"]

KV_MEMORY_FRACTION = 0.9
"""Share of a GPU the inference engine may fill (vLLM's default ``gpu_memory_utilization``)."""
MAX_DECODE_BATCH = 1024
"""Most sequences one replica decodes at once (verl's rollout ``max_num_seqs`` default)."""
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
    """What limits it: compute, memory bandwidth, the longest response's latency, a link."""
    memory_gb: float = 0.0
    """Transient GB per device while it runs (activations of the largest micro-batch)."""
    detail: dict[str, Any] = Field(default_factory=dict)
    """The intermediate figures (prefill and decode seconds, batch, devices ...)."""


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
                n: {"seconds": s.seconds, "flops": s.flops, "bytes": s.bytes, "bound": s.bound}
                for n, s in self.stages.items()
            },
            "roles": {
                n: {"states": dict(r.states), "peak_gb": r.peak_gb} for n, r in self.roles.items()
            },
            "assumptions": self.assumptions,
        }


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
        tp = par.tp if par and par.tp else (role.num_gpus_per_worker if generates else 1)
        pp = par.pp if par else 1
        d = self.devices(role)
        if d % (tp * pp):
            raise ConfigError(
                f"tp x pp = {tp * pp} does not divide the role's {d} devices",
                field=f"roles.{role.name}.parallel",
                value=par.model_dump(exclude_defaults=True) if par else {"tp": tp},
                file=self.inputs.file,
            )
        dp = par.dp if par and par.dp else d // (tp * pp)
        return tp, pp, dp


def _tokens(w: Workload) -> tuple[int, float, int]:
    """(sequences per step, mean tokens per sequence, max tokens per sequence)."""
    n = w.prompts_per_step * w.samples_per_prompt
    return (
        n,
        w.prompt_tokens.mean + w.response_tokens.mean,
        w.prompt_tokens.max + w.response_tokens.max,
    )


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
    b = f.BYTES_PER_ELEMENT[role.precision]
    shard = tp * pp
    states: dict[str, float] = {
        "weights": params * b / shard / (dp if zero >= 3 else 1) / f.GB,
    }
    if "train" in kinds:
        grad_shard = dp if zero >= 2 else 1
        opt_shard = dp if zero >= 1 else 1
        per_param = f.optimizer_bytes_per_param(role.optimizer, role.precision)
        states["optimizer"] = params * per_param / shard / opt_shard / f.GB
        states["grads"] = params * b / shard / grad_shard / f.GB
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
        activations_gb=0.0,
    )


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
    n, _, longest = _tokens(w)
    per_replica = math.ceil(n / _replicas(ctx, role))
    per_token = f.kv_bytes_per_token(spec, role.precision, tp, pp)
    need = per_replica * longest * per_token / f.GB
    transient = generate_transient_gb(spec, role.precision, tp, pp)
    room = KV_MEMORY_FRACTION * ctx.inputs.cluster.gpu_memory_gb - weights_gb - transient
    if room <= longest * per_token / f.GB:
        raise ConfigError(
            f"cannot fit: {weights_gb:.1f} GB of weights per GPU (tp={tp}, pp={pp}) leave no room"
            f" for the KV cache of one {longest}-token sequence within"
            f" {KV_MEMORY_FRACTION:g} x {ctx.inputs.cluster.gpu_memory_gb:g} GB;"
            f" raise roles.{role.name}.num_gpus_per_worker (tensor parallel)",
            field=f"roles.{role.name}.states.kv_cache",
            value=round(room, 2),
            file=ctx.inputs.file,
        )
    return min(need, room)


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


def estimate_train(ctx: _Ctx, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = _role_head(role.name, ctx.stages_of.get(role.name, []))
    n, mean_len, longest = _tokens(w)
    recompute = bool(role.parallel and role.parallel.recompute)
    passes = 4.0 if recompute else 3.0  # forward + backward (2x) [+ forward again]
    flops = passes * f.forward_flops(spec, mean_len, head) * n * w.epochs
    eff = efficiency_value(ctx.inputs.efficiency, "train") * _stage_factor(
        ctx.inputs.efficiency, stage.name
    )
    peak = ctx.gpu.peak_tflops * 1e12
    seconds = flops / (est.devices * peak * eff)
    b = f.BYTES_PER_ELEMENT[role.precision]
    grad_bytes = est.params * b / (est.tp * est.pp)
    par = role.parallel
    sharded = par is not None and (par.fsdp or par.zero >= 3)
    comm = 0.0
    if est.dp > 1:
        comm = 2 * grad_bytes * (est.dp - 1) / est.dp  # ring all-reduce or reduce-scatter
        if sharded:
            comm += 2 * grad_bytes * (est.dp - 1) / est.dp  # gather for forward and backward
    tokens_mb = w.micro_batch_size * longest
    act = f.activation_bytes(
        spec, tokens_mb, precision=role.precision, tp=est.tp, pp=est.pp,
        recompute=recompute, backward=True, head=head,
    ) / f.GB  # fmt: skip
    return StageEstimate(
        stage=stage.name, kind="train", seconds=seconds, flops=flops, bytes=comm,
        bound="compute", memory_gb=act,
        detail={"devices": est.devices, "efficiency": eff, "tokens": n * mean_len * w.epochs,
                "passes": passes, "micro_batch_tokens": tokens_mb},
    )  # fmt: skip


def estimate_forward(ctx: _Ctx, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    head = _role_head(role.name, ctx.stages_of.get(role.name, []))
    n, mean_len, longest = _tokens(w)
    flops = f.forward_flops(spec, mean_len, head) * n
    eff = efficiency_value(ctx.inputs.efficiency, "forward") * _stage_factor(
        ctx.inputs.efficiency, stage.name
    )
    seconds = flops / (est.devices * ctx.gpu.peak_tflops * 1e12 * eff)
    tokens_mb = w.micro_batch_size * longest
    act = (
        f.activation_bytes(
            spec,
            tokens_mb,
            precision=role.precision,
            tp=est.tp,
            pp=est.pp,
            backward=False,
            head=head,
        )
        / f.GB
    )
    return StageEstimate(
        stage=stage.name, kind="forward", seconds=seconds, flops=flops, bytes=0.0,
        bound="compute", memory_gb=act,
        detail={"devices": est.devices, "efficiency": eff, "tokens": n * mean_len},
    )  # fmt: skip


def estimate_generate(ctx: _Ctx, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    """Prefill (compute-bound) plus decode (memory-bound, batch capped by the KV cache).

    Decode lasts the larger of the throughput-bound time (all response tokens
    at the batch the KV cache holds) and the latency of the longest response
    (``response.max`` steps, each reading at least the weights).
    """
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    eff_in = ctx.inputs.efficiency
    factor = _stage_factor(eff_in, stage.name)
    eff_prefill = efficiency_value(eff_in, "prefill") * factor
    eff_decode = efficiency_value(eff_in, "decode") * factor
    tp, pp = est.tp, est.pp
    group = tp * pp
    replicas = _replicas(ctx, role)
    n, _, _ = _tokens(w)
    per_replica = math.ceil(n / replicas)
    prompt, response = w.prompt_tokens, w.response_tokens
    peak = ctx.gpu.peak_tflops * 1e12
    bandwidth = ctx.gpu.memory_gb_per_s * 1e9
    # Prefill: every prompt once, compute-bound over the replica's GPUs.
    prefill_flops = f.forward_flops(spec, prompt.mean) * per_replica
    prefill_s = prefill_flops / (group * peak * eff_prefill)
    # Decode: the batch the KV cache holds at the mean context.
    per_token = f.kv_bytes_per_token(spec, role.precision, tp, pp)
    kv_gb = role.states.get("kv_cache", est.states.get("kv_cache", 0.0))
    footprint = (prompt.mean + response.mean) * per_token
    batch = max(1, min(per_replica, MAX_DECODE_BATCH, int(kv_gb * f.GB // max(footprint, 1.0))))
    context = prompt.mean + response.mean / 2

    def step(b: int) -> tuple[float, float, float]:
        read = f.decode_weight_bytes(spec, b, role.precision) / group + b * context * per_token
        flops = b * f.decode_token_flops(spec, context) / group
        return max(read / (bandwidth * eff_decode), flops / (peak * eff_prefill)), read, flops

    t_batch, read_batch, flops_batch = step(batch)
    steps = per_replica * response.mean / batch
    throughput_s = steps * t_batch
    t_one, _, _ = step(1)
    latency_s = response.max * t_one
    decode_s = max(throughput_s, latency_s)
    if latency_s > throughput_s:
        bound: Bound = "latency"
    else:
        bound = (
            "memory"
            if read_batch / (bandwidth * eff_decode) >= flops_batch / (peak * eff_prefill)
            else "compute"
        )
    return StageEstimate(
        stage=stage.name,
        kind="generate",
        seconds=prefill_s + decode_s,
        flops=(prefill_flops + steps * flops_batch * group) * replicas,
        bytes=steps * read_batch * group * replicas,
        bound=bound,
        memory_gb=generate_transient_gb(spec, role.precision, tp, pp),
        detail={
            "replicas": replicas, "tp": tp, "pp": pp, "sequences_per_replica": per_replica,
            "batch": batch, "prefill_s": prefill_s, "decode_throughput_s": throughput_s,
            "decode_latency_s": latency_s, "eff_prefill": eff_prefill, "eff_decode": eff_decode,
        },
    )  # fmt: skip


def estimate_weight_sync(inputs: Inputs, stage: Stage, roles: Mapping[str, Role]) -> StageEstimate:
    """The cost model's rule: destination weights over the device copy or network speed."""
    src, dst = roles.get(stage.from_role or ""), roles.get(stage.to_role or "")
    gb = dst.states.get("weights", 0.0) if dst is not None else 0.0
    same = src is not None and dst is not None and sorted(src.devices) == sorted(dst.devices)
    speed = inputs.cluster.device_copy_gb_per_s if same else inputs.cluster.network_gb_per_s
    seconds = float(stage.seconds) if stage.seconds is not None else gb / speed
    return StageEstimate(
        stage=stage.name, kind="weight_sync", seconds=seconds, bytes=gb * f.GB,
        bound="given" if stage.seconds is not None else "link",
        detail={"gb_per_device": gb, "gb_per_s": speed,
                "path": "device copy" if same else "network"},
    )  # fmt: skip


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
    # Estimated states stand in for missing ones when sizing the weight sync.
    effective = {
        n: r.model_copy(update={"states": dict(r.states or roles[n].states)}) if n in roles else r
        for n, r in inputs.roles.items()
    }
    stages: dict[str, StageEstimate] = {}
    for stage in inputs.pipeline.stages:
        role = effective.get(stage.role or "")
        kind = stage_kind(stage, role)
        if kind == "weight_sync":
            stages[stage.name] = estimate_weight_sync(inputs, stage, effective)
            continue
        if kind == "cpu" or role is None:
            stages[stage.name] = StageEstimate(
                stage=stage.name, kind="cpu", seconds=stage.seconds, bound="given",
                detail={"why": "CPU and driver stages (and unknown GPU stage names) are not"
                        " estimated: give seconds"},
            )  # fmt: skip
            continue
        fn = {"train": estimate_train, "forward": estimate_forward, "generate": estimate_generate}
        stages[stage.name] = fn[kind](ctx, stage, role, roles[role.name])
    for name, est in roles.items():
        transient = max(
            (stages[s.name].memory_gb for s in ctx.stages_of.get(name, []) if s.name in stages),
            default=0.0,
        )
        roles[name] = est.model_copy(update={"activations_gb": transient})
    _check_fits(inputs, roles)
    return Estimate(
        stages=stages, roles=roles, assumptions=assumptions(ctx, roles),
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
                    f" everything else offloaded; {_remedy(inputs.roles[name], state)}",
                    field=f"roles.{name}.states.{state}",
                    value=round(gb, 2),
                    file=inputs.file,
                )


def _remedy(role: Role, state: str) -> str:
    par = role.parallel
    sharded = {"weights": 3, "grads": 2, "optimizer": 1}.get(state)
    if sharded is not None and not (par and (par.fsdp or par.zero >= sharded)):
        return (
            f"shard it over data-parallel ranks (roles.{role.name}.parallel: zero: {sharded}"
            " or fsdp: true), or split the model (tp, pp)"
        )
    return (
        f"give roles.{role.name} more GPUs (its {state} is split over all of them),"
        " or split the model further (parallel: tp, pp)"
    )


def assumptions(ctx: _Ctx, roles: Mapping[str, RoleEstimate]) -> dict[str, Any]:
    """Every input and default the estimate used, for ``rlplex estimate`` to print."""
    inputs = ctx.inputs
    w = inputs.workload
    eff = {
        key: efficiency_value(inputs.efficiency, key)
        for key in ("train", "forward", "prefill", "decode", "host_copy", "link")
    }
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
                "optimizer": inputs.roles[name].optimizer if "optimizer" in est.states else None,
                "sharding": _sharding(inputs.roles[name]),
                "recompute": bool(
                    inputs.roles[name].parallel and inputs.roles[name].parallel.recompute
                ),
            }
            for name, est in roles.items()
        },
        "efficiency": eff,
        "dispatch_s": inputs.cluster.dispatch_s,
        "kv_memory_fraction": KV_MEMORY_FRACTION,
        "prefill_chunk_tokens": PREFILL_CHUNK_TOKENS,
        "max_decode_batch": MAX_DECODE_BATCH,
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
    return estimate(
        Inputs(cluster=config.cluster, roles=roles, pipeline=config.pipeline,
               model=config.model, workload=config.workload, efficiency=config.efficiency,
               file=config.source, base_dir=source)
    )  # fmt: skip
