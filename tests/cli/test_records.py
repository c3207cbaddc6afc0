"""``rlplex replay``, ``whatif`` and ``calibrate`` on the shipped example records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECORDS = EXAMPLES / "records"
VERL = RECORDS / "verl_quickstart.jsonl"
WANDB = RECORDS / "verl_quickstart_wandb.csv"
VERL_CONFIG = RECORDS / "verl_quickstart.yaml"
SPLIT = (
    "cluster.nodes=2 cluster.gpus_per_node=8 roles.actor_infer.devices=0-3"
    " roles.actor_train.devices=4-15 roles.reference.devices=4-15 roles.critic.devices=4-15"
)

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def test_replay_json_has_the_issue_schema() -> None:
    result = invoke("replay", RECORDS / "verl_quickstart_console.log", "--config", VERL_CONFIG,
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert len(out["steps"]) == 10
    first = out["steps"][0]
    assert {"step", "recorded_s", "predicted_s", "unattributed_s"} <= first.keys()
    assert first["step"] == 0 and first["recorded_s"] == pytest.approx(68.917)
    assert first["unattributed_s"] == pytest.approx(1.2)
    assert out["mean_abs_error_pct"] == pytest.approx(1.72, abs=0.01)


@pytest.mark.parametrize(
    ("record", "config"),
    [("roll_rlvr_stdout.log", EXAMPLES / "roll.yaml"), ("grpo_run.jsonl", EXAMPLES / "grpo.yaml")],
)
def test_replay_prints_a_table_and_warnings(record: str, config: Path) -> None:
    result = invoke("replay", RECORDS / record, "-c", config)
    assert result.exit_code == 0, result.output
    assert "predicted s" in result.stdout and "mean" in result.stdout


def test_replay_gantt_writes_html(tmp_path: Path) -> None:
    out = tmp_path / "replay.html"
    result = invoke("replay", VERL, "-c", VERL_CONFIG, "--gantt", out)
    assert result.exit_code == 0, result.output
    assert out.read_text().lstrip().lower().startswith("<!doctype html")


def test_whatif_on_the_verl_example_prints_alternatives_with_periods() -> None:
    result = invoke(
        "whatif", VERL, "-c", VERL_CONFIG,
        "--alt", f"4/12 sync: {SPLIT}",
        "--alt", f"4/12 async k=1: {SPLIT} pipeline.mode=async pipeline.max_staleness=1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    for text in ("4/12 async k=1", "4/12 sync", "as recorded", "9.54", "68.39", "1.00x"):
        assert text in result.stdout


def test_whatif_json_best_first_and_the_sync_split_by_hand(tmp_path: Path) -> None:
    """The 4/12 sync split: (221.811/4 + 460.95/12 + 1.124)/10 + 1/25 = 9.538925 s.

    (sums of the 10 recorded steps: generate; ref_logprob + values +
    critic_train + train; advantage; plus the network weight sync of 1 GB at
    25 GB/s; see tests/sim/test_whatif.py for the derivation.)
    """
    gantt = tmp_path / "whatif.html"
    result = invoke("whatif", VERL, "-c", VERL_CONFIG, *[f"--set={s}" for s in SPLIT.split()],
                    "--json", "--gantt", gantt)  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    labels = [a["label"] for a in out["alternatives"]]
    assert labels == [SPLIT, "as recorded"]
    split = out["alternatives"][0]
    assert {"label", "period_s", "speedup"} <= split.keys()
    assert split["period_s"] == pytest.approx(9.538925, abs=1e-6)
    assert split["speedup"] == pytest.approx(68.3935 / 9.538925)
    assert gantt.exists()


def test_whatif_auto_and_scaling() -> None:
    result = invoke("whatif", VERL, "-c", VERL_CONFIG, "--set", "cluster.nodes=2",
                    "--set", "cluster.gpus_per_node=8", "--auto", "--scaling", "generate=0.8",
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert sum(a["label"].startswith("auto #") for a in out["alternatives"]) == 3
    assert out["exponents"] == {"generate": 0.8}
    periods = [a["period_s"] for a in out["alternatives"]]
    assert periods == sorted(periods)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["whatif", VERL, "-c", VERL_CONFIG], "give at least one alternative"),
        (["whatif", VERL, "-c", VERL_CONFIG, "--alt", "x: oops"], "--alt"),
        (
            [
                "whatif",
                VERL,
                "-c",
                VERL_CONFIG,
                "--alt",
                "a: pipeline.mode=async",
                "--alt",
                "a: pipeline.max_staleness=0",
            ],
            "label 'a' names two alternatives",
        ),
        (
            ["whatif", VERL, "-c", VERL_CONFIG, "--alt", "as recorded: pipeline.mode=async"],
            "the recorded config's row",
        ),
        (["whatif", VERL, "-c", VERL_CONFIG, "--auto", "--scaling", "gen=1"], "unknown stage"),
        (["whatif", VERL, "-c", VERL_CONFIG, "--auto", "--fit-from", "nothing"], "RECORD=CONFIG"),
        (  # a file of --fit-from says it came from --fit-from, not from the record or -c
            ["whatif", VERL, "-c", VERL_CONFIG, "--auto", "--fit-from", f"{VERL}=missing.yaml"],
            "--fit-from: missing.yaml: file not found",
        ),
        (
            ["whatif", VERL, "-c", VERL_CONFIG, "--auto", "--fit-from", "gone.jsonl=x.yaml"],
            "--fit-from: gone.jsonl: file not found",
        ),
        (["replay", VERL, "-c", VERL_CONFIG, "--format", "csv"], "unknown record format"),
        (["replay", "missing.jsonl", "-c", VERL_CONFIG], "file not found"),
        (["replay", VERL, "-c", "missing.yaml"], "missing.yaml"),
    ],
)
def test_user_errors_exit_2_without_traceback(args: list, message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_a_fit_from_error_gives_the_value_once(tmp_path: Path) -> None:
    """A bad value in a --fit-from config is said once, by the config's own error."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(VERL_CONFIG.read_text() + "\nefficiency: {decode: -1}\n")
    result = invoke("whatif", VERL, "-c", VERL_CONFIG, "--auto", "--fit-from", f"{VERL}={bad}")
    assert result.exit_code == 2, result.output
    text = " ".join(result.stderr.split())
    assert text.startswith("error: --fit-from: ") and text.count("(got") == 1, text


def test_a_corrupt_line_fails_unless_skipped(tmp_path: Path) -> None:
    lines = VERL.read_text().splitlines()
    lines.insert(3, '{"step": 99, "data": {"timing_s/gen": 1.0')
    record = tmp_path / "bad.jsonl"
    record.write_text("\n".join(lines) + "\n")
    failed = invoke("replay", record, "-c", VERL_CONFIG, "--format", "verl")
    assert failed.exit_code == 2 and "bad.jsonl:4: not valid JSON" in failed.stderr
    skipped = invoke("replay", record, "-c", VERL_CONFIG, "--skip-bad-lines", "--json")
    assert skipped.exit_code == 0, skipped.output
    assert len(json.loads(skipped.stdout)["steps"]) == 10
    assert "line 4" in skipped.stderr


def test_the_wandb_history_replays_and_calibrates_as_the_verl_log(tmp_path: Path) -> None:
    replays = [invoke("replay", r, "-c", VERL_CONFIG, "--json") for r in (WANDB, VERL)]
    assert all(r.exit_code == 0 for r in replays), replays[0].output
    history, verl = (json.loads(r.stdout) for r in replays)
    assert history["steps"] == verl["steps"] and len(history["steps"]) == 10
    outs = [tmp_path / "wandb.yaml", tmp_path / "verl.yaml"]
    fits = [
        invoke("calibrate", r, "-c", VERL_CONFIG, "--out", o, "--json")
        for r, o in zip((WANDB, VERL), outs, strict=True)
    ]
    assert all(f.exit_code == 0 for f in fits), fits[0].output
    history, verl = (json.loads(f.stdout) for f in fits)
    assert history["format"] == "history" and verl["format"] == "verl"
    assert history["check_steps"] == verl["check_steps"] == [5, 6, 7, 8, 9]
    assert history["costs"] == verl["costs"]
    # The costs files differ only in the record named in their header.
    wandb_file, verl_file = (o.read_text().splitlines() for o in outs)
    assert wandb_file[1:] == verl_file[1:]


def test_format_history_reads_a_csv_of_any_name_and_the_help_offers_it(tmp_path: Path) -> None:
    record = tmp_path / "export.txt"
    record.write_text(WANDB.read_text())
    assert invoke("replay", record, "-c", VERL_CONFIG).exit_code == 2  # not detected
    result = invoke("replay", record, "-c", VERL_CONFIG, "--format", "history", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["steps"]) == 10
    for command in ("replay", "whatif", "calibrate"):
        help_text = " ".join(invoke(command, "--help").stdout.replace("│", " ").split())
        assert "history or tensorboard (history: a per-step CSV" in help_text, command


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ("Step,a - timing_s/gen,a - timing_s/gen__MAX,b - timing_s/gen\n1,2,2,3\n", (),
         "run.csv:1: a chart export of 2 runs ('a', 'b')"),
        ("_step,timing_s/gen,timing_s/step\n1,2,3\n2,-2,3\n", (),
         "run.csv:3: timing_s/gen: stage 'generate' of step 2: expected a finite duration"),
        ("_step,timing_s/gen,timing_s/step\n1,2,3\n2,2,3\n", ("--format", "summary"),
         "got 3 columns; a per-step history is --format history"),
    ],
)  # fmt: skip
def test_bad_histories_exit_2_with_one_line(
    tmp_path: Path, text: str, args: tuple, message: str
) -> None:
    record = tmp_path / "run.csv"
    record.write_text(text)
    result = invoke("calibrate", record, "-c", EXAMPLES / "estimate_verl_quickstart.yaml", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_whatif_config_set_changes_the_recorded_config_and_every_alternative() -> None:
    """--set is an alternative in whatif; --config-set is what replay's --set is: the
    recorded config changed (a launch script's GPU type), and the alternatives with it."""

    def periods(*extra: str) -> dict[str, float]:
        result = invoke("whatif", VERL, "-c", VERL_CONFIG, "--alt", f"split: {SPLIT}",
                        *extra, "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        return {a["label"]: a["period_s"] for a in json.loads(result.stdout)["alternatives"]}

    plain = periods()
    slower = periods("--config-set", "pipeline.stages.weight_sync.seconds=5")
    assert set(slower) == set(plain) == {"as recorded", "split"}
    for label in plain:  # the weight sync, not in the record, runs 5 s in every step
        assert slower[label] == pytest.approx(plain[label] - plain_sync(label) + 5, abs=0.01)
    as_alternative = periods("--set", "pipeline.stages.weight_sync.seconds=5")
    assert as_alternative["as recorded"] == plain["as recorded"]
    assert len(as_alternative) == 3
    text = invoke("whatif", VERL, "-c", VERL_CONFIG, "--auto",
                  "--config-set", "pipeline.stages.weight_sync.seconds=5")  # fmt: skip
    assert "the recorded config with pipeline.stages.weight_sync.seconds=5" in text.stdout


def plain_sync(label: str) -> float:
    """The modelled weight sync of the quickstart's config (one GPU: a device copy) and of
    its 4/12 split (over the network), in the what-if above."""
    return {"as recorded": 0.005, "split": 0.04}[label]


@pytest.mark.parametrize("command", ["replay", "whatif", "calibrate"])
def test_a_record_of_no_stage_the_importer_maps_is_refused(tmp_path: Path, command: str) -> None:
    """verl-style keys under rlplex's stage names read as unknown timings: no empty table."""
    record = tmp_path / "renamed.jsonl"
    record.write_text(
        "".join(
            json.dumps({"step": n, "data": {"timing_s/generate": 3.0, "timing_s/step": 5.0}}) + "\n"
            for n in (1, 2)
        )
    )
    extra = ("--auto",) if command == "whatif" else ()
    result = invoke(command, record, "-c", VERL_CONFIG, *extra)
    assert result.exit_code == 2, result.output
    assert (
        "renamed.jsonl: no step has a stage's seconds: its timing keys map to no stage"
        " (timing_s/generate); docs/record.md lists the verl timing names" in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_calibrate_on_a_summary_without_step_time_measures_no_period(tmp_path: Path) -> None:
    out = tmp_path / "costs.yaml"
    result = invoke("calibrate", RECORDS / "verl_quickstart_summary.yaml", "-c",
                    EXAMPLES / "estimate_verl_quickstart.yaml", "--set", "cluster.gpu=h100",
                    "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    period = next(line for line in result.stdout.splitlines() if "│ period" in line)
    assert period.split("│")[3].strip() == "-"  # measured: nothing, not 0.000 s
    assert (
        out.read_text()
        .splitlines()[0]
        .endswith("estimate_verl_quickstart.yaml --set cluster.gpu=h100")
    )


@pytest.mark.parametrize("command", ["validate", "estimate", "plan", "size", "simulate"])
def test_the_config_argument_names_launch_scripts(command: str) -> None:
    help_text = " ".join(invoke(command, "--help").stdout.replace("│", " ").split())
    assert "or a verl, RLinf or OpenRLHF launch script" in help_text, command


def test_calibrate_json_on_a_summary_without_step_time_measures_no_period() -> None:
    # The table's "-", not a measured period of 0 s.
    result = invoke("calibrate", RECORDS / "verl_quickstart_summary.yaml", "-c",
                    EXAMPLES / "estimate_verl_quickstart.yaml", "--set", "cluster.gpu=h100",
                    "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    period = json.loads(result.stdout)["period"]
    assert period["measured_s"] is None and period["error_before"] is None


NEMO_RL_LOG = RECORDS / "nemo_rl_console.log"
NEMO_RL_CONFIG = EXAMPLES / "nemo_rl.yaml"


def test_a_nemo_rl_console_log_replays_and_calibrates(tmp_path: Path) -> None:
    replay = invoke("replay", NEMO_RL_LOG, "-c", NEMO_RL_CONFIG, "--set", "cluster.gpu=h100",
                    "--json")  # fmt: skip
    assert replay.exit_code == 0, replay.output
    out = json.loads(replay.stdout)
    assert out["format"] == "nemo_rl" and [s["step"] for s in out["steps"]] == [1, 2, 3, 4, 5]
    assert out["steps"][0]["recorded_s"] == pytest.approx(82.85)
    assert "joint timers split" in replay.stderr
    costs = tmp_path / "costs.yaml"
    fit = invoke("calibrate", NEMO_RL_LOG, "-c", NEMO_RL_CONFIG, "--set", "cluster.gpu=h100",
                 "--out", costs, "--json")  # fmt: skip
    assert fit.exit_code == 0, fit.output
    fitted = json.loads(fit.stdout)
    assert fitted["format"] == "nemo_rl" and fitted["check_steps"] == [4, 5]
    assert {"old_logprob", "ref_logprob", "train", "weight_sync"} <= set(fitted["stages"])
    assert costs.exists()
    # Each log-prob pass is fitted on its half of the joint timer, held-out steps within 5 %.
    for stage in ("old_logprob", "ref_logprob"):
        assert fitted["stages"][stage]["measured_check_s"] == pytest.approx((11.83 + 11.94) / 4)
        assert abs(fitted["stages"][stage]["error_after"]) < 0.05


def test_calibrate_says_the_lengths_its_after_figure_is_planned_with(tmp_path: Path) -> None:
    """The costs file holds no lengths: ``plan --costs`` of the config alone planned its
    guessed 1,920-token mean (145 s) beside calibrate's 87.68 s, with no word of how to
    plan the recorded run. calibrate now names the ``--set`` that reproduces its figure."""
    costs = tmp_path / "costs.yaml"
    fit = invoke("calibrate", NEMO_RL_LOG, "-c", NEMO_RL_CONFIG, "--set", "cluster.gpu=h100",
                 "--out", costs, "--json")  # fmt: skip
    assert fit.exit_code == 0, fit.output
    fitted = json.loads(fit.stdout)
    assert fitted["lengths"] == ["workload.response_tokens.mean=665.6"]
    sets = [a for o in fitted["lengths"] for a in ("--set", o)]
    planned = invoke("plan", NEMO_RL_CONFIG, "--set", "cluster.gpu=h100", "--costs", costs,
                     *sets, "--json")  # fmt: skip
    assert planned.exit_code == 0, planned.output
    after = fitted["period"]["after_s"]
    assert json.loads(planned.stdout)["period_s"] == pytest.approx(after, rel=1e-9)
    table = invoke("calibrate", NEMO_RL_LOG, "-c", NEMO_RL_CONFIG, "--set", "cluster.gpu=h100")
    assert "plan the recorded run with --set workload.response_tokens.mean=665.6" in (
        " ".join(table.stdout.split())
    )


def test_a_bad_nemo_rl_timing_line_exits_2_naming_it(tmp_path: Path) -> None:
    text = NEMO_RL_LOG.read_text(encoding="utf-8").replace(
        "  • policy_training: 19.64s", "  • policy_training: -19.64s", 1
    )
    record = tmp_path / "bad.log"
    record.write_text(text, encoding="utf-8")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "-19.64s" in t)
    failed = invoke("replay", record, "-c", NEMO_RL_CONFIG, "--format", "nemo_rl")
    assert failed.exit_code == 2 and "Traceback" not in failed.output
    assert f"bad.log:{line}:" in failed.stderr and "-19.64" in failed.stderr
    skipped = invoke("replay", record, "-c", NEMO_RL_CONFIG, "--skip-bad-lines", "--json")
    assert skipped.exit_code == 0, skipped.output
    assert f"line {line}" in skipped.stderr


def test_a_large_record_shows_a_spinner_while_it_is_read(tmp_path: Path, monkeypatch) -> None:
    from rich.console import Console

    from rlplex.cli import render

    small = tmp_path / "run.log"
    small.write_text("x" * 100)
    folder = tmp_path / "tb"
    folder.mkdir()
    (folder / "events.out.tfevents.1.host.1.0").write_bytes(b"\0" * 300)
    (folder / "notes.txt").write_text("not read")
    assert render.record_bytes(small) == 100 and render.record_bytes(folder) == 300
    assert render.record_bytes(tmp_path / "missing") == 0
    shown: list[str] = []

    class Status:
        def __init__(self, text: str, **_: object) -> None:
            shown.append(text)

        def __enter__(self) -> None:
            return None

        def __exit__(self, *_: object) -> None:
            return None

    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    monkeypatch.setattr(Console, "status", lambda self, text, **kw: Status(text, **kw))
    with render.reading_record(small, "replaying"):
        pass
    assert shown == []  # a small record: no spinner
    monkeypatch.setattr(render, "SPINNER_BYTES", 50)
    with render.reading_record(small, "replaying"):
        pass
    assert shown and shown[0].startswith("replaying ") and "(0 MB)" in shown[0]
