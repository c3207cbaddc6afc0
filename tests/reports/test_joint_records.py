"""Where a record meets a config (replay, whatif and its --fit-from, calibrate), NeMo RL's
joint timers are divided among the config's stages before anything reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.reports.calibrate import calibrate
from rlplex.reports.records import RecordSource, _fit_pairs, replay_report, whatif_report

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "examples" / "records" / "nemo_rl_console.log"
CONFIG = ROOT / "examples" / "nemo_rl.yaml"
H100 = ("cluster.gpu=h100",)


def _no_joint(steps: dict[int, dict[str, float]]) -> bool:
    return not any("+" in name for stages in steps.values() for name in stages)


def test_replay_splits_the_joint_timers_by_its_config() -> None:
    report = replay_report(RecordSource(LOG, CONFIG), H100)
    run = report.run
    assert run.joint == {} and _no_joint(run.steps)
    # examples/nemo_rl.yaml prices the two log-prob passes alike: equal halves.
    assert run.steps[1]["old_logprob"] == pytest.approx(11.45 / 2)
    assert run.steps[1]["ref_logprob"] == pytest.approx(11.45 / 2)
    assert run.steps[1]["generate"] + run.steps[1]["reward"] == pytest.approx(44.02)
    assert run.steps[1]["generate"] > 5 * run.steps[1]["reward"]
    assert sum("joint timers split" in w for w in report.warnings) == 1


def test_whatif_and_its_fit_from_split_too() -> None:
    source = RecordSource(LOG, CONFIG, config_overrides=H100)
    report = whatif_report(source, alts=["half: cluster.host_gb_per_s=12.5"])
    assert report.run.joint == {} and _no_joint(report.run.steps)
    assert any("joint timers split" in w for w in report.warnings)
    ((run, _),) = _fit_pairs([f"{LOG}={CONFIG}"], None)
    assert run.joint == {} and _no_joint(run.steps)
    assert {"old_logprob", "ref_logprob", "generate", "reward"} <= set(run.steps[2])


def test_calibrate_fits_each_log_prob_pass_from_its_share() -> None:
    fit, _ = calibrate(LOG, CONFIG, overrides=H100)
    stages = {s.stage: s for s in fit.stages}
    assert fit.format == "nemo_rl"
    # Fitted on steps 2-3: the median of each half of the joint timer.
    assert stages["old_logprob"].measured_fit_s == pytest.approx((11.62 + 11.71) / 4)
    assert stages["ref_logprob"].measured_fit_s == pytest.approx((11.62 + 11.71) / 4)
    assert any("joint timers split" in w for w in fit.warnings)
