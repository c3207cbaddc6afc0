"""calibrate on a record with NeMo RL's joint timers: what the fit can and cannot learn
from a timer that spans two stages (rlplex.timeline.joint, docs/record.md "Joint timers")."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.estimate.context import efficiency_value
from rlplex.reports.calibrate import calibrate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIG = EXAMPLES / "nemo_rl.yaml"
GPU = ("cluster.gpu=h100",)


def summary(tmp_path: Path, name: str, timing: dict[str, float], framework: str) -> Path:
    """A summary record of ``timing`` (``framework``'s names) with a 640-token response."""
    body = ", ".join(f"{k}: {v}" for k, v in timing.items())
    length = (
        "mean_gen_tokens_per_sample: 640"
        if framework == "nemo_rl"
        else "response_length: {mean: 640}"
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"framework: {framework}\nsteps: 4\ntiming_s: {{{body}}}\n{length}\n", encoding="utf-8"
    )
    return path


def test_the_fitted_forward_efficiency_is_the_same_whatever_the_true_division(
    tmp_path: Path,
) -> None:
    # Two runs whose log-prob passes divide 14 s differently in truth (known here: rlplex's
    # own names), and the NeMo RL record of either, which has only their sum.
    common = {"generate": 44.0, "train": 20.0, "weight_sync": 2.9, "step": 85.0}
    truths = [
        summary(tmp_path, name, {**common, "old_logprob": old, "ref_logprob": 14.0 - old}, "rlplex")
        for name, old in (("mostly_old", 11.0), ("mostly_ref", 3.0))
    ]
    joint = summary(
        tmp_path,
        "joint",
        {
            "generation": 44.0,
            "policy_and_reference_logprobs": 14.0,
            "policy_training": 20.0,
            "prepare_for_generation/transfer_and_update_weights": 2.9,
            "total_step_time": 85.0,
        },
        "nemo_rl",
    )
    fits = [calibrate(r, CONFIG, overrides=GPU)[0] for r in (*truths, joint)]
    forward = [fit.efficiency["forward"] for fit in fits]
    assert forward[0] == pytest.approx(forward[1], rel=1e-6)
    assert forward[2] == pytest.approx(forward[0], rel=1e-6)
    # A real fit (the estimate's 0.6 was not already right), so the equality says something.
    estimate = efficiency_value(load_config(CONFIG, overrides=GPU).efficiency, "forward")
    assert forward[0] < 0.9 * estimate


def test_a_rule_reward_priced_from_a_share_of_generation_is_not_fitted(tmp_path: Path) -> None:
    # NeMo RL's generation timer holds the environment's scoring: the reward stage's figure
    # is the split's share of it (the estimate's own proportion times generation's ratio),
    # which measures nothing about the per-sequence overhead the reward is priced at.
    record = summary(
        tmp_path,
        "joint",
        {"generation": 50.0, "policy_training": 20.0, "total_step_time": 80.0},
        "nemo_rl",
    )
    fit = calibrate(record, CONFIG, overrides=GPU)[0]
    assert "sequence_overhead_s" not in fit.efficiency
    assert any(
        "reward" in w and "share of the joint timer generate+reward" in w and "not fitted" in w
        for w in fit.warnings
    ), fit.warnings
    assert {f.stage: f.how for f in fit.stages}["reward"] == "not fitted"
    # generation's own parameters are fitted as before.
    assert "decode" in fit.efficiency
