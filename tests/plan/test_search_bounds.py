"""The placement search stays bounded: polynomial groupings, a budget, best-so-far."""

from __future__ import annotations

from pathlib import Path

from rlplex.config import load_config
from rlplex.plan.search import (
    EXHAUSTIVE_ROLES,
    grouping_candidates,
    search_placements,
    set_partitions,
)


def _roles_config(tmp_path: Path, roles: int, gpus: int = 16) -> Path:
    lines = [f"cluster: {{nodes: {gpus // 8}, gpus_per_node: 8}}", "roles:"]
    lines += [f"  r{i}: {{devices: auto, states: {{weights: 1}}}}" for i in range(roles)]
    lines += ["pipeline:", "  stages:"]
    lines += [
        f"    s{i}: {{role: r{i}, seconds: {1 + i % 3}{f', after: [s{i - 1}]' if i else ''}}}"
        for i in range(roles)
    ]
    path = tmp_path / "c.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_few_roles_are_searched_exhaustively() -> None:
    roles = [f"r{i}" for i in range(EXHAUSTIVE_ROLES)]
    assert list(grouping_candidates(roles)) == list(set_partitions(roles))


def test_many_roles_give_few_groupings() -> None:
    roles = [f"r{i}" for i in range(200)]
    groupings = list(grouping_candidates(roles, destinations=["r5"]))
    assert len(groupings) < 40
    for part in groupings:  # each is a partition of every role
        assert sorted(r for g in part for r in g) == sorted(roles)
    assert [["r5"], [r for r in roles if r != "r5"]] in groupings


def test_twelve_roles_are_placed(tmp_path: Path) -> None:
    config = load_config(_roles_config(tmp_path, 12))
    best = search_placements(config, top=3)
    assert best and all(set(c.placement) == set(config.roles) for c in best)
    assert best == sorted(best, key=lambda c: c.period_s)


def test_budget_returns_the_best_so_far_with_a_note(tmp_path: Path) -> None:
    config = load_config(_roles_config(tmp_path, 5))
    notes: list[str] = []
    best = search_placements(config, top=3, budget_s=0.0, notes=notes)
    assert len(best) >= 1  # at least one candidate is always scored
    assert notes and "stopped at its budget of 0 s" in notes[0]
    unlimited = search_placements(config, top=3, budget_s=None)
    assert unlimited[0].period_s <= best[0].period_s


def test_in_flight_engines_are_ranked_by_their_steady_state(monkeypatch) -> None:
    """The search ranks and prunes with the relaxed bound (an in-flight engine at full
    slots, no loop simulated per trainer turn): it is never above the exact bound, and the
    search finds the same candidates, each reporting its exact bound, as when it ranked by
    the exact one."""
    import rlplex.plan.search as search
    from rlplex.plan.bound import lower_bound
    from rlplex.plan.costs import stage_seconds, stage_seconds_bound

    root = Path(__file__).resolve().parents[2]
    config = load_config(
        root / "bench/published/heldout_nemorl06_qwen3_30ba3b_1off_8gen8train_gb200.yaml"
    )
    roles = {n: r.model_copy(update={"auto": True}) if r.is_gpu else r
             for n, r in config.roles.items()}  # fmt: skip
    config = config.model_copy(update={"roles": roles})
    pairs: list[tuple[float, float]] = []

    def both(cfg, placement, relaxed=False, **kw):  # every bound the search takes, both ways
        loose = lower_bound(cfg, placement, relaxed=True, **kw).value
        pairs.append((loose, lower_bound(cfg, placement, **kw).value))
        return lower_bound(cfg, placement, relaxed=relaxed, **kw)

    monkeypatch.setattr(search, "lower_bound", both)
    relaxed = search_placements(config, top=5, budget_s=None)
    monkeypatch.undo()
    assert len(pairs) > 4 and all(loose <= exact + 1e-9 for loose, exact in pairs)
    assert any(loose < exact for loose, exact in pairs)
    for cand in relaxed:
        loose = lower_bound(config, cand.placement, relaxed=True).value
        exact = lower_bound(config, cand.placement).value
        assert loose <= exact + 1e-9 and cand.lower_bound_s == exact
    split = next(c for c in relaxed if len(c.groups) == 2 and ("actor_infer",) in c.groups)
    gen = config.pipeline.stage("generate")
    assert stage_seconds_bound(config, gen, split.placement) < stage_seconds(
        config, gen, split.placement
    )  # the engine's loop is relaxed there
    monkeypatch.setattr(
        search, "lower_bound", lambda cfg, p, relaxed=False, **kw: lower_bound(cfg, p, **kw)
    )
    exact = search_placements(config, top=5, budget_s=None)
    assert [(c.groups, c.counts, c.period_s, c.lower_bound_s) for c in relaxed] == [
        (c.groups, c.counts, c.period_s, c.lower_bound_s) for c in exact
    ]
