"""Connect to Ray, check that the plan fits, and reserve its GPUs with placement groups.

Ray as users run it: an existing cluster (``address`` or ``RAY_ADDRESS``), or
the embedded default, a local Ray started here with *logical* GPUs
(``ray.init(num_gpus=N)``) when the machine has fewer real GPUs than the
config, so a 16-GPU plan rehearses on a laptop.

Placement. Each planned node gets one placement group with one ``{"GPU": 1}``
bundle per GPU it uses (local ranks 0..max), strategy ``STRICT_PACK`` and a
bundle label selector on the Ray node id, so planned node ``i`` is one Ray
node, chosen before anything starts: GPU nodes are taken in a fixed order
(the head node first, then by node id). Bundle ``b`` of node ``i``'s group is
planned GPU ``i * gpus_per_node + b``; its *physical* GPU id is whatever Ray
assigned, read inside the worker with ``ray.get_gpu_ids()`` and recorded (a
bundle index is not a GPU id).

Colocated roles: one actor per role worker, sharing the bundle of their GPU
as *fractional* GPU requests (``1 / roles on that GPU``), not one fused
process per GPU. Why:

- roles differ in worker shape (a 2-GPU vLLM worker beside 1-GPU trainer
  workers): a fused process per GPU cannot host a worker spanning GPUs;
- inference and training engines each own process-wide state (the default
  ``torch.distributed`` group, vLLM's sleep-mode allocator, CUDA env vars);
  separate processes keep them apart, and a crash names one role;
- the price: one CUDA context per role per GPU (a few hundred MB) and memory
  shared *across processes*, so an offload must hand memory back to the
  device (``torch.cuda.empty_cache()``, done by the offload backends) for the
  next role to use it; and colocated weight sync goes through shared memory
  instead of a same-process copy.

A worker driving several GPUs sits in the bundle of its first GPU and is
given the physical ids of the others, probed once per bundle at start.

Fit check, before anything starts: enough alive GPU nodes, each with enough
GPUs, for the planned nodes (the embedded cluster may pack several planned
nodes onto its one node, since it made its logical GPUs for that).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlplex.runtime.errors import ClusterFitError, ExecutionError, OpTimeoutError, RayMissingError

NODE_LABEL = "ray.io/node-id"


@dataclass(frozen=True)
class RayNode:
    """An alive Ray node and its GPUs."""

    node_id: str
    """Ray's id of the node (hex)."""
    gpus: int
    """GPUs the node offers Ray (its ``GPU`` resource), at least 1: nodes without are left
    out."""
    is_head: bool = False
    """Whether it is the cluster's head node (listed first)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Ray's node labels; with :data:`NODE_LABEL`, placement groups are pinned to the node by
    label, else only aimed at it (an older Ray). Default: none."""


@dataclass
class Reservation:
    """The placement groups of a run and where each planned GPU landed."""

    groups: dict[int, Any]
    """Planned node -> its placement group."""
    node_ids: dict[int, str]
    """Planned node -> Ray node id."""
    gpu_ids: dict[int, str] = field(default_factory=dict)
    """Planned global GPU rank -> physical GPU id on its node (probed)."""

    def bundle(self, rank: int, gpus_per_node: int) -> tuple[Any, int]:
        """The placement group and bundle index of planned GPU ``rank``."""
        return self.groups[rank // gpus_per_node], rank % gpus_per_node


def require_ray() -> None:
    """Import Ray, or say how to install it: it is in the ``[run]`` extra only.

    Raises:
        RayMissingError: Ray is not installed, or importing it failed (the reason said).
    """
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        why = "" if exc.name == "ray" else f" (importing it failed: {exc})"
        raise RayMissingError(f"rlplex run needs Ray: pip install 'rlplex[run]'{why}") from exc


def real_gpu_count() -> int:
    """GPUs on this machine, without importing torch when there is no NVIDIA driver."""
    if not os.path.exists("/proc/driver/nvidia/version"):
        return 0
    try:
        import torch

        return int(torch.cuda.device_count())
    except ImportError:  # pragma: no cover - torch is a run dependency
        return 0


def worker_env() -> dict[str, Any]:
    """runtime_env for an embedded Ray: the driver's import path and the logging hook."""
    paths = [p for p in sys.path if p and os.path.isdir(p) and "site-packages" not in p]
    existing = os.environ.get("PYTHONPATH")
    if existing:
        paths.append(existing)
    return {
        "env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys([os.getcwd(), *paths]))},
        "worker_process_setup_hook": "rlplex.runtime.logs.setup_worker_logging",
    }


def connect(address: str | None, num_gpus: int, num_cpus: int | None = None) -> bool:
    """Join ``address`` (or ``RAY_ADDRESS``), reuse a running ``ray.init``, or start one.

    Started here, it is a new local Ray of this process's own (``address="local"``):
    never a cluster ``ray.init()`` would find on its own in /tmp/ray/ray_current_cluster
    (another run's, a ``ray start``, one that is gone), which it would join and then
    refuse the GPU count (an H200 run found one left by a test cluster).

    Returns True when this call started Ray (the caller shuts it down).
    """
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        check_reachable(address)
        try:
            ray.init(address=address, runtime_env=worker_env(), log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExecutionError(f"cannot join the Ray cluster at {address!r}: {exc}") from None
        return True
    # A local Ray started for one run needs no token (Ray's notice about it is noise
    # here); a user who set RAY_AUTH_MODE keeps their choice.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    real = real_gpu_count()
    gpus = max(real, num_gpus)
    runtime_env = worker_env()
    if real < num_gpus:
        # Some of Ray's GPUs would be logical: every worker runs on CPU tensors alike
        # (otherwise the one whose logical id names a real GPU would use CUDA and the
        # others not, and their process groups would not match).
        from rlplex.runtime.worker import LOGICAL_GPUS_ENV

        runtime_env["env_vars"][LOGICAL_GPUS_ENV] = "1"
        if real:
            import structlog

            structlog.get_logger("rlplex.runtime").warning(
                "the plan needs more GPUs than this machine has: workers run on logical GPUs"
                " with CPU tensors",
                planned_gpus=num_gpus,
                real_gpus=real,
            )
    ray.init(
        address="local",
        logging_level=logging.WARNING,
        num_gpus=gpus,
        num_cpus=num_cpus or max(os.cpu_count() or 1, 1),
        include_dashboard=False,
        runtime_env=runtime_env,
        log_to_driver=True,
        configure_logging=False,
    )
    return True


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's first bytes: the connection preface and an empty SETTINGS frame."""


def check_reachable(address: str, timeout_s: float = 10.0, answer_s: float = 5.0) -> None:
    """Fail fast unless a Ray cluster answers at ``host:port`` (or ``ray://host:port``).

    Ray itself retries a GCS that does not answer for minutes, printing a
    warning every few seconds. A TCP connect tells in seconds whether anything
    listens; then, since Ray's GCS and Ray Client servers speak gRPC, the HTTP/2
    preface is sent and the server's SETTINGS frame must come back within
    ``answer_s`` (another service on that port answers otherwise or not at
    all). ``auto``, addresses without a port and TLS clusters
    (``RAY_USE_TLS``) get only what Ray itself checks.

    Raises:
        ExecutionError: nothing listens at the address, or what listens is not
            Ray (names the address and why).
    """
    import socket

    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                return
            conn.sendall(HTTP2_PREFACE)
            conn.settimeout(answer_s)
            reply = b""
            with contextlib.suppress(OSError):
                while len(reply) < 9 and (chunk := conn.recv(9 - len(reply))):
                    reply += chunk
    except OSError as exc:
        raise ExecutionError(
            f"cannot reach the Ray cluster at {address!r} ({exc.strerror or exc}): start it"
            " with `ray start --head`, or leave out --address and RAY_ADDRESS to run on a"
            " local Ray"
        ) from None
    if len(reply) < 9 or reply[3] != 4:  # frame type 4: SETTINGS
        heard = f"it answered {reply[:16]!r}" if reply else f"no answer within {answer_s:g} s"
        raise ExecutionError(
            f"something listens at {address!r} but it is not a Ray cluster ({heard}): give"
            " the GCS address that `ray start --head` prints (port 6379 by default), or"
            " ray://HOST:10001 for Ray Client"
        )


def alive_gpu_nodes() -> list[RayNode]:
    """Alive Ray nodes with at least one GPU: the head first, then by node id."""
    import ray

    nodes = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources", {})
        gpus = int(resources.get("GPU", 0))
        if gpus <= 0:
            continue
        nodes.append(
            RayNode(
                node_id=node["NodeID"],
                gpus=gpus,
                is_head="node:__internal_head__" in resources,
                labels=dict(node.get("Labels") or {}),
            )
        )
    nodes.sort(key=lambda n: (not n.is_head, n.node_id))
    return nodes


def gpus_needed(devices: Sequence[int], gpus_per_node: int) -> dict[int, int]:
    """Planned node -> GPUs to reserve there (local ranks 0 .. highest used)."""
    need: dict[int, int] = {}
    for rank in devices:
        node, local = divmod(rank, gpus_per_node)
        need[node] = max(need.get(node, 0), local + 1)
    return dict(sorted(need.items()))


def assign_nodes(
    need: dict[int, int], nodes: Sequence[RayNode], *, allow_packing: bool
) -> dict[int, str]:
    """Map each planned node to a Ray node, or raise :class:`ClusterFitError` with the numbers."""
    offered = ", ".join(f"{n.node_id[:8]}: {n.gpus} GPUs" for n in nodes) or "no GPU node"
    total_need = sum(need.values())
    total_have = sum(n.gpus for n in nodes)
    if total_need > total_have:
        raise ClusterFitError(
            f"the plan needs {total_need} GPUs on {len(need)} node(s)"
            f" ({', '.join(f'node {k}: {v}' for k, v in need.items())});"
            f" the Ray cluster offers {total_have} GPUs on {len(nodes)} node(s) ({offered})"
        )
    free = {n.node_id: n.gpus for n in nodes}
    order = [n.node_id for n in nodes]
    mapping: dict[int, str] = {}
    for planned, count in need.items():
        candidates = [
            nid
            for nid in order
            if free[nid] >= count and (allow_packing or nid not in mapping.values())
        ]
        if not candidates:
            raise ClusterFitError(
                f"planned node {planned} needs {count} GPUs on one node and the plan uses"
                f" {len(need)} node(s); the Ray cluster offers {len(nodes)} GPU node(s)"
                f" ({offered}) — a node is missing or too small"
            )
        chosen = candidates[0]
        mapping[planned] = chosen
        free[chosen] -= count
    return mapping


def reserve(
    need: dict[int, int], node_ids: dict[int, str], *, timeout_s: float, name: str = "rlplex"
) -> Reservation:
    """Create one placement group per planned node and wait until all are placed."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    groups: dict[int, Any] = {}
    labelled = {n.node_id for n in alive_gpu_nodes() if NODE_LABEL in n.labels}
    try:
        for planned, count in need.items():
            bundles = [{"GPU": 1.0, "CPU": 0.0}] * count
            kwargs: dict[str, Any] = {}
            if node_ids[planned] in labelled:
                kwargs["bundle_label_selector"] = [{NODE_LABEL: node_ids[planned]}] * count
            else:  # an older Ray without node labels: a soft target is the best it offers
                kwargs["_soft_target_node_id"] = node_ids[planned]
            groups[planned] = placement_group(
                bundles, strategy="STRICT_PACK", name=f"{name}-node{planned}", **kwargs
            )
        ready = [g.ready() for g in groups.values()]
        done, _ = ray.wait(ready, num_returns=len(ready), timeout=timeout_s)
        if len(done) < len(ready):
            raise ClusterFitError(
                f"the placement groups for {sum(need.values())} GPUs were not placed within"
                f" {timeout_s:g} s: GPUs are taken by other jobs or the nodes are too small"
            )
    except BaseException:
        for group in groups.values():
            remove_placement_group(group)
        raise
    return Reservation(groups=groups, node_ids=dict(node_ids))


def probe_gpu_ids(reservation: Reservation, gpus_per_node: int, timeout_s: float) -> dict[int, str]:
    """Physical GPU id of every bundle, read with ``ray.get_gpu_ids()`` by a probe in it.

    The probes are tasks with ``max_calls=0``: they run in Ray's pool of idle
    worker processes, which stay for the next task (or the run's role actors),
    so a run's probes start no process of their own. Two other shapes were
    tried. A task that asks for a GPU runs with ``max_calls=1`` by default, so
    its worker exits after its one call through Ray's graceful shutdown, which
    under CPU load sometimes frees the core worker's state while one of its
    threads still uses it: SIGABRT, "Mutex corrupt: both reader and writer lock
    held" (issue 13: 1 ``rlplex run`` in 4 under load; 240 probe tasks crashed 1
    worker at load 9 and 73 at load 21). Probe actors killed with ``ray.kill``
    never crashed, but each is a new process that imports Ray: 5 rounds of 8
    probes took 14.5 s as actors and 4.8 s as reused tasks (9 processes in all),
    and the test suite started 33 probe actors on one of its two local Rays.
    """
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    @ray.remote(num_cpus=0, num_gpus=0.001, max_calls=0)
    def gpu_id_probe() -> str:
        return str(ray.get_gpu_ids()[0])

    probes = {}
    for planned, group in reservation.groups.items():
        for bundle in range(len(group.bundle_specs)):
            strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=bundle)
            probes[planned * gpus_per_node + bundle] = gpu_id_probe.options(
                scheduling_strategy=strategy
            ).remote()
    try:
        values = ray.get(list(probes.values()), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        for ref in probes.values():
            with contextlib.suppress(Exception):  # already done
                ray.cancel(ref, force=False)
        raise OpTimeoutError(
            f"Ray did not start a probe in each of the {len(probes)} reserved GPU bundles within"
            f" {timeout_s:g} s: the machine cannot start that many Ray worker processes in time"
            " (a local Ray runs one process per planned worker); run a smaller config or join"
            " a cluster with --address"
        ) from None
    reservation.gpu_ids = dict(zip(probes, values, strict=True))
    return reservation.gpu_ids


def release(reservation: Reservation | None) -> None:
    """Remove every placement group of the run (safe to call twice)."""
    if reservation is None:
        return
    from ray.util.placement_group import remove_placement_group

    for group in reservation.groups.values():
        # Already gone, or Ray is shutting down: nothing left to release.
        with contextlib.suppress(Exception):
            remove_placement_group(group)
    reservation.groups.clear()
