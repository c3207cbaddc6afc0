"""Where the pipelines' roles live: setup functions and ready cluster configs.

The executor needs, per role, a setup function run once on each worker
(:func:`role_setups`), and a :class:`~rlplex.Config` with the cluster, the
roles' device sets and their state sizes for the planner
(:func:`cluster_config`). Three layouts cover the tests and the demo:

- ``colocated``: every GPU role on the same logical GPUs; the GPU is too small
  for all states at once, so the planner inserts offloads and reloads;
- ``split``: one logical GPU per role, no offloads;
- ``async``: like ``split`` (async needs the rollout on its own devices), with
  generation one step ahead.

State sizes are the planner's budget in GB per device (the tiny model's real
bytes are far smaller); only their ratios to ``gpu_memory_gb`` matter.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from rlplex.config import Config
from rlplex.dag.pipeline import Pipeline
from rlplex.pipelines.config import RLConfig
from rlplex.resources.cluster import DRIVER, Cluster, Role

Layout = Literal["colocated", "split", "async"]

TRAIN_STATES = {"weights": 1.0, "optimizer": 2.0, "grads": 1.0}
"""actor_train / critic: GB per device (fp32 AdamW moments are twice the weights)."""
INFER_STATES = {"weights": 1.0, "kv_cache": 1.0}
"""actor_infer: GB per device."""
REF_STATES = {"weights": 1.0}
"""reference: GB per device."""


def role_setups(cfg: RLConfig) -> dict[str, Callable[[Any], Any]]:
    """Role name -> ``setup(info) -> state`` (picklable partials of module functions)."""
    from rlplex.pipelines import stages as s

    out: dict[str, Callable[[Any], Any]] = {
        "actor_train": partial(s.setup_policy, cfg),
        "actor_infer": partial(s.setup_rollout, cfg),
        "reference": partial(s.setup_reference, cfg),
        "rewards": partial(s.setup_rewards, cfg),
        DRIVER: partial(s.setup_driver, cfg),
    }
    if cfg.algorithm == "ppo":
        out["critic"] = partial(s.setup_critic, cfg)
    return out


def cluster_config(
    pipeline: Pipeline,
    layout: Layout = "colocated",
    *,
    gpu_memory_gb: float = 5.0,
    host_gb_per_s: float = 25.0,
    reward_workers: int = 1,
    scale_gb: float = 1.0,
    states: dict[str, dict[str, float]] | None = None,
) -> Config:
    """A one-node config placing the pipeline's roles as ``layout`` says.

    Colocated on one GPU of ``gpu_memory_gb`` (default 5 GB against 4 GB of
    actor_train states, 2 of actor_infer, 1 of reference, 4 of a critic), the
    planner must offload and reload to fit. ``scale_gb`` multiplies every
    size, memory included (the demo passes the tiny model's real weight size,
    so that predicted transfer times are the real ones). ``states`` replaces
    the ratios of the roles it names with GB per device (the GPU bench sizes
    them from the model and batch; ``scale_gb`` still sets the memory).
    """
    used = set(pipeline.roles_used())
    gpu_roles = [r for r in ("actor_train", "actor_infer", "reference", "critic") if r in used]
    ratios = {
        "actor_train": TRAIN_STATES,
        "critic": TRAIN_STATES,
        "actor_infer": INFER_STATES,
        "reference": REF_STATES,
    }
    sized = {r: {k: v * scale_gb for k, v in ratios[r].items()} for r in gpu_roles}
    sized.update({r: dict(v) for r, v in (states or {}).items() if r in sized})
    if layout == "colocated":
        devices = {r: (0,) for r in gpu_roles}
    else:
        devices = {r: (i,) for i, r in enumerate(gpu_roles)}
    gpus = max(d for ds in devices.values() for d in ds) + 1
    roles = {
        r: Role(
            name=r,
            devices=devices[r],
            world_size=1,
            states=sized[r],
        )
        for r in gpu_roles
    }
    if "rewards" in used:
        roles["rewards"] = Role(name="rewards", world_size=reward_workers)
    if layout == "async" and pipeline.mode != "async":
        pipeline = pipeline.model_copy(update={"mode": "async", "max_staleness": 1})
    pipeline.check([*roles, DRIVER])
    cluster = Cluster(
        nodes=1,
        gpus_per_node=gpus,
        gpu_memory_gb=gpu_memory_gb * scale_gb,
        host_gb_per_s=host_gb_per_s,
    )
    return Config(cluster=cluster, roles=roles, pipeline=pipeline, source=f"rlplex:{layout}")


def native_config(config: Config) -> dict[str, Any]:
    """``config`` (one of :func:`cluster_config`'s) as a native config document.

    What ``rlplex calibrate``, ``plan`` and ``replay`` read from a file: a pipeline
    built in Python (a measured run's stage seconds, say) written next to its record
    so that the command line can fit and replay it. Stage callables are not written
    (the file plans; it does not run)."""
    cluster = config.cluster
    native_cluster: dict[str, Any] = {
        "nodes": cluster.nodes,
        "gpus_per_node": cluster.gpus_per_node,
        "gpu_memory_gb": cluster.gpu_memory_gb,
        "host_gb_per_s": cluster.host_gb_per_s,
        "device_copy_gb_per_s": cluster.device_copy_gb_per_s,
    }
    if cluster.dispatch_s:
        native_cluster["dispatch_s"] = cluster.dispatch_s
    roles: dict[str, Any] = {}
    for name, role in config.roles.items():
        entry: dict[str, Any] = (
            {"devices": list(role.devices)} if role.devices else {"world_size": role.world_size}
        )
        if role.states:
            entry["states"] = dict(role.states)
        roles[name] = entry
    stages: dict[str, Any] = {}
    for stage in config.pipeline.stages:
        if stage.is_weight_sync:
            entry = {"kind": "weight_sync", "from": stage.from_role, "to": stage.to_role}
        else:
            entry = {"role": stage.role}
        if stage.seconds is not None:
            entry["seconds"] = stage.seconds
        if stage.memory_gb:
            entry["memory_gb"] = stage.memory_gb
        if stage.after:
            entry["after"] = list(stage.after)
        if stage.needs is not None:
            entry["needs"] = list(stage.needs)
        stages[stage.name] = entry
    pipeline: dict[str, Any] = {"mode": config.pipeline.mode, "stages": stages}
    if config.pipeline.mode == "async":
        pipeline["max_staleness"] = config.pipeline.max_staleness
    return {"cluster": native_cluster, "roles": roles, "pipeline": pipeline}
