"""Checks that a role's workers tile its devices: the rules every framework shares.

A role of ``world_size`` workers, each driving ``num_gpus_per_worker`` GPUs,
must cover its device list exactly, and a worker stays inside one node (a
tensor-parallel group talks over NVLink, not the network), except that a
worker needing more GPUs than a node has (vLLM TP 16 on 8-GPU nodes, as ROLL
and verl run it) spans whole, consecutive nodes: its GPUs are every GPU of
``num_gpus_per_worker // gpus_per_node`` nodes in a row. The native loader
and every importer call :func:`check_worker_layout`, each with the field path
of its own file format, so the error points at the line the user wrote.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster


def check_worker_layout(
    name: str,
    devices: Sequence[int],
    num_gpus_per_worker: int,
    cluster: Cluster,
    file: str | None = None,
    *,
    field: str | None = None,
) -> None:
    """Check that workers of ``num_gpus_per_worker`` GPUs tile ``devices`` (see the module doc).

    Args:
        name: the role, for the default field path ``roles.NAME.num_gpus_per_worker``.
        devices: the role's global GPU ranks, in worker order.
        num_gpus_per_worker: GPUs per worker.
        cluster: gives the node of each rank.
        file: the file the role came from, for the message.
        field: the field path to blame instead of the native one.

    Raises:
        ConfigError: the count does not divide, a worker that fits in a node
            spans two, or a larger worker does not fill whole consecutive nodes.
    """
    field = field or f"roles.{name}.num_gpus_per_worker"
    if len(devices) % num_gpus_per_worker:
        raise ConfigError(
            f"does not divide the role's {len(devices)} devices",
            field=field,
            value=num_gpus_per_worker,
            file=file,
        )
    per_node = cluster.gpus_per_node
    for start in range(0, len(devices), num_gpus_per_worker):
        worker = devices[start : start + num_gpus_per_worker]
        nodes = sorted({cluster.node_of(d) for d in worker})
        if num_gpus_per_worker <= per_node:
            if len(nodes) > 1:
                raise ConfigError(
                    f"worker {start // num_gpus_per_worker} would span nodes {nodes}"
                    f" (GPUs {list(worker)}); a worker that fits in one node"
                    f" ({per_node} GPUs) must stay in it",
                    field=field,
                    value=num_gpus_per_worker,
                    file=file,
                )
            continue
        whole = set(range(nodes[0] * per_node, (nodes[-1] + 1) * per_node))
        if num_gpus_per_worker % per_node or set(worker) != whole:
            raise ConfigError(
                f"worker {start // num_gpus_per_worker} needs {num_gpus_per_worker} GPUs, more"
                f" than a node's {per_node}, so it must fill whole consecutive nodes"
                f" (got GPUs {list(worker)})",
                field=field,
                value=num_gpus_per_worker,
                file=file,
            )
