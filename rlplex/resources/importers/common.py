"""What the importers share: default costs and states, the default step, ``--costs``.

A ROLL, RLinf, verl or NeMo RL file says where roles live but not what a step costs.
The importers therefore build a *default pipeline* over the roles they found
and fill in documented default stage costs and state sizes, which a
``--costs FILE`` overrides::

    stages:                      # seconds, memory_gb, at_devices, scaling, share
      generate: {seconds: 95, memory_gb: 12}
      train: {seconds: 60}
    states:                      # GB per device, merged over the defaults
      actor_infer: {kv_cache: 40}
    cluster:                     # native cluster fields
      gpu_memory_gb: 141
      dispatch_s: 0.05           # per-op overhead (rlplex calibrate fits it)
    efficiency:                  # estimator factors (rlplex calibrate fits them)
      train: 0.3
      stages: {generate: 0.8}

The default step (every stage's ``seconds`` measured on its role's devices):

=============  ==========================================  =========  =========
stage          role                                        seconds    memory_gb
=============  ==========================================  =========  =========
generate       actor_infer                                 120        10
reward         each reward role (or driver), see below         10         0
ref_logprob    reference (only if present)                 20         6
old_logprob    inference if present, else actor_train      20         6
values         critic (only if present)                    20         6
advantage      driver                                      1          0
critic_train   critic (only if present)                    60         20
train          actor_train                                 80         20
weight_sync    actor_train -> actor_infer                  model      -
=============  ==========================================  =========  =========

A critic gives the PPO shape, no critic the GRPO shape. Default states (GB
per device, a 7B model): see :data:`DEFAULT_STATES`. With several reward
roles (ROLL's ``rewards: {math_rule: ..., code_sandbox: ...}``, one cluster
each), each gets its own stage ``reward_ROLE``, all after ``generate`` and
before ``advantage``; several reference roles (ROLL's multi-teacher
on-policy distillation) each get a stage ``ref_logprob_ROLE``.

What the importers read besides placement, for the estimator: the model path
(top-level ``model``), the workload (prompts per step, samples per prompt,
prompt and response length) and each role's parallel sizes. Frameworks give
only *maximum* lengths; the importers set the mean to half the maximum
(:func:`workload`), and the estimator prints that as an assumption. A batch size, length
or engine setting the file leaves out falls back to the defaults; one it gives but that
is not valid (``data.train_batch_size: -5``, ``gpu_memory_utilization: 1.5``) is refused,
naming the framework's field (:func:`given_count`, :func:`given_tokens`,
:func:`given_share`, :func:`given_size`, :func:`given_number`), never read as if absent.
So is a switch that is not ``true`` or ``false`` (:func:`flag`): read by truthiness, the
quoted string ``"false"`` is true.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NoReturn, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from rlplex.errors import ConfigError, InvalidValueError, pydantic_message
from rlplex.resources.cluster import STATE_KINDS
from rlplex.resources.inputs import Efficiency, LogitsMode

DEFAULT_STATES: dict[str, dict[str, float]] = {
    "actor_train": {"weights": 4.0, "optimizer": 8.0, "grads": 4.0},
    "actor_infer": {"weights": 4.0, "kv_cache": 30.0},
    "reference": {"weights": 4.0},
    "critic": {"weights": 4.0, "optimizer": 8.0, "grads": 4.0},
    "reward": {"weights": 4.0},
    "inference": {"weights": 4.0},
}
"""GB per device of each imported GPU role's states (a 7B model, bf16, sharded)."""

DEFAULT_STAGES: dict[str, dict[str, float]] = {
    "generate": {"seconds": 120.0, "memory_gb": 10.0},
    "reward": {"seconds": 10.0},
    "ref_logprob": {"seconds": 20.0, "memory_gb": 6.0},
    "old_logprob": {"seconds": 20.0, "memory_gb": 6.0},
    "values": {"seconds": 20.0, "memory_gb": 6.0},
    "advantage": {"seconds": 1.0},
    "critic_train": {"seconds": 60.0, "memory_gb": 20.0},
    "train": {"seconds": 80.0, "memory_gb": 20.0},
}
"""Default cost of each stage of the default step, measured on its role's devices."""


class StageCost(BaseModel):
    """A stage's cost as a ``--costs`` file gives it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seconds: float | None = Field(None, ge=0)
    """Duration on ``at_devices`` devices."""
    memory_gb: float | None = Field(None, ge=0)
    """Transient memory per device while it runs."""
    at_devices: int | None = Field(None, ge=1)
    """Device count ``seconds`` was measured on."""
    scaling: float | None = Field(None, ge=0)
    """Exponent of the device-count scaling rule."""
    share: float | None = None
    """Fraction of the step's samples the stage processes (:attr:`Stage.share`)."""

    @field_validator("share")
    @classmethod
    def _share_in_range(cls, share: float | None) -> float | None:
        if share is not None and not 0.0 < share <= 1.0:
            raise PydanticCustomError("share_range", "must be in (0, 1]")
        return share


class CostsFile(BaseModel):
    """The ``--costs FILE`` document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stages: dict[str, StageCost] = Field(default_factory=dict)
    """Per-stage cost fields, merged over the defaults (or the native file's)."""
    states: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per-role GB per device of each state, merged over the defaults."""
    cluster: dict[str, Any] = Field(default_factory=dict)
    """Native cluster fields (``gpu_memory_gb``, copy speeds, ``dispatch_s`` ...)."""
    efficiency: Efficiency | None = None
    """Estimator efficiency factors, merged over the config's ``efficiency``."""


def check_costs(data: Any, file: str) -> dict[str, Any]:
    """Validate a ``--costs`` document; errors name ``file`` and the field path."""
    if not isinstance(data, dict):
        raise ConfigError("a costs file must be a mapping with 'stages'", value=data, file=file)
    try:
        parsed = CostsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"] if p != "[key]")
        raise ConfigError(
            pydantic_message(first),
            field=path,
            value=first.get("input"),
            file=file,
        ) from None
    _check_costs_cluster(parsed.cluster, file)
    for role, states in parsed.states.items():
        for state, gb in states.items():
            if state not in STATE_KINDS:
                raise ConfigError(
                    f"unknown state kind (expected one of: {', '.join(STATE_KINDS)})",
                    field=f"states.{role}.{state}",
                    value=state,
                    file=file,
                )
            if gb < 0:
                raise ConfigError(
                    "must be >= 0 GB", field=f"states.{role}.{state}", value=gb, file=file
                )
    return parsed.model_dump(exclude_none=True)


def _check_costs_cluster(values: Mapping[str, Any], file: str) -> None:
    """A costs file's ``cluster`` fields, checked as the config's own would be but naming the
    costs file (a negative ``dispatch_s`` there was blamed on the config)."""
    from rlplex.resources.cluster import Cluster

    for key, value in values.items():
        spec = Cluster.model_fields.get(key)
        if spec is None:
            raise ConfigError(
                f"unknown key (a cluster field: {', '.join(Cluster.model_fields)})",
                field=f"cluster.{key}", value=value, file=file,
            )  # fmt: skip
        try:
            TypeAdapter(Annotated[(spec.annotation, *spec.metadata)]).validate_python(value)
        except ValidationError as exc:
            message = pydantic_message(exc.errors()[0])
            raise ConfigError(message, field=f"cluster.{key}", value=value, file=file) from None


def apply_costs(
    native: dict[str, Any], costs: Mapping[str, Any] | None, costs_file: str | None
) -> dict[str, Any]:
    """Merge a checked costs document into a native config dict (returns a new dict).

    Raises:
        ConfigError: a stage or role in the costs file is not in the config
            (naming the costs file).
    """
    if not costs:
        return native
    stages = dict((native.get("pipeline") or {}).get("stages") or {})
    roles = dict(native.get("roles") or {})
    python = (native.get("pipeline") or {}).get("python")
    for name, fields in (costs.get("stages") or {}).items():
        if python:  # a Python pipeline's stages: checked when the function has built them
            stages[name] = {**(stages.get(name) or {}), **fields}
            continue
        if name not in stages:
            raise ConfigError(
                f"no such stage in the pipeline (stages: {', '.join(stages)})",
                field=f"stages.{name}",
                file=costs_file,
            )
        stages[name] = {**stages[name], **fields}
    for name, states in (costs.get("states") or {}).items():
        role = roles.get(name)
        if not isinstance(role, dict) or role.get("devices") is None:
            gpu_roles = [n for n, r in roles.items() if isinstance(r, dict) and "devices" in r]
            raise ConfigError(
                f"no such GPU role (GPU roles: {', '.join(gpu_roles)})",
                field=f"states.{name}",
                file=costs_file,
            )
        roles[name] = {**role, "states": {**(role.get("states") or {}), **states}}
    result = {**native, "roles": roles}
    if "pipeline" in native and isinstance(native["pipeline"], dict) and stages:
        result["pipeline"] = {**native["pipeline"], "stages": stages}
    if costs.get("cluster"):
        result["cluster"] = {**(native.get("cluster") or {}), **costs["cluster"]}
    if costs.get("efficiency"):
        result["efficiency"] = {**(native.get("efficiency") or {}), **costs["efficiency"]}
    return result


def default_pipeline(
    roles: Mapping[str, Any],
    mode: str = "sync",
    staleness: int = 0,
    reward_roles: list[str] | None = None,
    reference_roles: list[str] | None = None,
) -> dict:
    """The default step over the imported roles (see the module docstring), as native YAML.

    ``reward_roles`` names the roles that score responses; by default
    ``reward`` or ``rewards`` if present, else the ``driver``.
    ``reference_roles`` names the roles that compute reference log-probs
    (ROLL's several teachers); by default ``reference`` if present.
    """
    stages: dict[str, dict[str, Any]] = {}

    def add(name: str, role: str, after: list[str], **extra: Any) -> None:
        base = next((b for b in ("reward", "ref_logprob") if name.startswith(b)), name)
        stages[name] = {"role": role, **DEFAULT_STAGES[base], "after": after, **extra}

    add("generate", "actor_infer", [])
    if not reward_roles:
        reward_roles = [
            "reward" if "reward" in roles else "rewards" if "rewards" in roles else "driver"
        ]
    scores = []
    for role in reward_roles:
        name = "reward" if len(reward_roles) == 1 else f"reward_{role}"
        add(name, role, ["generate"])
        scores.append(name)
    if reference_roles is None:
        reference_roles = ["reference"] if "reference" in roles else []
    for role in reference_roles:
        name = "ref_logprob" if len(reference_roles) == 1 else f"ref_logprob_{role}"
        add(name, role, ["generate"])
        scores.append(name)
    logprob_role = "inference" if "inference" in roles else "actor_train"
    add("old_logprob", logprob_role, ["generate"], needs=["weights"])
    scores.append("old_logprob")
    if "critic" in roles:
        add("values", "critic", ["generate"], needs=["weights"])
        scores.append("values")
    add("advantage", "driver", scores)
    if "critic" in roles:
        add("critic_train", "critic", ["advantage"])
    add("train", "actor_train", ["advantage"])
    stages["weight_sync"] = {
        "kind": "weight_sync",
        "from": "actor_train",
        "to": "actor_infer",
        "after": ["train"],
    }
    if "inference" in roles:
        stages["weight_sync_inference"] = {
            "kind": "weight_sync",
            "from": "actor_train",
            "to": "inference",
            "after": ["train"],
        }
    return {"mode": mode, "max_staleness": staleness, "stages": stages}


def drop_stage(pipeline: dict[str, Any], name: str) -> None:
    """Remove stage ``name`` from a native pipeline dict; the stages after it wait on what it
    waited on instead."""
    stages = pipeline["stages"]
    gone = stages.pop(name)
    for stage in stages.values():
        after = stage.get("after")
        if after and name in after:
            kept = [a for a in after if a != name]
            stage["after"] = kept + [a for a in gone.get("after", []) if a not in kept]


def gpu_role(devices: tuple[int, ...], num_gpus_per_worker: int, name: str) -> dict[str, Any]:
    """A native role dict for an imported GPU role, with default states."""
    return {
        "devices": list(devices),
        "num_gpus_per_worker": num_gpus_per_worker,
        "states": dict(DEFAULT_STATES.get(name, {"weights": 4.0})),
    }


_REF = re.compile(r"^\$\{\s*([A-Za-z_][\w.]*)\s*\}$")


def resolve_ref(value: Any, data: Mapping[str, Any]) -> Any:
    """Resolve an OmegaConf-style ``${a.b}`` reference to another key of the file.

    ROLL and RLinf files are Hydra/OmegaConf YAML and often write
    ``tensor_parallel_size: ${infer_tp}``. Only plain references are followed
    (no resolvers, no arithmetic); anything else is returned unchanged.
    """
    seen = 0
    while isinstance(value, str) and seen < 16:
        match = _REF.match(value)
        if not match:
            return value
        node = get_path(data, match.group(1), _MISSING)
        if node is _MISSING:
            return value
        value = node
        seen += 1
    return value


_MISSING = object()


def get_path(data: Mapping[str, Any], path: str, default: Any = None) -> Any:
    """The value at the dotted ``path`` of ``data`` (unresolved), or ``default`` if absent."""
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def model_path(value: Any) -> str | None:
    """A model path rlplex can resolve: None for an unresolved interpolation (Hydra's
    ``${actor_rollout_ref.model.path}``, a launch script's unset ``${MODEL_PATH}``); a path
    whose folder alone is unset (``${DATA_HOME}/models/Qwen3-30B-A3B``) keeps its name, which
    a preset can match."""
    if not isinstance(value, str) or not value:
        return None
    return None if "$" in value.rstrip("/").rsplit("/", 1)[-1] else value


def positive_int(value: Any, *, field: str, file: str, hint: str = "") -> int:
    """An integer in 1..MAX_GPUS from an imported file, or a ConfigError naming the field.

    A value that is absent (None, or OmegaConf's ``???``) is reported as
    missing, with ``hint`` (e.g. where it may live) appended. Every count an
    importer reads (nodes, GPUs per node, parallel sizes) sizes a list of GPUs,
    so it is bounded before any list is built from it.
    """
    from rlplex.resources.devices import MAX_GPUS

    if value is None or value == "???":
        raise ConfigError(f"is missing{hint}", field=field, file=file)
    if isinstance(value, str) and "${" in value:
        raise ConfigError(
            "is an interpolation rlplex cannot resolve (a key no composed file defines, or"
            " an unset environment variable)",
            field=field,
            value=value,
            file=file,
        )
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidValueError("must be an integer >= 1", field=field, value=value, file=file)
    if value > MAX_GPUS:
        raise InvalidValueError(
            f"must be at most {MAX_GPUS:,}", field=field, value=value, file=file
        )
    return value


def optional_int(value: Any) -> int | None:
    """``value`` if it is an integer >= 1 (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _absent(value: Any) -> bool:
    """A value a file leaves out: no key, ``null``, or OmegaConf's ``???`` (to be filled)."""
    return value is None or value == "???"


def _refuse_interpolation(value: Any, *, field: str, file: str) -> None:
    """An unresolved ``${...}`` is no value the file gives but a key it points to and lacks:
    said as such, as :func:`positive_int` says it, rather than as a wrong value."""
    if isinstance(value, str) and "${" in value:
        raise ConfigError(
            "is an interpolation rlplex cannot resolve (a key no composed file defines, or"
            " an unset environment variable)",
            field=field,
            value=value,
            file=file,
        )


def given_count(value: Any, *, field: str, file: str, least: int = 1, hint: str = "") -> int | None:
    """A count a file may leave out (prompts, samples, a micro-batch, a token budget): None
    when absent, else a whole number >= ``least`` (0 where the framework reads 0 as "no
    limit", as verl's turn counts), else an :class:`InvalidValueError` naming the
    framework's ``field`` (``hint`` appended to the reason).

    A value the file gives is never dropped for a default: a wrong one (``-5``, ``0``,
    ``abc``, ``true``, ``2.5``) would otherwise plan on rlplex's defaults while looking read.
    """
    if _absent(value):
        return None
    _refuse_interpolation(value, field=field, file=file)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidValueError(
            f"must be an integer >= {least}{hint}", field=field, value=value, file=file
        )
    return value


def given_size(value: Any, *, field: str, file: str) -> int | None:
    """A parallel size a file may leave out (tensor, pipeline, expert, context, sequence
    parallel): None when absent, else a whole number of GPUs from 1 to ``MAX_GPUS``, else
    an :class:`InvalidValueError`. Every framework divides by it or builds a group of that
    many ranks: a 0, ``-2`` or ``2.5`` fails there, and was dropped here for 1."""
    return None if _absent(value) else positive_int(value, field=field, file=file)


def given_number(
    value: Any, *, field: str, file: str, least: float | None = None, most: float | None = None
) -> float | None:
    """A number a file may leave out (a coefficient, a threshold, a fraction): None when
    absent, else an int or float (not a bool) within ``least``..``most``, else an
    :class:`InvalidValueError`. A string (``"0.01"``) is no number to the frameworks'
    arithmetic, which fails on it; rlplex read it as 0 or as absent."""
    if _absent(value):
        return None
    _refuse_interpolation(value, field=field, file=file)
    number = isinstance(value, int | float) and not isinstance(value, bool) and value == value
    if number and not math.isfinite(value):
        # YAML's .inf: no framework's quota, threshold or coefficient (int(.inf x n) and
        # math.ceil(.inf) raise OverflowError, in the framework and in rlplex's reading).
        raise InvalidValueError("must be a finite number", field=field, value=value, file=file)
    if not number or (least is not None and value < least) or (most is not None and value > most):
        bounds = (
            f" from {least:g} to {most:g}" if least is not None and most is not None
            else f" >= {least:g}" if least is not None
            else f" <= {most:g}" if most is not None
            else ""
        )  # fmt: skip
        raise InvalidValueError(f"must be a number{bounds}", field=field, value=value, file=file)
    return float(value)


FlagReading = Literal["truthy", "typed", "pydantic", "literal"]
"""How a framework reads a switch a file gives it (:func:`flag`):

- ``truthy``: as written, tested for truth (``if config.x:``; verl's, RLinf's and NeMo RL's
  untyped sections, engine keyword arguments): ``true``/``false`` and ``1``/``0`` read as
  they look, but any string is true, ``"false"`` and ``"no"`` too;
- ``typed``: through a config class that checks types (ROLL's dataclasses, built with
  dacite): ``true`` or ``false`` only, anything else fails;
- ``pydantic``: through a pydantic model (NeMo RL's ``bool`` fields): also ``"false"``,
  ``"no"``, ``"off"``, ``"0"``, ``0``, ``"true"``, ``"yes"`` ... as pydantic converts them;
- ``literal``: a pydantic ``Literal[True]`` / ``Literal[False]`` (NeMo RL's ``enabled``
  switches of its Megatron, DTensor, packing and LoRA sections): ``true``/``false`` or
  ``1``/``0``; a string fails.
"""

_FLAG_REASONS: dict[str, str] = {
    "truthy": "must be true or false (the framework tests it for truth: a string is true,"
    " even 'false')",
    "typed": "must be true or false (the framework's typed config refuses anything else)",
    "pydantic": "must be true or false (or yes/no, on/off, 1/0, which pydantic converts)",
    "literal": "must be true or false (the framework's config declares it a literal true or"
    " false; a string fails)",
}


def flag(
    value: Any,
    *,
    field: str,
    file: str,
    default: bool | None = None,
    reading: FlagReading = "truthy",
) -> bool | None:
    """A switch a file may leave out (``enforce_eager``, ``param_offload``,
    ``colocated.enabled`` ...): ``default`` when absent (no key, null, ``???``), else its
    truth as the framework reads it (``reading``: :data:`FlagReading`), else an
    :class:`InvalidValueError` naming the framework's ``field``.

    Every importer reads its switches here. Read by truthiness, the quoted ``"false"`` was
    on where the framework switches it on, or off where rlplex tested ``is True``; dropped,
    a wrong value planned on the default while looking read.
    """
    if _absent(value):
        return default
    _refuse_interpolation(value, field=field, file=file)
    if isinstance(value, bool):
        return value
    if reading in ("truthy", "literal") and type(value) is int and value in (0, 1):
        return bool(value)  # 0 and 1 test as false and true (and equal them), as they look
    if reading == "pydantic":
        try:
            return TypeAdapter(bool).validate_python(value)
        except ValidationError:
            pass
    raise InvalidValueError(_FLAG_REASONS[reading], field=field, value=value, file=file)


def given_tokens(value: Any, *, field: str, file: str, hint: str = "") -> int | None:
    """A sequence length a file may leave out: None when absent, else a whole number of
    tokens from 1 to :data:`~rlplex.resources.inputs.MAX_TOKENS` (the longest a workload
    may name, checked here so that the error names the framework's ``field``), else an
    :class:`InvalidValueError`."""
    from rlplex.resources.inputs import MAX_TOKENS

    if _absent(value):
        return None
    _refuse_interpolation(value, field=field, file=file)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise InvalidValueError(
            f"must be a token count from 1 to {MAX_TOKENS:,}" + hint,
            field=field,
            value=value,
            file=file,
        )
    return value


def given_share(value: Any, *, field: str, file: str) -> float | None:
    """A share of a GPU's memory a file may leave out (vLLM's ``gpu_memory_utilization``,
    SGLang's ``mem_fraction_static``): None when absent, else a number in (0, 1], else an
    :class:`InvalidValueError` (the engine cannot take more than the whole GPU, and 1.5 is
    no typo rlplex may read as its default 0.9)."""
    if _absent(value):
        return None
    _refuse_interpolation(value, field=field, file=file)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= 1  # also refuses NaN
    ):
        raise InvalidValueError(
            "must be a share of the GPU, above 0 and at most 1",
            field=field,
            value=value,
            file=file,
        )
    return float(value)


def remaining_tokens(
    total: Any, prompt: Any, *, field: str, prompt_field: str, file: str
) -> int | None:
    """The response's tokens where a framework bounds prompt and response together (ROLL's
    ``sequence_length``, RLinf's ``runner.seq_length``): ``total`` minus the prompt's
    maximum; None when either is absent.

    Raises:
        InvalidValueError: either is not a token count.
        ConfigError: ``total`` leaves no token for the response.
    """
    whole = given_tokens(total, field=field, file=file)
    prompt_max = given_tokens(prompt, field=prompt_field, file=file)
    if whole is None or prompt_max is None:
        return None
    if whole <= prompt_max:
        raise ConfigError(
            f"must be more than {prompt_field} ({prompt_max}): it bounds prompt and response"
            " together",
            field=field,
            value=whole,
            file=file,
        )
    return whole - prompt_max


_WORKLOAD_LENGTHS = frozenset({"prompt_max", "response_max"})
"""The :func:`workload` arguments that are sequence lengths (the rest are counts)."""


def workload(
    *,
    file: str,
    fields: Mapping[str, str],
    prompts: Any,
    samples: Any,
    prompt_max: Any,
    response_max: Any,
    micro_batch: Any = None,
    mini_batch_prompts: Any = None,
    packing: Any = None,
    micro_batch_tokens: Any = None,
    logprob_micro_batch: Any = None,
    logprob_micro_batch_tokens: Any = None,
) -> dict[str, Any] | None:
    """The native ``workload`` section from a framework's numbers, or None if one is missing.

    ``fields`` names, per argument, the framework's field that gave it (``prompts``:
    ``data.train_batch_size``): a value given but not valid is refused under that name and
    ``file`` (:func:`given_count`, :func:`given_tokens`); only an absent one falls back (to
    None: the defaults, or 1 sample and a micro-batch of 1).

    Frameworks give maximum lengths only: the mean is set to half the maximum
    (an assumption the estimator prints). ``mini_batch_prompts`` (prompts per
    optimizer step) gives ``mini_batches``; ``packing``, ``micro_batch_tokens`` and the
    forward-only passes' own micro-batch (``logprob_micro_batch``, ``..._tokens``) are set
    only when the file sets them.

    Raises:
        InvalidValueError: a given count or length is not a whole number >= 1 (a length
            also at most ``MAX_TOKENS``).
    """
    given = {
        "prompts": prompts, "samples": samples, "prompt_max": prompt_max,
        "response_max": response_max, "micro_batch": micro_batch,
        "mini_batch_prompts": mini_batch_prompts, "micro_batch_tokens": micro_batch_tokens,
        "logprob_micro_batch": logprob_micro_batch,
        "logprob_micro_batch_tokens": logprob_micro_batch_tokens,
    }  # fmt: skip
    v = _checked(given, fields, file)
    n_prompts, p_max, r_max = v["prompts"], v["prompt_max"], v["response_max"]
    if n_prompts is None or p_max is None or r_max is None:
        return None
    out = {
        "prompts_per_step": n_prompts,
        "samples_per_prompt": v["samples"] or 1,
        "prompt_tokens": {"mean": p_max / 2, "max": p_max},
        "response_tokens": {"mean": r_max / 2, "max": r_max},
        "micro_batch_size": v["micro_batch"] or 1,
    } | _training_batches(n_prompts, v["mini_batch_prompts"], packing, v["micro_batch_tokens"])
    if v["logprob_micro_batch"]:
        out["logprob_micro_batch_size"] = v["logprob_micro_batch"]
    if v["logprob_micro_batch_tokens"]:
        out["logprob_micro_batch_tokens"] = v["logprob_micro_batch_tokens"]
    return out


def _checked(
    values: Mapping[str, Any], fields: Mapping[str, str], file: str
) -> dict[str, int | None]:
    """Each of :func:`workload`'s numbers checked as a length or a count, under the field the
    importer names for it (else the argument's own name)."""
    return {
        name: (given_tokens if name in _WORKLOAD_LENGTHS else given_count)(
            value, field=fields.get(name, name), file=file
        )
        for name, value in values.items()
    }


CHARS_PER_TOKEN = 4.0
"""Characters of text per token, to turn a tool reply's cap in characters into tokens:
verl's and RLinf's agent loops cut a tool's reply to its first ``max_tool_response_length``
characters (``len(tool_response_text)``, verl ``tool_agent_loop.py``, RLinf
``rstar2_agent_loop.py``) before tokenizing it. About 4 for English text with a BPE
vocabulary (OpenAI's help article "What are tokens and how to count them": "1 token ~= 4
chars in English"); code and numbers take more tokens per character, so a reply near its cap
may be a little longer than this gives."""


def reply_tokens(characters: int) -> float:
    """A tool reply's cap in tokens, from its cap in characters (:data:`CHARS_PER_TOKEN`)."""
    return characters / CHARS_PER_TOKEN


def budgeted_turns(
    most: int, reply_max: float, budget: int, *, samples: str = "trajectory"
) -> dict[str, Any]:
    """``response_tokens`` and ``turns`` of a multi-turn rollout whose answers and replies share
    one response budget (verl's ``data.max_response_length``, RLinf's ``seq_length`` minus the
    prompt): at most ``most`` answers, each of up to what is left of ``budget`` (its max the
    budget), the trajectory within it, replies of up to ``reply_max`` tokens (0: none).

    Means, as every importer's: the turns' the midpoint of 1 and ``most``; the trajectory's
    half its budget; the replies' half their max, but at most half the trajectory's mean; the
    answers what the replies leave of it. ``samples``: ``turns.samples``.
    """
    mean_turns = (1 + most) / 2
    half = budget / 2
    reply = min(reply_max, budget) / 2
    if mean_turns > 1:
        reply = min(reply, half / 2 / (mean_turns - 1))
    answer = (half - (mean_turns - 1) * reply) / mean_turns
    turns: dict[str, Any] = {
        "mean": mean_turns, "max": most, "observation_tokens": reply, "max_tokens": budget,
    }  # fmt: skip
    if samples != "trajectory":
        turns["samples"] = samples
    return {"response_tokens": {"mean": answer, "max": budget}, "turns": turns}


def _training_batches(
    prompts: int, mini: int | None, packing: Any, tokens: int | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if mini and prompts >= mini:
        out["mini_batches"] = prompts // mini
    if isinstance(packing, bool):
        out["packing"] = packing
    if tokens:
        out["micro_batch_tokens"] = tokens
    return out


def parallel_sizes(section: Any, *, base: str, file: str, **keys: str) -> dict[str, Any]:
    """:func:`parallel`'s size arguments (``tp=KEY``, ``pp=``, ``ep=``, ``sp=``) from the keys
    of a file's ``section`` (at the dotted ``base``), with ``file`` and each key's field to
    check them under."""
    node = section if isinstance(section, Mapping) else {}
    return {
        "file": file,
        "fields": {arg: f"{base}.{key}" for arg, key in keys.items()},
        **{arg: node.get(key) for arg, key in keys.items()},
    }


def parallel(
    *,
    tp: Any = None,
    pp: Any = None,
    zero: Any = None,
    fsdp: bool = False,
    recompute: bool = False,
    ep: Any = None,
    sp: Any = None,
    offload_params: Any = None,
    offload_optimizer: Any = None,
    cpu_optimizer: Any = None,
    kernels: Any = None,
    logits: Any = None,
    sequence_parallel: Any = None,
    file: str | None = None,
    fields: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The native per-role ``parallel`` section from what a file says (None if it says nothing).

    With ``file``, the sizes ``tp``, ``pp``, ``ep`` and ``sp`` are as the file gives them,
    each checked (:func:`given_size`) under its framework field in ``fields`` (a size 0 or
    ``-2`` was dropped for 1); the switches are already read (:func:`flag`).

    Raises:
        InvalidValueError: with ``file``, a size given that is not a whole number >= 1.
    """
    if file is not None:
        names = fields or {}
        tp, pp, ep, sp = (
            given_size(value, field=names.get(key, key), file=file)
            for key, value in (("tp", tp), ("pp", pp), ("ep", ep), ("sp", sp))
        )
    out: dict[str, Any] = {}
    if sequence_parallel is False and (optional_int(tp) or 1) > 1:
        out["sequence_parallel"] = False
    if kernels in ("fused", "eager"):
        out["kernels"] = kernels
    if logits in get_args(LogitsMode):
        out["logits"] = logits
    for key, value in (("ep", ep), ("sp", sp)):
        if (optional_int(value) or 1) > 1:
            out[key] = value
    for key, flag in (
        ("offload_params", offload_params),
        ("offload_optimizer", offload_optimizer),
        ("cpu_optimizer", cpu_optimizer),
    ):
        if flag is True:
            out[key] = True
    if optional_int(tp):
        out["tp"] = tp
    if optional_int(pp):
        out["pp"] = pp
    if zero in (1, 2, 3):
        out["zero"] = zero
    if fsdp:
        out["fsdp"] = True
    if recompute:
        out["recompute"] = True
    return out or None


def rollout(
    *,
    file: str,
    fields: Mapping[str, str],
    max_num_seqs: Any = None,
    gpu_memory_utilization: Any = None,
    enforce_eager: Any = None,
    sleep_level: Any = None,
    vllm_v0: bool = False,
) -> dict[str, Any] | None:
    """The native per-role ``rollout`` section (inference-engine settings) a file gives.

    ``fields`` names the framework's field of ``max_num_seqs``, ``gpu_memory_utilization``
    and ``enforce_eager`` (SGLang's ``max_running_requests``, ``mem_fraction_static``,
    ``disable_cuda_graph``): a value given but not valid is refused under that name and
    ``file``, not replaced by the engine's default. The engines take ``enforce_eager`` as a
    keyword argument and test it for truth (:func:`flag`).

    Raises:
        InvalidValueError: ``max_num_seqs`` is not a whole number >= 1,
            ``gpu_memory_utilization`` not in (0, 1], ``enforce_eager`` not true or false,
            or ``sleep_level`` not 1 or 2.
    """
    out: dict[str, Any] = {}
    if vllm_v0:
        out["vllm_v0"] = True
    if sleep_level is not None:
        if sleep_level not in (1, 2) or isinstance(sleep_level, bool):
            raise InvalidValueError(
                "must be 1 (weights kept in host memory) or 2 (weights dropped): vLLM's sleep"
                " levels",
                field=fields.get("sleep_level", "sleep_level"), value=sleep_level, file=file,
            )  # fmt: skip
        out["sleep_level"] = sleep_level
    seqs = given_count(max_num_seqs, field=fields.get("max_num_seqs", "max_num_seqs"), file=file)
    if seqs:
        out["max_num_seqs"] = seqs
    share = given_share(
        gpu_memory_utilization,
        field=fields.get("gpu_memory_utilization", "gpu_memory_utilization"),
        file=file,
    )
    if share is not None:
        out["gpu_memory_utilization"] = share
    eager = flag(enforce_eager, field=fields.get("enforce_eager", "enforce_eager"), file=file)
    if eager is not None:
        out["cuda_graphs"] = not eager
    return out or None


LORA_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    # Hugging Face (peft target_modules; ROLL's lora_target)
    "q_proj": ("q",), "k_proj": ("k",), "v_proj": ("v",), "o_proj": ("o",),
    "gate_proj": ("gate",), "up_proj": ("up",), "down_proj": ("down",),
    "q_a_proj": ("q",), "q_b_proj": ("q",), "kv_a_proj_with_mqa": ("k", "v"),
    "kv_b_proj": ("k", "v"), "qkv_proj": ("q", "k", "v"), "gate_up_proj": ("gate", "up"),
    # Megatron-Bridge (verl's Megatron lora.target_modules; NeMo RL's peft)
    "linear_qkv": ("q", "k", "v"), "linear_proj": ("o",), "linear_fc1": ("gate", "up"),
    "linear_fc2": ("down",), "linear_q": ("q",), "linear_k": ("k",), "linear_v": ("v",),
    "linear_fc1_gate": ("gate",), "linear_fc1_up": ("up",), "linear_q_proj": ("q",),
    "linear_q_down_proj": ("q",), "linear_q_up_proj": ("q",),
    "linear_kv_down_proj": ("k", "v"), "linear_kv_up_proj": ("k", "v"),
}  # fmt: skip
"""Module names frameworks give LoRA targets by, and the projections (``Lora.targets``)
each adapts."""


def lora(rank: Any, targets: Any = None) -> dict[str, Any] | None:
    """The native per-role ``lora`` section from a framework's rank and target modules.

    ``targets``: ``all-linear``, a list of module names or a comma-separated string of them
    (:data:`LORA_MODULE_NAMES`); names rlplex does not know (regular expressions, a model's
    own module names) are left out, and with none known the adapters go on every
    projection (``all-linear``). None when the rank is not a positive integer (LoRA off).
    """
    r = optional_int(rank)
    if r is None:
        return None
    names: list[str] = []
    if isinstance(targets, str) and targets != "all-linear":
        names = [n.strip() for n in targets.split(",") if n.strip()]
    elif isinstance(targets, list | tuple):
        names = [n for n in targets if isinstance(n, str)]
    known = [p for n in names for p in LORA_MODULE_NAMES.get(n.rsplit(".", 1)[-1], ())]
    out: dict[str, Any] = {"rank": r}
    if known and set(known) != {"q", "k", "v", "o", "gate", "up", "down"}:
        out["targets"] = sorted(set(known), key=("q", "k", "v", "o", "gate", "up", "down").index)
    return out


def refuse_non_rl(what: str, *, file: str, field: str | None = None) -> NoReturn:
    """Refuse a file that is not an RL step (SFT, DPO, evaluation ...), saying what it is."""
    raise ConfigError(
        f"this is {what}, not an RL training step (PPO/GRPO); rlplex plans RL steps only",
        field=field,
        file=file,
    )
