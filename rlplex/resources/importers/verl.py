"""Read verl's placement: resource pools and the role -> pool mapping.

verl (volcengine/verl) builds its placement in Python from the trainer
config: a ``resource_pool_spec`` maps each pool to a list of GPU counts, one
per node (``{"global_pool": [n_gpus_per_node] * nnodes}``), and a ``mapping``
assigns each worker role to a pool. rlplex reads either form:

1. A plain verl trainer config (``ppo_trainer.yaml`` style): ``trainer.nnodes``
   and ``trainer.n_gpus_per_node`` make one ``global_pool`` on which every
   role is colocated, as verl's ``main_ppo`` does. Which roles exist follows
   verl: the critic when ``critic.enable`` is true, or (no ``enable``) when
   ``algorithm.adv_estimator`` is ``gae`` (verl's default); the reference
   policy when ``algorithm.use_kl_in_reward`` or
   ``actor_rollout_ref.actor.use_kl_loss``; a reward model when
   ``reward_model.enable``. A top-level ``rollout`` block with ``nnodes`` and
   ``n_gpus_per_node`` (verl's one-step-off-policy recipe) puts the rollout on
   its own pool after the trainer's and makes the step async with
   ``max_staleness: 1``.
2. Explicit pools, as the Python would build them::

       trainer: {n_gpus_per_node: 8}
       resource_pool_spec: {actor_pool: [4], rollout_pool: [4]}
       mapping: {Actor: actor_pool, Rollout: rollout_pool, RefPolicy: actor_pool}

Pools are laid out in the order given on consecutive, disjoint GPUs; each
entry of a pool is that many GPUs on one node (a pool entry never spans
nodes, so an entry that would cross a node boundary starts on the next node).
GPUs per node: ``trainer.n_gpus_per_node``, else the largest pool entry.

verl roles map to rlplex roles: ``ActorRollout`` -> ``actor_train`` +
``actor_infer``; ``ActorRolloutRef`` -> those + ``reference``; ``Actor`` ->
``actor_train``; ``Rollout`` -> ``actor_infer``; ``Critic`` -> ``critic``;
``RefPolicy`` -> ``reference``; ``RewardModel`` -> ``reward``. Names are
matched case-insensitively, with or without underscores. Without a reward
model, rule rewards run in verl's driver process, so the ``reward`` stage
runs on ``driver``. The rollout's GPUs per worker is
``actor_rollout_ref.rollout.tensor_model_parallel_size``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.importers.common import (
    apply_costs,
    default_pipeline,
    get_path,
    gpu_role,
    positive_int,
    resolve_ref,
)
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

_TP_FIELD = "actor_rollout_ref.rollout.tensor_model_parallel_size"


def _get(data: Mapping[str, Any], path: str, default: Any = None) -> Any:
    return resolve_ref(get_path(data, path, default), data)


def _plain_pools(data: Mapping[str, Any], file: str) -> tuple[dict[str, list[int]], dict[str, str]]:
    """verl main_ppo's pools and mapping for a plain trainer config."""
    nnodes = positive_int(_get(data, "trainer.nnodes", 1), field="trainer.nnodes", file=file)
    per_node = positive_int(
        _get(data, "trainer.n_gpus_per_node"), field="trainer.n_gpus_per_node", file=file
    )
    pools = {"global_pool": [per_node] * nnodes}
    mapping = {"ActorRollout": "global_pool"}
    rollout = data.get("rollout")
    if isinstance(rollout, dict) and "n_gpus_per_node" in rollout:
        r_nodes = positive_int(_get(data, "rollout.nnodes", 1), field="rollout.nnodes", file=file)
        r_gpus = positive_int(
            _get(data, "rollout.n_gpus_per_node"), field="rollout.n_gpus_per_node", file=file
        )
        pools["rollout_pool"] = [r_gpus] * r_nodes
        mapping = {"Actor": "global_pool", "Rollout": "rollout_pool"}
    critic_enable = _get(data, "critic.enable")
    estimator = _get(data, "algorithm.adv_estimator", "gae")
    if critic_enable is True or (critic_enable is None and estimator == "gae"):
        mapping["Critic"] = "global_pool"
    if _get(data, "algorithm.use_kl_in_reward") or _get(
        data, "actor_rollout_ref.actor.use_kl_loss"
    ):
        mapping["RefPolicy"] = "global_pool"
    if _get(data, "reward_model.enable"):
        mapping["RewardModel"] = "global_pool"
    return pools, mapping


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
        sizes = resolve_ref(sizes, data)
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
    return pools, {str(k): resolve_ref(v, data) for k, v in mapping.items()}


def layout_pools(
    pools: Mapping[str, list[int]], per_node: int
) -> tuple[dict[str, tuple[int, ...]], int]:
    """Lay pools out on consecutive disjoint GPUs; returns (ranks per pool, nodes used).

    Raises:
        ValueError: a pool entry asks for more GPUs than a node has.
    """
    node, used = 0, 0
    placed: dict[str, tuple[int, ...]] = {}
    for pool, sizes in pools.items():
        ranks: list[int] = []
        for count in sizes:
            if count > per_node:
                raise ValueError(f"asks for {count} GPUs on one node, which has {per_node}")
            if used + count > per_node:
                node, used = node + 1, 0
            ranks.extend(range(node * per_node + used, node * per_node + used + count))
            used += count
        placed[pool] = tuple(ranks)
    return placed, node + 1 if used else node


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
    explicit = "resource_pool_spec" in data
    pools, mapping = _explicit_pools(data, file) if explicit else _plain_pools(data, file)
    given = _get(data, "trainer.n_gpus_per_node")
    per_node = (
        positive_int(given, field="trainer.n_gpus_per_node", file=file)
        if given is not None
        else max(max(sizes) for sizes in pools.values())
    )
    try:
        placed, nodes = layout_pools(pools, per_node)
    except ValueError as exc:
        bad = next(p for p, sizes in pools.items() if max(sizes) > per_node)
        raise ConfigError(
            str(exc), field=f"resource_pool_spec.{bad}", value=pools[bad], file=file
        ) from None
    cluster = Cluster(nodes=max(1, nodes), gpus_per_node=per_node)
    tp = positive_int(_get(data, _TP_FIELD, 1), field=_TP_FIELD, file=file)
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
            per_worker = tp if name == "actor_infer" else 1
            layout_field = _TP_FIELD if name == "actor_infer" and tp > 1 else field
            check_worker_layout(name, devices, per_worker, cluster, file, field=layout_field)
            roles[name] = gpu_role(devices, per_worker, name)
    for name, verl_name in (("actor_train", "Actor"), ("actor_infer", "Rollout")):
        if name not in roles:
            raise ConfigError(
                f"maps no {verl_name} (or ActorRollout) role; rlplex's step needs both",
                field="mapping" if explicit else "trainer",
                file=file,
            )
    async_rollout = not explicit and "rollout_pool" in pools
    native = {
        "cluster": cluster.model_dump(),
        "roles": roles,
        "pipeline": default_pipeline(
            roles, "async" if async_rollout else "sync", int(async_rollout)
        ),
    }
    return apply_costs(native, costs, costs_file)
