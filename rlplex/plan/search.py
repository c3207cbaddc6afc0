"""Auto-placement: which GPU roles share GPUs, and how many GPUs each group gets.

As HybridFlow does, a placement is a partition of the GPU roles into colocated
groups plus a GPU count per group; each group gets a contiguous block of
GPUs (node-aligned, so that no worker spans nodes). Candidates are generated
on a grid of counts (every multiple of the worker size on small clusters, a
1/16 grid on large ones), ranked by the lower bound, scored by the scheduler
itself in that order until the bound proves the rest worse (branch and
bound), then the best is refined by moving GPUs between groups with halving
steps. Scheduling is per device class, so a candidate on 1,024 GPUs costs the
same as on 8.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rlplex.config import Config
from rlplex.errors import InfeasibleError, RlplexError
from rlplex.plan.bound import lower_bound
from rlplex.plan.policy import plan_options
from rlplex.plan.schedule import schedule

MAX_SCORED = 400
"""Most candidates scored by the scheduler in the first pass (the bound prunes the rest)."""


@dataclass(frozen=True)
class PlacementCandidate:
    """One placement the search scored."""

    placement: dict[str, tuple[int, ...]]
    """Devices of each GPU role."""
    groups: tuple[tuple[str, ...], ...]
    """Colocated role groups (auto roles only), largest block first."""
    counts: tuple[int, ...]
    """GPUs of each group."""
    period_s: float
    """Period of the planner's schedule on this placement."""
    lower_bound_s: float
    """Lower bound on this placement."""


def set_partitions(items: Sequence[str]) -> Iterator[list[list[str]]]:
    """All partitions of ``items`` into non-empty groups, in a deterministic order."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1 :]]


def _compositions(total: int, parts: int, step: int, units: Sequence[int]) -> Iterator[list[int]]:
    """Ways to split ``total`` into ``parts`` positive multiples of ``step`` (and of each unit)."""
    if parts == 1:
        if total > 0 and total % units[0] == 0:
            yield [total]
        return
    for first in range(step, total - step * (parts - 1) + 1, step):
        if first % units[0]:
            continue
        for rest in _compositions(total - first, parts - 1, step, units[1:]):
            yield [first, *rest]


def search_placements(config: Config, top: int = 5) -> list[PlacementCandidate]:
    """The ``top`` best placements of the auto roles (all GPU roles if none is marked auto).

    Raises:
        InfeasibleError: no candidate placement can run the pipeline.
    """
    roles = config.gpu_roles
    auto = [n for n, r in roles.items() if r.auto] or list(roles)
    fixed = {n: tuple(r.devices) for n, r in roles.items() if n not in auto}
    used = {d for devs in fixed.values() for d in devs}
    pool = [d for d in range(config.cluster.num_gpus) if d not in used]
    if not pool:
        pool = list(range(config.cluster.num_gpus))
    gpn = config.cluster.gpus_per_node
    raw: list[tuple[float, tuple[tuple[str, ...], ...], tuple[int, ...]]] = []
    for part in set_partitions(auto):
        if len(part) > len(pool):
            continue
        units = [math.lcm(*(roles[r].num_gpus_per_worker for r in g)) for g in part]
        step = _grid_step(len(pool), gpn, units)
        for counts in _compositions(len(pool), len(part), step, units):
            order = sorted(range(len(part)), key=lambda i: (-counts[i], i))
            groups = tuple(tuple(part[i]) for i in order)
            cnts = tuple(counts[i] for i in order)
            placement = _assign(groups, cnts, pool, fixed, config)
            if placement is None:
                continue
            raw.append((lower_bound(config, placement).value, groups, cnts))
    if not raw:
        raise InfeasibleError(
            f"no placement of roles {', '.join(auto)} on {len(pool)} GPUs respects"
            " num_gpus_per_worker and node boundaries"
        )
    raw.sort(key=lambda item: (item[0], item[1], item[2]))
    scored: list[PlacementCandidate] = []
    first_error: RlplexError | None = None
    for bound, groups, cnts in raw[:MAX_SCORED]:
        if len(scored) >= top and bound >= scored[top - 1].period_s - 1e-9:
            break  # the bound proves every remaining candidate no better than the top ones
        cand = _score(config, groups, cnts, pool, fixed, bound)
        if isinstance(cand, RlplexError):
            first_error = first_error or cand
            continue
        scored.append(cand)
        scored.sort(key=_key)
    if not scored:
        raise first_error or InfeasibleError("no candidate placement is feasible")
    scored = _refine(config, scored, pool, fixed, gpn)
    return scored[:top]


def _key(c: PlacementCandidate) -> tuple:
    return (round(c.period_s, 9), c.groups, c.counts)


def _grid_step(n: int, gpn: int, units: Sequence[int]) -> int:
    base = math.lcm(*units)
    if n > gpn:
        base = math.lcm(base, gpn)
    coarse = max(base, n // 16)
    return coarse - coarse % base if coarse % base else coarse


def _assign(groups, counts, pool, fixed, config) -> dict[str, tuple[int, ...]] | None:
    """Contiguous blocks of ``pool`` per group; None when a worker would span nodes."""
    gpn = config.cluster.gpus_per_node
    placement = dict(fixed)
    offset = 0
    for group, count in zip(groups, counts, strict=False):
        block = tuple(pool[offset : offset + count])
        offset += count
        for role in group:
            per = config.roles[role].num_gpus_per_worker
            for w in range(0, len(block), per):
                worker = block[w : w + per]
                if worker[0] // gpn != worker[-1] // gpn:
                    return None
            placement[role] = block
    # Keep the config's role order (determinism of the plan).
    return {r: placement[r] for r in config.gpu_roles if r in placement}


def _score(config, groups, counts, pool, fixed, bound) -> PlacementCandidate | RlplexError:
    placement = _assign(groups, counts, pool, fixed, config)
    if placement is None:
        return InfeasibleError("a worker would span nodes")
    try:
        sched = schedule(config, placement, plan_options(config, placement))
    except RlplexError as exc:
        return exc
    return PlacementCandidate(
        placement=placement,
        groups=groups,
        counts=counts,
        period_s=sched.period(),
        lower_bound_s=bound,
    )


def _refine(config, scored, pool, fixed, gpn) -> list[PlacementCandidate]:
    """Move GPUs between the best candidate's groups with halving steps while it improves."""
    best = scored[0]
    if len(best.groups) < 2:
        return scored
    roles = config.roles
    units = [math.lcm(*(roles[r].num_gpus_per_worker for r in g)) for g in best.groups]
    unit = math.lcm(*units)
    if len(pool) > gpn:
        unit = math.lcm(unit, gpn)
    step = max(unit, _grid_step(len(pool), gpn, units) // 2)
    seen = {(c.groups, c.counts) for c in scored}
    while step >= unit:
        improved = False
        for i in range(len(best.groups)):
            for j in range(len(best.groups)):
                if i == j:
                    continue
                counts = list(best.counts)
                counts[i] += step
                counts[j] -= step
                if counts[j] <= 0 or any(c % u for c, u in zip(counts, units, strict=False)):
                    continue
                order = sorted(range(len(counts)), key=lambda x: (-counts[x], x))
                groups = tuple(best.groups[x] for x in order)
                cnts = tuple(counts[x] for x in order)
                if (groups, cnts) in seen:
                    continue
                seen.add((groups, cnts))
                placement = _assign(groups, cnts, pool, fixed, config)
                if placement is None:
                    continue
                bound = lower_bound(config, placement).value
                if bound >= best.period_s:
                    continue
                cand = _score(config, groups, cnts, pool, fixed, bound)
                if isinstance(cand, RlplexError):
                    continue
                scored.append(cand)
                if cand.period_s < best.period_s - 1e-9:
                    best, improved = cand, True
                    units = [
                        math.lcm(*(roles[r].num_gpus_per_worker for r in g)) for g in best.groups
                    ]
        if not improved:
            step //= 2
            step -= step % unit if step >= unit else 0
    scored.sort(key=_key)
    return scored
