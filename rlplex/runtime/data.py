"""Split a batch across data-parallel workers and gather their results.

A stage call is SPMD: each of a role's ``world_size`` workers gets a contiguous
shard of its inputs and returns its part of the result; the parts are joined
back in rank order. The rules are the same everywhere (driver, workers,
tests):

- a list or tuple is split into ``n`` contiguous chunks whose sizes differ by
  at most one (like ``numpy.array_split``); parts are concatenated;
- a dict whose values are all sequences of one length (a "dict of lists", a
  batch of columns) is split column by column; parts are merged key by key;
- numpy arrays and torch tensors are split and concatenated along dim 0;
- anything else (a scalar, ``None``, a config object) is given whole to every
  worker; parts that are all ``None`` gather to ``None``, other parts to a list.

Between colocated roles, device tensors can stay on the device
(:func:`share_on_device` / :func:`take_on_device`, below).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def _bounds(length: int, rank: int, n: int) -> tuple[int, int]:
    base, extra = divmod(length, n)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def _is_array(value: Any) -> bool:
    module = type(value).__module__
    return (module.startswith("torch") or module.startswith("numpy")) and hasattr(value, "shape")


def _is_columns(value: Any) -> bool:
    if not isinstance(value, dict) or not value:
        return False
    lengths = set()
    for column in value.values():
        if not (isinstance(column, (list, tuple)) or _is_array(column)):
            return False
        lengths.add(len(column))
    return len(lengths) == 1


def shard(value: Any, rank: int, n: int) -> Any:
    """Worker ``rank``'s share (of ``n``) of ``value``."""
    if n == 1:
        return value
    if isinstance(value, (list, tuple)) or (_is_array(value) and len(value.shape) > 0):
        start, end = _bounds(len(value), rank, n)
        return value[start:end]
    if _is_columns(value):
        start, end = _bounds(len(next(iter(value.values()))), rank, n)
        return {k: v[start:end] for k, v in value.items()}
    return value


def gather(parts: Sequence[Any]) -> Any:
    """Join the results of a role's workers, in rank order."""
    if len(parts) == 1:
        return parts[0]
    if all(p is None for p in parts):
        return None
    if all(isinstance(p, list) for p in parts):
        return [x for p in parts for x in p]
    if all(isinstance(p, tuple) for p in parts):
        return tuple(x for p in parts for x in p)
    if all(_is_array(p) for p in parts):
        first = parts[0]
        if type(first).__module__.startswith("torch"):
            import torch

            return torch.cat(list(parts))
        import numpy

        return numpy.concatenate(list(parts))
    if all(_is_columns(p) for p in parts) and len({tuple(p) for p in parts}) == 1:
        return {k: gather([p[k] for p in parts]) for k in parts[0]}
    return list(parts)


def reshard(parts: Sequence[Any], rank: int, n: int) -> Any:
    """Gather ``parts`` from one role and take worker ``rank``'s share of ``n``."""
    return shard(gather(parts), rank, n)


# -- results that stay on the device -------------------------------------------------
#
# Through Ray's object store a CUDA tensor is copied to the host, serialised and
# copied back to a device by its consumer. When every consumer of a stage runs on
# the producer's devices (colocated roles), the producer instead packs the
# result's device tensors into one flat buffer (rlplex.stages.weight_sync's
# shared buckets: a CUDA IPC handle on a GPU), sends only the handle and the
# structure, and keeps the buffer until the step is recorded; each consumer
# copies the buffer once, on the device, and takes views of its copy.


@dataclass(frozen=True)
class _TensorRef:
    """Where a tensor was in a shared result's structure."""

    name: str
    """The tensor's key among the shared ones: its position in the walk, ``"0"``, ``"1"`` ..."""


@dataclass(frozen=True)
class OnDevice:
    """A stage result whose device tensors are shared in device memory, not sent."""

    skeleton: Any
    """The result with each shared tensor replaced by a :class:`_TensorRef`."""
    shared: Any
    """The packed tensors (:class:`rlplex.stages.weight_sync.SharedBucket`)."""


def _is_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "is_cuda")


def _strip(value: Any, found: dict[str, Any], device_types: tuple[str, ...]) -> Any:
    if _is_tensor(value) and value.device.type in device_types:
        name = str(len(found))
        found[name] = value.contiguous()
        return _TensorRef(name)
    if isinstance(value, dict):
        return {k: _strip(v, found, device_types) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_strip(v, found, device_types) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _fill(skeleton: Any, tensors: dict[str, Any]) -> Any:
    if isinstance(skeleton, _TensorRef):
        return tensors[skeleton.name]
    if isinstance(skeleton, dict):
        return {k: _fill(v, tensors) for k, v in skeleton.items()}
    if isinstance(skeleton, (list, tuple)):
        items = [_fill(v, tensors) for v in skeleton]
        return items if isinstance(skeleton, list) else tuple(items)
    return skeleton


def share_on_device(value: Any, device_types: tuple[str, ...] = ("cuda",)) -> tuple[Any, Any]:
    """``value`` with its tensors on ``device_types`` packed into one shared buffer.

    Returns ``(to_send, keep)``: ``to_send`` is an :class:`OnDevice` (or
    ``value`` itself when it holds no such tensor, ``keep`` None); the producer
    must keep ``keep`` alive until every consumer has taken the value, then
    pass it to :func:`release_on_device`.
    """
    found: dict[str, Any] = {}
    skeleton = _strip(value, found, device_types)
    if not found:
        return value, None
    from rlplex.stages.weight_sync import buckets_of, share_packed

    (bucket,) = buckets_of(found, bucket_bytes=2**62)
    shared, flat = share_packed(found, bucket)
    return OnDevice(skeleton, shared), (shared, flat)


def take_on_device(value: Any) -> Any:
    """The consumer's own copy of a shared result (one device-to-device copy); else ``value``."""
    if not isinstance(value, OnDevice):
        return value
    from rlplex.stages.weight_sync import open_shared, unpack

    flat = open_shared(value.shared).clone()
    return _fill(value.skeleton, dict(unpack(flat, value.shared.bucket)))


def release_on_device(keep: Any) -> None:
    """The producer side's end of a shared result (after every consumer took it)."""
    if keep is not None:
        from rlplex.stages.weight_sync import release

        release(keep[0])
