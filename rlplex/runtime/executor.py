"""Run a Plan on Ray: the executor's one entry point, :func:`execute`.

Order of events, each step bounded by a timeout:

1. unroll the plan into the run's ops (:func:`~rlplex.runtime.schedule.expand_plan`);
2. connect to Ray (``address``, ``RAY_ADDRESS``, a running ``ray.init``, or an
   embedded local Ray with logical GPUs) and refuse a plan that does not fit,
   *before* reserving anything;
3. reserve one placement group per planned node, read the physical GPU ids;
4. create every role's workers; the workers of a data-parallel train role
   join one process group (``info.group``); run the setups;
5. join the weight-sync process groups that need one;
6. dispatch (:class:`~rlplex.runtime.dispatcher.Dispatcher`) while the
   :class:`~rlplex.runtime.recorder.Recorder` writes each finished step;
7. always: flush the record, kill the workers, remove every placement group,
   and shut Ray down if this call started it.
"""

from __future__ import annotations

import contextlib
import inspect
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlplex.config import Config
from rlplex.dag.stubs import has_code
from rlplex.plan.model import Plan
from rlplex.resources.cluster import DRIVER
from rlplex.runtime.errors import ExecutionError
from rlplex.runtime.schedule import expand_plan
from rlplex.stages.weight_sync import DEFAULT_BUCKET_BYTES
from rlplex.timeline.record import Timeline

WEIGHT_SYNC_METHODS = ("auto", "ipc", "store", "broadcast")


def _upstream(fn: Callable[..., Any] | None, after: tuple[str, ...]) -> tuple[str, ...]:
    """The upstream stages ``fn`` takes as parameters (none for a rehearsal)."""
    if fn is None:
        return ()
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return after
    return tuple(name for name in after if name in params)


def _implementations(
    config: Config, implementations: Mapping[str, Callable[..., Any]] | None
) -> dict[str, Callable[..., Any]]:
    impls = {s.name: s.fn for s in config.pipeline.stages if has_code(s)}
    for name, fn in (implementations or {}).items():
        if name not in config.pipeline.names:
            raise ExecutionError(
                f"implementations names {name!r}, which is not a stage"
                f" (stages: {', '.join(config.pipeline.names)})"
            )
        impls[name] = fn
    return impls


def execute(
    plan: Plan,
    config: Config,
    *,
    steps: int = 1,
    implementations: Mapping[str, Callable[..., Any]] | None = None,
    setups: Mapping[str, Callable[..., Any]] | None = None,
    record: str | Path | None = None,
    time_scale: float = 1.0,
    address: str | None = None,
    timeout_s: float = 600.0,
    start_timeout_s: float = 120.0,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    on_ops: Callable[[list[str]], None] | None = None,
    weight_sync: str = "auto",
    worker_cpus: float = 0.0,
    meta: Mapping[str, Any] | None = None,
    weight_sync_bucket_bytes: int | None = None,
) -> Timeline:
    """Run ``steps`` steps of ``plan`` on Ray and return what happened.

    Args:
        plan: the plan to follow (``rlplex.plan.plan_with_config(config)`` or hand-written).
        config: the config the plan was made from (roles, worker shapes, pipeline): of a
            searched placement, the one ``plan_with_config`` returns with it.
        steps: number of RL steps to run.
        implementations: stage name -> callable, overriding the stages' ``fn``.
            Stages without one are rehearsed (they sleep their planned time).
        setups: role name -> ``setup(info) -> state``, run once on each worker
            (``driver`` too); see :mod:`rlplex.runtime.worker`. A pipeline module
            offers them as ``setups()`` next to its pipeline function; ``rlplex
            run`` calls it for ``pipeline: {python: "module:function"}``
            (:func:`rlplex.reports.run.python_setups`).
        record: JSONL file to write step by step (the plan goes beside it).
        time_scale: rehearsed stages and transfers sleep planned seconds times this.
        address: a Ray cluster to join; default ``RAY_ADDRESS``, a running
            ``ray.init``, or an embedded local Ray with logical GPUs.
        timeout_s: longest any op may run after it is issued.
        start_timeout_s: longest the placement groups and worker setups may take.
        on_step: called with ``(step, metrics)`` as each step is recorded.
        on_ops: called with the ids of the ops in flight whenever they change.
        weight_sync: ``auto`` (``ipc`` when the two roles hold the same
            devices split alike into workers, ``broadcast`` when they share
            none, ``store`` otherwise), ``ipc`` (buckets shared on the
            device: CUDA IPC, or shared memory on CPU), ``store`` (Ray's object
            store, through host memory) or ``broadcast`` (buckets over a process
            group: NCCL, gloo on CPU); used when the source offers
            ``named_weights()`` and the destination ``load_weights`` or
            ``named_weights()`` (see :mod:`rlplex.stages.weight_sync`).
        weight_sync_bucket_bytes: largest weight-sync bucket (default 512 MiB).
        worker_cpus: CPUs each worker actor reserves.
        meta: extra facts for the record's meta line.

    Raises:
        ClusterFitError: the Ray cluster lacks GPUs or nodes (before anything starts).
        StageFailedError: a stage raised (names stage, step, role, rank).
        WorkerDiedError: a worker died. OpTimeoutError: an op overran ``timeout_s``.
        RunInterrupted: Ctrl-C, after the ops in flight finished.
        PlanScheduleError: the plan cannot be followed.
        RayMissingError: Ray is not installed (the ``[run]`` extra).
    """
    from rlplex.runtime.cluster import require_ray

    require_ray()
    from rlplex.runtime.dispatcher import Dispatcher
    from rlplex.runtime.recorder import Recorder

    # Expanded before starting anything, so a plan that cannot be followed fails at once.
    schedule = expand_plan(plan, steps, staleness=config.pipeline.staleness)
    with open_session(
        plan,
        config,
        implementations=implementations,
        setups=setups,
        time_scale=time_scale,
        address=address,
        start_timeout_s=start_timeout_s,
        weight_sync=weight_sync,
        worker_cpus=worker_cpus,
        weight_sync_bucket_bytes=weight_sync_bucket_bytes,
    ) as session:
        info = {
            **session.meta,
            "steps": steps,
            **(meta or {}),
        }
        recorder = Recorder(schedule, plan, record, info)
        dispatcher = Dispatcher(
            schedule,
            session.groups,
            recorder,
            session.bindings,
            timeout_s=timeout_s,
            time_scale=time_scale,
            driver_state=session.driver_state,
            on_step=on_step,
            on_ops=on_ops,
        )
        failure: str | None = None
        try:
            dispatcher.run()
        except BaseException as exc:
            failure = str(exc) or type(exc).__name__
            raise
        finally:
            recorder.close(failure)
        timeline = recorder.timeline()
        lat = sorted(dispatcher.dispatch_latencies)
        median_ms = 1000 * lat[len(lat) // 2] if lat else 0.0
        return timeline.model_copy(
            update={"meta": {**timeline.meta, "dispatch_median_ms": median_ms}}
        )


@dataclass
class Session:
    """Workers started for a plan, ready to dispatch schedules on (see :func:`open_session`)."""

    groups: dict[str, Any]
    """Role -> :class:`~rlplex.runtime.groups.WorkerGroup`."""
    bindings: dict[str, Any]
    """Stage -> :class:`~rlplex.runtime.dispatcher.StageBinding`."""
    driver_state: Any
    """What ``setups["driver"]`` returned."""
    meta: dict[str, Any]
    """Facts for the record: Ray nodes, GPU ids, where each worker landed."""


@contextmanager
def open_session(
    plan: Plan,
    config: Config,
    *,
    implementations: Mapping[str, Callable[..., Any]] | None = None,
    setups: Mapping[str, Callable[..., Any]] | None = None,
    time_scale: float = 1.0,
    address: str | None = None,
    start_timeout_s: float = 120.0,
    weight_sync: str = "auto",
    worker_cpus: float = 0.0,
    weight_sync_bucket_bytes: int | None = None,
) -> Iterator[Session]:
    """Connect, check the fit, reserve, start the workers; on exit, tear everything down.

    :func:`execute` runs one schedule in a session; benchmarks run several on
    the same workers. Arguments are those of :func:`execute`.
    """
    import ray

    from rlplex.runtime import cluster as rc
    from rlplex.runtime.dispatcher import StageBinding
    from rlplex.runtime.groups import build_groups, start_groups

    if weight_sync not in WEIGHT_SYNC_METHODS:
        raise ExecutionError(
            f"weight_sync must be one of {', '.join(WEIGHT_SYNC_METHODS)} (got {weight_sync!r})"
        )
    impls = _implementations(config, implementations)
    setups = dict(setups or {})
    stages = {s.name: s for s in config.pipeline.stages}
    per_role: dict[str, dict[str, Callable[..., Any]]] = defaultdict(dict)
    for name, fn in impls.items():
        stage = stages[name]
        role = stage.to_role if stage.is_weight_sync else stage.role
        if role and role != DRIVER:
            per_role[role][name] = fn
    gpu_devices = sorted({d for devices in plan.placement.values() for d in devices})
    gpn = config.cluster.gpus_per_node
    need = rc.gpus_needed(gpu_devices, gpn)
    started = rc.connect(address, num_gpus=config.cluster.num_gpus)
    reservation = None
    groups: dict[str, Any] = {}
    try:
        node_ids = rc.assign_nodes(
            need, rc.alive_gpu_nodes(), allow_packing=started and not address
        )
        if need:
            reservation = rc.reserve(need, node_ids, timeout_s=start_timeout_s)
            rc.probe_gpu_ids(reservation, gpn, start_timeout_s)
        groups = build_groups(
            plan,
            config,
            reservation,
            implementations=per_role,
            setups=setups,
            time_scale=time_scale,
            worker_cpus=worker_cpus,
        )
        # Roles that train real code on several workers need a group to all-reduce gradients.
        train_roles = {
            stage.role
            for stage in config.pipeline.stages
            if stage.kind == "train" and stage.role in setups and stage.name in impls
        }
        start_groups(groups, start_timeout_s, train_roles)
        bindings = _bindings(
            config,
            plan,
            impls,
            groups,
            SyncOptions(weight_sync, weight_sync_bucket_bytes or DEFAULT_BUCKET_BYTES),
            start_timeout_s,
            StageBinding,
        )
        driver_state = setups[DRIVER](None) if DRIVER in setups else None
        meta = {
            "source": "ray",
            "mode": plan.mode,
            # The plan's predictions, under their own key: a record's top-level figures are
            # what was measured, and viz derives the measured period from the events.
            "plan": {
                "period_s": plan.period_s,
                "makespan_s": plan.makespan_s,
                "lower_bound_s": plan.lower_bound_s,
            },
            "time_scale": time_scale,
            "config": config.source,
            "ray_nodes": {str(k): v for k, v in node_ids.items()},
            "gpu_ids": {str(k): v for k, v in (reservation.gpu_ids if reservation else {}).items()},
            "workers": {role: g.placement for role, g in groups.items()},
            "weight_sync": {k: b.sync for k, b in bindings.items() if b.sync},
        }
        yield Session(groups=groups, bindings=bindings, driver_state=driver_state, meta=meta)
    finally:
        for group in groups.values():
            for actor in group.actors:
                with contextlib.suppress(Exception):  # already dead
                    ray.kill(actor, no_restart=True)
        rc.release(reservation)
        if started:
            ray.shutdown()


@dataclass(frozen=True)
class SyncOptions:
    """How weight syncs move the weights."""

    method: str = "auto"
    """One of :data:`WEIGHT_SYNC_METHODS`."""
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    """Largest bucket, in bytes."""


def ipc_pairs(src: Any, dst: Any, *, exact: bool = True) -> dict[int, tuple[int, ...]]:
    """Source rank -> destination ranks it feeds by IPC.

    A bucket lives on its source worker's first GPU, so (``exact``) each
    destination worker pairs with the source worker whose first GPU is its own
    first GPU; otherwise with the source worker holding that GPU at all (fine
    for CPU tensors in shared memory).

    Raises:
        ExecutionError: a destination worker has no such source worker.
    """
    owner: dict[int, int] = {}
    for rank, info in enumerate(src.infos):
        for d in info.devices[:1] if exact else info.devices:
            owner.setdefault(d, rank)
    pairs: dict[int, list[int]] = defaultdict(list)
    for rank, info in enumerate(dst.infos):
        first = info.devices[0] if info.devices else None
        if first is None and len(src.infos) == 1:
            pairs[0].append(rank)
            continue
        if first not in owner:
            raise ExecutionError(
                f"ipc weight sync: GPU {first} of {dst.role}[{rank}] is the first GPU of no"
                f" {src.role} worker"
            )
        pairs[owner[first]].append(rank)
    return {k: tuple(v) for k, v in sorted(pairs.items())}


def choose_sync_method(
    requested: str, src_gpus: set[int], dst_gpus: set[int], *, split_alike: bool
) -> str:
    """The weight-sync method ``auto`` resolves to (any other request is kept).

    ``ipc`` when both roles hold the same GPUs and split them alike into
    workers (each bucket is read on the GPU it lies on), ``broadcast`` when
    they share no GPU, and ``store`` when they share some: NCCL cannot put two
    ranks of one group on the same GPU.
    """
    if requested != "auto":
        return requested
    if src_gpus == dst_gpus:
        return "ipc" if split_alike else "store"
    return "store" if src_gpus & dst_gpus else "broadcast"


def _bindings(
    config: Config,
    plan: Plan,
    impls: Mapping[str, Callable[..., Any]],
    groups: Mapping[str, Any],
    sync_options: SyncOptions,
    timeout_s: float,
    binding_cls: Any,
) -> dict[str, Any]:
    """How each stage runs: upstream names it takes, driver function, weight-sync method."""
    import ray

    bindings = {}
    joined: set[str] = set()
    for stage in config.pipeline.stages:
        fn = impls.get(stage.name)
        extra: dict[str, Any] = {}
        sync = None
        if stage.is_weight_sync:
            src, dst = groups.get(stage.from_role or ""), groups.get(stage.to_role or "")
            sync = "fn" if fn is not None else "rehearse"
            if fn is None and src is not None and dst is not None:
                ok = ray.get(
                    [src.actors[0].can_sync_weights.remote("source")]
                    + [a.can_sync_weights.remote("destination") for a in dst.actors],
                    timeout=timeout_s,
                )
                if all(ok):
                    sync, extra = _prepare_sync(
                        stage.name, plan, src, dst, sync_options, joined, timeout_s
                    )
        bindings[stage.name] = binding_cls(
            upstream=_upstream(fn, stage.after),
            driver_fn=fn if stage.role == DRIVER else None,
            sync=sync,
            **extra,
        )
    return bindings


def _prepare_sync(
    name: str,
    plan: Plan,
    src: Any,
    dst: Any,
    options: SyncOptions,
    joined: set[str],
    timeout_s: float,
) -> tuple[str, dict[str, Any]]:
    """Pick the method of weight sync ``name``; lay out its buckets and join its group once."""
    import ray

    try:
        ipc_pairs(src, dst)
        alike = True
    except ExecutionError:
        alike = False
    method = choose_sync_method(
        options.method,
        set(plan.placement.get(src.role, ())),
        set(plan.placement.get(dst.role, ())),
        split_alike=alike,
    )
    extra: dict[str, Any] = {}
    if method == "store":
        return method, extra
    buckets = ray.get(src.actors[0].weight_buckets.remote(options.bucket_bytes), timeout=timeout_s)
    actors = [*src.actors, *dst.actors]
    ray.get([a.prepare_sync.remote(name, buckets) for a in actors], timeout=timeout_s)
    extra["buckets"] = len(buckets)
    if method == "ipc":
        try:
            extra["pairs"] = ipc_pairs(src, dst)
        except ExecutionError:  # asked for ipc: pair by any shared GPU (CPU tensors)
            extra["pairs"] = ipc_pairs(src, dst, exact=False)
    else:
        # One process group per pair of roles, made once, whatever stages use it.
        key = f"{src.role}->{dst.role}"
        if key not in joined:
            _join_sync_group(key, src, dst, timeout_s)
            joined.add(key)
        extra["group"] = key
    return method, extra


def _join_sync_group(key: str, src: Any, dst: Any, timeout_s: float) -> None:
    """Source rank 0 and every destination worker join one stand-alone process group."""
    import ray

    host, port = ray.get(src.actors[0].sync_address.remote(), timeout=timeout_s)
    size = 1 + dst.world_size
    refs = [src.actors[0].join_sync_group.remote(key, host, port, 0, size, timeout_s)] + [
        a.join_sync_group.remote(key, host, port, 1 + r, size, timeout_s)
        for r, a in enumerate(dst.actors)
    ]
    ray.get(refs, timeout=timeout_s)
