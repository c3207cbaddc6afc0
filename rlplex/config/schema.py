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
    (``--set roles.R.devices=...``, ``--auto``) rescales it the same way. A role the
    file leaves to the search (``devices: auto``) counts the whole cluster, as the
    search prices it.
    """
    warnings: tuple[str, ...] = ()
    """Things the config means that a user may not expect (printed by the CLI)."""
    efficiency: Efficiency | None = None
    """Achieved fractions of peak per stage kind (estimates; ``rlplex calibrate`` fits them)."""
    estimated: frozenset[str] = frozenset()
    """Dotted paths of the figures filled by the estimator or the GPU preset, not given
    (``pipeline.stages.train.seconds``, ``roles.actor_train.states``, ``cluster.gpu_memory_gb``)."""
    lacking: tuple[str, ...] = ()
    """What an imported file left the estimator short of, as its loading warning names it
    (``workload.prompt_tokens``: the file's workload is held back until its prompt length
    is given); empty for a native file, whose missing inputs the estimator names itself."""

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
    """One ``roles.NAME`` section as the file writes it; :mod:`rlplex.config.build` turns it
    into a :class:`~rlplex.resources.cluster.Role` (devices parsed, world size checked)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    devices: str | StrictInt | list[StrictInt] | None = None
    """Global GPU ranks the role occupies: a range or union (``"0-3,8-11"``), ``"all"``, a
    Python range (``"list(range(0,8))"``), a list of ranks, one rank, or ``"auto"`` (the
    planner's placement search chooses them); None: a CPU role, which may hold no states."""
    num_gpus_per_worker: StrictInt = Field(1, ge=1, le=MAX_GPUS)
    """GPUs one worker drives (an inference engine's tensor x pipeline parallel size); it must
    divide the role's GPU count, and a worker stays inside one node unless it spans whole
    nodes."""
    world_size: StrictInt | None = Field(None, ge=1, le=MAX_GPUS)
    """Number of workers. A GPU role's is ``len(devices) // num_gpus_per_worker`` and a value
    that disagrees is refused; a CPU role's is its worker count. None: that quotient, or 1
    for a CPU role (and for an ``auto`` role until it is placed)."""
    states: dict[StateKind, StrictFloat] = Field(default_factory=dict)
    """GB per device of each state the role holds on its GPUs (``weights``, ``optimizer``,
    ``grads``, ``kv_cache``), each at most ``cluster.gpu_memory_gb``. Given (even ``{}``), it
    is kept as given; absent, the estimator fills it when the config gives a model, a
    workload and a GPU preset, else the role holds none."""
    host_states: dict[StateKind, StrictFloat] = Field(default_factory=dict)
    """GB per device the role keeps in host memory the whole step, never on a GPU (a CPU
    optimizer's state); only a GPU role may hold them. Default: none, or what the estimator
    finds (a CPU-offloaded optimizer) for a state that ``states`` does not hold."""
    model: str | None = None
    """The role's model: a preset name, or a local Hugging Face folder or ``config.json``
    (estimates); None: the config's top-level ``model``."""
    parallel: Parallel | None = None
    """Tensor / pipeline / expert / sequence parallel sizes, ZeRO or FSDP sharding and
    recomputation (estimates); the sizes must tile the role's devices. None: each field's
    default (tensor parallel ``num_gpus_per_worker`` for a generating role, else 1; data
    parallel the rest of the devices; no sharding)."""
    precision: Precision = "bf16"
    """Precision of the role's weights and compute (estimates); ``fp8`` quantizes only an
    inference engine's weights (other roles keep bf16 weights and cast each matmul's
    inputs)."""
    optimizer: OptimizerName = "adamw"
    """Optimizer of a trained role (estimates): AdamW keeps fp32 master weights and two
    moments."""
    rollout: Rollout | None = None
    """Inference-engine settings of a generating role (estimates): max_num_seqs, memory
    share, CUDA graphs, partial rollout; None: the engine's defaults."""
    lora: Lora | None = None
    """LoRA adapters on the role's frozen model (estimates); None: the whole model is trained
    and synced."""


class PipelineSpec(BaseModel):
    """The ``pipeline`` section as the file writes it: YAML stages, or a Python function that
    builds them; :mod:`rlplex.config.build` turns it into a
    :class:`~rlplex.dag.pipeline.Pipeline`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: Mode = "sync"
    """``sync``: steps do not overlap. ``async``: generation runs ahead of training by up to
    ``max_staleness`` steps. With ``python``, the function's mode unless the file gives one."""
    max_staleness: StrictInt = Field(0, ge=0, le=MAX_STALENESS)
    """Async: steps generation may run ahead of training (generation of step t+1+k waits only
    for the weight sync of step t); 0, the default, runs like sync (and warns in async mode).
    Ignored in sync mode. Under a placement search (``devices: auto``, ``rlplex plan --auto``),
    the largest k the async search tries (0: up to 2). With ``python``, the function's value
    unless the file gives one."""
    stages: dict[str, dict[str, Any] | None] | None = None
    """The step's stages by name, each a :class:`~rlplex.dag.stage.Stage` body (a null body is
    an empty one); required without ``python``. Next to ``python``, it may only set the cost
    fields (``seconds``, ``memory_gb``, ``at_devices``, ``scaling``, ``share``, ``judge``,
    ``micro_batch_size``, ``micro_batch_tokens``, ``packing``) of the function's stages."""
    python: str | None = None
    """``"module:function"`` or ``"file.py:function"`` (read relative to the config's folder):
    a function returning the :class:`~rlplex.dag.pipeline.Pipeline`, first run in a child
    process unless it is rlplex's own; None: the pipeline is ``stages``."""

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
