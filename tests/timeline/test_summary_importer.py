"""Summary records (per-stage means and lengths): reading, detection, bad values, calibration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlplex.errors import ConfigError
from rlplex.timeline.importers import detect_record_format, import_record

try:  # being moved to rlplex.reports.calibrate
    from rlplex.reports.calibrate import calibrate
except ImportError:
    from rlplex.reports.calibrate import calibrate

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "estimate_verl_quickstart.yaml"
# verl's quickstart, docs/start/quickstart.rst (../shared/data/public_timings.md): the mean
# of the two published steps.
STEP0 = {"gen": 21.470, "ref": 4.360, "values": 5.800, "adv": 0.109, "update_critic": 15.664,
         "update_actor": 20.314}  # fmt: skip
STEP1 = {"gen": 23.020, "ref": 4.322, "values": 5.953, "adv": 0.118, "update_critic": 15.646,
         "update_actor": 20.526}  # fmt: skip
MEAN = {k: (STEP0[k] + STEP1[k]) / 2 for k in STEP0}
RECORD: dict[str, Any] = {
    "framework": "verl",
    "steps": 2,
    "timing_s": MEAN,
    "response_length": {"mean": 210, "max": 512, "clip_ratio": 0.02},
}
VERL_TO_RLPLEX = {
    "gen": "generate",
    "ref": "ref_logprob",
    "values": "values",
    "adv": "advantage",
    "update_critic": "critic_train",
    "update_actor": "train",
}


def _write(tmp_path: Path, name: str, doc: Any) -> Path:
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(doc), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_yaml_summary_is_one_step_of_the_means(tmp_path: Path) -> None:
    run = import_record(_write(tmp_path, "qs.yaml", RECORD))
    assert run.format == "summary"
    assert run.steps == {1: pytest.approx({VERL_TO_RLPLEX[k]: v for k, v in MEAN.items()})}
    assert run.step_s == {}
    metrics = run.metrics[1]
    assert metrics["response_length/mean"] == 210 and metrics["response_length/clip_ratio"] == 0.02
    assert metrics["summary/steps"] == 2


def test_json_flat_keys_and_csv_read_the_same(tmp_path: Path) -> None:
    flat = {f"timing_s/{k}": v for k, v in MEAN.items()}
    flat |= {"timing_s/step": 70.0, "response_length/mean": 210}
    path = _write(tmp_path, "qs.json", flat)
    assert detect_record_format(path) == "summary"
    run = import_record(path)
    csv_path = tmp_path / "qs.csv"
    csv_path.write_text(
        "metric,value\n" + "".join(f"{k},{v}\n" for k, v in flat.items()), encoding="utf-8"
    )
    again = import_record(csv_path)
    assert run.steps == again.steps and run.step_s == again.step_s == {1: 70.0}
    assert again.metrics[1]["response_length/mean"] == 210


def test_verl_jsonl_is_not_taken_for_a_summary() -> None:
    assert detect_record_format(ROOT / "examples" / "records" / "verl_quickstart.jsonl") == "verl"


def test_rlplex_names_and_extra_mapping(tmp_path: Path) -> None:
    doc = {"framework": "rlplex", "timing_s": {"generate": 10.0, "train": 5.0, "step": 16}}
    assert import_record(_write(tmp_path, "a.yaml", doc)).steps == {1: {"generate": 10.0,
                                                                        "train": 5.0}}  # fmt: skip
    doc = {"timing_s": {"generate_sequences": 9.0, "update_actor": 5.0},
           "stages": {"generate_sequences": "generate"}}  # fmt: skip
    run = import_record(_write(tmp_path, "b.yaml", doc))
    assert run.steps == {1: {"generate": 9.0, "train": 5.0}}
    doc = {"timing_s": {"wait_prev_gen": 9.0, "update_actor": 5.0}}
    run = import_record(_write(tmp_path, "c.yaml", doc))
    assert run.unknown_keys == ("timing_s/wait_prev_gen",)
    assert any("wait_prev_gen" in w for w in run.warnings)


@pytest.mark.parametrize(
    ("doc", "field", "value"),
    [
        ({"timing_s": {"gen": -1}}, "timing_s/gen", -1),
        ({"timing_s": {"gen": "fast"}}, "timing_s/gen", "fast"),
        ({"timing_s": {"gen": 1}, "response_length": {"clip_ratio": 1.5}},
         "response_length/clip_ratio", 1.5),
        ({"timing_s": {"gen": 1}, "response_length": {"mean": 0}}, "response_length/mean", 0),
        ({"timing_s": {"gen": 1}, "response_length": {"p99": 3}}, "response_length/p99", 3),
        ({"framework": "trl", "timing_s": {"gen": 1}}, "framework", "trl"),
        ({"timing_s": {"gen": 1}, "steps": 0}, "steps", 0),
        ({"response_length": {"mean": 3}}, "timing_s", None),
        # found in review (2026-11-29): out-of-order lengths were read and fitted
        ({"timing_s": {"gen": 1}, "response_length": {"mean": 600, "max": 512}},
         "response_length/mean", 600),
        ({"timing_s": {"gen": 1}, "prompt_length": {"min": 90, "mean": 80}},
         "prompt_length/min", 90),
    ],
)  # fmt: skip
def test_bad_values_name_the_key_and_value(
    tmp_path: Path, doc: dict[str, Any], field: str, value: Any
) -> None:
    path = _write(tmp_path, "bad.yaml", doc)
    with pytest.raises(ConfigError) as info:
        import_record(path)
    assert info.value.field == field and info.value.file == str(path)
    if value is not None:
        assert info.value.value == value


def test_csv_row_of_three_columns_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("timing_s/gen,1\ntiming_s/ref,2,3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="metric,value") as info:
        import_record(path)
    assert info.value.line == 2


def test_calibrating_on_the_summary_is_calibrating_on_one_verl_step(tmp_path: Path) -> None:
    summary = _write(tmp_path, "qs.yaml", RECORD)
    jsonl = tmp_path / "qs.jsonl"
    data = {f"timing_s/{k}": v for k, v in MEAN.items()}
    jsonl.write_text(json.dumps({"step": 1, "data": data}) + "\n", encoding="utf-8")
    fit, doc = calibrate(summary, CONFIG)
    same, same_doc = calibrate(jsonl, CONFIG)
    assert fit.format == "summary" and same.format == "verl"
    assert doc == same_doc
    # The fit reproduces the published means it was given, kind by kind (one set of physical
    # parameters per kind, never a factor per stage). verl's timings hold none of the per-step
    # overhead the estimate carries on the train stage (time outside every stage): the planned
    # stage keeps it on top of the fitted time, and the fit's figures leave it out (they
    # counted it, so a fitted train stage read a spurious error of the overhead).
    from rlplex.config import load_config
    from rlplex.estimate.estimator import estimate_config

    outside = {n: e.outside_s for n, e in estimate_config(load_config(CONFIG)).stages.items()}
    assert outside["train"] > 0
    fitted = [s for s in fit.stages if s.measured_fit_s is not None and s.how == "efficiency"]
    assert fitted
    assert sum(s.after_s for s in fitted) == pytest.approx(
        sum(s.measured_fit_s or 0.0 for s in fitted), rel=1e-3
    )
    # The published train stages take longer than the uncalibrated estimate on an L20: the fit
    # lowers the train ceiling (0.6 by default), it does not scale a stage.
    assert 0.0 < fit.efficiency["train"] < 0.6


def test_the_example_summary_holds_the_published_means() -> None:
    run = import_record(ROOT / "examples" / "records" / "verl_quickstart_summary.yaml")
    assert run.steps[1] == pytest.approx({VERL_TO_RLPLEX[k]: v for k, v in MEAN.items()})


RUNS_TABLE = (
    "Name,State,Notes,User,Tags,Created,Runtime,Sweep,actor_rollout_ref.rollout.n,"
    + ",".join(f"timing_s/{k}" for k in MEAN)
    + ",timing_s/step,response_length/mean,response_length/max,response_length/clip_ratio\n"
)
"""A wandb runs table's CSV export: run columns, a config column, summary metrics."""


def _runs_table(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "runs.csv"
    path.write_text(RUNS_TABLE + "".join(rows), encoding="utf-8")
    return path


def _row(name: str, **figures: Any) -> str:
    values = [*(str(figures.get(k, MEAN[k])) for k in MEAN), "70.0", "210", "512", "0.02"]
    return f"{name},finished,,me,,2024-12-01T00:00:00,140,,1," + ",".join(values) + "\n"


def test_a_wandb_runs_table_of_one_run_is_its_summary(tmp_path: Path) -> None:
    """One row per run, each metric's summary value: the run's figures, as the YAML summary
    of the same figures gives them, with a warning that wandb's summary is the last step's."""
    run = import_record(_runs_table(tmp_path, _row("qs-run")))
    record = {**RECORD, "timing_s": {**MEAN, "step": 70.0}}
    same = import_record(_write(tmp_path, "qs.yaml", record))
    assert run.format == "summary"
    assert run.steps == same.steps and run.step_s == same.step_s == {1: 70.0}
    metrics = run.metrics[1]
    assert metrics["run/name"] == "qs-run" and metrics["response_length/mean"] == 210
    assert "Notes" not in metrics  # an empty cell is no value
    assert any("last step's" in w for w in run.warnings)


def test_a_runs_table_of_several_runs_names_them(tmp_path: Path) -> None:
    path = _runs_table(tmp_path, _row("run-a"), _row("run-b"))
    with pytest.raises(ConfigError, match=r"of 2 runs \('run-a', 'run-b'\).*filter the table"):
        import_record(path)


def test_a_runs_tables_bad_time_names_its_column(tmp_path: Path) -> None:
    path = _runs_table(tmp_path, _row("run-a", gen="-"))
    with pytest.raises(ConfigError) as info:
        import_record(path)
    assert (info.value.field, info.value.value) == ("timing_s/gen", "-")


def test_the_example_runs_table_is_the_last_step_of_the_example_run() -> None:
    """examples/records/verl_quickstart_runs.csv is the JSONL's run as wandb's runs table
    shows it: each timing is the last step's (wandb's default summary)."""
    records = ROOT / "examples" / "records"
    table = import_record(records / "verl_quickstart_runs.csv")
    jsonl = import_record(records / "verl_quickstart.jsonl")
    last = max(jsonl.steps)
    assert table.format == "summary"
    assert table.steps[1] == pytest.approx(jsonl.steps[last])
    assert table.step_s[1] == pytest.approx(jsonl.step_s[last])


def test_a_runs_table_as_wandb_writes_it_is_one_runs_summary(tmp_path: Path) -> None:
    """wandb's Export CSV quotes every cell, writes ``-`` for no notes, shows a summary's
    step counter (verl's ``training/global_step``) and a dict value as its JSON: still the
    run's summary, its timings as given (bug: the step counter made it a history, each run
    a step)."""
    path = tmp_path / "wandb_export.csv"
    path.write_text(
        '"Name","State","Notes","ID","Runtime","timing_s/gen","timing_s/step",'
        '"training/global_step","val/hist"\n'
        '"qs-run","finished","-","3p0donj4","726","22.769","70.969","10",'
        '"{""_type"":""histogram""}"\n',
        encoding="utf-8",
    )
    run = import_record(path)
    assert run.format == "summary"
    assert run.steps[1] == {"generate": pytest.approx(22.769)}
    assert run.step_s == {1: pytest.approx(70.969)}
    assert run.metrics[1]["run/name"] == "qs-run"
    assert run.metrics[1]["training/global_step"] == 10


def test_nemo_rl_names_and_its_joint_timers(tmp_path: Path) -> None:
    """``framework: nemo_rl`` reads NeMo RL's timer names, nested or as wandb flattens them
    (``timing/train/NAME``): its generation (which scores each response) and its log-prob
    timer (both passes) are joint timers, divided where the record meets a config, as they
    are in its console log; ``total_step_time`` is the step."""
    from rlplex.config import load_config
    from rlplex.timeline.joint import split_joint

    nested = tmp_path / "nemo.yaml"
    nested.write_text(yaml.safe_dump({
        "framework": "nemo_rl",
        "timing_s": {"generation": 50.0, "policy_and_reference_logprobs": 12.0,
                     "policy_training": 20.0, "reward_calculation": 0.2,
                     "total_step_time": 85.5},
        "mean_gen_tokens_per_sample": 644.7,
    }))  # fmt: skip
    flat = tmp_path / "nemo.csv"
    flat.write_text(
        "metric,value\nframework,nemo_rl\ntiming/train/generation,50.0\n"
        "timing/train/policy_and_reference_logprobs,12.0\ntiming/train/policy_training,20.0\n"
        "timing/train/reward_calculation,0.2\ntiming/train/total_step_time,85.5\n"
        "mean_gen_tokens_per_sample,644.7\n"
    )
    for path in (nested, flat):
        run = import_record(path)
        assert run.step_s == {1: 85.5}
        assert run.steps[1] == {"generate+reward": 50.0, "old_logprob+ref_logprob": 12.0,
                                "train": 20.0, "advantage": 0.2}  # fmt: skip
        assert run.joint == {"generate+reward": ("generate", "reward"),
                             "old_logprob+ref_logprob": ("old_logprob", "ref_logprob")}  # fmt: skip
        config = load_config(ROOT / "examples" / "nemo_rl.yaml", overrides=["cluster.gpu=h100"])
        split = split_joint(run, config).steps[1]
        assert split["old_logprob"] + split["ref_logprob"] == pytest.approx(12.0)
        assert split["generate"] + split["reward"] == pytest.approx(50.0)
        assert run.metrics[1]["mean_gen_tokens_per_sample"] == pytest.approx(644.7)
