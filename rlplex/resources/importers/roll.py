"""Read a ROLL pipeline config: its worker blocks and their ``device_mapping``.

ROLL (alibaba/ROLL) writes one top-level block per worker cluster::

    num_gpus_per_node: 8
    actor_train:
      strategy_args: {strategy_name: megatron_train, ...}
      device_mapping: list(range(0,16))
    actor_infer:
      strategy_args:
        strategy_name: vllm
        strategy_config: {tensor_parallel_size: 2}
      device_mapping: list(range(0,12))
    rewards:
      math_rule: {world_size: 8}          # a CPU worker cluster
      llm_judge: {device_mapping: list(range(12,16)), ...}

The file is composed first (``defaults:`` such as ``../config/traj_envs@_here_``,
``${...}`` interpolations; see :mod:`~rlplex.resources.importers.compose`).
ROLL's own rules, followed here, with their source:

- ``num_gpus_per_worker`` (roll/configs/worker_config.py,
  ``WorkerConfig.__post_init__``): for ``vllm`` it is the strategy config's
  ``tensor_parallel_size * pipeline_parallel_size`` whatever the block says;
  ``sglang`` and ``hf_infer`` keep the block's ``num_gpus_per_worker``
  (default 1); every other strategy (megatron, deepspeed, fsdp) is forced to
  1; a block without ``strategy_args`` keeps its value.
- ``device_mapping`` is a Python list expression (ROLL ``eval``s it; rlplex
  parses it without eval); ``world_size = len(device_mapping) //
  num_gpus_per_worker``, which must divide (ROLL asserts it) and overrides a
  ``world_size`` the block gives. A block without ``device_mapping`` is a CPU
  cluster of ``world_size`` workers.
- Nodes (roll/configs/base_config.py): ``num_nodes = ceil((max rank + 1) /
  num_gpus_per_node)``. ROLL replaces ``num_gpus_per_node`` with the GPUs it
  finds at run time; rlplex, planning ahead, takes the file's value (default 8).
  A worker larger than a node (vLLM TP 16 on 8-GPU nodes) fills whole
  consecutive nodes.
- Rewards (roll/pipeline/rlvr/rlvr_config.py, ``rewards: Dict[str,
  RewardConfig]``): each entry is its own cluster; rlplex keeps each as a role
  named as in the file (``rewards_NAME`` when the name is taken), scored by a
  stage ``reward_NAME``. An agentic file's single ``reward`` block is a role too.
- Domains (rlvr_pipeline.py): ``actor_train.data_args.domain_interleave_probs`` names
  reward clusters; each step draws ``int(p x rollout_batch_size)`` prompts of each domain
  (the last what the others leave), and each cluster scores its domain's: its stage's
  ``share``. A cluster without a domain scores nothing in a step (no stage); teachers with
  ``tag_included`` take their domains' share (:func:`_route_samples`).
- Async (``async_generation_ratio > 0``, base_config.py ``async_pipeline``):
  ``max_staleness = ceil(ratio)``. RLVR asserts the ratio is >= 1
  (rlvr_config.py). Roles may share GPUs in async mode: RLVR warns only;
  the agentic pipeline (roll/pipeline/agentic/agentic_pipeline.py,
  ``_validate_partial_gpu_config``) runs train on a strict subset of infer's
  GPUs ("partial GPU mode") and refuses async when train and infer overlap
  otherwise; rlplex refuses that case the same way.
- OPD (``_handle_opd_mapping`` in base_config.py): ``student_train``,
  ``student_infer`` and ``teacher`` stand for ``actor_train``,
  ``actor_infer`` and ``reference``; a ``teacher`` mapping of several
  teachers is one reference cluster per teacher, each a role named as in the
  file with its own ``ref_logprob_NAME`` stage.
- Not an RL step: ``actor_infer`` without an ``actor_train`` on GPUs (a
  rollout-only run, examples/start_agentic_rollout_pipeline.py), a
  ``sft_train`` block (roll/pipeline/sft/sft_config.py), a
  ``student``/``teacher`` pair (distill_config.py), or ``actor_train`` with
  ``reference`` and DPO's ``beta`` but no ``actor_infer`` (dpo_config.py) is
  refused, saying which.

Read for the estimator: ``pretrain`` (else ``actor_train.model_args.
model_name_or_path``) as ``model``; ``rollout_batch_size``,
``num_return_sequences_in_group``, ``prompt_length`` and ``response_length``
(else ``sequence_length - prompt_length``),
``actor_train.training_args.per_device_train_batch_size`` as the workload (an
agentic file's trajectories as ``workload.turns``: :func:`_agentic_workload`);
each role's TP/PP (megatron ``tensor_model_parallel_size``, vLLM
``tensor_parallel_size``, sglang ``tp_size``), DeepSpeed ZeRO stage, FSDP, and
gradient checkpointing as ``parallel``; the rollout engine's ``max_num_seqs``,
``gpu_memory_utilization`` and ``enforce_eager`` (SGLang: ``max_running_requests``,
``mem_fraction_static``, ``disable_cuda_graph``) as ``rollout``. Costs: see
:mod:`rlplex.resources.importers.common`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from rlplex.errors import ConfigError, InvalidValueError
from rlplex.resources.cluster import Cluster
from rlplex.resources.devices import DeviceSpecError, parse_devices
from rlplex.resources.importers.common import (
    apply_costs,
    default_pipeline,
    flag,
    get_path,
    given_count,
    given_number,
    given_tokens,
    gpu_role,
    lora,
    parallel,
    parallel_sizes,
    positive_int,
    refuse_non_rl,
    remaining_tokens,
    rollout,
    workload,
)
from rlplex.resources.importers.compose import compose
from rlplex.resources.placement import check_worker_layout

_OPD_NAMES = {
    "student_train": "actor_train",
    "student_infer": "actor_infer",
    "teacher": "reference",
}
"""ROLL's on-policy-distillation block names -> the roles they stand for."""

_KEEPS_NUM_GPUS = ("hf_infer", "sglang")
"""Strategies whose block's ``num_gpus_per_worker`` ROLL keeps (worker_config.py)."""


def _strategy(block: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    strategy = block.get("strategy_args")
    if not isinstance(strategy, Mapping):
        return None, {}
    config = strategy.get("strategy_config")
    name = strategy.get("strategy_name")
    return (str(name) if name is not None else None), dict(config) if isinstance(
        config, Mapping
    ) else {}


def _gpus_per_worker(block: Mapping[str, Any], field: str, file: str) -> int:
    """ROLL's ``WorkerConfig.__post_init__`` rule (see the module docstring)."""
    name, config = _strategy(block)
    if name == "vllm":
        base = f"{field}.strategy_args.strategy_config"
        tp = positive_int(
            config.get("tensor_parallel_size", 1), field=f"{base}.tensor_parallel_size", file=file
        )
        pp = positive_int(
            config.get("pipeline_parallel_size", 1),
            field=f"{base}.pipeline_parallel_size",
            file=file,
        )
        return tp * pp
    if name is not None and name not in _KEEPS_NUM_GPUS:
        return 1  # ROLL forces 1 for training and megatron/deepspeed/fsdp inference strategies
    value = block.get("num_gpus_per_worker", 1)
    return positive_int(value, field=f"{field}.num_gpus_per_worker", file=file)


def _positive_coefficient(data: Mapping[str, Any], key: str, file: str) -> bool:
    """Whether a top-level loss coefficient is set above 0 (ROLL's default: 0); a float to
    ROLL's config dataclass, which refuses a string."""
    return (given_number(data.get(key), field=key, file=file) or 0) > 0


def _parallel(
    block: Mapping[str, Any], field: str, file: str, trains: bool, entropy_loss: bool = False
) -> dict[str, Any] | None:
    """The role's parallel sizes as far as ROLL's strategy config says them, each checked
    under its field (block ``field``); ``entropy_loss``: the pipeline's ``entropy_loss_coef``
    > 0 (the training loss takes the logits' entropy)."""
    name, config = _strategy(block)
    if name is None:
        return None
    model_args = block.get("model_args") if isinstance(block.get("model_args"), Mapping) else {}
    assert isinstance(model_args, Mapping)
    # ModelArguments.disable_gradient_checkpointing: a bool to ROLL's dataclass (dacite).
    disabled = flag(
        model_args.get("disable_gradient_checkpointing"),
        field=f"{field}.model_args.disable_gradient_checkpointing", file=file, reading="typed",
    )  # fmt: skip
    recompute = trains and not disabled
    base = f"{field}.strategy_args.strategy_config"

    def sizes(**keys: str) -> dict[str, Any]:
        return parallel_sizes(config, base=base, file=file, **keys)

    if name.startswith("megatron"):
        # The strategy config goes to Megatron's arguments as given: tested for truth.
        distributed = flag(
            config.get("use_distributed_optimizer"),
            field=f"{base}.use_distributed_optimizer", file=file,
        )  # fmt: skip
        return parallel(
            **sizes(
                tp="tensor_model_parallel_size", pp="pipeline_model_parallel_size",
                ep="expert_model_parallel_size", sp="context_parallel_size",
            ),
            zero=1 if distributed else None,
            recompute=recompute or bool(config.get("recompute_granularity")),
        )  # fmt: skip
    if name == "vllm":
        return parallel(**sizes(tp="tensor_parallel_size", pp="pipeline_parallel_size"))
    if name == "sglang":
        return parallel(**sizes(tp="tp_size" if "tp_size" in config else "tensor_parallel_size"))
    # Outside Megatron, ROLL's strategies take log-probs with the base Strategy's (or FSDP2's)
    # log_probs_from_logits: log_softmax(logits.float()) and a gather (roll/utils/functionals),
    # and its log-prob passes the logits' fp32 entropy for the metrics (base_worker.py,
    # forward_func_log_probs); training takes the entropy only with entropy_loss_coef > 0.
    plain = "fp32_log_softmax_entropy" if entropy_loss else "fp32_log_softmax_entropy_forward"
    if name.startswith("deepspeed"):
        return parallel(zero=_zero_stage(config, base, file), recompute=recompute, logits=plain)
    if name.startswith("fsdp"):
        return parallel(fsdp=True, recompute=recompute, logits=plain)
    return parallel(recompute=recompute, logits=plain)


def _zero_stage(config: Mapping[str, Any], base: str, file: str) -> int | None:
    """DeepSpeed's ZeRO stage (``zero_optimization.stage``): 0 to 3, as DeepSpeed's config
    takes it (a stage it does not know was dropped for none)."""
    field = f"{base}.zero_optimization.stage"
    stage = get_path(config, "zero_optimization.stage")
    if stage is None:
        return None
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise InvalidValueError(
            "must be a ZeRO stage: 0, 1, 2 or 3", field=field, value=stage, file=file
        )
    return stage


def _lora(block: Mapping[str, Any], field: str, file: str) -> dict[str, Any] | None:
    """A role's LoRA adapters: ROLL trains (and vLLM serves, ``enable_lora``) adapters on a role
    whose ``model_args.lora_target`` is set (``all``, ``all-linear`` or module names), of rank
    ``lora_rank`` (8 by default; roll/configs/model_args.py), which peft wants >= 1."""
    model_args = block.get("model_args")
    if not isinstance(model_args, Mapping) or model_args.get("lora_target") is None:
        return None
    target = model_args["lora_target"]
    rank = given_count(
        model_args.get("lora_rank"), field=f"{field}.model_args.lora_rank", file=file
    )  # fmt: skip
    return lora(rank or 8, "all-linear" if target in ("all", "all-linear") else target)


def _parse_mapping(value: Any, field: str, file: str) -> tuple[int, ...]:
    try:
        devices = parse_devices(value)
    except DeviceSpecError as exc:
        raise ConfigError(str(exc), field=field, value=value, file=file) from None
    if not isinstance(devices, tuple):
        raise ConfigError("must list GPU ranks", field=field, value=value, file=file)
    return devices


_WORKER_BLOCKS = frozenset({
    "actor_train", "actor_infer", "critic", "reference", "reward", "reward_model", "teacher",
    "student_train", "student_infer", "student", "sft_train", "validation",
})  # fmt: skip
"""The top-level blocks ROLL's pipeline configs type ``WorkerConfig`` (roll/configs/
base_config.py, rlvr_config.py, agentic_config.py, distill_config.py, dpo_config.py,
sft_config.py). ROLL reads its config with dacite's ``from_dict``, which drops keys its
dataclass does not have: any other block, even with a ``device_mapping`` (a misspelt
``actor_trian``), starts no worker, so it is no role."""


def _role_blocks(data: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any], bool]]:
    """(rlplex name, field path, block, is a reward) of every worker block ROLL starts (the
    :data:`_WORKER_BLOCKS` and each ``rewards`` entry), in file order."""
    blocks: list[tuple[str, str, Mapping[str, Any], bool]] = []
    taken = {str(k) for k in data}
    for key, block in data.items():
        key = str(key)
        if key == "rewards" and isinstance(block, Mapping):
            for sub, body in block.items():
                if not isinstance(body, Mapping):
                    continue
                sub = str(sub)
                name = sub if sub not in taken or sub == "rewards" else f"rewards_{sub}"
                blocks.append((name, f"rewards.{sub}", body, True))
        elif isinstance(block, Mapping) and "device_mapping" in block and key in _WORKER_BLOCKS:
            name = _OPD_NAMES.get(key, key)
            blocks.append((name, key, block, key in ("reward", "reward_model")))
        elif key == "teacher" and isinstance(block, Mapping):
            # Several teachers (base_config.py _handle_opd_mapping): one reference cluster each.
            for sub, body in block.items():
                if isinstance(body, Mapping) and "device_mapping" in body:
                    sub = str(sub)
                    name = sub if sub not in taken else f"teacher_{sub}"
                    blocks.append((name, f"teacher.{sub}", body, False))
    return blocks


def _refuse_non_rl(data: Mapping[str, Any], file: str) -> None:
    if isinstance(data.get("sft_train"), Mapping):
        refuse_non_rl("a ROLL SFT config (it has an 'sft_train' block)", file=file)
    if isinstance(data.get("student"), Mapping) and isinstance(data.get("teacher"), Mapping):
        refuse_non_rl(
            "a ROLL distillation config (it has 'student' and 'teacher' blocks)", file=file
        )
    has_infer = isinstance(data.get("actor_infer"), Mapping) or isinstance(
        data.get("student_infer"), Mapping
    )
    has_train = any(
        isinstance(data.get(k), Mapping) and data[k].get("device_mapping") is not None
        for k in ("actor_train", "student_train")
    )
    if has_infer and not has_train:
        refuse_non_rl(
            "a ROLL rollout-only config (no 'actor_train' device_mapping: generation, no training)",
            file=file,
        )
    if not has_infer and isinstance(data.get("actor_train"), Mapping) and "beta" in data:
        refuse_non_rl(
            "a ROLL DPO config ('actor_train' and 'reference' with 'beta', no 'actor_infer')",
            file=file,
        )


STEP_WISE_ENV_MANAGERS = frozenset(
    {"StepEnvManager", "StepConcatEnvManager", "AgentNativeStepEnvManager"}
)
"""ROLL's env managers that build one training sample per turn (roll/pipeline/agentic/
env_manager: ``StepEnvManager`` and its subclass ``StepConcatEnvManager``, GiGPO's;
``AgentNativeStepEnvManager``, the SWE demos')."""


def _agentic_workload(data: Mapping[str, Any], file: str) -> dict[str, Any] | None:
    """An agentic file's trajectories as a workload, without the first prompt's length (no
    agentic file gives it): ``workload.prompt_tokens`` is left for the user to set.

    ROLL's agentic pipeline (roll/pipeline/agentic/agentic_config.py, env_manager/
    traj_env_manager.py): ``rollout_batch_size`` trajectories per step in groups of
    ``train_env_manager.group_size``; each environment of the ``train_env_manager.tags``
    runs at most ``custom_envs.TAG.max_steps`` turns (``max_actions_per_traj``), each answer
    at most ``min(max_tokens_per_step, actor_infer.generating_args.max_new_tokens)`` tokens,
    and the whole trajectory within ``sequence_length``; a step-wise env manager
    (``env_manager_cls`` ``...StepEnvManager``: ``AgentNativeStepEnvManager``, GiGPO's
    ``StepEnvManager``) trains each turn as its own sample (``turns.samples: turn``; GiGPO's
    bounded history is priced as the whole context). Without a ``prompt_length``,
    the trajectory's cap is the whole ``sequence_length``. Turns: the mean is the midpoint
    of 1 and the most (an importer's assumption, as half the maxima for lengths).

    Raises:
        ConfigError: ``train_env_manager.tags`` is not a list of names, or
            ``rollout_batch_size`` is not a multiple of the group size (ROLL asserts it).
    """
    trajectories = given_count(
        data.get("rollout_batch_size"), field="rollout_batch_size", file=file
    )
    group_field = "train_env_manager.group_size"
    group = given_count(get_path(data, group_field), field=group_field, file=file) or 1
    if trajectories and trajectories % group:
        raise ConfigError(
            f"must be a multiple of train_env_manager.group_size ({group}), as ROLL asserts",
            field="rollout_batch_size",
            value=trajectories,
            file=file,
        )
    envs = data.get("custom_envs") if isinstance(data.get("custom_envs"), Mapping) else {}
    tags = get_path(data, "train_env_manager.tags")
    if tags is None:
        tags = list(envs)
    elif not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ConfigError(
            "must be a list of environment names (keys of custom_envs)",
            field="train_env_manager.tags",
            value=tags,
            file=file,
        )
    bodies = {t: envs[t] for t in tags if isinstance(envs.get(t), Mapping)}
    managers = [b.get("env_manager_cls") for b in bodies.values()] or [data.get("env_manager_cls")]
    # Step-wise env managers train each turn as its own sample (formulate_rollouts).
    step_wise = any(
        isinstance(m, str) and m.rsplit(".", 1)[-1] in STEP_WISE_ENV_MANAGERS for m in managers
    )
    max_turns, answer = _env_limits(data, bodies, file)
    if not (trajectories and max_turns and answer):
        return None
    micro_field = _micro_batch_field(data)
    load: dict[str, Any] = {
        "prompts_per_step": trajectories // group,
        "samples_per_prompt": group,
        "response_tokens": {"mean": answer / 2, "max": answer},
        "turns": {"mean": (1 + max_turns) / 2, "max": max_turns}
        | ({"samples": "turn"} if step_wise else {}),
        "micro_batch_size": given_count(get_path(data, micro_field), field=micro_field, file=file)
        or 1,
    }
    sequence = given_tokens(data.get("sequence_length"), field="sequence_length", file=file)
    prompt = given_tokens(data.get("prompt_length"), field="prompt_length", file=file)
    if prompt:
        load["prompt_tokens"] = {"mean": prompt / 2, "max": prompt}
    if sequence and sequence > (prompt or 0):
        cap = sequence - (prompt or 0)
        load["turns"]["max_tokens"] = cap
        # Half the maxima, but a trajectory's mean at most half its cap (answers cut short
        # by the budget, as ROLL's max_new_tokens shrinks with what is left of it).
        mean_turns = load["turns"]["mean"]
        load["response_tokens"]["mean"] = min(answer / 2, cap / 2 / mean_turns)
    return load


def _micro_batch_field(data: Mapping[str, Any]) -> str:
    """Where the trainer's micro-batch lives: on-policy distillation (RLVR or agentic: both
    configs call base_config.py ``_handle_opd_mapping``) trains a ``student_train`` block,
    which ROLL maps onto actor_train."""
    trainer = "student_train" if "student_train" in data else "actor_train"
    return f"{trainer}.training_args.per_device_train_batch_size"


_ANSWER = "max_tokens_per_step"


def _env_limits(
    data: Mapping[str, Any], bodies: Mapping[str, Mapping[str, Any]], file: str
) -> tuple[int | None, int | None]:
    """An agentic file's most turns and longest answer over its training environments
    (``custom_envs.TAG.max_steps``, ``.max_tokens_per_step``; else the top-level
    ``max_actions_per_traj``, ``max_tokens_per_step``), the answer capped by
    ``actor_infer.generating_args.max_new_tokens``; each, when given, checked."""
    turns = [
        given_count(b.get("max_steps"), field=f"custom_envs.{t}.max_steps", file=file)
        for t, b in bodies.items()
    ]
    answers = [
        given_tokens(b.get("max_tokens_per_step"), field=f"custom_envs.{t}.{_ANSWER}", file=file)
        for t, b in bodies.items()
    ]
    top_turns = given_count(
        data.get("max_actions_per_traj"), field="max_actions_per_traj", file=file
    )
    top_answer = given_tokens(data.get(_ANSWER), field=_ANSWER, file=file)
    max_turns = max((t for t in turns if t), default=top_turns)
    answer = max((a for a in answers if a), default=top_answer)
    cap = "actor_infer.generating_args.max_new_tokens"
    new_tokens = given_tokens(get_path(data, cap), field=cap, file=file)
    if new_tokens and answer:
        answer = min(answer, new_tokens)
    return max_turns, answer


def _workload(data: Mapping[str, Any], agentic: bool, file: str) -> dict[str, Any] | None:
    load = _agentic_workload(data, file) if agentic else _rlvr_workload(data, file)
    if load is not None:
        # ROLL pads every sample to sequence_length (functionals.py pad_to_length) and its
        # strategies run the padded rows, but where a stage says otherwise
        # (_stage_micro_batches: a Megatron worker's dynamic batches or sequence packing).
        load["packing"] = False
    if load is not None and get_path(data, "transfer_backend.backend_name") == "TransferQueue":
        # RemoteBatch: the pipeline passes keys; workers fetch the tensors from the store.
        load["controller"] = {"padding": "none"}
    return load


def _rlvr_workload(data: Mapping[str, Any], file: str) -> dict[str, Any] | None:
    """An RLVR file's workload: ``rollout_batch_size`` prompts of up to ``prompt_length``
    tokens, ``num_return_sequences_in_group`` answers each of up to ``response_length``
    (else what ``sequence_length`` leaves: ROLL's ``max_new_tokens = sequence_length -
    prompt_length``)."""
    prompt = data.get("prompt_length")
    response, response_field = data.get("response_length"), "response_length"
    micro_field = _micro_batch_field(data)
    if response is None:
        response_field = "sequence_length"
        response = remaining_tokens(
            data.get("sequence_length"), prompt,
            field="sequence_length", prompt_field="prompt_length", file=file,
        )  # fmt: skip
    return workload(
        file=file,
        fields={
            "prompts": "rollout_batch_size",
            "samples": "num_return_sequences_in_group",
            "prompt_max": "prompt_length",
            "response_max": response_field,
            "micro_batch": micro_field,
        },
        prompts=data.get("rollout_batch_size"),
        samples=data.get("num_return_sequences_in_group"),
        prompt_max=prompt,
        response_max=response,
        micro_batch=get_path(data, micro_field),
    )


def _role_model(block: Mapping[str, Any], data: Mapping[str, Any]) -> str | None:
    """The model a worker block loads (``model_args.model_name_or_path``, a ``${key}``
    reference to a top-level key resolved), or None when it says none."""
    value = get_path(block, "model_args.model_name_or_path")
    if isinstance(value, str):
        ref = re.fullmatch(r"\$\{([A-Za-z_][\w]*)\}", value.strip())
        if ref:
            value = data.get(ref.group(1))
    if isinstance(value, str) and value and "${" not in value:
        return value
    return None


def _model(data: Mapping[str, Any]) -> str | None:
    for value in (
        data.get("pretrain"),
        get_path(data, "actor_train.model_args.model_name_or_path"),
        get_path(data, "student_train.model_args.model_name_or_path"),
    ):
        if isinstance(value, str) and value and "${" not in value:
            return value
    return None


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert a ROLL config (as parsed YAML) into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the ROLL field path, e.g.
            ``actor_infer.device_mapping``.
    """
    data = compose(data, file).data
    _refuse_non_rl(data, file)
    per_node = positive_int(data.get("num_gpus_per_node", 8), field="num_gpus_per_node", file=file)
    agentic = "train_env_manager" in data or "custom_envs" in data
    entropy_loss = _positive_coefficient(data, "entropy_loss_coef", file)
    parsed: list[tuple[str, str, Mapping[str, Any], tuple[int, ...] | None, int, bool]] = []
    for name, field, block, is_reward in _role_blocks(data):
        raw = block.get("device_mapping")
        if raw is None:
            size = block.get("world_size", 1)
            count = positive_int(size, field=f"{field}.world_size", file=file)
            parsed.append((name, field, block, None, count, is_reward))
            continue
        devices = _parse_mapping(raw, f"{field}.device_mapping", file)
        parsed.append(
            (name, field, block, devices, _gpus_per_worker(block, field, file), is_reward)
        )
    by_name = {p[0]: p for p in parsed}
    for required in ("actor_train", "actor_infer"):
        if required not in by_name or by_name[required][3] is None:
            raise ConfigError(
                f"a ROLL RL config needs a {required!r} block with a device_mapping",
                field=required,
                file=file,
            )
    top = max(max(p[3]) for p in parsed if p[3])
    cluster = Cluster(nodes=top // per_node + 1, gpus_per_node=per_node)
    roles: dict[str, dict[str, Any]] = {}
    reward_roles: list[str] = []
    teachers = [p[0] for p in parsed if p[1].startswith("teacher.")]
    judges: dict[str, dict[str, Any]] = {}
    # Read only for a file with a judge: a bad value elsewhere is not this importer's to refuse.
    calls = (
        _judge_calls(data, by_name, file)
        if not agentic and any(p[5] and _is_judge(p[2]) for p in parsed)
        else None
    )
    for name, field, block, devices, count, is_reward in parsed:
        if is_reward:
            reward_roles.append(name)
        judged = _judge(block, field, file, calls) if is_reward else None
        if judged is not None:
            judges[name] = judged[1]
            if devices is not None and judged[0] is None:
                # A judge behind an API holds no model: its workers are clients.
                devices, count = None, len(devices) // count
        if devices is None:
            roles[name] = {"world_size": count}
            continue
        if len(devices) % count:
            raise ConfigError(
                f"has {len(devices)} GPUs, not a multiple of num_gpus_per_worker {count}"
                " (ROLL: len(device_mapping) must be divisible by num_gpus_per_worker)",
                field=f"{field}.device_mapping",
                value=block.get("device_mapping"),
                file=file,
            )
        check_worker_layout(name, devices, count, cluster, file, field=f"{field}.device_mapping")
        kind = "reward" if is_reward else "reference" if name in teachers else name
        role = gpu_role(devices, count, kind)
        spec = _parallel(
            block, field, file, trains=name in ("actor_train", "critic"), entropy_loss=entropy_loss
        )
        if spec:
            role["parallel"] = spec
        engine = get_path(block, "strategy_args.strategy_config")
        if name == "actor_infer":
            engine = engine if isinstance(engine, Mapping) else {}
            # ROLL's vLLM strategy sleeps at level 1 (weights kept in host memory) unless
            # strategy_config.sleep_level says 2, and exports strategy_config.VLLM_USE_V1
            # (default 1) before vLLM starts (roll/distributed/strategy/vllm_strategy.py).
            is_vllm = get_path(block, "strategy_args.strategy_name") == "vllm"
            seqs, share, eager = _engine_keys(get_path(block, "strategy_args.strategy_name"))
            settings = rollout(
                file=file,
                fields={
                    "max_num_seqs": f"{field}.strategy_args.strategy_config.{seqs}",
                    "gpu_memory_utilization": f"{field}.strategy_args.strategy_config.{share}",
                    "sleep_level": f"{field}.strategy_args.strategy_config.sleep_level",
                    "enforce_eager": f"{field}.strategy_args.strategy_config.{eager}",
                },
                max_num_seqs=engine.get(seqs),
                gpu_memory_utilization=engine.get(share),
                enforce_eager=engine.get(eager),
                sleep_level=engine.get("sleep_level", 1) if is_vllm else None,
                vllm_v0=is_vllm and str(engine.get("VLLM_USE_V1", 1)).strip() in ("0", "False"),
            )
            if settings:
                role["rollout"] = settings
        if judged is not None and judged[0] is not None:
            role["rollout"] = judged[0]
        adapters = _lora(block, field, file)
        if adapters:
            role["lora"] = adapters
        # A reward model, judge or teacher loads its own checkpoint (the actor's roles take
        # the top-level model): bug, a 7B judge beside a 235B actor was priced as the 235B.
        own = _role_model(block, data)
        if own and name not in ("actor_train", "actor_infer", "reference") and own != _model(data):
            role["model"] = own
        roles[name] = role
    reference_roles = teachers or None
    if "lora" in roles.get("actor_train", {}) and "reference" in roles and not teachers:
        # A LoRA actor computes the reference log-probs itself with its adapters switched off
        # (rlvr_pipeline.py and agentic_pipeline.py: use_ref_model is false under LoRA, the
        # batch carries disable_adapter): the reference role loads no model.
        del roles["reference"]
        reference_roles = ["actor_train"]
    ratio = data.get("async_generation_ratio", 0) or 0
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio < 0:
        raise ConfigError(
            "must be a number >= 0", field="async_generation_ratio", value=ratio, file=file
        )
    if 0 < ratio < 1 and not agentic:
        raise ConfigError(
            "must be >= 1 for an async RLVR pipeline (ROLL asserts it in RLVRConfig)",
            field="async_generation_ratio",
            value=ratio,
            file=file,
        )
    train, infer = set(by_name["actor_train"][3] or ()), set(by_name["actor_infer"][3] or ())
    partial = train < infer
    if agentic and ratio > 0 and train & infer and not partial:
        raise ConfigError(
            f"async generation (async_generation_ratio {ratio:g}) needs actor_train's GPUs"
            " disjoint from actor_infer's, or a strict subset of them (ROLL's partial GPU"
            " mode); ROLL's agentic pipeline runs overlapping GPUs in sync mode only",
            field="actor_train.device_mapping",
            value=by_name["actor_train"][2].get("device_mapping"),
            file=file,
        )
    mode, staleness = ("async", max(1, math.ceil(ratio))) if ratio > 0 else ("sync", 0)
    native: dict[str, Any] = {
        "cluster": cluster.model_dump(exclude_unset=True),
        "roles": roles,
        "pipeline": default_pipeline(roles, mode, staleness, reward_roles or None, reference_roles),
    }
    load = _workload(data, agentic, file)
    if load:
        native["workload"] = load
    for stage in native["pipeline"]["stages"].values():
        if stage.get("role") in judges:
            stage["judge"] = judges[stage["role"]]
    if not agentic:
        _route_samples(native["pipeline"], data, parsed, file)
    if load:
        _stage_micro_batches(native["pipeline"]["stages"], roles, by_name, load, file)
    model = _model(data)
    if model:
        native["model"] = model
    return apply_costs(native, costs, costs_file)


JUDGE_TEMPLATES = {"Qwen2.5-7B-Instruct-RLVR-prompt": (240, 2)}
"""(template tokens, answer tokens) of the judge prompts ROLL knows (roll/utils/prompt.py
``prompt_maps``), counted with Qwen2.5's tokenizer (bench/roll_judge_prompt_tokens.py): the
RLVR prompt's 212 tokens inside Qwen2.5's chat template (its default system message, the
role markers and the generation prompt: 28 more); it asks for ``YES`` or ``NO`` alone (a
token, and the end-of-sequence token)."""
JUDGE_DEFAULT_TEMPLATE = (124, 5)
"""The judge prompt ROLL writes when ``judge_prompt`` names none it knows
(llm_judge_reward_worker.py ``_format_judge_prompt``): its 96 tokens (indentation
included) in the chat template, as :data:`JUDGE_TEMPLATES`; it asks for ``Score: N``
(four tokens, and the end-of-sequence token)."""


def _is_judge(block: Mapping[str, Any]) -> bool:
    """Whether a reward block's worker is ROLL's ``LLMJudgeRewardWorker``."""
    worker = block.get("worker_cls")
    return isinstance(worker, str) and worker.endswith("LLMJudgeRewardWorker")


def _judge_calls(
    data: Mapping[str, Any], by_name: Mapping[str, tuple[Any, ...]], file: str
) -> tuple[int, bool] | None:
    """How ROLL's RLVR pipeline calls a reward cluster, as (samples per ``compute_rewards``
    call, whether actor_infer shares a GPU with actor_train, reference or critic), or None
    where it calls each worker once a step with its whole share (``generate_opt_level: 0``).

    By default (``generate_opt_level: 1``, generate_scheduler.py) each prompt's samples are
    scored by one call as soon as they are generated (``RolloutContext.compute_rewards``),
    one sample a call with ``is_num_return_sequences_expand``. The call's meta_info carries
    no ``is_offload_states``, so the judge's ``state_offload_manger`` offloads its engine
    after every call; the vLLM and SGLang strategies do so only when actor_infer is
    colocated (``is_actor_infer_colocated``), Hugging Face's always.
    """
    level = given_count(
        data.get("generate_opt_level"), field="generate_opt_level", file=file, least=0
    )
    if level == 0:
        return None
    expand = flag(
        data.get("is_num_return_sequences_expand"),
        field="is_num_return_sequences_expand", file=file, default=False, reading="typed",
    )  # fmt: skip
    samples = given_count(
        data.get("num_return_sequences_in_group"), field="num_return_sequences_in_group", file=file
    )
    infer = set(by_name["actor_infer"][3] or ())
    shared = any(
        infer & set(by_name[other][3] or ())
        for other in ("actor_train", "reference", "critic")
        if other in by_name
    )
    return (1 if expand else samples or 1), shared


def _engine_keys(strategy: Any) -> tuple[str, str, str]:
    """The names a strategy's ``strategy_config`` gives the engine's batch cap, memory share
    and eager switch: vLLM's, or SGLang's (roll/distributed/strategy/sglang_strategy.py passes
    them to sglang.Engine: ``mem_fraction_static`` is the share for weights and KV cache, as
    vLLM's ``gpu_memory_utilization``)."""
    if strategy == "sglang":
        return "max_running_requests", "mem_fraction_static", "disable_cuda_graph"
    return "max_num_seqs", "gpu_memory_utilization", "enforce_eager"


def _judge(
    block: Mapping[str, Any], field: str, file: str, calls: tuple[int, bool] | None = None
) -> tuple[dict[str, Any] | None, dict[str, Any]] | None:
    """A reward block's LLM judge, as (its engine's ``rollout`` settings, its ``judge``), or
    None for another reward worker. ROLL's ``LLMJudgeRewardWorker`` judges each sample in a
    call of its own (``_run_local_inference``: one sample a generate call, so one sequence
    at a time), on its vLLM or SGLang engine or Hugging Face's eager ``generate``
    (``hf_infer``); a judge behind an API (``judge_model_type: api``) has no engine: None
    settings. ``calls`` (:func:`_judge_calls`): where the engine sleeps after each
    ``compute_rewards`` call, its samples are the judge's ``reload_every``.

    Raises:
        ConfigError: ``judge_model_type`` is neither ``inference`` nor ``api`` (the worker
            raises "Unsupported model type" at setup).
    """
    if not _is_judge(block):
        return None
    mode = block.get("judge_model_type")
    if mode not in ("inference", "api"):
        # ROLL v0.2 had a third mode, "cluster" (clients of a shared reward_model engine);
        # v0.3.0 removed it, but not from examples/ (rlvr_config_8gpus_llm_as_judge_server).
        gone = " (v0.3.0 removed 'cluster')" if mode == "cluster" else ""
        raise ConfigError(
            "must be 'inference' (the judge's model on its own GPUs) or 'api': ROLL's"
            f" LLMJudgeRewardWorker raises 'Unsupported model type' for any other{gone}",
            field=f"{field}.judge_model_type",
            value=mode,
            file=file,
        )
    prompt = block.get("judge_prompt")
    template, answer = JUDGE_TEMPLATES.get(prompt, JUDGE_DEFAULT_TEMPLATE)  # type: ignore[arg-type]
    where = f"{field}.generating_args.max_new_tokens"
    cap = given_count(get_path(block, "generating_args.max_new_tokens"), field=where, file=file)
    answer = min(answer, cap) if cap is not None else answer
    judge = {"template_tokens": template, "response_tokens": answer}
    if mode == "api":
        return None, judge
    strategy = get_path(block, "strategy_args.strategy_name")
    engine = get_path(block, "strategy_args.strategy_config")
    engine = engine if isinstance(engine, Mapping) and strategy in ("vllm", "sglang") else {}
    if calls is not None and (calls[1] or strategy not in ("vllm", "sglang")):
        judge["reload_every"] = calls[0]
    if calls is not None:
        # Each prompt's samples are scored as soon as they are generated (generate_and_reward
        # in generate_scheduler.py), on the judge's own GPUs.
        judge["streams"] = True
    where = f"{field}.strategy_args.strategy_config"
    _, share, eager = _engine_keys(strategy)
    settings = rollout(
        file=file,
        fields={
            "max_num_seqs": f"{field}.worker_cls",
            "gpu_memory_utilization": f"{where}.{share}",
            "enforce_eager": f"{where}.{eager}",
        },
        max_num_seqs=1,
        gpu_memory_utilization=engine.get(share),
        # Hugging Face's generate runs eagerly; a vLLM or SGLang engine as configured.
        enforce_eager=engine.get(eager, False) if engine else True,
    )
    return settings or {}, judge


INFER_BATCH_SIZE = 16
"""A worker's ``infer_batch_size`` when its block gives none (roll/configs/worker_config.py):
the micro-batch of its log-prob, values and reward passes (base_worker.py)."""
_TRAINED = ("train", "critic_train")
_PACKING_ALGORITHMS = ("none", "load_balance")
"""ROLL's ``sequence_packing_args.algorithm`` values (roll/utils/sequence_packing.py)."""


def _stage_micro_batches(
    stages: dict[str, dict[str, Any]],
    roles: Mapping[str, Mapping[str, Any]],
    by_name: Mapping[str, tuple[str, str, Mapping[str, Any], Any, int, bool]],
    load: Mapping[str, Any],
    file: str,
) -> None:
    """Each pass's own micro-batch where its worker's differs from the workload's: ROLL's
    forward passes (log-probs, values, a reward model's scores) run micro-batches of the
    worker's ``infer_batch_size`` (base_worker.py sets ``micro_batch_size`` from it), a
    critic trains on its own ``training_args.per_device_train_batch_size``. Only Megatron
    strategies batch by tokens (megatron_strategy.py ``forward_step`` / ``train_step``;
    DeepSpeed, FSDP2 and HF chunk every batch by the count): dynamic batching
    (``use_dynamic_batching_in_train`` / ``_in_infer``) first, micro-batches of up to
    ``max_tokens_per_microbatch_in_train`` / ``_in_infer``; else sequence packing
    (``use_sequence_packing``) with ``sequence_packing_args.algorithm: load_balance``, as
    few micro-batches as ``max_packed_sequence_length_train`` / ``_forward`` allows (its
    default algorithm ``none`` packs each count-sized micro-batch: the count)."""
    for name, stage in stages.items():
        role = stage.get("role")
        if role not in by_name or "devices" not in roles.get(role, {}) or "judge" in stage:
            continue
        if name.startswith(("generate", "rollout")) or stage.get("kind") == "weight_sync":
            continue
        _, field, block, *_ = by_name[role]
        strategy, _ = _strategy(block)
        if strategy in ("vllm", "sglang"):
            continue  # an inference engine batches its own requests: no micro-batches
        phase = "train" if name in _TRAINED else "infer"
        if phase == "train":
            key = f"{field}.training_args.per_device_train_batch_size"
            size = given_count(get_path(block, "training_args.per_device_train_batch_size"),
                               field=key, file=file)  # fmt: skip
        else:
            key = f"{field}.infer_batch_size"
            size = given_count(block.get("infer_batch_size"), field=key, file=file)
            size = INFER_BATCH_SIZE if size is None else size
        if size is not None and size != load.get("micro_batch_size"):
            stage["micro_batch_size"] = size
        megatron = isinstance(strategy, str) and strategy.startswith("megatron")
        tokens = _token_budget(block, field, phase, file, megatron=megatron)
        if tokens is not None:
            stage["micro_batch_tokens"] = tokens
        # The workload pads (ROLL pads every sequence to sequence_length); a Megatron worker's
        # dynamic batches (each micro-batch cut to its longest) and sequence packing do not.
        packs = any(
            flag(block.get(key), field=f"{field}.{key}", file=file, default=False,
                 reading="typed")
            for key in (f"use_dynamic_batching_in_{phase}", "use_sequence_packing")
        )  # fmt: skip
        if megatron and packs:
            stage["packing"] = True


def _token_budget(
    block: Mapping[str, Any], field: str, phase: str, file: str, *, megatron: bool
) -> int | None:
    """A worker's token budget per micro-batch of its ``phase`` (train or infer) passes, or
    None where it batches by count (:func:`_stage_micro_batches`). Dynamic batching without
    its budget is refused for every strategy: the pipeline shards the batch by it
    (dynamic_batching.py) whatever the worker then does."""
    switch = f"use_dynamic_batching_in_{phase}"
    if flag(block.get(switch), field=f"{field}.{switch}", file=file, default=False,
            reading="typed"):  # fmt: skip
        budget_key = f"max_tokens_per_microbatch_in_{phase}"
        where = f"{field}.{budget_key}"
        tokens = given_count(block.get(budget_key), field=where, file=file)
        if tokens is None:
            raise ConfigError(
                f"must be set with {switch} (ROLL: 'This config must be set when using"
                " dynamic batching')", field=where, file=file,
            )  # fmt: skip
        return tokens if megatron else None
    packs = flag(block.get("use_sequence_packing"), field=f"{field}.use_sequence_packing",
                 file=file, default=False, reading="typed")  # fmt: skip
    if not (packs and megatron):
        return None
    key = "sequence_packing_args.algorithm"
    algorithm = get_path(block, key, "none")
    if algorithm not in _PACKING_ALGORITHMS:
        raise ConfigError(
            f"must be one of {', '.join(_PACKING_ALGORITHMS)} (ROLL: 'Illegal sequence packing"
            " algorithm')", field=f"{field}.{key}", value=algorithm, file=file,
        )  # fmt: skip
    if algorithm == "none":
        return None
    # roll/utils/sequence_packing.py LoadBalancePacker: ceil(tokens / budget) micro-batches
    # over the rank's share, balanced; it asserts the budget is set.
    length = "train" if phase == "train" else "forward"
    key = f"sequence_packing_args.max_packed_sequence_length_{length}"
    tokens = given_count(get_path(block, key), field=f"{field}.{key}", file=file)
    if tokens is None:
        raise ConfigError(
            "must be set with use_sequence_packing and algorithm load_balance (ROLL asserts"
            " 'max_packed_sequence_length is None')", field=f"{field}.{key}", file=file,
        )  # fmt: skip
    return tokens


ROLLOUT_BATCH_SIZE = 128
"""ROLL's ``rollout_batch_size`` when a file gives none (roll/configs/base_config.py)."""


def _tags(block: Mapping[str, Any], field: str, file: str) -> frozenset[str]:
    """A worker block's ``tag_included``: the data tags it takes (none: every tag)."""
    tags = block.get("tag_included")
    if tags is None:
        return frozenset()
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ConfigError(
            "must be a list of data tags", field=f"{field}.tag_included", value=tags, file=file
        )
    return frozenset(tags)


def _domain_prompts(
    data: Mapping[str, Any], rewards: Mapping[str, str], file: str
) -> dict[str, int] | None:
    """Each domain's prompts per step, by reward cluster (the file's key); None when the file
    gives no ``domain_interleave_probs``.

    ROLL's RLVR pipeline (roll/pipeline/rlvr/rlvr_pipeline.py ``__init__``, the VL pipeline
    alike) keys ``actor_train.data_args.domain_interleave_probs`` by reward cluster: the
    domain of a prompt is the reward cluster whose ``tag_included`` holds its tag
    (rlvr_config.py ``tag_2_domain``), and each domain gets its own scheduler and its own
    reward cluster (``reward_clusters={domain: self.rewards[domain]}``). Every step draws a
    fixed quota from each domain, not a sample: ``int(p x rollout_batch_size)`` prompts, the
    last domain of the mapping what the others leave (its own value is not read), so the
    values need not sum to 1.

    Raises:
        ConfigError: what ROLL fails on: a mapping that is empty or not a mapping, a domain
            that names no reward cluster (``self.rewards[domain]``: KeyError at setup), a
            value it reads that is not a number, a domain left fewer than 1 prompt (a
            negative quota fails its scheduler's ``assert expected_samples >= 0``, an empty
            one its ``collect_items_as_batch``, which divides by the items it collected).
    """
    train = "actor_train" if isinstance(data.get("actor_train"), Mapping) else "student_train"
    field = f"{train}.data_args.domain_interleave_probs"
    probs = get_path(data, field)
    if probs is None:
        return None
    if not isinstance(probs, Mapping) or not probs:
        raise ConfigError(
            "must map each domain (a reward cluster of 'rewards') to its share of"
            " rollout_batch_size",
            field=field, value=probs, file=file,
        )  # fmt: skip
    batch = (
        given_count(data.get("rollout_batch_size"), field="rollout_batch_size", file=file)
        or ROLLOUT_BATCH_SIZE
    )
    prompts: dict[str, int] = {}
    for i, (key, value) in enumerate(probs.items()):
        domain, where = str(key), f"{field}.{key}"
        if domain not in rewards:
            raise ConfigError(
                f"names no reward cluster (rewards: {', '.join(rewards) or 'none'}); ROLL's"
                " RLVR pipeline scores each domain on the reward cluster of its name",
                field=where, value=value, file=file,
            )  # fmt: skip
        if i == len(probs) - 1:
            quota = batch - sum(prompts.values())
        else:
            p = given_number(value, field=where, file=file)
            if p is None:
                raise InvalidValueError("must be a number", field=where, value=value, file=file)
            quota = int(p * batch)
        if quota < 1:
            raise ConfigError(
                f"leaves the domain {quota} of the step's {batch} prompts (ROLL draws"
                " int(p x rollout_batch_size) from each domain, the last one what the others"
                " leave), and ROLL fails on a domain without prompts",
                field=where, value=value, file=file,
            )  # fmt: skip
        prompts[domain] = quota
    return prompts


def _route_samples(
    pipeline: dict[str, Any],
    data: Mapping[str, Any],
    parsed: list[tuple[str, str, Mapping[str, Any], Any, int, bool]],
    file: str,
) -> None:
    """Give each reward stage, and each routed teacher's log-prob stage, its share of the
    step's samples (``share``), from the domains' quotas (:func:`_domain_prompts`).

    A reward cluster scores its domain's samples; one with no domain scores none in a
    training step (ROLL starts it for validation): its stage goes, its role stays. A teacher
    with ``tag_included`` routes by domain (roll/utils/functionals.py
    ``build_domain_to_teacher_names``: a teacher takes every domain one of whose reward's
    tags it includes, a teacher without tags every domain, once any teacher has tags): its
    share is its domains' quotas; one with none computes nothing, and its stage goes too.
    """
    rewards = {f.split(".", 1)[1]: name for name, f, *_ in parsed if f.startswith("rewards.")}
    prompts = _domain_prompts(data, rewards, file)
    if prompts is None:
        return
    batch = sum(prompts.values())
    shares = {rewards[d]: n / batch for d, n in prompts.items()}
    scorers = {name: name in shares for name in rewards.values()}
    domain_tags = {
        d: _tags(block, f, file)
        for _, f, block, *_ in parsed
        if f.startswith("rewards.") and (d := f.split(".", 1)[1]) in prompts
    }
    teachers = {
        name: _tags(block, f, file)
        for name, f, block, *_ in parsed
        if f == "teacher" or f.startswith("teacher.")
    }
    if any(teachers.values()):
        for name, tags in teachers.items():
            taken = [d for d in prompts if not tags or tags & domain_tags[d]]
            shares[name] = sum(prompts[d] for d in taken) / batch
            scorers[name] = bool(taken)
    stages = pipeline["stages"]
    for stage_name, stage in list(stages.items()):
        role = stage.get("role")
        if not stage_name.startswith(("reward", "ref_logprob")) or role not in scorers:
            continue
        if not scorers[role]:
            _drop_scorer(stages, stage_name)
        elif shares[role] < 1.0:
            stage["share"] = shares[role]


def _drop_scorer(stages: dict[str, Any], name: str) -> None:
    """Remove a scoring stage of the default step; the stages after it wait on the others
    they wait on (every scorer runs after ``generate``, as ``old_logprob`` does), else on
    what it waited on."""
    gone = stages.pop(name)
    for stage in stages.values():
        after = stage.get("after")
        if after and name in after:
            stage["after"] = [a for a in after if a != name] or list(gone.get("after", []))
