"""Log importers (rlplex, verl, ROLL, wandb CSV) on real-format lines, bad lines, and the examples."""
# ruff: noqa: E501 -- tables of exact error messages read best one per line

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.timeline.importers import detect_record_format, import_record
from rlplex.timeline.importers.verl import parse_console_line

RECORDS = Path(__file__).resolve().parents[2] / "examples" / "records"


def write(tmp_path: Path, text: str, name: str = "log.txt") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "line",
    [
        "step:12 - timing_s/gen:30.5 - timing_s/update_actor:12.25 - timing_s/step:50.0",
        "(TaskRunner pid=1234) step:12 - timing_s/gen:30.5 - timing_s/update_actor:12.25 - timing_s/step:50.0",
        "(main_task pid=99) step:12 - timing/gen:30.5 - timing/update_actor:12.25 - timing/step:50.0",
        "(main_task pid=99, ip=10.0.0.3) step:12 - timing(s)/gen:30.5 - timing(s)/update_actor:12.25 - timing(s)/step:50.0",
        "step:12 - timing_s/gen:np.float64(30.5) - timing_s/update_actor:12.25 - timing_s/step:50",
    ],
)
def test_verl_console_key_styles(tmp_path: Path, line: str) -> None:
    run = import_record(write(tmp_path, "ray chatter\n" + line + "\n"))
    assert run.format == "verl"
    assert run.steps == {12: {"generate": 30.5, "train": 12.25}}
    assert run.step_s == {12: 50.0}


def test_verl_stage_mapping_and_unknown_keys(tmp_path: Path) -> None:
    data = {
        "timing_s/gen": 1, "timing_s/reward": 2, "timing_s/old_log_prob": 3, "timing_s/ref": 4,
        "timing_s/values": 5, "timing_s/adv": 6, "timing_s/update_critic": 7,
        "timing_s/update_actor": 8, "timing_s/update_weights": 9, "timing_s/step": 50,
        "timing_s/testing": 11, "timing_per_token_ms/gen": 0.3, "actor/pg_loss": -0.01,
    }  # fmt: skip
    run = import_record(write(tmp_path, json.dumps({"step": 3, "data": data}) + "\n", "m.jsonl"))
    assert run.steps[3] == {
        "generate": 1, "reward": 2, "old_logprob": 3, "ref_logprob": 4, "values": 5,
        "advantage": 6, "critic_train": 7, "train": 8, "weight_sync": 9,
    }  # fmt: skip
    assert run.step_s[3] == 50
    assert run.unknown_keys == ("timing_s/testing",)
    assert run.metrics[3]["timing_s/testing"] == 11
    assert run.metrics[3]["actor/pg_loss"] == -0.01
    assert any("timing_s/testing" in w for w in run.warnings)


def test_parse_console_line_malformed() -> None:
    assert parse_console_line("INFO: nothing here") is None
    with pytest.raises(ValueError, match="malformed item 'timing_s/gen'"):
        parse_console_line("step:1 - timing_s/gen - timing_s/step:2")


def test_truncated_last_line_tolerated(tmp_path: Path) -> None:
    text = (
        '{"step": 0, "data": {"timing_s/gen": 1.0}}\n'
        '{"step": 1, "data": {"timing_s/gen": 2.0}}\n'
        '{"step": 2, "data": {"timing_s/ge'
    )
    run = import_record(write(tmp_path, text, "t.jsonl"))
    assert sorted(run.steps) == [0, 1]
    assert run.warnings == ("line 3: not valid JSON; a truncated last line, ignored",)


def test_truncated_console_last_line(tmp_path: Path) -> None:
    text = "step:0 - timing_s/gen:1.0 - timing_s/step:2.0\nstep:1 - timing_s/gen:1.5 - timing_s/st"
    run = import_record(write(tmp_path, text))
    assert sorted(run.steps) == [0]
    assert "line 2: malformed item 'timing_s/st'" in run.warnings[0]


def test_console_last_line_cut_inside_a_number_is_dropped(tmp_path: Path) -> None:
    # A crash cut the last step line inside `timing_s/update_actor:21.033`: what is left
    # parses (2), so the missing newline is what says the line is not whole.
    text = (
        "step:0 - timing_s/gen:1.0 - timing_s/update_actor:20.5 - timing_s/step:22.0\n"
        "step:1 - timing_s/gen:1.5 - timing_s/update_actor:2"
    )
    run = import_record(write(tmp_path, text))
    assert sorted(run.steps) == [0]
    assert any("line 2" in w and "no newline" in w for w in run.warnings)
    whole = import_record(write(tmp_path, text + "1.033\n", "whole.log"))
    assert whole.steps[1]["train"] == 21.033


def test_corrupt_line_is_an_error_unless_skipped(tmp_path: Path) -> None:
    text = (
        '{"step": 0, "data": {"timing_s/gen": 1.0}}\n'
        "{corrupt\n"
        '{"step": 1, "data": {"timing_s/gen": 2.0}}\n'
    )
    path = write(tmp_path, text, "c.jsonl")
    with pytest.raises(ConfigError) as info:
        import_record(path)
    assert str(info.value) == f"{path}:2: not valid JSON (got '{{corrupt')"
    run = import_record(path, skip_bad_lines=True)
    assert sorted(run.steps) == [0, 1]
    assert run.warnings == ("line 2: not valid JSON; skipped",)


def test_roll_stdout_total_lags_one_step(tmp_path: Path) -> None:
    lines = [
        "[INFO] starting pipeline",
        'metrics_tag: {"step": 0, "metrics": {"time/step_generate": 90.0, "time/step_train": 40.0,'
        ' "time/ref_log_probs_values": 10.0, "time/old_log_probs": 9.0, "time/step_model_update": 3.0}}',
        'metrics_tag: {"step": 1, "metrics": {"time/step_generate": 91.0, "time/step_total": 155.0,'
        ' "time/val_step": 4.0, "time/actor_train/train_step/total": 39.0}}',
    ]
    run = import_record(write(tmp_path, "\n".join(lines) + "\n"))
    assert run.format == "roll"
    assert run.steps[0] == {
        "generate": 90.0, "train": 40.0, "ref_logprob": 10.0, "old_logprob": 9.0, "weight_sync": 3.0,
    }  # fmt: skip
    assert run.step_s == {0: 155.0}
    assert run.unknown_keys == ("time/actor_train/train_step/total", "time/val_step")
    assert any("step 1 has no recorded total" in w for w in run.warnings)


def test_roll_log_history(tmp_path: Path) -> None:
    state = {
        "global_step": 2,
        "log_history": [
            {"step": 0, "time/step_generate": 80.0, "time/step_train": 30.0},
            {"step": 1, "time/step_generate": 81.0, "time/step_total": 120.0},
        ],
    }
    run = import_record(write(tmp_path, json.dumps(state, indent=2), "trainer_state.json"))
    assert run.format == "roll"
    assert run.steps[1] == {"generate": 81.0}
    assert run.step_s == {0: 120.0}


def test_roll_corrupt_tag(tmp_path: Path) -> None:
    text = 'metrics_tag: {"step": 0, "metrics": {}}\nmetrics_tag: {oops}\nmetrics_tag: {"step": 1, "metrics": {}}\n'
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=r":2: metrics_tag: is not followed by valid JSON"):
        import_record(path)


def test_rlplex_record(tmp_path: Path) -> None:
    events = [
        {
            "step": 0,
            "op": "s0/generate",
            "kind": "run",
            "stage": "generate",
            "devices": [0],
            "start_s": 0.0,
            "end_s": 10.0,
        },
        {
            "step": 0,
            "op": "s0/offload/a/weights",
            "kind": "offload",
            "devices": [0],
            "start_s": 10.0,
            "end_s": 11.0,
        },
        {
            "step": 0,
            "op": "s0/train",
            "kind": "run",
            "stage": "train",
            "devices": [0],
            "start_s": 11.0,
            "end_s": 15.0,
        },
        {
            "step": 1,
            "op": "s1/generate",
            "kind": "run",
            "stage": "generate",
            "devices": [0],
            "start_s": 15.0,
            "end_s": 24.0,
        },
        {"step": 1, "metrics": {"step_s": 9.5, "kl": 0.01}},
    ]
    run = import_record(write(tmp_path, "\n".join(json.dumps(e) for e in events) + "\n", "r.jsonl"))
    assert run.format == "rlplex"
    assert run.steps == {0: {"generate": 10.0, "train": 4.0}, 1: {"generate": 9.0}}
    assert run.step_s == {0: 15.0, 1: 9.5}
    assert run.metrics[1] == {"kl": 0.01}


def test_format_override_and_unknown(tmp_path: Path) -> None:
    path = write(tmp_path, "step:1 - timing_s/gen:2.0\n")
    with pytest.raises(ConfigError, match="--format: unknown record format"):
        import_record(path, format="wandb")
    assert import_record(path, format="roll").steps == {}
    with pytest.raises(ConfigError, match="cannot tell the log's format"):
        import_record(write(tmp_path, "hello\nworld\n", "x.txt"))
    with pytest.raises(ConfigError, match="file not found"):
        import_record(tmp_path / "absent.log")


EXPECTED = {
    "verl_quickstart_console.log": ("verl", 10),
    "verl_quickstart.jsonl": ("verl", 10),
    "roll_rlvr_stdout.log": ("roll", 6),
    "grpo_run.jsonl": ("rlplex", 3),
    "verl_quickstart_wandb.csv": ("history", 10),
    "nemo_rl_console.log": ("nemo_rl", 5),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_records(name: str) -> None:
    fmt, steps = EXPECTED[name]
    path = RECORDS / name
    assert detect_record_format(path) == fmt
    run = import_record(path)
    assert len(run.steps) == steps
    assert all(run.steps[s] for s in run.steps)


def test_verl_examples_carry_the_published_figures() -> None:
    for name in (
        "verl_quickstart_console.log",
        "verl_quickstart.jsonl",
        "verl_quickstart_wandb.csv",
    ):
        run = import_record(RECORDS / name)
        assert run.steps[0] == {
            "generate": 21.470, "ref_logprob": 4.360, "values": 5.800, "advantage": 0.109,
            "critic_train": 15.664, "train": 20.314,
        }  # fmt: skip
        assert run.steps[1]["generate"] == 23.020 and run.steps[1]["train"] == 20.526


def test_rlplex_record_keeps_transfers_and_drops_an_incomplete_step(tmp_path: Path) -> None:
    """Offload/reload durations are kept per op key; a step the run died in is left out."""
    lines = [
        {"step": 0, "op": "s0/reload/a/weights", "kind": "reload", "role": "a",
         "state": "weights", "devices": [0], "start_s": 0.0, "end_s": 0.25, "bytes": 8},
        {"step": 0, "op": "s0/train", "kind": "run", "stage": "train", "role": "a",
         "devices": [0], "start_s": 0.25, "end_s": 1.25, "bytes": 0},
        {"step": 0, "metrics": {"step_s": 1.3}},
        {"step": 1, "op": "s1/train", "kind": "run", "stage": "train", "role": "a",
         "devices": [0], "start_s": 1.3, "end_s": 1.4, "bytes": 0},
        {"step": 1, "metrics": {"incomplete": True, "failure": "stage 'x' failed"}},
    ]  # fmt: skip
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = import_record(path)
    assert run.transfers == {0: {"reload/a/weights": 0.25}}
    assert run.steps == {0: {"train": 1.0}}
    assert run.step_s == {0: 1.3}
    assert any("step 1 is incomplete" in w and "stage 'x' failed" in w for w in run.warnings)


def test_a_last_step_the_run_stopped_in_is_left_out(tmp_path: Path) -> None:
    """Found in review (2026-11-29): a record cut in step 2 replayed that step with its
    missing stages at their modelled seconds (+7,140 % beside a rehearsal's)."""
    lines = (RECORDS / "grpo_run.jsonl").read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:20]) + "\n")  # step 2 has generate, reward, ref only
    run = import_record(cut)
    assert sorted(run.steps) == [0, 1]
    assert any(w.startswith("step 2 stops part way (no advantage,") for w in run.warnings)
    assert sorted(run.step_s) == [0, 1]
    whole = import_record(RECORDS / "grpo_run.jsonl")
    assert sorted(whole.steps) == [0, 1, 2] and not any("part way" in w for w in whole.warnings)
