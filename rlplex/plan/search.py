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

The search is bounded. Every partition of the roles is tried only up to
:data:`EXHAUSTIVE_ROLES` roles (the Bell numbers grow faster than
exponentially: 203 partitions of 6 roles, 4,140 of 8, 10^15 of 20); past that,
:func:`grouping_candidates` proposes a polynomial number of groupings (all
colocated, contiguous chunks of the config's role order into 2, 3, 4, 8 ...
groups, and the weight-sync destinations apart from the rest), and groups past
:data:`FEW_GROUPS` get GPU counts proportional to their work instead of every
composition. A wall-clock budget (``budget_s``) ends the scoring and the
refinement early: the best plan found so far is returned, with a note saying
the budget ended the search, and a ``progress`` callback reports each scored
candidate (the CLI draws the bar; nothing here prints).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rlplex.config import Config
from rlplex.errors import InfeasibleError, RlplexError
from rlplex.plan.bound import lower_bound
from rlplex.plan.policy import plan_options
from rlplex.plan.schedule import schedule
from rlplex.resources.placement import (
    parallel_layout_problem,
    role_parallel_sizes,
    worker_layout_problem,
)

SearchProgress = Callable[[int, int], None]
"""Called as ``progress(scored, total)`` while the search scores candidates."""

MAX_SCORED = 400
"""Most candidates scored by the scheduler in the first pass (the bound prunes the rest)."""
EXHAUSTIVE_ROLES = 6
"""Up to this many roles every partition into colocated groups is tried (203 for 6)."""
FEW_GROUPS = 3
"""Up to this many groups every composition of GPU counts on the grid is tried."""
DEFAULT_BUDGET_S = 20.0
"""Wall-clock seconds the search may take before it returns the best placement so far."""
MAX_RAW = 20_000
"""Most candidate placements ranked by the lower bound (each costs one bound)."""


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


def _chunks(items: Sequence[str], parts: int) -> list[list[str]]:
    """``items`` cut into ``parts`` contiguous, near-equal chunks (order kept)."""
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return [c for c in out if c]


def grouping_candidates(
    items: Sequence[str], destinations: Sequence[str] = ()
) -> Iterator[list[list[str]]]:
    """Groupings of the roles into colocated groups: all of them for a few roles, else
    O(log n) structured ones (so 200 roles give about 20 groupings, not 10^275).

    Past :data:`EXHAUSTIVE_ROLES`: contiguous chunks of the config's order into
    1, 2, 3, 4, 8, 16 ... and n groups (neighbouring stages' roles tend to run
    one after another and colocate well), and the same with the weight-sync
    destinations (inference roles) split off first (the disaggregated layout).
    """
    if len(items) <= EXHAUSTIVE_ROLES:
        yield from set_partitions(items)
        return
    seen: set[tuple[tuple[str, ...], ...]] = set()
    counts = sorted({1, 2, 3, 4, len(items)} | {2**i for i in range(len(items).bit_length())})
    rest = [r for r in items if r not in destinations]
    dest = [r for r in items if r in destinations]
    bases: list[tuple[list[list[str]], list[str]]] = [([], list(items))]
    if dest and rest:
        bases.append(([dest], rest))
    for head, body in bases:
        for parts in counts:
            if parts > len(body):
                continue
            part = head + _chunks(body, parts)
            key = tuple(tuple(g) for g in part)
            if key not in seen:
                seen.add(key)
                yield part


def _proportional(total: int, work: Sequence[float], units: Sequence[int]) -> list[int] | None:
    """GPU counts proportional to each group's work, multiples of its unit, summing to total."""
    if sum(units) > total:
        return None
    weight = sum(work) or 1.0
    counts = [max(u, int(total * w / weight) // u * u) for w, u in zip(work, units, strict=True)]
    # Hand leftover GPUs (or take excess) one unit at a time, biggest groups first.
    order = sorted(range(len(counts)), key=lambda i: -work[i])
    guard = 0
    while sum(counts) != total and guard < 10 * len(counts) * total:
        guard += 1
        for i in order:
            diff = total - sum(counts)
            if diff == 0:
                break
            if diff > 0 and units[i] <= diff:
                counts[i] += units[i]
            elif diff < 0 and counts[i] - units[i] >= units[i]:
                counts[i] -= units[i]
        else:
            if all(units[i] > total - sum(counts) for i in order) and sum(counts) < total:
                return None
    return counts if sum(counts) == total else None


def _role_work(config: Config) -> dict[str, float]:
    """Stage seconds per role (weight syncs excluded): how much a group needs GPUs."""
    work: dict[str, float] = {}
    for stage in config.pipeline.stages:
        if stage.role and not stage.is_weight_sync:
            work[stage.role] = work.get(stage.role, 0.0) + (stage.seconds or 0.0)
    return work


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


def search_placements(
    config: Config,
    top: int = 5,
    *,
    budget_s: float | None = DEFAULT_BUDGET_S,
    notes: list[str] | None = None,
    progress: SearchProgress | None = None,
) -> list[PlacementCandidate]:
    """The ``top`` best placements of the auto roles (all GPU roles if none is marked auto).

    Args:
        budget_s: wall-clock seconds for the search (None: no limit); when it
            ends the search, the best placements so far are returned and a
            note is added to ``notes``.
        notes: receives what the user should know about the search.
        progress: called as ``progress(scored, total)`` after each candidate is
            scored (the CLI draws its bar with it; library code prints nothing).

    Raises:
        InfeasibleError: no candidate placement can run the pipeline.
    """
    deadline = time.monotonic() + budget_s if budget_s is not None else math.inf
    notes = notes if notes is not None else []
    roles = config.gpu_roles
    auto = [n for n, r in roles.items() if r.auto] or list(roles)
    fixed = {n: tuple(r.devices) for n, r in roles.items() if n not in auto}
    used = {d for devs in fixed.values() for d in devs}
    pool = [d for d in range(config.cluster.num_gpus) if d not in used]
    if not pool:
        pool = list(range(config.cluster.num_gpus))
    gpn = config.cluster.gpus_per_node
    syncs = [(s.from_role, s.to_role) for s in config.pipeline.stages if s.is_weight_sync]
    destinations = [b for _, b in syncs if b in auto]
    work = _role_work(config)
    raw: list[tuple[float, tuple[tuple[str, ...], ...], tuple[int, ...]]] = []
    out_of_time = False
    for part in grouping_candidates(auto, destinations):
        if len(raw) >= MAX_RAW or (raw and time.monotonic() > deadline):
            out_of_time = True
            break
        if len(part) > len(pool):
            continue
        units = [math.lcm(*(gpu_unit(config, r) for r in g)) for g in part]
        step = _grid_step(len(pool), gpn, units)
        if len(part) <= FEW_GROUPS:
            options: Any = _compositions(len(pool), len(part), step, units)
        else:  # compositions of many groups are exponential: proportional counts only
            aligned = [math.lcm(u, gpn) for u in units]
            grid = aligned if len(pool) > gpn and sum(aligned) <= len(pool) else units
            group_work = [sum(work.get(r, 0.0) for r in g) for g in part]
            share = _proportional(len(pool), group_work, grid)
            options = [share] if share is not None else []
        for counts in options:
            order = sorted(range(len(part)), key=lambda i: (-counts[i], i))
            groups = tuple(tuple(part[i]) for i in order)
            cnts = tuple(counts[i] for i in order)
            placement = _assign(groups, cnts, pool, fixed, config)
            if placement is None:
                continue
            raw.append((lower_bound(config, placement, relaxed=True).value, groups, cnts))
    if not raw:
        raise InfeasibleError(
            f"no placement of roles {', '.join(auto)} on {len(pool)} GPUs respects"
            " num_gpus_per_worker, the roles' parallel layouts and node boundaries"
        )
    raw.sort(key=lambda item: (item[0], item[1], item[2]))
    scored: list[PlacementCandidate] = []
    first_error: RlplexError | None = None
    total = min(len(raw), MAX_SCORED)
    done = 0
    for bound, groups, cnts in raw[:MAX_SCORED]:
        if len(scored) >= top and bound >= scored[top - 1].period_s - 1e-9:
            break  # the bound proves every remaining candidate no better than the top ones
        if scored and time.monotonic() > deadline:
            out_of_time = True
            break
        cand = _score(config, groups, cnts, pool, fixed, bound)
        done += 1
        if progress is not None:
            progress(done, total)
        if isinstance(cand, RlplexError):
            first_error = first_error or cand
            continue
        scored.append(cand)
        scored.sort(key=_key)
    if not scored:
        raise first_error or InfeasibleError("no candidate placement is feasible")
    if time.monotonic() < deadline:
        scored = _refine(config, scored, pool, fixed, gpn, deadline)
    out_of_time = out_of_time or time.monotonic() > deadline
    if out_of_time:
        notes.append(
            f"the placement search stopped at its budget of {budget_s:g} s after scoring"
            f" {len(scored)} candidates: the best plan found so far is shown"
        )
    return scored[:top]


def _key(c: PlacementCandidate) -> tuple:
    return (round(c.period_s, 9), c.groups, c.counts)


def gpu_unit(config: Config, role: str) -> int:
    """The GPU count a role's device count must be a multiple of: its worker's, and its
    parallel layout's (tp x pp, and pp x ep: ep divides a pipeline stage's devices), with
    tensor parallel as the estimator lays the role out
    (:func:`~rlplex.resources.placement.role_parallel_sizes`)."""
    spec = config.roles[role]
    tp, pp, ep = role_parallel_sizes(spec, role in _generating_roles(config))
    return math.lcm(spec.num_gpus_per_worker, tp * pp, pp * ep)


def _generating_roles(config: Config) -> frozenset[str]:
    """Roles that run a generation or judge stage (an inference engine: tensor parallel
    defaults to its worker's GPUs)."""
    from rlplex.estimate.context import ENGINE_KINDS, stage_kind

    return frozenset(
        s.role
        for s in config.pipeline.stages
        if s.role in config.roles and stage_kind(s, config.roles[s.role]) in ENGINE_KINDS
    )


def _grid_step(n: int, gpn: int, units: Sequence[int]) -> int:
    base = math.lcm(*units)
    if n > gpn:
        base = math.lcm(base, gpn)
    coarse = max(base, n // 16)
    return coarse - coarse % base if coarse % base else coarse


def _assign(groups, counts, pool, fixed, config) -> dict[str, tuple[int, ...]] | None:
    """Contiguous blocks of ``pool`` per group; None where a role's workers cannot tile its
    block (a worker that fits in a node would span two, or a larger one would not fill whole
    nodes) or its parallel layout does not divide it (tp x pp, ep per pipeline stage): the
    rules a config's own devices must meet (:mod:`rlplex.resources.placement`)."""
    placement = dict(fixed)
    offset = 0
    generating = _generating_roles(config)
    for group, count in zip(groups, counts, strict=False):
        block = tuple(pool[offset : offset + count])
        offset += count
        for role in group:
            spec = config.roles[role]
            if worker_layout_problem(block, spec.num_gpus_per_worker, config.cluster):
                return None
            tp, pp, ep = role_parallel_sizes(spec, role in generating)
            sp = spec.parallel.sp if spec.parallel else 1
            if parallel_layout_problem(len(block), tp, pp, ep, sp):
                return None
            placement[role] = block
    # Keep the config's role order (determinism of the plan).
    return {r: placement[r] for r in config.gpu_roles if r in placement}


def _score(config, groups, counts, pool, fixed, bound) -> PlacementCandidate | RlplexError:
    placement = _assign(groups, counts, pool, fixed, config)
    if placement is None:
        return InfeasibleError("a role's workers cannot tile its block of GPUs")
    try:
        sched = schedule(config, placement, plan_options(config, placement))
    except RlplexError as exc:
        return exc
    # The ranking's bound may be relaxed (in-flight engines); the candidate reports the exact
    # one, whose loop the schedule has just priced.
    return PlacementCandidate(
        placement=placement,
        groups=groups,
        counts=counts,
        period_s=sched.period(),
        lower_bound_s=max(bound, lower_bound(config, placement).value),
    )


def _refine(config, scored, pool, fixed, gpn, deadline=math.inf) -> list[PlacementCandidate]:
    """Move GPUs between the best candidate's groups with halving steps while it improves."""
    best = scored[0]
    if len(best.groups) < 2:
        return scored
    units = [math.lcm(*(gpu_unit(config, r) for r in g)) for g in best.groups]
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
                if time.monotonic() > deadline:
                    scored.sort(key=_key)
                    return scored
                order = sorted(range(len(counts)), key=lambda x: (-counts[x], x))
                groups = tuple(best.groups[x] for x in order)
                cnts = tuple(counts[x] for x in order)
                if (groups, cnts) in seen:
                    continue
                seen.add((groups, cnts))
                placement = _assign(groups, cnts, pool, fixed, config)
                if placement is None:
                    continue
                bound = lower_bound(config, placement, relaxed=True).value
                if bound >= best.period_s:
                    continue
                cand = _score(config, groups, cnts, pool, fixed, bound)
                if isinstance(cand, RlplexError):
                    continue
                scored.append(cand)
                if cand.period_s < best.period_s - 1e-9:
                    best, improved = cand, True
                    units = [math.lcm(*(gpu_unit(config, r) for r in g)) for g in best.groups]
        if not improved:
            step //= 2
            step -= step % unit if step >= unit else 0
    scored.sort(key=_key)
    return scored
