"""Offload plain torch modules and optimizers to pinned host memory and back.

The problem: colocated roles share a GPU, so one role's weights and optimizer
state must leave the device (and its memory must really return to the device,
since other roles run in other processes) while another role runs, and come
back fast. :class:`TorchOffload` does it the way RL frameworks do:

- the weights of the given modules are *flattened* once, at construction, into
  one contiguous device buffer per dtype (parameters become views into it), so
  an offload is a few large copies instead of hundreds of small ones;
- a pinned host buffer per state is allocated on first offload and kept
  (preallocated for every later offload), and each device storage is copied as
  raw bytes into its slice on a side CUDA stream;
- the device storages are then resized to 0 bytes (the tensors stay valid
  Python objects: parameters keep their identity, so optimizers, hooks and
  weight-sync code still hold the right objects) and
  ``torch.cuda.empty_cache()`` hands the memory back to the driver;
- a reload resizes the storages back and copies the bytes in.

A copied state whose tensors have not changed since the last reload (tensor
version counters unchanged) is *clean*: its offload frees memory without
copying. A *dead* offload drops the content; the next reload only
re-allocates. ``grads`` are scratch: offload sets ``param.grad = None``.

Without CUDA the tensors stay where they are; the calls keep residency and
report the bytes a copy would move.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rlplex.resources.cluster import COPIED_STATES as COPIED


@dataclass
class _StateBuffers:
    """Where one copied state lives while off the device."""

    storages: list[Any] = field(default_factory=list)
    """The device storages of the state (``torch.UntypedStorage``), deduplicated."""
    nbytes: list[int] = field(default_factory=list)
    """Size of each storage, in bytes."""
    host: torch.Tensor | None = None
    """Pinned uint8 host buffer holding every storage back to back."""
    host_valid: bool = False
    """Whether ``host`` holds the current content."""
    versions: int = -1
    """Sum of the tensors' version counters when host and device last agreed."""


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


class TorchOffload:
    """Offloadable for torch modules (``weights``), optimizers (``optimizer``) and grads.

    Args:
        modules: the modules whose parameters and buffers are the ``weights``.
        optimizers: optimizers whose per-parameter state tensors are the ``optimizer``.
        flatten: flatten the weights into one buffer per dtype (see module docstring).
        pin_memory: use pinned host buffers (needed for fast, asynchronous copies).
    """

    def __init__(
        self,
        modules: torch.nn.Module | Sequence[torch.nn.Module] = (),
        optimizers: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] = (),
        *,
        flatten: bool = True,
        pin_memory: bool = True,
    ) -> None:
        self.modules = [modules] if isinstance(modules, torch.nn.Module) else list(modules)
        self.optimizers = (
            [optimizers] if isinstance(optimizers, torch.optim.Optimizer) else list(optimizers)
        )
        if flatten and self.modules:
            flatten_parameters(self.modules)
        self._pin = pin_memory
        self._buffers: dict[str, _StateBuffers] = {}
        self._resident: set[str] = {"weights", "optimizer", "grads"}
        self._stream: Any = None

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

    def _on_cuda(self, tensors: Sequence[torch.Tensor]) -> bool:
        return bool(tensors) and tensors[0].is_cuda

    @staticmethod
    def _version(tensors: Sequence[torch.Tensor]) -> int:
        return sum(t._version for t in tensors)

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
        for state in ("weights", "optimizer"):
            buffers = self._buffers.get(state)
            if buffers is not None and state not in self._resident:
                sizes[state] = sum(buffers.nbytes)
            else:
                sizes[state] = sum(n for _, n in _unique_storages(self._tensors(state)))
        sizes["grads"] = sum(
            p.grad.numel() * p.grad.element_size()
            for m in self.modules
            for p in m.parameters()
            if p.grad is not None
        )
        return sizes

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        moved = 0
        for state in states:
            if state not in self._resident:
                continue
            if state == "grads":
                for module in self.modules:
                    for p in module.parameters():
                        p.grad = None
            elif state in COPIED:
                moved += self._offload_copied(state, dead)
            self._resident.discard(state)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return moved

    def reload(self, states: Sequence[str]) -> int:
        moved = 0
        for state in states:
            if state in self._resident:
                continue
            if state in COPIED:
                moved += self._reload_copied(state)
            self._resident.add(state)
        return moved

    # -- copies ---------------------------------------------------------------

    def _side_stream(self) -> Any:
        if self._stream is None:
            self._stream = torch.cuda.Stream()
        return self._stream

    def _offload_copied(self, state: str, dead: bool) -> int:
        tensors = self._tensors(state)
        storages = _unique_storages(tensors)
        buffers = self._buffers.setdefault(state, _StateBuffers())
        total = sum(n for _, n in storages)
        clean = (
            buffers.host_valid
            and buffers.versions == self._version(tensors)
            and buffers.nbytes == [n for _, n in storages]
        )
        buffers.storages = [s for s, _ in storages]
        buffers.nbytes = [n for _, n in storages]
        if dead:
            buffers.host_valid = False
            copy = 0
        elif clean:
            copy = 0
        else:
            copy = total
        if not self._on_cuda(tensors):
            # Nothing to free on the host; keep the bookkeeping honest.
            buffers.host_valid = not dead
            buffers.versions = self._version(tensors)
            return copy
        if copy:
            if buffers.host is None or buffers.host.numel() < total:
                buffers.host = torch.empty(total, dtype=torch.uint8, pin_memory=self._pin)
            stream = self._side_stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                offset = 0
                for storage, n in storages:
                    src = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
                    buffers.host[offset : offset + n].copy_(src, non_blocking=True)
                    offset += n
            stream.synchronize()
            buffers.host_valid = True
        buffers.versions = self._version(tensors)
        for storage, _ in storages:
            storage.resize_(0)
        return copy

    def _reload_copied(self, state: str) -> int:
        buffers = self._buffers.get(state)
        if buffers is None or not buffers.storages:
            return 0
        tensors = self._tensors(state)
        if not self._on_cuda(tensors):
            return sum(buffers.nbytes) if buffers.host_valid else 0
        for storage, n in zip(buffers.storages, buffers.nbytes, strict=True):
            storage.resize_(n)
        moved = 0
        if buffers.host_valid and buffers.host is not None:
            stream = self._side_stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                offset = 0
                for storage, n in zip(buffers.storages, buffers.nbytes, strict=True):
                    dst = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
                    dst.copy_(buffers.host[offset : offset + n], non_blocking=True)
                    offset += n
            stream.synchronize()
            torch.cuda.current_stream().wait_stream(stream)
            moved = sum(buffers.nbytes)
        buffers.versions = self._version(tensors)
        return moved


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
