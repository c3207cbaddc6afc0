"""Read a NeMo RL GRPO or PPO config: the cluster, colocated or split generation, the trainers.

NeMo RL (NVIDIA-NeMo/RL) configs inherit by path: ``defaults: ../../grpo_math_1B.yaml``
(or a list of paths) names parent files merged under the file's own keys; a section with
``_override_: true`` replaces the parents' instead (nemo_rl/utils/config.py; see
:func:`~rlplex.resources.importers.compose.inherit`). Interpolations such as
``${mul:${policy.max_total_sequence_length}, ${policy.train_micro_batch_size}}`` are
resolved with NeMo RL's resolvers. rlplex reads, with the source of each rule
(nemo_rl/algorithms/grpo.py ``setup`` and ``grpo_train``, ppo.py, nemo_rl/models/policy/
lm_policy.py, nemo_rl/models/generation/vllm/), as NeMo RL runs them today:

- Cluster: ``cluster.num_nodes`` x ``cluster.gpus_per_node``. A reward-model environment
  (``reward_model`` among the data's ``env_name``s, or ``env.reward_model.enabled`` in older
  releases) takes ``env.reward_model.resources``: on one node its last ``gpus_per_node``
  GPUs, otherwise its ``num_nodes`` last nodes; a GPU role ``reward`` holding
  ``env.reward_model.model_name``, which scores the responses.
- Generation (``policy.generation``, vLLM only): one engine per ``vllm_cfg.tensor_parallel_size
  x pipeline_parallel_size`` GPUs, the engine's ``parallel`` those sizes and
  ``expert_parallel_size``. ``colocated.enabled`` (the default) puts the engines on every
  policy GPU beside the trainer; they sleep at level 1 while it trains (NeMo RL's vLLM
  worker calls ``llm.sleep(level=1)``). Otherwise the engines get ``colocated.resources``:
  when the policy has one node, its GPUs after the trainer's ``gpus_per_node`` minus theirs;
  on several, ``num_nodes`` whole nodes after the trainer's (the train cluster is made
  first). ``vllm_cfg.precision: fp8`` runs the engines in FP8; ``gpu_memory_utilization``,
  ``enforce_eager`` and ``vllm_kwargs.max_num_seqs`` are the engine's settings.
  ``refit_transport: nccl_reshard`` (experimental; generation on its own GPUs, a Megatron
  trainer without expert tensor parallelism, engines of one pipeline stage, as NeMo RL
  checks; its precision pairings are not checked) is ``rollout.weight_sync: resharded``;
  the other transports (``nixl``, ``vllm_zmq_sparse``) are priced as the default NCCL
  refit (``overlapped``); PPO refuses every transport but the default, and so does rlplex.
- Trainer: Megatron (``policy.megatron_cfg.enabled``: tensor, pipeline, expert and context
  parallel sizes; ``optimizer.use_distributed_optimizer``: ZeRO-1;
  ``optimizer.optimizer_cpu_offload``: a CPU optimizer; ``activation_checkpointing``;
  ``fp8_cfg.enabled``: FP8; ``peft``: LoRA) or DTensor (``policy.dtensor_cfg.enabled``:
  FSDP2 over the data-parallel ranks, ``tensor_parallel_size``, ``context_parallel_size``,
  ``expert_parallel_size``, ``activation_checkpointing``, ``cpu_offload``: parameters and
  optimizer in host memory, ``lora_cfg``); exactly one of the two, as lm_policy.py asserts.
- Reference log-probs: when ``loss_fn.reference_policy_kl_penalty`` is above 0 (absent:
  NeMo RL's default 0.01, ``ClippedPGLossConfig``) and
  ``skip_reference_policy_logprobs_calculation`` is not set (PPO's default: set). The
  reference's full weights are swapped into the trainer's workers from host memory, LoRA or
  not: a ``reference`` role on the trainer's GPUs with its sizes.
- On-policy distillation (GRPO's ``on_policy_distillation`` with ``non_colocated_teachers.
  enabled``; nemo_rl/algorithms/opd.py, nemo_rl/models/policy/teacher_worker_group.py,
  docs/about/algorithms/mopd.md): each teacher checkpoint of ``teacher_model_by_agent_name``
  (aliases that share one are one worker group with ``deduplicate_shared_teacher_checkpoints``,
  the default) is a GPU role ``teacher_ALIAS``, named by its first alias, on nodes the policy
  gives up, after the reward model's: ``num_nodes`` nodes, the first ``gpus_per_node`` GPUs
  of each (``default_teacher_cfg`` under the alias's ``teacher_overrides``; 1 node of 8 GPUs
  by default). It holds its checkpoint (``model`` where it is not the policy's) in Megatron
  for inference: tensor, pipeline, context and expert parallel sizes from its cfg, the
  policy's ``sequence_parallel`` (unless its Megatron overrides set it) and FP8; NeMo RL
  reads no teacher's ``precision``. In async GRPO the trajectory collector has each teacher
  score the finished rollouts, one forward pass for the sampled tokens' log-probs: a stage
  ``ref_logprob_teacher_ALIAS`` after the reward, before training, whose OPD advantage
  (``adv_estimator.name: opd``) is teacher minus student log-prob. NeMo RL routes each
  sample to one teacher by its NeMo Gym agent (trajectory_collector.py
  ``_compute_teacher_logprobs``); the split is data, not config, so rlplex assumes an even
  one: each of N teachers' passes has ``share`` 1/N of the step's rollouts (the teachers
  run side by side). Sync GRPO reserves the teachers but never calls them: roles
  without a stage. Refused as NeMo RL refuses it: teachers without ``vllm_cfg.async_engine``,
  a DTensor policy, a teacher wider than a node or whose GPUs its tensor x pipeline x
  context parallel sizes do not tile, a ``default_teacher_alias`` that maps no checkpoint;
  ``adv_estimator.name: opd`` without non-colocated teachers in async GRPO (NeMo RL has no
  colocated teacher: its first step raises "OPD requires teacher_logprobs") or without the
  student's log-probs (``force_on_policy_ratio`` and no ``seq_logprob_error_threshold``).
  A teacher's pass runs its own ``micro_batch_size`` (4 by default: the stage's
  ``micro_batch_size``), with sequence packing the policy's ``logprob_mb_tokens`` as the
  workload's.
- Old log-probs: a pass of the trainer every step, except with
  ``loss_fn.force_on_policy_ratio`` and no ``grpo.seq_logprob_error_threshold`` (the ratio is
  1 by construction; NeMo RL skips the pass).
- Async GRPO (``grpo.async_grpo.enabled``; PPO's ``ppo.async_ppo``): ``mode: async``,
  ``max_staleness`` = ``max_trajectory_age_steps``; ``in_flight_weight_updates`` lets the
  engines decode through the weight update. NeMo RL refuses it with colocated vLLM
  generation, and so does rlplex. The single-controller path (an ``async_rl`` section with
  ``data_plane.enabled``): ``max_staleness`` = its sampler's bound, async above 0
  (:func:`_single_controller`).
- PPO (a ``ppo`` section in place of ``grpo``): the value model (``value``: its
  ``model_name``, Megatron or DTensor sizes as the policy's) is a ``critic`` role on the
  trainer's GPUs; ``ppo.ppo_epochs`` (default 4) passes over each step's batch
  (``workload.epochs``).
- Rewards without a reward model: the environments' ``num_workers`` CPU workers (every
  ``env_name`` of ``data.default``, ``data.train``, ``data.validation``, or ``data.env_name``,
  else ``math``).
- Workload: ``num_prompts_per_step`` x ``num_generations_per_prompt``; optimizer steps = that
  / ``policy.train_global_batch_size``; ``train_micro_batch_size``, ``logprob_batch_size``;
  ``sequence_packing`` or ``dynamic_batching`` (not both, as lm_policy.py asserts;
  ``train_mb_tokens``, ``logprob_mb_tokens``: micro-batches under a token budget), neither:
  micro-batches padded to their longest sequence. Lengths: a response of up to
  ``generation.max_new_tokens`` within the engine's ``vllm_cfg.max_model_len`` (default
  ``max_total_sequence_length``); a prompt of up to ``data.max_input_seq_length`` only where
  the file bounds it below that (NeMo RL's default is the total itself, which says nothing of
  a prompt's length): otherwise ``workload.prompt_tokens`` is left for ``--set``. Means: half
  the maxima, as every importer's. Dynamic sampling (``use_dynamic_sampling``, DAPO) generates
  ``batch_multiplier`` times the prompts it trains on: ``workload.generated_per_trained``
  (at least; more when a round keeps too few groups).
- The single controller (``workload.controller``): NeMo RL pads each pass's batch to the
  step's longest sequence (``batched_message_log_to_flat_message``), about 27 bytes per
  token slot out (int64 ids and mask, fp32 advantages and log-probs) and 3 back. Releases
  before v0.7 sent each data-parallel shard to every tensor/pipeline/context-parallel rank
  by value: ``--set workload.controller.per_rank=true`` for them (they also computed the
  reference log-probs at a KL penalty of 0 unless told to skip them).
- Not an RL step: a file without a ``grpo`` or ``ppo`` section (SFT, DPO, reward-model
  training, distillation, evaluation) is refused, saying which.
- Values as NeMo RL's pydantic ``MasterConfig`` converts them (grpo.py, ppo.py:
  ``MasterConfig(**config)``): a typed ``bool`` field's ``"no"`` or ``0`` is false, a typed
  ``int``'s ``"8"`` or ``8.0`` is 8, a typed ``float``'s ``"0.01"`` is 0.01; the sections'
  ``enabled`` switches are ``Literal[True] | Literal[False]`` (a bool or 1/0); the untyped
  sections (``env``, and ``vllm_cfg`` / ``vllm_kwargs``, which its ``GenerationConfig`` does
  not declare) reach NeMo RL's code as written: a string there is refused. What pydantic
  refuses, rlplex refuses, naming the field.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.importers.common import (
    DEFAULT_STAGES,
    FlagReading,
    apply_costs,
    flag,
    get_path,
    given_number,
    given_tokens,
    gpu_role,
    lora,
    parallel,
    positive_int,
    refuse_non_rl,
    rollout,
)
from rlplex.resources.importers.compose import inherit
from rlplex.resources.placement import check_worker_layout

_GEN = "policy.generation"
_VLLM = f"{_GEN}.vllm_cfg"

CONTROLLER = {"padding": "longest", "bytes_per_token": 27, "returned_bytes_per_token": 3}
"""NeMo RL's single controller (``workload.controller``; docs/cost-model.md)."""

_NOT_RL = (
    ("sft", "a NeMo RL SFT config"),
    ("dpo", "a NeMo RL DPO config"),
    ("rm", "a NeMo RL reward-model training config"),
    ("distillation", "a NeMo RL distillation config"),
    ("eval", "a NeMo RL evaluation config"),
)


def is_nemo_rl(data: Mapping[str, Any]) -> bool:
    """Whether a file (as written, before inheritance) looks like a NeMo RL config: a
    ``policy`` section with NeMo RL's keys, an ``eval`` section beside ``generation``, or
    ``defaults`` naming parent files by path."""
    policy = data.get("policy")
    if isinstance(policy, Mapping) and any(
        k in policy for k in ("model_name", "megatron_cfg", "dtensor_cfg", "generation")
    ):
        return True
    if isinstance(data.get("eval"), Mapping) and isinstance(data.get("generation"), Mapping):
        return True  # an evaluation config (examples/configs/evals), refused as not RL
    parents = data.get("defaults")
    entries = [parents] if isinstance(parents, str) else parents
    return (
        isinstance(entries, list)
        and bool(entries)
        and all(isinstance(e, str) and e.endswith((".yaml", ".yml")) for e in entries)
    )


_UNTYPED = ("env.", f"{_VLLM}.", f"{_GEN}.vllm_kwargs.")
"""Sections NeMo RL's pydantic ``MasterConfig`` leaves untyped (``env: dict[str, Any]``;
``vllm_cfg`` and ``vllm_kwargs``, keys its ``GenerationConfig`` does not declare): their
values reach NeMo RL's code as written."""

_LITERAL_SWITCHES = (
    "megatron_cfg.enabled", "dtensor_cfg.enabled", "sequence_packing.enabled",
    "dynamic_batching.enabled", "peft.enabled", "lora_cfg.enabled",
)  # fmt: skip
"""Switches NeMo RL types ``Literal[True] | Literal[False]`` (the union of a section's enabled
and disabled forms, nemo_rl/models/policy/__init__.py): pydantic takes a bool or 1/0 only."""


class _Reader:
    """Reads of a NeMo RL config as NeMo RL's pydantic ``MasterConfig`` (grpo.py, ppo.py)
    converts them: a typed field's ``"8"`` or ``8.0`` is 8, its ``"false"`` or ``"no"``
    false; an untyped one's (:data:`_UNTYPED`) value is taken as written."""

    def __init__(self, data: Mapping[str, Any], file: str, missing: tuple[str, ...]) -> None:
        self.data, self.file, self.missing = data, file, missing

    def get(self, path: str, default: Any = None) -> Any:
        value = get_path(self.data, path, default)
        return default if value is None else value

    def hint(self) -> str:
        if not self.missing:
            return ""
        return f" (parent files rlplex could not find: {', '.join(self.missing)})"

    def lax(self, path: str, kind: type, default: Any = None) -> Any:
        """The value at ``path`` as pydantic's lax mode converts a field of type ``kind``
        (``int``: ``"8"``, ``8.0`` -> 8; ``float``: ``"0.01"`` -> 0.01) where NeMo RL types
        the field; else, or when pydantic would refuse it too, unchanged. A bool stays a
        bool (pydantic reads true as 1; rlplex refuses it for a number)."""
        value = self.get(path, default)
        if path.startswith(_UNTYPED) or isinstance(value, bool):
            return value
        if not isinstance(value, str | int | float) or value == "???":
            return value
        try:
            return TypeAdapter(kind).validate_python(value)
        except ValidationError:
            return value

    def int(self, path: str, default: Any = None) -> int:
        value = self.lax(path, int, default)
        return positive_int(value, field=path, file=self.file, hint=self.hint())

    def size(self, path: str) -> int | None:
        """An optional count: None when absent, else an integer >= 1 (or a ConfigError)."""
        return None if self.get(path) is None else self.int(path)

    def tokens(self, path: str) -> int | None:
        """An optional token count: None when absent, else an integer in 1..MAX_TOKENS (or
        an InvalidValueError); OmegaConf's ``???`` is a value still to be filled: missing."""
        value = self.lax(path, int)
        if value == "???":
            return self.int(path)
        return given_tokens(value, field=path, file=self.file, hint=self.hint())

    def number(self, path: str, default: float) -> float:
        """A number NeMo RL types ``float`` (a coefficient, a multiplier): ``default`` when
        absent, else what pydantic makes of it, else an InvalidValueError."""
        value = given_number(self.lax(path, float), field=path, file=self.file)
        return default if value is None else value

    def flag(self, path: str, default: bool = False) -> bool:
        """A switch as NeMo RL's config types it (:func:`~.common.flag`): a pydantic
        ``bool``, a literal ``enabled`` (:data:`_LITERAL_SWITCHES`), or untyped."""
        reading: FlagReading = "pydantic"
        if path.startswith(_UNTYPED):
            reading = "truthy"
        elif path.endswith(_LITERAL_SWITCHES):
            reading = "literal"
        value = flag(self.get(path), field=path, file=self.file, default=default, reading=reading)
        assert value is not None
        return value


_SC_KNOBS = {
    "in_order": "max_lookahead_versions",
    "weight_fifo": "max_staleness_versions",
    "windowed": "max_staleness_versions",
    "ready_first": "max_staleness_versions",
}
"""The single controller's built-in samplers -> the knob that bounds how many weight versions
generation runs ahead of training (staleness_sampler.py ``*SamplerConfig``, each 1 by
default)."""


def _single_controller(r: _Reader, algo: str) -> int | None:
    """The staleness of NeMo RL's single-controller GRPO (``run_grpo_single_controller.py``;
    its docs/guides/single-controller.md), None for the legacy path.

    A GRPO file with an ``async_rl`` section and the TransferQueue data plane that path
    requires (``data_plane.enabled``), and without legacy ``async_grpo`` (which the SC entry
    point refuses, and which the legacy entry point reads instead), runs there. Its sampler
    bounds how far generation runs ahead of training: ``in_order``'s
    ``max_lookahead_versions``, ``weight_fifo``'s, ``windowed``'s and ``ready_first``'s
    ``max_staleness_versions`` (1 when not set; 0 is sync). ``windowed`` and ``ready_first``
    do not gate the rollout (it produces until the buffer fills, groups that age out of
    the window are dropped): that extra generation is not modelled. A ``custom`` sampler's
    bound is its own code's and is refused, naming the field.
    """
    if (
        algo != "grpo"
        or not isinstance(r.get("async_rl"), Mapping)
        or not r.flag("data_plane.enabled")
        or r.flag("grpo.async_grpo.enabled")
    ):
        return None
    name = r.get("async_rl.sampler.name", "in_order")
    knob = _SC_KNOBS.get(name) if isinstance(name, str) else None
    if knob is None:
        raise ConfigError(
            "is not a built-in single-controller sampler ("
            + ", ".join(_SC_KNOBS)
            + "): rlplex cannot know how far a custom one lets generation run ahead; name"
            " the built-in sampler it behaves like",
            field="async_rl.sampler.name", value=name, file=r.file,
        )  # fmt: skip
    field = f"async_rl.sampler.{knob}"
    value = r.lax(field, int, 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            "must be a whole number >= 0 (NeMo RL's NonNegativeInt)",
            field=field, value=value, file=r.file,
        )  # fmt: skip
    return value


def _algorithm(r: _Reader) -> str:
    """``grpo`` or ``ppo``: the section that holds the step's settings; anything else is
    refused as not an RL step."""
    for algo in ("grpo", "ppo"):
        if isinstance(r.data.get(algo), Mapping):
            return algo
    for key, what in _NOT_RL:
        if isinstance(r.data.get(key), Mapping):
            refuse_non_rl(what, file=r.file, field=key)
    if r.missing:
        raise ConfigError(
            "is missing: the file has no grpo or ppo section" + r.hint(), field="grpo",
            file=r.file,
        )  # fmt: skip
    refuse_non_rl("a NeMo RL config without a grpo or ppo section", file=r.file, field="grpo")


def _env_names(r: _Reader) -> list[str]:
    """The environments the data names (nemo_rl/data/datasets/utils.py: ``env_name`` of the
    ``default``, ``train`` and ``validation`` entries, each a name, a list of names, or a list
    of dataset entries; ``data.env_name`` in older releases)."""
    names: list[str] = []

    def add(node: Any) -> None:
        if isinstance(node, str):
            names.append(node)
        elif isinstance(node, Mapping):
            add(node.get("env_name"))
        elif isinstance(node, list):
            for item in node:
                add(item)

    for key in ("default", "train", "validation"):
        add(r.get(f"data.{key}"))
    add(r.get("data.env_name"))
    return list(dict.fromkeys(names))


def _reward_model(r: _Reader) -> tuple[int, int] | None:
    """(nodes, GPUs per node) of a reward-model environment, or None without one."""
    if "reward_model" not in _env_names(r) and not r.flag("env.reward_model.enabled"):
        return None
    res = "env.reward_model.resources"
    return r.int(f"{res}.num_nodes"), r.int(f"{res}.gpus_per_node")


_OPD = "on_policy_distillation"
_TEACHERS = f"{_OPD}.non_colocated_teachers"
_BY_AGENT = f"{_OPD}.teacher_model_by_agent_name"
_RESOURCE_KEYS = frozenset({
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "num_nodes", "gpus_per_node", "precision",
    "micro_batch_size", "megatron_cfg_overrides",
})  # fmt: skip
"""``TeacherResourceConfig``'s fields (nemo_rl/algorithms/opd.py); any other key of a
teacher's cfg is a Megatron setting, folded into its ``megatron_cfg_overrides``."""


class _Teacher(NamedTuple):
    """A non-colocated teacher worker group as NeMo RL resolves it (nemo_rl/models/policy/
    teacher_worker_group.py ``create_teacher_configs_from_opd_config``), named by the first
    alias of its checkpoint, as NeMo RL names the group ``teacher_ALIAS``."""

    alias: str
    model: str
    nodes: int
    gpus_per_node: int
    parallel: dict[str, Any] | None
    micro_batch_size: int = 4
    """Sequences per micro-batch of its log-prob pass (``get_logprobs``' default)."""


def _teacher_field(own: Mapping[str, Any], alias: str, key: str) -> str:
    """Where a teacher's ``key`` comes from: its alias's ``teacher_overrides`` entry when it
    gives the key, else ``default_teacher_cfg`` (NeMo RL merges the one over the other)."""
    if key in own:
        return f"{_TEACHERS}.teacher_overrides.{alias}.{key}"
    return f"{_TEACHERS}.default_teacher_cfg.{key}"


def _teachers(r: _Reader, algo: str, per_node: int) -> list[_Teacher]:
    """The non-colocated on-policy-distillation teachers of a GRPO config (none unless both
    ``on_policy_distillation.enabled`` and its ``non_colocated_teachers.enabled``; PPO reads
    no teachers), one per checkpoint when ``deduplicate_shared_teacher_checkpoints`` (the
    default), as grpo.py ``setup`` and nemo_rl/algorithms/opd.py reserve them.

    Each loads its checkpoint into Megatron for inference only (teacher_worker_group.py): the
    policy's ``megatron_cfg`` with the teacher's tensor, pipeline, context and expert parallel
    sizes and its ``megatron_cfg_overrides`` (``sequence_parallel`` among them) over it.

    Raises:
        ConfigError: what NeMo RL refuses at setup: teachers without vLLM's async engine
            (grpo.py asserts ``async_engine``), a ``default_teacher_alias`` that maps no
            checkpoint, a teacher wider than a node, GPUs its tensor x pipeline x context
            parallel sizes do not tile, a DTensor policy (teachers run Megatron only);
            a checkpoint that is not a name.
    """
    if algo != "grpo" or not r.flag(f"{_OPD}.enabled") or not r.flag(f"{_TEACHERS}.enabled"):
        return []
    if not r.flag(f"{_VLLM}.async_engine"):
        raise ConfigError(
            "must be true with non-colocated distillation teachers (NeMo RL asserts they score"
            " async rollouts)",
            field=f"{_VLLM}.async_engine", value=r.get(f"{_VLLM}.async_engine"), file=r.file,
        )  # fmt: skip
    by_agent = r.get(_BY_AGENT) or {}
    if not isinstance(by_agent, Mapping):
        raise ConfigError(
            "must map agent names to teacher checkpoints", field=_BY_AGENT, value=by_agent,
            file=r.file,
        )  # fmt: skip
    fallback = r.get(f"{_OPD}.default_teacher_alias")
    strict = r.flag(f"{_OPD}.strict_agent_name_match")
    if fallback is not None and not strict and fallback not in by_agent:
        raise ConfigError(
            f"is not an alias of {_BY_AGENT} ({', '.join(map(str, by_agent)) or 'none'}):"
            " NeMo RL refuses it at setup",
            field=f"{_OPD}.default_teacher_alias", value=fallback, file=r.file,
        )  # fmt: skip
    default = r.get(f"{_TEACHERS}.default_teacher_cfg") or {}
    overrides = r.get(f"{_TEACHERS}.teacher_overrides") or {}
    default = default if isinstance(default, Mapping) else {}
    overrides = overrides if isinstance(overrides, Mapping) else {}
    dedupe = r.flag(f"{_OPD}.deduplicate_shared_teacher_checkpoints", True)
    teachers: list[_Teacher] = []
    seen: set[str] = set()
    for alias, model in by_agent.items():
        alias = str(alias)
        if not isinstance(model, str) or not model or "${" in model:
            raise ConfigError(
                "must name the teacher's checkpoint (a Hugging Face name or path)",
                field=f"{_BY_AGENT}.{alias}", value=model, file=r.file,
            )  # fmt: skip
        if dedupe and model in seen:
            continue  # the alias shares its checkpoint's worker group
        seen.add(model)
        own = overrides.get(alias)
        own = own if isinstance(own, Mapping) else {}

        def size(key: str, own: Mapping[str, Any] = own, alias: str = alias) -> int:
            # TeacherResourceConfig's defaults: 1 of each, 8 GPUs per node, micro-batches of 4.
            fallback = {"gpus_per_node": 8, "micro_batch_size": 4}.get(key, 1)
            value = own[key] if key in own else default.get(key, fallback)
            if isinstance(value, str | float):  # as pydantic converts an int field: "2", 2.0
                with contextlib.suppress(ValidationError):
                    value = TypeAdapter(int).validate_python(value)
            return positive_int(value, field=_teacher_field(own, alias, key), file=r.file)

        nodes, width = size("num_nodes"), size("gpus_per_node")
        if width > per_node:
            raise ConfigError(
                f"must be at most cluster.gpus_per_node ({per_node}): teacher {alias!r}'s"
                " placement group fits on one node (NeMo RL asserts it)",
                field=_teacher_field(own, alias, "gpus_per_node"), value=width, file=r.file,
            )  # fmt: skip
        tp, pp, cp = (
            size("tensor_model_parallel_size"),
            size("pipeline_model_parallel_size"),
            size("context_parallel_size"),
        )
        if (nodes * width) % (tp * pp * cp):
            raise ConfigError(
                f"teacher {alias!r}'s {nodes * width} GPUs ({nodes} nodes x {width}) are not a"
                f" multiple of tensor x pipeline x context parallel ({tp} x {pp} x {cp}), as"
                " NeMo RL asserts",
                field=_teacher_field(own, alias, "tensor_model_parallel_size"), value=tp,
                file=r.file,
            )  # fmt: skip
        merged = {**default, **own}
        megatron = {k: v for k, v in merged.items() if k not in _RESOURCE_KEYS}
        explicit = merged.get("megatron_cfg_overrides")
        megatron |= dict(explicit) if isinstance(explicit, Mapping) else {}
        sequence_parallel = megatron.get(
            "sequence_parallel", r.get("policy.megatron_cfg.sequence_parallel")
        )
        spec = parallel(
            tp=tp, pp=pp, sp=cp, ep=size("expert_model_parallel_size"),
            sequence_parallel=sequence_parallel if isinstance(sequence_parallel, bool) else None,
        )  # fmt: skip
        teachers.append(_Teacher(alias, model, nodes, width, spec, size("micro_batch_size")))
    if teachers and r.flag("policy.dtensor_cfg.enabled"):
        raise ConfigError(
            "must be false with non-colocated distillation teachers: they run the policy's"
            " Megatron settings, and NeMo RL refuses a DTensor policy for them",
            field="policy.dtensor_cfg.enabled", value=True, file=r.file,
        )  # fmt: skip
    return teachers


def _check_opd_advantage(r: _Reader, algo: str, teachers: list[_Teacher]) -> None:
    """Refuse ``grpo.adv_estimator.name: opd`` where NeMo RL fails: its advantage, teacher
    minus student log-prob per token (advantage_estimator.py ``OPDAdvantageEstimator``),
    needs the teachers' log-probs, which only non-colocated teachers compute, and only in
    async GRPO's trajectory collector (NeMo RL has no colocated teacher: without them the
    first step raises "OPD requires teacher_logprobs"), and the student's own log-probs,
    which ``force_on_policy_ratio`` without ``seq_logprob_error_threshold`` skips (opd.py
    ``assert_prev_logprobs_available`` refuses it at setup)."""
    if algo != "grpo" or r.get("grpo.adv_estimator.name") != "opd":
        return
    needs = (
        (r.flag(f"{_OPD}.enabled"), f"{_OPD}.enabled"),
        (r.flag(f"{_TEACHERS}.enabled"), f"{_TEACHERS}.enabled"),
        (bool(teachers), _BY_AGENT),
        (r.flag("grpo.async_grpo.enabled"), "grpo.async_grpo.enabled"),
    )
    for given, field in needs:
        if not given:
            raise ConfigError(
                "leaves grpo.adv_estimator.name opd without teacher log-probs: NeMo RL computes"
                " them only with non-colocated teachers in async GRPO (it has no colocated"
                " teacher) and raises 'OPD requires teacher_logprobs' at the first step",
                field=field, value=r.get(field), file=r.file,
            )  # fmt: skip
    if not _old_logprob(r, algo):
        raise ConfigError(
            "skips the student's log-probs (no grpo.seq_logprob_error_threshold), which the"
            " OPD advantage subtracts: NeMo RL refuses adv_estimator opd with it",
            field="loss_fn.force_on_policy_ratio", value=True, file=r.file,
        )  # fmt: skip


def _devices(
    r: _Reader,
    cluster: Cluster,
    colocated: bool,
    rm: tuple[int, int] | None,
    teachers: list[_Teacher],
) -> tuple[list[int], list[int], list[int], list[list[int]]]:
    """(trainer GPUs, engine GPUs, reward-model GPUs, each teacher's GPUs), as grpo.py
    ``setup`` splits them: the teachers' nodes are taken from the policy's and lie after
    the reward model's, each teacher's own (its first ``gpus_per_node`` GPUs of each)."""
    per_node, nodes = cluster.gpus_per_node, cluster.nodes
    rm_nodes, rm_gpus = rm or (0, 0)

    def gpus(first_node: int, count: int, first: int = 0, width: int = per_node) -> list[int]:
        return [
            node * per_node + first + g
            for node in range(first_node, first_node + count) for g in range(width)
        ]  # fmt: skip

    policy_nodes = nodes if nodes == 1 else nodes - rm_nodes
    if policy_nodes < 1:
        raise ConfigError(
            f"leaves the policy no node: must be below cluster.num_nodes ({nodes})",
            field="env.reward_model.resources.num_nodes", value=rm_nodes, file=r.file,
        )  # fmt: skip
    teacher_nodes = sum(t.nodes for t in teachers)
    policy_nodes -= teacher_nodes
    if policy_nodes < 1:
        raise ConfigError(
            f"leave the policy no node of cluster.num_nodes ({nodes}, {rm_nodes} for a reward"
            " model): NeMo RL asserts policy_nodes > 0",
            field=_TEACHERS, value=f"{teacher_nodes} nodes", file=r.file,
        )  # fmt: skip
    teacher_gpus: list[list[int]] = []
    first = policy_nodes + (rm_nodes if nodes > 1 else 0)
    for t in teachers:
        teacher_gpus.append(gpus(first, t.nodes, 0, t.gpus_per_node))
        first += t.nodes
    # The reward model: the last GPUs of a single node, else the nodes after the policy's.
    if not rm:
        rm_devices: list[int] = []
    elif nodes == 1:
        if rm_gpus >= per_node:
            raise ConfigError(
                f"leaves the policy no GPU: must be below cluster.gpus_per_node ({per_node})",
                field="env.reward_model.resources.gpus_per_node", value=rm_gpus, file=r.file,
            )  # fmt: skip
        rm_devices = gpus(0, 1, per_node - rm_gpus, rm_gpus)
    else:
        rm_devices = gpus(policy_nodes, rm_nodes, 0, min(rm_gpus, per_node))
    single = rm_gpus if nodes == 1 else 0  # GPUs the reward model takes from a lone node
    if colocated:
        every = gpus(0, policy_nodes, 0, per_node - single)
        return every, every, rm_devices, teacher_gpus
    res = f"{_GEN}.colocated.resources"
    if policy_nodes == 1:
        engine_gpus = r.int(f"{res}.gpus_per_node")
        if r.lax(f"{res}.num_nodes", int) not in (None, 1):
            raise ConfigError(
                "must be 1 or null when the policy has one node (NeMo RL asserts it)",
                field=f"{res}.num_nodes", value=r.get(f"{res}.num_nodes"), file=r.file,
            )  # fmt: skip
        train_gpus = per_node - engine_gpus - single
        if train_gpus < 1:
            raise ConfigError(
                f"leaves the trainer no GPU of the node's {per_node}"
                + (f" ({single} for the reward model)" if single else ""),
                field=f"{res}.gpus_per_node", value=engine_gpus, file=r.file,
            )  # fmt: skip
        return (
            gpus(0, 1, 0, train_gpus), gpus(0, 1, train_gpus, engine_gpus), rm_devices,
            teacher_gpus,
        )  # fmt: skip
    engine_nodes = r.int(f"{res}.num_nodes")
    if engine_nodes >= policy_nodes:
        raise ConfigError(
            f"leaves the trainer no node: must be below the policy's {policy_nodes} nodes",
            field=f"{res}.num_nodes", value=engine_nodes, file=r.file,
        )  # fmt: skip
    if r.lax(f"{res}.gpus_per_node", int) != per_node:
        raise ConfigError(
            f"must equal cluster.gpus_per_node ({per_node}) when generation has whole nodes"
            " (NeMo RL asserts it)",
            field=f"{res}.gpus_per_node", value=r.get(f"{res}.gpus_per_node"), file=r.file,
        )  # fmt: skip
    train_nodes = policy_nodes - engine_nodes
    return gpus(0, train_nodes), gpus(train_nodes, engine_nodes), rm_devices, teacher_gpus


def _trainer(
    r: _Reader, section: str = "policy"
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, bool]:
    """(a trainer's ``parallel``, its ``lora``, FP8) from the Megatron or DTensor section of
    ``policy`` (or PPO's ``value``); exactly one must be enabled (lm_policy.py)."""
    megatron = r.flag(f"{section}.megatron_cfg.enabled")
    dtensor = r.flag(f"{section}.dtensor_cfg.enabled")
    if megatron == dtensor:
        which = "both Megatron and DTensor are" if megatron else "neither Megatron nor DTensor is"
        raise ConfigError(
            f"{which} enabled: enable exactly one (NeMo RL refuses both and neither){r.hint()}",
            field=f"{section}.megatron_cfg.enabled", value=megatron, file=r.file,
        )  # fmt: skip
    if megatron:
        m = f"{section}.megatron_cfg"
        spec = parallel(
            tp=r.size(f"{m}.tensor_model_parallel_size"),
            pp=r.size(f"{m}.pipeline_model_parallel_size"),
            ep=r.size(f"{m}.expert_model_parallel_size"),
            sp=r.size(f"{m}.context_parallel_size"),
            zero=1 if r.flag(f"{m}.optimizer.use_distributed_optimizer") else None,
            recompute=r.flag(f"{m}.activation_checkpointing"),
            cpu_optimizer=r.flag(f"{m}.optimizer.optimizer_cpu_offload"),
            sequence_parallel=r.flag(f"{m}.sequence_parallel"),
        )
        adapters = None
        if r.flag(f"{m}.peft.enabled"):
            adapters = lora(r.int(f"{m}.peft.dim"), r.get(f"{m}.peft.target_modules") or None)
        return spec, adapters, r.flag(f"{m}.fp8_cfg.enabled")
    d = f"{section}.dtensor_cfg"
    offload = r.flag(f"{d}.cpu_offload")
    tp = r.size(f"{d}.tensor_parallel_size")
    cp = r.size(f"{d}.context_parallel_size")
    spec = parallel(
        tp=tp,
        sp=cp,
        ep=r.size(f"{d}.expert_parallel_size"),
        fsdp=True,
        recompute=r.flag(f"{d}.activation_checkpointing"),
        offload_params=offload,
        offload_optimizer=offload,
        sequence_parallel=r.flag(f"{d}.sequence_parallel"),
        # Without tensor or context parallelism the logits are a plain tensor and the
        # log-probs take log_softmax(logits.float()) (get_next_token_logprobs_from_logits);
        # with either, the logits are a DTensor and the vocab-parallel path works on its fp32
        # shard in place.
        logits="fp32_log_softmax" if (tp or 1) == 1 and (cp or 1) == 1 else None,
    )
    adapters = None
    if r.flag(f"{d}.lora_cfg.enabled"):
        names = r.get(f"{d}.lora_cfg.target_modules")
        all_linear = r.flag(f"{d}.lora_cfg.match_all_linear", True)
        adapters = lora(r.int(f"{d}.lora_cfg.dim"), None if all_linear else names)
    return spec, adapters, False


def _reference_parallel(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The reference's sizes: the trainer's layout, none of its training state."""
    keep = ("tp", "pp", "ep", "sp", "fsdp", "offload_params", "sequence_parallel", "logits")
    out = {k: v for k, v in (spec or {}).items() if k in keep}
    return out or None


def _batching(r: _Reader) -> dict[str, Any]:
    enabled = [s for s in ("sequence_packing", "dynamic_batching") if r.flag(f"policy.{s}.enabled")]
    if len(enabled) == 2:
        raise ConfigError(
            "sequence packing and dynamic batching are both enabled: enable one (NeMo RL"
            " asserts it)",
            field="policy.dynamic_batching.enabled", value=True, file=r.file,
        )  # fmt: skip
    if not enabled:
        return {"packing": False}
    base = f"policy.{enabled[0]}"
    out: dict[str, Any] = {"packing": True}
    for key, field in (
        ("train_mb_tokens", "micro_batch_tokens"),
        ("logprob_mb_tokens", "logprob_micro_batch_tokens"),
    ):
        tokens = r.tokens(f"{base}.{key}")
        if tokens:
            out[field] = tokens
    return out


def _workload(r: _Reader, algo: str) -> dict[str, Any] | None:
    if r.get(f"{algo}.num_prompts_per_step") is None:
        return None
    prompts = r.int(f"{algo}.num_prompts_per_step")
    samples = r.size(f"{algo}.num_generations_per_prompt") or 1
    total = r.tokens(f"{_VLLM}.max_model_len") or r.tokens("policy.max_total_sequence_length")
    if total is None:
        return None
    new_tokens = r.tokens(f"{_GEN}.max_new_tokens") or total
    load: dict[str, Any] = {"prompts_per_step": prompts, "samples_per_prompt": samples}
    prompt_max = r.tokens("data.max_input_seq_length")
    response_max = min(new_tokens, total)
    if prompt_max and prompt_max < total:
        load["prompt_tokens"] = {"mean": prompt_max / 2, "max": prompt_max}
        # vLLM's max_model_len bounds prompt and response together.
        response_max = min(response_max, total - prompt_max // 2)
    load["response_tokens"] = {"mean": response_max / 2, "max": response_max}
    load["micro_batch_size"] = r.size("policy.train_micro_batch_size") or 1
    logprob = r.size("policy.logprob_batch_size")
    if logprob:
        load["logprob_micro_batch_size"] = logprob
    batch = r.size("policy.train_global_batch_size")
    if batch and prompts * samples > batch:
        load["mini_batches"] = prompts * samples // batch
    epochs = r.size(f"{algo}.ppo_epochs") or (4 if algo == "ppo" else None)
    if epochs:
        load["epochs"] = epochs
    multiplier = r.number(f"{algo}.batch_multiplier", 1)
    field = f"{algo}.batch_multiplier"
    if not 1 <= multiplier <= 100:
        raise ConfigError(
            "must be a number from 1 to 100", field=field, value=multiplier, file=r.file
        )
    if multiplier > 1:
        if not r.flag(f"{algo}.use_dynamic_sampling"):
            raise ConfigError(
                f"is above 1 without {algo}.use_dynamic_sampling (NeMo RL asserts it)",
                field=field, value=multiplier, file=r.file,
            )  # fmt: skip
        load["generated_per_trained"] = float(multiplier)
    load |= _batching(r)
    load["controller"] = dict(CONTROLLER)
    return load


def _pipeline(
    roles: Mapping[str, Any],
    mode: str,
    staleness: int,
    *,
    reward: str,
    reference: str | None,
    old_logprob: bool,
    teachers: list[str],
) -> dict:
    """NeMo RL's step (grpo.py / ppo.py ``*_train``): the rollout scores each response as it
    ends (``run_multi_turn_rollout`` calls the environment or reward model), then the
    log-prob passes (and PPO's values), then training; the advantages are computed on the
    driver in between, in milliseconds (no stage); the weights go to the engines after
    training.

    Each distillation teacher (a role of ``teachers``) scores the finished rollouts on its
    own GPUs, a stage ``ref_logprob_ROLE``: async GRPO's trajectory collector calls it on
    each scored group before the group enters the replay buffer (trajectory_collector.py
    ``_enqueue_rollout_group``), and the OPD advantage subtracts the student's log-probs
    from its (grpo.py ``async_grpo_train``), so training waits on both. The collector sends
    each sample to one teacher group, its agent's (``_compute_teacher_logprobs``); which
    agents a step's samples come from is data, so each of N teachers takes ``share`` 1/N."""

    def stage(name: str, role: str, after: list[str], **extra: Any) -> dict[str, Any]:
        return {"role": role, **DEFAULT_STAGES[name], "after": after, **extra}

    stages = {
        "generate": stage("generate", "actor_infer", []),
        "reward": stage("reward", reward, ["generate"]),
    }
    if old_logprob:
        stages["old_logprob"] = stage("old_logprob", "actor_train", ["reward"], needs=["weights"])
    if reference is not None:
        stages["ref_logprob"] = stage("ref_logprob", reference, ["reward"])
    for role in teachers:
        # Each rollout goes to one teacher, its agent's; the split is not in the config:
        # an even one (an assumption, docs/importers.md).
        share = {"share": 1 / len(teachers)} if len(teachers) > 1 else {}
        stages[f"ref_logprob_{role}"] = stage("ref_logprob", role, ["reward"], **share)
    if "critic" in roles:
        stages["values"] = stage("values", "critic", ["reward"], needs=["weights"])
    passes = ("old_logprob", "ref_logprob", *(f"ref_logprob_{t}" for t in teachers), "values")
    scores = [n for n in passes if n in stages] or ["reward"]
    if "critic" in roles:
        stages["critic_train"] = stage("critic_train", "critic", scores)
    stages["train"] = stage("train", "actor_train", scores)
    stages["weight_sync"] = {
        "kind": "weight_sync", "from": "actor_train", "to": "actor_infer", "after": ["train"],
    }  # fmt: skip
    return {"mode": mode, "max_staleness": staleness, "stages": stages}


def _teacher_roles(
    r: _Reader,
    teachers: list[_Teacher],
    devices: list[list[int]],
    fp8: bool,
    taken: set[str],
    micro_batches: dict[str, int],
) -> dict[str, dict[str, Any]]:
    """A GPU role ``teacher_ALIAS`` per teacher on its own GPUs, one Megatron worker per GPU:
    its checkpoint (``model`` where it is not the policy's), its parallel sizes, FP8 when
    the policy's Megatron runs it (the teacher takes the policy's ``megatron_cfg``; NeMo RL
    reads no teacher's ``precision``). ``micro_batches`` gets each role's log-prob
    micro-batch (its ``micro_batch_size``)."""
    roles: dict[str, dict[str, Any]] = {}
    for teacher, gpus in zip(teachers, devices, strict=True):
        name = "teacher_" + re.sub(r"[^\w.-]", "_", teacher.alias)  # a stage name's characters
        while name in taken or name in roles:
            name += "_"
        role = gpu_role(tuple(gpus), 1, "reference")
        if teacher.parallel:
            role["parallel"] = teacher.parallel
        if fp8:
            role["precision"] = "fp8"
        if teacher.model != r.get("policy.model_name"):
            role["model"] = teacher.model
        roles[name] = role
        micro_batches[name] = teacher.micro_batch_size
    return roles


def _reward_workers(r: _Reader) -> int:
    """CPU workers of the environments that score responses (the most any of them has)."""
    counts = [r.size(f"env.{name}.num_workers") or 1 for name in _env_names(r) or ["math"]]
    return max(counts)


def _reference(r: _Reader, algo: str) -> bool:
    """Whether the step computes reference log-probs (grpo.py ``setup``: only with a KL
    penalty above 0, and not when told to skip them; PPO skips them by default). An absent
    penalty is NeMo RL's default, 0.01 (loss_functions.py ``ClippedPGLossConfig``)."""
    skip = r.flag(f"{algo}.skip_reference_policy_logprobs_calculation", algo == "ppo")
    return not skip and r.number("loss_fn.reference_policy_kl_penalty", 0.01) > 0


def _old_logprob(r: _Reader, algo: str) -> bool:
    """Whether the trainer recomputes the old log-probs (grpo.py: not with
    ``force_on_policy_ratio`` and no ``seq_logprob_error_threshold``)."""
    forced = r.flag("loss_fn.force_on_policy_ratio")
    return not (forced and r.get(f"{algo}.seq_logprob_error_threshold") is None)


def _resharded_refit(r: _Reader, algo: str, colocated: bool) -> bool:
    """Whether the engines take ``refit_transport: nccl_reshard`` (shard-to-shard refit).

    Raises:
        ConfigError: a transport NeMo RL refuses: any with PPO (ppo.py), and for
            nccl_reshard what ``check_nccl_reshard_refit_support`` refuses (colocated
            generation, a trainer other than Megatron, expert tensor parallelism, engines
            of several pipeline stages or expert parallel other than 1 or their tensor
            parallel size), naming the field.
    """
    field = f"{_GEN}.refit_transport"
    transport = r.get(field)
    if transport is None:
        return False
    if algo == "ppo":
        raise ConfigError(
            "PPO refits over NeMo RL's default collective path only (ppo.py refuses any"
            " other): set it null",
            field=field, value=transport, file=r.file,
        )  # fmt: skip
    if transport != "nccl_reshard":
        return False
    tp = r.size(f"{_VLLM}.tensor_parallel_size") or 1
    refusals = (
        (colocated, f"{_GEN}.colocated.enabled", "generation on its own GPUs"),
        (not r.flag("policy.megatron_cfg.enabled"), "policy.megatron_cfg.enabled",
         "the Megatron trainer"),
        ((r.size("policy.megatron_cfg.expert_tensor_parallel_size") or 1) != 1,
         "policy.megatron_cfg.expert_tensor_parallel_size", "expert tensor parallel 1"),
        ((r.size(f"{_VLLM}.pipeline_parallel_size") or 1) != 1,
         f"{_VLLM}.pipeline_parallel_size", "engines of one pipeline stage"),
        ((r.size(f"{_VLLM}.expert_parallel_size") or 1) not in (1, tp),
         f"{_VLLM}.expert_parallel_size", "engine expert parallel 1 or its tensor parallel"),
    )  # fmt: skip
    for refused, key, needs in refusals:
        if refused:
            raise ConfigError(
                f"nccl_reshard needs {needs} (NeMo RL's check_nccl_reshard_refit_support"
                f" refuses {key}: {r.get(key)!r})",
                field=field, value=transport, file=r.file,
            )  # fmt: skip
    return True


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert a NeMo RL GRPO or PPO config into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the NeMo RL field path, e.g.
            ``policy.generation.colocated.resources.num_nodes``.
    """
    composed = inherit(data, file)
    r = _Reader(composed.data, file, composed.missing_defaults)
    algo = _algorithm(r)
    backend = r.get(f"{_GEN}.backend", "vllm")
    if backend != "vllm":
        raise ConfigError(
            "rlplex reads vLLM generation only (its engine's settings price the rollout)",
            field=f"{_GEN}.backend", value=backend, file=file,
        )  # fmt: skip
    cluster = Cluster(
        nodes=r.int("cluster.num_nodes"), gpus_per_node=r.int("cluster.gpus_per_node")
    )
    colocated = r.flag(f"{_GEN}.colocated.enabled", True)
    single = _single_controller(r, algo)
    async_on = r.flag(f"{algo}.async_{algo}.enabled") or bool(single)
    if (async_on or single is not None) and colocated:
        what = "the single-controller path" if single is not None else f"async {algo.upper()}"
        raise ConfigError(
            f"{what} needs generation on its own GPUs with vLLM (NeMo RL asserts it): set it"
            " false and give colocated.resources",
            field=f"{_GEN}.colocated.enabled", value=True, file=file,
        )  # fmt: skip
    rm = _reward_model(r)
    teachers = _teachers(r, algo, cluster.gpus_per_node)
    _check_opd_advantage(r, algo, teachers)
    train_gpus, engine_gpus, rm_gpus, teacher_gpus = _devices(r, cluster, colocated, rm, teachers)
    tp, pp = (
        r.size(f"{_VLLM}.tensor_parallel_size") or 1,
        r.size(f"{_VLLM}.pipeline_parallel_size") or 1,
    )
    check_worker_layout(
        "actor_infer", tuple(engine_gpus), tp * pp, cluster, file,
        field=f"{_VLLM}.tensor_parallel_size",
    )  # fmt: skip
    spec, adapters, fp8 = _trainer(r)
    train = gpu_role(tuple(train_gpus), 1, "actor_train")
    if spec:
        train["parallel"] = spec
    if adapters:
        train["lora"] = adapters
    if fp8:
        train["precision"] = "fp8"
    engine = gpu_role(tuple(engine_gpus), tp * pp, "actor_infer")
    engine_spec = parallel(tp=tp, pp=pp, ep=r.size(f"{_VLLM}.expert_parallel_size"))
    if engine_spec:
        engine["parallel"] = engine_spec
    settings = (
        rollout(
            file=r.file,
            fields={
                "max_num_seqs": f"{_GEN}.vllm_kwargs.max_num_seqs",
                "gpu_memory_utilization": f"{_VLLM}.gpu_memory_utilization",
                "enforce_eager": f"{_VLLM}.enforce_eager",
            },
            max_num_seqs=r.get(f"{_GEN}.vllm_kwargs.max_num_seqs"),
            gpu_memory_utilization=r.get(f"{_VLLM}.gpu_memory_utilization"),
            enforce_eager=r.get(f"{_VLLM}.enforce_eager"),
            sleep_level=1 if colocated else None,
        )
        or {}
    )
    if async_on and r.flag(f"{algo}.async_{algo}.in_flight_weight_updates"):
        settings["in_flight_weight_updates"] = True
    if _resharded_refit(r, algo, colocated):
        settings["weight_sync"] = "resharded"
    if settings:
        engine["rollout"] = settings
    if r.get(f"{_VLLM}.precision") == "fp8":
        engine["precision"] = "fp8"
    roles: dict[str, dict[str, Any]] = {"actor_train": train, "actor_infer": engine}
    reference = None
    if _reference(r, algo):
        reference = "reference"
        ref = gpu_role(tuple(train_gpus), 1, "reference")
        ref_spec = _reference_parallel(spec)
        if ref_spec:
            ref["parallel"] = ref_spec
        if fp8:
            ref["precision"] = "fp8"
        roles["reference"] = ref
    if algo == "ppo":
        critic = gpu_role(tuple(train_gpus), 1, "critic")
        critic_spec, critic_lora, _ = _trainer(r, "value")
        if critic_spec:
            critic["parallel"] = critic_spec
        if critic_lora:
            critic["lora"] = critic_lora
        value_model = r.get("value.model_name")
        if isinstance(value_model, str) and value_model != r.get("policy.model_name"):
            critic["model"] = value_model
        roles["critic"] = critic
    teacher_micro_batches: dict[str, int] = {}
    teacher_roles = _teacher_roles(
        r, teachers, teacher_gpus, fp8, taken=set(roles), micro_batches=teacher_micro_batches
    )
    roles |= teacher_roles
    if rm:
        scorer = gpu_role(tuple(rm_gpus), 1, "reward")
        rm_tp = r.size("env.reward_model.dtensor_cfg.tensor_parallel_size")
        rm_spec = parallel(tp=rm_tp, fsdp=True)
        if rm_spec:
            scorer["parallel"] = rm_spec
        rm_model = r.get("env.reward_model.model_name")
        if isinstance(rm_model, str) and rm_model:
            scorer["model"] = rm_model
        roles["reward"] = scorer
    else:
        roles["rewards"] = {"world_size": _reward_workers(r)}
    mode, staleness = "sync", 0
    if async_on:
        mode = "async"
        staleness = single or r.int(f"{algo}.async_{algo}.max_trajectory_age_steps", 1)
    native: dict[str, Any] = {
        "cluster": cluster.model_dump(exclude_unset=True),
        "roles": roles,
        "pipeline": _pipeline(
            roles, mode, staleness, reward="reward" if rm else "rewards",
            reference=reference, old_logprob=_old_logprob(r, algo),
            # Sync GRPO reserves the teachers but never calls them (grpo_train gets none).
            teachers=list(teacher_roles) if async_on else [],
        ),
    }  # fmt: skip
    model = r.get("policy.model_name")
    if isinstance(model, str) and model and "${" not in model:
        native["model"] = model
    load = _workload(r, algo)
    if load:
        native["workload"] = load
        # A teacher's pass runs its own micro-batch (teacher_worker_group.py get_logprobs);
        # under sequence packing the policy's logprob_mb_tokens, as the workload's.
        forward = load.get("logprob_micro_batch_size") or load.get("micro_batch_size")
        for role, size in teacher_micro_batches.items():
            stage = native["pipeline"]["stages"].get(f"ref_logprob_{role}")
            if stage is not None and size != forward:
                stage["micro_batch_size"] = size
    return apply_costs(native, costs, costs_file)
