"""What-if: the recorded work replayed under other placements, modes and GPU counts."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.plan import make_plan
from rlplex.sim import simulate
from rlplex.sim.whatif import (
    BASELINE_LABEL,
    Alternative,
    fit_exponent,
    parse_alt,
    parse_scaling,
    whatif,
)
from rlplex.timeline.importers import import_record

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECORDS = EXAMPLES / "records"
VERL_CONFIG = RECORDS / "verl_quickstart.yaml"
SPLIT_4_12 = [
    "cluster.nodes=2",
    "cluster.gpus_per_node=8",
    "roles.actor_infer.devices=0-3",
    "roles.actor_train.devices=4-15",
    "roles.reference.devices=4-15",
    "roles.critic.devices=4-15",
]
ASYNC_1 = ["pipeline.mode=async", "pipeline.max_staleness=1"]


@pytest.fixture(scope="module")
def verl():
    return import_record(RECORDS / "verl_quickstart.jsonl"), load_config(VERL_CONFIG)


def alt(label: str, overrides: list[str], path: Path = VERL_CONFIG, search: int = 0) -> Alternative:
    return Alternative(label, load_config(path, overrides=overrides), search=search)


def outcome(result, label: str):
    return next(o for o in result.alternatives if o.label == label)


def test_verl_4_12_sync_split_follows_from_the_cost_model_by_hand(verl) -> None:
    """The 4/12 sync split of the 1-GPU verl quickstart, recomputed by hand.

    In sync mode the period is the mean replayed step time over the 10
    recorded steps. On the split, generate runs on 4 GPUs (its recorded seconds
    x (1/4)**1), then ref_logprob, values, train and critic_train run one after
    another on the other 12 (reference, critic and actor share them:
    x (1/12)**1), advantage on the driver (unscaled), and the weight sync
    crosses the network: 1 GB / 25 GB/s = 0.04 s. Nothing is offloaded (17 GB
    of states on GPUs 4-15, 32 GB on 0-3). Sums over the 10 recorded steps:

        generate 221.811, ref_logprob 43.237, values 58.389,
        advantage 1.124, critic_train 155.686, train 203.638

        period  = (221.811 / 4 + (43.237 + 58.389 + 155.686 + 203.638) / 12
                   + 1.124) / 10 + 0.04
                = (55.45275 + 38.4125 + 1.124) / 10 + 0.04 = 9.538925 s
        as recorded (one GPU, all serial, on-device sync 1 GB / 200 GB/s):
                  (221.811 + 43.237 + 58.389 + 1.124 + 155.686 + 203.638) / 10
                   + 0.005 = 68.3935 s
        speed-up = 68.3935 / 9.538925 = 7.170
    """
    run, cfg = verl
    result = whatif(run, cfg, [alt("4/12 sync", SPLIT_4_12)])
    split = outcome(result, "4/12 sync")
    assert result.baseline.period_s == pytest.approx(68.3935, abs=1e-6)
    assert split.period_s == pytest.approx(9.538925, abs=1e-6)
    assert split.speedup == pytest.approx(7.170, abs=1e-3)
    assert split.factors["generate"] == pytest.approx(1 / 4)
    assert split.factors["train"] == pytest.approx(1 / 12)
    assert split.factors["advantage"] == 1.0
    # Recomputed from the record itself, not from the docstring's sums.
    rows = [run.steps[n] for n in range(10)]
    by_hand = (
        sum(
            r["generate"] / 4
            + (r["ref_logprob"] + r["values"] + r["critic_train"] + r["train"]) / 12
            + r["advantage"]
            for r in rows
        )
        / len(rows)
        + 1.0 / 25
    )
    assert split.period_s == pytest.approx(by_hand)


def test_one_step_off_async_beats_sync_on_the_same_split(verl) -> None:
    """Async k=1 overlaps generation of step t+1 with training of step t.

    Its period is at least the busier side's work (generation on 4 GPUs, or the
    four stages on 12) and below the sync split's, which adds both.
    """
    run, cfg = verl
    result = whatif(run, cfg, [alt("sync", SPLIT_4_12), alt("async", SPLIT_4_12 + ASYNC_1)])
    sync, asyn = outcome(result, "sync"), outcome(result, "async")
    assert (asyn.mode, asyn.staleness) == ("async", 1)
    assert asyn.warning is None  # replayed step by step
    rows = [run.steps[n] for n in range(10)]
    gen = sum(r["generate"] / 4 for r in rows) / 10
    trainer = sum((r["ref_logprob"] + r["values"] + r["critic_train"] + r["train"]) / 12
                  for r in rows) / 10  # fmt: skip
    assert max(gen, trainer) <= asyn.period_s < sync.period_s
    assert [o.label for o in result.alternatives] == ["async", "sync", BASELINE_LABEL]


def test_explicit_exponent_scales_the_stage(verl) -> None:
    run, cfg = verl
    result = whatif(run, cfg, [alt("split", SPLIT_4_12)], scaling={"generate": 0.5})
    split = outcome(result, "split")
    assert split.factors["generate"] == pytest.approx((1 / 4) ** 0.5)
    assert split.factors["train"] == pytest.approx(1 / 12)
    assert result.exponents == {"generate": 0.5}
    assert any("generate: exponent 0.5 given" in n for n in result.notes)


def test_exponents_are_fitted_from_records_at_two_device_counts(tmp_path: Path) -> None:
    """GRPO recorded on 8 GPUs, and again with rollout and training on 4 each.

    async.yaml prices generate as 120 s x (8/4)**0.9 and train as 80 s x 8/4,
    so the fit finds 0.9 and 1.
    """
    runs = {}
    for name in ("grpo.yaml", "async.yaml"):
        cfg = load_config(EXAMPLES / name)
        simulate(make_plan(cfg), cfg, steps=4).write_jsonl(tmp_path / f"{name}.jsonl")
        runs[name] = (import_record(tmp_path / f"{name}.jsonl"), cfg)
    run, cfg = runs["grpo.yaml"]
    result = whatif(run, cfg, [Alternative("async", runs["async.yaml"][1])],
                    fit_from=[runs["async.yaml"]])  # fmt: skip
    assert result.exponents["generate"] == pytest.approx(0.9)
    assert result.exponents["train"] == pytest.approx(1.0)
    assert any(n.startswith("generate: exponent 0.900 fitted") for n in result.notes)
    # Replaying the work under the config it was recorded with gives its own period.
    asyn = outcome(result, "async")
    assert asyn.period_s == pytest.approx(make_plan(runs["async.yaml"][1]).period_s, rel=1e-3)


def test_fit_exponent_least_squares() -> None:
    assert fit_exponent([(1, 100.0), (4, 25.0)]) == pytest.approx(1.0)
    assert fit_exponent([(2, 10.0), (4, 10.0), (8, 10.0)]) == pytest.approx(0.0)


def test_recorded_weight_sync_is_reused_only_on_the_recorded_devices() -> None:
    run = import_record(RECORDS / "grpo_run.jsonl")
    cfg = load_config(EXAMPLES / "grpo.yaml")
    split_devices = [
        "roles.actor_infer.devices=0-3",
        "roles.actor_train.devices=4-7",
        "roles.reference.devices=4-7",
    ]
    result = whatif(run, cfg, [alt("split", split_devices, EXAMPLES / "grpo.yaml")])
    assert "weight_sync" in result.baseline.factors
    split = outcome(result, "split")
    assert split.modelled == ("weight_sync",)
    sync = next(op for op in split.plan.ops if op.kind == "weight_sync")
    assert sync.duration_s == pytest.approx(4 / 25)  # 4 GB of weights over the network


def test_auto_searches_placements_for_the_recorded_work(verl) -> None:
    run, cfg = verl
    overrides = ["cluster.nodes=2", "cluster.gpus_per_node=8", *ASYNC_1] + [
        f"roles.{r}.devices=auto" for r in cfg.gpu_roles
    ]
    result = whatif(run, cfg, [alt("auto", overrides, search=3)])
    found = [o for o in result.alternatives if o.label.startswith("auto #")]
    assert len(found) == 3
    periods = [o.period_s for o in result.alternatives]
    assert periods == sorted(periods)
    for o in found:
        assert o.period_s < result.baseline.period_s
        if o.warning is None:
            assert_one_compute_op_per_device(simulate(o.plan, o.config, steps=12), first_step=3)
        else:  # no step of the plan repeats validly: the planner's own period is reported
            assert o.period_s == o.plan.period_s


def assert_one_compute_op_per_device(timeline, first_step: int = 0) -> None:
    """No device runs two stages (or weight syncs) at once in the replayed schedule.

    The first steps of an async pattern replay miss the device edges that run
    through steps before step 0 (pipeline fill); they are left out.
    """
    by_device: dict[int, list] = {}
    for e in timeline.events:
        if e.kind in ("run", "weight_sync") and e.step >= first_step:
            for d in e.devices:
                by_device.setdefault(d, []).append((e.start_s, e.end_s, e.op))
    for d, spans in by_device.items():
        spans.sort()
        for (_, end, a), (start, _, b) in pairwise(spans):
            assert start >= end - 1e-9, (d, a, b)


def test_an_alternative_that_cannot_run_is_reported_last(verl) -> None:
    run, cfg = verl
    result = whatif(run, cfg, [alt("huge", ["pipeline.stages.generate.memory_gb=60"])])
    last = result.alternatives[-1]
    assert last.label == "huge" and last.period_s is None and last.speedup is None
    assert "generate" in last.error


@pytest.mark.parametrize(
    ("text", "label", "overrides"),
    [
        ("4/12 async k=1: a.b=1 c=x", "4/12 async k=1", ["a.b=1", "c=x"]),
        ("a.b=1 c=x", "a.b=1 c=x", ["a.b=1", "c=x"]),
        ("x:  a=1", "x", ["a=1"]),
    ],
)
def test_parse_alt(text: str, label: str, overrides: list[str]) -> None:
    assert parse_alt(text) == (label, overrides)


@pytest.mark.parametrize("text", ["label only:", "x: a=1 oops", "x: =1"])
def test_parse_alt_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="--alt"):
        parse_alt(text)


def test_parse_scaling(verl) -> None:
    _, cfg = verl
    assert parse_scaling(["generate=0.8", "train=1"], cfg) == {"generate": 0.8, "train": 1.0}
    for bad, message in [("generate", "STAGE=EXPONENT"), ("nope=1", "unknown stage"),
                         ("train=-1", ">= 0"), ("train=x", "STAGE=EXPONENT")]:  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            parse_scaling([bad], cfg)


def test_a_tensor_parallel_change_is_priced_by_the_estimator() -> None:
    """Issue 10: a what-if that changes TP uses the estimator, not a device-count exponent."""
    from rlplex.estimate.scaling import estimator_ratios
    from rlplex.timeline.importers import import_record

    record = EXAMPLES / "records" / "verl_quickstart.jsonl"
    config = EXAMPLES / "estimate_verl_quickstart.yaml"
    run, cfg = import_record(record), load_config(config)
    eight = ["cluster.gpus_per_node=8"] + [
        f"roles.{r}.devices=0-7" for r in ("actor_train", "actor_infer", "reference", "critic")
    ]
    tp1 = load_config(config, overrides=eight)
    # tp 2: Qwen2.5-0.5B's 14 heads do not split 4 ways (vLLM refuses it, so does rlplex)
    tp2 = load_config(config, overrides=[*eight, "roles.actor_infer.num_gpus_per_worker=2"])
    r1 = estimator_ratios(cfg, tp1, ["generate", "train"])
    r2 = estimator_ratios(cfg, tp2, ["generate", "train"])
    assert r1["train"] == pytest.approx(r2["train"])  # the trainer did not change
    assert r2["generate"] != pytest.approx(r1["generate"])  # the rollout's TP did
    result = whatif(run, cfg, [Alternative("tp1", tp1), Alternative("tp2", tp2)])
    periods = {o.label: o.period_s for o in result.alternatives}
    assert periods["tp1"] != pytest.approx(periods["tp2"])
    assert "generate" in outcome(result, "tp2").estimated
    # Without the estimator's inputs nothing is estimated: the exponent rule applies.
    grpo = load_config(EXAMPLES / "grpo.yaml")
    assert estimator_ratios(grpo, grpo, ["generate"]) == {}


def test_auto_alternatives_are_planned_with_their_states_on_their_devices(tmp_path: Path) -> None:
    """A 7B run recorded on 8 + 8 GPUs, its states estimated from the model: the search ranks
    each candidate on its own devices (its states estimated again there), and what-if then
    planned and replayed the candidate with the recorded config's states (those of 8 GPUs
    for a trainer on 16); an --alt of devices: auto kept the states estimated as if on all
    16 GPUs for a role the search put on 8 (rev30b)."""
    seven_b = EXAMPLES / "estimate_7b.yaml"
    split = ["cluster.nodes=2", "roles.actor_infer.devices=8-15", "roles.actor_train.devices=0-7",
             "roles.reference.devices=0-7", "workload.prompts_per_step=64",
             "workload.response_tokens.mean=2048", "workload.response_tokens.max=4096"]  # fmt: skip
    cfg = load_config(seven_b, overrides=split)
    simulate(make_plan(cfg), cfg, steps=4).write_jsonl(tmp_path / "run.jsonl")
    run = import_record(tmp_path / "run.jsonl")
    roles = ("actor_train", "actor_infer", "reference")
    anywhere = [*split, *ASYNC_1, *(f"roles.{r}.devices=auto" for r in roles)]
    result = whatif(run, cfg, [alt("auto", [*split, *ASYNC_1], seven_b, search=3),
                               alt("anywhere", anywhere, seven_b)])  # fmt: skip
    found = [o for o in result.alternatives if o.label.startswith(("auto #", "anywhere"))]
    assert len(found) == 4
    assert any(len(o.plan.placement["actor_train"]) == 16 for o in found)
    for o in found:
        devices = [f"roles.{r}.devices={','.join(map(str, o.plan.placement[r]))}" for r in roles]
        k = f"pipeline.max_staleness={o.plan.staleness}"
        placed = load_config(seven_b, overrides=[*split, *ASYNC_1, *devices, k])
        for r in roles:
            assert o.config.roles[r].states == placed.roles[r].states, (o.label, r)


SEVEN_B_16 = [
    "cluster.nodes=2", "workload.prompts_per_step=64", "workload.response_tokens.mean=2048",
    "workload.response_tokens.max=4096", *ASYNC_1,
]  # fmt: skip
SEVEN_B_ROLES = ("actor_train", "actor_infer", "reference")


def test_a_recorded_devices_auto_config_is_replayed_as_planned(tmp_path: Path) -> None:
    """A 7B one-step-off run whose roles the search placed (devices: auto; it chose the
    rollout on 0-7, the trainer and reference on 8-15, 42.02 s), its record lacking
    ``generate``: the recorded config's row modelled generate with the figures read for
    the whole cluster, scaled to 8 GPUs (78.77 s for a 42.02 s plan); and its auto roles
    had no devices, so the estimator gave no exponents (the rule's 1 instead) and priced no
    alternative (tensor parallel 4: 42.02 s instead of 35.44). The same config with the
    chosen devices given is the reference (rev31)."""
    from rlplex.plan import plan_with_config

    seven_b = EXAMPLES / "estimate_7b.yaml"
    auto = load_config(seven_b, overrides=[*SEVEN_B_16, *(f"roles.{r}.devices=auto"
                                                         for r in SEVEN_B_ROLES)])  # fmt: skip
    moved, plan = plan_with_config(auto)
    assert len(plan.placement["actor_infer"]) == 8  # the search moved it off the whole cluster
    chosen = [f"roles.{r}.devices={','.join(map(str, plan.placement[r]))}" for r in SEVEN_B_ROLES]
    explicit = load_config(seven_b, overrides=[*SEVEN_B_16, *chosen])
    simulate(plan, moved, steps=6).write_jsonl(tmp_path / "run.jsonl")
    run = import_record(tmp_path / "run.jsonl")
    steps = {n: {s: v for s, v in row.items() if s != "generate"} for n, row in run.steps.items()}
    run = run.model_copy(update={"steps": steps})
    tp4 = "roles.actor_infer.num_gpus_per_worker=4"
    results = [whatif(run, cfg, [alt("tp4", [*SEVEN_B_16, *chosen, tp4], seven_b)])
               for cfg in (auto, explicit)]  # fmt: skip
    found, wanted = results
    assert found.baseline.period_s == pytest.approx(plan.period_s, rel=1e-6)
    assert found.baseline.period_s == pytest.approx(wanted.baseline.period_s, rel=1e-9)
    assert found.exponents == wanted.exponents and "generate" in found.exponents
    assert outcome(found, "tp4").period_s == pytest.approx(outcome(wanted, "tp4").period_s)
    assert outcome(found, "tp4").period_s < 0.9 * found.baseline.period_s
