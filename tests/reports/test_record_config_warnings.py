"""``replay``, ``whatif`` and ``calibrate`` say what reading the config assumed, as ``plan``
does: a launch script without ``cluster.gpu`` gives rlplex's 7B default stage times, which
then price the stages the record lacks and divide its joint timers."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.reports.calibrate import calibrate
from rlplex.reports.records import RecordSource, replay_report, whatif_report

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "examples" / "records"
SCRIPT = RECORDS / "openrlhf_ppo.sh"
DEFAULTS = "rlplex's defaults for a 7B model"
PRESET = "using the architecture of preset"


def test_replay_and_whatif_say_the_config_has_default_stage_times() -> None:
    source = RecordSource(RECORDS / "verl_quickstart.jsonl", SCRIPT)
    replayed = replay_report(source)
    assert any(DEFAULTS in w and "cluster.gpu" in w for w in replayed.warnings)
    alt = whatif_report(source, alts=["two more: cluster.nodes=2"])
    assert any(DEFAULTS in w for w in alt.warnings)


def test_calibrate_says_the_model_is_a_presets_architecture() -> None:
    fit, _ = calibrate(RECORDS / "openrlhf_wandb.csv", SCRIPT, overrides=("cluster.gpu=h100",))
    assert any(PRESET in w for w in fit.warnings)
    # The guessed mean response is not repeated: the record's lengths replace it.
    assert not any(w.startswith("workload.response_tokens.mean:") for w in fit.warnings)


def test_the_replay_command_prints_it() -> None:
    result = CliRunner().invoke(
        app, ["replay", str(RECORDS / "openrlhf_wandb.csv"), "-c", str(SCRIPT)]
    )
    assert result.exit_code == 0, result.output
    assert DEFAULTS in result.output
