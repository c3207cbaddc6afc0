"""The native config file: cluster, roles and pipeline in one YAML document.

One module per job: :mod:`~rlplex.config.schema` (the :class:`Config` model
and the raw sections), :mod:`~rlplex.config.loading` (:func:`load_config`:
reading, ``--set`` routing, ``--costs``), :mod:`~rlplex.config.formats` (the
registry of formats and their importers), :mod:`~rlplex.config.build`
(:func:`config_from_dict`), :mod:`~rlplex.config.checks` and
:mod:`~rlplex.config.sandbox` (user pipeline code run in a forked child).

:func:`load_config` reads a file (native, or ROLL / RLinf / verl / NeMo RL through the
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
- ``pipeline.max_staleness``: at most :data:`MAX_STALENESS` (it may exceed the stage count:
  an engine holds that many steps' requests, NeMo RL's ``max_trajectory_age_steps``);
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

from rlplex.config.build import ASYNC_STALENESS_0, config_from_dict
from rlplex.config.checks import (
    check_finite,
    check_override_targets,
    check_pipeline_size,
    validate_model,
)
from rlplex.config.formats import FORMATS, IMPORTERS, ConfigFormat, detect_format, to_native
from rlplex.config.loading import NativeForm, load_config, load_native, raw_file
from rlplex.config.sandbox import PROBE_TIMEOUT_S, import_pipeline_module, probe_pipeline_function
from rlplex.config.schema import MAX_ROLES, MAX_STAGES, MAX_STALENESS, Config

_convert = to_native
"""The name ``bench/estimate.py`` used before the split (kept importable)."""

__all__ = [
    "ASYNC_STALENESS_0",
    "FORMATS",
    "IMPORTERS",
    "MAX_ROLES",
    "MAX_STAGES",
    "MAX_STALENESS",
    "PROBE_TIMEOUT_S",
    "Config",
    "ConfigFormat",
    "NativeForm",
    "check_finite",
    "check_override_targets",
    "check_pipeline_size",
    "config_from_dict",
    "detect_format",
    "import_pipeline_module",
    "load_config",
    "load_native",
    "probe_pipeline_function",
    "raw_file",
    "to_native",
    "validate_model",
]
