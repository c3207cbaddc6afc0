"""Where every GPU role runs: one owner that resolves a config's placement once.

A config places its GPU roles in one of three ways: explicit devices for
every role; ``devices: auto`` on some roles (the search places those around
the others); or, asked for by the caller (``rlplex plan --auto``), the search
places every GPU role whatever the file says. :func:`resolve_placement` is
the one function that decides; it returns the chosen placement together with
every candidate the search scored (period, lower bound, colocated groups), so
that callers (the plan command, what-if, the pictures) reuse them instead of
searching again.

In async mode (``pipeline.mode: async``) a search also picks the staleness:
``k`` from 1 to the config's ``max_staleness`` (or to
:data:`AUTO_MAX_STALENESS` when the config leaves it at 0), the smallest
``k`` whose period is within :data:`STALENESS_TOLERANCE` of the best one (each
step of staleness costs freshness; a generation tail shared among more steps
keeps shortening the period by ever less). The search stops once
:data:`STALENESS_PATIENCE` values of ``k`` in a row improve the best period by
less than that, so a cap of 64 is not 64 searches. Roles may share GPUs in async mode too
(DESIGN.md, ROLL's partial-GPU mode): shared devices run one compute op at a
time and the plan interleaves them, so colocated candidates are scored like
the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rlplex.config import Config
from rlplex.errors import RlplexError
from rlplex.estimate.fill import at_placement, at_staleness
from rlplex.plan.bound import lower_bound
from rlplex.plan.costs import config_placement
from rlplex.plan.policy import plan_options
from rlplex.plan.schedule import schedule
from rlplex.plan.search import PlacementCandidate, SearchProgress, search_placements

AUTO_MAX_STALENESS = 2
"""Largest k an async search tries when the config's ``max_staleness`` is 0."""

STALENESS_TOLERANCE = 0.005
"""A larger staleness must shorten the best period by more than this share to be chosen."""

STALENESS_PATIENCE = 2
"""Values of k in a row that gain less than :data:`STALENESS_TOLERANCE` end the search."""


@dataclass(frozen=True)
class ScoredPlacement:
    """One placement (and, async, staleness) the search scored."""

    staleness: int
    """k of the async pipeline on this candidate (0 in sync mode)."""
    scored: PlacementCandidate
    """The search's candidate: placement, groups, counts, period, bound."""

    @property
    def placement(self) -> dict[str, tuple[int, ...]]:
        return self.scored.placement

    @property
    def groups(self) -> tuple[tuple[str, ...], ...]:
        return self.scored.groups

    @property
    def counts(self) -> tuple[int, ...]:
        return self.scored.counts

    @property
    def period_s(self) -> float:
        return self.scored.period_s

    @property
    def lower_bound_s(self) -> float:
        return self.scored.lower_bound_s


@dataclass(frozen=True)
class ResolvedPlacement:
    """The placement a config runs on, and how it was found."""

    config: Config
    """The config to plan with: the input, with the chosen ``max_staleness`` (async search)."""
    placement: dict[str, tuple[int, ...]]
    """Devices of each GPU role."""
    candidates: tuple[ScoredPlacement, ...] = ()
    """The candidates scored, best first (empty when nothing was searched); in an async
    search, those of the chosen staleness first, then the others by period."""
    notes: tuple[str, ...] = field(default=())
    """What the resolution decided that the user should know (the staleness picked)."""
    staleness_periods: dict[int, float] = field(default_factory=dict)
    """Async search: the best period of each staleness k tried (a k that could not be
    planned is absent)."""

    @property
    def searched(self) -> bool:
        """Whether the search chose (some of) the placement."""
        return bool(self.candidates)

    @property
    def best(self) -> ScoredPlacement | None:
        return self.candidates[0] if self.candidates else None


def resolve_placement(
    config: Config, *, auto: bool = False, top: int = 5, progress: SearchProgress | None = None
) -> ResolvedPlacement:
    """Resolve ``config``'s placement once: explicit devices, ``devices: auto`` roles, or all.

    Args:
        config: a checked config.
        auto: search the placement of every GPU role, whatever the config's
            devices say (``rlplex plan --auto``).
        top: candidates to keep (per staleness tried, then merged best first).
        progress: called as ``progress(scored, total)`` while candidates are scored.

    Raises:
        InfeasibleError: no candidate placement can run the pipeline.
    """
    gpu = config.gpu_roles
    if auto and gpu:
        roles = {n: r.model_copy(update={"auto": True}) if r.is_gpu else r
                 for n, r in config.roles.items()}  # fmt: skip
        config = config.model_copy(update={"roles": roles})
    if not any(r.auto for r in gpu.values()) and not (auto and gpu):
        return ResolvedPlacement(config=config, placement=config_placement(config))
    pipeline = config.pipeline
    notes: list[str] = []
    if pipeline.mode != "async":
        scored = search_placements(config, top=top, notes=notes, progress=progress)
        again = estimated_again(config, scored, notes)
        found = tuple(ScoredPlacement(0, c) for c, _ in again)
        return ResolvedPlacement(config=again[0][1], placement=dict(found[0].placement),
                                 candidates=found, notes=tuple(notes))  # fmt: skip
    return _search_async(config, top, progress)


RE_ESTIMATED = (
    "the search ranked placements with estimated stage times scaled from the devices they"
    " were estimated on; its best ones were estimated again on their own devices, as"
    " --set roles.R.devices=... would"
)
"""Note of a search whose candidates were priced again (:func:`estimated_again`)."""


def estimated_again(
    config: Config, scored: list[PlacementCandidate], notes: list[str]
) -> list[tuple[PlacementCandidate, Config]]:
    """The search's best candidates, each with ``config`` estimated again on its devices
    (:func:`~rlplex.estimate.fill.at_placement`) and planned there, best first.

    The search prices an estimated stage on a candidate by scaling its seconds from the
    devices it was estimated on, which over-rewards spreading a stage that does not scale
    (a decode-bound generation); the planned period of the candidate it picks then
    disagreed with ``plan`` of that same placement. A candidate that no longer fits once
    estimated again is dropped; if none fits, the search's own ranking is kept.
    """
    again: list[tuple[PlacementCandidate, Config]] = []
    changed = False
    for candidate in scored:
        try:
            moved = at_placement(config, candidate.placement)
        except RlplexError:
            changed = True
            continue
        if moved is config:
            again.append((candidate, config))
            continue
        changed = True
        placement = candidate.placement
        try:  # scored as the search scores a candidate (search._score)
            period = schedule(moved, placement, plan_options(moved, placement)).period()
        except RlplexError:
            continue
        bound = lower_bound(moved, placement).value
        again.append((replace(candidate, period_s=period, lower_bound_s=bound), moved))
    if not again:
        return [(c, config) for c in scored]
    if changed and RE_ESTIMATED not in notes:
        notes.append(RE_ESTIMATED)
    again.sort(key=lambda item: round(item[0].period_s, 9))
    return again


def _search_async(
    config: Config, top: int, progress: SearchProgress | None = None
) -> ResolvedPlacement:
    """Search placement and staleness k (1..K): the smallest k within
    :data:`STALENESS_TOLERANCE` of the best period wins; the search stops after
    :data:`STALENESS_PATIENCE` values of k in a row that gain less."""
    pipeline = config.pipeline
    high = pipeline.max_staleness or AUTO_MAX_STALENESS
    found: list[tuple[ScoredPlacement, Config]] = []
    search_notes: list[str] = []
    error: RlplexError | None = None
    best_period = float("inf")
    periods: dict[int, float] = {}
    failed: list[int] = []
    idle = 0
    tried = 0
    for k in range(1, high + 1):
        tried = k
        cfg = at_staleness(config, k)
        try:
            scored = search_placements(cfg, top=top, notes=search_notes, progress=progress)
        except RlplexError as exc:  # raised again when no k has a candidate
            error = error or exc
            failed.append(k)
            # Past a k that planned, a larger k that cannot (its KV cache grows with k)
            # gains nothing either.
            idle += 1 if periods else 0
            if idle >= STALENESS_PATIENCE:
                break
            continue
        again = estimated_again(cfg, scored, search_notes)
        found += [(ScoredPlacement(k, c), moved) for c, moved in again]
        period = min(c.period_s for c, _ in again) if again else float("inf")
        periods[k] = period
        idle = idle + 1 if period >= best_period * (1 - STALENESS_TOLERANCE) else 0
        best_period = min(best_period, period)
        if idle >= STALENESS_PATIENCE:
            break
    if not found:
        assert error is not None
        raise error
    found.sort(key=lambda item: (round(item[0].period_s, 9), item[0].staleness))
    within = best_period * (1 + STALENESS_TOLERANCE)
    chosen_k = min(c.staleness for c, _ in found if c.period_s <= within)
    # The chosen k's candidates first (best period first), then the others as ranked.
    found.sort(key=lambda item: item[0].staleness != chosen_k)
    best, cfg = found[0]
    notes = list(dict.fromkeys(search_notes))
    if pipeline.max_staleness != best.staleness:
        tried_text = f"1 to {tried}" + (f" of {high}" if tried < high else "")
        notes.append(f"async: the search picked max_staleness {best.staleness}"
                     f" (tried {tried_text}; a larger k must gain more than"
                     f" {STALENESS_TOLERANCE:.1%})")  # fmt: skip
    if failed and error is not None:
        ks = ", ".join(str(k) for k in failed)
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        notes.append(f"async: max_staleness {ks} could not be planned ({reason})")
    return ResolvedPlacement(
        config=cfg,
        placement=dict(best.placement),
        candidates=tuple(c for c, _ in found[:top]),
        notes=tuple(notes),
        staleness_periods=periods,
    )
