"""bench/published.py: its pure functions, and every published-run config loads and estimates."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from bench_loader import load_bench

from rlplex.config import load_config
from rlplex.estimate.estimator import estimate_config
from rlplex.resources.yaml_io import load_yaml_file

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "bench" / "published").glob("*.yaml"))


def _bench() -> ModuleType:
    return load_bench("published")


def test_rel_error() -> None:
    bench = _bench()
    assert bench.rel_error(150.0, 100.0) == pytest.approx(0.5)
    assert bench.rel_error(50.0, 100.0) == pytest.approx(-0.5)
    with pytest.raises(ValueError):
        bench.rel_error(1.0, 0.0)


def test_median_and_worst_keep_magnitude_and_sign() -> None:
    bench = _bench()
    errors = [0.1, -0.4, 0.2]
    assert bench.median_abs(errors) == pytest.approx(0.2)
    assert bench.worst_abs(errors) == pytest.approx(-0.4)
    assert bench.median_abs([]) is None and bench.worst_abs([]) is None


def test_verdict_and_speedup() -> None:
    bench = _bench()
    assert bench.faster({"colocate": 749.0, "async": 520.0}) == "async"
    assert bench.faster({"a": 1.0, "b": 1.0}) is None
    assert bench.faster({"a": 1.0}) is None
    assert bench.speedup({"colocate": 749.0, "async": 520.0}) == pytest.approx(749 / 520)
    assert bench.in_range(5.0, 1.0, 5.0) and not bench.in_range(5.1, 1.0, 5.0)
    assert bench.short_name("verl-x-colocate", ["verl-x-colocate", "verl-x-async"]) == "colocate"


def test_a_rerun_is_held_against_the_published_step_and_the_plan(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = _bench()
    rerun = bench.Rerun("somewhere", 120.0, {"train": 30.0})
    row = bench.rerun_result(rerun, 100.0, 90.0)
    assert row["spread"] == pytest.approx(0.2)  # 120 against the published 100
    assert row["error"] == pytest.approx(-0.25)  # the plan's 90 against the rerun's 120
    assert row["phases"] == {"train": 30.0} and row["source"] == "somewhere"
    assert bench.rerun_result(rerun, None, 90.0)["spread"] is None
    results = [r for r in bench.run(sweep=False, transfers=False).cases if r.reruns]
    assert {r.id for r in results} >= {"heldout-nemorl-v0.3-llama3.1-70b-onpolicy-64xH100"}
    from rich.console import Console

    bench._print_reruns(Console(width=200), results)
    printed = capsys.readouterr().out
    assert "measurement spread" in printed and "+21%" in printed  # 178 s against 147 s


def test_pair_results_name_the_wrong_verdict() -> None:
    bench = _bench()
    cases = [
        bench.Case("p-colocate", "x.yaml", 100.0, {}, {}, "p"),
        bench.Case("p-split", "y.yaml", 50.0, {}, {}, "p"),
    ]
    results = [
        bench.CaseResult("p-colocate", "x.yaml", 60.0, 100.0, -0.4, {}),
        bench.CaseResult("p-split", "y.yaml", 90.0, 50.0, 0.8, {}),
    ]
    (pair,) = bench.pair_results(cases, results)
    assert pair.published_faster == "p-split" and pair.predicted_faster == "p-colocate"
    assert not pair.verdict_right
    assert pair.published_speedup == pytest.approx(2.0)
    assert pair.predicted_speedup == pytest.approx(60.0 / 90.0)
    assert pair.speedup_error == pytest.approx((60.0 / 90.0) / 2.0 - 1.0)


def test_every_config_is_a_case() -> None:
    bench = _bench()
    assert sorted(c.config for c in bench.CASES) == [p.name for p in CONFIGS]
    assert len(bench.CORPUS_CASES) == 7
    assert all(not c.heldout for c in bench.CORPUS_CASES)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_config_loads_and_estimates_everything(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "Source:" in text and "Approximations:" in text
    raw = load_yaml_file(path)
    # Everything is estimated: no states, no seconds.
    assert all("states" not in body for body in raw["roles"].values())
    assert all("seconds" not in (body or {}) for body in raw["pipeline"]["stages"].values())
    cfg = load_config(path)
    est = estimate_config(cfg)
    assert all(est.stages[s.name].seconds for s in cfg.pipeline.stages)
    assert all(cfg.is_estimated(f"roles.{r}.states") for r in cfg.gpu_roles)


def test_run_case_compares_phases() -> None:
    bench = _bench()
    case = next(c for c in bench.CASES if c.id.startswith("verl-osp-7b-fsdp2-colocate"))
    result = bench.run_case(case, sweep=False)
    assert result.step_error == pytest.approx(result.predicted_step_s / 749.0 - 1.0)
    phase = result.phases["update_actor"]
    assert phase["error"] == pytest.approx(phase["predicted"] / 286.0 - 1.0)


def test_run_case_sweeps_an_unpublished_length() -> None:
    bench = _bench()
    case = next(c for c in bench.CASES if c.id == "verl-osp-7b-megatron-colocate-16xH20")
    result = bench.run_case(case, sweep=True)
    assert result.sweep is not None
    assert result.sweep["target"] == pytest.approx(699.0)
    steps = result.sweep["steps"]
    assert steps == sorted(steps) and len(steps) == len(case.sweep)
    assert result.sweep["inside"] == (min(steps) <= result.sweep["target"] <= max(steps))


def test_transfer_calibrates_on_one_member_and_predicts_the_other() -> None:
    bench = _bench()
    source = next(c for c in bench.CASES if c.id == "verl-osp-7b-megatron-colocate-16xH20")
    target = next(
        c for c in bench.CASES if c.id == "verl-osp-7b-megatron-onestepoff-4gen12train-H20"
    )
    moved = bench.transfer(source, target)
    assert moved["calibrated_on"] == source.id and moved["predicted"] == target.id
    # the fit reproduces the calibrated member's published step
    assert moved["fitted_period_s"] == pytest.approx(699.0, rel=0.02)
    assert moved["error"] == pytest.approx(moved["predicted_step_s"] / 566.0 - 1.0)
    assert "efficiency" in moved["fitted"]


def test_heldout_colocated_members_carry_their_verl_timers_for_a_transfer() -> None:
    """Each held-out verl fully-async pair is calibrated on its colocated member's own timers
    (``gen`` is verl's generation timer) and predicts the other member; the report prints it
    in a table of its own, apart from the corpus's transfers."""
    import io

    from rich.console import Console

    bench = _bench()
    held_pairs = {c.pair for c in bench.HELDOUT_CASES if c.summary is not None}
    assert held_pairs == {
        "heldout-verl-fa-7b-128", "heldout-verl-fa-7b-64", "heldout-verl-fa-7b-32",
        "heldout-verl-fa-30b-a3b", "heldout-verl-fa-retool-7b",
    }  # fmt: skip
    source = next(c for c in bench.CASES if c.id == "heldout-verl-fa-7b-colocate-128xH20")
    assert source.summary == {
        "framework": "verl",
        "timing_s": {"gen": 177.85, "old_log_prob": 53.92, "update_actor": 113.81, "step": 356.30},
    }
    # verl's colocated gen holds the weight sync: the record gives generate the rest
    record = bench.summary_record(source)
    sync_s = estimate_config(load_config(bench.CONFIGS / source.config)).stages["weight_sync"]
    assert record["stages"] == {"gen": "generate"}
    assert record["timing_s"]["gen"] == pytest.approx(177.85 - float(sync_s.seconds or 0), abs=1e-5)
    assert 0 < float(sync_s.seconds or 0) < 20
    target = next(c for c in bench.CASES if c.id == "heldout-verl-fa-7b-async-64gen64train-H20")
    moved = bench.transfer(source, target)
    assert moved["fitted_period_s"] == pytest.approx(356.30, rel=0.02)
    assert moved["error"] == pytest.approx(moved["predicted_step_s"] / 150.63 - 1.0)
    pair = bench.PairResult("heldout-verl-fa-7b-128", (source.id, target.id), target.id,
                            target.id, 2.37, 2.1, transfer=moved, heldout=True)  # fmt: skip
    out = io.StringIO()
    bench._print_transfers(Console(file=out, width=200), "HELD-OUT transfer", [pair])
    text = out.getvalue()
    assert "colocate-128xH20" in text and "150.6" in text
    assert f"HELD-OUT transfer: 1 pairs, median |error| {abs(moved['error']) * 100:.0f}%" in text


def test_heldout_cases_load_and_plan() -> None:
    """The held-out runs (not in the corpus) load, plan, and stay out of the corpus summary."""
    bench = _bench()
    held = bench.HELDOUT_CASES
    assert len(held) >= 3
    assert all(c.heldout and c.config.startswith("heldout_") for c in held)
    results = [bench.run_case(c, sweep=False) for c in held]
    for case, r in zip(held, results, strict=True):
        assert r.heldout
        assert r.predicted_step_s > 0, case.id
        # each held-out run is checked on its published step or its published phases
        assert r.step_error is not None or r.phases, case.id
    stepped = [c for c in held if c.step_s is not None and not c.phases][:2]
    phased = [c for c in held if c.phases][:1]
    assert stepped and phased
    # A corpus-only report and one with the held-out cases give the same corpus figures.
    corpus = bench.run(bench.CORPUS_CASES[:2], sweep=False, transfers=False)
    both = bench.run((*bench.CORPUS_CASES[:2], *stepped, *phased), sweep=False, transfers=False)
    assert both.median_step_error == corpus.median_step_error
    assert both.worst_step_error == corpus.worst_step_error
    assert both.phase_errors == corpus.phase_errors
    assert corpus.heldout_median_step_error is None
    assert corpus.heldout_phase_errors == {}
    by_id = {r.id: r for r in results}
    expected = bench.median_abs([by_id[c.id].step_error for c in stepped])
    assert both.heldout_median_step_error == pytest.approx(expected)
    assert set(both.heldout_phase_errors) == {f"{phased[0].id}/{n}" for n in phased[0].phases}
    assert [p.heldout for p in both.pairs] == [False, True]


def test_a_phase_holds_none_of_the_time_outside_every_stage() -> None:
    """verl's ``update_actor`` times the actor's update alone; the per-step overhead the
    estimate carries on the train stage (``outside_s``) is compared with no phase."""
    from rlplex.config import load_config
    from rlplex.estimate.estimator import estimate_config
    from rlplex.reports.sweep import plan_point

    bench = _bench()
    case = next(c for c in bench.CORPUS_CASES if c.id.startswith("verl-quickstart"))
    config = load_config(bench.CONFIGS / case.config)
    _, stages = plan_point(config)
    outside = estimate_config(config).stages["train"].outside_s
    assert outside > 0
    result = bench.run_case(case, sweep=False)
    assert result.phases["update_actor"]["predicted"] == pytest.approx(stages["train"] - outside)
    assert result.phases["ref"]["predicted"] == pytest.approx(stages["ref_logprob"])


def test_published_syncs_estimate_and_per_tensor_costs_the_tensors_more() -> None:
    """Every published weight sync estimates; verl's tensor-by-tensor sync of a model costs
    its checkpoint engine's buckets plus ``sync_tensor_s`` per checkpoint tensor, less the
    ``load_tensor_s`` the buckets' loads pay (``sync_tensor_s`` holds the load)."""
    from rlplex.estimate.specs import efficiency_defaults

    defaults = efficiency_defaults()
    per_tensor_s = defaults["sync_tensor_s"]["value"] - defaults["load_tensor_s"]["value"]
    bench = _bench()
    rows = {(c.model, c.method): bench.run_sync_case(c) for c in bench.SYNC_CASES}
    assert len(rows) == len(bench.SYNC_CASES)
    for model in {c.model for c in bench.SYNC_CASES}:
        per_tensor, bucketed = rows[(model, "per_tensor")], rows[(model, "bucketed")]
        assert per_tensor["tensors"] > 300
        assert per_tensor["predicted_s"] == pytest.approx(
            bucketed["predicted_s"] + per_tensor["tensors"] * per_tensor_s
        )


def test_heldout_sync_case_plans_the_published_layout(capsys: pytest.CaptureFixture[str]) -> None:
    """NeMo RL's DeepSeek-V3 refit is planned as published: one engine of tp 32 receives the
    whole model from a trainer split pp 16 x ep 16; it is reported apart from the corpus's.
    45,395 is the tensor count the source reports each engine rank loading."""
    bench = _bench()
    case = next(c for c in bench.HELDOUT_SYNC_CASES if c.id.endswith("-nccl"))
    config = bench.sync_config(case)
    assert config["roles"]["actor_infer"]["num_gpus_per_worker"] == 32
    assert config["cluster"] == {"nodes": 36, "gpus_per_node": 8, "gpu": "h100"}
    row = bench.run_sync_case(case)
    assert row["heldout"] is True
    assert row["tensors"] == 45_395
    report = bench.run(bench.CORPUS_CASES[:1], sweep=False, transfers=False)
    bench.print_report(report)
    out = capsys.readouterr().out
    assert f"weight sync error over {len(bench.SYNC_CASES)} published syncs" in out
    held_out = len(bench.HELDOUT_SYNC_CASES)
    assert held_out == 22
    assert f"weight sync error over {held_out} HELD-OUT syncs: median" in out
    # NeMo RL's shard-to-shard refit rows give a range: the middle is compared, both shown.
    dsv3 = "deepseek-v3-256to256-H100"
    reshard = next(c for c in bench.HELDOUT_SYNC_CASES if c.id.endswith(dsv3))
    assert reshard.method == "resharded" and reshard.published_s == pytest.approx((2.39 + 2.83) / 2)
    assert "2.39-2.83 (2.61)" in out
