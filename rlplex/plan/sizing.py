"""The sizing grid: which placements, parallel sizes and modes to try on N GPUs.

``rlplex size`` asks "how many GPUs, and will it fit?". For one GPU count this
module lists the candidates worth planning, as plain data: the rollout
colocated with training, or split from it at a few ratios (contiguous blocks,
so that a worker never straddles a node); the rollout's tensor parallel size
(dividing the model's heads, and either inside a node or spanning whole
nodes); the trainer's sharding; and sync or async with staleness 1..2 (async
only when rollout and training are apart: a weight sync between roles sharing
GPUs cannot run ahead). Offloads are not a choice here: the planner inserts
them wherever colocated states do not fit together. It is pure arithmetic;
:mod:`rlplex.reports.size` builds, estimates and plans each candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SPLIT_FRACTIONS = (0.25, 0.5, 0.75)
"""Shares of the GPUs given to the rollout when it is split from training."""
TRAINER_SHARDINGS = ("fsdp", "zero1")
"""Trainer sharding tried: FSDP (weights, grads, optimizer over dp) or ZeRO-1 (optimizer only)."""
STALENESS = (1, 2)
"""Async staleness tried (0 runs like sync)."""
MAX_TP_CHOICES = 3
"""Most rollout tensor parallel sizes tried per placement (the smallest valid ones)."""


@dataclass(frozen=True, order=True)
class Knobs:
    """One candidate's choices."""

    gpus: int
    """GPUs in the cluster."""
    gpu: str
    """GPU preset."""
    rollout_gpus: int
    """GPUs of the rollout (the weight-sync destinations); ``gpus`` when colocated."""
    rollout_tp: int
    """Tensor parallel size of one rollout worker (its GPUs per worker)."""
    sharding: str
    """Trainer sharding: ``fsdp``, ``zero1``, or ``given`` (the file's states are used)."""
    staleness: int = 0
    """0: sync; k > 0: async, generation up to k steps ahead."""

    @property
    def colocated(self) -> bool:
        return self.rollout_gpus == self.gpus

    @property
    def mode(self) -> str:
        return f"async k={self.staleness}" if self.staleness else "sync"

    @property
    def placement(self) -> str:
        if self.colocated:
            return "colocated"
        return f"split {self.rollout_gpus}+{self.gpus - self.rollout_gpus}"

    def label(self) -> str:
        """Short text: ``split 4+4, rollout tp 2, fsdp, async k=1`` (rollout GPUs first)."""
        return f"{self.placement}, rollout tp {self.rollout_tp}, {self.sharding}, {self.mode}"


def tp_choices(
    rollout_gpus: int,
    gpus_per_node: int,
    heads: int,
    kv_heads: int,
    limit: int = MAX_TP_CHOICES,
    *,
    min_tp: int = 1,
) -> list[int]:
    """Rollout tensor parallel sizes (powers of two) the model and the GPUs allow, smallest first.

    A size must divide the query heads, divide or be a multiple of the KV heads
    (vLLM replicates KV heads past their count), divide the rollout's GPUs, and
    either fit in a node or span whole nodes; and be at least ``min_tp``, the
    smallest whose share of the weights fits in the engine's memory (smaller ones
    cannot run, and would take the places of ones that can).
    """
    out = []
    tp = 1
    while tp <= rollout_gpus and len(out) < limit:
        fits_nodes = (tp <= gpus_per_node and gpus_per_node % tp == 0) or tp % gpus_per_node == 0
        kv_ok = kv_heads % tp == 0 or tp % kv_heads == 0
        if tp >= min_tp and heads % tp == 0 and kv_ok and rollout_gpus % tp == 0 and fits_nodes:
            out.append(tp)
        tp *= 2
    return out


def weights_min_tp(weights_gb: float, engine_gb: float) -> int:
    """The smallest power-of-two tensor parallel size at which an engine's share of the
    weights (``weights_gb`` over tp) leaves room in its memory (``engine_gb``: the GPU's
    memory times the engine's memory fraction) for a KV cache."""
    tp = 1
    while weights_gb / tp >= engine_gb and tp < 1024:
        tp *= 2
    return tp


def split_sizes(gpus: int, unit: int, fractions: Sequence[float] = SPLIT_FRACTIONS) -> list[int]:
    """Rollout GPU counts for the split placements: multiples of ``unit``, strictly inside."""
    out = []
    for frac in fractions:
        r = round(gpus * frac / unit) * unit
        if 0 < r < gpus and r not in out:
            out.append(r)
    return sorted(out)


def candidates(
    gpus: int,
    gpu: str,
    gpus_per_node: int,
    heads: int,
    kv_heads: int,
    *,
    can_split: bool = True,
    shardings: Sequence[str] = TRAINER_SHARDINGS,
    staleness: Sequence[int] = STALENESS,
    min_tp: int = 1,
    own_tp: int | None = None,
) -> list[Knobs]:
    """Every candidate on ``gpus`` GPUs of ``gpu``: placements x tp x sharding x mode.

    Colocated candidates are sync only; split ones are sync and async with each
    staleness. ``can_split`` is False when the pipeline has no weight sync (no
    rollout to split off). Rollout tp: the smallest sizes from ``min_tp``
    (:func:`weights_min_tp`), and the config's own ``own_tp`` where the GPUs allow it.
    """

    def sizes(rollout_gpus: int) -> list[int]:
        found = tp_choices(rollout_gpus, gpus_per_node, heads, kv_heads, min_tp=min_tp)
        if own_tp and own_tp not in found:
            allowed = tp_choices(rollout_gpus, gpus_per_node, heads, kv_heads, limit=64)
            found += [own_tp] if own_tp in allowed else []
        return found

    out: list[Knobs] = []
    for tp in sizes(gpus):
        for sharding in shardings:
            out.append(Knobs(gpus, gpu, gpus, tp, sharding))
    if not can_split:
        return out
    unit_tps = tp_choices(gpus, gpus_per_node, heads, kv_heads, limit=8, min_tp=min_tp)
    for r in split_sizes(gpus, min(unit_tps) if unit_tps else 1):
        for tp in sizes(r):
            for sharding in shardings:
                for k in (0, *staleness):
                    out.append(Knobs(gpus, gpu, r, tp, sharding, k))
    return out


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both (time, cost), fastest first."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front: list[int] = []
    best_cost = float("inf")
    for i in order:
        if points[i][1] < best_cost - 1e-12:
            front.append(i)
            best_cost = points[i][1]
    return front
