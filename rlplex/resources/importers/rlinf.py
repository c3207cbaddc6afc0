"""Read an RLinf config: ``cluster.num_nodes`` and ``cluster.component_placement``.

RLinf (RLinf/RLinf) places components with one mapping::

    cluster:
      num_nodes: 2
      component_placement:
        actor,rollout: all        # comma-joined keys share one placement
        inference: 0-3,8-11       # global accelerator ranks, inclusive ranges
        reward: 0-1:0-3           # resource ranks : process ranks

RLinf's rules, followed here:

- A key may join several components with commas (spaces allowed); a
  component may appear under one key only.
- A placement is ``all`` or comma-separated segments ``RANKS[:PROCS]`` with
  ``RANKS`` and ``PROCS`` each a rank ``3`` or an inclusive range ``0-3``.
  The node-group form ``{node_group: ..., placement: ...}`` is read for the
  default accelerator group.
- A resource rank listed twice, a descending range (``7-4``) or a rank outside
  the cluster is an error. Process ranks, when given, must be continuous from
  0 and each used once, and in each segment one count must be a multiple of
  the other. A process driving k GPUs makes ``num_gpus_per_worker = k``
  (the same for every segment); several processes on one GPU count as one
  rlplex worker per GPU.
- GPUs per node: ``cluster.num_gpus_per_node`` (default 8). Native cluster
  fields (``gpu_memory_gb`` ...) may be given in the same block.
- The rollout engine's ``rollout.tensor_parallel_size`` x
  ``rollout.pipeline_parallel_size`` is the rollout's GPUs per worker, unless
  its placement gives process ranks.

Components map to rlplex roles: ``actor`` -> ``actor_train``, ``rollout`` ->
``actor_infer``, ``inference`` -> ``inference`` (old log-probs, synced from the
actor), ``critic`` -> ``critic``, ``reference`` -> ``reference``, ``reward`` ->
``reward`` (rule-based in RLinf's reasoning runs: no GPU state by default);
others (``env``, ``agent`` ...) keep their name and hold no state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.importers.common import (
    DEFAULT_STATES,
    apply_costs,
    default_pipeline,
    positive_int,
    resolve_ref,
)
from rlplex.resources.placement import check_worker_layout

COMPONENT_ROLES = {
    "actor": "actor_train",
    "rollout": "actor_infer",
    "inference": "inference",
    "critic": "critic",
    "reference": "reference",
    "reward": "reward",
}
"""RLinf component name -> rlplex role name; other components keep their name."""

_NATIVE_CLUSTER_KEYS = (
    "gpu_memory_gb",
    "host_gb_per_s",
    "device_copy_gb_per_s",
    "network_gb_per_s",
)
_RANKS = re.compile(r"^\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?$")


def _ranks(text: str, what: str) -> list[int]:
    match = _RANKS.match(text)
    if not match:
        raise ValueError(f"cannot parse {what} {text.strip()!r}; expected N or N-M")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise ValueError(
            f"descending {what} range {text.strip()!r}: the start must not exceed the end"
        )
    from rlplex.resources.devices import MAX_GPUS

    if last >= MAX_GPUS:  # checked before the range is built
        raise ValueError(
            f"{what} {text.strip()!r} reaches rank {last}, past the largest cluster rlplex"
            f" plans ({MAX_GPUS:,} GPUs)"
        )
    return list(range(first, last + 1))


def parse_placement(value: Any, num_gpus: int) -> tuple[tuple[int, ...], int]:
    """Parse one RLinf placement into (global GPU ranks, GPUs per worker).

    Raises:
        ValueError: with RLinf's reason (duplicate rank, descending range,
            non-continuous process ranks, incompatible counts, out of range).
    """
    if isinstance(value, bool):
        raise ValueError("a placement is 'all', a rank, or ranges like 0-3,8-11")
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a placement is 'all', a rank, or ranges like 0-3,8-11")
    if value.strip().lower() == "all":
        return tuple(range(num_gpus)), 1
    devices: list[int] = []
    procs: list[int] = []
    per_worker: set[int] = set()
    with_procs = None
    for segment in value.split(","):
        resource, sep, process = segment.partition(":")
        ranks = _ranks(resource, "resource rank")
        for rank in ranks:
            if rank in devices:
                raise ValueError(f"resource rank {rank} is listed twice")
            if rank >= num_gpus:
                raise ValueError(
                    f"resource rank {rank} is outside the cluster, which has GPUs 0-{num_gpus - 1}"
                )
        devices.extend(ranks)
        if with_procs is not None and with_procs != bool(sep):
            raise ValueError("give process ranks for every segment or for none")
        with_procs = bool(sep)
        if sep:
            segment_procs = _ranks(process, "process rank")
            big, small = max(len(ranks), len(segment_procs)), min(len(ranks), len(segment_procs))
            if big % small:
                raise ValueError(
                    f"segment {segment.strip()!r}: {len(ranks)} resources and"
                    f" {len(segment_procs)} processes; one count must be a multiple of the other"
                )
            procs.extend(segment_procs)
            per_worker.add(max(1, len(ranks) // len(segment_procs)))
    if procs:
        if sorted(procs) != list(range(len(procs))):
            raise ValueError(
                f"process ranks must be continuous from 0 to {len(procs) - 1}, each once"
                f" (got {procs})"
            )
        if len(per_worker) > 1:
            raise ValueError("every segment must give each process the same number of GPUs")
    return tuple(devices), per_worker.pop() if per_worker else 1


def _rollout_gpus(data: Mapping[str, Any], file: str) -> int:
    """GPUs one rollout engine drives: tensor x pipeline parallel size."""
    rollout = data.get("rollout")
    if not isinstance(rollout, dict):
        return 1
    size = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        value = resolve_ref(rollout.get(key, 1), data)
        size *= positive_int(value, field=f"rollout.{key}", file=file)
    return size


def _components(key: Any) -> list[str]:
    return [part.strip() for part in str(key).split(",") if part.strip()]


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert an RLinf config (as parsed YAML) into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the RLinf field path, e.g.
            ``cluster.component_placement.actor,rollout``.
    """
    block = data.get("cluster")
    if not isinstance(block, dict):
        raise ConfigError("must be a mapping", field="cluster", value=block, file=file)
    nodes = positive_int(
        resolve_ref(block.get("num_nodes"), data), field="cluster.num_nodes", file=file
    )
    per_node = positive_int(
        resolve_ref(block.get("num_gpus_per_node", 8), data),
        field="cluster.num_gpus_per_node",
        file=file,
    )
    native_cluster = {k: block[k] for k in _NATIVE_CLUSTER_KEYS if k in block}
    cluster = Cluster(nodes=nodes, gpus_per_node=per_node)
    placement = block.get("component_placement")
    if not isinstance(placement, dict) or not placement:
        raise ConfigError(
            "must map components to placements",
            field="cluster.component_placement",
            value=placement,
            file=file,
        )
    roles: dict[str, dict[str, Any]] = {}
    owner: dict[str, str] = {}
    for key, value in placement.items():
        field = f"cluster.component_placement.{key}"
        if isinstance(value, dict):
            group = value.get("node_group")
            if block.get("node_groups") or group not in (None, "cluster"):
                raise ConfigError(
                    "node groups other than the default accelerator group are not supported",
                    field=f"{field}.node_group",
                    value=group,
                    file=file,
                )
            field, value = f"{field}.placement", value.get("placement")
        components = _components(key)
        if not components:
            raise ConfigError("names no component", field=field, value=key, file=file)
        try:
            devices, per_worker = parse_placement(resolve_ref(value, data), cluster.num_gpus)
        except ValueError as exc:
            raise ConfigError(str(exc), field=field, value=value, file=file) from None
        for component in components:
            if component in owner:
                raise ConfigError(
                    f"component {component!r} is already placed by"
                    f" 'cluster.component_placement.{owner[component]}'",
                    field=field,
                    file=file,
                )
            owner[component] = str(key)
            name = COMPONENT_ROLES.get(component, component)
            layout_field = field
            if component == "rollout" and ":" not in str(value) and _rollout_gpus(data, file) > 1:
                per_worker, layout_field = _rollout_gpus(data, file), "rollout.tensor_parallel_size"
            check_worker_layout(name, devices, per_worker, cluster, file, field=layout_field)
            states = {} if name == "reward" else DEFAULT_STATES.get(name, {})
            roles[name] = {
                "devices": list(devices),
                "num_gpus_per_worker": per_worker,
                "states": dict(states),
            }
    for component in ("actor", "rollout"):
        if component not in owner:
            raise ConfigError(
                f"has no {component!r} component; rlplex's step needs 'actor' and 'rollout'",
                field="cluster.component_placement",
                file=file,
            )
    native = {
        "cluster": {**cluster.model_dump(), **native_cluster},
        "roles": roles,
        "pipeline": default_pipeline(roles),
    }
    return apply_costs(native, costs, costs_file)
