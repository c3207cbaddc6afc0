"""Auto-placement: candidates are feasible, ranked, and the chosen one is planned."""

from __future__ import annotations

from plan_cases import make_config

from rlplex.plan import make_plan, search_placements, verify_plan

STATES = {"weights": 4, "optimizer": 8, "grads": 4}


def _cfg(devices: str = "auto", mode: str = "sync", k: int = 0, nodes: int = 1):
    return make_config(
        {
            "actor_infer": {
                "devices": devices,
                "num_gpus_per_worker": 2,
                "states": {"weights": 4, "kv_cache": 40},
            },
            "actor_train": {"devices": devices, "states": STATES},
            "reference": {"devices": devices, "states": {"weights": 4}},
        },
        {
            "generate": {"role": "actor_infer", "seconds": 100, "at_devices": 8, "scaling": 0.9},
            "ref_logprob": {
                "role": "reference",
                "seconds": 20,
                "at_devices": 8,
                "after": ["generate"],
            },
            "train": {
                "role": "actor_train",
                "seconds": 80,
                "at_devices": 8,
                "after": ["generate", "ref_logprob"],
            },
            "weight_sync": {
                "kind": "weight_sync",
                "from": "actor_train",
                "to": "actor_infer",
                "after": ["train"],
            },
        },
        mode=mode,
        k=k,
        nodes=nodes,
    )


def test_search_ranks_candidates_and_make_plan_uses_the_best():
    cfg = _cfg()
    cands = search_placements(cfg, top=5)
    assert 1 < len(cands) <= 5
    periods = [c.period_s for c in cands]
    assert periods == sorted(periods)
    for c in cands:
        assert c.period_s >= c.lower_bound_s - 1e-6
        assert sum(c.counts) == 8
        assert sorted(c.placement) == ["actor_infer", "actor_train", "reference"]
    plan = make_plan(cfg)
    verify_plan(plan, cfg)
    assert plan.period_s == cands[0].period_s
    # Colocating all three on 8 GPUs (200 s) beats any split of this sync pipeline.
    assert cands[0].counts == (8,)


def test_async_search_scores_shared_and_split_weight_sync_roles():
    """Async roles may share GPUs (DESIGN.md): both kinds of candidate are scored."""
    cfg = _cfg(mode="async", k=1)
    found = search_placements(cfg, top=10)
    shared = [set(c.placement["actor_infer"]) & set(c.placement["actor_train"]) for c in found]
    assert any(shared) and not all(shared)
    best = found[0]
    for role, devices in best.placement.items():
        per = cfg.roles[role].num_gpus_per_worker
        assert len(devices) % per == 0


def test_search_on_a_thousand_gpus_respects_nodes():
    cfg = _cfg(nodes=128)
    cands = search_placements(cfg, top=3)
    for c in cands:
        for devices in c.placement.values():
            assert len(devices) % 8 == 0 and devices[0] % 8 == 0


def test_search_reports_progress_through_its_callback_and_prints_nothing(capsys):
    """DESIGN.md: only the CLI draws progress; the search calls ``progress(done, total)``."""
    calls: list[tuple[int, int]] = []
    search_placements(_cfg(), top=3, progress=lambda done, total: calls.append((done, total)))
    assert calls, "the search scored candidates without reporting them"
    assert [done for done, _ in calls] == list(range(1, len(calls) + 1))
    assert {total for _, total in calls} == {calls[0][1]} and calls[-1][0] <= calls[0][1]
    assert capsys.readouterr() == ("", "")
