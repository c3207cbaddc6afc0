"""The plan-following dispatcher: issue each op when everything before it is done.

The schedule (:mod:`rlplex.runtime.schedule`) gives every op its complete set
of predecessors (plan edges, step barrier, staleness gate, per-device lane
order), so the dispatcher is a plain event loop over a ready queue:

1. issue every ready op, earliest planned start first, as remote calls on its
   role's workers (``run`` on every worker, SPMD; ``offload``/``reload`` on the
   transfer thread of every worker; ``weight_sync`` as chained bucket
   exports/imports shared on the device (``ipc``), a bucketed broadcast, an
   export/import through the object store, the user's function, or a rehearsal);
2. wait (``ray.wait``, bounded by the earliest op deadline) for any call to
   finish, fetch its small stats object, and when all calls of an op are done,
   record it and release the ops waiting for it.

Stage results stay in the object store (their device tensors on the device
when every consumer shares the producer's devices): each worker's result is an
ObjectRef handed straight to the next stage's workers (shard ``i`` to worker
``i`` when both roles have the same world size; otherwise every part goes to
every worker, which gathers and reshards). Only driver stages fetch values.

Every wait is bounded: an op still running after :meth:`Dispatcher.op_limit_s`
(``HANG_FACTOR`` times its planned duration, at least ``MIN_HANG_S``, at most
``timeout_s``) raises :class:`OpTimeoutError`, so a hung worker is noticed in
a time the plan predicts rather than after a fixed ten minutes; a dead worker surfaces as
:class:`WorkerDiedError` as soon as Ray reports it; a stage exception as
:class:`StageFailedError` naming stage, step, role and rank (remote traceback
in the log). Ctrl-C stops issuing, lets the ops in flight finish, and raises
:class:`RunInterrupted`; a second Ctrl-C stops at once.
"""

from __future__ import annotations

import concurrent.futures as cf
import heapq
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
import structlog

from rlplex.plan.ids import TRANSFER_KINDS, OpKind
from rlplex.runtime.context import StageContext, WorkerInfo
from rlplex.runtime.data import gather, shard
from rlplex.runtime.errors import (
    OpTimeoutError,
    PlanScheduleError,
    RemoteStageError,
    RunInterrupted,
    StageFailedError,
    WorkerDiedError,
)
from rlplex.runtime.groups import WorkerGroup
from rlplex.runtime.recorder import Recorder
from rlplex.runtime.schedule import ExecOp, Schedule
from rlplex.runtime.worker import run_stage

log = structlog.get_logger("rlplex.runtime")

HANG_FACTOR = 10.0
"""An op running this many times its planned duration is taken to be hung."""
MIN_HANG_S = 60.0
"""Never call an op hung sooner than this (short ops, first calls that compile or load)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass
class _InFlight:
    op: ExecOp
    workers: list[tuple[str, int]]
    issued_s: float
    dispatch_s: float
    deadline: float
    gpus_per_worker: int
    stats: list[Any] = field(default_factory=list)
    left: int = 0
    future: cf.Future[Any] | None = None


@dataclass(frozen=True)
class StageBinding:
    """How the dispatcher runs one stage."""

    upstream: tuple[str, ...] = ()
    """Upstream stages whose results the implementation takes (empty: none passed)."""
    driver_fn: Callable[..., Any] | None = None
    """The implementation, for driver stages (worker stages hold theirs on the workers)."""
    sync: str | None = None
    """weight_sync only: ``ipc``, ``store``, ``broadcast``, ``fn`` or ``rehearse``."""
    buckets: int = 0
    """weight_sync (``ipc``, ``broadcast``): how many buckets the weights make."""
    pairs: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """weight_sync ``ipc``: source rank -> destination ranks on its GPU."""
    group: str = ""
    """weight_sync ``broadcast``: the role pair's process group."""


def _share_on_device(
    schedule: Schedule, bindings: Mapping[str, StageBinding], groups: Mapping[str, WorkerGroup]
) -> set[str]:
    """Stages run by a role whose every consumer runs on a role with the same devices."""
    devices: dict[str, set[tuple[int, ...]]] = defaultdict(set)
    roles: dict[str, str] = {}
    for op in schedule.ops:
        if op.kind == OpKind.RUN and op.stage:
            devices[op.stage].add(tuple(sorted(op.devices)))
            roles[op.stage] = op.role or ""
    consumers: dict[str, list[str]] = defaultdict(list)
    for stage, binding in bindings.items():
        for name in binding.upstream:
            consumers[name].append(stage)
    out = set()
    for stage, users in consumers.items():
        mine = devices.get(stage, set())
        if len(mine) != 1 or not next(iter(mine)) or roles.get(stage) not in groups:
            continue
        if all(roles.get(user) in groups and devices.get(user, set()) == mine for user in users):
            out.add(stage)
    return out


class Dispatcher:
    """Runs a :class:`Schedule` on worker groups and feeds a :class:`Recorder`."""

    def __init__(
        self,
        schedule: Schedule,
        groups: Mapping[str, WorkerGroup],
        recorder: Recorder,
        bindings: Mapping[str, StageBinding],
        *,
        timeout_s: float,
        time_scale: float = 1.0,
        driver_state: Any = None,
        on_step: Callable[[int, dict[str, Any]], None] | None = None,
        on_ops: Callable[[list[str]], None] | None = None,
        overhead_s: float = 0.0,
    ) -> None:
        self.schedule = schedule
        # The plan's run ops include the cost model's per-op overhead (cluster.dispatch_s);
        # a rehearsal sleeps only the work, since the real overhead happens anyway.
        self.overhead_s = overhead_s
        self.groups = groups
        self.recorder = recorder
        self.bindings = bindings
        self.timeout_s = timeout_s
        self.time_scale = time_scale
        self.driver_state = driver_state
        self.on_step = on_step
        self.on_ops = on_ops
        self._ops = schedule.by_id()
        self._priority = {op.id: i for i, op in enumerate(schedule.ops)}
        self._waiting = {op.id: len(op.deps) for op in schedule.ops}
        self._dependents: dict[str, list[str]] = defaultdict(list)
        for op in schedule.ops:
            for dep in op.deps:
                self._dependents[dep].append(op.id)
        self._ready: list[tuple[int, str]] = []
        self._ready_at: dict[str, float] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self._ref_owner: dict[Any, tuple[str, int]] = {}
        self._results: dict[tuple[int, str], tuple[str, Any]] = {}
        self._share = _share_on_device(schedule, bindings, groups)
        self._share_roles = sorted(
            {op.role for op in schedule.ops if op.stage in self._share and op.role}
        )
        """Stages whose results stay on the device (every consumer on the producer's devices)."""
        self._pool = cf.ThreadPoolExecutor(max_workers=4, thread_name_prefix="rlplex-driver")
        self._done = 0
        self.dispatch_latencies: list[float] = []
        """Seconds from an op becoming ready to its calls being issued, per op."""

    # -- main loop ---------------------------------------------------------------

    def run(self) -> None:
        """Run every op; raises on the first failure, after Ctrl-C, or on a timeout."""
        now = self.recorder.now()
        for op in self.schedule.ops:
            if not op.deps:
                heapq.heappush(self._ready, (self._priority[op.id], op.id))
                self._ready_at[op.id] = now
        stopping = False
        total = len(self.schedule.ops)
        try:
            while self._done < total:
                try:
                    if not stopping:
                        while self._ready:
                            self._issue(self._ops[heapq.heappop(self._ready)[1]])
                        if self.on_ops is not None:
                            self.on_ops(sorted(self._in_flight))
                    if not self._in_flight:
                        if stopping:
                            break
                        raise PlanScheduleError(
                            f"{total - self._done} ops can never start"
                            " (their dependencies never finish)"
                        )
                    self._wait_some()
                except KeyboardInterrupt:
                    if stopping:
                        raise
                    stopping = True
                    log.warning(
                        "interrupted: finishing the ops in flight",
                        in_flight=sorted(self._in_flight),
                    )
            if stopping:
                raise RunInterrupted(
                    f"interrupted by the user after {self._done} of {total} ops;"
                    f" {len(self.recorder.flushed)} complete step(s) recorded"
                )
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _wait_some(self) -> None:
        refs = list(self._ref_owner)
        futures = [f.future for f in self._in_flight.values() if f.future is not None]
        deadline = min(f.deadline for f in self._in_flight.values())
        timeout = max(0.0, deadline - time.perf_counter())
        if refs:
            # With driver stages running too, poll so their completion is seen quickly.
            wait_s = min(timeout, 0.001) if futures else timeout
            ready, rest = ray.wait(refs, num_returns=1, timeout=wait_s)
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready.extend(more)
            if ready:
                self._collect(ready)
        elif futures:
            cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        for flight in list(self._in_flight.values()):
            if flight.future is not None and flight.future.done():
                self._finish_driver(flight)
        if time.perf_counter() >= deadline:
            late = [f for f in self._in_flight.values() if f.deadline <= time.perf_counter()]
            if late:
                raise self._timeout(late)

    def op_limit_s(self, op: ExecOp) -> float:
        """How long ``op`` may run: a multiple of its planned (scaled) duration, bounded.

        The plan's durations are estimates (and real stages warm up), so the
        margin is wide; a worker that is merely slow is not a hung one.
        """
        planned = max(0.0, op.planned_end_s - op.planned_start_s) * max(self.time_scale, 1.0)
        return min(self.timeout_s, max(MIN_HANG_S, HANG_FACTOR * planned))

    def _timeout(self, late: Sequence[_InFlight]) -> OpTimeoutError:
        parts = []
        for flight in late:
            waiting = [
                f"{role}[{rank}]"
                for (role, rank), s in zip(flight.workers, flight.stats, strict=False)
                if s is None
            ]
            parts.append(f"{flight.op.id} (waiting for {', '.join(waiting) or 'the driver'})")
        first = late[0].op
        return OpTimeoutError(
            f"op(s) did not finish within {self.op_limit_s(first):g} s of being issued"
            f" ({HANG_FACTOR:g}x the planned duration, at least {MIN_HANG_S:g} s, at most"
            f" --timeout {self.timeout_s:g} s): {'; '.join(parts)}",
            op=first.id,
            step=first.step,
        )

    # -- completion -------------------------------------------------------------

    def _collect(self, ready: Sequence[Any]) -> None:
        try:
            values = ray.get(list(ready))
        except Exception:
            values = []
            for ref in ready:
                try:
                    values.append(ray.get(ref))
                except Exception as exc:
                    op_id, index = self._ref_owner[ref]
                    raise self._failure(self._in_flight[op_id], index, exc) from None
        for ref, stats in zip(ready, values, strict=True):
            op_id, index = self._ref_owner.pop(ref)
            flight = self._in_flight[op_id]
            flight.stats[index] = stats
            flight.left -= 1
            if flight.left == 0:
                self._complete(flight)

    def _failure(self, flight: _InFlight, index: int, exc: BaseException) -> Exception:
        op = flight.op
        role, rank = flight.workers[index]
        # A worker's error arrives as a Ray error's cause; a driver stage's as itself.
        cause = exc if isinstance(exc, RemoteStageError) else getattr(exc, "cause", None)
        if isinstance(cause, RemoteStageError):
            log.error(
                "stage failed",
                stage=op.stage or op.kind,
                step=op.step,
                role=role,
                rank=rank,
                traceback=cause.tb,
            )
            return StageFailedError(
                stage=op.stage or f"{op.kind} {op.state}",
                step=op.step,
                role=role,
                rank=rank,
                op=op.id,
                error=cause.error,
                remote_traceback=cause.tb,
            )
        if isinstance(exc, ray.exceptions.RayActorError):
            return WorkerDiedError(
                f"worker rank {rank} of role {role!r} died while running {op.id}"
                f" (step {op.step}): {_first_line(exc)}",
                op=op.id,
                step=op.step,
            )
        log.error("remote call failed", op=op.id, role=role, rank=rank, error=str(exc))
        return StageFailedError(
            stage=op.stage or f"{op.kind} {op.state}",
            step=op.step,
            role=role,
            rank=rank,
            op=op.id,
            error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            remote_traceback=str(exc),
        )

    def _finish_driver(self, flight: _InFlight) -> None:
        assert flight.future is not None
        op = flight.op
        try:
            result, stats = flight.future.result()
        except Exception as exc:
            raise self._failure(flight, 0, exc) from None
        self._results[(op.step, op.stage or "")] = ("value", result)
        flight.stats = [stats]
        flight.future = None
        self._complete(flight)

    def _complete(self, flight: _InFlight) -> None:
        op = flight.op
        end = self.recorder.now()
        del self._in_flight[op.id]
        self._done += 1
        finished = self.recorder.add(
            op,
            flight.issued_s,
            end,
            [s for s in flight.stats if s is not None],
            gpus_per_worker=flight.gpus_per_worker,
            dispatch_s=flight.dispatch_s,
        )
        for dep in self._dependents.get(op.id, ()):
            self._waiting[dep] -= 1
            if self._waiting[dep] == 0:
                heapq.heappush(self._ready, (self._priority[dep], dep))
                self._ready_at[dep] = end
        for step, metrics in finished:
            for key in [k for k in self._results if k[0] == step]:
                del self._results[key]
            for role in self._share_roles:
                for actor in self.groups[role].actors:
                    actor.release_step.remote(step)  # no reply needed
            if self.on_step is not None:
                self.on_step(step, metrics)

    # -- issuing ------------------------------------------------------------------

    def _track(
        self, op: ExecOp, refs: Sequence[Any], workers: list[tuple[str, int]], gpus: int
    ) -> None:
        now = self.recorder.now()
        dispatch = now - self._ready_at.get(op.id, now)
        self.dispatch_latencies.append(dispatch)
        flight = _InFlight(
            op=op,
            workers=workers,
            issued_s=now,
            dispatch_s=dispatch,
            deadline=time.perf_counter() + self.op_limit_s(op),
            gpus_per_worker=gpus,
            stats=[None] * len(refs),
            left=len(refs),
        )
        self._in_flight[op.id] = flight
        for index, ref in enumerate(refs):
            self._ref_owner[ref] = (op.id, index)

    def _issue(self, op: ExecOp) -> None:
        if op.kind == OpKind.RUN:
            if op.role not in self.groups:
                self._issue_driver(op)
            else:
                self._issue_run(op, self.groups[op.role], op.stage or "")
        elif op.kind in TRANSFER_KINDS:
            group = self.groups[op.role or ""]
            refs = [
                a.transfer.remote(op.kind, [op.state], op.dead, op.planned_s) for a in group.actors
            ]
            self._track(
                op, refs, [(group.role, r) for r in range(group.world_size)], group.gpus_per_worker
            )
        elif op.kind == OpKind.WEIGHT_SYNC:
            self._issue_sync(op)
        else:  # pragma: no cover - the plan model allows no other kind
            raise PlanScheduleError(f"unknown op kind {op.kind!r}", op=op.id)

    def _inputs(
        self, op: ExecOp, stage: str, world: int
    ) -> list[tuple[list[tuple[str, int, bool]], list[Any]]]:
        """Per worker: the (name, count, whole) layout and the positional inputs."""
        per_worker: list[tuple[list[tuple[str, int, bool]], list[Any]]] = [
            ([], []) for _ in range(world)
        ]
        for name in self.bindings.get(stage, StageBinding()).upstream:
            found = self._results.get((op.step, name))
            if found is None:
                continue
            kind, value = found
            for rank, (layout, args) in enumerate(per_worker):
                if kind == "value":
                    layout.append((name, 1, False))
                    args.append(shard(value, rank, world))
                elif len(value) == world:
                    layout.append((name, 1, False))
                    args.append(value[rank])
                else:
                    # Another world size (one upstream part included): the worker reshards.
                    layout.append((name, len(value), True))
                    args.extend(value)
        return per_worker

    def _issue_run(self, op: ExecOp, group: WorkerGroup, stage: str) -> None:
        inputs = self._inputs(op, stage, group.world_size)
        results, refs = [], []
        for actor, (layout, args) in zip(group.actors, inputs, strict=True):
            meta = {
                "stage": stage,
                "step": op.step,
                "planned_s": max(0.0, op.planned_s - self.overhead_s),
                "memory_gb": op.memory_gb,
                "inputs": layout,
                "share_on_device": stage in self._share,
            }
            result, stats = actor.run.remote(meta, *args)
            results.append(result)
            refs.append(stats)
        self._results[(op.step, stage)] = ("refs", results)
        self._track(
            op, refs, [(group.role, r) for r in range(group.world_size)], group.gpus_per_worker
        )

    def _issue_sync(self, op: ExecOp) -> None:
        binding = self.bindings.get(op.stage or "", StageBinding(sync="rehearse"))
        dst = self.groups[op.role or ""]
        src = self.groups[op.from_role or ""]
        if binding.sync in ("fn", "rehearse", None):
            self._issue_run(op, dst, op.stage or "")
            return
        name = op.stage or ""
        workers = [(src.role, 0)] + [(dst.role, r) for r in range(dst.world_size)]
        if binding.sync == "ipc":
            refs, workers = self._ipc_calls(name, binding, src, dst)
        elif binding.sync == "store":
            weights, src_stats = src.actors[0].export_weights.remote()
            refs = [src_stats] + [a.import_weights.remote(weights) for a in dst.actors]
        else:  # broadcast in the stand-alone weight-sync group joined at start
            refs = [src.actors[0].broadcast_weights.remote(binding.group, name)] + [
                a.broadcast_weights.remote(binding.group, name) for a in dst.actors
            ]
        self._track(op, refs, workers, dst.gpus_per_worker)

    @staticmethod
    def _ipc_calls(
        name: str, binding: StageBinding, src: WorkerGroup, dst: WorkerGroup
    ) -> tuple[list[Any], list[tuple[str, int]]]:
        """One chain per source worker: export bucket i, its imports, then bucket i+1...

        Every call is submitted at once; Ray starts each export only when the
        previous bucket's imports are done (they are its arguments), so a
        source holds one bucket at a time and the driver never waits.
        """
        refs: list[Any] = []
        workers: list[tuple[str, int]] = []
        for source, targets in binding.pairs.items():
            after: list[Any] = []
            for index in range(binding.buckets):
                shared = src.actors[source].export_bucket.remote(name, index, *after)
                after = [dst.actors[t].import_bucket.remote(shared) for t in targets]
                refs += after
                workers += [(dst.role, t) for t in targets]
            refs.append(src.actors[source].release_export.remote(name, *after))
            workers.append((src.role, source))
        return refs, workers

    def _issue_driver(self, op: ExecOp) -> None:
        stage = op.stage or ""
        binding = self.bindings.get(stage, StageBinding())
        sources: dict[str, tuple[str, Any]] = {}
        for name in binding.upstream:
            found = self._results.get((op.step, name))
            if found is not None:
                sources[name] = found
        fn = binding.driver_fn
        info = WorkerInfo(role="driver", rank=0, world_size=1)
        timeout = self.timeout_s
        scale = self.time_scale
        state = self.driver_state
        work_s = max(0.0, op.planned_s - self.overhead_s)

        def call() -> tuple[Any, dict[str, Any]]:
            upstream = {
                name: value if kind == "value" else gather(ray.get(list(value), timeout=timeout))
                for name, (kind, value) in sources.items()
            }
            ctx = StageContext(step=op.step, stage=stage, info=info, state=state)
            t0 = time.time()
            result = run_stage(fn, ctx, upstream, rehearse_s=work_s * scale)
            t1 = time.time()
            stats: dict[str, Any] = {"worker_s": t1 - t0, "t_start": t0, "t_end": t1, "bytes": 0}
            if ctx.metrics:
                stats["metrics"] = dict(ctx.metrics)
            return result, stats

        self._track(op, [], [("driver", 0)], 1)
        flight = self._in_flight[op.id]
        flight.stats = [None]
        flight.future = self._pool.submit(call)
