"""Role workers: the Ray actors that hold a role's state and run its stages.

Each GPU role has ``world_size`` workers, each one Ray actor pinned to its
planned node and GPUs; a CPU role's workers need no GPU. A worker holds the
*user state* built once by the role's setup function, runs stage callables on
it, and executes the plan's offload/reload/weight-sync calls.

Binding stages. A stage's implementation is a plain Python callable: the
Stage's ``fn`` (the decorator API) or an entry of the ``implementations``
mapping given to :func:`rlplex.runtime.executor.execute`. It is called as::

    fn(ctx, **upstream)

Hamilton-style: ``ctx`` (a :class:`StageContext`; omit the parameter if you do
not need it) and one keyword per upstream stage (its ``after`` list) that the
function names as a parameter (all of them if it takes ``**kwargs``). Each
upstream value is *this worker's shard* of that stage's gathered result (see
:mod:`rlplex.runtime.data`); the return value is this worker's part of the
result. Driver stages get whole values and return whole values.

Setup. ``setups[role]`` is called once per worker, on the worker, as
``setup(info)`` with a :class:`WorkerInfo`; its return value is ``ctx.state``.
If it is an :class:`~rlplex.stages.offload.Offloadable` (or has an
``offloader`` attribute holding one) the worker calls it for the plan's
offload/reload ops; otherwise a :class:`~rlplex.stages.offload.BookkeepingOffload`
keeps residency. For weight sync, the source's state (or its offloader) offers
``named_weights() -> dict[str, Tensor]``; the destination takes them through
its engine's ``load_weights(items)`` (``(name, tensor)`` pairs, as vLLM's) or,
failing that, by an in-place copy into its own ``named_weights()``. They move
in buckets (:mod:`rlplex.stages.weight_sync`): shared on the device between
colocated roles (CUDA IPC; shared memory on CPU), broadcast between device sets.

Data parallelism. A role with several workers, a setup and a stage of kind
``train`` gets a process group among its workers before its setup runs
(``info.group``, see :meth:`RoleWorker.join_role_group`); the setup hands it to
its trainer, which all-reduces gradients over it
(:class:`~rlplex.stages.optim.TorchTrainer`).

Results. When every consumer of a stage runs on this worker's devices, its
device tensors stay there (:func:`rlplex.runtime.data.share_on_device`): the
consumers get a handle and copy once on the device; the buffer is freed when
the step is recorded (:meth:`RoleWorker.release_step`).

Rehearsal. A stage with no implementation sleeps its planned seconds times
``time_scale``; with a real GPU it also holds its planned ``memory_gb`` while
it sleeps. Transfers without a backend sleep likewise.

A worker runs compute calls (stages, weight sync) and transfer calls
(offload/reload) in two Ray concurrency groups of one thread each, so a
prefetch can overlap a stage of the same role, as planned.

Memory. On a GPU each call's stats carry its device memory in bytes
(:mod:`rlplex.runtime.memory_stats`): compute calls the peak allocated over
their own window (``peak_allocated_bytes``), which an overlapping transfer
does not reset; every call the memory allocated and reserved when it ended
(``allocated_bytes``: for a transfer, what is resident after it;
``reserved_bytes``) and, where ``pynvml`` imports, what the driver counts as
used by this process (``process_used_bytes``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import ray

from rlplex.resources.cluster import BYTES_PER_GB
from rlplex.runtime.context import StageContext, WorkerInfo, call_stage
from rlplex.runtime.data import (
    release_on_device,
    reshard,
    share_on_device,
    take_on_device,
)
from rlplex.runtime.errors import RemoteStageError
from rlplex.runtime.memory_stats import MemorySource, MemoryTracker, Window, cuda_memory
from rlplex.stages.offload import BookkeepingOffload, Offloadable, find_offloadable

LOGICAL_GPUS_ENV = "RLPLEX_LOGICAL_GPUS"
"""Set to ``1`` in the workers' environment when Ray's GPUs are logical: workers hide CUDA."""


def run_stage(
    fn: Callable[..., Any] | None,
    ctx: StageContext,
    upstream: Mapping[str, Any],
    *,
    rehearse_s: float,
    memory_gb: float = 0.0,
) -> Any:
    """Call ``fn`` (None: rehearse ``rehearse_s`` seconds holding ``memory_gb``).

    Raises:
        RemoteStageError: whatever it raised, naming ``ctx``'s stage, step,
            role and rank, with the traceback.
    """
    try:
        if fn is None:
            rehearse(rehearse_s, memory_gb)
            return None
        return call_stage(fn, ctx, upstream)
    except Exception as exc:
        raise RemoteStageError(
            ctx.stage,
            ctx.step,
            ctx.role,
            ctx.rank,
            f"{type(exc).__name__}: {exc}",
            traceback.format_exc(),
        ) from None


def _cuda_ready() -> bool:
    """A real NVIDIA driver is present (cheap: avoids importing torch for nothing)."""
    return os.path.exists("/proc/driver/nvidia/version") and bool(
        os.environ.get("CUDA_VISIBLE_DEVICES")
    )


def rehearse(seconds: float, memory_gb: float) -> None:
    """Sleep ``seconds``; on a real GPU also hold ``memory_gb`` while sleeping."""
    block = None
    if memory_gb > 0 and _cuda_ready():
        import torch

        if torch.cuda.is_available():
            block = torch.empty(int(memory_gb * BYTES_PER_GB), dtype=torch.uint8, device="cuda")
    if seconds > 0:
        time.sleep(seconds)
    del block


class RoleWorker:
    """One worker of a role (wrapped with ``ray.remote`` by the worker group)."""

    def __init__(
        self,
        info: WorkerInfo,
        setup: Callable[[WorkerInfo], Any] | None,
        implementations: Mapping[str, Callable[..., Any]],
        time_scale: float = 1.0,
        visible_gpus: Sequence[str] | None = None,
        memory: MemorySource | None = None,
    ) -> None:
        """``memory``: where device memory is read (tests); None: the CUDA device, if any."""
        if visible_gpus:
            # A worker driving several GPUs sits in the bundle of its first one; the
            # others are named here (Ray only knows about the bundle's share).
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(visible_gpus)
        if os.environ.get(LOGICAL_GPUS_ENV) == "1":
            # Ray's GPUs are logical (tests, rehearsals on a laptop): hide the real ones, so
            # that every worker runs on CPU tensors alike instead of the one whose logical id
            # happens to name a real GPU.
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        self.info = info
        self._setup = setup
        self._impls = dict(implementations)
        self._time_scale = time_scale
        self.state: Any = None
        self.offloader: Offloadable = BookkeepingOffload(resident=info.initial_residency)
        self._has_backend = False
        self._sync_groups: dict[str, Any] = {}
        self._sync_layouts: dict[str, list[Any]] = {}
        self._exports: dict[str, Any] = {}
        self._device_results: dict[int, list[Any]] = {}
        self._memory_source = memory
        self._tracker: MemoryTracker | None = None
        self._tracker_lock = threading.Lock()
        self._sync_windows: dict[str, Window] = {}

    # -- control ---------------------------------------------------------------

    @ray.method(concurrency_group="control")
    def describe(self) -> dict[str, Any]:
        """Where the worker landed: Ray node id, GPU ids, pid, host."""
        ctx = ray.get_runtime_context()
        return {
            "role": self.info.role,
            "rank": self.info.rank,
            "node_id": ctx.get_node_id(),
            "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }

    @ray.method(concurrency_group="compute")
    def setup(self) -> dict[str, Any]:
        """Run the role's setup function; returns the state sizes in bytes."""
        gpu_ids = (
            tuple(os.environ.get("CUDA_VISIBLE_DEVICES", "").split(","))
            if self.info.devices
            else ()
        )
        info = WorkerInfo(**{**self.info.__dict__, "gpu_ids": tuple(g for g in gpu_ids if g)})
        self.info = info
        if self._setup is not None:
            try:
                self.state = self._setup(info)
            except Exception as exc:
                raise RemoteStageError(
                    "setup",
                    -1,
                    info.role,
                    info.rank,
                    f"{type(exc).__name__}: {exc}",
                    traceback.format_exc(),
                ) from None
            backend = find_offloadable(self.state)
            if backend is not None:
                self.offloader = backend
                self._has_backend = True
        return {
            "state_bytes": self.offloader.state_bytes(),
            "resident": sorted(self.offloader.resident_states()),
        }

    # -- stages ------------------------------------------------------------------

    def _memory(self) -> MemoryTracker | None:
        """The device's memory tracker, made once torch sees a GPU (None: no GPU, no figures)."""
        with self._tracker_lock:
            if self._tracker is None:
                source = self._memory_source or cuda_memory()
                if source is not None:
                    self._tracker = MemoryTracker(source)
            return self._tracker

    def _open_window(self) -> Window | None:
        tracker = self._memory()
        return tracker.open() if tracker is not None else None

    def _close_window(self, window: Window | None) -> dict[str, int]:
        """The memory fields of a compute call that opened ``window`` (None: no peak)."""
        tracker = self._memory()
        if tracker is None:
            return {}
        if window is None:
            return tracker.reading().stats()
        return tracker.close(window).stats()

    @contextlib.contextmanager
    def _window(self) -> Iterator[dict[str, int]]:
        """A compute call's memory window; the dict gets the call's memory fields on exit."""
        window = self._open_window()
        fields: dict[str, int] = {}
        try:
            yield fields
        except BaseException:
            with contextlib.suppress(Exception):  # the call's own error is the one to report
                self._close_window(window)
            raise
        fields.update(self._close_window(window))

    def _reading(self) -> dict[str, int]:
        """The memory fields of a transfer: the memory now, no peak, nothing reset."""
        tracker = self._memory()
        return tracker.reading().stats() if tracker is not None else {}

    @staticmethod
    def _stats(
        t0: float,
        t1: float,
        moved: int = 0,
        metrics: Mapping[str, Any] | None = None,
        memory: Mapping[str, int] | None = None,
    ) -> dict[str, Any]:
        stats: dict[str, Any] = {"worker_s": t1 - t0, "t_start": t0, "t_end": t1, "bytes": moved}
        stats.update(memory or {})
        if metrics:
            stats["metrics"] = dict(metrics)
        return stats

    @ray.method(num_returns=2, concurrency_group="compute")
    def run(self, meta: dict[str, Any], *inputs: Any) -> tuple[Any, dict[str, Any]]:
        """Run one stage; ``meta["inputs"]`` says how ``inputs`` map to upstream names.

        Each entry is ``(name, count, whole)``: ``count`` positional inputs are
        that upstream result's parts; ``whole`` False: the one part is already
        this worker's shard; True: they are all of the upstream role's parts,
        gathered and resharded here (also when there is one part: a result of
        a one-worker role is split among this role's workers).
        """
        upstream: dict[str, Any] = {}
        position = 0
        for name, count, whole in meta["inputs"]:
            parts = [take_on_device(p) for p in inputs[position : position + count]]
            position += count
            upstream[name] = (
                reshard(parts, self.info.rank, self.info.world_size) if whole else parts[0]
            )
        stage, step = meta["stage"], meta["step"]
        ctx = StageContext(step=step, stage=stage, info=self.info, state=self.state)
        with self._window() as memory:
            t0 = time.time()
            result = run_stage(
                self._impls.get(stage),
                ctx,
                upstream,
                rehearse_s=meta["planned_s"] * self._time_scale,
                memory_gb=meta.get("memory_gb", 0.0),
            )
            if meta.get("share_on_device"):
                # Every consumer is on this worker's devices: keep the tensors there.
                result, keep = share_on_device(result)
                if keep is not None:
                    self._device_results.setdefault(step, []).append(keep)
            t1 = time.time()
        return result, self._stats(t0, t1, metrics=ctx.metrics, memory=memory)

    @ray.method(concurrency_group="control")
    def release_step(self, step: int) -> int:
        """Free the results of steps up to ``step`` kept on the device; returns how many."""
        done = [s for s in self._device_results if s <= step]
        for s in done:
            for keep in self._device_results.pop(s):
                release_on_device(keep)
        return len(done)

    # -- transfers ---------------------------------------------------------------

    @ray.method(concurrency_group="transfer")
    def transfer(
        self, kind: str, states: Sequence[str], dead: bool, planned_s: float
    ) -> dict[str, Any]:
        """Offload or reload ``states``; without a backend, rehearse the planned time."""
        t0 = time.time()
        try:
            if kind == "offload":
                moved = self.offloader.offload(states, dead=dead)
            else:
                moved = self.offloader.reload(states)
            if not self._has_backend:
                rehearse(planned_s * self._time_scale, 0.0)
        except Exception as exc:
            raise RemoteStageError(
                f"{kind} {','.join(states)}",
                -1,
                self.info.role,
                self.info.rank,
                f"{type(exc).__name__}: {exc}",
                traceback.format_exc(),
            ) from None
        t1 = time.time()
        stats = self._stats(t0, t1, moved, memory=self._reading())
        stats["resident"] = sorted(self.offloader.resident_states())
        phases = getattr(self.offloader, "last_phases", None)
        if self._has_backend and phases:
            # Where the transfer's time went (TorchOffload: copies, handing memory back).
            stats["phases"] = dict(phases)
        return stats

    @ray.method(concurrency_group="control")
    def offload_calls(self) -> list[tuple[str, tuple[str, ...], bool]]:
        """The offload/reload calls seen by a bookkeeping backend (for tests and rehearsals)."""
        return list(getattr(self.offloader, "calls", []))

    # -- weight sync -------------------------------------------------------------

    def _named_weights(self) -> dict[str, Any] | None:
        for holder in (self.state, self.offloader):
            getter = getattr(holder, "named_weights", None)
            if callable(getter):
                try:
                    return dict(getter())
                except TypeError:  # e.g. a vLLM rollout: it has a loader, not named tensors
                    return None
        return None

    def _weight_loader(self) -> Any:
        """How this worker takes new weights: its engine's ``load_weights``, else in place."""
        for holder in (self.state, self.offloader):
            loader = getattr(holder, "load_weights", None)
            if callable(loader):
                return loader
        named = self._named_weights()
        if named is None:
            return None
        from rlplex.stages.weight_sync import copy_into

        return copy_into(named)

    def _weights_device(self) -> Any:
        import torch

        for tensor in (self._named_weights() or {}).values():
            return tensor.device
        if self.info.devices and torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    @ray.method(concurrency_group="control")
    def can_sync_weights(self, side: str = "source") -> bool:
        """Whether this worker can send (``source``) or take (``destination``) weights."""
        if side == "source":
            return self._named_weights() is not None
        return self._weight_loader() is not None

    @ray.method(concurrency_group="control")
    def weight_buckets(self, bucket_bytes: int) -> list[Any]:
        """The bucket layout of this worker's weights (see :mod:`rlplex.stages.weight_sync`)."""
        from rlplex.stages.weight_sync import buckets_of

        return buckets_of(self._named_weights() or {}, bucket_bytes)

    @ray.method(concurrency_group="control")
    def prepare_sync(self, key: str, buckets: Sequence[Any]) -> bool:
        """Remember the bucket layout of weight sync ``key`` (the source's, made once)."""
        self._sync_layouts[key] = list(buckets)
        return True

    @ray.method(concurrency_group="compute")
    def export_bucket(self, key: str, index: int, *after: Any) -> Any:
        """Pack bucket ``index`` of sync ``key`` in shared device memory; returns its handle.

        ``after``: the previous bucket's imports (Ray runs this once they are
        done), so the previous bucket is freed here and at most one exists.
        """
        from rlplex.stages.weight_sync import share_packed

        self._release_export(key)
        if index == 0:
            # One window over the whole sync on the source, closed by release_export.
            stale = self._sync_windows.pop(key, None)  # a sync that failed midway
            if stale is not None:
                self._close_window(stale)
            window = self._open_window()
            if window is not None:
                self._sync_windows[key] = window
        named = self._named_weights() or {}
        shared, flat = share_packed(named, self._sync_layouts[key][index])
        self._exports[key] = (shared, flat)
        return shared

    def _release_export(self, key: str) -> None:
        from rlplex.stages.weight_sync import release

        previous = self._exports.pop(key, None)
        if previous is not None:
            release(previous[0])

    @ray.method(concurrency_group="compute")
    def release_export(self, key: str, *after: Any) -> dict[str, Any]:
        """Free the last exported bucket of ``key`` (after its imports); stats of the whole sync."""
        t0 = time.time()
        self._release_export(key)
        t1 = time.time()
        memory = self._close_window(self._sync_windows.pop(key, None))
        moved = sum(b.payload_bytes for b in self._sync_layouts.get(key, []))
        return self._stats(t0, t1, moved, memory=memory)

    @ray.method(concurrency_group="compute")
    def import_bucket(self, shared: Any) -> dict[str, Any]:
        """Copy a shared bucket into this worker's weights through its loader."""
        from rlplex.stages.weight_sync import load_shared

        with self._window() as memory:
            t0 = time.time()
            engine_load = getattr(self.state, "load_shared", None)
            if callable(engine_load):  # e.g. vLLM: the handle goes to its own worker processes
                moved = int(engine_load(shared))
            else:
                moved = load_shared(shared, self._weight_loader())
            t1 = time.time()
        return self._stats(t0, t1, moved, memory=memory)

    @ray.method(num_returns=2, concurrency_group="compute")
    def export_weights(self) -> tuple[Any, dict[str, Any]]:
        """The weights as CPU tensors, through the object store (``weight_sync="store"``)."""
        with self._window() as memory:
            t0 = time.time()
            weights = {
                k: v.detach().to("cpu", copy=True) for k, v in (self._named_weights() or {}).items()
            }
            moved = sum(v.numel() * v.element_size() for v in weights.values())
            t1 = time.time()
        return weights, self._stats(t0, t1, moved, memory=memory)

    @ray.method(concurrency_group="compute")
    def import_weights(self, weights: Mapping[str, Any]) -> dict[str, Any]:
        """Load ``weights`` (CPU tensors by name) onto this worker's device."""
        with self._window() as memory:
            t0 = time.time()
            device = self._weights_device()
            self._weight_loader()((k, v.to(device)) for k, v in sorted(weights.items()))
            moved = sum(v.numel() * v.element_size() for v in weights.values())
            t1 = time.time()
        return self._stats(t0, t1, moved, memory=memory)

    @ray.method(concurrency_group="control")
    def sync_address(self) -> tuple[str, int]:
        """An address and free port for a weight-sync process group rooted here."""
        host = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return host, port

    @ray.method(concurrency_group="compute")
    def join_sync_group(
        self, key: str, host: str, port: int, rank: int, size: int, timeout_s: float
    ) -> bool:
        """Join a stand-alone process group (gloo on CPU, NCCL on GPU) used only for weight sync.

        Stand-alone (not ``init_process_group``) so it never collides with the
        default group of the user's training framework.
        """
        import datetime

        import torch.distributed as dist

        on_gpu = self._weights_device().type == "cuda"
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore(host, port, size, rank == 0, timeout=timeout)
        if on_gpu:
            group = dist.ProcessGroupNCCL(store, rank, size)
        else:
            group = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._sync_groups[key] = (group, rank)
        return True

    @ray.method(concurrency_group="compute")
    def join_role_group(self, host: str, port: int, timeout_s: float) -> bool:
        """Join the role's data-parallel group (rank = this worker's) before the setup runs.

        The group is stand-alone, like the weight-sync ones, and reaches the
        setup function as ``info.group`` (train stages all-reduce gradients over
        it). Gloo on CPU, NCCL when the worker drives a real GPU.
        """
        import dataclasses
        import datetime

        import torch.distributed as dist

        rank, size = self.info.rank, self.info.world_size
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore(host, port, size, rank == 0, timeout=timeout)
        if self.info.devices and _cuda_ready():
            group = dist.ProcessGroupNCCL(store, rank, size)
        else:
            group = dist.ProcessGroupGloo(store, rank, size, timeout)
        self.info = dataclasses.replace(self.info, group=group)
        return True

    @ray.method(concurrency_group="compute")
    def broadcast_weights(self, key: str, sync: str) -> dict[str, Any]:
        """Broadcast sync ``sync``'s buckets in group ``key`` (root: group rank 0, the source)."""
        from rlplex.stages.weight_sync import broadcast_buckets

        group, rank = self._sync_groups[key]
        with self._window() as memory:
            t0 = time.time()
            moved = broadcast_buckets(
                group,
                self._sync_layouts[sync],
                source=self._named_weights() if rank == 0 else None,
                loader=None if rank == 0 else self._weight_loader(),
                device=self._weights_device(),
            )
            t1 = time.time()
        return self._stats(t0, t1, moved, memory=memory)

    @ray.method(concurrency_group="control")
    def ping(self) -> bool:
        return True
