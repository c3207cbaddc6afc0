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
from rlplex.resources.cluster import Cluster, Role


def worker_layout_problem(
    devices: Sequence[int], num_gpus_per_worker: int, cluster: Cluster
) -> str | None:
    """Why workers of ``num_gpus_per_worker`` GPUs cannot tile ``devices`` (in worker order)
    on ``cluster``, or None when they can (the rules of the module doc). The placement search
    asks it of every candidate block; :func:`check_worker_layout` turns it into the error."""
    if len(devices) % num_gpus_per_worker:
        return f"does not divide the role's {len(devices)} devices"
    per_node = cluster.gpus_per_node
    per = num_gpus_per_worker
    # Consecutive ranks (every block the placement search tries) whose workers start aligned
    # fit without walking them one by one.
    first_rank = devices[0] if devices else 0
    consecutive = list(devices) == list(range(first_rank, first_rank + len(devices)))
    aligned = (per <= per_node and per_node % per == 0 and first_rank % per == 0) or (
        per % per_node == 0 and first_rank % per_node == 0
    )
    if consecutive and aligned:
        return None
    for start in range(0, len(devices), num_gpus_per_worker):
        worker = devices[start : start + num_gpus_per_worker]
        # Nodes hold consecutive ranks: the lowest and highest rank tell the nodes spanned.
        low, high = min(worker), max(worker)
        first, last = cluster.node_of(low), cluster.node_of(high)
        if num_gpus_per_worker <= per_node:
            if first != last:
                nodes = sorted({cluster.node_of(d) for d in worker})
                return (
                    f"worker {start // num_gpus_per_worker} would span nodes {nodes}"
                    f" (GPUs {list(worker)}); a worker that fits in one node"
                    f" ({per_node} GPUs) must stay in it"
                )
            continue
        whole = (last + 1 - first) * per_node == num_gpus_per_worker == len(set(worker))
        if num_gpus_per_worker % per_node or low % per_node or not whole:
            return (
                f"worker {start // num_gpus_per_worker} needs {num_gpus_per_worker} GPUs, more"
                f" than a node's {per_node}, so it must fill whole consecutive nodes"
                f" (got GPUs {list(worker)})"
            )
    return None


def role_parallel_sizes(role: Role, generates: bool) -> tuple[int, int, int]:
    """(tp, pp, ep) of a role: its ``parallel`` fields, tensor parallel defaulting to the
    worker's GPUs for an inference engine (``generates``: it runs a generation stage) and to 1
    otherwise. The estimator lays roles out with it and the placement search sizes them."""
    par = role.parallel
    tp = par.tp if par is not None and par.tp else (role.num_gpus_per_worker if generates else 1)
    pp = par.pp if par is not None else 1
    ep = par.ep if par is not None else 1
    return tp, pp, ep


def parallel_layout_problem(
    devices: int, tp: int, pp: int, ep: int, sp: int = 1
) -> tuple[str, str] | None:
    """Why a role of ``devices`` GPUs cannot run tensor parallel ``tp``, pipeline parallel
    ``pp``, expert parallel ``ep`` and sequence (Ulysses or context) parallel ``sp``, as (the
    field under ``roles.R.``, the reason), or None when it can: tp x pp must divide the
    devices, ep the devices of a pipeline stage, and sp the data-parallel ranks (verl's
    Ulysses groups and Megatron's context-parallel groups are cut from them). The loader
    raises it for the sizes a config gives, the estimator for its own devices; the placement
    search skips a candidate block it names."""
    if devices % (tp * pp):
        return "parallel", f"tp x pp = {tp * pp} does not divide the role's {devices} devices"
    if sp > 1 and (devices // (tp * pp)) % sp:
        return (
            "parallel.sp",
            f"sequence-parallel size {sp} does not divide the role's"
            f" {devices // (tp * pp)} data-parallel ranks (devices / (tp x pp))",
        )
    ranks = devices // pp
    if ep > 1 and ranks % ep:
        return (
            "parallel.ep",
            f"expert-parallel size {ep} does not divide the role's {ranks} devices per"
            " pipeline stage (devices / pp)",
        )
    return None


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
    problem = worker_layout_problem(devices, num_gpus_per_worker, cluster)
    if problem is not None:
        raise ConfigError(problem, field=field, value=num_gpus_per_worker, file=file)
