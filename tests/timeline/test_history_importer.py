"""Per-step CSV histories (wandb's exports of a run): both shapes, bad cells, detection,
and calibration on one, which is calibration on verl's JSONL of the same figures."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.reports.calibrate import calibrate
from rlplex.timeline.importers import detect_record_format, import_record
from rlplex.timeline.importers.history import is_history_header, is_runs_table_header

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "examples" / "records"
CONFIG = ROOT / "examples" / "estimate_verl_quickstart.yaml"
# Three steps of verl's quickstart figures (docs/start/quickstart.rst: steps 0 and 1, and
# the example record's step 2).
STEPS = {
    1: {"timing_s/gen": 21.470, "timing_s/ref": 4.360, "timing_s/values": 5.800,
        "timing_s/adv": 0.109, "timing_s/update_critic": 15.664, "timing_s/update_actor": 20.314,
        "timing_s/step": 68.917},
    2: {"timing_s/gen": 23.020, "timing_s/ref": 4.322, "timing_s/values": 5.953,
        "timing_s/adv": 0.118, "timing_s/update_critic": 15.646, "timing_s/update_actor": 20.526,
        "timing_s/step": 70.785},
    3: {"timing_s/gen": 21.931, "timing_s/ref": 4.220, "timing_s/values": 5.947,
        "timing_s/adv": 0.110, "timing_s/update_critic": 15.700, "timing_s/update_actor": 20.201,
        "timing_s/step": 69.309},
}  # fmt: skip
KEYS = list(STEPS[1])


def write(tmp_path: Path, text: str, name: str = "run.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def history_csv(steps: dict[int, dict[str, float]] = STEPS) -> str:
    """``run.history().to_csv()``: pandas' unnamed index, wandb's own columns, a media column
    of text, and a validation metric logged on the first step only (empty elsewhere)."""
    header = ",_step,_runtime,_timestamp," + ",".join(KEYS) + ",samples,val/reward/mean"
    rows = [
        f"{i},{step},{60.0 * step:.1f},{1.7e9 + 60 * step},"
        + ",".join(str(data[k]) for k in KEYS)
        + ",table-file.json,"
        + ("0.21" if i == 0 else "")
        for i, (step, data) in enumerate(steps.items())
    ]
    return "\n".join([header, *rows]) + "\n"


def panel_csv(run: str = "qwen-0.5b - ppo") -> str:
    """A line plot panel's Export CSV of one run: Step, then each metric with its band."""
    header = ["Step"]
    for key in KEYS:
        header += [f"{run} - {key}", f"{run} - {key}__MIN", f"{run} - {key}__MAX"]
    rows = [
        ",".join([str(step)] + [str(data[k]) for k in KEYS for _ in range(3)])
        for step, data in STEPS.items()
    ]
    return "\n".join([",".join(header), *rows]) + "\n"


def verl_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    path.write_text(
        "".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in STEPS.items()),
        encoding="utf-8",
    )
    return path


def test_a_history_export_is_the_verl_log_of_the_same_figures(tmp_path: Path) -> None:
    path = write(tmp_path, history_csv())
    assert detect_record_format(path) == "history"
    run = import_record(path)
    verl = import_record(verl_jsonl(tmp_path))
    assert run.format == "history"
    assert run.steps == verl.steps and run.step_s == verl.step_s
    assert run.step_numbers == (1, 2, 3)
    assert run.steps[1] == {"generate": 21.470, "ref_logprob": 4.360, "values": 5.800,
                            "advantage": 0.109, "critic_train": 15.664,
                            "train": 20.314}  # fmt: skip
    # wandb's own columns, the index and the column of text are not metrics; an empty
    # cell is a metric not logged on that step.
    assert run.metrics[1] == {"val/reward/mean": 0.21}
    assert 2 not in run.metrics and 3 not in run.metrics


def test_a_panel_export_drops_the_run_prefix_and_the_band(tmp_path: Path) -> None:
    path = write(tmp_path, panel_csv())
    assert detect_record_format(path) == "history"
    run = import_record(path)
    assert run.steps == import_record(verl_jsonl(tmp_path)).steps
    assert run.step_s[2] == 70.785
    assert run.metrics == {}


def test_a_panel_exports_wandb_columns_of_the_run_are_ignored(tmp_path: Path) -> None:
    text = "Step,r - timing_s/gen,r - _runtime,r - loss\n1,2.5,60,0.5\n"
    run = import_record(write(tmp_path, text))
    assert run.steps == {1: {"generate": 2.5}} and run.metrics == {1: {"loss": 0.5}}


def test_a_panel_export_without_run_prefix(tmp_path: Path) -> None:
    text = "Step,timing_s/gen,timing_s/gen__MIN,timing_s/gen__MAX\n0,21.5,21.5,21.5\n1,23,23,23\n"
    assert import_record(write(tmp_path, text)).steps == {0: {"generate": 21.5},
                                                          1: {"generate": 23.0}}  # fmt: skip


def test_a_panel_of_several_runs_is_refused_naming_them(tmp_path: Path) -> None:
    header = "Step,run-a - timing_s/gen,run-a - timing_s/gen__MIN,run-b - timing_s/gen"
    path = write(tmp_path, header + "\n1,2,2,3\n")
    with pytest.raises(ConfigError, match="2 runs \\('run-a', 'run-b'\\)") as info:
        import_record(path)
    assert info.value.file == str(path) and info.value.line == 1


@pytest.mark.parametrize(
    "header", ["_step", "step", "Step", "global_step", "training/global_step"]
)  # fmt: skip
def test_step_columns(tmp_path: Path, header: str) -> None:
    path = write(tmp_path, f"{header},timing_s/gen\n4,1.5\n5.0,2.5\n")
    assert detect_record_format(path) == "history"
    assert import_record(path).steps == {4: {"generate": 1.5}, 5: {"generate": 2.5}}


def test_wandbs_step_is_taken_before_verls_global_step(tmp_path: Path) -> None:
    path = write(tmp_path, "training/global_step,_step,timing_s/gen\n1,0,1.5\n2,1,2.5\n")
    run = import_record(path)
    assert run.steps == {0: {"generate": 1.5}, 1: {"generate": 2.5}}
    assert run.metrics[0] == {"training/global_step": 1}


def test_nan_and_none_cells_are_not_values(tmp_path: Path) -> None:
    path = write(tmp_path, "_step,timing_s/gen,loss\n1,NaN,None\n2,2.5,null\n3,nan,0.5\n")
    run = import_record(path)
    assert run.steps == {2: {"generate": 2.5}} and run.metrics == {3: {"loss": 0.5}}


def test_a_byte_order_mark_is_not_part_of_the_step_column(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    path.write_text("_step,timing_s/gen\n1,2\n", encoding="utf-8-sig")
    assert import_record(path).steps == {1: {"generate": 2.0}}


H = "_step,timing_s/gen,timing_s/update_actor,samples\n"


@pytest.mark.parametrize(
    ("text", "line", "field", "value", "message"),
    [
        (H + "1,22,20,x\n2,-1,20,x\n3,22,20,x\n", 3, "timing_s/gen", "-1", "finite duration >= 0"),
        (H + "1,22,20,x\n2,inf,20,x\n3,22,20,x\n", 3, "timing_s/gen", "inf", "finite duration"),
        (H + "1,22,20,x\n2,fast,20,x\n3,22,20,x\n", 3, "timing_s/gen", "fast",
         "text in a column of numbers \\(a number on line 2\\)"),
        (H + "1,slow,20,x\n2,22,20,x\n3,22,20,x\n", 2, "timing_s/gen", "slow",
         "text in a column of numbers \\(a number on line 3\\)"),
        (H + "1,22,20,x\n2,22,20,x\n2,22,20,x\n", 4, "_step", "2", "step 2 appears twice"),
        (H + "1.5,22,20,x\n2,22,20,x\n", 2, "_step", "1.5", "whole step number"),
        (H + ",22,20,x\n2,22,20,x\n", 2, "_step", "", "whole step number"),
        (H + "1,22,20,x,y\n2,22,20,x\n", 2, None, "1,22,20,x,y", "5 cells under a header of 4"),
        ("_step,loss,acc\n1,0.5,0.9\n", 1, None, "_step,loss,acc", "no timing column"),
        ("_runtime,timing_s/gen,loss\n1,2,3\n", 1, None, "_runtime,timing_s/gen,loss",
         "needs a step column"),
        ("_step,timing_s/gen,timing_s/gen\n1,2,3\n", 1, "timing_s/gen", None, "again"),
        (H + "1,,,x\n2,,,x\n", None, None, None, "no row has a timing"),
        # Another framework's timers (OpenRLHF's names under verl's prefix) are timings, just
        # not verl's, NeMo RL's or OpenRLHF's (NeMo RL's timing/train/ and OpenRLHF's
        # train/timing/ columns are read: test_nemo_rl_importer, test_openrlhf_records).
        ("_step,timing_s/make_experience,timing_s/ppo_train\n1,50,90\n", None, None,
         None, "no column is a stage or step time verl, NeMo RL or OpenRLHF logs"
         " .*timing_s/make_experience,"
         " timing_s/ppo_train name no rlplex stage .*summary record"),
    ],
)  # fmt: skip
def test_bad_cells_name_the_line_column_and_value(
    tmp_path: Path, text: str, line: int | None, field: str | None, value: str | None,
    message: str,
) -> None:  # fmt: skip
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as info:
        import_record(path)
    error = info.value
    assert error.file == str(path) and error.line == line and error.field == field
    if value is not None:
        assert error.value == value
    assert str(error).startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_a_truncated_last_row_is_dropped_and_a_bad_row_skipped_when_asked(
    tmp_path: Path,
) -> None:
    run = import_record(write(tmp_path, H + "1,22,20,x\n2,23,20,x\n3,2"))
    assert run.step_numbers == (1, 2)
    assert any("line 4" in w and "truncated" in w for w in run.warnings)
    path = write(tmp_path, H + "1,22,20,x\n2,-1,20,x\n3,22,20,x\n")
    run = import_record(path, skip_bad_lines=True)
    assert run.steps[2] == {"train": 20.0} and run.steps[3] == {"generate": 22.0, "train": 20.0}
    assert any("line 3, column 'timing_s/gen'" in w and "skipped" in w for w in run.warnings)


def test_the_summary_csv_is_still_a_summary(tmp_path: Path) -> None:
    with_header = write(tmp_path, "metric,value\ntiming_s/gen,22.1\ntiming_s/step,50\n", "a.csv")
    without = write(tmp_path, "timing_s/gen,22.1\ntiming_s/step,50\n", "b.csv")
    for path in (with_header, without):
        assert detect_record_format(path) == "summary"
        run = import_record(path)
        assert run.format == "summary" and run.steps == {1: {"generate": 22.1}}


def test_a_history_read_as_a_summary_says_how_to_read_it(tmp_path: Path) -> None:
    path = write(tmp_path, history_csv())
    with pytest.raises(ConfigError, match="got 13 columns; a per-step history is --format history"):
        import_record(path, format="summary")
    run = import_record(write(tmp_path, history_csv(), "run.txt"), format="history")
    assert run.step_numbers == (1, 2, 3)


def test_calibrating_on_a_history_holds_out_steps_as_on_verls_jsonl(tmp_path: Path) -> None:
    history = write(tmp_path, history_csv())
    fit, doc = calibrate(history, CONFIG)
    same, same_doc = calibrate(verl_jsonl(tmp_path), CONFIG)
    assert fit.format == "history" and same.format == "verl"
    assert fit.fit_steps == same.fit_steps == (1,)
    assert fit.check_steps == same.check_steps == (2, 3)
    assert doc == same_doc
    assert fit.to_json()["stages"] == same.to_json()["stages"]


def test_the_example_history_is_the_example_verl_log() -> None:
    run = import_record(RECORDS / "verl_quickstart_wandb.csv")
    verl = import_record(RECORDS / "verl_quickstart.jsonl")
    assert run.format == "history" and len(run.steps) == 10
    assert run.steps == verl.steps and run.step_s == verl.step_s
    assert run.unknown_keys == verl.unknown_keys == ("timing_s/save_checkpoint",)


def test_a_runs_table_forced_as_a_history_says_what_it_is(tmp_path: Path) -> None:
    """Read as it is, a wandb runs table is a summary record (tests/timeline/
    test_summary_importer.py); ``--format history`` on one names what it holds instead."""
    path = write(tmp_path, "Name,State,timing_s/gen\nrun-a,finished,2\n")
    with pytest.raises(ConfigError, match="is a wandb runs table") as info:
        import_record(path, format="history")
    assert info.value.line == 1


def test_a_runs_table_with_a_step_counter_is_never_a_history(tmp_path: Path) -> None:
    """A run's summary holds its step counters (verl logs ``training/global_step``): the
    runs table shows them as columns. Bug: such a table was read as a history, each run a
    step; ``--format history`` now refuses it as what it is."""
    path = write(
        tmp_path,
        '"Name","State","Notes","Runtime","timing_s/gen","training/global_step"\n'
        '"run-a","finished","-","726","22.7","10"\n"run-b","finished","-","700","21.1","20"\n',
    )
    assert detect_record_format(path) == "summary"
    with pytest.raises(ConfigError, match="is a wandb runs table"):
        import_record(path, format="history")


@pytest.mark.parametrize(
    ("header", "table"),
    [
        # wandb's default columns, and a run table with ID, End Time and Updated shown.
        ('"Name","State","Notes","User","Tags","Created","Runtime","Sweep","lr","_step"', True),
        ('"Name","Created","Runtime","End Time","ID","Notes","Updated","Tags","loss"', True),
        # Name first and a metric: a runs table with its run columns hidden.
        ("Name,timing_s/gen", True),
        ("Name,timing_s/gen,training/global_step", True),
        # Histories: a run's history (pandas' index column first), a panel's export.
        (",_step,_runtime,timing_s/gen", False),
        ('"Step","qs-run - timing_s/gen","qs-run - timing_s/gen__MIN"', False),
        # A metric named name beside a step column, not first: a history's.
        ("_step,timing_s/gen,name", False),
    ],
)  # fmt: skip
def test_runs_tables_and_histories_are_told_apart_by_their_headers(
    header: str, table: bool
) -> None:
    cells = next(csv.reader([header]))
    assert is_runs_table_header(cells) is table
    assert is_history_header(cells) is (not table)
