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
"""

from __future__ import annotations

from collections.abc import Sequence
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
