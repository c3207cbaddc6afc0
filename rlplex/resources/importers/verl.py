"""Read verl's placement: resource pools and the role -> pool mapping.

verl (volcengine/verl) builds its placement in Python from the trainer
config: a ``resource_pool_spec`` maps each pool to a list of GPU counts, one
per node (``{"global_pool": [n_gpus_per_node] * nnodes}``), and a ``mapping``
assigns each worker role to a pool. The file is composed first, as Hydra
does (``defaults: [ppo_trainer, _self_]``, ``rollout@actor_rollout_ref.rollout:
rollout``, ``hydra.searchpath``; see :mod:`~rlplex.resources.importers.compose`),
so a key set only in a defaults file (``trainer.n_gpus_per_node``, the
rollout's tensor-parallel size 2 of ``rollout/rollout.yaml``) is read as verl
reads it. rlplex reads, with the source of each rule:

1. A PPO trainer config (verl/trainer/main_ppo.py, ``TaskRunner``):
   ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` make one ``global_pool``
   on which every role is colocated. The critic exists when ``critic.enable``
   is true, or (``enable`` null) when ``algorithm.adv_estimator`` is ``gae``
   (verl/trainer/ppo/utils.py ``need_critic``); the reference policy when
   ``algorithm.use_kl_in_reward`` or ``actor_rollout_ref.actor.use_kl_loss``
   (``need_reference_policy``); a reward model when ``reward_model.enable``,
   on its own ``reward_pool`` of ``reward_model.nnodes`` x
   ``reward_model.n_gpus_per_node`` when ``reward_model.enable_resource_pool``
   (since 67dc84b96, 2026-02-11, the same keys under ``reward.reward_model``; a legacy
   key given wins, as verl's ``migrate_legacy_reward_impl`` copies it over).
   verl's v1 trainers (``trainer.use_v1``, 45632b5fa, 2026-06-12) place roles the same
   way; ``trainer.v1.trainer_mode: colocate_async`` runs generation
   ``num_warmup_batches`` steps ahead on the same GPUs, ``separate_async`` also puts the
   rollout on a ``rollout_pool`` of ``actor_rollout_ref.rollout.nnodes`` x
   ``n_gpus_per_node`` GPUs, with partial rollouts.
2. One-step-off policy (verl/experimental/one_step_off_policy/main_ppo.py): a
   top-level ``rollout`` block with ``nnodes`` and ``n_gpus_per_node`` puts the
   rollout on its own pool beside the trainer's; generation of step t+1 runs
   while step t trains: ``mode: async, max_staleness: 1``.
3. Fully async policy (verl/experimental/fully_async_policy/fully_async_main.py,
   ``create_resource_pool_manager``; fully_async_trainer.py): an
   ``async_training`` block; ``trainer_pool`` for actor, critic, reference and
   reward model, ``rollout_pool`` for the rollout. The trainer syncs weights to
   the rollouter every ``trigger_parameter_sync_step`` trainer steps of
   ``ppo_mini_batch_size x require_batches`` prompts each, so one rlplex step
   (weight sync to weight sync) covers ``trigger_parameter_sync_step`` trainer
   steps (``workload.prompts_per_step`` counts them all). The rollouter may
   run ahead by ``staleness_threshold`` (a fraction of a sync's samples):
   ``max_staleness = ceil(staleness_threshold)``, sync at 0 (verl's README,
   "Supported Modes": 0 is synchronous training, 1 "basically equivalent to
   one_step_off"). It trains on the rollout's own log-probs
   (``use_rollout_log_probs``, its default): no old_logprob pass unless
   ``compute_prox_log_prob``; since 2026-02-26, as every trainer, by
   ``algorithm.rollout_correction.bypass_mode`` (:func:`_no_old_logprob`). A block
   holding only ``partial_rollout`` (verl-recipe's synchronous partial_rollout) is not
   this mode.
4. Split placement (examples/split_placement/main_ppo_split.py), recognised by
   that entry point sitting in the file's folder or its parent: actor, rollout
   and reference on ``actor_rollout_ref_pool``, the critic on ``critic_pool``,
   each half of every node (one node) or half of the nodes.
5. Explicit pools, as the Python would build them (rlplex's own form)::

       trainer: {n_gpus_per_node: 8}
       resource_pool_spec: {actor_pool: [4], rollout_pool: [4]}
       mapping: {Actor: actor_pool, Rollout: rollout_pool, RefPolicy: actor_pool}

Pools are laid out in order, first fit: each entry (that many GPUs on one
node) goes to the first node with room, as Ray packs a pool's per-node
bundles. verl does not say how many GPUs a machine has: with one pool a node
has ``trainer.n_gpus_per_node`` GPUs; with several (which split machines, e.g.
6 + 2 on one 8-GPU node), a node has max(8, the largest entry) GPUs.

The rollout's GPUs per worker (one inference replica) is ``tensor x data x
pipeline`` parallel size of ``actor_rollout_ref.rollout``
(verl/experimental/agent_loop/agent_loop.py, ``rollout_world_size``); a
replica larger than a node (TP 32 on 8-GPU nodes) spans whole nodes. verl
roles map to rlplex roles: ``ActorRollout`` -> ``actor_train`` +
``actor_infer``; ``ActorRolloutRef`` -> those + ``reference``; ``Actor`` ->
``actor_train``; ``Rollout`` -> ``actor_infer``; ``Critic`` -> ``critic``;
``RefPolicy`` -> ``reference``; ``RewardModel`` -> ``reward``. Without a
reward model, rule rewards run in verl's driver process (``reward`` stage on
``driver``).

Not an RL step: a file without ``actor_rollout_ref`` once composed is refused,
saying what it is (``sft_trainer.yaml``: SFT; ``generation.yaml``:
generation; ``evaluation.yaml``: evaluation). Read for the estimator:
``actor_rollout_ref.model.path`` as ``model``; ``data.train_batch_size``,
``actor_rollout_ref.rollout.n``, ``data.max_prompt_length``,
``data.max_response_length`` and ``actor.ppo_micro_batch_size_per_gpu`` as the
workload; the actor's strategy (FSDP, Megatron TP/PP, VeOmni or TorchTitan: each engine's
sizes and offload in its own block, the critic's FSDP engine ``critic.fsdp`` since
16253911d), gradient
checkpointing, and the rollout's TP/PP. verl reads its config untyped (a DictConfig, or
dataclasses filled as given) and tests a switch for truth, so a switch must be ``true`` or
``false`` (or 1/0): the quoted ``"false"`` is on there, and refused here
(:func:`~rlplex.resources.importers.common.flag`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError, InvalidValueError
from rlplex.resources.cluster import Cluster
from rlplex.resources.importers.common import (
    apply_costs,
    budgeted_turns,
    default_pipeline,
    drop_stage,
    flag,
    get_path,
    given_count,
    given_number,
    given_size,
    gpu_role,
    lora,
    model_path,
    optional_int,
    parallel,
    positive_int,
    refuse_non_rl,
    reply_tokens,
    rollout,
    workload,
)
from rlplex.resources.importers.compose import compose
from rlplex.resources.placement import check_worker_layout

VERL_ROLES: dict[str, tuple[str, ...]] = {
    "actorrollout": ("actor_train", "actor_infer"),
    "actorrolloutref": ("actor_train", "actor_infer", "reference"),
    "actor": ("actor_train",),
    "rollout": ("actor_infer",),
    "critic": ("critic",),
    "refpolicy": ("reference",),
    "rewardmodel": ("reward",),
}
"""verl ``Role`` (normalised: lower case, no underscores) -> rlplex roles."""

_ROLLOUT = "actor_rollout_ref.rollout"
_TP_FIELD = f"{_ROLLOUT}.tensor_model_parallel_size"
_DEFAULT_NODE_GPUS = 8
"""GPUs per machine assumed when a file splits machines between pools."""
_ACTOR = "actor_rollout_ref.actor"
_REF = "actor_rollout_ref.ref"
ACTOR_TOKENS = 16384
"""The actor's tokens per GPU in a dynamic batch when a file says none (actor.yaml
``ppo_max_token_len_per_gpu``), and so its log-prob passes' (ref.yaml, rollout.yaml:
``${oc.select:actor_rollout_ref.actor.ppo_max_token_len_per_gpu,16384}``)."""
CRITIC_TOKENS = 32768
"""The critic's tokens per GPU when a file says none (critic.yaml ``ppo_max_token_len_per_gpu``;
the new worker implementation's ``ppo_infer_max_token_len_per_gpu``, CriticConfig)."""


class _Reader:
    """Typed reads of a composed verl config; a missing key says where it may live."""

    def __init__(self, data: Mapping[str, Any], file: str, missing: tuple[str, ...]) -> None:
        self.data, self.file = data, file
        if missing:
            self.hint = (
                " (verl sets it in a defaults file; rlplex could not find: "
                + ", ".join(missing)
                + ")"
            )
        else:
            self.hint = " (in verl it may live in a `defaults:` file such as ppo_trainer.yaml)"

    def get(self, path: str, default: Any = None) -> Any:
        value = get_path(self.data, path, default)
        return default if value == "???" else value

    def int(self, path: str, default: Any = None) -> int:
        return positive_int(self.get(path, default), field=path, file=self.file, hint=self.hint)

    def flag(self, path: str, default: bool = False) -> bool:
        """A switch as verl reads it: tested for truth (:func:`~.common.flag`)."""
        value = flag(self.get(path), field=path, file=self.file, default=default)
        assert value is not None
        return value

    def size(self, path: str) -> int | None:
        """A parallel size: None when absent, else a whole number >= 1."""
        return given_size(self.get(path), field=path, file=self.file)


def _need_critic(r: _Reader) -> bool:
    enable = flag(r.get("critic.enable"), field="critic.enable", file=r.file)
    if enable is not None:
        return enable
    return r.get("algorithm.adv_estimator", "gae") == "gae"


def _always_reference(r: _Reader) -> bool:
    """verl of 2024 mapped the reference policy unconditionally (main_ppo.py @ b40afd4b7: the
    KL penalty in the reward was the only mode): a legacy config with neither KL switch."""
    actor = r.get("actor_rollout_ref.actor")
    algorithm = r.get("algorithm")
    return (
        _legacy(r)
        and isinstance(actor, Mapping)
        and "use_kl_loss" not in actor
        and not (isinstance(algorithm, Mapping) and "use_kl_in_reward" in algorithm)
    )


_V1_MODES = ("sync", "colocate_async", "separate_async")
"""verl's unified trainers (``trainer.v1.trainer_mode``; verl/trainer/ppo/v1, 45632b5fa,
2026-06-12)."""


def _v1_mode(r: _Reader) -> str | None:
    """The v1 trainer's mode (None when ``trainer.use_v1`` is off or absent: the legacy
    TaskRunner, main_ppo_v0.py). verl/trainer/main_ppo.py @ 1dda039b9 runs
    ``get_trainer_cls(config.trainer.v1.trainer_mode)`` when ``trainer.use_v1`` (true in
    ppo_trainer.yaml); the modes are the registered trainers: ``sync``, ``colocate_async``
    (trainer and rollout colocated, generation ahead) and ``separate_async`` (the rollout on
    its own ``actor_rollout_ref.rollout.nnodes`` x ``n_gpus_per_node`` GPUs)."""
    if not r.flag("trainer.use_v1"):
        return None
    field = "trainer.v1.trainer_mode"
    mode = r.get(field, "sync")
    if mode not in _V1_MODES:
        raise InvalidValueError(
            f"is not a verl trainer ({', '.join(_V1_MODES)})", field=field, value=mode, file=r.file
        )
    return mode


def _v1_warmup(r: _Reader, mode: str) -> int:
    """How many steps a v1 async trainer's generation runs ahead: it submits
    ``trainer.v1.MODE.num_warmup_batches`` batches before training (on_train_begin) and one
    more each step (prepare_step), so step t+k+1's batch is generated while step t trains
    with weights up to sync t (trainer_colocate_async.py, trainer_separate_async.py,
    trainer_base.py @ 1dda039b9). 0 generates each batch in its own step."""
    field = f"trainer.v1.{mode}.num_warmup_batches"
    count = given_count(r.get(field, 1), field=field, file=r.file, least=0)
    return 1 if count is None else count


def _fully_async(r: _Reader) -> bool:
    """verl's fully-async mode: its trainer config's ``async_training`` block. A synchronous
    run that only adds ``+async_training.partial_rollout`` (verl-recipe's partial_rollout,
    which interrupts and resumes long responses inside the sync loop) is not one."""
    block = r.get("async_training")
    return isinstance(block, Mapping) and set(block) != {"partial_rollout"}


def _rollout_log_probs(r: _Reader) -> bool:
    """Fully async trains on the engine's own log-probs (``async_training.
    use_rollout_log_probs``, true in its trainer config) and recomputes none unless
    ``compute_prox_log_prob`` asks for them (verl/experimental/fully_async_policy/
    ray_trainer.py: ``old_log_probs = rollout_log_probs``): no old_logprob pass."""
    if not _fully_async(r):
        return False
    uses = r.flag("async_training.use_rollout_log_probs", True)
    return uses and not r.flag("async_training.compute_prox_log_prob")


def _no_old_logprob(r: _Reader) -> bool:
    """verl takes the rollout's log-probs as the old ones and runs no old_logprob pass.

    Since verl's rollout correction (2c6c65cb0, 2025-11) its trainers skip the pass when
    ``algorithm.rollout_correction.bypass_mode`` is true (ray_trainer.py's fit, the v1
    trainer_base.py ``_compute_old_log_prob``): one-step-off's and fully-async's trainer
    configs set it (one_step_off_ppo_trainer.yaml, fully_async_ppo_trainer.yaml @
    1dda039b9), so their runs compute none, and fully async's ``false`` computes them. A
    fully-async file of before 9c75bfe01 (2026-02-26) decides by its own
    ``async_training.use_rollout_log_probs`` / ``compute_prox_log_prob``
    (:func:`_rollout_log_probs`)."""
    block = r.get("async_training")
    own = ("use_rollout_log_probs", "compute_prox_log_prob")
    if _fully_async(r) and isinstance(block, Mapping) and any(k in block for k in own):
        return _rollout_log_probs(r)
    field = "algorithm.rollout_correction.bypass_mode"
    if r.get(field) is not None:
        return r.flag(field)
    return _rollout_log_probs(r)


def _split_entry(file: str) -> bool:
    """examples/split_placement: the file sits beside (or under) main_ppo_split.py."""
    folder = Path(file).resolve().parent
    return any((d / "main_ppo_split.py").is_file() for d in (folder, folder.parent))


def _pools(r: _Reader) -> tuple[dict[str, list[int]], dict[str, str], str, int]:
    """(pools, role -> pool, mode, max_staleness) by verl's entry points (module doc)."""
    nnodes = r.int("trainer.nnodes", 1)
    per_node = r.int("trainer.n_gpus_per_node")
    trainer = [per_node] * nnodes
    mapping: dict[str, str] = {}
    mode, staleness = "sync", 0
    rollout = r.get("rollout")
    separate = isinstance(rollout, Mapping) and "n_gpus_per_node" in rollout
    v1 = _v1_mode(r)
    if v1 == "separate_async":
        pools = {"trainer_pool": trainer}
        pools["rollout_pool"] = [r.int(f"{_ROLLOUT}.n_gpus_per_node")] * r.int(f"{_ROLLOUT}.nnodes")
        mapping = {"Actor": "trainer_pool", "Rollout": "rollout_pool"}
        main = "trainer_pool"
        staleness = _v1_warmup(r, v1)
        mode = "async" if staleness else "sync"
    elif _fully_async(r) or separate:
        pools = {"trainer_pool": trainer}
        pools["rollout_pool"] = [r.int("rollout.n_gpus_per_node")] * r.int("rollout.nnodes", 1)
        mapping = {"Actor": "trainer_pool", "Rollout": "rollout_pool"}
        main = "trainer_pool"
        mode, staleness = "async", 1
        threshold = _staleness_threshold(r) if _fully_async(r) else None
        if threshold is not None:
            # verl: threshold 0 "indicates synchronous training" (the rollouter waits for each
            # sync), threshold 1 "is basically equivalent to one_step_off"; a fraction lets the
            # rollouter start the next sync's samples early: one step ahead.
            staleness = math.ceil(threshold)
            mode = "async" if staleness else "sync"
    elif _split_entry(r.file):
        half_node = nnodes // 2 == 0 and per_node // 2 > 0
        size = [per_node // 2] * nnodes if half_node else [per_node] * (nnodes // 2)
        pools = {"actor_rollout_ref_pool": size, "critic_pool": list(size)}
        mapping = {"ActorRollout": "actor_rollout_ref_pool"}
        main = "actor_rollout_ref_pool"
    else:
        pools = {"global_pool": trainer}
        mapping = {"ActorRollout": "global_pool"}
        main = "global_pool"
        if v1 == "colocate_async":
            staleness = _v1_warmup(r, v1)
            mode = "async" if staleness else "sync"
    if _need_critic(r):
        mapping["Critic"] = "critic_pool" if "critic_pool" in pools else main
    if (
        r.flag("algorithm.use_kl_in_reward")
        or r.flag("actor_rollout_ref.actor.use_kl_loss")
        or _always_reference(r)
    ):
        mapping["RefPolicy"] = main
    if r.flag(_reward_model_field(r, "enable")):
        if r.flag(_reward_model_field(r, "enable_resource_pool")):
            pools["reward_pool"] = [r.int(_reward_model_field(r, "n_gpus_per_node"))] * r.int(
                _reward_model_field(r, "nnodes")
            )
            mapping["RewardModel"] = "reward_pool"
        else:
            mapping["RewardModel"] = main
    return pools, mapping, mode, staleness


_NEW_REWARD_MODEL = "reward.reward_model"
"""Where verl keeps the reward model since 67dc84b96 (2026-02-11, "the full reward
configuration", verl/trainer/config/reward/reward.yaml): ``enable``, ``enable_resource_pool``,
``nnodes``, ``n_gpus_per_node``, ``model_path``."""


def _reward_model_field(r: _Reader, key: str) -> str:
    """The field a reward-model setting comes from: the legacy ``reward_model.KEY`` where a file
    gives it, else ``reward.reward_model.KEY``. verl's migrate_legacy_reward_impl
    (verl/experimental/reward_loop/reward_loop.py @ 1dda039b9) copies every legacy key that is
    not null over the new one (legacy_reward_impl.yaml holds them null), and the legacy
    ``reward_model.model.path`` over ``reward.reward_model.model_path``."""
    legacy = "reward_model.model.path" if key == "model_path" else f"reward_model.{key}"
    if r.get(legacy) is not None or not isinstance(r.get(_NEW_REWARD_MODEL), Mapping):
        return legacy
    return f"{_NEW_REWARD_MODEL}.{key}"


def _reward_loop(r: _Reader) -> bool:
    """The reward model is served by a rollout engine (no micro-batches): the old
    ``reward_model.use_reward_loop``, and always since verl removed its reward-model worker
    (4ef45d093, 2026-02; the reward model's settings then live in ``reward.reward_model``)."""
    return r.flag("reward_model.use_reward_loop") or isinstance(r.get(_NEW_REWARD_MODEL), Mapping)


def _reward_engine(r: _Reader) -> tuple[int, str] | None:
    """(GPUs of one engine, the field that sets them) of a reward model that a rollout engine
    serves (:func:`_reward_loop`): its ``rollout.tensor_model_parallel_size``, 2 unless set
    (verl's reward/reward.yaml and the legacy reward_model/dp_reward_loop.yaml @ 1dda039b9),
    so the reward role's workers are engines of that many GPUs each. None otherwise."""
    if not _reward_loop(r):
        return None
    field = _reward_model_field(r, "rollout.tensor_model_parallel_size")
    return r.int(field, 2), field


def _explicit_pools(
    data: Mapping[str, Any], file: str
) -> tuple[dict[str, list[int]], dict[str, str]]:
    spec = data.get("resource_pool_spec")
    if not isinstance(spec, dict) or not spec:
        raise ConfigError(
            "must map pool names to lists of GPUs per node, e.g. {global_pool: [8, 8]}",
            field="resource_pool_spec",
            value=spec,
            file=file,
        )
    pools: dict[str, list[int]] = {}
    for pool, sizes in spec.items():
        field = f"resource_pool_spec.{pool}"
        if not isinstance(sizes, list) or not sizes:
            raise ConfigError(
                "must be a list of GPU counts, one per node", field=field, value=sizes, file=file
            )
        pools[str(pool)] = [positive_int(n, field=field, file=file) for n in sizes]
    mapping = data.get("mapping")
    if not isinstance(mapping, dict) or not mapping:
        raise ConfigError(
            "must map verl roles to pools, e.g. {ActorRollout: global_pool}",
            field="mapping",
            value=mapping,
            file=file,
        )
    return pools, {str(k): v for k, v in mapping.items()}


def layout_pools(
    pools: Mapping[str, list[int]], per_node: int
) -> tuple[dict[str, tuple[int, ...]], int]:
    """Lay pools out first fit on nodes of ``per_node`` GPUs; returns (ranks per pool, nodes).

    Each entry (GPUs on one node) goes to the first node with that much room.

    Raises:
        ValueError: a pool entry asks for more GPUs than a node has.
    """
    used: list[int] = []
    placed: dict[str, tuple[int, ...]] = {}
    for pool, sizes in pools.items():
        ranks: list[int] = []
        taken: set[int] = set()  # a pool's entries are on distinct nodes (one bundle per node)
        for count in sizes:
            if count > per_node:
                raise ValueError(f"asks for {count} GPUs on one node, which has {per_node}")
            node = next(
                (n for n, u in enumerate(used) if n not in taken and u + count <= per_node),
                len(used),
            )
            if node == len(used):
                used.append(0)
            ranks.extend(range(node * per_node + used[node], node * per_node + used[node] + count))
            used[node] += count
            taken.add(node)
        placed[pool] = tuple(ranks)
    return placed, len(used)


def _refuse_non_rl(data: Mapping[str, Any], file: str) -> None:
    """Refuse verl's SFT, generation and evaluation files (verl/trainer/config/*.yaml)."""
    if isinstance(data.get("actor_rollout_ref"), Mapping) or "resource_pool_spec" in data:
        return
    if get_path(data, "data.output_path") is not None:
        refuse_non_rl(
            "a verl generation config (like verl/trainer/config/generation.yaml)", file=file
        )
    if get_path(data, "data.path") is not None and "custom_reward_function" in data:
        refuse_non_rl(
            "a verl evaluation config (like verl/trainer/config/evaluation.yaml)", file=file
        )
    if "optim" in data or get_path(data, "model.partial_pretrain") is not None:
        refuse_non_rl("a verl SFT config (like verl/trainer/config/sft_trainer.yaml)", file=file)


def _refuse_validation_only(r: _Reader) -> None:
    """``trainer.val_only``: verl validates the checkpoint and stops, training no step."""
    if r.flag("trainer.val_only"):
        refuse_non_rl("a verl validation-only run", field="trainer.val_only", file=r.file)


def _workload(r: _Reader, roles: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    actor, ref = "actor_rollout_ref.actor", "actor_rollout_ref.ref"
    train = roles.get("actor_train", {})
    prompts, prompts_field = _prompts(r)
    micro_batch, micro_field = _per_gpu(r, actor, "ppo_micro_batch_size", train)
    logprob, logprob_field = _per_gpu(
        r, ref, "log_prob_micro_batch_size", roles.get("reference", train)
    )
    if logprob is None:
        logprob, logprob_field = _per_gpu(r, _ROLLOUT, "log_prob_micro_batch_size", train)
    load = workload(
        file=r.file,
        fields={
            "prompts": prompts_field,
            "samples": f"{_ROLLOUT}.n",
            "prompt_max": "data.max_prompt_length",
            "response_max": "data.max_response_length",
            "micro_batch": micro_field,
            "mini_batch_prompts": f"{actor}.ppo_mini_batch_size",
            "micro_batch_tokens": f"{actor}.ppo_max_token_len_per_gpu",
            "logprob_micro_batch": logprob_field,
            "logprob_micro_batch_tokens": f"{_ROLLOUT}.log_prob_max_token_len_per_gpu",
        },
        prompts=prompts,
        samples=r.get(f"{_ROLLOUT}.n"),
        prompt_max=r.get("data.max_prompt_length"),
        response_max=r.get("data.max_response_length"),
        micro_batch=micro_batch,
        mini_batch_prompts=r.get(f"{actor}.ppo_mini_batch_size"),
        packing=_packing(r),
        micro_batch_tokens=_token_budget(r),
        logprob_micro_batch=logprob,
        logprob_micro_batch_tokens=_logprob_token_budget(r),
    )
    if load is not None and r.flag(f"{_ROLLOUT}.multi_turn.enable"):
        load = {**load, **_multi_turn(r, load["response_tokens"]["max"])}
    ratio = _generated_per_trained(r)
    if load is not None and ratio > 1:
        load["generated_per_trained"] = ratio
    return load


def _prompts(r: _Reader) -> tuple[Any, str]:
    """Prompts per step and the field they come from: ``data.train_batch_size``, but under
    fully async (which asks for ``train_batch_size=0``) the prompts trained per weight sync,
    ``ppo_mini_batch_size`` x ``trigger_parameter_sync_step`` x ``require_batches``; each of
    those three, when given, a whole number >= 1."""
    batch = "data.train_batch_size"
    if not _fully_async(r):
        return r.get(batch), batch
    mini_field = "actor_rollout_ref.actor.ppo_mini_batch_size"
    factors = [
        given_count(r.get(field, default), field=field, file=r.file)
        for field, default in (
            (mini_field, None),
            ("async_training.trigger_parameter_sync_step", 1),
            ("async_training.require_batches", 1),
        )
    ]
    if all(factors):
        return factors[0] * factors[1] * factors[2], mini_field
    return r.get(batch), batch


def _generated_per_trained(r: _Reader) -> float:
    """DAPO's dynamic sampling (verl's DAPO trainer, ``algorithm.filter_groups.enable``):
    each round generates ``data.gen_batch_size`` prompts and keeps the groups whose rewards
    differ, until ``data.train_batch_size`` are kept: at least the ratio of the two (more
    rounds when many groups are dropped; ``--set workload.generated_per_trained`` says how
    many a run took). Fully async streams prompts one at a time (verl asks for
    ``train_batch_size=0 gen_batch_size=1``) and drops groups as they finish: its config
    holds no ratio, so none is assumed."""
    if not r.flag("algorithm.filter_groups.enable") or r.get("data.gen_batch_size") is None:
        return 1.0
    if _fully_async(r):
        return 1.0
    generated, trained = r.get("data.gen_batch_size"), r.get("data.train_batch_size")
    if not (optional_int(generated) and optional_int(trained)):
        raise ConfigError(
            "must be a whole number of prompts, as data.train_batch_size",
            field="data.gen_batch_size", value=generated, file=r.file,
        )  # fmt: skip
    if not trained <= generated <= 100 * trained:
        raise ConfigError(
            f"must be from data.train_batch_size ({trained}) to 100 times it",
            field="data.gen_batch_size", value=generated, file=r.file,
        )  # fmt: skip
    return generated / trained


MULTI_TURN_DEFAULT_TURNS = 5
"""Assistant turns rlplex assumes where verl's ``multi_turn.max_assistant_turns`` is null
(verl then bounds a trajectory by its response budget only): the value of verl's
multi-turn examples (examples/sglang_multiturn/config)."""


def _multi_turn(r: _Reader, budget: int) -> dict[str, Any]:
    """verl's multi-turn rollout (``rollout.multi_turn.enable``, SGLang or agent loops) as
    ``workload.turns``: at most ``max_assistant_turns`` answers (else ``max_user_turns`` + 1,
    else :data:`MULTI_TURN_DEFAULT_TURNS`), the whole trajectory after the prompt within
    ``data.max_response_length`` (each answer may use what is left of it), a tool's reply at
    most ``max_tool_response_length`` characters (:data:`~.common.CHARS_PER_TOKEN` a token),
    when a ``tool_config_path`` is set (an interaction's replies have no bound: 0). Means as
    every importer's: half the maxima (the turns' the midpoint of 1 and the most), the
    trajectory's half its budget, its answers what the observations leave of that."""
    mt = f"{_ROLLOUT}.multi_turn"
    # verl stops at `if max_turns and turns >= max_turns`: 0 or null is no limit; a negative
    # count stops after the first answer, a string fails there.
    unlimited = " (0 or null: no limit)"
    assistant, user = (
        given_count(r.get(f"{mt}.{key}"), field=f"{mt}.{key}", file=r.file, least=0,
                    hint=unlimited)
        for key in ("max_assistant_turns", "max_user_turns")
    )  # fmt: skip
    most = assistant or (user + 1 if user else MULTI_TURN_DEFAULT_TURNS)
    # A tool's reply is cut to its first max_tool_response_length characters (0: to none).
    field = f"{mt}.max_tool_response_length"
    tool_max = given_count(r.get(field), field=field, file=r.file, least=0)
    reply = reply_tokens(256 if tool_max is None else tool_max)
    return budgeted_turns(most, reply if r.get(f"{mt}.tool_config_path") else 0, budget)


def _controller(r: _Reader) -> dict[str, Any]:
    """How verl's driver moves each pass's batch, where it differs from the format's default
    (the DataProto padded to the maxima, sent once per shard, fetched from every rank):
    ``transfer_queue.enable`` (verl's TransferQueue) and ``trainer.data_plane: neoproto`` hand
    the workers references that they fetch from a store; ``trainer.use_legacy_worker_impl:
    disable`` strips the padding before sending (``ray_trainer``'s
    ``left_right_2_no_padding``)."""
    if r.flag("transfer_queue.enable") or r.get("trainer.data_plane") == "neoproto":
        return {"padding": "none"}
    if _engine_workers(r):
        return {"padding": "packed"}
    return {}


def _legacy(r: _Reader) -> bool:
    """A config of verl before 2025-01-27 (f2a76acd9): micro-batch sizes were global, with no
    ``*_per_gpu`` keys; before 2025-01-11 (569210e06) there was no ``use_remove_padding``."""
    actor = r.get("actor_rollout_ref.actor")
    return (
        isinstance(actor, Mapping)
        and "ppo_micro_batch_size" in actor
        and "ppo_micro_batch_size_per_gpu" not in actor
    )


def _per_gpu(r: _Reader, section: str, key: str, role: Mapping[str, Any]) -> tuple[Any, str]:
    """``KEY_per_gpu``, or the global ``KEY`` (sequences per micro-batch over the whole
    trainer) over its data-parallel ranks, as verl normalises it: the role's GPUs over its
    sequence-parallel size (FSDP, fsdp_workers.py) or tensor x pipeline x context parallel
    (Megatron, megatron_workers.py: ``mpu.get_data_parallel_world_size()``); in a legacy
    config over every GPU (fsdp_workers.py @ b40afd4b7). With the field it comes from (a
    given global ``KEY`` checked here, as :func:`workload` checks the rest)."""
    per_gpu, whole = f"{section}.{key}_per_gpu", f"{section}.{key}"
    value = r.get(per_gpu)
    if value is not None:
        return value, per_gpu
    total = given_count(r.get(whole), field=whole, file=r.file)
    if not total:
        return None, per_gpu
    if _legacy(r):
        gpus = (optional_int(r.get("trainer.nnodes")) or 1) * (
            optional_int(r.get("trainer.n_gpus_per_node")) or 1
        )
        return max(1, total // gpus), whole
    par = role.get("parallel") or {}
    split = (par.get("tp") or 1) * (par.get("pp") or 1) * (par.get("sp") or 1)
    ranks = max(1, len(role.get("devices") or ()) // split)
    return max(1, total // ranks), whole


def _packing(r: _Reader) -> bool | None:
    """``use_remove_padding`` (None when not given); a legacy config without the key padded
    every row. A Megatron actor reads its own ``megatron.use_remove_padding`` (megatron_actor.py:
    ``thd``, packed, unless it is false; true in engine/megatron.yaml, and before the key
    (9f3199f58, 2025-12-02) Megatron always unpadded): the model's key, false in
    ppo_megatron_trainer.yaml, is the FSDP passes'."""
    if r.get(f"{_ACTOR}.strategy") == "megatron":
        field = f"{_ACTOR}.megatron.use_remove_padding"
        return flag(r.get(field), field=field, file=r.file)
    model = r.get("actor_rollout_ref.model")
    if _legacy(r) and isinstance(model, Mapping) and "use_remove_padding" not in model:
        return False
    field = "actor_rollout_ref.model.use_remove_padding"
    return flag(r.get(field), field=field, file=r.file)


def _logprob_field(r: _Reader, key: str) -> str:
    """Where a log-prob pass setting comes from: the reference's, else the rollout's (old
    log-probs)."""
    ref = f"actor_rollout_ref.ref.{key}"
    return ref if r.get(ref) is not None else f"{_ROLLOUT}.{key}"


def _logprob_token_budget(r: _Reader) -> int | None:
    """Tokens per dynamic-batch log-prob micro-batch (verl ``log_prob_max_token_len_per_gpu``,
    the reference's else the rollout's; by default the actor's ``ppo_max_token_len_per_gpu``,
    as ref.yaml and rollout.yaml default it) times its pass's sequence split."""
    if not r.flag(_logprob_field(r, "log_prob_use_dynamic_bsz"), default=_actor_dynamic(r)):
        return None
    field = _logprob_field(r, "log_prob_max_token_len_per_gpu")
    tokens = given_count(r.get(field), field=field, file=r.file) or _actor_tokens(r)
    ref = field.startswith(_REF)
    return tokens * _sequence_split(r, _REF if ref else _ACTOR, fallback=_ACTOR)


def _token_budget(r: _Reader) -> int | None:
    """Tokens per micro-batch of a dynamic-batch actor: the per-GPU budget times its
    sequence split (:func:`_sequence_split`)."""
    if not _actor_dynamic(r):
        return None
    return _actor_tokens(r) * _sequence_split(r, _ACTOR)


def _actor_dynamic(r: _Reader) -> bool:
    return r.flag(f"{_ACTOR}.use_dynamic_bsz")


def _actor_tokens(r: _Reader) -> int:
    """The actor's ``ppo_max_token_len_per_gpu`` (actor.yaml: 16384 when a file says none)."""
    field = f"{_ACTOR}.ppo_max_token_len_per_gpu"
    return given_count(r.get(field), field=field, file=r.file) or ACTOR_TOKENS


def _parallel(r: _Reader, name: str) -> dict[str, Any] | None:
    """A role's parallel sizes as verl's actor / ref / critic / rollout configs give them."""
    if name == "actor_infer":
        return parallel(
            tp=r.size(_TP_FIELD),
            pp=r.size(f"{_ROLLOUT}.pipeline_model_parallel_size"),
            ep=r.size(f"{_ROLLOUT}.expert_parallel_size"),
        )
    base = {
        "actor_train": "actor_rollout_ref.actor",
        "reference": "actor_rollout_ref.ref",
        "critic": "critic",
    }.get(name)
    if base is None:
        return None
    strategy = r.get(f"{base}.strategy")
    model = "critic.model" if name == "critic" else "actor_rollout_ref.model"
    # Recomputation only matters when training (the reference runs forward passes only).
    recompute = name != "reference" and r.flag(f"{model}.enable_gradient_checkpointing")
    if strategy == "megatron":
        mega = f"{base}.megatron"
        # verl's Megatron engine ignores enable_gradient_checkpointing: it recomputes only what
        # override_transformer_config.recompute_granularity asks (null by default).
        # (selective recomputes only the attention core: priced as none.)
        granularity = r.get(f"{mega}.override_transformer_config.recompute_granularity")
        # Megatron-core's CPU optimizer moves optimizer_offload_fraction of the states, 0.0 by
        # default (OptimizerConfig); the format says all or nothing.
        opt = f"{base}.optim.override_optimizer_config"
        fraction = given_number(
            r.get(f"{opt}.optimizer_offload_fraction"),
            field=f"{opt}.optimizer_offload_fraction", file=r.file,
        )  # fmt: skip
        cpu_adam = (
            r.flag(f"{opt}.optimizer_cpu_offload") and fraction is not None and fraction >= 1.0
        )
        # Megatron's distributed optimizer (verl's default, use_distributed_optimizer: True in
        # its megatron actor and critic configs) shards the optimizer state: ZeRO-1.
        distributed = name != "reference" and r.flag(f"{mega}.use_distributed_optimizer", True)
        sequence_parallel = f"{mega}.sequence_parallel"
        return parallel(
            tp=r.size(f"{mega}.tensor_model_parallel_size"),
            pp=r.size(f"{mega}.pipeline_model_parallel_size"),
            ep=r.size(f"{mega}.expert_model_parallel_size"),
            sp=r.size(f"{mega}.context_parallel_size"),
            zero=1 if distributed else None,
            recompute=name != "reference" and granularity == "full",
            offload_params=r.flag(f"{mega}.param_offload"),
            offload_optimizer=r.flag(f"{mega}.optimizer_offload") if not cpu_adam else None,
            cpu_optimizer=cpu_adam if name != "reference" else None,
            sequence_parallel=flag(r.get(sequence_parallel), field=sequence_parallel, file=r.file),
        )
    if strategy == "veomni":
        return _veomni(r, name, base, recompute)
    if strategy == "torchtitan":
        return _torchtitan(r, name, base)
    # verl's trainer config sets `strategy: fsdp` for actor, ref and critic
    # (verl/trainer/config/ppo_trainer.yaml and its actor/critic groups): a file that
    # does not say otherwise runs FSDP.
    fsdp = f"{base}.fsdp_config" if name != "critic" else _critic_fsdp(r)
    return parallel(
        fsdp=strategy in ("fsdp", "fsdp2", None),
        # verl's FSDP passes compute log-probs with flash-attention's cross entropy over the
        # model's bf16 logits (dp_actor.py); the actor's old log-probs also take the logits'
        # entropy for the metrics (fsdp_workers.py, calculate_entropy=True), its training
        # does with an entropy term in the loss (entropy_coeff != 0)
        logits=_logits(r, name),
        # Hugging Face modules run eager (the format's default under FSDP) unless verl
        # patches in Liger's fused norm, rotary and SwiGLU kernels (model.use_liger).
        kernels="fused" if r.flag(f"{model}.use_liger") else None,
        recompute=recompute,
        sp=_ulysses(r, base),
        offload_params=r.flag(f"{fsdp}.param_offload"),
        offload_optimizer=r.flag(f"{fsdp}.optimizer_offload") if name != "reference" else None,
    )


def _veomni(r: _Reader, name: str, base: str, recompute: bool) -> dict[str, Any] | None:
    """A role on verl's VeOmni engine (``strategy: veomni``, 2487c3628, 2026-02-10): FSDP2
    sharding with Ulysses and expert parallelism, its sizes and offload in the role's
    ``veomni`` block (verl/trainer/config/engine/veomni.yaml; read by
    verl/workers/engine/veomni/transformer_impl.py: ``ulysses_parallel_size``,
    ``expert_parallel_size``, ``param_offload``, ``optimizer_offload``)."""
    block = f"{base}.veomni"
    return parallel(
        fsdp=True,
        recompute=recompute,
        sp=r.size(f"{block}.ulysses_parallel_size"),
        ep=r.size(f"{block}.expert_parallel_size"),
        offload_params=r.flag(f"{block}.param_offload"),
        offload_optimizer=r.flag(f"{block}.optimizer_offload") if name != "reference" else None,
    )


def _torchtitan(r: _Reader, name: str, base: str) -> dict[str, Any] | None:
    """A role on verl's TorchTitan engine (``strategy: torchtitan``, cb60e7096, 2026-02-24):
    FSDP2 sharding with tensor, pipeline, context and expert parallel sizes, offload and
    activation checkpointing in the role's ``torchtitan`` block
    (verl/trainer/config/engine/torchtitan.yaml, read by
    verl/workers/engine/torchtitan/transformer_impl.py). Its ``activation_checkpoint``
    defaults to ``selective``, which recomputes part of each layer: priced as none, as
    Megatron's selective recomputation is; ``full`` recomputes every layer."""
    block = f"{base}.torchtitan"
    training = name != "reference"
    return parallel(
        fsdp=True,
        tp=r.size(f"{block}.tensor_parallel_size"),
        pp=r.size(f"{block}.pipeline_parallel_size"),
        sp=r.size(f"{block}.context_parallel_size"),
        ep=r.size(f"{block}.expert_parallel_size"),
        recompute=training and r.get(f"{block}.activation_checkpoint") == "full",
        offload_params=r.flag(f"{block}.param_offload"),
        offload_optimizer=r.flag(f"{block}.optimizer_offload") if training else None,
    )


def _shard_group(r: _Reader, name: str, spec: Mapping[str, Any] | None, gpus: int) -> int | None:
    """The data-parallel ranks a sharded role's states split over when fewer than all of
    them (hybrid sharding, ``parallel.shard_group``), else None. FSDP engine:
    ``fsdp_config.fsdp_size`` (the critic's ``critic.fsdp.fsdp_size`` since 2026-04), -1 or
    at least the role's GPUs meaning all of them (``create_device_mesh``,
    verl/workers/engine/fsdp/utils.py: a ("ddp", "fsdp") mesh of world / fsdp_size x
    fsdp_size otherwise). VeOmni: ``veomni.fsdp_size`` over its data-parallel ranks (GPUs /
    Ulysses size), whose shards also span the Ulysses ranks (its ``dp_shard_sp`` mesh):
    ``fsdp_size`` x Ulysses GPUs. TorchTitan: ``torchtitan.data_parallel_replicate_size``
    replicas of the rest (its ``data_parallel_shard_size`` fills the shard dimension).

    Raises:
        ConfigError: a size that is not a whole number, or one that does not divide the
            role's data-parallel ranks (verl's mesh fails on it).
    """
    base = {
        "actor_train": "actor_rollout_ref.actor",
        "reference": "actor_rollout_ref.ref",
        "critic": "critic",
    }.get(name)
    if base is None or not spec or not (spec.get("fsdp") or spec.get("zero")):
        return None
    split = (spec.get("tp") or 1) * (spec.get("pp") or 1)
    dp = max(1, gpus // split)
    strategy = r.get(f"{base}.strategy")
    # The reference's VeOmni and TorchTitan blocks take the actor's sizes unless they say
    # otherwise (ref/veomni_ref.yaml, ref/torchtitan_ref.yaml: oc.select of the actor's).
    inherit = name == "reference" and strategy in ("veomni", "torchtitan")
    if strategy == "torchtitan":
        field = f"{base}.torchtitan.data_parallel_replicate_size"
        if inherit and r.get(field) is None:
            field = "actor_rollout_ref.actor.torchtitan.data_parallel_replicate_size"
        replicas = r.size(field)
        if replicas is None or replicas == 1:
            return None
        if dp % replicas:
            raise ConfigError(
                f"{replicas} replicas do not divide the role's {dp} data-parallel ranks",
                field=field, value=replicas, file=r.file,
            )  # fmt: skip
        return dp // replicas
    if strategy == "veomni":
        field = f"{base}.veomni.fsdp_size"
        if inherit and r.get(field) is None:
            field = "actor_rollout_ref.actor.veomni.fsdp_size"
        ulysses = spec.get("sp") or 1
    elif strategy in ("fsdp", "fsdp2", None):
        field = f"{_critic_fsdp(r) if name == 'critic' else base + '.fsdp_config'}.fsdp_size"
        ulysses = 1  # verl's FSDP mesh is over every GPU, Ulysses ranks included
    else:
        return None
    value = r.get(field)
    if value is None or value == -1 or (isinstance(value, int) and value < 0):
        return None  # verl's "-1": all of them
    size = r.size(field)
    assert size is not None
    ranks = dp // ulysses
    if size >= ranks:
        return None
    if ranks % size:
        raise ConfigError(
            f"fsdp_size {size} does not divide the role's {ranks} data-parallel ranks"
            " (verl's device mesh of dp / fsdp_size x fsdp_size ranks cannot be built)",
            field=field, value=size, file=r.file,
        )  # fmt: skip
    return size * ulysses


def _logits(r: _Reader, name: str) -> str | None:
    """How verl's FSDP passes of role ``name`` hold the logits (``parallel.logits``)."""
    if name == "reference":
        return "bf16"
    if name != "actor_train":
        return None  # the critic's value head has one output: no logits to speak of
    field = "actor_rollout_ref.actor.entropy_coeff"
    if not given_number(r.get(field), field=field, file=r.file):
        return "bf16_entropy_forward"
    # dp_actor.py compiles the entropy (torch.compile) unless use_torch_compile is false
    # (an option since 2025-03-14; always compiled since 2025-01-21, before the per-GPU
    # micro-batch keys of a "legacy" config: that verl ran it eager).
    # Only the unpadded path (use_remove_padding: verl's default since hf_model.yaml, and the
    # format's) calls the compiled one; padded rows take verl_F.entropy_from_logits eager.
    compiled = r.flag("actor_rollout_ref.actor.use_torch_compile", True)
    unpadded = _packing(r) is not False
    return "bf16_entropy_compiled" if compiled and unpadded and not _legacy(r) else "bf16_entropy"


def _rollout(r: _Reader) -> dict[str, Any] | None:
    """The rollout engine's settings: vLLM/SGLang batch cap, memory share, eager mode, and
    how it sleeps: verl's vLLM rollout drops its weights (sleep level 2, with vLLM >= 0.8.5,
    the format's default) unless ``layered_summon`` keeps them (level 1;
    verl/workers/rollout/vllm_rollout/vllm_rollout.py). A legacy config's verl ran its own
    fork of vLLM <= 0.6.3 (``verl/third_party/vllm`` and ``vllm<=0.6.3`` in its setup @
    f2a76acd9): vLLM's V0 engine."""
    return rollout(
        file=r.file,
        fields={
            "max_num_seqs": f"{_ROLLOUT}.max_num_seqs",
            "gpu_memory_utilization": f"{_ROLLOUT}.gpu_memory_utilization",
            "enforce_eager": f"{_ROLLOUT}.enforce_eager",
        },
        max_num_seqs=r.get(f"{_ROLLOUT}.max_num_seqs"),
        gpu_memory_utilization=r.get(f"{_ROLLOUT}.gpu_memory_utilization"),
        enforce_eager=r.get(f"{_ROLLOUT}.enforce_eager"),
        sleep_level=1 if r.flag(f"{_ROLLOUT}.layered_summon") else None,
        vllm_v0=_legacy(r) and r.get(f"{_ROLLOUT}.name") in ("vllm", None),
    )


def _lora(r: _Reader, name: str) -> tuple[dict[str, Any] | None, bool]:
    """A trained role's LoRA adapters, and whether its weight syncs merge them.

    The actor's: Megatron-Bridge's ``actor_rollout_ref.model.lora`` (``rank``,
    ``target_modules``, ``merge``), else the FSDP path's ``model.lora_rank`` and
    ``target_modules`` (verl/trainer/main_ppo.py reads them in that order); the critic's:
    ``critic.model.lora_rank``. Only a Megatron ``lora.merge`` syncs merged weights; every
    other LoRA run hands the rollout the adapters, which vLLM applies at run time
    (``enable_lora``, vllm_async_server.py).
    """
    model = "critic.model" if name == "critic" else "actor_rollout_ref.model"
    adapters = lora(_rank(r, f"{model}.lora.rank"), r.get(f"{model}.lora.target_modules"))
    if adapters is not None:
        return adapters, r.flag(f"{model}.lora.merge")
    return lora(_rank(r, f"{model}.lora_rank"), r.get(f"{model}.target_modules")), False


def _rank(r: _Reader, field: str) -> int | None:
    """A LoRA rank as verl reads it: adapters when it is above 0 (``lora_rank > 0``), none at
    0 or below; one that is not an integer fails that comparison (a string) or builds
    adapters of a fractional rank."""
    rank = r.get(field)
    if rank is None:
        return None
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise InvalidValueError(
            "must be an integer (0 or less: no LoRA)", field=field, value=rank, file=r.file
        )
    return rank


_CHECKPOINT_ENGINES = ("nccl", "hccl", "nixl", "mooncake", "kimi_ckpt_engine", "delta_sharded")
"""verl's ``rollout.checkpoint_engine.backend`` values that move weights between disjoint GPUs
(verl/checkpoint_engine/README.md; ``naive`` is the colocated hand-over)."""


def _weight_sync(r: _Reader) -> str:
    """How verl moves the trainer's weights to a rollout on other GPUs.

    - The fully-async recipe's checkpoint engine (``async_training.checkpoint_engine``,
      2025-12 to 2026-02): buckets each engine worker loads itself (``bucketed``).
    - The checkpoint engine of verl since 2026-02 (``rollout.checkpoint_engine.backend``
      other than ``naive``, or any name a ``custom_backend_module`` registers): buckets
      whose tensors each engine rank hands to its server through the weight-update API
      (``server_loaded``). verl's ``delta_sharded`` sends
      only the changed elements; rlplex prices the full broadcast it replaces (verl
      measured that 1.3-21x slower, docs/advance/delta_weight_sync.md).
    - Otherwise tensor by tensor over a Ray collective group (``per_tensor``: one-step-off,
      fully async and explicit pools before the checkpoint engine).
    """
    engine = "async_training.checkpoint_engine"
    if r.flag(f"{engine}.enable"):
        overlap = r.flag(f"{engine}.overlap_broadcast_and_consume")
        return "bucketed_overlapped" if overlap else "bucketed"
    field = f"{_ROLLOUT}.checkpoint_engine.backend"
    backend = r.get(field)
    if backend is None or backend == "naive":
        return "per_tensor"
    custom = r.get(f"{_ROLLOUT}.checkpoint_engine.custom_backend_module")
    # a plugin module registers its own backend names (CheckpointEngineRegistry.register)
    if backend not in _CHECKPOINT_ENGINES and not custom:
        raise InvalidValueError(
            f"is not a checkpoint engine verl has (naive, {', '.join(_CHECKPOINT_ENGINES)})",
            field=field, value=backend, file=r.file,
        )  # fmt: skip
    return "server_loaded"


def _partial_rollout(r: _Reader) -> bool:
    """Fully async's ``partial_rollout``: verl honours it only with ``staleness_threshold`` > 0
    (verl/experimental/fully_async_policy/README.md, "Supported Modes"); both default on in
    its fully_async_ppo_trainer.yaml (``partial_rollout: True``, threshold 0.1)."""
    if _v1_mode(r) == "separate_async":
        return True  # its trainer's docstring: "Partial rollout is enabled" (no switch)
    if not _fully_async(r):
        return False  # one-step-off: each step's batch is generated whole
    threshold = _staleness_threshold(r)
    return (
        r.flag("async_training.partial_rollout", True)
        and (0.1 if threshold is None else threshold) > 0
    )


def _staleness_threshold(r: _Reader) -> float | None:
    """Fully async's ``staleness_threshold`` (None when not given): a number >= 0, as verl's
    rollouter asserts."""
    field = "async_training.staleness_threshold"
    return given_number(r.get(field), field=field, file=r.file, least=0)


def _apply_lora(r: _Reader, roles: dict[str, dict[str, Any]]) -> list[str] | None:
    """Give the LoRA roles their adapters; the reference roles of the step (None: the
    default).

    A LoRA actor computes the reference log-probs itself with its adapters switched off
    (verl's ``ref_in_actor``, ray_trainer.py): no reference role holds weights. Its rollout
    applies the adapters unless they are merged; verl then keeps the engine's base weights
    across sleeps (sleep level 1: megatron_workers.py, and engine_workers.py for
    ``use_legacy_worker_impl: disable``) and syncs the adapters only; the legacy FSDP
    worker keeps the configured level, and at level 2 sends the base weights too
    (fsdp_workers.py).
    """
    reference_roles = None
    actor, merged = _lora(r, "actor_train")
    if actor is not None and "actor_train" in roles:
        fsdp = r.get("actor_rollout_ref.actor.strategy") in ("fsdp", "fsdp2", None)
        dtype = r.get("actor_rollout_ref.actor.fsdp_config.model_dtype")
        if fsdp and dtype in (None, "fp32", "float32"):
            # verl's FSDP actor loads its model in fp32 unless fsdp_config.model_dtype says
            # otherwise (fsdp_workers.py): the frozen base stays fp32
            actor = {**actor, "frozen_precision": "fp32"}
        roles["actor_train"]["lora"] = actor
        if "reference" in roles:
            del roles["reference"]
            reference_roles = ["actor_train"]
        infer = roles.get("actor_infer")
        if infer is not None and not merged:
            infer["lora"] = {k: v for k, v in actor.items() if k != "frozen_precision"}
            megatron = r.get("actor_rollout_ref.actor.strategy") == "megatron"
            if megatron or _engine_workers(r):
                infer["rollout"] = {**(infer.get("rollout") or {}), "sleep_level": 1}
    critic, _ = _lora(r, "critic")
    if critic is not None and "critic" in roles:
        fsdp = r.get("critic.strategy") in ("fsdp", "fsdp2", None)
        if fsdp and r.get(f"{_critic_fsdp(r)}.model_dtype") in (None, "fp32", "float32"):
            critic = {**critic, "frozen_precision": "fp32"}  # as the actor's (fsdp_workers.py)
        roles["critic"]["lora"] = critic
    return reference_roles


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert a verl trainer config or explicit pools into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the verl field path, e.g. ``mapping.Critic``.
    """
    composed = compose(data, file)
    data = composed.data
    _refuse_non_rl(data, file)
    r = _Reader(data, file, composed.missing_defaults)
    _refuse_validation_only(r)
    explicit = "resource_pool_spec" in data
    if explicit:
        pools, mapping = _explicit_pools(data, file)
        mode, staleness = "sync", 0
    else:
        pools, mapping, mode, staleness = _pools(r)
    largest = max(max(sizes) for sizes in pools.values())
    given = r.get("trainer.n_gpus_per_node")
    if len(pools) > 1 and not explicit:
        per_node = max(_DEFAULT_NODE_GPUS, largest)
    elif given is not None:
        per_node = r.int("trainer.n_gpus_per_node")
    else:
        per_node = largest
    try:
        placed, nodes = layout_pools(pools, per_node)
    except ValueError as exc:
        bad = next(p for p, sizes in pools.items() if max(sizes) > per_node)
        raise ConfigError(
            str(exc), field=f"resource_pool_spec.{bad}", value=pools[bad], file=file
        ) from None
    cluster = Cluster(nodes=max(1, nodes), gpus_per_node=per_node)
    replica = 1
    for key in ("tensor_model_parallel_size", "data_parallel_size", "pipeline_model_parallel_size"):
        replica *= r.int(f"{_ROLLOUT}.{key}", 1)
    roles: dict[str, dict[str, Any]] = {}
    for verl_role, pool in mapping.items():
        field = f"mapping.{verl_role}"
        names = VERL_ROLES.get(verl_role.replace("_", "").lower())
        if names is None:
            raise ConfigError(
                "unknown verl role (expected one of: ActorRollout, ActorRolloutRef, Actor,"
                " Rollout, Critic, RefPolicy, RewardModel)",
                field=field,
                value=verl_role,
                file=file,
            )
        if pool not in placed:
            raise ConfigError(
                f"no such resource pool (pools: {', '.join(placed)})",
                field=field,
                value=pool,
                file=file,
            )
        devices = placed[pool]
        for name in names:
            if name in roles:
                raise ConfigError(
                    f"role {name!r} is mapped twice", field=field, value=pool, file=file
                )
            served = _reward_engine(r) if name == "reward" else None
            per_worker = replica if name == "actor_infer" else (served or (1, ""))[0]
            layout_field = _TP_FIELD if name == "actor_infer" and replica > 1 else field
            if served is not None and served[0] > 1:
                layout_field = served[1]
            check_worker_layout(name, devices, per_worker, cluster, file, field=layout_field)
            role = gpu_role(devices, per_worker, name)
            spec = _parallel(r, name)
            if served is not None and served[0] > 1:
                spec = parallel(tp=served[0])
            group = _shard_group(r, name, spec, len(devices))
            if spec and group is not None:
                spec["shard_group"] = group
            if spec:
                role["parallel"] = spec
            engine = _rollout(r) if name == "actor_infer" else None
            if engine:
                role["rollout"] = engine
            if name == "actor_infer" and r.get(f"{_ROLLOUT}.quantization") == "fp8":
                role["precision"] = "fp8"  # vLLM's FP8 weights (rollout.quantization)
            roles[name] = role
    reference_roles = _apply_lora(r, roles)
    infer, train = roles.get("actor_infer"), roles.get("actor_train")
    if (
        infer is not None
        and train is not None
        and not set(infer["devices"]) & set(train["devices"])
    ):
        infer["rollout"] = {**(infer.get("rollout") or {}), "weight_sync": _weight_sync(r)}
        if mode == "async" and _partial_rollout(r):
            infer["rollout"]["partial_rollout"] = True
    elif infer is not None and train is not None:
        # Colocated, every trainer rank hands the engine rank beside it each full tensor
        # through the engine's weight-update API (the hybrid engine's update_weights: the
        # server adapter's since the checkpoint engine, vLLM's load_weights before it).
        infer["rollout"] = {**(infer.get("rollout") or {}), "weight_sync": "server_loaded"}
    for name, verl_name in (("actor_train", "Actor"), ("actor_infer", "Rollout")):
        if name not in roles:
            raise ConfigError(
                f"maps no {verl_name} (or ActorRollout) role; rlplex's step needs both",
                field="mapping" if explicit else "trainer",
                file=file,
            )
    native: dict[str, Any] = {
        "cluster": cluster.model_dump(exclude_unset=True),
        "roles": roles,
        "pipeline": default_pipeline(roles, mode, staleness, reference_roles=reference_roles),
    }
    if _no_old_logprob(r):
        drop_stage(native["pipeline"], "old_logprob")
    model = model_path(r.get("actor_rollout_ref.model.path"))
    if model:
        native["model"] = model
    # A critic or reward model loads its own checkpoint (critic.model.path,
    # reward_model.model.path); said only where it differs from the actor's.
    for name, key in (
        ("critic", "critic.model.path"),
        ("reward", _reward_model_field(r, "model_path")),
    ):
        own = model_path(r.get(key))
        if name in roles and own and own != model:
            roles[name]["model"] = own
    load = _workload(r, roles)
    if load:
        controller = _controller(r)
        if controller:
            load["controller"] = controller
        native["workload"] = load
        _stage_micro_batches(r, roles, load, native["pipeline"]["stages"])
    return apply_costs(native, costs, costs_file)


def _sequence_split(r: _Reader, section: str, fallback: str | None = None) -> int:
    """The ranks that split each sequence of ``section``'s passes, by which verl multiplies
    a per-GPU token budget: Megatron's context-parallel size (megatron_actor.py,
    megatron_critic.py, the Megatron reward model: ``max_token_len * context_parallel_size``)
    or FSDP's Ulysses size (dp_actor.py, dp_critic.py, fsdp_workers.py's reward model);
    ``fallback``'s where ``section`` gives none (the reference's default the actor's:
    dp_ref.yaml, megatron_ref.yaml)."""
    for base in (section, fallback):
        if base is None:
            continue
        strategy = r.get(f"{base}.strategy")
        if strategy == "megatron":
            size = r.size(f"{base}.megatron.context_parallel_size")
        elif strategy in _ENGINE_SPLIT:
            size = r.size(f"{base}.{strategy}.{_ENGINE_SPLIT[strategy]}")
        else:
            size = _ulysses(r, base)
        if size is not None:
            return size
    return 1


_ENGINE_SPLIT = {"veomni": "ulysses_parallel_size", "torchtitan": "context_parallel_size"}
"""The key of each newer engine's block that splits every sequence over ranks."""


def _ulysses(r: _Reader, base: str) -> int | None:
    """An FSDP role's Ulysses size (None when the file gives none) where verl reads it.

    The legacy workers read ``BASE.ulysses_sequence_parallel_size`` (fsdp_workers.py). The
    engine workers (:func:`_engine_workers`) read the engine block's: the actor's and the
    reference's ``fsdp_config.ulysses_sequence_parallel_size``, which FSDPActorConfig overrides
    with the deprecated top-level size when that is above 1 (verl/workers/config/actor.py since
    8ed5bafc0); the critic's ``critic.fsdp.ulysses_sequence_parallel_size`` since 16253911d
    (2026-04-03, "support critic model": the critic's engine moved from
    ``critic.model.fsdp_config`` to ``critic.fsdp``, and FSDPCriticConfig copies no top-level
    size: verl/workers/config/critic.py @ 1dda039b9)."""
    top = r.size(f"{base}.ulysses_sequence_parallel_size")
    if base == "critic":
        if isinstance(r.get("critic.fsdp"), Mapping):
            return r.size("critic.fsdp.ulysses_sequence_parallel_size")
        return top
    if (top is None or top == 1) and _engine_workers(r):
        engine = r.size(f"{base}.fsdp_config.ulysses_sequence_parallel_size")
        if engine is not None and engine > 1:
            return engine
    return top


def _critic_fsdp(r: _Reader) -> str:
    """The critic's FSDP engine block: ``critic.fsdp`` since 16253911d (2026-04-03,
    verl/trainer/config/critic/dp_critic.yaml ``../engine@fsdp: fsdp``), before it
    ``critic.model.fsdp_config``."""
    return (
        "critic.fsdp" if isinstance(r.get("critic.fsdp"), Mapping) else "critic.model.fsdp_config"
    )


def _engine_workers(r: _Reader) -> bool:
    """verl's new worker implementation (engine_workers.py): ``trainer.use_legacy_worker_impl:
    disable``, and the only one since verl removed the legacy workers and that key (044bbba27,
    2026-04-20, "deprecate workers, migrate to engines"). A file without the key is from after
    that when it has the ``reward.reward_model`` block (67dc84b96, 2026-02-11: in between the
    key was always in verl's trainer configs), else from before the key (legacy workers)."""
    value = r.get("trainer.use_legacy_worker_impl")
    if value is None:
        return isinstance(r.get(_NEW_REWARD_MODEL), Mapping)
    return value == "disable"


def _new_critic(r: _Reader) -> bool:
    """The new worker implementation's critic (:func:`_engine_workers`; FSDP only while the
    legacy workers existed, main_ppo.py keeping Megatron's CriticWorker, every strategy since
    044bbba27: main_ppo_v0.py's TrainingWorker): a TrainingWorker whose engine
    batches by tokens always (EngineConfig ``use_dynamic_bsz`` defaults to true and
    ray_trainer.py sets only the budgets: ``ppo_max_token_len_per_gpu`` to train,
    ``ppo_infer_max_token_len_per_gpu`` for values)."""
    if not _engine_workers(r):
        return False
    removed = r.get("trainer.use_legacy_worker_impl") is None
    return removed or r.get("critic.strategy", "fsdp") in ("fsdp", "fsdp2")


def _stage_micro_batches(
    r: _Reader,
    roles: Mapping[str, Mapping[str, Any]],
    load: Mapping[str, Any],
    stages: dict[str, dict[str, Any]],
) -> None:
    """Each pass's own micro-batch (``pipeline.stages.S.micro_batch_size`` and
    ``micro_batch_tokens``) where verl gives its role one that differs from the workload's:
    the critic's update and values (``critic.ppo_micro_batch_size_per_gpu``; values
    ``forward_micro_batch_size_per_gpu`` under FSDP, the update's under Megatron, whose
    ``compute_values`` reads ``ppo_micro_batch_size_per_gpu``), the reference's and the
    rollout's log-prob passes (the workload holds the reference's when given), the reward
    model's (not under the reward loop, ``reward_model.use_reward_loop``: a served engine
    with no micro-batches). A pass with dynamic batches takes its token budget (its switch
    and budget defaulting as verl's config files default them, times
    :func:`_sequence_split`); one without, where the workload has a budget, ``0`` (count
    micro-batches)."""
    actor_train = roles.get("actor_train", {})
    train = (load.get("micro_batch_size"), load.get("micro_batch_tokens"))
    forward = (
        load.get("logprob_micro_batch_size") or train[0],
        load.get("logprob_micro_batch_tokens") or train[1],
    )
    critic, ref = roles.get("critic", actor_train), roles.get("reference", actor_train)

    def tokens(*fields: str, default: int, split: int) -> int:
        # The first of ``fields`` given (verl's interpolation chain), else ``default``.
        for field in fields:
            value = given_count(r.get(field), field=field, file=r.file)
            if value is not None:
                return value * split
        return default * split

    actor_dynamic, actor_tokens = _actor_dynamic(r), _actor_tokens(r)
    # Every role's switch defaults to the actor's in verl's configs (critic.yaml, ref.yaml,
    # rollout.yaml: ${actor_rollout_ref.actor.use_dynamic_bsz}); the reward model's to the
    # critic's (reward_model.yaml: ${critic.use_dynamic_bsz}), as its budget.
    new_critic = _new_critic(r)
    critic_dynamic = new_critic or r.flag("critic.use_dynamic_bsz", default=actor_dynamic)
    critic_split = _sequence_split(r, "critic")
    critic_train_tokens = tokens("critic.ppo_max_token_len_per_gpu",
                                 default=CRITIC_TOKENS, split=critic_split)  # fmt: skip
    values_fields = (
        ("critic.ppo_infer_max_token_len_per_gpu",)
        if new_critic
        else ("critic.forward_max_token_len_per_gpu", "critic.ppo_max_token_len_per_gpu")
    )
    critic_mb = _per_gpu(r, "critic", "ppo_micro_batch_size", critic)
    forward_mb = _per_gpu(r, "critic", "forward_micro_batch_size", critic)
    if r.get("critic.strategy") == "megatron" or forward_mb[0] is None:
        forward_mb = critic_mb
    reward_role = roles.get("reward", actor_train)
    wanted: dict[str, tuple[tuple[Any, str], tuple[Any, Any], bool, int]] = {
        "critic_train": (critic_mb, train, critic_dynamic, critic_train_tokens),
        "values": (
            forward_mb, forward, critic_dynamic,
            tokens(*values_fields, default=CRITIC_TOKENS, split=critic_split),
        ),
        "ref_logprob": (
            _per_gpu(r, _REF, "log_prob_micro_batch_size", ref), forward,
            r.flag(f"{_REF}.log_prob_use_dynamic_bsz", default=actor_dynamic),
            tokens(f"{_REF}.log_prob_max_token_len_per_gpu", default=actor_tokens,
                   split=_sequence_split(r, _REF, fallback=_ACTOR)),
        ),
        "old_logprob": (
            _per_gpu(r, _ROLLOUT, "log_prob_micro_batch_size", actor_train), forward,
            r.flag(f"{_ROLLOUT}.log_prob_use_dynamic_bsz", default=actor_dynamic),
            tokens(f"{_ROLLOUT}.log_prob_max_token_len_per_gpu", default=actor_tokens,
                   split=_sequence_split(r, _ACTOR)),
        ),
        "reward": (
            _per_gpu(r, "reward_model", "micro_batch_size", reward_role), forward,
            r.flag("reward_model.use_dynamic_bsz",
                   default=r.flag("critic.use_dynamic_bsz", default=actor_dynamic)),
            tokens("reward_model.forward_max_token_len_per_gpu",
                   "critic.forward_max_token_len_per_gpu", "critic.ppo_max_token_len_per_gpu",
                   default=CRITIC_TOKENS, split=_sequence_split(r, "reward_model")),
        ),
    }  # fmt: skip
    if _reward_loop(r):
        del wanted["reward"]
    for name, ((size, field), (default_size, default_tokens), dynamic, budget) in wanted.items():
        # A pass on a GPU role only: a rule reward on the driver has no micro-batches.
        if name not in stages or stages[name].get("role") not in roles:
            continue
        size = given_count(size, field=field, file=r.file)
        if size is not None and size != default_size:
            stages[name]["micro_batch_size"] = size
        if dynamic and budget != default_tokens:
            stages[name]["micro_batch_tokens"] = budget
        elif not dynamic and default_tokens is not None:
            stages[name]["micro_batch_tokens"] = 0
