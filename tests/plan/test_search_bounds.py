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
