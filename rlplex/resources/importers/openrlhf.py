"""Read an OpenRLHF run: the flags of its ``python3 -m openrlhf.cli.train_ppo_ray`` command.

OpenRLHF (OpenRLHF/OpenRLHF) has no config file: a run is one command line in a shell
script, ``python3 -m openrlhf.cli.train_ppo_ray --actor.num_nodes 1 ...``, often after
``ray job submit ... --`` or inside ``srun ... bash -c "..."``.
:mod:`~rlplex.resources.importers.launch_script` finds that command and its ``--flag
value`` / ``--flag=value`` / bare ``--flag`` arguments; :func:`script_data` nests them at
their dots (``--vllm.num_engines 4`` is ``{vllm: {num_engines: '4'}}``, the mapping a
``--set vllm.num_engines=8`` reaches) and :func:`to_native` reads them as OpenRLHF's parser
and ``train()`` do. The rules, with their source (openrlhf/cli/train_ppo_ray.py unless
named):

- Two spellings: the dotted groups of today (``--actor.num_nodes``, ``--vllm.num_engines``,
  ``--ds.zero_stage``; since ed62d0e2, 2026-04-19) and the flat names before
  (``--actor_num_nodes``, ``--vllm_num_engines``, ``--zero_stage``): :data:`RENAMED` maps
  every old name rlplex reads to its new one; given both, the dotted one counts. Lengths
  before d0e088b6 (2026-03-24) were ``--prompt_max_len`` and ``--generate_max_len`` (1024
  each by default) with ``--max_len`` an optional cap on both together. A flag the script
  leaves out takes the parser's default of today, but for the micro-batches of a script
  in the flat spelling: 4 (train) and 8 (rollout), as every flat release until v0.10.0
  (a2978694) had them. Errors name the flag as written.
- Roles (``train()``): the actor (``--actor.num_nodes`` x ``num_gpus_per_node``, default
  1 x 8), the vLLM engines (``--vllm.num_engines`` x ``tensor_parallel_size``: one rollout
  worker per engine), the reference when ``--algo.kl.init_coef`` > 0 (default 0.01), the
  critic when ``--algo.advantage.estimator`` is ``gae`` (the default; OpenRLHF clears the
  critic for every other estimator), a reward model unless ``--reward.remote_url`` (an
  HTTP server or a ``reward_func`` file) or ``--train.agent_func_path`` scores instead (in
  the engines' processes as each response ends: a ``reward`` stage on the driver).
- Placement: ``--train.colocate_all`` puts the actor, the reference, the critic, the reward
  model and (in a synchronous run) the engines on the actor's GPUs; the engines must fill
  them, and the reference must match the actor (OpenRLHF asserts both).
  ``--train.colocate_actor_ref`` shares the actor's GPUs with the reference,
  ``--train.colocate_critic_reward`` the critic's with the reward model (sizes equal, as
  asserted); every other group gets GPUs of its own. Groups are laid out first fit in the
  order Ray creates them (the actor's shared group, the engines, the actor, the reference,
  the critic, the reward model), whole nodes of the largest group's GPUs per node, or of
  max(8, that) when there are several groups (Ray finds the machines' size at run time).
- Engines: ``--vllm.gpu_memory_utilization`` (default 0.95), ``--vllm.enforce_eager``, and
  ``--vllm.enable_sleep`` (vLLM's ``sleep(level=1)``, vllm_engine.py; OpenRLHF drops it
  without ``--train.colocate_all``). Engines on their own GPUs receive the weights tensor
  by tensor from the actor's rank 0 (ppo_actor.py ``broadcast_to_vllm``): ``per_tensor``.
- Trainers (DeepSpeed, openrlhf/utils/deepspeed/): ``--ds.zero_stage`` (default 2) for the
  actor and the critic, the reference and the reward model at ZeRO-3 with stage 3 and
  unsharded otherwise (``get_ds_eval_config``); ``--ds.adam_offload``: DeepSpeed's CPU Adam;
  ``--actor.gradient_checkpointing_enable`` (the critic's too); ``--ds.ring_attn_size`` as
  sequence parallel, ``--ds.tensor_parallel_size`` as tensor parallel (every DeepSpeed
  model); ``--ref.offload`` and ``--reward.offload``: parameters in host memory under
  ZeRO-3 (below it the evaluation engine runs at stage 0, which puts the whole model on
  the GPU: DeepSpeed's ``offload_param`` is a ZeRO-3 setting);
  ``--ds.lora.rank``: LoRA on the actor and the critic (the engines get merged weights);
  Hugging Face layers, fused with ``--ds.use_liger_kernel`` in the actor and the
  reference (openrlhf/models/actor.py; the critic and the reward model keep them).
- Pipeline: OpenRLHF's step is the default one (openrlhf/trainer/ppo_trainer.py,
  ppo_utils/experience_maker.py): generation, the reward, the actor's old log-probs, the
  reference's, the critic's values, the advantages on the driver, then the critic's and
  the actor's training, then the weights to the engines, with the waits OpenRLHF's driver
  adds (:func:`_openrlhf_order`: a reward scored in generation before the forward passes,
  a colocated group's pass before the next is dispatched, ``--ds.enable_sleep``'s critic
  before the actor). ``--train.async_enable``
  (ppo_trainer_async.py): generation runs ahead of training by at most
  ``--train.async_queue_size`` batches (default 1): ``mode: async``, ``max_staleness`` the
  queue size.
- Workload: ``--rollout.batch_size`` prompts (default 1024) x
  ``--rollout.n_samples_per_prompt`` (default 1); ``--train.batch_size`` samples per
  optimizer step (default 128, a count of samples, not prompts: ``mini_batches`` the step's
  samples over it), ``--train.micro_batch_size`` per GPU (default 1),
  ``--rollout.micro_batch_size`` for the forward passes (default 1),
  ``--train.max_epochs``; ``--ds.packing_samples`` (forced by ring attention and dynamic
  batches), else padded micro-batches; ``--train.dynamic_batch_enable``: token budgets of
  ``--train.max_tokens_per_gpu`` (default 16192) and ``--rollout.max_tokens_per_gpu``
  (default the train's), times ring x tensor parallel (seqlen_balancing.py). Lengths:
  ``--data.max_len`` (default 2048) bounds prompt and response together;
  ``--rollout.max_new_tokens`` is the response's bound, the prompt truncated to the rest
  (openrlhf/utils/agent.py). The single controller pads each micro-batch to its longest
  sequence (``Experience.concat_experiences``): ``workload.controller.padding: longest``.
- Refused: an entry point that trains no RL step (SFT, DPO, reward-model training ... as
  not RL, :data:`NOT_RL_ENTRIES`), OpenRLHF's PPO without Ray (``openrlhf.cli.train_ppo``,
  whose actor generated with Hugging Face's ``generate``), a run without vLLM engines (the
  same), a missing reward, and whatever OpenRLHF's parser or asserts refuse among what rlplex
  reads (a count that is not a whole number or a variable the script does not set, a
  word of blanks that a backslash before trailing blanks left, an unknown estimator, a
  group estimator with one sample per prompt ...), naming the flag.

What rlplex assumes where the flags are silent is listed in docs/importers.md ("OpenRLHF
launch scripts").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from rlplex.errors import ConfigError, InvalidValueError
from rlplex.resources.cluster import Cluster
from rlplex.resources.importers.common import (
    apply_costs,
    default_pipeline,
    get_path,
    given_count,
    given_tokens,
    gpu_role,
    lora,
    model_path,
    parallel,
    positive_int,
    refuse_non_rl,
    remaining_tokens,
    rollout,
    workload,
)
from rlplex.resources.importers.launch_script import Launch, flag_arguments, variables_in
from rlplex.resources.importers.verl import layout_pools
from rlplex.resources.placement import check_worker_layout

ENTRY = "openrlhf.cli.train_ppo_ray"
"""The entry point whose runs rlplex reads."""

NOT_RL_ENTRIES: dict[str, str] = {
    "train_sft": "SFT",
    "train_dpo": "DPO",
    "train_kto": "KTO",
    "train_rm": "reward-model training",
    "train_prm": "process-reward-model training",
    "train_kd": "knowledge-distillation",
    "batch_inference": "batch-inference (generation)",
    "interactive_chat": "chat",
    "serve_rm": "reward-model server",
    "lora_combiner": "LoRA merge",
}
"""OpenRLHF's entry points (openrlhf/cli/) that train no RL step, by what they do."""

RENAMED: dict[str, tuple[str, ...]] = {
    # placement
    "actor_num_nodes": ("actor.num_nodes",),
    "actor_num_gpus_per_node": ("actor.num_gpus_per_node",),
    "ref_num_nodes": ("ref.num_nodes",),
    "ref_num_gpus_per_node": ("ref.num_gpus_per_node",),
    "critic_num_nodes": ("critic.num_nodes",),
    "critic_num_gpus_per_node": ("critic.num_gpus_per_node",),
    "reward_num_nodes": ("reward.num_nodes",),
    "reward_num_gpus_per_node": ("reward.num_gpus_per_node",),
    "colocate_all_models": ("train.colocate_all",),
    "colocate_actor_ref": ("train.colocate_actor_ref",),
    "colocate_critic_reward": ("train.colocate_critic_reward",),
    # engines
    "vllm_num_engines": ("vllm.num_engines",),
    "vllm_tensor_parallel_size": ("vllm.tensor_parallel_size",),
    "vllm_gpu_memory_utilization": ("vllm.gpu_memory_utilization",),
    "enforce_eager": ("vllm.enforce_eager",),
    "vllm_enable_sleep": ("vllm.enable_sleep",),
    # the step
    "async_train": ("train.async_enable",),
    "async_queue_size": ("train.async_queue_size",),
    "partial_rollout": ("train.partial_rollout_enable",),
    "advantage_estimator": ("algo.advantage.estimator",),
    "init_kl_coef": ("algo.kl.init_coef",),
    # models
    "pretrain": ("actor.model_name_or_path",),
    "critic_pretrain": ("critic.model_name_or_path",),
    "reward_pretrain": ("reward.model_name_or_path",),
    "remote_rm_url": ("reward.remote_url",),
    "agent_func_path": ("train.agent_func_path",),
    # DeepSpeed
    "zero_stage": ("ds.zero_stage",),
    "adam_offload": ("ds.adam_offload",),
    "gradient_checkpointing": ("actor.gradient_checkpointing_enable",),
    "deepspeed_enable_sleep": ("ds.enable_sleep",),
    "ds_tensor_parallel_size": ("ds.tensor_parallel_size",),
    "ring_attn_size": ("ds.ring_attn_size",),
    "packing_samples": ("ds.packing_samples",),
    "use_liger_kernel": ("ds.use_liger_kernel",),
    "lora_rank": ("ds.lora.rank",),
    "target_modules": ("ds.lora.target_modules",),
    "ref_reward_offload": ("ref.offload", "reward.offload"),
    # workload
    "rollout_batch_size": ("rollout.batch_size",),
    "n_samples_per_prompt": ("rollout.n_samples_per_prompt",),
    "micro_rollout_batch_size": ("rollout.micro_batch_size",),
    "train_batch_size": ("train.batch_size",),
    "micro_train_batch_size": ("train.micro_batch_size",),
    "max_epochs": ("train.max_epochs",),
    "max_len": ("data.max_len",),
    "max_new_tokens": ("rollout.max_new_tokens",),
    "use_dynamic_batch": ("train.dynamic_batch_enable",),
    "train_max_tokens_per_gpu": ("train.max_tokens_per_gpu",),
    "rollout_max_tokens_per_gpu": ("rollout.max_tokens_per_gpu",),
}
"""Each flag rlplex reads as OpenRLHF spelled it before the dotted groups (ed62d0e2,
2026-04-19) -> its name since (``--ref_reward_offload`` became two flags)."""

_OLD_NAMES: dict[str, tuple[str, ...]] = {
    new: tuple(old for old, news in RENAMED.items() if new in news)
    for new in sorted({name for news in RENAMED.values() for name in news})
}
"""Each dotted flag rlplex reads -> its older spellings."""

ESTIMATORS = ("gae", "reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo")
"""``--algo.advantage.estimator``'s choices; only ``gae`` trains a critic."""
_GROUP_ESTIMATORS = ("rloo", "reinforce_baseline", "group_norm", "dr_grpo")
"""Estimators with a per-prompt baseline: OpenRLHF asserts more than one sample a prompt."""

_ERA1_PROMPT, _ERA1_RESPONSE = "prompt_max_len", "generate_max_len"
"""Lengths before d0e088b6 (2026-03-24): prompt and response bounds, 1024 each by default."""
_ERA1_DEFAULT = 1024

_FLAT_MICRO_TRAIN, _FLAT_MICRO_ROLLOUT = 4, 8
"""``--micro_train_batch_size`` and ``--micro_rollout_batch_size`` by default in every
release of the flat flags but the last two (1 and 1 since a2978694, 2026-04-11, v0.10.0)."""

_NODE_GPUS = 8
"""GPUs per machine assumed when the groups are several (OpenRLHF never says)."""

_INTEGER = re.compile(r"[+-]?\d+")
_ABSENT = object()


def script_data(launch: Launch, *, file: str) -> dict[str, Any]:
    """The flags of an OpenRLHF command, nested at their dots (values as the shell passed
    them: words, a list of words for an option of several, True for a bare switch).

    Raises:
        ConfigError: the entry point is not ``train_ppo_ray`` (not RL, OpenRLHF's PPO
            without Ray, or unknown), naming the script's line.
    """
    module = launch.module or ""
    entry = module.rsplit(".", 1)[-1]
    where = f"line {launch.line}"
    if entry in NOT_RL_ENTRIES:
        refuse_non_rl(f"an OpenRLHF {NOT_RL_ENTRIES[entry]} run ({module})", field=where, file=file)
    if entry == "train_ppo":
        raise ConfigError(
            "is OpenRLHF's PPO without Ray (removed 2025-03-18), whose actor generates with"
            " Hugging Face's generate: rlplex prices vLLM engines; give openrlhf.cli."
            "train_ppo_ray's flags (--vllm.num_engines ...)",
            field=where, value=module, file=file,
        )  # fmt: skip
    if module != ENTRY:
        raise ConfigError(
            f"is no OpenRLHF entry point rlplex reads (it reads {ENTRY})",
            field=where, value=module, file=file,
        )  # fmt: skip
    _refuse_blank_words(launch, file)
    flags = flag_arguments(launch.arguments)
    _refuse_mixed_spellings(flags, file)
    out: dict[str, Any] = {}
    for name, value in flags.items():
        node = out
        *groups, leaf = name.split(".")
        for group in groups:
            child = node.get(group)
            if not isinstance(child, dict):
                child = node[group] = {}
            node = child
        node[leaf] = value
    return out


def _refuse_blank_words(launch: Launch, file: str) -> None:
    """A backslash with blanks after it at a line's end escapes a blank and continues no
    line: the shell passes a word of blanks (which OpenRLHF's parser refuses) and runs the
    next lines as commands of their own, so the flags there are not the run's."""
    for k, word in enumerate(launch.arguments):
        if word and not word.strip():
            after = next((w for w in reversed(launch.arguments[:k]) if w.startswith("--")), None)
            where = f" after {after}" if after else ""
            raise ConfigError(
                f"passes a word of blanks ({word!r}){where}: a backslash followed by blanks at"
                " a line's end continues no line, and the flags of the lines after it are no"
                " part of the command; remove the blanks after the backslash",
                field=f"line {launch.line}", file=file,
            )  # fmt: skip


def _refuse_mixed_spellings(flags: Mapping[str, Any], file: str) -> None:
    """A script that writes flags of both ages runs on no release: each release's parser
    refuses the other's names ("unrecognized arguments")."""
    old = [n for n in flags if n in RENAMED or n in (_ERA1_PROMPT, _ERA1_RESPONSE)]
    new = [n for n in flags if "." in n]
    if old and new:
        renamed = RENAMED.get(old[0])
        hint = f": write --{renamed[0]}" if renamed else ""
        raise ConfigError(
            f"is OpenRLHF's spelling before the dotted flags (ed62d0e2, 2026-04-19), --{new[0]}"
            f" that of the releases since; no release takes both{hint}",
            field=f"--{old[0]}", file=file,
        )  # fmt: skip


def _integer(value: Any) -> Any:
    """A word of digits as the int argparse makes of it; anything else unchanged."""
    return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) else value


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _decimal(value: Any) -> Any:
    """A word that is a number as the float argparse makes of it; anything else unchanged."""
    return float(value) if isinstance(value, str) and _DECIMAL.fullmatch(value) else value


class _Flags:
    """Typed reads of an OpenRLHF command's flags; a flag is found under its dotted name or
    an older spelling (:data:`RENAMED`), and every error names it as written."""

    def __init__(self, data: Mapping[str, Any], file: str) -> None:
        self.data, self.file = data, file
        self.flat = any(key in RENAMED or key in (_ERA1_PROMPT, _ERA1_RESPONSE) for key in data)
        """The script spells its flags as the releases before the dotted groups did."""

    def find(self, name: str) -> tuple[Any, str]:
        """(the value, None when absent; the flag as written, ``--`` and all)."""
        for key in (name, *_OLD_NAMES.get(name, ())):
            value = get_path(self.data, key, _ABSENT)
            if value is not _ABSENT:
                return value, f"--{key}"
        return None, f"--{name}"

    def given(self, name: str) -> tuple[Any, str]:
        """:meth:`find` for a number or a choice: a shell variable the script does not set
        (``--vllm.num_engines $ENGINES``) is refused as such, not as a wrong value."""
        value, field = self.find(name)
        if isinstance(value, str) and "$" in value:
            names = variables_in(value)
            env = f", or the variable's with --env {names[0]}=VALUE" if len(names) == 1 else ""
            raise ConfigError(
                "is a shell variable the script does not set (rlplex reads no environment of"
                f" its own): give its value with --set {field[2:]}=VALUE{env}",
                field=field, value=value, file=self.file,
            )  # fmt: skip
        return value, field

    def field(self, name: str) -> str:
        return self.find(name)[1]

    def raw(self, name: str, default: Any = None) -> Any:
        """The value as an int where it is a word of digits (checked by its reader), else
        ``default`` when absent."""
        value = self.given(name)[0]
        return default if value is None else _integer(value)

    def count(self, name: str, default: int) -> int:
        """A whole number >= 1 (a batch size, a queue size), ``default`` when absent."""
        value, field = self.given(name)
        got = given_count(_integer(value), field=field, file=self.file)
        return default if got is None else got

    def gpus(self, name: str, default: int) -> int:
        """A GPU count (nodes, GPUs per node, parallel sizes), bounded as any importer's."""
        value, field = self.given(name)
        return positive_int(
            default if value is None else _integer(value), field=field, file=self.file
        )

    def number(self, name: str, default: float) -> float:
        value, field = self.given(name)
        if value is None:
            return default
        value = _decimal(value)
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise InvalidValueError("must be a number", field=field, value=value, file=self.file)
        return float(value)

    def switch(self, name: str) -> bool:
        """A bare ``--flag`` (argparse's ``store_true``): True when given; a ``--set`` may
        give true or false. A word after it that is an expansion rlplex cannot know
        (``$EXTRA_ARGS``) is no value of it."""
        value, field = self.find(name)
        if value is None or isinstance(value, bool):
            return bool(value)
        if isinstance(value, str) and value.startswith("$"):
            return True
        raise InvalidValueError(
            "is a switch: give it bare, without a value (OpenRLHF's parser refuses one)",
            field=field, value=value, file=self.file,
        )  # fmt: skip

    def text(self, name: str) -> str | None:
        value, field = self.find(name)
        if value is None or isinstance(value, str):
            return value or None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise InvalidValueError("must be one word", field=field, value=value, file=self.file)

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value, field = self.given(name)
        if value is None:
            return default
        if value not in choices:
            raise InvalidValueError(
                f"must be one of: {', '.join(choices)}", field=field, value=value, file=self.file
            )
        return str(value)


def _zero_stage(f: _Flags) -> int:
    value, field = f.given("ds.zero_stage")
    stage = 2 if value is None else _integer(value)
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise InvalidValueError(
            "must be a DeepSpeed ZeRO stage: 0, 1, 2 or 3", field=field, value=value, file=f.file
        )
    return int(stage)


def _size(f: _Flags, group: str) -> tuple[int, int]:
    """(nodes, GPUs per node) of an OpenRLHF model group (``actor``, ``ref`` ...)."""
    return f.gpus(f"{group}.num_nodes", 1), f.gpus(f"{group}.num_gpus_per_node", 8)


def _same_size(f: _Flags, group: str, like: str, why: str) -> None:
    """OpenRLHF's assert that ``group`` has ``like``'s nodes and GPUs per node."""
    for key, value, other in zip(
        ("num_nodes", "num_gpus_per_node"), _size(f, group), _size(f, like), strict=True
    ):
        if value != other:
            raise ConfigError(
                f"must equal {f.field(f'{like}.{key}')} ({other}) {why} (OpenRLHF asserts it)",
                field=f.field(f"{group}.{key}"), value=value, file=f.file,
            )  # fmt: skip


class _Placement:
    """OpenRLHF's placement groups in the order Ray creates them, and which role sits on
    which (its first GPUs: a role placed on a shared group takes bundles 0, 1, ...)."""

    def __init__(self) -> None:
        self.groups: dict[str, list[int]] = {}
        self.on: dict[str, tuple[str, int]] = {}

    def own(self, group: str, size: tuple[int, int]) -> None:
        nodes, per_node = size
        self.groups[group] = [per_node] * nodes

    def put(self, role: str, group: str, gpus: int) -> None:
        self.on[role] = (group, gpus)


def _placement(f: _Flags, models: dict[str, bool], engine_gpus: int) -> _Placement:
    """Where ``train()`` puts each model (module docstring)."""
    every = f.switch("train.colocate_all")
    actor_ref = f.switch("train.colocate_actor_ref")
    critic_reward = f.switch("train.colocate_critic_reward")
    sync = not f.switch("train.async_enable")
    actor = _size(f, "actor")
    actor_gpus = actor[0] * actor[1]
    p = _Placement()
    shared = every or actor_ref
    if shared:
        p.own("actor", actor)
        if models["reference"]:
            why = "with " + (f.field("train.colocate_all") if every else f.field(
                "train.colocate_actor_ref"))  # fmt: skip
            _same_size(f, "ref", "actor", why)
    if every and sync:
        if engine_gpus != actor_gpus:
            raise ConfigError(
                f"x {f.field('vllm.tensor_parallel_size')} must fill the actor's"
                f" {actor_gpus} GPUs with {f.field('train.colocate_all')} in a synchronous run"
                f" ({engine_gpus} engine GPUs; OpenRLHF asserts it)",
                field=f.field("vllm.num_engines"), value=f.raw("vllm.num_engines"), file=f.file,
            )  # fmt: skip
        p.put("actor_infer", "actor", engine_gpus)
    else:
        p.groups["vllm"] = []  # sized once the machines' size is known; created here
    if not shared:
        p.own("actor", actor)
    p.put("actor_train", "actor", actor_gpus)
    if models["reference"]:
        if shared:
            p.put("reference", "actor", actor_gpus)
        else:
            p.own("reference", _size(f, "ref"))
            p.put("reference", "reference", math.prod(_size(f, "ref")))
    group = "actor" if every else None
    if models["critic"] and critic_reward:
        _same_size(f, "critic", "reward", f"with {f.field('train.colocate_critic_reward')}")
        p.own("critic", _size(f, "critic"))
        group = "critic"
    for role, name in (("critic", "critic"), ("reward", "reward")):
        if not models[role]:
            continue
        gpus = math.prod(_size(f, name))
        if group is None:
            p.own(role, _size(f, name))
            p.put(role, role, gpus)
        else:
            p.put(role, group, gpus)
    _check_shared(f, p)
    return p


_GROUP_OF = {"reference": "ref", "critic": "critic", "reward": "reward"}
"""The OpenRLHF flag group of each rlplex role that may sit on another's GPUs."""


def _check_shared(f: _Flags, p: _Placement) -> None:
    """A model placed on another's group takes its first bundles; Ray cannot place one
    with more GPUs than the group has."""
    for role, (group, gpus) in p.on.items():
        owner = _GROUP_OF.get(role)
        if owner is None or group == role or gpus <= sum(p.groups[group]):
            continue
        flag = f.field(
            "train.colocate_critic_reward" if group == "critic" else "train.colocate_all"
        )
        if group == "actor" and not f.switch("train.colocate_all"):
            flag = f.field("train.colocate_actor_ref")
        raise ConfigError(
            f"x {f.field(f'{owner}.num_nodes')} is {gpus} GPUs, more than the"
            f" {sum(p.groups[group])} of the {_GROUP_OF.get(group, group)} GPUs it shares"
            f" with {flag} (Ray cannot place it)",
            field=f.field(f"{owner}.num_gpus_per_node"),
            value=f.raw(f"{owner}.num_gpus_per_node", 8),
            file=f.file,
        )


def _engine_entries(gpus: int, tp: int, per_node: int) -> list[int]:
    """The engines' packed group as GPUs per node: whole engines to a node while they fit
    (an engine larger than a node fills whole nodes)."""
    chunk = per_node - per_node % tp if tp <= per_node else per_node
    entries = []
    while gpus > 0:
        entries.append(min(chunk, gpus))
        gpus -= entries[-1]
    return entries


def _models(f: _Flags, estimator: str) -> dict[str, bool]:
    """Which of OpenRLHF's optional models the run creates."""
    scored_remotely = bool(f.text("reward.remote_url") or f.text("train.agent_func_path"))
    if not scored_remotely and not f.text("reward.model_name_or_path"):
        raise ConfigError(
            f"is missing: without {f.field('reward.remote_url')} (a reward server or a"
            f" reward_func file) or {f.field('train.agent_func_path')}, OpenRLHF scores"
            " with a reward model",
            field=f.field("reward.model_name_or_path"), file=f.file,
        )  # fmt: skip
    return {
        "reference": f.number("algo.kl.init_coef", 0.01) > 0,
        "critic": estimator == "gae",
        "reward": not scored_remotely,
    }


def _engines(f: _Flags) -> tuple[int, int]:
    """(engines, GPUs per engine); refused without engines, as OpenRLHF generates with none
    else (samples_generator.py dispatches to vLLM only)."""
    value, field = f.given("vllm.num_engines")
    engines = _integer(value)
    if engines is None or engines == 0:
        raise ConfigError(
            "is missing: OpenRLHF's PPO generates with vLLM engines, which this flag starts"
            " (older releases without them generated with Hugging Face's generate on the"
            " actor, which rlplex does not price)",
            field=field, file=f.file,
        )  # fmt: skip
    engines = positive_int(engines, field=field, file=f.file)
    tp = f.gpus("vllm.tensor_parallel_size", 1)
    positive_int(engines * tp, field=field, file=f.file)
    return engines, tp


def _parallel(f: _Flags, role: str, tp: int) -> dict[str, Any] | None:
    """A role's sizes and DeepSpeed settings (module docstring)."""
    if role == "actor_infer":
        return parallel(tp=tp)
    zero = _zero_stage(f)
    trained = role in ("actor_train", "critic")
    offload = {"reference": "ref.offload", "reward": "reward.offload"}.get(role)
    ds_tp = f.gpus("ds.tensor_parallel_size", 1)
    # Liger's kernels replace the causal LM's layers (openrlhf/models/actor.py): the actor's
    # and the reference's; the critic and the reward model (a value head) keep Hugging Face's
    liger = role in ("actor_train", "reference") and f.switch("ds.use_liger_kernel")
    return parallel(
        tp=ds_tp if ds_tp > 1 else None,
        sp=f.gpus("ds.ring_attn_size", 1),
        zero=zero if trained else (3 if zero == 3 else None),
        recompute=trained and f.switch("actor.gradient_checkpointing_enable"),
        cpu_optimizer=trained and f.switch("ds.adam_offload"),
        # DeepSpeed's offload_param works with ZeRO-3 only: below it the evaluation engine
        # (stage 0) moves the whole model to the GPU and the flag changes nothing
        offload_params=f.switch(offload) and zero == 3 if offload else None,
        kernels="fused" if liger else "eager",
    )


def _lora(f: _Flags) -> dict[str, Any] | None:
    value, field = f.given("ds.lora.rank")
    rank = _integer(value)
    if rank is None or rank == 0:
        return None
    given_count(rank, field=field, file=f.file)
    return lora(rank, f.find("ds.lora.target_modules")[0])


def _lengths(f: _Flags) -> tuple[int, int, str, str]:
    """(prompt max, response max, and the flags they come from): see the module docstring;
    with neither ``--rollout.max_new_tokens`` nor the old bounds, ``--data.max_len`` is split
    in halves (rlplex's choice: OpenRLHF's own examples gave 1024 + 1024 for 2048)."""
    old_prompt, prompt_field = f.given(_ERA1_PROMPT)
    old_response, response_field = f.given(_ERA1_RESPONSE)
    total, total_field = f.given("data.max_len")
    total = given_tokens(_integer(total), field=total_field, file=f.file)
    if old_prompt is not None or old_response is not None:
        prompt = given_tokens(_integer(old_prompt), field=prompt_field, file=f.file)
        response = given_tokens(_integer(old_response), field=response_field, file=f.file)
        prompt, response = prompt or _ERA1_DEFAULT, response or _ERA1_DEFAULT
        if total is not None:  # the old --max_len caps both together
            left = remaining_tokens(
                total, response, field=total_field, prompt_field=response_field, file=f.file
            )
            prompt = min(prompt, left or prompt)
        return prompt, response, prompt_field, response_field
    total = total or 2048
    new, new_field = f.given("rollout.max_new_tokens")
    response = given_tokens(_integer(new), field=new_field, file=f.file)
    if response is not None:
        prompt = remaining_tokens(
            total, response, field=total_field, prompt_field=new_field, file=f.file
        )
        return int(prompt or 1), response, total_field, new_field
    prompt = max(1, total // 2)
    return prompt, max(1, total - prompt), total_field, total_field


def _workload(f: _Flags, estimator: str) -> dict[str, Any] | None:
    prompts_field = f.field("rollout.batch_size")
    samples = f.count("rollout.n_samples_per_prompt", 1)
    if estimator in _GROUP_ESTIMATORS and samples < 2:
        raise ConfigError(
            f"must be more than 1 with {f.field('algo.advantage.estimator')} {estimator}"
            " (a per-prompt baseline; OpenRLHF asserts it)",
            field=f.field("rollout.n_samples_per_prompt"), value=samples, file=f.file,
        )  # fmt: skip
    prompt_max, response_max, prompt_field, response_field = _lengths(f)
    ring, tp = f.gpus("ds.ring_attn_size", 1), f.gpus("ds.tensor_parallel_size", 1)
    dynamic = f.switch("train.dynamic_batch_enable")
    packing = f.switch("ds.packing_samples") or ring > 1 or dynamic
    train_tokens = rollout_tokens = None
    if dynamic:  # seqlen_balancing.py: the per-GPU budget over a ring x tp group
        train_tokens = f.count("train.max_tokens_per_gpu", 16192) * ring * tp
        rollout_tokens = f.count("rollout.max_tokens_per_gpu", train_tokens // (ring * tp))
        rollout_tokens *= ring * tp
    load = workload(
        file=f.file,
        fields={
            "prompts": prompts_field,
            "samples": f.field("rollout.n_samples_per_prompt"),
            "prompt_max": prompt_field,
            "response_max": response_field,
            "micro_batch": f.field("train.micro_batch_size"),
            "logprob_micro_batch": f.field("rollout.micro_batch_size"),
        },
        prompts=f.raw("rollout.batch_size", 1024),
        samples=samples,
        prompt_max=prompt_max,
        response_max=response_max,
        micro_batch=f.raw("train.micro_batch_size", _FLAT_MICRO_TRAIN if f.flat else 1),
        packing=packing,
        micro_batch_tokens=train_tokens,
        logprob_micro_batch=f.raw("rollout.micro_batch_size", _FLAT_MICRO_ROLLOUT if f.flat else 1),
        logprob_micro_batch_tokens=rollout_tokens,
    )
    if load is None:  # every argument has a default: never
        return None
    sequences = load["prompts_per_step"] * samples
    batch = f.count("train.batch_size", 128)
    if batch < sequences:
        load["mini_batches"] = sequences // batch
    epochs = f.count("train.max_epochs", 1)
    if epochs > 1:
        load["epochs"] = epochs
    load["controller"] = {"padding": "longest"}
    return load


def _engine_settings(f: _Flags, sync: bool) -> dict[str, Any] | None:
    """The engines' vLLM settings. ``--vllm.enable_sleep`` counts only with
    ``--train.colocate_all`` (OpenRLHF turns it off otherwise) and is refused in an async
    run (asserted)."""
    sleeps = f.switch("train.colocate_all") and f.switch("vllm.enable_sleep")
    if sleeps and not sync:
        raise ConfigError(
            f"cannot be given with {f.field('train.async_enable')} (OpenRLHF asserts it)",
            field=f.field("vllm.enable_sleep"), value=True, file=f.file,
        )  # fmt: skip
    share, share_field = f.given("vllm.gpu_memory_utilization")
    share = _decimal(share)  # a word that is no number is refused by rollout(), named
    return rollout(
        file=f.file,
        fields={"gpu_memory_utilization": share_field},
        gpu_memory_utilization=0.95 if share is None else share,
        enforce_eager=True if f.switch("vllm.enforce_eager") else None,
        sleep_level=1 if sleeps else None,
    )


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert an OpenRLHF run's flags (:func:`script_data`) into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the flag, e.g. ``--vllm.num_engines``.
    """
    f = _Flags(data, file)
    estimator = f.choice("algo.advantage.estimator", ESTIMATORS, "gae")
    models = _models(f, estimator)
    engines, tp = _engines(f)
    sync = not f.switch("train.async_enable")
    if f.switch("train.partial_rollout_enable") and sync:
        raise ConfigError(
            f"needs {f.field('train.async_enable')} (OpenRLHF asserts it)",
            field=f.field("train.partial_rollout_enable"), value=True, file=f.file,
        )  # fmt: skip
    placement = _placement(f, models, engines * tp)
    deepspeed = [sizes for name, sizes in placement.groups.items() if name != "vllm"]
    largest = max(max(sizes) for sizes in deepspeed)
    per_node = largest if len(placement.groups) == 1 else max(_NODE_GPUS, largest)
    if "vllm" in placement.groups:
        placement.groups["vllm"] = _engine_entries(engines * tp, tp, per_node)
        placement.put("actor_infer", "vllm", engines * tp)
    placed, nodes = layout_pools(placement.groups, per_node)
    cluster = Cluster(nodes=max(1, nodes), gpus_per_node=per_node)
    roles: dict[str, dict[str, Any]] = {}
    fields = {
        "actor_train": "actor.num_gpus_per_node", "actor_infer": "vllm.tensor_parallel_size",
        "reference": "ref.num_gpus_per_node", "critic": "critic.num_gpus_per_node",
        "reward": "reward.num_gpus_per_node",
    }  # fmt: skip
    for name in ("actor_train", "actor_infer", "reference", "critic", "reward"):
        if name not in placement.on:
            continue
        group, gpus = placement.on[name]
        devices = placed[group]
        devices = devices[:gpus]
        per_worker = tp if name == "actor_infer" else 1
        check_worker_layout(name, devices, per_worker, cluster, file, field=f.field(fields[name]))
        role = gpu_role(devices, per_worker, name)
        spec = _parallel(f, name, tp)
        if spec:
            role["parallel"] = spec
        roles[name] = role
    infer, train = roles["actor_infer"], roles["actor_train"]
    colocated = bool(set(infer["devices"]) & set(train["devices"]))
    engine = _engine_settings(f, sync)
    if not colocated:
        engine = {**(engine or {}), "weight_sync": "per_tensor"}
    if engine:
        infer["rollout"] = engine
    adapters = _lora(f)
    if adapters:
        for name in ("actor_train", "critic"):
            if name in roles:
                roles[name]["lora"] = dict(adapters)
    staleness = f.count("train.async_queue_size", 1) if not sync else 0
    native: dict[str, Any] = {
        "cluster": cluster.model_dump(exclude_unset=True),
        "roles": roles,
        "pipeline": default_pipeline(roles, "sync" if sync else "async", staleness),
    }
    _openrlhf_order(f, native["pipeline"]["stages"])
    _models_of_roles(f, native, roles)
    load = _workload(f, estimator)
    if load:
        native["workload"] = load
    return apply_costs(native, costs, costs_file)


def _openrlhf_order(f: _Flags, stages: dict[str, dict[str, Any]]) -> None:
    """Add to the default step the waits OpenRLHF's driver imposes, as ``after`` edges, so
    that the plan (and the division of its ``make_experience`` and ``ppo_train`` timers,
    :func:`rlplex.timeline.joint.modelled_span`) runs the passes in OpenRLHF's order:

    - a reward scored inside generation (a remote reward, a ``reward_func`` or an agent:
      the ``reward`` stage on the driver) is done before any forward pass starts
      (``make_experience_batch`` follows ``generate_samples``, ppo_trainer.py);
    - ``make_experience`` dispatches the reward model's, the actor's, the critic's and the
      reference's passes in that order, and waits for a pass before dispatching the next
      where its group is colocated (``_dispatch_forward``'s ``sync_condition``,
      experience_maker.py): the reward model's under ``--train.colocate_all``, the actor's
      and the reference's under it or ``--train.colocate_actor_ref``, the critic's under it
      or ``--train.colocate_critic_reward`` (which also waits for the reward model first);
    - ``--ds.enable_sleep`` trains the critic, then the actor, whatever their GPUs
      (``ppo_train``, ppo_trainer.py).
    """

    def wait(name: str, on: str) -> None:
        stage, before = stages.get(name), stages.get(on)
        if stage is not None and before is not None and on not in stage["after"]:
            stage["after"] = [*stage["after"], on]

    every = f.switch("train.colocate_all")
    actor_ref = every or f.switch("train.colocate_actor_ref")
    critic_reward = every or f.switch("train.colocate_critic_reward")
    model_reward = stages.get("reward", {}).get("role") not in (None, "driver")
    if not model_reward:
        for name in ("old_logprob", "ref_logprob", "values"):
            wait(name, "reward")
    elif every:
        wait("old_logprob", "reward")
    if actor_ref:
        for name in ("values", "ref_logprob"):
            wait(name, "old_logprob")
    if critic_reward and "values" in stages:
        if model_reward:
            wait("values", "reward")
        wait("ref_logprob", "values")
    if f.switch("ds.enable_sleep"):
        wait("train", "critic_train")


def _models_of_roles(f: _Flags, native: dict[str, Any], roles: dict[str, Any]) -> None:
    """The actor's model, and the critic's and reward model's where they differ from it:
    the critic starts from ``--critic.model_name_or_path``, else the (first) reward model,
    else (a remote reward) the actor (train_ppo_ray.py)."""
    actor = f.text("actor.model_name_or_path")
    model = model_path(actor)
    if model:
        native["model"] = model
    rewards = f.text("reward.model_name_or_path")
    reward = rewards.split(",")[0] if rewards else None
    remote = f.text("reward.remote_url") or f.text("train.agent_func_path")
    critic = f.text("critic.model_name_or_path") or (actor if remote else reward)
    for name, own in (("critic", model_path(critic)), ("reward", model_path(reward))):
        if name in roles and own and own != model:
            roles[name]["model"] = own
