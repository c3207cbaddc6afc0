"""Calibration: fitted on a record's first steps, it predicts the rest within 10 %."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.plan import make_plan
from rlplex.reports.calibrate import calibrate

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "examples" / "records"

TOY = {
    "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory_gb": 10},
    "roles": {
        "actor_train": {"devices": [0], "states": {"weights": 1, "optimizer": 2, "grads": 1}},
        "actor_infer": {"devices": [0], "states": {"weights": 1, "kv_cache": 2}},
    },
    "pipeline": {
        "stages": {
            "generate": {"role": "actor_infer", "seconds": 1.0},
            "reward": {"role": "driver", "seconds": 1.0, "after": ["generate"]},
            "train": {"role": "actor_train", "seconds": 1.0, "after": ["reward"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        }
    },
}  # fmt: skip
TRUE_S = {"generate": 0.30, "reward": 0.05, "train": 0.50, "weight_sync": 0.02}
GAP_S = 0.04


ESTIMATED_COLOCATED = {
    "model": "qwen2.5-7b",
    "workload": {"prompts_per_step": 256, "samples_per_prompt": 16,
                 "prompt_tokens": {"mean": 200, "max": 400},
                 "response_tokens": {"mean": 500, "max": 1000},
                 "micro_batch_tokens": 16384},
    "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "h100"},
    "roles": {"actor_infer": {"devices": "0-7", "num_gpus_per_worker": 2},
              "actor_train": {"devices": "0-7", "parallel": {"fsdp": True, "recompute": True}},
              "rewards": {"world_size": 4}},
    "pipeline": {"stages": {
        "generate": {"role": "actor_infer"},
        "reward": {"role": "rewards", "after": ["generate"]},
        "train": {"role": "actor_train", "after": ["reward"]},
    }},
}  # fmt: skip
"""An estimated 7B step, all roles on 8 H100s, with a rule reward on CPUs (4,096 sequences);
verl-style token budgets, so that FSDP's traffic stays behind compute."""


def _record(path: Path, steps: int = 10, jitter: float = 0.03) -> None:
    """An rlplex record of TOY run one op after another with GAP_S between ops."""
    rng = random.Random(7)
    t = 0.0
    lines: list[dict[str, Any]] = [{"meta": {"source": "synthetic"}}]
    for step in range(steps):
        for stage, seconds in TRUE_S.items():
            t += GAP_S
            took = seconds * (1 + rng.uniform(-jitter, jitter)) * (3 if step == 0 else 1)
            kind = "weight_sync" if stage == "weight_sync" else "run"
            lines.append({"step": step, "op": f"s{step}/{stage}", "kind": kind, "stage": stage,
                          "devices": [0], "start_s": t, "end_s": t + took})  # fmt: skip
            t += took
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_given_seconds_and_dispatch_fitted(tmp_path: Path) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(TOY))
    record = tmp_path / "r.jsonl"
    _record(record)
    result, doc = calibrate(record, config)
    assert result.fit_steps == (1, 2, 3, 4) and result.check_steps == (5, 6, 7, 8, 9)
    for fit in result.stages:
        assert fit.how == "seconds"
        assert abs(fit.error_after) < 0.05, fit
    assert result.dispatch_s == pytest.approx(GAP_S, rel=0.15)
    assert abs(result.period_error_after) < 0.05
    assert abs(result.period_error_before) > 0.5
    assert doc["cluster"]["dispatch_s"] == pytest.approx(result.dispatch_s, rel=1e-3)
    # The costs file reproduces the fitted period through --costs.
    costs = tmp_path / "costs.yaml"
    costs.write_text(yaml.safe_dump(doc))
    period = make_plan(load_config(config, costs=costs)).period_s
    assert period == pytest.approx(result.period_after_s, rel=1e-6)


def test_verl_quickstart_estimated_config_predicts_held_out_steps() -> None:
    result, doc = calibrate(
        RECORDS / "verl_quickstart.jsonl", ROOT / "examples" / "estimate_verl_quickstart.yaml"
    )
    fitted = {s.stage: s for s in result.stages}
    for name in ("generate", "ref_logprob", "values", "critic_train", "train"):
        assert fitted[name].how == "efficiency"
    # One physical parameter set per kind, never a factor per stage: each kind's summed time
    # is fitted, its stages share the fit (ref and values are both forward passes).
    kinds = {"generate": ["generate"], "forward": ["ref_logprob", "values"],
             "train": ["critic_train", "train"]}  # fmt: skip
    for names in kinds.values():
        after = sum(fitted[n].after_s for n in names)
        measured = sum(fitted[n].measured_check_s for n in names)
        assert after == pytest.approx(measured, rel=0.10), names
    assert abs(result.period_error_after) < 0.10
    assert set(doc["efficiency"]) >= {"train", "forward", "prefill", "decode", "decode_step_s"}
    assert "stages" not in doc["efficiency"]


def test_verl_quickstart_given_config() -> None:
    result, _ = calibrate(RECORDS / "verl_quickstart.jsonl", RECORDS / "verl_quickstart.yaml")
    assert abs(result.period_error_after) < 0.10
    # verl's step time exceeds its stages' sum by 1.2 s of driver work: 7 ops per step.
    assert result.dispatch_s == pytest.approx(1.2 / 7, rel=0.2)


def test_too_few_steps_and_no_common_stage(tmp_path: Path) -> None:
    from rlplex.errors import ConfigError

    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(TOY))
    record = tmp_path / "r.jsonl"
    _record(record, steps=3)
    with pytest.raises(ConfigError) as info:
        calibrate(record, config, fit_steps=9)
    assert info.value.field == "--fit-steps"
    other = tmp_path / "other.jsonl"
    other.write_text(record.read_text().replace('"stage": "', '"stage": "x_'))
    with pytest.raises(ConfigError, match="no stage of the config is in the record"):
        calibrate(other, config)


def test_cli_writes_a_costs_file_plan_accepts(tmp_path: Path) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(TOY))
    record = tmp_path / "r.jsonl"
    _record(record)
    out = tmp_path / "costs.yaml"
    runner = CliRunner()
    result = runner.invoke(
        app, ["calibrate", str(record), "--config", str(config), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "period" in result.output and out.exists()
    planned = runner.invoke(app, ["plan", str(config), "--costs", str(out), "--json"])
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.stdout)["period_s"] == pytest.approx(
        sum(TRUE_S.values()) + 4 * GAP_S, rel=0.05
    )


def test_roll_and_rlplex_records() -> None:
    roll, _ = calibrate(RECORDS / "roll_rlvr_stdout.log", ROOT / "examples" / "roll.yaml")
    assert roll.format == "roll" and abs(roll.period_error_after) < 0.10
    own, _ = calibrate(RECORDS / "grpo_run.jsonl", ROOT / "examples" / "grpo.yaml")
    assert own.format == "rlplex" and abs(own.period_error_after) < 0.10


def test_a_recorded_split_weight_sync_keeps_its_measured_seconds(tmp_path: Path) -> None:
    """Regression: the loader estimates every sync's seconds; calibrate skipped estimated
    stages and fits no weight-sync kind, so a recorded 9 s sync between disjoint GPUs left
    the costs file and went into dispatch_s. It now takes the record's seconds."""
    config = {
        "model": "llama-3.1-8b",
        "workload": {"prompts_per_step": 64, "samples_per_prompt": 4,
                     "prompt_tokens": {"mean": 100, "max": 200},
                     "response_tokens": {"mean": 300, "max": 600}},
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "h100"},
        "roles": {"actor_infer": {"devices": "0-3"},
                  "actor_train": {"devices": "4-7", "parallel": {"fsdp": True}}},
        "pipeline": {"stages": {
            "generate": {"role": "actor_infer"},
            "train": {"role": "actor_train", "after": ["generate"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        }},
    }  # fmt: skip
    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(config))
    assert load_config(path).is_estimated("pipeline.stages.weight_sync.seconds")
    took = {"generate": (range(4), 30.0), "train": (range(4, 8), 40.0),
            "weight_sync": (range(8), 9.0)}  # fmt: skip
    lines: list[dict[str, Any]] = [{"meta": {"source": "synthetic"}}]
    t = 0.0
    for step in range(8):
        for stage, (devices, seconds) in took.items():
            kind = "weight_sync" if stage == "weight_sync" else "run"
            lines.append(
                {
                    "step": step,
                    "op": f"s{step}/{stage}",
                    "kind": kind,
                    "stage": stage,
                    "devices": list(devices),
                    "start_s": t,
                    "end_s": t + seconds,
                }
            )
            t += seconds  # fmt: skip
    record = tmp_path / "r.jsonl"
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result, doc = calibrate(record, path)
    sync = next(fit for fit in result.stages if fit.stage == "weight_sync")
    assert sync.how == "seconds"
    assert sync.after_s == pytest.approx(9.0)
    assert doc["stages"]["weight_sync"]["seconds"] == pytest.approx(9.0)
    assert result.dispatch_s < 1.0


def test_the_fit_of_an_engine_across_hosts_reprices_its_whole_latency(tmp_path: Path) -> None:
    """Regression: calibrate solved one ratio for generation's whole latency term but
    multiplied only the floors it listed, not the all-reduce latencies that the term also
    holds, so the fitted generate of an engine across nodes came out at 18.7 s against the
    30 s measured. Every part of the latency term (the cross-host step too) is now fitted."""
    config = {
        "model": "llama-3.1-8b",
        "workload": {"prompts_per_step": 16, "samples_per_prompt": 4,
                     "prompt_tokens": {"mean": 100, "max": 200},
                     "response_tokens": {"mean": 300, "max": 600}},
        "cluster": {"nodes": 4, "gpus_per_node": 2, "gpu": "h100"},
        "roles": {"actor_infer": {"devices": "0-3", "num_gpus_per_worker": 4},
                  "actor_train": {"devices": "4-7", "parallel": {"fsdp": True}}},
        "pipeline": {"stages": {
            "generate": {"role": "actor_infer"},
            "train": {"role": "actor_train", "after": ["generate"]},
        }},
    }  # fmt: skip
    path = tmp_path / "across.yaml"
    path.write_text(yaml.safe_dump(config))
    took = {"generate": (range(4), 30.0), "train": (range(4, 8), 40.0)}
    lines: list[dict[str, Any]] = [{"meta": {"source": "synthetic"}}]
    t = 0.0
    for step in range(8):
        for stage, (devices, seconds) in took.items():
            op = {"step": step, "op": f"s{step}/{stage}", "kind": "run", "stage": stage}
            lines.append({**op, "devices": list(devices), "start_s": t, "end_s": t + seconds})
            t += seconds
    record = tmp_path / "r.jsonl"
    record.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result, doc = calibrate(record, path)
    generate = next(fit for fit in result.stages if fit.stage == "generate")
    assert generate.how == "efficiency"
    assert generate.after_s == pytest.approx(30.0, rel=0.02)
    for key in ("allreduce_inter_node_s", "cross_host_step_s"):
        assert key in doc["efficiency"]
    costs = tmp_path / "costs.yaml"
    costs.write_text(yaml.safe_dump(doc))
    planned = load_config(path, costs=costs).pipeline.stage("generate").seconds
    assert planned == pytest.approx(generate.after_s, rel=1e-3)


def test_an_estimate_longer_than_the_record_lowers_the_per_step_overhead(
    tmp_path: Path,
) -> None:
    """Regression: a summary whose step leaves less time outside its stages than the
    estimate's per-step overhead (verl's fully-async colocated rows: 11 s outside, 35 s
    estimated) was fitted with dispatch_s 0 and a plan 9 % longer than the step it was fitted
    on. The per-step overhead, the only estimated time no recorded stage holds, is lowered
    until the plan matches; a plan that falls short still takes dispatch_s."""
    path = tmp_path / "colocated.yaml"
    path.write_text(yaml.safe_dump(ESTIMATED_COLOCATED))
    reward_s = 256 * 16 * 0.004  # sequences x the default sequence_overhead_s
    for outside_s, lowered in ((2.0, True), (30.0, False)):
        step = 60.0 + 40.0 + outside_s
        record = tmp_path / "summary.yaml"
        record.write_text(yaml.safe_dump({"framework": "verl", "timing_s": {
            "gen": 60.0, "update_actor": 40.0, "step": step}}))  # fmt: skip
        result, doc = calibrate(record, path)
        assert result.period_after_s == pytest.approx(step, rel=0.01), outside_s
        if lowered:
            ratio = doc["efficiency"]["sequence_overhead_s"] / 0.004
            assert 0.0 <= ratio < 1.0
            assert result.overhead_ratio == pytest.approx(ratio, rel=1e-3)
            assert doc["efficiency"]["step_overhead_s"] == pytest.approx(2.0 * ratio, rel=1e-3)
            assert doc["cluster"]["dispatch_s"] == 0.0
            assert any("per-step overhead" in w for w in result.warnings)
            # what the plan keeps outside the two stages is what the record leaves
            assert reward_s * ratio + 2.0 * ratio == pytest.approx(outside_s, abs=0.2)
        else:
            assert "sequence_overhead_s" not in doc["efficiency"]
            assert result.overhead_ratio is None
            assert doc["cluster"]["dispatch_s"] > 0.0


def test_a_recorded_reward_stage_fits_the_per_sequence_overhead(tmp_path: Path) -> None:
    """Regression: a recorded rule-reward stage kept its estimate (the record's seconds were
    ignored), and the per-step overhead fit then moved it to close the period gap (10 s
    measured -> 1.8 s planned). Its measured seconds now fit sequence_overhead_s, and only
    step_overhead_s is left to the period."""
    path = tmp_path / "colocated.yaml"
    path.write_text(yaml.safe_dump(ESTIMATED_COLOCATED))
    record = tmp_path / "summary.yaml"
    record.write_text(yaml.safe_dump({"framework": "rlplex", "timing_s": {
        "generate": 60.0, "reward": 10.0, "train": 40.0, "step": 111.0}}))  # fmt: skip
    result, doc = calibrate(record, path)
    reward = next(s for s in result.stages if s.stage == "reward")
    assert reward.after_s == pytest.approx(10.0, rel=1e-3)
    assert doc["efficiency"]["sequence_overhead_s"] == pytest.approx(10.0 / (256 * 16), rel=1e-3)
    # 111 s = 60 + 10 + 40 + step_overhead_s: the default 2 s is lowered to about 1 s
    assert result.overhead_ratio is not None
    assert doc["efficiency"]["step_overhead_s"] == pytest.approx(1.0, abs=0.05)
    assert result.period_after_s == pytest.approx(111.0, rel=1e-3)
    assert result.to_json()["overhead_ratio"] == result.overhead_ratio


def test_a_plan_that_stays_longer_than_the_record_says_so(tmp_path: Path) -> None:
    """A record whose step is shorter than its stages run one after another (given seconds:
    no fitted parameter moves the period) is fitted as far as it goes, and the fit says by
    how much the plan stays longer."""
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(TOY))
    record = tmp_path / "summary.yaml"
    record.write_text(yaml.safe_dump({"framework": "rlplex", "timing_s": {
        **TRUE_S, "step": 0.5}}))  # fmt: skip
    result, _ = calibrate(record, config)
    assert result.period_after_s > 0.5 * 1.5
    assert any("the plan stays" in w and "longer than the record's step" in w
               for w in result.warnings)  # fmt: skip


def test_waits_for_the_environment_are_not_fitted(tmp_path: Path) -> None:
    """Regression: a multi-turn generate stage's waits for its environment (turns.env_s, in
    its latency term) were scaled with the decode parameters, which no record of them can
    move: the fit missed the measured seconds (-14 % at 50 s of waits). The decode
    parameters now fit the rest, and the stage comes out as measured."""
    config = copy.deepcopy(ESTIMATED_COLOCATED)
    config["workload"]["turns"] = {"mean": 3, "max": 6, "observation_tokens": 100, "env_s": 5}
    path = tmp_path / "agentic.yaml"
    path.write_text(yaml.safe_dump(config))
    plain, _ = calibrate(_summary(tmp_path, {"train": 40.0}), path)
    before = next(s for s in plain.stages if s.stage == "generate").before_s
    result, _ = calibrate(_summary(tmp_path, {"generate": before * 1.5, "train": 40.0}), path)
    generate = next(s for s in result.stages if s.stage == "generate")
    assert generate.after_s == pytest.approx(before * 1.5, rel=1e-4)
    train = next(s for s in result.stages if s.stage == "train")
    assert train.after_s == pytest.approx(40.0, rel=1e-4)  # no per-step overhead in it


def test_a_communication_bound_stage_is_fitted_to_its_measured_time(tmp_path: Path) -> None:
    """Regression: the fit held exposed communication fixed, but it shrinks as compute grows:
    on a communication-bound train stage the fitted efficiency halved and the stage did not
    move. The stage is re-estimated at each trial ratio now: it comes out as measured, and
    the fit says the parameters absorbed time no parameter prices."""
    config = copy.deepcopy(ESTIMATED_COLOCATED)
    config["cluster"]["nodes"] = 4
    for role in ("actor_infer", "actor_train"):
        config["roles"][role]["devices"] = "0-31"
    config["workload"]["micro_batch_tokens"] = 2048  # small micro-batches: FSDP traffic shows
    path = tmp_path / "fsdp.yaml"
    path.write_text(yaml.safe_dump(config))
    plain, _ = calibrate(_summary(tmp_path, {"generate": 60.0}), path)
    train_before = next(s for s in plain.stages if s.stage == "train").before_s
    target = train_before * 3.0
    result, _ = calibrate(_summary(tmp_path, {"generate": 60.0, "train": target}), path)
    train = next(s for s in result.stages if s.stage == "train")
    assert train.after_s == pytest.approx(target, rel=1e-4)
    assert any("bound by communication" in w for w in result.warnings), result.warnings


def _summary(tmp_path: Path, timing: dict[str, float]) -> Path:
    record = tmp_path / f"summary{len(list(tmp_path.iterdir()))}.yaml"
    record.write_text(yaml.safe_dump({"framework": "rlplex", "timing_s": timing}))
    return record


def test_a_record_far_beyond_the_estimate_is_not_fitted_and_says_why(tmp_path: Path) -> None:
    """Regression: a generate stage recorded 1e5 s long needed its decode floor above the
    format's 10 s bound, and calibrate failed naming a temporary file; a ratio beyond the
    search said the time was *below* the unfitted terms."""
    path = tmp_path / "colocated.yaml"
    path.write_text(yaml.safe_dump(ESTIMATED_COLOCATED))
    result, doc = calibrate(_summary(tmp_path, {"generate": 1e5, "train": 40.0}), path)
    assert any("generate stages" in w and "not fitted" in w for w in result.warnings)
    assert not any("generate stages" in w and "below" in w for w in result.warnings)
    assert "decode" not in doc.get("efficiency", {})


def test_recorded_stages_the_config_lacks_are_named() -> None:
    """verl's PPO quickstart calibrated with the ROLL GRPO example (no critic): its values and
    critic_train time went silently into the fitted dispatch_s (0.4 s an op); replay named
    them, calibrate did not (tour 30)."""
    result, _ = calibrate(RECORDS / "verl_quickstart.jsonl", ROOT / "examples" / "roll.yaml")
    (line,) = [w for w in result.warnings if w.startswith("recorded stage(s) not in the config")]
    assert "values 5." in line and "critic_train 15." in line and "dispatch_s" in line
    matched, _ = calibrate(RECORDS / "verl_quickstart.jsonl", RECORDS / "verl_quickstart.yaml")
    assert not any("not in the config" in w for w in matched.warnings)


def test_a_role_left_to_the_search_is_refused_naming_it() -> None:
    """A record was made on the devices the run used; with ``devices: auto`` calibrate fitted
    the search's placement's figures (or the whole cluster's, as read) to it. It names the
    role and asks for its devices, exit 2."""
    from rlplex.errors import ConfigError

    config = ROOT / "examples" / "estimate_verl_quickstart.yaml"
    record = RECORDS / "verl_quickstart_summary.yaml"
    with pytest.raises(ConfigError) as info:
        calibrate(record, config, overrides=["roles.actor_infer.devices=auto"])
    assert info.value.field == "roles.actor_infer.devices" and info.value.value == "auto"
    assert "--set roles.actor_infer.devices=" in str(info.value)
    result = CliRunner().invoke(
        app,
        ["calibrate", str(record), "--config", str(config), "--set",
         "roles.actor_infer.devices=auto"],
    )  # fmt: skip
    assert result.exit_code == 2 and "Traceback" not in result.output
