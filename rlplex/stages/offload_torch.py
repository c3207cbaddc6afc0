"""Offload plain torch modules and optimizers to pinned host memory and back.

The problem: colocated roles share a GPU, so one role's weights and optimizer
state must leave the device (and its memory must really return to the device,
since other roles run in other processes) while another role runs, and come
back fast. :class:`TorchOffload` does it the way RL frameworks do:

- the weights of the given modules are *flattened* once, at construction, into
  one contiguous device buffer per dtype (parameters become views into it),
  and the optimizer state likewise at its first offload (AdamW's moments are
  created at the first step), so an offload is one large copy per dtype
  instead of two or three per parameter;
- a pinned host buffer per state is allocated on first offload and kept
  (:class:`StorageMover`: pinning is slow, so it is done once), and each
  device storage is copied as raw bytes into its slice on a side CUDA stream;
  every state of one call is queued before the first wait, and a reload
  allocates the next state while the previous one's copy is in flight (the
  driver's allocation, after ``empty_cache`` gave the memory back, is then
  hidden behind a copy);
- the device storages are then resized to 0 bytes (the tensors stay valid
  Python objects: parameters keep their identity, so optimizers, hooks and
  weight-sync code still hold the right objects) and
  ``torch.cuda.empty_cache()`` hands the memory back to the driver, once per
  call;
- a reload resizes the storages back and copies the bytes in on the side
  stream; the executor calls it from its transfer thread, so a prefetch the
  plan overlaps with a stage of the same role really overlaps it.

A copied state whose tensors have not changed since the last reload (tensor
version counters unchanged) is *clean*: its offload frees memory without
copying. A *dead* offload drops the content; the next reload only
re-allocates. ``grads`` are scratch: offload sets ``param.grad = None``.

Without CUDA the tensors stay where they are; the calls keep residency and
report the bytes a copy would move (``copy_on_cpu=True`` moves CPU tensors
for real, which is how the tests check bit-identity on a CPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from rlplex.resources.cluster import COPIED_STATES as COPIED


def flatten_parameters(modules: Iterable[torch.nn.Module]) -> list[torch.Tensor]:
    """Re-home every parameter and buffer into one contiguous buffer per (device, dtype).

    Returns the flat buffers. Parameters keep their identity (``p.data`` is
    replaced by a view), so optimizers built before or after still work.
    """
    groups: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
    seen: set[int] = set()
    for module in modules:
        for tensor in [*module.parameters(), *module.buffers()]:
            if id(tensor) in seen:
                continue
            seen.add(id(tensor))
            groups.setdefault((tensor.device, tensor.dtype), []).append(tensor)
    flats = []
    for (device, dtype), tensors in groups.items():
        flat = torch.empty(sum(t.numel() for t in tensors), dtype=dtype, device=device)
        offset = 0
        for tensor in tensors:
            n = tensor.numel()
            view = flat[offset : offset + n].view_as(tensor)
            view.copy_(tensor.data)
            tensor.data = view
            offset += n
        flats.append(flat)
    return flats


def flatten_optimizer_state(optimizers: Iterable[torch.optim.Optimizer]) -> int:
    """Re-home every tensor of the optimizers' per-parameter state into one buffer per
    (device, dtype); returns how many buffers that made.

    The state dicts' entries are replaced by views of the flat buffers, which
    optimizers (AdamW's foreach and fused paths included) update in place, so
    an offload moves one large block instead of two tensors per parameter.
    Scalars (AdamW's ``step``) stay as they are.
    """
    groups: dict[tuple[torch.device, torch.dtype], list[tuple[dict[str, Any], str]]] = {}
    for optimizer in optimizers:
        for per_param in optimizer.state.values():
            for key, value in per_param.items():
                if isinstance(value, torch.Tensor) and value.numel() > 1:
                    groups.setdefault((value.device, value.dtype), []).append((per_param, key))
    for (device, dtype), entries in groups.items():
        flat = torch.empty(sum(d[k].numel() for d, k in entries), dtype=dtype, device=device)
        offset = 0
        for per_param, key in entries:
            value = per_param[key]
            n = value.numel()
            view = flat[offset : offset + n].view_as(value)
            view.copy_(value)
            per_param[key] = view
            offset += n
    return len(groups)


class StorageMover:
    """Moves the storages of one state's tensors to a pinned host buffer and back.

    ``tensors()`` lists the state's tensors (called at each move, so tensors
    created later, such as AdamW's moments after the first step, are found).
    The host buffer is allocated once, at the first copying offload, and kept
    for every later call: pinning memory is slow (DeepSpeed's own
    ``offload_states`` pins anew each time). Device storages are resized to 0
    bytes on offload and back on reload, so every tensor object (parameters,
    optimizer moments, DeepSpeed's flat partitions and the views into them)
    stays valid.

    Args:
        tensors: returns the state's tensors.
        pin_memory: pin the host buffer (fast asynchronous copies; needs CUDA).
        copy_on_cpu: move CPU tensors too (their bytes go to a separate host
            buffer and their storage is freed), so that CPU runs exercise the
            copy path; without it CPU tensors stay where they are.
        exclude: returns storages' ``data_ptr`` that belong to another state (never moved).
        trust_versions: skip the copy of a state whose tensors' version counters
            did not change since the host copy was made (*clean*). Only sound when
            every write goes through the listed tensors or views sharing their
            counters; engines that write through other aliases (DeepSpeed copies
            its fp32 partitions into a flat buffer that the parameters view
            through ``.data``) must turn it off.
        side_stream: returns the CUDA stream to copy on (None: one of its own). The
            states one call moves share one, so that their copies run one after another
            in the order queued and one wait covers them all (an H200 ran the 1.1B
            Llama's weights and AdamW state so at the pinned copy's speed).
    """

    def __init__(
        self,
        tensors: Callable[[], Sequence[torch.Tensor]],
        *,
        pin_memory: bool = True,
        copy_on_cpu: bool = False,
        exclude: Callable[[], set[int]] | None = None,
        trust_versions: bool = True,
        side_stream: Callable[[], Any] | None = None,
    ) -> None:
        self._tensors = tensors
        self._shared_stream = side_stream
        self._trust_versions = trust_versions
        self._pin = pin_memory
        self._copy_on_cpu = copy_on_cpu
        self._exclude = exclude
        self.storages: list[Any] = []
        """The state's device storages (``torch.UntypedStorage``), deduplicated."""
        self.nbytes: list[int] = []
        """Size of each storage, in bytes."""
        self.host: torch.Tensor | None = None
        """uint8 host buffer holding every storage back to back (kept across calls)."""
        self.host_valid = False
        """Whether ``host`` holds the current content."""
        self.versions = -1
        """Sum of the tensors' version counters when host and device last agreed."""
        self._stream: Any = None
        self._pending: Any = None
        self._freeing = False
        self._reloading = False
        self.physical = False
        """Whether the last offload really freed device (or, with ``copy_on_cpu``, host) memory."""

    def tensors(self) -> list[torch.Tensor]:
        out = list(self._tensors())
        if self._exclude is None:
            return out
        skip = self._exclude()
        return [t for t in out if t.untyped_storage().data_ptr() not in skip]

    def resident_bytes(self) -> int:
        return sum(n for _, n in _unique_storages(self.tensors()))

    def _moves(self, tensors: Sequence[torch.Tensor]) -> bool:
        return bool(tensors) and (tensors[0].is_cuda or self._copy_on_cpu)

    def _side_stream(self) -> Any:
        if self._shared_stream is not None:
            return self._shared_stream()
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        return self._stream

    def _host_buffer(self, total: int, on_cuda: bool) -> torch.Tensor:
        if self.host is None or self.host.numel() < total:
            self.host = torch.empty(total, dtype=torch.uint8, pin_memory=self._pin and on_cuda)
        return self.host

    def offload(self, dead: bool) -> int:
        """Free the state's storages; returns the bytes copied to the host."""
        moved = self.begin_offload(dead)
        self.end_offload()
        return moved

    def begin_offload(self, dead: bool) -> int:
        """Start copying the state to the host (asynchronously on CUDA); returns the bytes.

        :meth:`end_offload` waits for the copy and frees the storages; between the
        two, other states' copies can be queued, so that several states leave in one
        stream of copies with one wait."""
        tensors = self.tensors()
        storages = _unique_storages(tensors)
        moves = self._moves(tensors)
        # Refused before any bookkeeping changes: the state stays as it was.
        for storage, _ in storages if moves else ():
            if not storage.resizable():
                raise RuntimeError(
                    f"cannot free a storage of {storage.nbytes()} bytes: it is not resizable"
                    " (memory that torch does not own, e.g. from numpy or DLPack)"
                )
        total = sum(n for _, n in storages)
        version = _version(tensors)
        clean = (
            self._trust_versions
            and self.host_valid
            and self.versions == version
            and self.nbytes == [n for _, n in storages]
        )
        self.storages = [s for s, _ in storages]
        self.nbytes = [n for _, n in storages]
        copy = 0 if dead or clean else total
        self.physical = moves
        self.versions = version
        if not self.physical:
            # Nothing to free on the host; keep the bookkeeping honest.
            self.host_valid = not dead
            return copy
        on_cuda = tensors[0].is_cuda
        if copy:
            host = self._host_buffer(total, on_cuda)
            if on_cuda:
                stream = self._side_stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    _copy_storages_to(host, storages)
                self._pending = stream
            else:
                _copy_storages_to(host, storages)
            self.host_valid = True
        elif dead:
            self.host_valid = False
        self._freeing = True
        return copy

    def end_offload(self) -> None:
        """Wait for :meth:`begin_offload`'s copy, then free the storages."""
        self._wait()
        if not self._freeing:
            return
        self._freeing = False
        for storage in self.storages:
            storage.resize_(0)

    def reload(self) -> int:
        """Re-allocate the storages and copy the content back; returns bytes copied."""
        moved = self.begin_reload()
        self.end_reload()
        return moved

    def begin_reload(self) -> int:
        """Re-allocate the storages and start copying the content in; returns the bytes.

        :meth:`end_reload` waits for the copy. Between the two, the next state's
        allocation (the driver's, after an offload gave the memory back) overlaps this
        state's copy."""
        if not self.storages:
            return 0
        if not self.physical:
            return sum(self.nbytes) if self.host_valid else 0
        for storage, n in zip(self.storages, self.nbytes, strict=True):
            storage.resize_(n)
        moved = 0
        if self.host_valid and self.host is not None:
            on_cuda = self.storages[0].device.type == "cuda"
            if on_cuda:
                # A side stream: a prefetch overlaps compute on the default stream.
                stream = self._side_stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    _copy_host_to(self.host, self.storages, self.nbytes)
                self._pending = stream
            else:
                _copy_host_to(self.host, self.storages, self.nbytes)
            moved = sum(self.nbytes)
        self._reloading = True
        return moved

    def end_reload(self) -> None:
        """Wait for :meth:`begin_reload`'s copy; the state is resident again."""
        self._wait()
        if not self._reloading:
            return
        self._reloading = False
        self.versions = _version(self.tensors())
        self.physical = False

    def _wait(self) -> None:
        if self._pending is not None:
            self._pending.synchronize()
            self._pending = None


def _version(tensors: Sequence[torch.Tensor]) -> int:
    return sum(t._version for t in tensors)


def _as_bytes(storage: Any) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _copy_storages_to(host: torch.Tensor, storages: Sequence[tuple[Any, int]]) -> None:
    offset = 0
    for storage, n in storages:
        host[offset : offset + n].copy_(_as_bytes(storage), non_blocking=True)
        offset += n


def _copy_host_to(host: torch.Tensor, storages: Sequence[Any], nbytes: Sequence[int]) -> None:
    offset = 0
    for storage, n in zip(storages, nbytes, strict=True):
        _as_bytes(storage).copy_(host[offset : offset + n], non_blocking=True)
        offset += n


class TorchOffload:
    """Offloadable for torch modules (``weights``), optimizers (``optimizer``) and grads.

    Args:
        modules: the modules whose parameters and buffers are the ``weights``.
        optimizers: optimizers whose per-parameter state tensors are the ``optimizer``.
        flatten: flatten the weights into one buffer per dtype, and the
            optimizer state likewise at its first offload (see module docstring).
        pin_memory: use pinned host buffers (needed for fast, asynchronous copies).
        copy_on_cpu: really move CPU tensors too (tests of the copy path on CPU).
    """

    def __init__(
        self,
        modules: torch.nn.Module | Sequence[torch.nn.Module] = (),
        optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] = (),
        *,
        flatten: bool = True,
        pin_memory: bool = True,
        copy_on_cpu: bool = False,
    ) -> None:
        self.modules = [modules] if isinstance(modules, torch.nn.Module) else list(modules)
        self.optimizers = (
            [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else list(optimizers)
        )
        self._flatten = flatten
        self._stream: Any = None
        if flatten and self.modules:
            flatten_parameters(self.modules)
        self._movers = {
            state: StorageMover(
                lambda state=state: self._tensors(state),
                pin_memory=pin_memory,
                copy_on_cpu=copy_on_cpu,
                side_stream=self._copy_stream,
            )
            for state in ("weights", "optimizer")
        }
        self._resident: set[str] = {"weights", "optimizer", "grads"}
        self.last_phases: dict[str, float] = {}
        """Seconds of each phase of the last offload (queueing the copies, waiting for
        them, freeing the storages, ``empty_cache``) or reload (allocating and queueing,
        waiting), for benches that ask where a move's time goes."""

    def _copy_stream(self) -> Any:
        """The one side stream every state's copies queue on."""
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        return self._stream

    # -- what each state is -------------------------------------------------

    def _tensors(self, state: str) -> list[torch.Tensor]:
        if state == "weights":
            out: list[torch.Tensor] = []
            for module in self.modules:
                out.extend(module.parameters())
                out.extend(module.buffers())
            return out
        if state == "optimizer":
            return [
                value
                for optimizer in self.optimizers
                for per_param in optimizer.state.values()
                for value in per_param.values()
                if isinstance(value, torch.Tensor) and value.numel() > 1
            ]
        return []

    def named_weights(self) -> dict[str, torch.Tensor]:
        """Parameters by name (``{i}.`` prefixed for several modules), for weight sync."""
        if len(self.modules) == 1:
            return dict(self.modules[0].named_parameters())
        return {
            f"{i}.{name}": p for i, m in enumerate(self.modules) for name, p in m.named_parameters()
        }

    # -- the protocol ------------------------------------------------------

    def resident_states(self) -> frozenset[str]:
        return frozenset(self._resident)

    def state_bytes(self) -> dict[str, int]:
        sizes = {}
        for state, mover in self._movers.items():
            if state not in self._resident and mover.storages:
                sizes[state] = sum(mover.nbytes)
            else:
                sizes[state] = mover.resident_bytes()
        sizes["grads"] = sum(
            p.grad.numel() * p.grad.element_size()
            for m in self.modules
            for p in m.parameters()
            if p.grad is not None
        )
        return sizes

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        t0 = time.perf_counter()
        moved = 0
        freed_cuda = False
        started: list[tuple[str, StorageMover]] = []
        try:
            for state in states:
                if state not in self._resident:
                    continue
                if state == "grads":
                    for module in self.modules:
                        for p in module.parameters():
                            freed_cuda |= p.grad is not None and p.grad.is_cuda
                            p.grad = None
                    self._resident.discard(state)
                elif state in COPIED:
                    if state == "optimizer" and self._flatten:
                        self._flatten_optimizer_state()
                    mover = self._movers[state]
                    moved += mover.begin_offload(dead)
                    started.append((state, mover))
                else:
                    self._resident.discard(state)
        finally:
            # Every started state's copy was queued before the first wait (one stream of
            # copies); each is waited for and freed even when a later state was refused.
            t1 = time.perf_counter()
            for _, mover in started:
                mover._wait()
            t2 = time.perf_counter()
            for state, mover in started:
                mover.end_offload()
                self._resident.discard(state)
                freed_cuda |= mover.physical and _on_cuda(mover)
            t3 = time.perf_counter()
            if freed_cuda:
                # Once per call: the freed blocks go back to the driver for the other roles.
                torch.cuda.empty_cache()
        t4 = time.perf_counter()
        self.last_phases = {
            "queue_s": t1 - t0,
            "copy_s": t2 - t1,
            "free_s": t3 - t2,
            "empty_cache_s": t4 - t3,
        }
        return moved

    def reload(self, states: Sequence[str]) -> int:
        t0 = time.perf_counter()
        moved = 0
        started: list[tuple[str, StorageMover]] = []
        try:
            for state in states:
                if state in self._resident:
                    continue
                if state in COPIED:
                    moved += self._movers[state].begin_reload()
                    started.append((state, self._movers[state]))
                else:
                    self._resident.add(state)
        finally:
            # The next state was allocated while the previous one's copy was in flight; a
            # state counts as resident once its copy has landed, also when a later one failed
            # (out of memory) and nothing would wait for it.
            t1 = time.perf_counter()
            for state, mover in started:
                mover.end_reload()
                self._resident.add(state)
        self.last_phases = {"allocate_and_queue_s": t1 - t0, "copy_s": time.perf_counter() - t1}
        return moved

    def _flatten_optimizer_state(self) -> None:
        """Flatten the optimizer state once it exists (and again if it was replaced)."""
        tensors = self._tensors("optimizer")
        kinds = {(t.device, t.dtype) for t in tensors}
        if len(_unique_storages(tensors)) > len(kinds):
            flatten_optimizer_state(self.optimizers)


def _on_cuda(mover: StorageMover) -> bool:
    return bool(mover.storages) and mover.storages[0].device.type == "cuda"


def _unique_storages(tensors: Iterable[torch.Tensor]) -> list[tuple[Any, int]]:
    """Distinct storages of ``tensors`` with their sizes (views share one storage)."""
    out: list[tuple[Any, int]] = []
    seen: set[int] = set()
    for tensor in tensors:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in seen or storage.nbytes() == 0:
            continue
        seen.add(key)
        out.append((storage, storage.nbytes()))
    return out


def move_state_dict(weights: Mapping[str, torch.Tensor], into: Mapping[str, torch.Tensor]) -> int:
    """Copy ``weights`` into the same-named tensors of ``into`` in place; returns bytes copied."""
    moved = 0
    with torch.no_grad():
        for name, dst in into.items():
            src = weights[name]
            dst.copy_(src, non_blocking=False)
            moved += dst.numel() * dst.element_size()
    return moved
