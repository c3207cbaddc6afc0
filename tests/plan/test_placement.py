"""One owner for placement: explicit devices, ``devices: auto`` roles, or ``--auto`` for all."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import ASYNC_STALENESS_0, load_config
from rlplex.plan import make_plan, plan_for_placement, search_placements, verify_plan
from rlplex.plan.placement import (
    AUTO_MAX_STALENESS,
    STALENESS_PATIENCE,
    STALENESS_TOLERANCE,
    resolve_placement,
)

GRPO = "examples/grpo.yaml"
ASYNC_K1 = ["pipeline.mode=async", "pipeline.max_staleness=1"]
SPLIT = [
    "roles.actor_infer.devices=0-3",
    "roles.actor_train.devices=4-7",
    "roles.reference.devices=4-7",
]


def test_set_devices_and_auto_rate_the_same_placement_alike() -> None:
    """Issue 13 defect 1: --set devices kept generate's 120 s on half the GPUs (121.16 s)
    while --auto rescaled it (241.16 s) for the same placement."""
    explicit = make_plan(load_config(GRPO, overrides=[*ASYNC_K1, *SPLIT]))
    resolved = resolve_placement(load_config(GRPO, overrides=ASYNC_K1), auto=True)
    same = [c for c in resolved.candidates if c.placement == explicit_placement(explicit)]
    assert same, "the search should rate the split placement"
    assert same[0].period_s == pytest.approx(explicit.period_s)
    assert explicit.period_s == pytest.approx(241.16)


def explicit_placement(plan) -> dict[str, tuple[int, ...]]:
    return {r: tuple(d) for r, d in plan.placement.items()}


def test_stage_seconds_are_taken_on_the_files_devices() -> None:
    cfg = load_config(GRPO, overrides=SPLIT)
    assert cfg.file_devices == {"actor_train": 8, "actor_infer": 8, "reference": 8}
    generate = make_plan(cfg).op("s0/generate")
    assert generate.duration_s == pytest.approx(240.0)  # 120 s on 8 GPUs, now on 4


def test_auto_searches_an_async_colocated_config_instead_of_refusing() -> None:
    """Issue 13 defect 4: plan --auto --set pipeline.mode=async on a colocated config.

    DESIGN.md lets async roles share GPUs, so the file's colocated devices plan as they
    are, and the search scores colocated and split candidates alike.
    """
    cfg = load_config(GRPO, overrides=ASYNC_K1)
    verify_plan(make_plan(cfg), cfg)  # the file's colocated devices, asked as they are
    resolved = resolve_placement(cfg, auto=True)
    assert resolved.searched and resolved.config.pipeline.staleness == 1
    assert any(
        not set(c.placement["actor_train"]) & set(c.placement["actor_infer"])
        for c in resolved.candidates
    )
    periods = [c.period_s for c in resolved.candidates]
    assert periods == sorted(periods)
    plan = plan_for_placement(resolved.config, resolved.placement)
    assert plan.period_s == pytest.approx(resolved.best.period_s)


def test_async_auto_also_searches_the_staleness() -> None:
    cfg = load_config(GRPO, overrides=["pipeline.mode=async"])
    assert cfg.warnings == (ASYNC_STALENESS_0,)  # defect 5: said, not silent
    resolved = resolve_placement(cfg, auto=True)
    assert 1 <= resolved.config.pipeline.staleness <= AUTO_MAX_STALENESS
    assert {c.staleness for c in resolved.candidates} <= set(range(1, AUTO_MAX_STALENESS + 1))
    assert any("max_staleness" in note for note in resolved.notes)
    # The smallest k that reaches the best period.
    periods = {
        k: search_placements(
            cfg.model_copy(
                update={
                    "pipeline": cfg.pipeline.model_copy(update={"max_staleness": k}),
                    "roles": {
                        n: r.model_copy(update={"auto": r.is_gpu}) for n, r in cfg.roles.items()
                    },
                }
            ),
            top=1,
        )[0].period_s
        for k in range(1, AUTO_MAX_STALENESS + 1)
    }
    best = min(periods.values())
    assert resolved.config.pipeline.staleness == min(
        k for k, p in periods.items() if p <= best * (1 + STALENESS_TOLERANCE)
    )


def test_a_large_staleness_cap_stops_the_search_when_k_gains_little() -> None:
    """Regression: with max_staleness 64 the search planned every k from 1 to 64 (24 s for
    the 72B example) and chose k = 64 for a period 0.9 % below k = 2's. It now stops after
    STALENESS_PATIENCE values of k in a row gain less than STALENESS_TOLERANCE, and takes
    the smallest k within that share of the best period."""
    cfg = load_config("examples/estimate_72b.yaml",
                      overrides=["pipeline.mode=async", "pipeline.max_staleness=64"])  # fmt: skip
    resolved = resolve_placement(cfg, auto=True)
    periods = resolved.staleness_periods
    tried = sorted(periods)
    assert tried == list(range(1, len(tried) + 1)) and len(tried) < 64
    # it stopped because the last STALENESS_PATIENCE values each gained too little
    for k in tried[-STALENESS_PATIENCE:]:
        before = min(periods[j] for j in tried if j < k)
        assert periods[k] >= before * (1 - STALENESS_TOLERANCE), k
    best = min(periods.values())
    k = resolved.config.pipeline.staleness
    assert k == min(j for j, p in periods.items() if p <= best * (1 + STALENESS_TOLERANCE))
    assert resolved.best is not None and resolved.best.staleness == k
    assert resolved.best.period_s == pytest.approx(periods[k])
    assert any(f"picked max_staleness {k} (tried 1 to {tried[-1]} of 64;" in n
               for n in resolved.notes)  # fmt: skip


def test_sync_warnings_are_empty_and_explicit_placements_are_not_searched() -> None:
    cfg = load_config(GRPO)
    assert cfg.warnings == ()
    resolved = resolve_placement(cfg)
    assert not resolved.searched
    assert resolved.placement == {
        r: tuple(range(8)) for r in ("actor_train", "actor_infer", "reference")
    }


def test_auto_roles_are_searched_once_and_make_plan_uses_the_best(tmp_path) -> None:
    cfg = load_config(GRPO, overrides=["roles.actor_infer.devices=auto"])
    resolved = resolve_placement(cfg, top=3)
    assert resolved.searched and len(resolved.candidates) <= 3
    plan = make_plan(cfg)
    assert explicit_placement(plan) == resolved.placement
    assert plan.period_s == pytest.approx(resolved.best.period_s)


def test_plan_command_gives_one_period_for_one_placement() -> None:
    """Defect 1 as the issue ran it: ``plan --set ...devices`` is rated as ``--auto`` rates it,
    and whatever ``--auto`` picks, planning that placement explicitly gives its period."""
    from typer.testing import CliRunner

    from rlplex.cli import app
    from rlplex.resources.devices import format_devices

    runner = CliRunner()
    sets = [x for s in ASYNC_K1 for x in ("--set", s)]
    split = [x for s in SPLIT for x in ("--set", s)]
    explicit = runner.invoke(app, ["plan", GRPO, *sets, *split, "--json"])
    assert explicit.exit_code == 0, explicit.output
    assert _json(explicit.output)["period_s"] == pytest.approx(241.16)  # not 121.16
    auto = runner.invoke(app, ["plan", GRPO, "--auto", *sets, "--json"])
    assert auto.exit_code == 0, auto.output
    best = _json(auto.output)
    chosen = [x for r, d in best["placement"].items()
              for x in ("--set", f"roles.{r}.devices={format_devices(tuple(d))}")]  # fmt: skip
    again = runner.invoke(app, ["plan", GRPO, *sets, *chosen, "--json"])
    assert again.exit_code == 0, again.output
    assert _json(again.output)["period_s"] == pytest.approx(best["period_s"])


def _json(output: str) -> dict:
    import json

    return json.loads(output[output.index("{") :])


def test_a_staleness_that_cannot_be_planned_ends_the_search(monkeypatch) -> None:
    """Past a k that planned, each k that cannot (its KV cache grows with k) counts as one
    that gains nothing: the search stops instead of trying every k to the cap, and says
    which k failed."""
    import rlplex.plan.placement as placement
    from rlplex.errors import InfeasibleError

    real = placement.search_placements
    calls: list[int] = []

    def search(cfg, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(cfg.pipeline.staleness)
        if cfg.pipeline.staleness >= 3:
            raise InfeasibleError("no placement fits")
        return real(cfg, **kwargs)

    monkeypatch.setattr(placement, "search_placements", search)
    cfg = load_config("examples/estimate_72b.yaml",
                      overrides=["pipeline.mode=async", "pipeline.max_staleness=64"])  # fmt: skip
    resolved = resolve_placement(cfg, auto=True)
    assert max(calls) <= 2 + STALENESS_PATIENCE
    assert set(resolved.staleness_periods) == {1, 2}
    assert resolved.config.pipeline.staleness in (1, 2)
    assert any("could not be planned (no placement fits)" in n for n in resolved.notes)


SEVEN_B = "examples/estimate_7b.yaml"
LONG_SPLIT = [
    "cluster.nodes=2", "roles.actor_infer.devices=8-15", "roles.actor_train.devices=0-7",
    "roles.reference.devices=0-7", *ASYNC_K1, "workload.prompts_per_step=64",
    "workload.response_tokens.mean=2048", "workload.response_tokens.max=4096",
]  # fmt: skip
"""A 7B one-step-off run of few, long responses on 8 + 8 GPUs: generation is decode-bound,
so it gains little from more replicas."""


def _devices_set(placement: dict[str, tuple[int, ...]]) -> list[str]:
    return [f"roles.{r}.devices={','.join(map(str, d))}" for r, d in placement.items()]


def test_auto_prices_its_candidates_as_set_devices_does() -> None:
    """--auto scaled the estimated generation ideally from its 8 GPUs (38.64 s on all 16,
    colocated) where the estimator, given that placement with --set, says 59.07 s: --auto
    picked a placement 40 % slower than the split it left (42.02 s). Its best candidates
    are now estimated again on their own devices (tour 30)."""
    config = load_config(SEVEN_B, overrides=LONG_SPLIT)
    resolved = resolve_placement(config, auto=True)
    for candidate in resolved.candidates[:3]:
        placed = load_config(SEVEN_B, overrides=[*LONG_SPLIT, *_devices_set(candidate.placement)])
        assert candidate.period_s == pytest.approx(make_plan(placed).period_s, rel=1e-9)
    best = resolved.candidates[0]
    assert best.period_s <= make_plan(config).period_s * (1 + 1e-9)  # no worse than its own
    assert len(set(best.placement.values())) > 1  # not everything on all 16 GPUs
    assert any("estimated again on their own devices" in n for n in resolved.notes)
    # The config the report plans is the one estimated on the chosen devices.
    planned = plan_for_placement(resolved.config, resolved.placement)
    assert planned.period_s == pytest.approx(best.period_s, rel=1e-9)


ONE_OFF_LONG = [*ASYNC_K1, "workload.prompts_per_step=128", "workload.response_tokens.mean=2048",
                "workload.response_tokens.max=4096"]  # fmt: skip
"""A 7B one-step-off run of long responses on one 8-GPU node."""


def test_the_placement_chosen_does_not_depend_on_how_many_are_shown() -> None:
    """The search ranks with estimated stages scaled from the file's 8 GPUs, which prices
    generation on 2 GPUs 4x slower; the best placement once estimated again on its own
    devices (reference with the trainer on 6, generation on 2: 77.41 s) ranked 6th. --auto
    estimated again the 5 it showed and picked 89.55 s; make_plan and devices: auto, which
    asked for 1, picked 107.37 s (rev30b)."""
    config = load_config(SEVEN_B, overrides=ONE_OFF_LONG)
    shown = resolve_placement(config, auto=True, top=5)
    one = resolve_placement(config, auto=True, top=1)
    assert one.placement == shown.placement
    assert one.best is not None and shown.best is not None
    assert one.best.period_s == pytest.approx(shown.best.period_s, rel=1e-9)
    assert shown.best.groups == (("actor_train", "reference"), ("actor_infer",))
    assert shown.best.counts == (6, 2)
    assert shown.best.period_s < 80.0
    assert make_plan(config, auto=True).period_s == pytest.approx(shown.best.period_s, rel=1e-9)
    placed = load_config(SEVEN_B, overrides=[*ONE_OFF_LONG, *_devices_set(shown.placement)])
    assert make_plan(placed).period_s == pytest.approx(shown.best.period_s, rel=1e-9)
    assert len(shown.candidates) == 5 and len(one.candidates) == 1


HOST = "examples/colocated_7b_host.yaml"


def test_auto_plans_its_candidates_with_host_memory_as_plan_does() -> None:
    """colocated_7b_host.yaml on a node of 256 GB host memory: the search scheduled its
    candidates without host memory and picked all-colocated, whose host copies peak at
    308 GB, so plan --auto refused the whole file; a split fits (rev30b)."""
    over = ["cluster.host_memory_gb=256"]
    config = load_config(HOST, overrides=over)
    resolved = resolve_placement(config, auto=True)
    assert resolved.best is not None and len(set(resolved.placement.values())) > 1
    plan = plan_for_placement(resolved.config, resolved.placement)
    assert max(plan.host_peaks.values()) <= 256
    for candidate in resolved.candidates:
        placed = load_config(HOST, overrides=[*over, *_devices_set(candidate.placement)])
        assert make_plan(placed).period_s == pytest.approx(candidate.period_s, rel=1e-9)


def test_no_candidate_that_fits_on_its_own_devices_is_an_error(monkeypatch) -> None:
    """When no kept candidate's estimated figures fit on its own devices, the search's own
    ranking was returned: a placement that plan --set roles.R.devices refuses. It is now
    the error of the first one (after looking at every candidate the search can score)."""
    import rlplex.plan.placement as placement_module
    from rlplex.errors import ConfigError

    def refuse(config, placement):
        raise ConfigError("does not fit (test)", field="roles.actor_train.states")

    monkeypatch.setattr(placement_module, "at_placement", refuse)
    config = load_config(SEVEN_B, overrides=["cluster.nodes=2"])
    with pytest.raises(ConfigError, match="does not fit"):
        resolve_placement(config, auto=True)


def test_set_devices_on_an_auto_role_prices_as_the_search_does(tmp_path) -> None:
    """A file whose roles say ``devices: auto``: the search prices their given seconds as
    measured on the whole cluster (441.16 s for the trainer on 0-3, the rest on 4-7), but
    ``--set`` of those very devices took them as measured on the 4 GPUs set (221.16 s)."""
    auto = tmp_path / "grpo_auto.yaml"
    auto.write_text(Path(GRPO).read_text().replace('devices: "0-7"', "devices: auto"))
    placement = {
        "actor_train": (0, 1, 2, 3),
        "actor_infer": (4, 5, 6, 7),
        "reference": (4, 5, 6, 7),
    }
    searched = resolve_placement(load_config(auto), auto=True)
    same = [c for c in searched.candidates if c.placement == placement]
    assert same and same[0].period_s == pytest.approx(441.16)
    placed = load_config(auto, overrides=_devices_set(placement))
    assert placed.file_devices == {"actor_train": 8, "actor_infer": 8, "reference": 8}
    assert make_plan(placed).period_s == pytest.approx(441.16)


def test_auto_says_it_skipped_placements_a_shard_group_does_not_divide(tmp_path) -> None:
    """A hybrid-sharding group of 16 on 16 GPUs: every placement that gives actor_train 8
    GPUs is refused on its own devices (16 does not divide 8 ranks). The search keeps the
    one that plans, without crashing, and says why the others are missing."""
    seven_b = Path(__file__).resolve().parents[2] / "examples" / "estimate_7b.yaml"
    text = seven_b.read_text().replace("nodes: 1", "nodes: 2").replace('"0-7"', '"0-15"')
    path = tmp_path / "hsdp.yaml"
    path.write_text(text.replace("recompute: true}", "recompute: true, shard_group: 16}"))
    resolved = resolve_placement(load_config(path), auto=True)
    assert all(len(c.placement["actor_train"]) == 16 for c in resolved.candidates)
    assert (
        "placements on which roles.actor_train.parallel.shard_group does not divide the"
        " role's data-parallel ranks were skipped (--set another shard_group to search them)"
    ) in resolved.notes
    # a group that divides every count searched leaves no such note
    path.write_text(text.replace("recompute: true}", "recompute: true, shard_group: 8}"))
    again = resolve_placement(load_config(path), auto=True)
    assert not any("shard_group" in note for note in again.notes)
    assert any(len(c.placement["actor_train"]) == 8 for c in again.candidates)
