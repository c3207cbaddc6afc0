"""``rlplex size``: how many GPUs of which type, and how to place the step on them.

Users ask "how many H20s for GRPO on Qwen-7B?" before they launch, and get
guesses. :func:`size_report` answers from the model: for each GPU count and
GPU preset it builds every candidate of :mod:`rlplex.plan.sizing` from the
config file (colocated or split rollout, rollout tensor parallel size,
trainer sharding, sync or async), lets the estimator price and size it (with
``--costs`` from ``rlplex calibrate`` merged in), plans it (offloads where
states do not fit together, GPU and host memory checked), and keeps the
fastest plan that fits (within 0.5 % of it, the least stale). A count where nothing
fits says why in one line. The
rows no other row beats on both step time and GPU-hours form the Pareto
front; any front row can be written back as a native config
(:func:`write_config`) that plans to the same period.

The workflow is pure: it reports progress through a callback and returns a
:class:`SizeReport`; the CLI renders it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError, RlplexError

Progress = Callable[[int, int, str], None]
"""``progress(done, total, label)``: called after each candidate is planned."""

_PRESET_FILLED = ("gpu_memory_gb", "host_gb_per_s", "device_copy_gb_per_s", "network_gb_per_s")


@dataclass(frozen=True)
class Scored:
    """One planned candidate: its choices and figures, or why it does not fit."""

    knobs: Any
    """The :class:`rlplex.plan.sizing.Knobs`."""
    period_s: float | None = None
    """Steady-state step seconds; None when it does not fit."""
    tokens_per_s_per_gpu: float | None = None
    """Prompt + response tokens per step / period / GPUs (None without a workload)."""
    gpu_hours_per_1000: float | None = None
    """GPU-hours of 1,000 steps."""
    cost_per_1000: float | None = None
    """GPU-hours x the price per GPU-hour, when a price is given."""
    peak_gpu_gb: float | None = None
    """Highest GPU memory peak over the step."""
    peak_host_gb: float | None = None
    """Highest node host-memory peak over the step."""
    offloads: int = 0
    """Offload ops per step."""
    reason: str | None = None
    """Why it does not fit (one line)."""
    activation_bound: bool = False
    """Whether it does not fit because a stage's activations exceed a GPU: a shortfall that
    more GPUs of the kind do not reduce (each holds its own micro-batch's)."""
    native: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The native config of this candidate (what ``--out-config`` writes)."""

    @property
    def fits(self) -> bool:
        return self.period_s is not None

    def to_dict(self) -> dict[str, Any]:
        k = self.knobs
        return {
            "gpus": k.gpus,
            "gpu": k.gpu,
            "placement": k.placement,
            "rollout_gpus": k.rollout_gpus,
            "rollout_tp": k.rollout_tp,
            "sharding": k.sharding,
            "mode": "async" if k.staleness else "sync",
            "staleness": k.staleness,
            "period_s": self.period_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "gpu_hours_per_1000_steps": self.gpu_hours_per_1000,
            "cost_per_1000_steps": self.cost_per_1000,
            "peak_gpu_gb": self.peak_gpu_gb,
            "peak_host_gb": self.peak_host_gb,
            "offloads_per_step": self.offloads,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CountRow:
    """One GPU count of one GPU type: the fastest plan that fits, or why none does."""

    gpus: int
    """GPUs in all, whole nodes of the config's ``gpus_per_node``."""
    gpu: str
    """The GPU preset (``h100``, ``h20`` ...)."""
    best: Scored | None
    """The fastest candidate that fits."""
    reason: str | None
    """Why no candidate fits (one line), when none does."""
    tried: int
    """Candidates planned."""
    activation_bound: bool = False
    """Whether that reason is a stage's activations (more GPUs do not reduce them)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "gpu": self.gpu,
            "fits": self.best is not None,
            "best": self.best.to_dict() if self.best else None,
            "reason": self.reason,
            "activation_bound": self.activation_bound,
            "candidates": self.tried,
        }


@dataclass(frozen=True)
class SizeReport:
    """Everything ``rlplex size`` shows."""

    file: str
    """The config file sized, as given."""
    rows: tuple[CountRow, ...]
    """Each (GPU type, GPU count), in the order asked."""
    front: tuple[Scored, ...]
    """The Pareto front of the rows' best plans (time vs GPU-hours), fastest first."""
    candidates: tuple[Scored, ...]
    """Every candidate planned (those that fit and those that do not)."""
    smallest: dict[str, int]
    """GPU type -> the smallest count that fits."""
    price_per_gpu_hour: float | None = None
    """The price of one GPU-hour (``--price-per-gpu-hour``), in the user's currency, that the
    costs per 1,000 steps are computed with; None: no price given, no costs shown."""
    warnings: tuple[str, ...] = ()
    """What the config read as (a model matched to a preset, an imported file's defaults)."""

    @property
    def numbered(self) -> tuple[Scored, ...]:
        """The rows ``--out-config N`` counts: the front, then the other counts' fastest plans."""
        rest = [
            r.best
            for r in self.rows
            if r.best is not None and all(r.best is not f for f in self.front)
        ]
        return (*self.front, *rest)

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "warnings": list(self.warnings),
            "smallest": self.smallest,
            "rows": [r.to_dict() for r in self.rows],
            "front": [s.to_dict() for s in self.front],
            "candidates": [s.to_dict() for s in self.candidates],
        }


# -- input checks ------------------------------------------------------------------


def parse_gpu_counts(text: str) -> list[int]:
    """``8,16,32`` -> [8, 16, 32].

    Raises:
        ConfigError: empty, not a whole number, or not > 0 (naming ``--gpus``).
    """
    items = [t.strip() for t in str(text).split(",")]
    if not text or not str(text).strip() or not all(items):
        raise ConfigError("must list GPU counts, e.g. 8,16,32", field="--gpus", value=text)
    out = []
    for item in items:
        try:
            n = int(item)
        except ValueError:
            raise ConfigError("is not a whole number of GPUs", field="--gpus", value=item) from None
        if n <= 0:
            raise ConfigError("must be a GPU count > 0", field="--gpus", value=item)
        if n not in out:
            out.append(n)
    return out


def parse_price(text: str | None) -> float | None:
    """The price per GPU-hour, or None.

    Raises:
        ConfigError: not a finite number >= 0 (naming ``--price-per-gpu-hour``).
    """
    if text is None:
        return None
    try:
        price = float(text)
    except ValueError:
        price = float("nan")
    if not math.isfinite(price) or price < 0:
        raise ConfigError(
            "must be a number >= 0 (price of one GPU-hour)",
            field="--price-per-gpu-hour",
            value=text,
        )
    return price


def parse_gpu_types(text: str | None, default: str | None) -> list[str]:
    """``h100,h20`` -> preset keys; default: the config's ``cluster.gpu``.

    Raises:
        ConfigError: an unknown preset (naming ``--gpu`` and the known ones), or
            none given and the config names none.
    """
    from rlplex.estimate.specs import gpu_spec

    names = [t.strip() for t in (text or "").split(",") if t.strip()]
    if not names:
        if not default:
            raise ConfigError(
                "is required: the config has no cluster.gpu preset to size for", field="--gpu"
            )
        names = [default]
    out = []
    for name in names:
        key = gpu_spec(name, field="--gpu").key
        if key not in out:
            out.append(key)
    return out


def counts_up_to(max_gpus: int, gpus_per_node: int) -> list[int]:
    """One node, then doubling, up to ``max_gpus`` (``--max-gpus``).

    Raises:
        ConfigError: ``max_gpus`` is smaller than one node.
    """
    if max_gpus < gpus_per_node:
        raise ConfigError(
            f"must be at least one node ({gpus_per_node} GPUs)", field="--max-gpus", value=max_gpus
        )
    out, n = [], gpus_per_node
    while n <= max_gpus:
        out.append(n)
        n *= 2
    return out


def check_whole_nodes(counts: Sequence[int], gpus_per_node: int) -> None:
    """Every count must be a whole number of nodes.

    Raises:
        ConfigError: naming ``--gpus`` and the count.
    """
    for n in counts:
        if n % gpus_per_node:
            raise ConfigError(
                f"is not a whole number of {gpus_per_node}-GPU nodes (cluster.gpus_per_node)",
                field="--gpus",
                value=n,
            )


# -- reading the config ------------------------------------------------------------


def _gpu_roles(native: Mapping[str, Any]) -> list[str]:
    roles = native.get("roles") or {}
    return [n for n, r in roles.items() if isinstance(r, dict) and r.get("devices") is not None]


def _stages(native: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    pipeline = native.get("pipeline") or {}
    stages = pipeline.get("stages") or {} if isinstance(pipeline, dict) else {}
    return {n: s for n, s in stages.items() if isinstance(s, dict)}


def _rollout_roles(native: Mapping[str, Any]) -> list[str]:
    return sorted(
        {
            s["to"]
            for s in _stages(native).values()
            if s.get("kind") == "weight_sync" and isinstance(s.get("to"), str)
        }
    )


def _trained_roles(native: Mapping[str, Any]) -> list[str]:
    out = set()
    for name, s in _stages(native).items():
        kind = s.get("kind") or ("train" if name in ("train", "critic_train") else "run")
        if kind == "train" and isinstance(s.get("role"), str):
            out.add(s["role"])
    return sorted(out)


def _names_sharding(native: Mapping[str, Any], role: str) -> bool:
    """Whether ``role``'s trainer splits its model (tensor, pipeline or expert parallel) and
    names its sharding: a Megatron trainer's distributed optimizer (``zero: 1``) or FSDP2
    over tensor-parallel ranks. The search keeps that framework's choice rather than turn a
    Megatron trainer into FSDP; a data-parallel trainer's sharding is searched."""
    spec = (native.get("roles") or {}).get(role)
    par = spec.get("parallel") if isinstance(spec, dict) else None
    if not isinstance(par, dict) or not (par.get("fsdp") or par.get("zero")):
        return False
    return any(_as_int(par.get(k)) > 1 for k in ("tp", "pp", "ep"))


def _as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def candidate_native(
    native: Mapping[str, Any],
    knobs: Any,
    measured_on: Mapping[str, int],
) -> dict[str, Any]:
    """The native config of one candidate: cluster, devices, parallel sizes and mode set.

    Stage seconds the file gives stay priced on the devices they were measured on
    (``at_devices`` pinned to ``measured_on[stage]``, :func:`measured_on` of the file),
    so the written config plans as the search did.
    """
    out = copy.deepcopy(dict(native))
    cluster = dict(out.get("cluster") or {})
    per_node = int(cluster.get("gpus_per_node", 8))
    if cluster.get("gpu") != knobs.gpu:
        for key in _PRESET_FILLED:
            cluster.pop(key, None)
    cluster.update({"nodes": knobs.gpus // per_node, "gpu": knobs.gpu})
    out["cluster"] = cluster
    roles = {n: dict(r) if isinstance(r, dict) else r for n, r in (out.get("roles") or {}).items()}
    rollout = set(_rollout_roles(native))
    trained = set(_trained_roles(native))
    r, n = knobs.rollout_gpus, knobs.gpus
    for name in _gpu_roles(native):
        role = roles[name]
        if name in rollout:
            role["devices"] = f"0-{r - 1}"
            role["num_gpus_per_worker"] = knobs.rollout_tp
            if isinstance(role.get("parallel"), dict) and "tp" in role["parallel"]:
                role["parallel"] = {**role["parallel"], "tp": knobs.rollout_tp}
        else:
            role["devices"] = f"0-{n - 1}" if knobs.colocated else f"{r}-{n - 1}"
        if (
            name in trained
            and knobs.sharding in ("fsdp", "zero1")
            and not _names_sharding(native, name)
        ):
            par = {
                k: v for k, v in (role.get("parallel") or {}).items() if k not in ("fsdp", "zero")
            }
            par.update({"fsdp": True} if knobs.sharding == "fsdp" else {"zero": 1})
            role["parallel"] = par
    out["roles"] = roles
    pipeline = dict(out.get("pipeline") or {})
    stages = {}
    for name, stage in _stages(native).items():
        stage = dict(stage)
        if (
            stage.get("seconds") is not None
            and stage.get("at_devices") is None
            and name in measured_on
            and stage.get("kind") != "weight_sync"
        ):
            stage["at_devices"] = measured_on[name]
        stages[name] = stage
    pipeline["stages"] = stages
    pipeline["mode"] = "async" if knobs.staleness else "sync"
    pipeline["max_staleness"] = knobs.staleness
    out["pipeline"] = pipeline
    return out


def measured_on(config: Any) -> dict[str, int]:
    """The device count each GPU stage's seconds of ``config`` (the file as read) are
    measured on, by the rule ``plan`` prices them with
    (:func:`~rlplex.plan.costs.reference_devices`): the role's devices as the file gives
    them, and a role the file leaves to the search (``devices: auto``) the whole cluster.

    Pinned in every candidate (:func:`candidate_native`), which places each role itself:
    a ``devices: auto`` role's given seconds were otherwise taken as measured on each
    candidate's own devices (a 120 s generation as 120 s on 2 GPUs of 8, where ``plan``
    of the file prices it at 480 s there).
    """
    from rlplex.plan.costs import is_gpu_role, reference_devices

    return {
        s.name: reference_devices(config, s)
        for s in config.pipeline.stages
        if not s.is_weight_sync and is_gpu_role(config, s.role or "")
    }


def _size_warnings(config: Any) -> tuple[str, ...]:
    """``config``'s warnings less those of how its auto roles were estimated as read
    (:data:`~rlplex.estimate.context.AUTO_ESTIMATED`): size places and estimates every role
    on each candidate's own devices, so no figure it shows is the whole cluster's."""
    from rlplex.estimate.context import AUTO_ESTIMATED

    return tuple(w for w in config.warnings if AUTO_ESTIMATED not in w)


# -- the search --------------------------------------------------------------------


def _rollout_model(native: Mapping[str, Any], base_dir: Path, file: str) -> Any | None:
    """The rollout's :class:`~rlplex.estimate.specs.ModelSpec`; None when no model is named."""
    from rlplex.estimate.specs import resolve_model

    roles = native.get("roles") or {}
    name = None
    for role in _rollout_roles(native):
        body = roles.get(role)
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            name = body["model"]
    name = name or native.get("model")
    if not isinstance(name, str):
        return None
    return resolve_model(name, file=file, base_dir=base_dir, warn=[])


def _min_rollout_tp(spec: Any, engine: Any | None, gpu: str) -> int:
    """The smallest rollout tp whose share of the weights fits in the ``engine`` role's
    memory on ``gpu`` (:func:`~rlplex.plan.sizing.weights_min_tp`)."""
    from rlplex.estimate.formulas import total_params
    from rlplex.estimate.specs import gpu_spec
    from rlplex.plan.sizing import weights_min_tp
    from rlplex.resources.inputs import Rollout

    settings = engine.rollout if engine is not None and engine.rollout else Rollout()
    weight_bytes = 1 if engine is not None and engine.precision == "fp8" else 2
    weights_gb = total_params(spec) * weight_bytes / 1e9
    return weights_min_tp(weights_gb, gpu_spec(gpu).memory_gb * settings.gpu_memory_utilization)


def _tokens_per_step(config: Any) -> float | None:
    w = config.workload
    if w is None:
        return None
    # The step's own tokens: a trajectory counted once, however many samples train on it.
    return w.trajectories() * (w.prompt_tokens.mean + w.trajectory_mean())


def _gpu_peak(plan: Any) -> float:
    """The highest GPU memory over the plan (states resident plus transient memory).

    The rule of :mod:`rlplex.plan.verify` (a state holds memory from its reload's
    start to its offload's end), swept once per group of GPUs that hold the same
    roles, so 128 GPUs cost as little as 8.
    """
    groups: set[frozenset[str]] = set()
    on: dict[int, set[str]] = {}
    for role, devices in plan.placement.items():
        for d in devices:
            on.setdefault(d, set()).add(role)
    groups = {frozenset(roles) for roles in on.values()}
    best = 0.0
    for roles in groups:
        level = sum(
            plan.states.get(r, {}).get(st, 0.0)
            for r in roles
            for st in plan.initial_residency.get(r, ())
        )
        events: list[tuple[float, int, float]] = []
        for op in plan.ops:
            if op.role not in roles:
                continue
            if op.kind == "reload":
                events.append((op.start_s, 1, plan.states[op.role].get(op.state or "", 0.0)))
            elif op.kind == "offload":
                events.append((op.end_s, 0, -plan.states[op.role].get(op.state or "", 0.0)))
            elif op.kind == "run" and op.memory_gb:
                events.append((op.start_s, 1, op.memory_gb))
                events.append((op.end_s, 0, -op.memory_gb))
        events.sort()
        peak = level
        for _, _, delta in events:
            level += delta
            peak = max(peak, level)
        best = max(best, peak)
    return best


def _score(config: Any, knobs: Any, native: dict, price: float | None) -> Scored:
    from rlplex.plan import make_plan

    try:
        plan = make_plan(config)
    except RlplexError as exc:
        return _refused(knobs, exc, native)
    period = plan.period_s
    tokens = _tokens_per_step(config)
    hours = period * 1000 * knobs.gpus / 3600
    step = plan.pattern_step if plan.mode == "async" and plan.unrolled_steps > 1 else None
    offloads = sum(
        1 for op in plan.ops if op.kind == "offload" and (step is None or op.step == step)
    )
    return Scored(
        knobs,
        period_s=period,
        tokens_per_s_per_gpu=tokens / period / knobs.gpus if tokens and period > 0 else None,
        gpu_hours_per_1000=hours,
        cost_per_1000=hours * price if price is not None else None,
        peak_gpu_gb=_gpu_peak(plan),
        peak_host_gb=max((plan.host_peaks or {0: 0.0}).values()),
        offloads=offloads,
        native=native,
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _refused(knobs: Any, exc: BaseException, native: dict) -> Scored:
    """A candidate that does not fit, and whether its activations are why (the estimator
    refuses a stage whose activations are its largest part on its ``memory_gb``)."""
    field_name = getattr(exc, "field", None) or ""
    bound = field_name.startswith("pipeline.stages.") and field_name.endswith(".memory_gb")
    return Scored(knobs, reason=_one_line(exc), activation_bound=bound, native=native)


def read_base(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    format: str | None = None,
    costs: str | Path | None = None,
    gpu_types: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Any, Any]:
    """The file as the search starts from it: its native form and that form built (``env``:
    the variables a launch script starts with, ``--env``).

    The search keeps of the file its roles, model, workload, engine settings and GPUs per
    node, and places the roles anew; so a placement of the file's own that does not fit on
    its GPUs (what ``size`` is asked to fix) is built with the GPU memory raised out of the
    way (:data:`~rlplex.reports.misfit.RELAXED_GPU_GB`) instead of refusing the whole search.
    An imported file that names no GPU is read as on the first of ``gpu_types``.

    Raises:
        ConfigError: the file does not load for any reason but its memory.
    """
    from rlplex.config import config_from_dict, load_native
    from rlplex.reports.misfit import RELAXED_GPU_GB, is_fit_error

    form = load_native(path, overrides=overrides, format=format, costs=costs, env=env)
    cluster = form.data.get("cluster") or {}
    if form.fmt != "native" and gpu_types and not cluster.get("gpu"):
        # An imported file's default costs give way to estimates only on a named GPU: the
        # search names one, so read the file as on the first type tried.
        form = load_native(
            path, overrides=[*overrides, f"cluster.gpu={gpu_types[0]}"], format=format,
            costs=costs, env=env,
        )  # fmt: skip
    base_dir = Path(form.base_dir) if form.base_dir else Path(path).resolve().parent

    def build(data: dict[str, Any]) -> Any:
        return config_from_dict(
            data, file=str(path), base_dir=base_dir, fmt=form.fmt, file_devices=form.file_devices
        )

    try:
        return form, build(form.data)
    except ConfigError as exc:
        if not is_fit_error(exc):
            raise
    cluster = form.data.get("cluster")
    relaxed = {**(cluster if isinstance(cluster, dict) else {}), "gpu_memory_gb": RELAXED_GPU_GB}
    return form, build({**form.data, "cluster": relaxed})


def size_report(
    path: str | Path,
    gpus: Sequence[int],
    gpu_types: Sequence[str] | None = None,
    *,
    price_per_gpu_hour: float | None = None,
    costs: str | Path | None = None,
    overrides: Sequence[str] = (),
    format: str | None = None,
    progress: Progress | None = None,
    env: Mapping[str, str] | None = None,
) -> SizeReport:
    """Search GPU counts x GPU types x placements x parallel sizes x modes for ``path``.

    ``path`` is any config ``rlplex plan`` reads (native, ROLL, RLinf, verl, NeMo RL), read
    with ``overrides`` (``--set``), ``costs`` and ``env`` (``--env``) as
    :func:`rlplex.config.load_native` reads it;
    the search rewrites the native form's cluster, devices, rollout tensor parallel, trainer
    sharding and mode, and keeps the rest (pipeline/expert parallel sizes, workload, engine).

    Raises:
        ConfigError: bad input (a count that is not whole nodes, an unknown
            preset, a config that does not load).
    """
    from rlplex.config import config_from_dict
    from rlplex.plan.sizing import candidates, pareto_front

    file = str(path)
    form, base = read_base(path, overrides=overrides, format=format, costs=costs,
                           gpu_types=gpu_types, env=env)  # fmt: skip
    native = form.data
    base_dir = Path(base.base_dir or Path(path).resolve().parent)
    per_node = base.cluster.gpus_per_node
    types = list(gpu_types) if gpu_types else parse_gpu_types(None, base.cluster.gpu)
    check_whole_nodes(gpus, per_node)
    spec = _rollout_model(native, base_dir, file)
    heads = (spec.num_heads, spec.num_kv_heads) if spec is not None else None
    can_split = bool(_rollout_roles(native)) and len(_gpu_roles(native)) > 1
    rollout = _rollout_roles(native)
    engine = base.roles[rollout[0]] if rollout else None
    own_tp = engine.num_gpus_per_worker if engine is not None else None
    if heads is None:
        # No model: states and seconds are the file's, so neither the trainer's sharding
        # nor the rollout's worker size is the search's to change.
        fixed_tp = own_tp or 1
        shardings: tuple[str, ...] = ("given",)
        heads = (1024, 1024)
    else:
        fixed_tp = None
        trained = _trained_roles(native)
        shardings = ("fsdp", "zero1") if trained else ("fsdp",)
        if trained and all(_names_sharding(native, r) for r in trained):
            shardings = ("given",)  # every trainer's sharding is the file's
    plan_list = []
    for g in types:
        for n in gpus:
            min_tp = _min_rollout_tp(spec, engine, g) if spec is not None else 1
            found = candidates(
                n, g, per_node, *heads, can_split=can_split, shardings=shardings,
                min_tp=min_tp, own_tp=own_tp,
            )  # fmt: skip
            if fixed_tp is not None:
                found = [k for k in found if k.rollout_tp == fixed_tp]
            plan_list.append((n, g, found))
    total = sum(len(c) for _, _, c in plan_list)
    done = 0
    rows: list[CountRow] = []
    every: list[Scored] = []
    configs: dict[tuple, Any] = {}
    pinned = measured_on(base)
    for n, g, knobs_list in plan_list:
        scored: list[Scored] = []
        for knobs in knobs_list:
            cand_native = candidate_native(native, knobs, pinned)
            # Each staleness is estimated on its own: generation running k steps ahead shares
            # one tail among k steps, and a partial-rollout engine streams only when async.
            key = (
                knobs.gpus, knobs.gpu, knobs.rollout_gpus, knobs.rollout_tp, knobs.sharding,
                knobs.staleness,
            )  # fmt: skip
            if key not in configs:
                try:
                    configs[key] = config_from_dict(
                        cand_native, file=file, base_dir=base_dir, file_devices=base.file_devices
                    )
                except RlplexError as exc:
                    configs[key] = exc
            config = configs[key]
            if isinstance(config, BaseException):
                result = _refused(knobs, config, cand_native)
            else:
                result = _score(config, knobs, cand_native, price_per_gpu_hour)
            scored.append(result)
            done += 1
            if progress is not None:
                progress(done, total, f"{n} x {g}: {knobs.label()}")
        every.extend(scored)
        fit = [s for s in scored if s.fits]
        best = _fastest(fit)
        lean = None if best else _leanest(scored)
        reason = None if best else (lean.reason if lean else None) or _why(scored, n, g)
        bound = lean is not None and lean.activation_bound
        rows.append(CountRow(n, g, best, reason, len(scored), activation_bound=bound))
    smallest: dict[str, int] = {}
    for row in rows:
        if row.best is not None and (row.gpu not in smallest or row.gpus < smallest[row.gpu]):
            smallest[row.gpu] = row.gpus
    rows = [_with_fix(r, smallest) for r in rows]
    bests = [r.best for r in rows if r.best is not None]
    idx = pareto_front([(s.period_s or 0.0, s.gpu_hours_per_1000 or 0.0) for s in bests])
    return SizeReport(
        file=file,
        rows=tuple(rows),
        front=tuple(bests[i] for i in idx),
        candidates=tuple(every),
        smallest=smallest,
        price_per_gpu_hour=price_per_gpu_hour,
        warnings=(*_size_warnings(base), *form.notes),
    )


def _leanest(scored: Sequence[Scored]) -> Scored | None:
    """The leanest candidate: colocated, sharded, largest tensor parallel (its reason is the
    row's)."""
    if not scored:
        return None
    return sorted(
        scored,
        key=lambda s: (not s.knobs.colocated, s.knobs.sharding != "fsdp", -s.knobs.rollout_tp),
    )[0]


def _why(scored: Sequence[Scored], gpus: int, gpu: str) -> str:
    """The reason of the leanest candidate (:func:`_leanest`)."""
    lean = _leanest(scored)
    if lean is None:
        return f"no candidate on {gpus} x {gpu}: the model's heads allow no tensor parallel size"
    return lean.reason or "no candidate fits"


LAYOUT_MISFIT = "does not divide the role's"
"""What :func:`~rlplex.resources.placement.parallel_layout_problem`'s reasons say: a GPU count
the role's parallel layout cannot be laid out on."""


def _with_fix(row: CountRow, smallest: Mapping[str, int]) -> CountRow:
    if row.best is not None or row.reason is None:
        return row
    if row.gpu in smallest and smallest[row.gpu] > row.gpus:
        fix = f"fix: {smallest[row.gpu]} {row.gpu} GPUs fit"
    elif ".parallel.shard_group" in row.reason:  # a hybrid-sharding group, not the layout
        fix = (
            "fix: a GPU count whose data-parallel ranks the shard_group divides (a multiple"
            " of tp x pp x shard_group), or another shard_group (--set)"
        )
    elif LAYOUT_MISFIT in row.reason:  # the role's parallel layout, not its memory
        fix = "fix: a GPU count the role's tp x pp and pp x ep divide, or a smaller layout"
    elif row.activation_bound:  # each GPU holds its own micro-batch's activations
        fix = (
            "fix: fewer activations (above), which more GPUs do not reduce, or a GPU with more"
            " memory"
        )
    else:
        fix = "fix: more GPUs than tried, or a GPU with more memory"
    return CountRow(
        row.gpus, row.gpu, None, f"{row.reason}; {fix}", row.tried, row.activation_bound
    )


def _fastest(fit: Sequence[Scored]) -> Scored | None:
    """The fastest plan that fits; within ``STALENESS_TOLERANCE`` of it, the one with the
    least staleness (as ``plan --auto`` chooses k: a step of staleness must buy more)."""
    from rlplex.plan.placement import STALENESS_TOLERANCE

    if not fit:
        return None
    fastest = min(s.period_s or 0.0 for s in fit)
    near = [s for s in fit if (s.period_s or 0.0) <= fastest * (1 + STALENESS_TOLERANCE)]
    return min(near, key=lambda s: (s.knobs.staleness, s.period_s, s.knobs))


def write_config(report: SizeReport, row: int, path: str | Path) -> Scored:
    """Write row ``row`` (1-based) of :attr:`SizeReport.numbered` as a native YAML config.

    Returns the row written.

    Raises:
        ConfigError: no such row (naming ``--out-config``).
    """
    import yaml

    rows = report.numbered
    if not 1 <= row <= len(rows):
        raise ConfigError(
            f"no such row (rows 1-{len(rows)})" if rows else "no plan fits, so there is no row",
            field="--out-config",
            value=row,
        )
    chosen = rows[row - 1]
    head = (
        f"# Written by rlplex size from {report.file}: {chosen.knobs.gpus} x {chosen.knobs.gpu},"
        f" {chosen.knobs.label()}; period {chosen.period_s:.2f} s\n"
    )
    Path(path).write_text(head + yaml.safe_dump(chosen.native, sort_keys=False), encoding="utf-8")
    return chosen
