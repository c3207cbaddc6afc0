"""The native config's schema: the checked :class:`Config` and the raw role and pipeline sections.

:class:`Config` is what every other package reads; :class:`RoleSpec` and
:class:`PipelineSpec` are the sections as a file writes them, before devices
are parsed and the pipeline built (:mod:`rlplex.config.build`). The size
limits live here with the fields they bound.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

from rlplex.dag.pipeline import Mode, Pipeline
from rlplex.resources.cluster import DRIVER, Cluster, Role, StateKind, driver_role
from rlplex.resources.devices import MAX_GPUS
from rlplex.resources.inputs import (
    Efficiency,
    Lora,
    OptimizerName,
    Parallel,
    Precision,
    Rollout,
    Workload,
)

MAX_ROLES = 1_000
"""Roles one config may define (a real RL job has fewer than 10)."""


MAX_STAGES = 1_000
"""Stages one step may have (a real RL step has fewer than 20)."""


MAX_STALENESS = 64
"""Cap on ``max_staleness`` (it bounds the steps the planner unrolls, 3 (k + 1) + 4); it may exceed
the stage count, since an inference engine holds up to k steps' requests (NeMo RL's
``max_trajectory_age_steps`` of 8 with six stages)."""


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


class RoleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    devices: str | StrictInt | list[StrictInt] | None = None
    num_gpus_per_worker: StrictInt = Field(1, ge=1, le=MAX_GPUS)
    world_size: StrictInt | None = Field(None, ge=1, le=MAX_GPUS)
    states: dict[StateKind, StrictFloat] = Field(default_factory=dict)
    host_states: dict[StateKind, StrictFloat] = Field(default_factory=dict)
    model: str | None = None
    parallel: Parallel | None = None
    precision: Precision = "bf16"
    optimizer: OptimizerName = "adamw"
    rollout: Rollout | None = None
    lora: Lora | None = None


class PipelineSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: Mode = "sync"
    max_staleness: StrictInt = Field(0, ge=0, le=MAX_STALENESS)
    stages: dict[str, dict[str, Any] | None] | None = None
    python: str | None = None

    @field_validator("stages", mode="before")
    @classmethod
    def _stages_by_name(cls, value: Any) -> Any:
        # ROLL and verl users write lists of stages; say what the native form is instead of
        # pydantic's "must be a valid dictionary".
        if isinstance(value, list):
            raise ValueError(
                "must map each stage's name to its fields (`generate: {role: actor_infer,"
                " seconds: 120}`), not be a list"
            )
        return value


TOP_LEVEL_KEYS = ("cluster", "roles", "pipeline", "model", "workload", "efficiency")
