"""The plan-following dispatcher: issue each op when everything before it is done.

The schedule (:mod:`rlplex.runtime.schedule`) gives every op its complete set
of predecessors (plan edges, step barrier, staleness gate, per-device lane
order), so the dispatcher is a plain event loop over a ready queue:

1. issue every ready op, earliest planned start first, as remote calls on its
   role's workers (``run`` on every worker, SPMD; ``offload``/``reload`` on the
   transfer thread of every worker; ``weight_sync`` as chained bucket
   exports/imports shared on the device (``ipc``), a bucketed broadcast, an
   export/import through the object store, the user's function, or a rehearsal);
2. wait (``ray.wait``, bounded by the earliest op deadline and by ``POLL_S``)
   until as many calls are done as the op closest to done still needs, fetch
   their small stats objects, and when all calls of an op are done, release
   the ops waiting for it;
3. record the finished ops once the ops they released are issued, so the
   record (and the caller's ``on_step``) never delays a dispatch.

Dispatch is the driver's critical path: per-op bookkeeping is made once per
schedule (positions, dependency counts, successor lists), an op's calls share
one argument object, and arguments are plain values (cheap for Ray to
serialize). What is left is Ray's own cost per ``.remote`` call.

Stage results stay in the object store (their device tensors on the device
when every consumer shares the producer's devices): each worker's result is an
ObjectRef handed straight to the next stage's workers (shard ``i`` to worker
``i`` when both roles have the same world size; otherwise every part goes to
every worker, which gathers and reshards). Only driver stages fetch values.

Every wait is bounded: an op still running after :meth:`Dispatcher.op_limit_s`
(``HANG_FACTOR`` times its planned duration, at least ``MIN_HANG_S``, at most
``timeout_s``) raises :class:`OpTimeoutError`, so a hung worker is noticed in
a time the plan predicts rather than after a fixed ten minutes; a dead worker surfaces as
:class:`WorkerDiedError` within ``POLL_S`` of Ray reporting it; a stage exception as
:class:`StageFailedError` naming stage, step, role and rank (remote traceback
in the log). Ctrl-C stops issuing, lets the ops in flight finish, and raises
:class:`RunInterrupted`; a second Ctrl-C stops at once.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import heapq
import time
from collections import defaultdict, deque
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
from rlplex.runtime.schedule import ExecOp, RunSchedule
from rlplex.runtime.worker import run_stage

log = structlog.get_logger("rlplex.runtime")

HANG_FACTOR = 10.0
"""An op running this many times its planned duration is taken to be hung."""
MIN_HANG_S = 60.0
"""Never call an op hung sooner than this (short ops, first calls that compile or load)."""
POLL_S = 0.05
"""Longest wait between looks at the calls in flight (a failed call is seen this soon)."""
DRIVER_POLL_S = 0.001
"""The same while a driver stage runs beside worker calls (its end is seen this soon)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(slots=True)
class _InFlight:
    """An op issued and not yet done: its calls, what came back, when it is late."""

    op: ExecOp
    """The op."""
    index: int
    """Its position in the schedule's ops (the index ``_dependents`` and ``_waiting`` use)."""
    workers: list[tuple[str, int]]
    """(role, rank) of each call, in call order (``("driver", 0)`` for a driver stage)."""
    issued_s: float
    """When it was issued, on the recorder's clock (seconds)."""
    dispatch_s: float
    """Seconds from when its dependencies were done to when it was issued."""
    deadline: float
    """``time.perf_counter()`` past which it is hung (:meth:`Dispatcher.op_limit_s`)."""
    gpus_per_worker: int
    """GPUs each worker drives, for the record (1 for a driver stage)."""
    stats: list[Any] = field(default_factory=list)
    """Each call's stats as it returns, None until it has."""
    left: int = 0
    """Calls not returned yet; the op is done at 0."""
    future: cf.Future[Any] | None = None
    """A driver stage's call in the thread pool; None for worker calls, or once collected."""


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
    schedule: RunSchedule, bindings: Mapping[str, StageBinding], groups: Mapping[str, WorkerGroup]
) -> set[str]:
    """Stages run by a role whose every consumer runs on a role with the same devices."""
    devices: dict[str, set[tuple[int, ...]]] = defaultdict(set)
    roles: dict[str, str] = {}
    for op in schedule.ops:
        if op.work.kind == OpKind.RUN and op.work.stage:
            devices[op.work.stage].add(tuple(sorted(op.work.devices)))
            roles[op.work.stage] = op.work.role or ""
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
    """Runs a :class:`RunSchedule` on worker groups and feeds a :class:`Recorder`."""

    def __init__(
        self,
        schedule: RunSchedule,
        groups: Mapping[str, WorkerGroup],
        recorder: Recorder,
        bindings: Mapping[str, StageBinding],
        *,
        timeout_s: float,
        time_scale: float = 1.0,
        driver_state: Any = None,
        on_step: Callable[[int, dict[str, Any]], None] | None = None,
        on_ops: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.schedule = schedule
        self.groups = groups
        self.recorder = recorder
        self.bindings = bindings
        self.timeout_s = timeout_s
        self.time_scale = time_scale
        self.driver_state = driver_state
        self.on_step = on_step
        self.on_ops = on_ops
        # Per-op bookkeeping by position in the schedule (its dispatch priority), made
        # once: completing an op is then list arithmetic, not dict and tuple churn.
        self._ops: tuple[ExecOp, ...] = tuple(schedule.ops)
        self._index = {op.key: i for i, op in enumerate(self._ops)}
        self._waiting = [len(op.deps) for op in self._ops]
        dependents: list[list[int]] = [[] for _ in self._ops]
        for i, op in enumerate(self._ops):
            for dep in op.deps:
                j = self._index.get(dep)
                if j is not None:  # an unknown dependency never finishes: the op never starts
                    dependents[j].append(i)
        self._dependents = [tuple(d) for d in dependents]
        self._ready: list[int] = []
        self._ready_at = [0.0] * len(self._ops)
        self._in_flight: dict[str, _InFlight] = {}
        self._ref_owner: dict[Any, tuple[_InFlight, int]] = {}
        self._finished: deque[tuple[_InFlight, float]] = deque()
        """Ops done and released but not yet recorded (recorded after the next issue)."""
        self._methods: dict[tuple[str, str], list[Any]] = {}
        self._workers: dict[str, list[tuple[str, int]]] = {}
        self._results: dict[tuple[int, str], tuple[str, Any]] = {}
        self._share = _share_on_device(schedule, bindings, groups)
        self._share_roles = sorted(
            {op.work.role for op in schedule.ops if op.work.stage in self._share and op.work.role}
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
        for i, op in enumerate(self._ops):
            if not op.deps:
                heapq.heappush(self._ready, i)
                self._ready_at[i] = now
        stopping = False
        total = len(self._ops)
        shown: list[str] | None = None
        try:
            while self._done < total:
                try:
                    if not stopping:
                        while self._ready:
                            self._issue(self._ops[heapq.heappop(self._ready)])
                    # Ops that finished are recorded once their successors are issued:
                    # the record (and the user's on_step) is off the critical path.
                    self._record_finished()
                    if self.on_ops is not None and not stopping:
                        running = sorted(self._in_flight)
                        if running != shown:
                            shown = running
                            self.on_ops(running)
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
            self._record_finished()
            if stopping:
                raise RunInterrupted(
                    f"interrupted by the user after {self._done} of {total} ops;"
                    f" {len(self.recorder.flushed)} complete step(s) recorded"
                )
        except BaseException:
            # Keep every op that finished before the failure; the failure itself wins.
            with contextlib.suppress(Exception):
                self._record_finished()
            raise
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def _wait_some(self) -> None:
        flights = self._in_flight.values()
        deadline = min(f.deadline for f in flights)
        timeout = max(0.0, deadline - time.perf_counter())
        if self._ref_owner:
            refs = list(self._ref_owner)
            futures = any(f.future is not None for f in flights)
            # No op can finish before `least` more of its calls are done, so wait for that
            # many at once (one wake-up per op, like a plain ray.get of its calls). A failed
            # or dead worker's call is ready too; waking at least every POLL_S sees it while
            # the rest of its op still runs. With driver stages running, poll faster.
            least = min(f.left for f in flights if f.future is None and f.left > 0)
            wait_s = min(timeout, DRIVER_POLL_S if futures else POLL_S)
            ready, rest = ray.wait(refs, num_returns=least, timeout=wait_s)
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready.extend(more)
            if ready:
                self._collect(ready)
        else:
            futures_ = [f.future for f in flights if f.future is not None]
            cf.wait(futures_, timeout=timeout, return_when=cf.FIRST_COMPLETED)
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
                    flight, index = self._ref_owner[ref]
                    raise self._failure(flight, index, exc) from None
        for ref, stats in zip(ready, values, strict=True):
            flight, index = self._ref_owner.pop(ref)
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
                stage=op.work.stage or op.work.kind,
                step=op.step,
                role=role,
                rank=rank,
                traceback=cause.tb,
            )
            return StageFailedError(
                stage=op.work.stage or f"{op.work.kind} {op.work.state}",
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
            stage=op.work.stage or f"{op.work.kind} {op.work.state}",
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
        self._results[(op.step, op.work.stage or "")] = ("value", result)
        flight.stats = [stats]
        flight.future = None
        self._complete(flight)

    def _complete(self, flight: _InFlight) -> None:
        """Release the ops waiting for this one; it is recorded after they are issued."""
        end = self.recorder.now()
        del self._in_flight[flight.op.id]
        self._done += 1
        waiting = self._waiting
        for dep in self._dependents[flight.index]:
            waiting[dep] -= 1
            if waiting[dep] == 0:
                heapq.heappush(self._ready, dep)
                self._ready_at[dep] = end
        self._finished.append((flight, end))

    def _record_finished(self) -> None:
        """Record the ops done so far; finish the steps that completes."""
        while self._finished:
            # Taken off first: an op whose record fails (a full disk) is not tried again.
            flight, end = self._finished.popleft()
            finished = self.recorder.add(
                flight.op,
                flight.issued_s,
                end,
                [s for s in flight.stats if s is not None],
                gpus_per_worker=flight.gpus_per_worker,
                dispatch_s=flight.dispatch_s,
            )
            for step, metrics in finished:
                for key in [k for k in self._results if k[0] == step]:
                    del self._results[key]
                for role in self._share_roles:
                    for actor in self.groups[role].actors:
                        actor.release_step.remote(step)  # no reply needed
                if self.on_step is not None:
                    self.on_step(step, metrics)

    # -- issuing ------------------------------------------------------------------

    def _methods_of(self, group: WorkerGroup, name: str) -> list[Any]:
        """``actor.<name>`` of every worker of ``group``, looked up once."""
        key = (group.role, name)
        methods = self._methods.get(key)
        if methods is None:
            methods = self._methods[key] = [getattr(a, name) for a in group.actors]
        return methods

    def _workers_of(self, group: WorkerGroup) -> list[tuple[str, int]]:
        workers = self._workers.get(group.role)
        if workers is None:
            workers = self._workers[group.role] = [(group.role, r) for r in range(group.world_size)]
        return workers

    def _track(
        self, op: ExecOp, refs: Sequence[Any], workers: list[tuple[str, int]], gpus: int
    ) -> _InFlight:
        now = self.recorder.now()
        index = self._index[op.key]
        dispatch = now - self._ready_at[index]
        self.dispatch_latencies.append(dispatch)
        flight = _InFlight(
            op=op,
            index=index,
            workers=workers,
            issued_s=now,
            dispatch_s=dispatch,
            deadline=time.perf_counter() + self.op_limit_s(op),
            gpus_per_worker=gpus,
            stats=[None] * len(refs),
            left=len(refs),
        )
        self._in_flight[op.id] = flight
        owner = self._ref_owner
        for i, ref in enumerate(refs):
            owner[ref] = (flight, i)
        return flight

    def _issue(self, op: ExecOp) -> None:
        kind = op.work.kind
        if kind == OpKind.RUN:
            group = self.groups.get(op.work.role or "")
            if group is None:
                self._issue_driver(op)
            else:
                self._issue_run(op, group, op.work.stage or "")
        elif kind in TRANSFER_KINDS:
            group = self.groups[op.work.role or ""]
            # Plain values (the kind as text, not the enum) serialize fastest, once per op.
            args = (str(kind), [op.work.state], op.work.dead, op.planned_s)
            refs = [m.remote(*args) for m in self._methods_of(group, "transfer")]
            self._track(op, refs, self._workers_of(group), group.gpus_per_worker)
        elif kind == OpKind.WEIGHT_SYNC:
            self._issue_sync(op)
        else:  # pragma: no cover - the plan model allows no other kind
            raise PlanScheduleError(f"unknown op kind {op.work.kind!r}", op=op.id)

    def _inputs(
        self, op: ExecOp, upstream: Sequence[str], world: int
    ) -> tuple[list[tuple[str, int, bool]], list[list[Any]] | None]:
        """The (name, count, whole) layout, the same on every rank, and each rank's inputs.

        ``None`` for the inputs when the stage takes none.
        """
        layout: list[tuple[str, int, bool]] = []
        per_worker: list[list[Any]] | None = None
        for name in upstream:
            found = self._results.get((op.step, name))
            if found is None:
                continue
            if per_worker is None:
                per_worker = [[] for _ in range(world)]
            kind, value = found
            if kind == "value":
                layout.append((name, 1, False))
                for rank, args in enumerate(per_worker):
                    args.append(shard(value, rank, world))
            elif len(value) == world:
                layout.append((name, 1, False))
                for rank, args in enumerate(per_worker):
                    args.append(value[rank])
            else:
                # Another world size (one upstream part included): the worker reshards.
                layout.append((name, len(value), True))
                for args in per_worker:
                    args.extend(value)
        return layout, per_worker

    def _issue_run(self, op: ExecOp, group: WorkerGroup, stage: str) -> None:
        world = group.world_size
        binding = self.bindings.get(stage)
        layout, inputs = self._inputs(op, binding.upstream if binding else (), world)
        # One meta for every worker (the input layout is the same on every rank).
        meta = {
            "stage": stage,
            "step": op.step,
            # A rehearsal sleeps only the work: the real overhead happens anyway.
            "planned_s": op.work_s,
            "memory_gb": op.work.memory_gb,
            "inputs": layout,
            "share_on_device": stage in self._share,
        }
        methods = self._methods_of(group, "run")
        if inputs is None:
            pairs = [m.remote(meta) for m in methods]
        else:
            pairs = [m.remote(meta, *args) for m, args in zip(methods, inputs, strict=True)]
        self._results[(op.step, stage)] = ("refs", [result for result, _ in pairs])
        self._track(
            op, [stats for _, stats in pairs], self._workers_of(group), group.gpus_per_worker
        )

    def _issue_sync(self, op: ExecOp) -> None:
        binding = self.bindings.get(op.work.stage or "", StageBinding(sync="rehearse"))
        dst = self.groups[op.work.role or ""]
        src = self.groups[op.work.from_role or ""]
        if binding.sync in ("fn", "rehearse", None):
            self._issue_run(op, dst, op.work.stage or "")
            return
        name = op.work.stage or ""
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
        stage = op.work.stage or ""
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
        work_s = op.work_s

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

        flight = self._track(op, [], [("driver", 0)], 1)
        flight.stats = [None]
        flight.future = self._pool.submit(call)
