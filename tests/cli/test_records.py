"""``rlplex replay`` and ``rlplex whatif`` on the shipped example records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECORDS = EXAMPLES / "records"
VERL = RECORDS / "verl_quickstart.jsonl"
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
        (["whatif", VERL, "-c", VERL_CONFIG, "--auto", "--scaling", "gen=1"], "unknown stage"),
        (["whatif", VERL, "-c", VERL_CONFIG, "--auto", "--fit-from", "nothing"], "RECORD=CONFIG"),
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
