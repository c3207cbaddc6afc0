"""Worker groups: a role's ``world_size`` actors, created in the run's placement groups.

:func:`build_groups` turns the plan's placement and the config's roles into
one :class:`WorkerGroup` per role that runs something: GPU roles get one actor
per worker, pinned to the bundle of its first planned GPU with a fractional
GPU share (see :mod:`rlplex.runtime.cluster` for why colocated roles are
separate actors); CPU roles get actors without GPUs. Actors are created all at
once and started with one ``setup`` call each, in parallel, under a timeout.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlplex.config import Config
from rlplex.plan.model import Plan
from rlplex.resources.cluster import DRIVER
from rlplex.runtime.cluster import Reservation
from rlplex.runtime.context import WorkerInfo
from rlplex.runtime.errors import ExecutionError, OpTimeoutError, RemoteStageError, StageFailedError


@dataclass
class WorkerGroup:
    """The actors of one role, by rank."""

    role: str
    """The role's name."""
    actors: list[Any]
    """Ray actor handles, index = rank."""
    infos: list[WorkerInfo]
    """What each worker was told about itself."""
    gpus_per_worker: int = 1
    """GPUs each worker drives (0 for a CPU role)."""
    placement: list[dict[str, Any]] = field(default_factory=list)
    """Where each worker landed (``describe()``), filled at start."""

    @property
    def world_size(self) -> int:
        return len(self.actors)


def role_layout(plan: Plan, config: Config) -> dict[str, tuple[int, list[tuple[int, ...]]]]:
    """Role -> (GPUs per worker, devices of each worker) for every role the plan uses."""
    used = {op.role for op in plan.ops if op.role} | {
        op.from_role for op in plan.ops if getattr(op, "from_role", None)
    }
    layout: dict[str, tuple[int, list[tuple[int, ...]]]] = {}
    for role in sorted(used - {DRIVER}):
        if role not in config.roles:
            raise ExecutionError(f"the plan uses role {role!r}, which the config does not define")
        spec = config.roles[role]
        devices = tuple(plan.placement.get(role, spec.devices))
        if devices:
            per = spec.num_gpus_per_worker
            layout[role] = (per, [devices[i : i + per] for i in range(0, len(devices), per)])
        else:
            layout[role] = (0, [() for _ in range(spec.world_size)])
    return layout


def build_groups(
    plan: Plan,
    config: Config,
    reservation: Reservation | None,
    *,
    implementations: Mapping[str, Mapping[str, Callable[..., Any]]],
    setups: Mapping[str, Callable[[WorkerInfo], Any]],
    time_scale: float,
    worker_cpus: float,
) -> dict[str, WorkerGroup]:
    """Create (but do not start) every role's actors."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from rlplex.runtime.worker import RoleWorker

    remote_cls = ray.remote(
        max_restarts=0, concurrency_groups={"compute": 1, "transfer": 1, "control": 1}
    )(RoleWorker)
    layout = role_layout(plan, config)
    first_gpus = Counter(w[0] for _, workers in layout.values() for w in workers if w)
    gpn = config.cluster.gpus_per_node
    groups: dict[str, WorkerGroup] = {}
    for role, (per, workers) in layout.items():
        actors, infos = [], []
        for rank, devices in enumerate(workers):
            info = WorkerInfo(
                role=role,
                rank=rank,
                world_size=len(workers),
                devices=devices,
                node=devices[0] // gpn if devices else 0,
                state_gb=dict(plan.states.get(role, {})),
                initial_residency=tuple(
                    plan.initial_residency.get(role, config.roles[role].states)
                ),
            )
            options: dict[str, Any] = {"num_cpus": worker_cpus, "name": None}
            visible = None
            if devices:
                assert reservation is not None
                group, bundle = reservation.bundle(devices[0], gpn)
                # Shares must sum to <= 1 per bundle; round down so float error cannot overflow.
                options["num_gpus"] = math.floor(10_000 / first_gpus[devices[0]]) / 10_000
                options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                    group, placement_group_bundle_index=bundle
                )
                if len(devices) > 1:
                    visible = [reservation.gpu_ids[d] for d in devices]
            else:
                options["num_gpus"] = 0
            del options["name"]
            actor = remote_cls.options(**options).remote(
                info, setups.get(role), dict(implementations.get(role, {})), time_scale, visible
            )
            actors.append(actor)
            infos.append(info)
        groups[role] = WorkerGroup(
            role=role, actors=actors, infos=infos, gpus_per_worker=max(per, 1)
        )
    return groups


def join_train_groups(groups: Mapping[str, WorkerGroup], roles: set[str], timeout_s: float) -> None:
    """The workers of each data-parallel train role in ``roles`` join one process group.

    Rank 0 hosts the rendezvous; every worker joins at once (the join blocks
    until all have arrived). Run after the actors start and before the setups,
    which receive the group as ``info.group``.
    """
    import ray

    refs = []
    for role in sorted(roles):
        group = groups.get(role)
        if group is None or group.world_size < 2:
            continue
        host, port = ray.get(group.actors[0].sync_address.remote(), timeout=timeout_s)
        refs += [a.join_role_group.remote(host, port, timeout_s) for a in group.actors]
    ray.get(refs, timeout=timeout_s)


def start_groups(
    groups: Mapping[str, WorkerGroup], timeout_s: float, train_roles: set[str] | None = None
) -> None:
    """Wait for every actor to start, read where it landed, and run the setups.

    ``train_roles``: roles whose workers (if several) join a data-parallel
    process group before their setups run (:func:`join_train_groups`).
    """
    import ray

    describe = {
        (g.role, r): a.describe.remote() for g in groups.values() for r, a in enumerate(g.actors)
    }
    refs = list(describe.values())
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    if len(ready) < len(refs):
        missing = [
            f"{role}[{rank}]" for (role, rank), ref in describe.items() if ref not in set(ready)
        ]
        raise OpTimeoutError(
            f"{len(missing)} worker(s) did not start within {timeout_s:g} s:"
            f" {', '.join(missing[:8])}"
            " (not enough CPUs or GPUs free in the Ray cluster?)"
        )
    for (role, _), ref in describe.items():
        groups[role].placement.append(ray.get(ref))
    join_train_groups(groups, train_roles or set(), timeout_s)
    setup = {(g.role, r): a.setup.remote() for g in groups.values() for r, a in enumerate(g.actors)}
    for (role, rank), ref in setup.items():
        try:
            ray.get(ref, timeout=timeout_s)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(getattr(exc, "cause", None), RemoteStageError) else None
            if cause is None:
                raise
            raise StageFailedError(
                stage="setup",
                step=-1,
                role=role,
                rank=rank,
                op="setup",
                error=cause.error,
                remote_traceback=cause.tb,
            ) from None
        except ray.exceptions.GetTimeoutError:
            raise OpTimeoutError(
                f"setup of role {role!r} worker rank {rank} took over {timeout_s:g} s"
            ) from None
