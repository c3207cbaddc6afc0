"""What the importers share: default costs and states, the default step, ``--costs``.

A ROLL, RLinf or verl file says where roles live but not what a step costs.
The importers therefore build a *default pipeline* over the roles they found
and fill in documented default stage costs and state sizes, which a
``--costs FILE`` overrides::

    stages:                      # any stage field: seconds, memory_gb, at_devices, scaling
      generate: {seconds: 95, memory_gb: 12}
      train: {seconds: 60}
    states:                      # GB per device, merged over the defaults
      actor_infer: {kv_cache: 40}
    cluster:                     # native cluster fields
      gpu_memory_gb: 141

The default step (every stage's ``seconds`` measured on its role's devices):

=============  ==========================================  =========  =========
stage          role                                        seconds    memory_gb
=============  ==========================================  =========  =========
generate       actor_infer                                 120        10
reward         reward (GPU reward model) / rewards (CPU)   10         0
ref_logprob    reference (only if present)                 20         6
old_logprob    inference if present, else actor_train      20         6
values         critic (only if present)                    20         6
advantage      driver                                      1          0
critic_train   critic (only if present)                    60         20
train          actor_train                                 80         20
weight_sync    actor_train -> actor_infer                  model      -
=============  ==========================================  =========  =========

A critic gives the PPO shape, no critic the GRPO shape. Default states (GB
per device, a 7B model): see :data:`DEFAULT_STATES`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlplex.errors import ConfigError
from rlplex.resources.cluster import STATE_KINDS

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


class CostsFile(BaseModel):
    """The ``--costs FILE`` document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stages: dict[str, StageCost] = Field(default_factory=dict)
    """Per-stage cost fields, merged over the defaults (or the native file's)."""
    states: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Per-role GB per device of each state, merged over the defaults."""
    cluster: dict[str, Any] = Field(default_factory=dict)
    """Native cluster fields (``gpu_memory_gb``, copy speeds ...)."""


def check_costs(data: Any, file: str) -> dict[str, Any]:
    """Validate a ``--costs`` document; errors name ``file`` and the field path."""
    if not isinstance(data, dict):
        raise ConfigError("a costs file must be a mapping with 'stages'", value=data, file=file)
    try:
        parsed = CostsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"] if p != "[key]")
        msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ConfigError(
            msg.replace("Input should be", "must be"),
            field=path,
            value=first.get("input"),
            file=file,
        ) from None
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
    for name, fields in (costs.get("stages") or {}).items():
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
    return result


def default_pipeline(roles: Mapping[str, Any], mode: str = "sync", staleness: int = 0) -> dict:
    """The default step over the imported roles (see the module docstring), as native YAML."""
    stages: dict[str, dict[str, Any]] = {}

    def add(name: str, role: str, after: list[str], **extra: Any) -> None:
        stages[name] = {"role": role, **DEFAULT_STAGES[name], "after": after, **extra}

    add("generate", "actor_infer", [])
    reward_role = "reward" if "reward" in roles else "rewards" if "rewards" in roles else "driver"
    add("reward", reward_role, ["generate"])
    scores = ["reward"]
    if "reference" in roles:
        add("ref_logprob", "reference", ["generate"])
        scores.append("ref_logprob")
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


def positive_int(value: Any, *, field: str, file: str) -> int:
    """An integer in 1..MAX_GPUS from an imported file, or a ConfigError naming the field.

    Every count an importer reads (nodes, GPUs per node, parallel sizes) sizes a
    list of GPUs, so it is bounded before any list is built from it.
    """
    from rlplex.resources.devices import MAX_GPUS

    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("must be an integer >= 1", field=field, value=value, file=file)
    if value > MAX_GPUS:
        raise ConfigError(f"must be at most {MAX_GPUS:,}", field=field, value=value, file=file)
    return value
