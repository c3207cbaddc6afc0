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
from rlplex.estimate.fill import at_placement, at_staleness, estimates_placement
from rlplex.plan.costs import config_placement
from rlplex.plan.placed import plan_for_placement
from rlplex.plan.search import (
    MAX_SCORED,
    PlacementCandidate,
    SearchProgress,
    search_placements,
)

AUTO_MAX_STALENESS = 2
"""Largest k an async search tries when the config's ``max_staleness`` is 0."""

STALENESS_TOLERANCE = 0.005
"""A larger staleness must shorten the best period by more than this share to be chosen."""

STALENESS_PATIENCE = 2
"""Values of k in a row that gain less than :data:`STALENESS_TOLERANCE` end the search."""

KEPT_AT_LEAST = 10
"""Fewest candidates the search keeps and plans again on their own devices
(:func:`estimated_again`), whatever ``top`` the caller shows, when the config has
estimated figures. The search ranks candidates with those figures scaled from the
devices they were estimated on, which prices a decode-bound generation on few GPUs
up to 4x too slow; so the best placement once estimated again can rank far down. On
74 configs (the examples, published runs, ROLL and verl files, and 7-32B models on 8
to 32 GPUs, sync and one-step-off, responses of 512 to 8,192 tokens), keeping the 5
best missed the best of every candidate the search scores in 6 (by 15-35 %), keeping
10 in none, and keeping 1 (what ``make_plan`` asked for) in 25; and the placement
chosen depended on how many candidates the caller wanted shown."""


@dataclass(frozen=True)
class ScoredPlacement:
    """One placement (and, async, staleness) the search scored."""

    staleness: int
    """k of the async pipeline on this candidate (0 in sync mode)."""
    scored: PlacementCandidate
    """The search's candidate: placement, groups, counts, period, bound."""
    config: Config | None = field(default=None, compare=False, repr=False)
    """The config the candidate was planned with: estimated again on its devices and at
    its staleness (:func:`estimated_again`); what a caller plans the candidate with."""

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
    """The config to plan with: the input, estimated again on the chosen devices
    (:func:`estimated_again`) and with the chosen ``max_staleness`` (async search)."""
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
        top: candidates to return (per staleness tried, then merged best first); the
            choice does not depend on it: of a config with estimated figures, at least
            :data:`KEPT_AT_LEAST` are planned again on their own devices to choose from.
        progress: called as ``progress(scored, total)`` while candidates are scored.

    Raises:
        InfeasibleError: no candidate placement can run the pipeline.
        ConfigError: no candidate's estimated figures fit on its own devices.
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
    keep = max(top, KEPT_AT_LEAST) if estimates_placement(config) else top
    if pipeline.mode != "async":
        again = _kept(config, keep, notes, progress)
        found = tuple(ScoredPlacement(0, c, moved) for c, moved in again[:top])
        return ResolvedPlacement(config=again[0][1], placement=dict(found[0].placement),
                                 candidates=found, notes=tuple(notes))  # fmt: skip
    return _search_async(config, top, keep, progress)


RE_ESTIMATED = (
    "the search ranked placements with estimated stage times scaled from the devices they"
    " were estimated on; its best ones were estimated again on their own devices, as"
    " --set roles.R.devices=... would"
)
"""Note of a search whose candidates were priced again (:func:`estimated_again`)."""


def _kept(
    config: Config, keep: int, notes: list[str], progress: SearchProgress | None
) -> list[tuple[PlacementCandidate, Config]]:
    """The search's ``keep`` best candidates planned again (:func:`estimated_again`), best
    first; if none of them can be planned so, every candidate the search can score.

    Raises:
        RlplexError: no candidate can be planned (the search's error, or the first
            candidate's reason).
    """
    scored = search_placements(config, top=keep, notes=notes, progress=progress)
    again, error = estimated_again(config, scored, notes)
    if not again and len(scored) >= keep and keep < MAX_SCORED:
        scored = search_placements(config, top=MAX_SCORED, notes=notes, progress=progress)
        again, error = estimated_again(config, scored, notes)
    if not again:
        assert error is not None
        raise error
    return again


def estimated_again(
    config: Config, scored: list[PlacementCandidate], notes: list[str]
) -> tuple[list[tuple[PlacementCandidate, Config]], RlplexError | None]:
    """The search's candidates, each planned as ``plan`` plans it, best first: on ``config``
    estimated again on its devices (:func:`~rlplex.estimate.fill.at_placement`), host
    memory included (:func:`~rlplex.plan.placed.plan_for_placement`); with the error of
    the first candidate that cannot be planned so.

    The search prices an estimated stage on a candidate by scaling its seconds from the
    devices it was estimated on, which over-rewards spreading a stage that does not scale
    (a decode-bound generation); and it schedules without host memory. So the period of
    a candidate it picks disagreed with ``plan`` of that same placement, and a candidate
    whose states do not fit on its own devices, or whose host copies overflow a node,
    was picked where ``plan --set roles.R.devices=...`` refuses it. Such a candidate is
    dropped (the caller raises the error when none is left).
    """
    again: list[tuple[PlacementCandidate, Config]] = []
    error: RlplexError | None = None
    changed = False
    grouped: set[str] = set()  # shard_group fields that ruled candidates out
    for candidate in scored:
        placement = candidate.placement
        try:
            moved = at_placement(config, placement)
            changed = changed or moved is not config
            plan = plan_for_placement(moved, placement)
        except RlplexError as exc:
            error = error or exc
            changed = changed or estimates_placement(config)
            field = getattr(exc, "field", None) or ""
            if field.endswith(".parallel.shard_group"):
                grouped.add(field)
            continue
        bound = plan.lower_bound_s
        again.append((replace(candidate, period_s=plan.period_s, lower_bound_s=bound), moved))
    if again and changed and RE_ESTIMATED not in notes:
        notes.append(RE_ESTIMATED)
    for field in sorted(grouped):
        # A hybrid-sharding group must divide the role's data-parallel ranks: a candidate
        # whose GPU count it does not divide is skipped, which the user should know.
        note = (
            f"placements on which {field} does not divide the role's data-parallel ranks"
            " were skipped (--set another shard_group to search them)"
        )
        if again and note not in notes:
            notes.append(note)
    again.sort(key=lambda item: round(item[0].period_s, 9))
    return again, error


def _search_async(
    config: Config, top: int, keep: int, progress: SearchProgress | None = None
) -> ResolvedPlacement:
    """Search placement and staleness k (1..K): the smallest k within
    :data:`STALENESS_TOLERANCE` of the best period wins; the search stops after
    :data:`STALENESS_PATIENCE` values of k in a row that gain less."""
    pipeline = config.pipeline
    high = pipeline.max_staleness or AUTO_MAX_STALENESS
    found: list[ScoredPlacement] = []
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
            again = _kept(cfg, keep, search_notes, progress)
        except RlplexError as exc:  # raised again when no k has a candidate
            error = error or exc
            failed.append(k)
            # Past a k that planned, a larger k that cannot (its KV cache grows with k)
            # gains nothing either.
            idle += 1 if periods else 0
            if idle >= STALENESS_PATIENCE:
                break
            continue
        found += [ScoredPlacement(k, c, moved) for c, moved in again]
        period = again[0][0].period_s
        periods[k] = period
        idle = idle + 1 if period >= best_period * (1 - STALENESS_TOLERANCE) else 0
        best_period = min(best_period, period)
        if idle >= STALENESS_PATIENCE:
            break
    if not found:
        assert error is not None
        raise error
    found.sort(key=lambda c: (round(c.period_s, 9), c.staleness))
    within = best_period * (1 + STALENESS_TOLERANCE)
    chosen_k = min(c.staleness for c in found if c.period_s <= within)
    # The chosen k's candidates first (best period first), then the others as ranked.
    found.sort(key=lambda c: c.staleness != chosen_k)
    best = found[0]
    assert best.config is not None
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
        config=best.config,
        placement=dict(best.placement),
        candidates=tuple(found[:top]),
        notes=tuple(notes),
        staleness_periods=periods,
    )
