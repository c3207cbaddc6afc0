"""Building a checked :class:`~rlplex.config.schema.Config` from a native dict.

:func:`config_from_dict` parses the cluster, resolves each role's devices,
builds the pipeline (from YAML stages, or a ``pipeline.python`` function run
through :mod:`rlplex.config.sandbox`), fills what the estimator can
(:mod:`rlplex.estimate.fill`) and runs the checks of :mod:`rlplex.config.checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlplex.config.checks import check_finite, check_pipeline, check_pipeline_size, validate_model
from rlplex.config.sandbox import load_python_pipeline
from rlplex.config.schema import (
    MAX_ROLES,
    MAX_STAGES,
    MAX_STALENESS,
    TOP_LEVEL_KEYS,
    Config,
    PipelineSpec,
    RoleSpec,
)
from rlplex.dag.pipeline import Pipeline, PipelineError
from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.resources.cluster import DRIVER, Cluster, Role
from rlplex.resources.devices import AUTO, DeviceSpecError, parse_devices
from rlplex.resources.inputs import Efficiency, Workload
from rlplex.resources.placement import check_worker_layout, parallel_layout_problem


def _resolve_role(name: str, spec: RoleSpec, cluster: Cluster, file: str | None) -> Role:
    field = f"roles.{name}"
    if name == DRIVER:
        raise ConfigError(
            "'driver' is the built-in controller role and cannot be redefined",
            field=field,
            file=file,
        )
    for state, gb in spec.states.items():
        if gb < 0:
            raise ConfigError(
                "must be >= 0 GB", field=f"{field}.states.{state}", value=gb, file=file
            )
        if gb > cluster.gpu_memory_gb:
            raise ConfigError(
                f"is larger than one GPU ({cluster.gpu_memory_gb:g} GB)",
                field=f"{field}.states.{state}",
                value=gb,
                file=file,
            )
    for state, gb in spec.host_states.items():
        if gb < 0:
            raise ConfigError(
                "must be >= 0 GB", field=f"{field}.host_states.{state}", value=gb, file=file
            )
    if spec.devices is None:
        if spec.host_states:
            raise ConfigError(
                "a CPU role (no devices) holds no per-GPU host states; give it devices",
                field=f"{field}.host_states",
                value=dict(spec.host_states),
                file=file,
            )
        if spec.states:
            raise ConfigError(
                "a CPU role (no devices) cannot hold GPU states; give it devices",
                field=f"{field}.states",
                value=dict(spec.states),
                file=file,
            )
        return Role(name=name, world_size=spec.world_size or 1, **_estimate_fields(spec))
    try:
        devices = parse_devices(spec.devices, cluster.num_gpus)
    except DeviceSpecError as exc:
        raise ConfigError(
            str(exc), field=f"{field}.devices", value=spec.devices, file=file
        ) from None
    if devices == AUTO:
        return Role(
            name=name,
            num_gpus_per_worker=spec.num_gpus_per_worker,
            world_size=spec.world_size or 1,
            states=dict(spec.states),
            host_states=dict(spec.host_states),
            auto=True,
            **_estimate_fields(spec),
        )
    assert isinstance(devices, tuple)
    check_worker_layout(name, devices, spec.num_gpus_per_worker, cluster, file)
    _check_parallel_sizes(spec, devices, field, file)
    world_size = len(devices) // spec.num_gpus_per_worker
    if spec.world_size is not None and spec.world_size != world_size:
        raise ConfigError(
            f"disagrees with len(devices) // num_gpus_per_worker ="
            f" {len(devices)} // {spec.num_gpus_per_worker} = {world_size}",
            field=f"{field}.world_size",
            value=spec.world_size,
            file=file,
        )
    return Role(
        name=name,
        devices=devices,
        num_gpus_per_worker=spec.num_gpus_per_worker,
        world_size=world_size,
        states=dict(spec.states),
        host_states=dict(spec.host_states),
        **_estimate_fields(spec),
    )


PEAK_FRACTIONS = ("train", "forward", "prefill", "decode", "host_copy", "link")
"""The efficiencies that are fractions of a peak (FLOP/s, memory bandwidth, a link)."""


def _above_peak(efficiency: Efficiency | None) -> list[str]:
    """A warning for each fraction of a peak above 1: faster than the hardware preset allows.
    Not refused: a fit on a machine faster than its preset (the nominal ``cpu`` one) gives
    such values, and ``rlplex calibrate`` writes them (it warns too)."""
    if efficiency is None:
        return []
    return [
        f"efficiency.{key}: {value} is above 1, more than the GPU preset's peak; the"
        " estimate will run faster than the hardware allows (check the value, or the preset)"
        for key in PEAK_FRACTIONS
        if (value := getattr(efficiency, key)) is not None and value > 1
    ]


def _check_parallel_sizes(
    spec: RoleSpec, devices: tuple[int, ...], field: str, file: str | None
) -> None:
    """The parallel sizes a role gives must tile its devices, whether or not anything is
    estimated (a tp of 3 on 8 GPUs was refused only when the estimator ran)."""
    par = spec.parallel
    if par is None:
        return
    problem = parallel_layout_problem(len(devices), par.tp or 1, par.pp, par.ep, par.sp)
    if problem is not None:
        where, why = problem
        size = where.partition(".")[2]  # parallel.ep, parallel.sp: that size; else all
        value = getattr(par, size) if size else par.model_dump(exclude_defaults=True)
        raise ConfigError(why, field=f"{field}.{where}", value=value, file=file)


def _estimate_fields(spec: RoleSpec) -> dict[str, Any]:
    """The role fields the estimator reads, as the file gave them."""
    return {
        "model": spec.model,
        "parallel": spec.parallel,
        "precision": spec.precision,
        "optimizer": spec.optimizer,
        "rollout": spec.rollout,
        "lora": spec.lora,
    }


_COST_FIELDS = (
    "seconds", "memory_gb", "at_devices", "scaling", "share", "judge",
    "micro_batch_size", "micro_batch_tokens", "packing",
)  # fmt: skip


def _override_stage_costs(
    pipeline: Pipeline, stages: Mapping[str, Any], file: str | None
) -> Pipeline:
    """A Python pipeline with some stages' cost fields replaced (from YAML or ``--costs``).

    Next to ``python:``, ``stages:`` may only set the cost fields of stages the
    function defines (a calibrated costs file does this).
    """
    by_name = {s.name: s for s in pipeline.stages}
    for name, body in stages.items():
        field = f"pipeline.stages.{name}"
        if name not in by_name:
            raise ConfigError(
                f"the Python pipeline has no such stage (it has: {', '.join(by_name)})",
                field=field,
                file=file,
            )
        if not isinstance(body, dict):
            raise ConfigError("must be a mapping", field=field, value=body, file=file)
        for key in body:
            if key not in _COST_FIELDS:
                raise ConfigError(
                    f"next to 'python', a stage may only set its costs ({', '.join(_COST_FIELDS)})",
                    field=f"{field}.{key}",
                    file=file,
                )
        merged = {**by_name[name].model_dump(by_alias=True, exclude={"fn"}), **body}
        stage = validate_model(Stage, merged, field, file)
        by_name[name] = stage.model_copy(update={"fn": by_name[name].fn})
    return pipeline.model_copy(update={"stages": tuple(by_name[s.name] for s in pipeline.stages)})


def _check_python_pipeline(
    pipeline: Pipeline, target: str, file: str | None, estimator_hint: str
) -> None:
    """What a YAML pipeline is held to, for one a Python function built: stages at all and
    within :data:`MAX_STAGES`, the staleness within :data:`MAX_STALENESS`, and every stage's
    seconds given unless the estimator can price them (a Python stage without seconds was
    planned at 0 s)."""
    where = f" (from pipeline.python {target!r})"
    if not pipeline.stages:
        raise ConfigError("the pipeline has no stages" + where, field="pipeline.stages", file=file)
    if len(pipeline.stages) > MAX_STAGES:
        raise ConfigError(
            f"{len(pipeline.stages):,} stages, more than the limit of {MAX_STAGES:,}" + where,
            field="pipeline.stages", file=file,
        )  # fmt: skip
    if pipeline.max_staleness > MAX_STALENESS:
        raise ConfigError(
            f"must be at most {MAX_STALENESS}" + where,
            field="pipeline.max_staleness", value=pipeline.max_staleness, file=file,
        )  # fmt: skip
    for stage in pipeline.stages:
        if stage.seconds is None and not stage.is_weight_sync and estimator_hint:
            raise ConfigError(
                f"is required (the stage's duration), {estimator_hint}" + where,
                field=f"pipeline.stages.{stage.name}.seconds", file=file,
            )  # fmt: skip


def _build_pipeline(
    spec: PipelineSpec,
    raw: Mapping[str, Any],
    roles: Mapping[str, Role],
    base_dir: Path,
    file: str | None,
    estimator_hint: str = "",
) -> Pipeline:
    if spec.python:
        pipeline = load_python_pipeline(spec.python, base_dir, file)
        if spec.stages:
            pipeline = _override_stage_costs(pipeline, spec.stages, file)
        updates: dict[str, Any] = {}
        if "mode" in raw:
            updates["mode"] = spec.mode
        if "max_staleness" in raw:
            updates["max_staleness"] = spec.max_staleness
        pipeline = pipeline.model_copy(update=updates) if updates else pipeline
        _check_python_pipeline(pipeline, spec.python, file, estimator_hint)
        return pipeline
    if not spec.stages:
        raise ConfigError("the pipeline has no stages", field="pipeline.stages", file=file)
    if len(spec.stages) > MAX_STAGES:
        raise ConfigError(
            f"{len(spec.stages):,} stages, more than the limit of {MAX_STAGES:,}",
            field="pipeline.stages",
            file=file,
        )
    stages = []
    for name, body in spec.stages.items():
        field = f"pipeline.stages.{name}"
        body = body or {}
        if not isinstance(body, dict):
            raise ConfigError("must be a mapping", field=field, value=body, file=file)
        if "name" in body:
            raise ConfigError("unknown key", field=f"{field}.name", value=body["name"], file=file)
        stage = validate_model(Stage, body, field, file, extra={"name": str(name)})
        if stage.seconds is None and not stage.is_weight_sync and estimator_hint:
            raise ConfigError(
                f"is required (the stage's duration), {estimator_hint}",
                field=f"{field}.seconds",
                file=file,
            )
        stages.append(stage)
    return Pipeline(stages=tuple(stages), mode=spec.mode, max_staleness=spec.max_staleness)


ASYNC_STALENESS_0 = (
    "async with max_staleness 0 runs like sync; set pipeline.max_staleness=1 for one-step-off"
)
"""Warning of an async pipeline whose generation may not run ahead."""


def config_from_dict(
    data: Any,
    file: str | None = None,
    base_dir: Path | None = None,
    fmt: str = "native",
    file_devices: Mapping[str, int] | None = None,
) -> Config:
    """Check a native config given as a dict (as parsed from YAML).

    ``file_devices`` gives each role's GPU count as the file had it before
    overrides (see :attr:`Config.file_devices`); by default, the roles' own.
    """
    if not isinstance(data, dict):
        raise ConfigError(
            "the config must be a mapping with 'cluster', 'roles' and 'pipeline'",
            value=data,
            file=file,
        )
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(
                f"unknown key (expected one of: {', '.join(TOP_LEVEL_KEYS)})",
                field=str(key),
                file=file,
            )
    check_finite(data, file)
    if data.get("cluster") is None:
        raise ConfigError(
            "is required: the machines the plan is for (nodes, gpus_per_node, gpu_memory_gb;"
            " 'cluster: {}' takes the defaults)",
            field="cluster",
            file=file,
        )
    efficiency = (
        validate_model(Efficiency, data["efficiency"], "efficiency", file)
        if data.get("efficiency") is not None
        else None
    )
    from rlplex.estimate.fill import estimator_hint, fill_cluster

    raw_cluster, estimated = fill_cluster(data.get("cluster"), efficiency, file)
    cluster = validate_model(Cluster, raw_cluster, "cluster", file)
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(
            "must be a preset name or a path to a Hugging Face model folder or config.json",
            field="model",
            value=model,
            file=file,
        )
    workload = (
        validate_model(Workload, data["workload"], "workload", file)
        if data.get("workload") is not None
        else None
    )
    raw_roles = data.get("roles") or {}
    if not isinstance(raw_roles, dict):
        raise ConfigError(
            "must be a mapping of role names", field="roles", value=raw_roles, file=file
        )
    if len(raw_roles) > MAX_ROLES:
        raise ConfigError(
            f"{len(raw_roles):,} roles, more than the limit of {MAX_ROLES:,}",
            field="roles",
            file=file,
        )
    roles: dict[str, Role] = {}
    given_states: set[str] = set()
    for name, body in raw_roles.items():
        spec = validate_model(RoleSpec, body, f"roles.{name}", file)
        roles[str(name)] = _resolve_role(str(name), spec, cluster, file)
        if isinstance(body, dict) and "states" in body:
            given_states.add(str(name))
    if "pipeline" not in data:
        raise ConfigError("is required", field="pipeline", file=file)
    raw_pipeline = data["pipeline"]
    pipeline_spec = validate_model(PipelineSpec, raw_pipeline, "pipeline", file)
    hint = estimator_hint(cluster, roles, model, workload)
    pipeline = _build_pipeline(
        pipeline_spec, raw_pipeline or {}, roles, base_dir or Path.cwd(), file, hint
    )
    check_pipeline_size(pipeline, file)
    from rlplex.estimate.context import partial_rollout_inactive, streaming_field

    inactive = [
        f"roles.{name}.rollout.{streaming_field(roles[name])} is ignored: {why}"
        for name in roles
        if (why := partial_rollout_inactive(name, roles, pipeline)) is not None
    ]
    notes: tuple[str, ...] = ()
    # A weight sync without seconds is estimated too (the link rule alone misses the
    # whole-model gather and broadcast), so that it is priced the same whatever else is given.
    needs_estimate = any(s.seconds is None for s in pipeline.stages) or any(
        r.is_gpu and n not in given_states for n, r in roles.items()
    )
    if not hint and needs_estimate:
        from rlplex.estimate.fill import fill_estimates

        try:
            pipeline.check([*roles, DRIVER])
        except PipelineError:
            pass  # check_pipeline below reports it with the field
        else:
            stage_bodies = pipeline_spec.stages
            given_memory = (
                {
                    str(n)
                    for n, b in stage_bodies.items()
                    if isinstance(b, dict) and "memory_gb" in b
                }
                if stage_bodies is not None
                else None
            )
            roles, pipeline, filled, notes = fill_estimates(
                cluster=cluster, roles=roles, pipeline=pipeline, model=model,
                workload=workload, efficiency=efficiency, given_states=given_states,
                given_memory=given_memory, file=file, base_dir=base_dir,
            )  # fmt: skip
            estimated |= filled
    check_pipeline(pipeline, roles, file)
    if file_devices is None:
        file_devices = {n: len(r.devices) for n, r in roles.items() if r.devices}
    warnings = list(inactive) + _above_peak(efficiency)
    if pipeline.mode == "async" and pipeline.max_staleness == 0:
        warnings.append(ASYNC_STALENESS_0)
    return Config(
        cluster=cluster,
        roles=roles,
        pipeline=pipeline,
        source=file,
        format=fmt,
        model=model,
        workload=workload,
        pipeline_python=pipeline_spec.python,
        base_dir=str(base_dir or Path.cwd()),
        file_devices=dict(file_devices),
        warnings=(*warnings, *notes),
        efficiency=efficiency,
        estimated=frozenset(estimated),
    )
