"""Read a NeMo RL GRPO or PPO config: the cluster, colocated or split generation, the trainers.

NeMo RL (NVIDIA-NeMo/RL) configs inherit by path: ``defaults: ../../grpo_math_1B.yaml``
(or a list of paths) names parent files merged under the file's own keys; a section with
``_override_: true`` replaces the parents' instead (nemo_rl/utils/config.py; see
:func:`~rlplex.resources.importers.compose.inherit`). Interpolations such as
``${mul:${policy.max_total_sequence_length}, ${policy.train_micro_batch_size}}`` are
resolved with NeMo RL's resolvers. rlplex reads, with the source of each rule
(nemo_rl/algorithms/grpo.py ``setup`` and ``grpo_train``, nemo_rl/models/policy/):

- Cluster: ``cluster.num_nodes`` x ``cluster.gpus_per_node``.
- Generation (``policy.generation``, vLLM only): one engine per ``vllm_cfg.tensor_parallel_size
  x pipeline_parallel_size`` GPUs. ``colocated.enabled`` (the default) puts the engines on
  every GPU beside the trainer; they sleep at level 1 while it trains (NeMo RL's vLLM worker
  calls ``llm.sleep(level=1)``: the weights copied to host memory and back). Otherwise
  (``colocated.enabled: false``) the engines get ``colocated.resources``: on one node its last
  ``gpus_per_node`` GPUs, the trainer the rest; on several nodes ``num_nodes`` whole nodes
  after the trainer's (the train cluster is made first). ``vllm_cfg.precision: fp8`` runs
  the engines in FP8; ``gpu_memory_utilization``, ``enforce_eager`` and
  ``vllm_kwargs.max_num_seqs`` are the engine's settings.
- Trainer: Megatron when ``policy.megatron_cfg.enabled`` (tensor, pipeline, expert and
  context parallel sizes; ``optimizer.use_distributed_optimizer``: ZeRO-1;
  ``optimizer.optimizer_cpu_offload``: a CPU optimizer; ``activation_checkpointing``;
  ``fp8_cfg.enabled``: FP8), else the DTensor worker (FSDP2 over the data-parallel ranks,
  ``dtensor_cfg.tensor_parallel_size``, ``context_parallel_size``,
  ``activation_checkpointing``, ``cpu_offload``: parameters and optimizer in host memory).
  LoRA: ``megatron_cfg.peft`` or ``dtensor_cfg.lora_cfg`` (``enabled``, rank ``dim``).
- Reference log-probs: every step unless ``grpo.skip_reference_policy_logprobs_calculation``
  (which NeMo RL allows only with ``loss_fn.reference_policy_kl_penalty`` 0); the reference
  weights are swapped into the trainer's workers: a ``reference`` role on the trainer's
  GPUs with its sizes (a LoRA trainer computes them itself, its adapters off).
- Async GRPO (``grpo.async_grpo.enabled``; PPO's ``ppo.async_ppo``): ``mode: async``,
  ``max_staleness`` = ``max_trajectory_age_steps``; ``in_flight_weight_updates`` lets the
  engines decode through the weight update.
- PPO (a ``ppo`` section in place of ``grpo``; nemo_rl/algorithms/ppo.py): the value model
  (``value``: its ``model_name``, Megatron or DTensor sizes as the policy's) is a ``critic``
  role on the trainer's GPUs; ``ppo.ppo_epochs`` passes over each step's batch
  (``workload.epochs``).
- Rewards: the environment's ``num_workers`` CPU workers (``env.<name>``, the name from
  ``data.default.env_name``, ``data.env_name`` or ``math``).
- Workload: ``grpo.num_prompts_per_step`` x ``num_generations_per_prompt``; optimizer steps =
  that / ``policy.train_global_batch_size``; ``train_micro_batch_size``,
  ``logprob_batch_size``; ``sequence_packing`` or ``dynamic_batching`` (``enabled``,
  ``train_mb_tokens``, ``logprob_mb_tokens``: packed micro-batches under a token budget),
  neither: micro-batches padded to their longest sequence. Lengths: a response of up to
  ``generation.max_new_tokens`` within ``max_total_sequence_length``; a prompt of up to
  ``data.max_input_seq_length`` only where the file bounds it below the total (NeMo RL's
  default is the total itself, which says nothing of a prompt's length): otherwise
  ``workload.prompt_tokens`` is left for ``--set``. Means: half the maxima, as every
  importer's.
- The single controller (``workload.controller``): NeMo RL pads each pass's batch to the
  step's longest sequence (``batched_message_log_to_flat_message``), about 27 bytes per
  token slot out (int64 ids and mask, fp32 advantages and log-probs) and 3 back. Releases
  before v0.7 sent each data-parallel shard to every tensor/pipeline/context-parallel rank
  by value: ``--set workload.controller.per_rank=true`` for them.
- Not an RL step: a file without a ``grpo`` or ``ppo`` section (SFT, DPO, reward-model
  training, distillation, evaluation) is refused, saying which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.importers.common import (
    DEFAULT_STAGES,
    apply_costs,
    get_path,
    gpu_role,
    lora,
    optional_int,
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


class _Reader:
    def __init__(self, data: Mapping[str, Any], file: str, missing: tuple[str, ...]) -> None:
        self.data, self.file, self.missing = data, file, missing

    def get(self, path: str, default: Any = None) -> Any:
        value = get_path(self.data, path, default)
        return default if value is None else value

    def int(self, path: str, default: Any = None) -> int:
        hint = ""
        if self.missing:
            hint = f" (parent files rlplex could not find: {', '.join(self.missing)})"
        return positive_int(self.get(path, default), field=path, file=self.file, hint=hint)

    def flag(self, path: str, default: bool = False) -> bool:
        value = self.get(path, default)
        return value if isinstance(value, bool) else default


def _algorithm(data: Mapping[str, Any], file: str) -> str:
    """``grpo`` or ``ppo``: the section that holds the step's settings; anything else is
    refused as not an RL step."""
    for algo in ("grpo", "ppo"):
        if isinstance(data.get(algo), Mapping):
            return algo
    for key, what in _NOT_RL:
        if isinstance(data.get(key), Mapping):
            refuse_non_rl(what, file=file, field=key)
    refuse_non_rl("a NeMo RL config without a grpo or ppo section", file=file, field="grpo")


def _devices(r: _Reader, cluster: Cluster, colocated: bool) -> tuple[list[int], list[int]]:
    """(trainer GPUs, engine GPUs), as grpo.py ``setup`` splits the cluster."""
    every = list(range(cluster.num_gpus))
    if colocated:
        return every, every
    per_node, nodes = cluster.gpus_per_node, cluster.nodes
    res = f"{_GEN}.colocated.resources"
    if nodes == 1:
        engine_gpus = r.int(f"{res}.gpus_per_node")
        if engine_gpus >= per_node:
            raise ConfigError(
                f"leaves the trainer no GPU: must be below cluster.gpus_per_node ({per_node})"
                " when the cluster has one node and generation is not colocated",
                field=f"{res}.gpus_per_node", value=engine_gpus, file=r.file,
            )  # fmt: skip
        split = per_node - engine_gpus
        return every[:split], every[split:]
    engine_nodes = r.int(f"{res}.num_nodes")
    if engine_nodes >= nodes:
        raise ConfigError(
            f"leaves the trainer no node: must be below cluster.num_nodes ({nodes})",
            field=f"{res}.num_nodes", value=engine_nodes, file=r.file,
        )  # fmt: skip
    given = r.get(f"{res}.gpus_per_node")
    if given is not None and given != per_node:
        raise ConfigError(
            f"must equal cluster.gpus_per_node ({per_node}) when generation has whole nodes"
            " (NeMo RL asserts it)",
            field=f"{res}.gpus_per_node", value=given, file=r.file,
        )  # fmt: skip
    split = (nodes - engine_nodes) * per_node
    return every[:split], every[split:]


def _trainer(
    r: _Reader, section: str = "policy"
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, bool]:
    """(a trainer's ``parallel``, its ``lora``, FP8) from the Megatron or DTensor section of
    ``policy`` (or PPO's ``value``)."""
    if r.flag(f"{section}.megatron_cfg.enabled"):
        m = f"{section}.megatron_cfg"
        spec = parallel(
            tp=r.get(f"{m}.tensor_model_parallel_size"),
            pp=r.get(f"{m}.pipeline_model_parallel_size"),
            ep=r.get(f"{m}.expert_model_parallel_size"),
            sp=r.get(f"{m}.context_parallel_size"),
            zero=1 if r.flag(f"{m}.optimizer.use_distributed_optimizer") else None,
            recompute=r.flag(f"{m}.activation_checkpointing"),
            cpu_optimizer=r.flag(f"{m}.optimizer.optimizer_cpu_offload"),
        )
        adapters = lora(r.get(f"{m}.peft.dim")) if r.flag(f"{m}.peft.enabled") else None
        return spec, adapters, r.flag(f"{m}.fp8_cfg.enabled")
    d = f"{section}.dtensor_cfg"
    offload = r.flag(f"{d}.cpu_offload")
    spec = parallel(
        tp=r.get(f"{d}.tensor_parallel_size"),
        sp=r.get(f"{d}.context_parallel_size"),
        fsdp=True,
        recompute=r.flag(f"{d}.activation_checkpointing"),
        offload_params=offload,
        offload_optimizer=offload,
    )
    adapters = None
    if r.flag(f"{d}.lora_cfg.enabled"):
        names = r.get(f"{d}.lora_cfg.target_modules")
        all_linear = r.flag(f"{d}.lora_cfg.match_all_linear", True)
        adapters = lora(r.get(f"{d}.lora_cfg.dim"), None if all_linear else names)
    return spec, adapters, False


def _reference_parallel(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The reference's sizes: the trainer's layout, none of its training state."""
    keep = ("tp", "pp", "ep", "sp", "fsdp", "offload_params")
    out = {k: v for k, v in (spec or {}).items() if k in keep}
    return out or None


def _batching(r: _Reader) -> dict[str, Any]:
    for section in ("sequence_packing", "dynamic_batching"):
        base = f"policy.{section}"
        if r.flag(f"{base}.enabled"):
            out: dict[str, Any] = {"packing": True}
            for key, field in (
                ("train_mb_tokens", "micro_batch_tokens"),
                ("logprob_mb_tokens", "logprob_micro_batch_tokens"),
            ):
                tokens = optional_int(r.get(f"{base}.{key}"))
                if tokens:
                    out[field] = tokens
            return out
    return {"packing": False}


def _workload(r: _Reader, algo: str) -> dict[str, Any] | None:
    prompts = optional_int(r.get(f"{algo}.num_prompts_per_step"))
    samples = optional_int(r.get(f"{algo}.num_generations_per_prompt")) or 1
    total = optional_int(r.get("policy.max_total_sequence_length"))
    if not (prompts and total):
        return None
    new_tokens = optional_int(r.get(f"{_GEN}.max_new_tokens")) or total
    load: dict[str, Any] = {"prompts_per_step": prompts, "samples_per_prompt": samples}
    prompt_max = optional_int(r.get("data.max_input_seq_length"))
    response_max = min(new_tokens, total)
    if prompt_max and prompt_max < total:
        load["prompt_tokens"] = {"mean": prompt_max / 2, "max": prompt_max}
        # vLLM's max_model_len (the total) bounds prompt and response together.
        response_max = min(response_max, total - prompt_max // 2)
    load["response_tokens"] = {"mean": response_max / 2, "max": response_max}
    load["micro_batch_size"] = optional_int(r.get("policy.train_micro_batch_size")) or 1
    logprob = optional_int(r.get("policy.logprob_batch_size"))
    if logprob:
        load["logprob_micro_batch_size"] = logprob
    batch = optional_int(r.get("policy.train_global_batch_size"))
    if batch and prompts * samples > batch:
        load["mini_batches"] = prompts * samples // batch
    epochs = optional_int(r.get(f"{algo}.ppo_epochs"))
    if epochs:
        load["epochs"] = epochs
    load |= _batching(r)
    load["controller"] = dict(CONTROLLER)
    return load


def _pipeline(roles: Mapping[str, Any], mode: str, staleness: int, reference: str | None) -> dict:
    """NeMo RL's step (grpo.py / ppo.py ``*_train``): the rollout scores each response as it
    ends (``run_multi_turn_rollout`` calls the environment), then the log-prob passes (and
    PPO's values), then training; the advantages are computed on the driver in between, in
    milliseconds (no stage); the weights go to the engines after training."""

    def stage(name: str, role: str, after: list[str], **extra: Any) -> dict[str, Any]:
        return {"role": role, **DEFAULT_STAGES[name], "after": after, **extra}

    stages = {
        "generate": stage("generate", "actor_infer", []),
        "reward": stage("reward", "rewards", ["generate"]),
        "old_logprob": stage("old_logprob", "actor_train", ["reward"], needs=["weights"]),
    }
    if reference is not None:
        stages["ref_logprob"] = stage("ref_logprob", reference, ["reward"])
    if "critic" in roles:
        stages["values"] = stage("values", "critic", ["reward"], needs=["weights"])
    scores = [n for n in ("old_logprob", "ref_logprob", "values") if n in stages]
    if "critic" in roles:
        stages["critic_train"] = stage("critic_train", "critic", scores)
    stages["train"] = stage("train", "actor_train", scores)
    stages["weight_sync"] = {
        "kind": "weight_sync", "from": "actor_train", "to": "actor_infer", "after": ["train"],
    }  # fmt: skip
    return {"mode": mode, "max_staleness": staleness, "stages": stages}


def _reward_workers(r: _Reader) -> int:
    name = r.get("data.default.env_name") or r.get("data.env_name") or "math"
    return optional_int(r.get(f"env.{name}.num_workers")) or 1


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert a NeMo RL GRPO config into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the NeMo RL field path, e.g.
            ``policy.generation.colocated.resources.num_nodes``.
    """
    composed = inherit(data, file)
    d = composed.data
    algo = _algorithm(d, file)
    r = _Reader(d, file, composed.missing_defaults)
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
    train_gpus, engine_gpus = _devices(r, cluster, colocated)
    per_engine = r.int(f"{_VLLM}.tensor_parallel_size", 1) * r.int(
        f"{_VLLM}.pipeline_parallel_size", 1
    )
    check_worker_layout(
        "actor_infer", tuple(engine_gpus), per_engine, cluster, file,
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
    async_on = r.flag(f"{algo}.async_{algo}.enabled")
    engine = gpu_role(tuple(engine_gpus), per_engine, "actor_infer")
    settings = (
        rollout(
            max_num_seqs=r.get(f"{_GEN}.vllm_kwargs.max_num_seqs"),
            gpu_memory_utilization=r.get(f"{_VLLM}.gpu_memory_utilization"),
            enforce_eager=r.get(f"{_VLLM}.enforce_eager"),
            sleep_level=1 if colocated else None,
        )
        or {}
    )
    if not colocated and async_on and r.flag(f"{algo}.async_{algo}.in_flight_weight_updates"):
        settings["in_flight_weight_updates"] = True
    if settings:
        engine["rollout"] = settings
    if r.get(f"{_VLLM}.precision") == "fp8":
        engine["precision"] = "fp8"
    roles: dict[str, dict[str, Any]] = {"actor_train": train, "actor_infer": engine}
    reference_role: str | None = None
    if not r.flag(f"{algo}.skip_reference_policy_logprobs_calculation"):
        reference_role = "reference"
        if adapters:
            reference_role = "actor_train"  # the base model: the adapters switched off
        else:
            reference = gpu_role(tuple(train_gpus), 1, "reference")
            ref_spec = _reference_parallel(spec)
            if ref_spec:
                reference["parallel"] = ref_spec
            if fp8:
                reference["precision"] = "fp8"
            roles["reference"] = reference
    if algo == "ppo":
        critic = gpu_role(tuple(train_gpus), 1, "critic")
        critic_spec, critic_lora, _ = _trainer(r, "value")
        if critic_spec:
            critic["parallel"] = critic_spec
        if critic_lora:
            critic["lora"] = critic_lora
        value_model = r.get("value.model_name")
        if (
            isinstance(value_model, str)
            and value_model
            and value_model != r.get("policy.model_name")
        ):
            critic["model"] = value_model
        roles["critic"] = critic
    roles["rewards"] = {"world_size": _reward_workers(r)}
    mode, staleness = "sync", 0
    if async_on:
        mode = "async"
        staleness = r.int(f"{algo}.async_{algo}.max_trajectory_age_steps", 1)
    native: dict[str, Any] = {
        "cluster": cluster.model_dump(exclude_unset=True),
        "roles": roles,
        "pipeline": _pipeline(roles, mode, staleness, reference_role),
    }
    model = r.get("policy.model_name")
    if isinstance(model, str) and model and "${" not in model:
        native["model"] = model
    load = _workload(r, algo)
    if load:
        native["workload"] = load
    return apply_costs(native, costs, costs_file)
