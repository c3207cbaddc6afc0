"""The native config file: cluster, roles and pipeline in one YAML document.

:func:`load_config` reads a file (native, or ROLL / RLinf / verl through the
importers), applies ``--set`` overrides, and returns a checked, frozen
:class:`Config`. Every problem is a :class:`~rlplex.errors.ConfigError` naming
the file, the dotted field path and the value. Checks done here, with their
field paths:

- unknown keys anywhere (``extra="forbid"``), wrong types, negative numbers;
- ``roles.R.devices``: unparseable, empty, repeated, or outside the cluster;
- ``roles.R.num_gpus_per_worker``: does not divide the device count, or a
  worker would span two nodes (one larger than a node must fill whole,
  consecutive nodes);
- ``roles.R.world_size``: disagrees with ``len(devices) // num_gpus_per_worker``;
- ``roles.R.states.S``: unknown state kind, or larger than one GPU;
- ``pipeline.stages.X.seconds``: missing (only weight_sync may omit it), unless
  the config names a ``model``, a ``workload`` and ``cluster.gpu``: then missing
  stage seconds, stage memory and GPU roles' states are estimated
  (:mod:`rlplex.estimate`) and listed in :attr:`Config.estimated`;
- ``pipeline.stages.X.role`` / ``after`` / ``from`` / ``to`` / ``needs``:
  unknown role, stage or state; duplicate stages; cycles;
- ``pipeline.max_staleness``: at most the number of stages (:func:`max_useful_staleness`);
- sizes: at most :data:`MAX_ROLES` roles and :data:`MAX_STAGES` stages, an
  ``after`` no longer than the stage list, and (in any section) no NaN or
  infinity, no boolean where a number belongs (strict pydantic numbers).

Roles may share GPUs in async mode too (ROLL's partial-GPU mode): the planner
runs one compute op at a time on a shared device, so no check is needed here.

Facts that are not errors but change what a config means are kept in
:attr:`Config.warnings` for the CLI to print (async with ``max_staleness 0``
runs like sync; a model path matched to a preset).

A native file must have a ``cluster`` section: a plan for unstated machines
would be nonsense printed with confidence. ``cluster: {}`` takes the defaults
(one node of 8 GPUs of 80 GB) on purpose.

A ``pipeline.python`` target is user code run while reading the config; how
its crashes are contained is explained at :func:`probe_pipeline_function`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import math
import os
import select
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from rlplex.dag.pipeline import CycleError, Mode, Pipeline, PipelineError
from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.estimate.inputs import (
    Efficiency,
    OptimizerName,
    Parallel,
    Precision,
    Rollout,
    Workload,
)
from rlplex.resources.cluster import DRIVER, Cluster, Role, StateKind, driver_role
from rlplex.resources.devices import AUTO, MAX_GPUS, DeviceSpecError, parse_devices
from rlplex.resources.placement import check_worker_layout
from rlplex.resources.yaml_io import apply_overrides, load_yaml_file

ConfigFormat = Literal["native", "roll", "rlinf", "verl"]
FORMATS: tuple[str, ...] = ("native", "roll", "rlinf", "verl")

_M = TypeVar("_M", bound=BaseModel)

MAX_ROLES = 1_000
"""Roles one config may define (a real RL job has fewer than 10)."""
MAX_STAGES = 1_000
"""Stages one step may have (a real RL step has fewer than 20)."""
MAX_STALENESS = 64
"""Absolute cap on ``max_staleness``, whatever the pipeline (see :func:`max_useful_staleness`)."""
PROBE_TIMEOUT_S = 60.0
"""How long a ``pipeline.python`` function may take to return before it is called hung."""


class Config(BaseModel):
    """A checked cluster, its roles and the step pipeline."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster: Cluster
    """The machines."""
    roles: dict[str, Role]
    """Roles by name, in file order; the built-in ``driver`` is not listed here."""
    pipeline: Pipeline
    """The step DAG and its mode."""
    source: str | None = None
    """The file the config came from, for messages."""
    format: str = "native"
    """The format the file was read as."""
    model: str | None = None
    """The model every role runs unless it names its own (preset name or local HF path)."""
    workload: Workload | None = None
    """Prompts per step, samples per prompt, prompt and response lengths (estimates)."""
    pipeline_python: str | None = None
    """``pipeline.python`` as given (after ``--set``): the module the pipeline came from."""
    base_dir: str | None = None
    """The config's folder, where a ``pipeline.python`` file is found."""
    file_devices: dict[str, int] = Field(default_factory=dict)
    """GPUs of each role as the file gives them, before ``--set`` and auto placement.

    The default ``at_devices`` of the role's stages: a stage's ``seconds`` is
    taken as measured on the devices the file gave its role, so moving the role
    (``--set roles.R.devices=...``, ``--auto``) rescales it the same way.
    """
    warnings: tuple[str, ...] = ()
    """Things the config means that a user may not expect (printed by the CLI)."""
    efficiency: Efficiency | None = None
    """Achieved fractions of peak per stage kind (estimates; ``rlplex calibrate`` fits them)."""
    estimated: frozenset[str] = frozenset()
    """Dotted paths of the figures filled by the estimator or the GPU preset, not given
    (``pipeline.stages.train.seconds``, ``roles.actor_train.states``, ``cluster.gpu_memory_gb``)."""

    def is_estimated(self, path: str) -> bool:
        """Whether the figure at ``path`` (or the section holding it) was estimated."""
        return any(path == p or path.startswith(p + ".") for p in self.estimated)

    def role(self, name: str) -> Role:
        """The role called ``name``, including the built-in ``driver``."""
        if name == DRIVER and DRIVER not in self.roles:
            return driver_role()
        return self.roles[name]

    @property
    def gpu_roles(self) -> dict[str, Role]:
        return {n: r for n, r in self.roles.items() if r.is_gpu}

    def role_states(self) -> dict[str, tuple[str, ...]]:
        return {n: tuple(r.states) for n, r in self.roles.items()}


class _RoleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    devices: str | StrictInt | list[StrictInt] | None = None
    num_gpus_per_worker: StrictInt = Field(1, ge=1, le=MAX_GPUS)
    world_size: StrictInt | None = Field(None, ge=1, le=MAX_GPUS)
    states: dict[StateKind, StrictFloat] = Field(default_factory=dict)
    model: str | None = None
    parallel: Parallel | None = None
    precision: Precision = "bf16"
    optimizer: OptimizerName = "adamw"
    rollout: Rollout | None = None


class _PipelineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: Mode = "sync"
    max_staleness: StrictInt = Field(0, ge=0, le=MAX_STALENESS)
    stages: dict[str, dict[str, Any] | None] | None = None
    python: str | None = None


_TOP_LEVEL = ("cluster", "roles", "pipeline", "model", "workload", "efficiency")


def _pydantic_message(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "literal_error":
        return error["msg"].replace("Input should be", "must be")
    return str(error["msg"]).replace("Input should be", "must be")


def validate_model(
    model: type[_M], data: Any, field: str, file: str | None, extra: Mapping[str, Any] | None = None
) -> _M:
    """Validate ``data`` as ``model``; the first problem becomes a ConfigError under ``field``."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("must be a mapping", field=field, value=data, file=file)
    try:
        return model.model_validate({**data, **(extra or {})})
    except ValidationError as exc:
        first = exc.errors()[0]
        # pydantic marks a dict key's own error with a "[key]" part; the key itself names it.
        loc = ".".join(str(p) for p in first["loc"] if p != "[key]")
        path = f"{field}.{loc}" if loc else field
        kwargs: dict[str, Any] = {}
        if first["type"] != "missing":
            kwargs["value"] = first.get("input")
        raise ConfigError(_pydantic_message(first), field=path, file=file, **kwargs) from None


def detect_format(data: Mapping[str, Any]) -> ConfigFormat:
    """Guess a config file's format from its keys.

    RLinf has ``cluster.component_placement``; verl-style files have
    ``resource_pool_spec`` or a ``trainer`` block with ``n_gpus_per_node``; ROLL
    has top-level role blocks with ``device_mapping``; anything else is native.
    """
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and "component_placement" in cluster:
        return "rlinf"
    if "resource_pool_spec" in data or (
        isinstance(data.get("trainer"), dict) and "n_gpus_per_node" in data["trainer"]
    ):
        return "verl"
    if any(isinstance(v, dict) and "device_mapping" in v for v in data.values()):
        return "roll"
    return "native"


def _resolve_role(name: str, spec: _RoleSpec, cluster: Cluster, file: str | None) -> Role:
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
    if spec.devices is None:
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
            auto=True,
            **_estimate_fields(spec),
        )
    assert isinstance(devices, tuple)
    check_worker_layout(name, devices, spec.num_gpus_per_worker, cluster, file)
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
        **_estimate_fields(spec),
    )


def _estimate_fields(spec: _RoleSpec) -> dict[str, Any]:
    """The role fields the estimator reads, as the file gave them."""
    return {
        "model": spec.model,
        "parallel": spec.parallel,
        "precision": spec.precision,
        "optimizer": spec.optimizer,
        "rollout": spec.rollout,
    }


def import_pipeline_module(ref: str, base_dir: Path, file: str | None = None) -> Any:
    """The module of ``pipeline.python`` (``"module:function"`` or ``"file.py:function"``).

    A ``.py`` file is read relative to ``base_dir`` (the config's folder), which
    is also on the import path while a module name is imported.

    Raises:
        ConfigError: the reference is malformed, the file is missing, or the
            module failed to import (naming ``pipeline.python`` and why).
    """
    module_name, sep, func_name = ref.partition(":")
    if not sep or not module_name or not func_name:
        raise ConfigError(
            'must look like "module:function" or "file.py:function"',
            field="pipeline.python",
            value=ref,
            file=file,
        )
    key = (str(base_dir.resolve()), module_name)
    if key in _PIPELINE_MODULES:  # imported once: its module-level code runs once
        return _PIPELINE_MODULES[key]
    try:
        if module_name.endswith(".py"):
            path = (base_dir / module_name).resolve()
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None or not path.exists():
                raise ConfigError("file not found", field="pipeline.python", value=ref, file=file)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            sys.path.insert(0, str(base_dir))
            try:
                module = importlib.import_module(module_name)
            finally:
                sys.path.remove(str(base_dir))
    except (ConfigError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # the import failed, or called sys.exit: say which and why
        raise ConfigError(
            f"cannot import the pipeline module {module_name!r}: {_describe(exc)}",
            field="pipeline.python",
            value=ref,
            file=file,
        ) from exc
    _PIPELINE_MODULES[key] = module
    return module


_PIPELINE_MODULES: dict[tuple[str, str], Any] = {}
"""Pipeline modules already imported, by (base folder, module name or file)."""


def _where(exc: BaseException) -> str:
    """`` at FILE:LINE`` of the innermost frame of the user's code that raised ``exc``."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    here = str(Path(__file__).resolve())
    user = [f for f in frames if str(Path(f.filename).resolve()) != here]
    if not user:
        return ""
    return f" at {user[-1].filename}:{user[-1].lineno} (in {user[-1].name})"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    return f"{type(exc).__name__}: {exc}"


def _check_target(ref: str, file: str | None) -> None:
    """Refuse a target that is not user code: a standard-library module (``os:abort``,
    ``sys:exit``) can only end or corrupt the process, never return a Pipeline."""
    module_name = ref.partition(":")[0]
    top = module_name.split(".")[0]
    if not module_name.endswith(".py") and top in getattr(sys, "stdlib_module_names", ()):
        raise ConfigError(
            f"must name a function of your own module, not of the standard library's {top!r}",
            field="pipeline.python",
            value=ref,
            file=file,
        )


def probe_pipeline_function(ref: str, base_dir: Path, file: str | None) -> None:
    """Import the ``pipeline.python`` module and call its function once in a forked
    child; refuse it if the child dies.

    An exception or ``sys.exit`` in user code is caught in-process
    (:func:`import_pipeline_module` and :func:`_call_factory` catch
    ``BaseException``), but ``os.abort``, ``os._exit``, a segfault in an
    extension or an endless loop cannot be: they take the process down or
    never return, at import time (module-level code) as well as in the
    function. So the child imports the module and calls the function, with
    its output discarded, and reports that both returned; only then does this
    process import the module itself. A child that dies, or is silent for
    :data:`PROBE_TIMEOUT_S`, becomes one ConfigError naming the module and
    function; its Python stack (from :mod:`faulthandler`) is kept for
    ``--debug``. The price: module-level code runs twice (once in the child,
    whose writes to stdout are discarded), and a module that imports torch
    pays for that import twice (forking after the import, as first written,
    left import-time crashes uncontained). A module already imported is not
    imported again in the child. Where ``fork`` does not exist (Windows) the
    probe is skipped, and rlplex's own pipelines (``rlplex.pipelines.*``) are
    not probed: they are known to return.
    """
    if not hasattr(os, "fork"):
        return
    with tempfile.TemporaryFile() as log:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns, never runs the parent's cleanup
            try:
                os.close(read_fd)
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.dup2(log.fileno(), 2)
                import faulthandler

                faulthandler.enable(file=log.fileno())
                # An ordinary failure (an exception, sys.exit) is reported by the parent's
                # own import and call, which catch them.
                with contextlib.suppress(BaseException):
                    _pipeline_factory(ref, base_dir, file)()
                os.write(write_fd, b"1")
            finally:
                os._exit(0)
        os.close(write_fd)
        try:
            ready, _, _ = select.select([read_fd], [], [], PROBE_TIMEOUT_S)
            returned = bool(ready) and os.read(read_fd, 1) == b"1"
        finally:
            os.close(read_fd)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if returned:
            return
        log.seek(0)
        detail = log.read()[-20_000:].decode("utf-8", "replace")
    if not ready:
        why = f"did not return within {PROBE_TIMEOUT_S:g} s"
    elif os.WIFSIGNALED(status):
        why = f"killed the process with {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        why = f"ended the process (exit status {os.waitstatus_to_exitcode(status)})"
    error = ConfigError(
        f"the pipeline function {ref!r} {why}", field="pipeline.python", value=ref, file=file
    )
    error.debug_detail = detail  # type: ignore[attr-defined]
    raise error


def _load_python_pipeline(ref: str, base_dir: Path, file: str | None) -> Pipeline:
    _check_target(ref, file)
    if not ref.startswith("rlplex."):  # rlplex's own pipelines are trusted code
        probe_pipeline_function(ref, base_dir, file)
    factory = _pipeline_factory(ref, base_dir, file)
    return _call_factory(factory, ref, file)


def _pipeline_factory(ref: str, base_dir: Path, file: str | None) -> Any:
    """The ``pipeline.python`` function, its module imported in-process."""
    module = import_pipeline_module(ref, base_dir, file)
    module_name, _, func_name = ref.partition(":")
    factory = getattr(module, func_name, None)
    if not callable(factory) or not inspect.isfunction(inspect.unwrap(factory)):
        if callable(factory):
            raise ConfigError(
                f"{module_name}:{func_name} is not a Python function (a builtin or a class"
                " cannot be checked before it runs)",
                field="pipeline.python",
                value=ref,
                file=file,
            )
        raise ConfigError(
            f"module {module_name!r} has no function {func_name!r}",
            field="pipeline.python",
            value=ref,
            file=file,
        )
    return factory


def _call_factory(factory: Any, ref: str, file: str | None) -> Pipeline:
    try:
        pipeline = factory()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's function failed: name it; --debug shows the cause
        raise ConfigError(
            f"the pipeline function failed{_where(exc)}: {_describe(exc)}",
            field="pipeline.python",
            value=ref,
            file=file,
        ) from exc
    if not isinstance(pipeline, Pipeline):
        raise ConfigError(
            f"the function returned {type(pipeline).__name__}, not a rlplex Pipeline",
            field="pipeline.python",
            value=ref,
            file=file,
        )
    return pipeline


_COST_FIELDS = ("seconds", "memory_gb", "at_devices", "scaling")


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


def _build_pipeline(
    spec: _PipelineSpec,
    raw: Mapping[str, Any],
    roles: Mapping[str, Role],
    base_dir: Path,
    file: str | None,
    estimator_hint: str = "",
) -> Pipeline:
    if spec.python:
        pipeline = _load_python_pipeline(spec.python, base_dir, file)
        if spec.stages:
            pipeline = _override_stage_costs(pipeline, spec.stages, file)
        updates: dict[str, Any] = {}
        if "mode" in raw:
            updates["mode"] = spec.mode
        if "max_staleness" in raw:
            updates["max_staleness"] = spec.max_staleness
        return pipeline.model_copy(update=updates) if updates else pipeline
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


def _check_pipeline(pipeline: Pipeline, roles: Mapping[str, Role], file: str | None) -> None:
    try:
        pipeline.check([*roles, DRIVER])
    except CycleError as exc:
        raise ConfigError(str(exc), field="pipeline.stages", value=exc.cycle, file=file) from None
    except PipelineError as exc:
        stage = pipeline.stage(exc.stage) if exc.stage in pipeline.names else None
        value: Any = ConfigError._NO_VALUE
        if stage is not None and exc.field:
            value = {
                "after": list(stage.after),
                "role": stage.role,
                "from": stage.from_role,
                "to": stage.to_role,
            }.get(exc.field, ConfigError._NO_VALUE)
        path = f"pipeline.stages.{exc.stage}" + (f".{exc.field}" if exc.field else "")
        raise ConfigError(str(exc), field=path, value=value, file=file) from None
    for stage in pipeline.stages:
        if stage.needs is None or stage.is_weight_sync:
            continue
        role = roles.get(stage.role or "")
        states = tuple(role.states) if role else ()
        for state in stage.needs:
            if state not in states:
                raise ConfigError(
                    f"role {stage.role!r} has no state {state!r}"
                    f" (it has: {', '.join(states) or 'none'})",
                    field=f"pipeline.stages.{stage.name}.needs",
                    value=list(stage.needs),
                    file=file,
                )
    for stage in pipeline.stages:
        if not stage.is_weight_sync:
            continue
        for key, name in (("from", stage.from_role), ("to", stage.to_role)):
            role = roles.get(name or "")
            if role is None or not role.is_gpu:
                # Weights live on GPUs: a sync from or to the driver or a CPU role is a typo.
                raise ConfigError(
                    f"weight_sync stage {stage.name!r} names {name!r}, which is not a GPU role",
                    field=f"pipeline.stages.{stage.name}.{key}",
                    value=name,
                    file=file,
                )


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
        if key not in _TOP_LEVEL:
            raise ConfigError(
                f"unknown key (expected one of: {', '.join(_TOP_LEVEL)})", field=str(key), file=file
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
        spec = validate_model(_RoleSpec, body, f"roles.{name}", file)
        roles[str(name)] = _resolve_role(str(name), spec, cluster, file)
        if isinstance(body, dict) and "states" in body:
            given_states.add(str(name))
    if "pipeline" not in data:
        raise ConfigError("is required", field="pipeline", file=file)
    raw_pipeline = data["pipeline"]
    pipeline_spec = validate_model(_PipelineSpec, raw_pipeline, "pipeline", file)
    hint = estimator_hint(cluster, roles, model, workload)
    pipeline = _build_pipeline(
        pipeline_spec, raw_pipeline or {}, roles, base_dir or Path.cwd(), file, hint
    )
    check_pipeline_size(pipeline, file)
    notes: tuple[str, ...] = ()
    needs_estimate = any(
        s.seconds is None and not s.is_weight_sync for s in pipeline.stages
    ) or any(r.is_gpu and n not in given_states for n, r in roles.items())
    if not hint and needs_estimate:
        from rlplex.estimate.fill import fill_estimates

        try:
            pipeline.check([*roles, DRIVER])
        except PipelineError:
            pass  # _check_pipeline below reports it with the field
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
    _check_pipeline(pipeline, roles, file)
    if file_devices is None:
        file_devices = {n: len(r.devices) for n, r in roles.items() if r.devices}
    warnings = []
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


def _device_counts(native: Mapping[str, Any]) -> dict[str, int]:
    """GPU count of each role of a native dict whose devices parse (others left out)."""
    try:
        cluster = Cluster.model_validate(native.get("cluster") or {})
    except ValidationError:
        return {}
    out: dict[str, int] = {}
    roles = native.get("roles")
    for name, body in roles.items() if isinstance(roles, dict) else ():
        spec = body.get("devices") if isinstance(body, dict) else None
        if spec is None:
            continue
        try:
            devices = parse_devices(spec, cluster.num_gpus)
        except (DeviceSpecError, TypeError, ValueError):
            continue
        if isinstance(devices, tuple) and devices:
            out[str(name)] = len(devices)
    return out


def check_finite(data: Any, file: str | None, field: str = "") -> None:
    """Refuse NaN and infinity anywhere in a parsed file, naming the dotted field.

    No config value means "not a number" or "unbounded": YAML's ``.nan`` and
    ``.inf`` are typos or attacks, and would flow into sums and comparisons
    that silently turn false (a plan "verified" with NaN sizes). Walks
    iteratively (nesting is already bounded by the YAML reader).
    """
    stack: list[tuple[str, Any]] = [(field, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError("must be a finite number", field=path or None, value=value, file=file)
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))


def max_useful_staleness(pipeline: Pipeline) -> int:
    """The largest ``max_staleness`` that can still change a plan: the number of stages.

    With staleness k, generation may run k steps ahead, so up to k + 1 steps
    are in flight. A step in flight is only useful while one of its stages can
    run; a step has ``len(stages)`` stages, and the cluster runs the stages of
    the steps in flight on the roles' devices, each device one compute op at a
    time. So at most ``len(stages)`` steps can each have a stage running at
    once (one stage each); any extra step in flight only waits, adding
    memory and planning work (the planner unrolls k + 1 steps) and no speed.
    """
    return max(1, len(pipeline.stages))


def check_pipeline_size(pipeline: Pipeline, file: str | None) -> None:
    """Stage count, ``after`` lengths and ``max_staleness`` within their bounds."""
    if len(pipeline.stages) > MAX_STAGES:
        raise ConfigError(
            f"{len(pipeline.stages):,} stages, more than the limit of {MAX_STAGES:,}",
            field="pipeline.stages",
            file=file,
        )
    for stage in pipeline.stages:
        if len(stage.after) > len(pipeline.stages):
            raise ConfigError(
                f"lists {len(stage.after):,} stages, more than the pipeline has",
                field=f"pipeline.stages.{stage.name}.after",
                file=file,
            )
    bound = max_useful_staleness(pipeline)
    if pipeline.staleness > bound:
        raise ConfigError(
            f"must be at most {bound}, the number of stages: with k steps of staleness up to"
            " k+1 steps are in flight, and no more steps than a step has stages can each"
            " have a stage running at once",
            field="pipeline.max_staleness",
            value=pipeline.max_staleness,
            file=file,
        )


def _convert(
    fmt: str,
    data: dict[str, Any],
    file: str,
    costs: Mapping[str, Any] | None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Turn a ROLL / RLinf / verl file into the native dict form (costs merged in)."""
    from rlplex.resources.importers.common import apply_costs

    if fmt == "native":
        return apply_costs(data, costs, costs_file)
    module = importlib.import_module(f"rlplex.resources.importers.{fmt}")
    try:
        return module.to_native(data, file=file, costs=costs, costs_file=costs_file)
    except ValidationError as exc:  # a model an importer builds refused a value it read
        first = exc.errors()[0]
        raise ConfigError(
            f"cannot be converted: {_pydantic_message(first)}",
            field=".".join(str(p) for p in first["loc"]) or None,
            value=first.get("input"),
            file=file,
        ) from None


def check_override_targets(native: Mapping[str, Any], overrides: Sequence[str], file: str) -> None:
    """Refuse a ``--set`` that would create a role or a stage the config does not have.

    ``--set roles.actor_infr.devices=0-3`` (a typo) would otherwise add an unused
    role and leave the intended one unchanged without a word. New fields of
    existing roles and stages (``roles.critic.num_gpus_per_worker=2``) are fine.
    """
    pipeline = native.get("pipeline")
    containers = {
        ("roles",): native.get("roles") or {},
        ("pipeline", "stages"): (
            (pipeline.get("stages") or {}) if isinstance(pipeline, dict) else {}
        ),
    }
    for item in overrides:
        parts = item.partition("=")[0].strip().split(".")
        for prefix, existing in containers.items():
            n = len(prefix)
            if len(parts) > n + 1 and tuple(parts[:n]) == prefix and isinstance(existing, dict):
                name = parts[n]
                if name not in existing:
                    what = "role" if prefix == ("roles",) else "stage"
                    known = ", ".join(map(str, existing))
                    raise ConfigError(
                        f"the config has no {what} {name!r} (it has: {known})",
                        field="--set",
                        value=item,
                        file=file,
                    )


def load_config(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    format: str | None = None,
    costs: str | Path | None = None,
) -> Config:
    """Read, convert, override and check a config file.

    Args:
        path: a native, ROLL, RLinf or verl-style YAML file.
        overrides: ``KEY=VALUE`` strings with dotted keys. A key whose first part
            is in the file, or (for a ROLL / RLinf / verl file) is not one of
            ``cluster``, ``roles``, ``pipeline``, applies to the file as
            written; any other applies to the native form (so
            ``pipeline.mode=async`` works on a ROLL file).
        format: ``native``, ``roll``, ``rlinf`` or ``verl``; detected when None.
        costs: a YAML file with ``stages:`` costs (and optional ``states:`` and
            ``cluster:``) merged over an imported config's defaults, or over a
            native file's own values.

    Raises:
        ConfigError: anything wrong, naming the file, the field and the value.
    """
    file = str(path)
    data = load_yaml_file(path)
    if not isinstance(data, dict):
        raise ConfigError("the config must be a mapping", value=data, file=file)
    if format is not None and format not in FORMATS:
        raise ConfigError(
            f"unknown format (expected one of: {', '.join(FORMATS)})",
            field="--format",
            value=format,
        )
    detected = format or detect_format(data)
    if detected == "native" and "defaults" in data:
        # A Hydra file (verl, ROLL, RLinf) may get its telling keys from its defaults.
        from rlplex.resources.importers.compose import compose

        detected = detect_format(compose(data, file).data)
    imported = detected != "native"

    def to_file(override: str) -> bool:
        # A key the file has applies to it as written; so does any key that is not
        # native (cluster/roles/pipeline) when the file is another framework's.
        head = override.partition("=")[0].strip().split(".")[0]
        return head in data or (imported and head not in _TOP_LEVEL)

    file_overrides = [o for o in overrides if to_file(o)]
    native_overrides = [o for o in overrides if not to_file(o)]
    if not imported:
        check_override_targets(data, file_overrides, file)
    written = data
    data = apply_overrides(data, file_overrides)
    fmt = format or (detect_format(data) if detected == "native" else detected)
    cost_data = None
    if costs is not None:
        from rlplex.resources.importers.common import check_costs

        cost_data = check_costs(load_yaml_file(costs), str(costs))
    costs_file = str(costs) if costs is not None else None
    native = _convert(fmt, data, file, cost_data, costs_file)
    file_devices = _device_counts(native)
    if overrides:
        # Stage seconds are measured on the devices the file gives (DESIGN: at_devices
        # defaults to the role's device count in the config), not those of --set.
        with contextlib.suppress(ConfigError):  # a file fixed by its overrides
            file_devices = _device_counts(
                _convert(format or detect_format(written), written, file, cost_data, costs_file)
            )
    check_override_targets(native, native_overrides, file)
    native = apply_overrides(native, native_overrides)
    defaults_note = None
    if fmt != "native" and not (native.get("pipeline") or {}).get("python"):
        from rlplex.resources.importers.common import use_estimates

        native, defaults_note = use_estimates(native, cost_data)
    config = config_from_dict(
        native,
        file=file,
        base_dir=Path(path).resolve().parent,
        fmt=fmt,
        file_devices=file_devices,
    )
    if defaults_note:
        return config.model_copy(update={"warnings": (*config.warnings, defaults_note)})
    return config
