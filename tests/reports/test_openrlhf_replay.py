"""An OpenRLHF run's wandb history replayed through its imported launch script: the joint
timers divided on the script's own placement, through the API and the ``rlplex`` command
(examples/records/openrlhf_wandb.csv, examples/records/openrlhf_ppo.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.reports.calibrate import calibrate
from rlplex.reports.records import RecordSource, replay_report

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "examples" / "records" / "openrlhf_wandb.csv"
SCRIPT = ROOT / "examples" / "records" / "openrlhf_ppo.sh"
H100 = ("cluster.gpu=h100",)
# Step 1 of the record: generation, make_experience, ppo_train, broadcast, step_total.
GEN, MAKE, TRAIN, SYNC, TOTAL = 31.42, 46.10, 158.31, 2.61, 238.44


def test_replay_divides_openrlhfs_timers_on_the_scripts_placement() -> None:
    run = replay_report(RecordSource(RECORD, SCRIPT), H100).run
    step = run.steps[1]
    assert run.joint == {} and not any("+" in name for name in step)
    # ppo_train: the critic (GPUs of its own) and the actor trained side by side; the
    # script's plan prices the actor's longer, so it spans the whole timer.
    assert step["train"] == pytest.approx(TRAIN)
    assert step["critic_train"] < TRAIN
    # make_experience: the actor's and the reference's passes one after the other on their
    # shared GPUs, then the advantage, span it; the critic's values beside them.
    assert step["old_logprob"] + step["ref_logprob"] + step["advantage"] == pytest.approx(MAKE)
    assert step["values"] < step["old_logprob"] + step["ref_logprob"]
    # generation holds the reward function's scoring (a remote reward: the driver's stage).
    assert step["generate"] + step["reward"] == pytest.approx(GEN)
    assert step["weight_sync"] == pytest.approx(SYNC)


def test_rlplex_replay_command_on_the_openrlhf_history() -> None:
    result = CliRunner().invoke(
        app, ["replay", str(RECORD), "--config", str(SCRIPT), "--set", "cluster.gpu=h100", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["format"] == "history"
    steps = {s["step"]: s for s in report["steps"]}
    assert sorted(steps) == [1, 2, 3, 4, 5]
    assert steps[1]["recorded_s"] == pytest.approx(TOTAL)
    # Divided proportionally, ppo_train's 158 s would shrink to its actor's share (about
    # 82 s) and the step would replay a third short; on the span it replays within 5 %.
    assert abs(steps[1]["error_pct"]) < 5
    assert "side by side" in result.stderr


def test_calibrate_reads_the_openrlhf_history() -> None:
    fit, _ = calibrate(RECORD, SCRIPT, overrides=H100)
    assert fit.format == "history"
    stages = {s.stage: s for s in fit.stages}
    assert {"generate", "train", "critic_train", "old_logprob", "weight_sync"} <= set(stages)
    assert any("joint timers split" in w for w in fit.warnings)
