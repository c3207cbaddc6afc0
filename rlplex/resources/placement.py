"""Checks that a role's workers tile its devices: the rules every framework shares.

A role of ``world_size`` workers, each driving ``num_gpus_per_worker`` GPUs,
must cover its device list exactly, and no worker may straddle two nodes (a
tensor-parallel group talks over NVLink, not the network). The native loader
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
    """Check that workers of ``num_gpus_per_worker`` GPUs tile ``devices`` within nodes.

    Args:
        name: the role, for the default field path ``roles.NAME.num_gpus_per_worker``.
        devices: the role's global GPU ranks, in worker order.
        num_gpus_per_worker: GPUs per worker.
        cluster: gives the node of each rank.
        file: the file the role came from, for the message.
        field: the field path to blame instead of the native one.

    Raises:
        ConfigError: the count does not divide, or a worker spans two nodes.
    """
    field = field or f"roles.{name}.num_gpus_per_worker"
    if len(devices) % num_gpus_per_worker:
        raise ConfigError(
            f"does not divide the role's {len(devices)} devices",
            field=field,
            value=num_gpus_per_worker,
            file=file,
        )
    for start in range(0, len(devices), num_gpus_per_worker):
        worker = devices[start : start + num_gpus_per_worker]
        nodes = sorted({cluster.node_of(d) for d in worker})
        if len(nodes) > 1:
            raise ConfigError(
                f"worker {start // num_gpus_per_worker} would span nodes {nodes}"
                f" (GPUs {list(worker)}); a worker never spans nodes",
                field=field,
                value=num_gpus_per_worker,
                file=file,
            )
