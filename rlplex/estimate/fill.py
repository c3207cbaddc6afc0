"""Filling a config's missing figures from the estimate, and saying which ones were filled.

The config loader calls :func:`fill_cluster` on the raw ``cluster`` mapping
(a ``gpu`` preset fills the memory and copy speeds the file does not give) and
:func:`fill_estimates` once roles and pipeline are built: a stage without
``seconds`` (or ``memory_gb``), a GPU role without ``states``, gets the
estimate. Given figures always win. Every filled field's dotted path is
returned, so that ``show`` and ``plan`` mark it as estimated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlplex.dag.pipeline import Pipeline
from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster, Role
from rlplex.resources.inputs import Efficiency, Workload

FILLED_CLUSTER_FIELDS = (
    "gpu_memory_gb",
    "host_gb_per_s",
    "device_copy_gb_per_s",
    "network_gb_per_s",
    "host_memory_gb",
    "nvlink_gpus",
)


def fill_cluster(raw: Any, efficiency: Efficiency | None, file: str | None) -> tuple[Any, set[str]]:
    """The raw cluster mapping with the GPU preset's figures where the file gives none.

    ``gpu_memory_gb``: the preset's memory; ``host_gb_per_s``: the host link x
    ``efficiency.host_copy``; ``device_copy_gb_per_s``: NVLink x ``link``;
    ``network_gb_per_s``: NVLink on one node (or one multi-node NVLink fabric,
    ``nvlink_gpus``), the per-GPU network across them, x ``link``; ``nvlink_gpus``:
    the preset's fabric where it spans nodes; ``host_memory_gb``: the usual node's
    host memory per GPU x ``gpus_per_node``.
    """
    if not isinstance(raw, dict) or not raw.get("gpu"):
        return raw, set()
    from rlplex.estimate.context import efficiency_value
    from rlplex.estimate.specs import gpu_spec

    name = raw["gpu"]
    if not isinstance(name, str):
        raise ConfigError("must be a GPU preset name", field="cluster.gpu", value=name, file=file)
    gpu = gpu_spec(name, file=file)
    host = efficiency_value(efficiency, "host_copy")
    link = efficiency_value(efficiency, "link")
    nodes = raw.get("nodes", 1)
    fabric = raw.get("nvlink_gpus", gpu.nvlink_gpus)
    one_fabric = nodes == 1 or (
        _count(fabric) and _count(nodes) and _count(raw.get("gpus_per_node", 8))
        and nodes * raw.get("gpus_per_node", 8) <= fabric
    )  # fmt: skip
    network = gpu.intra_node_gb_per_s if one_fabric else gpu.inter_node_gb_per_s
    preset = {
        "gpu_memory_gb": gpu.memory_gb,
        "host_gb_per_s": round(gpu.host_gb_per_s * host, 6),
        "device_copy_gb_per_s": round(gpu.intra_node_gb_per_s * link, 6),
        "network_gb_per_s": round(network * link, 6),
        "host_memory_gb": _node_host_memory(gpu.node_host_memory_gb, gpu.node_gpus, raw),
    }
    if gpu.nvlink_gpus is not None:
        preset["nvlink_gpus"] = gpu.nvlink_gpus
    filled = {k: v for k, v in preset.items() if k not in raw}
    return {**raw, **filled}, {f"cluster.{k}" for k in filled}


def _count(value: Any) -> bool:
    """A positive int (the cluster's own validation names anything else)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _node_host_memory(node_gb: float, node_gpus: int, raw: dict) -> float:
    """The preset node's host memory, scaled to this cluster's GPUs per node."""
    per_node = raw.get("gpus_per_node", 8)
    if not isinstance(per_node, int) or isinstance(per_node, bool) or per_node < 1:
        return float(node_gb)  # the cluster's own validation names the bad figure
    return round(float(node_gb) * per_node / node_gpus, 6)


def estimator_hint(
    cluster: Cluster, roles: Mapping[str, Role], model: str | None, workload: Workload | None
) -> str:
    """What a config lacks for the estimator, as a clause for error messages."""
    from rlplex.estimate.context import lacking

    missing = lacking(cluster, roles, model, workload)
    return "or give " + ", ".join(missing) + " to estimate it" if missing else ""


def fill_estimates(
    *,
    cluster: Cluster,
    roles: dict[str, Role],
    pipeline: Pipeline,
    model: str | None,
    workload: Workload | None,
    efficiency: Efficiency | None,
    given_states: set[str],
    given_memory: set[str] | None,
    file: str | None,
    base_dir: Path | None,
) -> tuple[dict[str, Role], Pipeline, set[str], tuple[str, ...]]:
    """Fill missing stage seconds/memory and role states from the estimate.

    Args:
        given_states: GPU roles whose file gives ``states`` (kept as given).
        given_memory: stages whose file gives ``memory_gb``; None (a Python
            pipeline) keeps every stage's memory as built.

    Returns:
        The roles and pipeline with estimates filled, the dotted paths filled,
        and the estimator's warnings.

    Raises:
        ConfigError: a stage without seconds cannot be estimated (a CPU stage),
            or the estimator rejects an input.
    """
    from rlplex.estimate.context import ESTIMATED_KINDS, Inputs
    from rlplex.estimate.estimator import estimate

    needs_seconds = [s for s in pipeline.stages if s.seconds is None and not s.is_weight_sync]
    needs_states = [n for n, r in roles.items() if r.is_gpu and n not in given_states]
    result = estimate(
        Inputs(cluster=cluster, roles=roles, pipeline=pipeline, model=model,
               workload=workload, efficiency=efficiency, file=file, base_dir=base_dir)
    )  # fmt: skip
    filled: set[str] = set()
    new_roles = dict(roles)
    for name in needs_states:
        if name not in result.roles:
            continue
        # A state the file puts in host memory (host_states) is not on the GPU as well.
        states = {
            k: floor_to(v, 3)
            for k, v in result.roles[name].states.items()
            if k not in roles[name].host_states
        }
        new_roles[name] = roles[name].model_copy(update={"states": states})
        filled.add(f"roles.{name}.states")
    # A CPU optimizer's host memory is estimated even where the file gives the GPU states
    # (unless they, or the file's host_states, hold the optimizer themselves).
    for name, est in result.roles.items():
        given = new_roles[name].host_states
        host = {
            k: floor_to(v, 3)
            for k, v in est.host_states.items()
            if k not in new_roles[name].states and k not in given
        }
        if host:
            new_roles[name] = new_roles[name].model_copy(update={"host_states": {**given, **host}})
            filled.update(f"roles.{name}.host_states.{k}" for k in host)
    stages = []
    for stage in pipeline.stages:
        est = result.stages.get(stage.name)
        update: dict[str, Any] = {}
        if stage.seconds is None and not stage.is_weight_sync:
            if est is None or est.seconds is None:
                raise ConfigError(
                    "is required (the stage's duration): a stage on a CPU role or the driver,"
                    " or with a name the estimator does not know, cannot be estimated",
                    field=f"pipeline.stages.{stage.name}.seconds",
                    file=file,
                )
            update["seconds"] = round(est.seconds, 6)
            filled.add(f"pipeline.stages.{stage.name}.seconds")
            role = new_roles.get(stage.role or "")
            if stage.at_devices is None and role is not None and role.is_gpu:
                # Estimated on these devices: not to be rescaled from the file's device count.
                # A role placed by the search (devices: auto) is estimated as if on the whole
                # cluster (EstimateContext.devices); left unpinned, a file that gave the role
                # devices before --set roles.R.devices=auto scaled it from those instead.
                update["at_devices"] = len(role.devices) or cluster.num_gpus
        if stage.is_weight_sync and stage.seconds is None and est is not None:
            # More than the link rule: a colocated sync also reshards and wakes the engine, a
            # disjoint one sends every engine device the whole model (estimate_weight_sync).
            update["seconds"] = round(est.seconds or 0.0, 6)
            filled.add(f"pipeline.stages.{stage.name}.seconds")
        if (
            given_memory is not None
            and stage.name not in given_memory
            and est is not None
            and est.kind in ESTIMATED_KINDS
            and (stage in needs_seconds or stage.role in needs_states)
        ):
            update["memory_gb"] = floor_to(est.memory_gb, 4)
            filled.add(f"pipeline.stages.{stage.name}.memory_gb")
        stages.append(stage.model_copy(update=update) if update else stage)
    new_pipeline = pipeline.model_copy(update={"stages": tuple(stages)})
    check_stages_fit(cluster, new_roles, new_pipeline, filled, file)
    return new_roles, new_pipeline, filled, result.warnings


def check_stages_fit(
    cluster: Cluster,
    roles: Mapping[str, Role],
    pipeline: Pipeline,
    filled: set[str],
    file: str | None,
) -> None:
    """A stage whose estimated needs exceed a GPU cannot run even with every other role offloaded.

    Only stages with an estimated figure (their memory or their role's states)
    are checked here, so that the error names the config file, the field and
    the value; the planner reports the rest.

    Raises:
        ConfigError: naming ``pipeline.stages.S.memory_gb`` (activations the
            largest part) or ``roles.R.states``.
    """
    from rlplex.estimate.assumptions import (
        ACTIVATION_KNOBS,
        activation_remedy,
        group_factor,
        group_remedy,
    )

    cap = cluster.gpu_memory_gb
    for stage in pipeline.stages:
        role = roles.get(stage.role or "")
        if role is None or not role.is_gpu or stage.is_weight_sync:
            continue
        memory_path = f"pipeline.stages.{stage.name}.memory_gb"
        states_path = f"roles.{role.name}.states"
        if memory_path not in filled and states_path not in filled:
            continue
        needs = stage.needs if stage.needs is not None else tuple(role.states)
        parts = {k: v for k, v in role.states.items() if k in needs}
        total = sum(parts.values()) + stage.memory_gb
        if total <= cap + 1e-9:
            continue
        detail = " + ".join(f"{k} {v:.2f}" for k, v in parts.items())
        detail += f" + activations {stage.memory_gb:.2f}"
        if stage.memory_gb >= max(parts.values(), default=0.0):
            field = memory_path
            remedy = activation_remedy(role, stage)
        else:
            field = states_path
            par = role.parallel
            sharded = par is not None and (par.fsdp or par.zero >= 3)
            if sharded and par is not None and par.shard_group is not None:
                remedy = group_remedy(role, group_factor(role, parts, stage.memory_gb, cap))
            elif sharded:
                remedy = f"give roles.{role.name} more GPUs (its states are sharded over them)"
            else:
                remedy = f"shard roles.{role.name} (parallel: fsdp: true or zero: 3)"
            remedy += f", or lower the activations ({ACTIVATION_KNOBS})"
        raise ConfigError(
            f"stage {stage.name!r} needs {total:.2f} GB per GPU ({detail}, estimated) even"
            f" with every other role offloaded, but a GPU has {cap:g} GB; {remedy}",
            field=field,
            value=round(total, 2),
            file=file,
        )


def floor_to(value: float, digits: int) -> float:
    """``value`` rounded down to ``digits`` decimals: the states and stage memory a config is
    filled with, so that parts estimated to fill a GPU exactly (an engine at
    ``gpu_memory_utilization`` 1, whose KV cache takes what the rest leaves) still sum within
    it (rounded to the nearest, they overflowed it by a fraction of a MB)."""
    scale = 10**digits
    return math.floor(value * scale + 1e-9) / scale


def estimator_lacks(native: Mapping[str, Any]) -> list[str]:
    """Of ``model``, ``workload``, ``workload.prompt_tokens`` and ``cluster.gpu``, those an
    imported file's native form does not give (empty: the estimator can price it)."""
    cluster = native.get("cluster") if isinstance(native.get("cluster"), dict) else {}
    load = native.get("workload")
    return [
        name
        for name, present in (
            ("model", native.get("model")),
            ("workload", load),
            ("workload.prompt_tokens", not isinstance(load, dict) or load.get("prompt_tokens")),
            ("cluster.gpu", cluster.get("gpu")),
        )
        if not present
    ]


def use_estimates(
    native: dict[str, Any], costs: Mapping[str, Any] | None
) -> tuple[dict, str | None]:
    """An imported config's default costs replaced by estimates where the estimator can work.

    Importers fill every stage's ``seconds``/``memory_gb`` and every GPU role's
    ``states`` with this module's 7B defaults (a ROLL, RLinf, verl or NeMo RL file says
    where roles live, not what a step costs). When the file (or ``--set``) names
    a ``model``, a ``workload`` and ``cluster.gpu``, those defaults are dropped so
    that the estimator fills them from the model instead; figures a ``--costs``
    file gives are kept. Otherwise the defaults stay, and the second value is the
    warning that says so and what is missing (never a silent default).
    """
    from rlplex.estimate.context import MISSING_HINTS

    costs = costs or {}
    missing = estimator_lacks(native)
    if "workload.prompt_tokens" in missing:
        # What the file gave of its trajectories waits for the rest (--set); a workload
        # without its prompt cannot be checked, so the plan goes on without it.
        native = {k: v for k, v in native.items() if k != "workload"}
    stages = dict((native.get("pipeline") or {}).get("stages") or {})
    cost_stages = costs.get("stages") or {}
    cost_states = costs.get("states") or {}
    if missing:
        uncovered = [n for n, b in stages.items() if b.get("kind") != "weight_sync"
                     and "seconds" not in cost_stages.get(n, {})]  # fmt: skip
        if not uncovered:
            return native, None
        return native, (
            "stage times and state sizes are rlplex's defaults for a 7B model"
            " (docs/importers.md), not estimates: the config lacks "
            + ", ".join(missing)
            + f" (give them with --set, e.g. {MISSING_HINTS[missing[0]]}, or a --costs FILE)"
        )
    for name, body in stages.items():
        if not _estimable(name, body, native.get("roles") or {}):
            continue  # other CPU and driver stages keep their figures: no formula for them
        given = cost_stages.get(name, {})
        stages[name] = {k: v for k, v in body.items()
                        if k not in ("seconds", "memory_gb") or k in given}  # fmt: skip
    roles = {}
    for name, body in (native.get("roles") or {}).items():
        if isinstance(body, dict) and "states" in body and body.get("devices") is not None:
            given = cost_states.get(name)
            body = {k: v for k, v in body.items() if k != "states"}
            if given:
                body["states"] = dict(given)
        roles[name] = body
    pipeline = {**(native.get("pipeline") or {}), "stages": stages}
    return {**native, "roles": roles, "pipeline": pipeline}, None


def _estimable(name: str, body: Mapping[str, Any], roles: Mapping[str, Any]) -> bool:
    """Whether the estimator computes stage ``name``: train, log-prob, value and generate on
    GPUs, and a rule reward on CPUs or the driver (its per-sequence controller work)."""
    from rlplex.dag.stage import Stage
    from rlplex.estimate.context import ESTIMATED_KINDS, is_rule_reward, stage_kind
    from rlplex.resources.cluster import Role

    role_body = roles.get(body.get("role") or "")
    on_gpu = isinstance(role_body, dict) and role_body.get("devices") is not None
    try:
        stage = Stage.model_validate({"name": name, **body})
    except ValueError:
        return False  # reported by the config check with its field
    role = Role(name=str(body.get("role")), devices=(0,)) if on_gpu else None
    return stage_kind(stage, role) in ESTIMATED_KINDS or is_rule_reward(stage, role)


def at_staleness(config: Any, k: int) -> Any:
    """``config`` (a :class:`rlplex.config.Config`) with ``max_staleness`` k, its estimated
    generation seconds priced again for k: generation k steps ahead shares one tail among k
    steps, and a partial-rollout engine streams only when the pipeline is async (the
    estimate reads the staleness; a placement or what-if search that varies it must too)."""
    from rlplex.estimate.context import stage_kind
    from rlplex.estimate.estimator import estimate_config

    pipeline = config.pipeline.model_copy(update={"max_staleness": k})
    cfg = config.model_copy(update={"pipeline": pipeline})
    again = [
        s.name
        for s in pipeline.stages
        if cfg.is_estimated(f"pipeline.stages.{s.name}.seconds")
        and stage_kind(s, cfg.roles.get(s.role or "")) == "generate"
    ]
    # The engine holds k steps' requests, so an estimated KV cache is sized for k too, even
    # where the generation seconds are given (a record's, a costs file's).
    kv_roles = [
        n
        for n, r in cfg.roles.items()
        if cfg.is_estimated(f"roles.{n}.states") and "kv_cache" in r.states
    ]
    if (not again and not kv_roles) or config.pipeline.staleness == pipeline.staleness:
        return cfg
    est = estimate_config(cfg)
    stages = tuple(
        s.model_copy(update={"seconds": round(est.stages[s.name].seconds or 0.0, 6)})
        if s.name in again and s.name in est.stages
        else s
        for s in pipeline.stages
    )
    roles = {
        n: r.model_copy(
            update={
                "states": {**r.states, "kv_cache": floor_to(est.roles[n].states["kv_cache"], 3)}
            }
        )
        if n in kv_roles and n in est.roles and "kv_cache" in est.roles[n].states
        else r
        for n, r in cfg.roles.items()
    }
    return cfg.model_copy(
        update={"pipeline": pipeline.model_copy(update={"stages": stages}), "roles": roles}
    )


def estimates_placement(config: Any) -> bool:
    """Whether ``config`` (a :class:`rlplex.config.Config`) has a figure the estimator filled
    that depends on where its GPU roles are: a role's states, a stage's seconds or memory
    (what :func:`at_placement` estimates again)."""
    return any(p.startswith(("roles.", "pipeline.stages.")) for p in config.estimated)


def at_placement(config: Any, placement: Mapping[str, Any]) -> Any:
    """``config`` (a :class:`rlplex.config.Config`) with its GPU roles on ``placement`` and
    every figure the estimator filled estimated again there, as loading the file with
    ``--set roles.R.devices=...`` estimates it (given figures stay).

    A placement search scores candidates with the config's own figures, an estimated
    stage's seconds scaled from the devices it was estimated on; but a stage does not
    scale so (a decode step on weights and a fixed longest response takes as long on more
    replicas), and a role's states per GPU change with the GPUs its shards spread over. The
    search's best candidates are scored again on this, so that the placement ``plan
    --auto`` picks, and the period it reports, are what ``plan`` gives that placement.
    Returns ``config`` itself where nothing moves or nothing was estimated.

    Raises:
        ConfigError: an estimated figure does not fit on a GPU of the new placement.
    """
    moved = {
        n: tuple(sorted(placement[n]))
        for n, r in config.roles.items()
        if n in placement and tuple(sorted(r.devices)) != tuple(sorted(placement[n]))
    }
    estimated = frozenset(
        p for p in config.estimated if p.startswith(("roles.", "pipeline.stages."))
    )
    if not moved or not estimated:
        return config
    roles: dict[str, Role] = {}
    for name, role in config.roles.items():
        if name in placement:
            role = role.with_devices(tuple(placement[name]))
        update: dict[str, Any] = {}
        if config.is_estimated(f"roles.{name}.states"):
            update["states"] = {}
        host = {
            k: v
            for k, v in role.host_states.items()
            if not config.is_estimated(f"roles.{name}.host_states.{k}")
        }
        if host != role.host_states:
            update["host_states"] = host
        roles[name] = role.model_copy(update=update) if update else role
    stages = []
    for stage in config.pipeline.stages:
        update = {}
        if config.is_estimated(f"pipeline.stages.{stage.name}.seconds"):
            update.update(seconds=None, at_devices=None)
        if config.is_estimated(f"pipeline.stages.{stage.name}.memory_gb"):
            update["memory_gb"] = 0.0
        stages.append(stage.model_copy(update=update) if update else stage)
    pipeline = config.pipeline.model_copy(update={"stages": tuple(stages)})
    new_roles, new_pipeline, filled, _ = fill_estimates(
        cluster=config.cluster, roles=roles, pipeline=pipeline, model=config.model,
        workload=config.workload, efficiency=config.efficiency,
        given_states={n for n in roles if not config.is_estimated(f"roles.{n}.states")},
        given_memory={s.name for s in stages
                      if not config.is_estimated(f"pipeline.stages.{s.name}.memory_gb")},
        file=config.source,
        base_dir=Path(config.base_dir) if config.base_dir else None,
    )  # fmt: skip
    return config.model_copy(
        update={
            "roles": new_roles,
            "pipeline": new_pipeline,
            "estimated": frozenset((config.estimated - estimated) | filled),
        }
    )
