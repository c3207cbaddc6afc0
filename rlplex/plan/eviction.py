"""The eviction policy: which resident state to offload when a stage needs room.

Free states go first (scratch, clean or dead: offloading and reloading them
costs nothing); among the rest, the one used furthest in the future
(Belady's MIN), because it stays off the device longest for one round trip;
among equally distant ones, the cheapest that alone frees enough, else the
largest (fewest evictions). The policy is a pure function of the candidates'
facts, so it is tested on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rlplex.plan.problem import Pair


@dataclass(frozen=True, slots=True)
class EvictionCandidate:
    """A resident state that could be evicted, with what the policy weighs."""

    pair: Pair
    """(role, state)."""
    cost_s: float
    """Seconds of offloading it now and reloading it later."""
    size_gb: float
    """GB per device it frees."""
    next_use: float
    """Position of its next use (larger is later; ``inf`` for never)."""
    order: int
    """Definition order of the pair: the last tie-break (determinism)."""


def victim_key(cand: EvictionCandidate, deficit_gb: float) -> tuple:
    """Sort key of a candidate: the smallest is evicted first."""
    enough = cand.size_gb >= deficit_gb - 1e-9
    return (
        cand.cost_s > 0,
        -cand.next_use,
        not enough,
        cand.cost_s if enough else -cand.size_gb,
        cand.order,
    )


def choose_victim(candidates: Iterable[EvictionCandidate], deficit_gb: float) -> Pair | None:
    """The state to evict to free ``deficit_gb`` GB per device; None when there is none."""
    best: EvictionCandidate | None = None
    best_key: tuple | None = None
    for cand in candidates:
        key = victim_key(cand, deficit_gb)
        if best_key is None or key < best_key:
            best, best_key = cand, key
    return None if best is None else best.pair
