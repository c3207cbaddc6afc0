"""The lengths a record measured, read under verl's, ROLL's and NeMo RL's metric names."""

from __future__ import annotations

from typing import Any

import pytest

from rlplex.timeline.importers.base import RecordedRun
from rlplex.timeline.lengths import recorded_lengths


def _run(metrics: dict[int, dict[str, Any]]) -> RecordedRun:
    return RecordedRun(
        format="verl", steps={s: {"generate": 1.0} for s in metrics}, metrics=metrics
    )


def test_verl_lengths_are_averaged_and_the_maxima_the_largest() -> None:
    run = _run({
        0: {"response_length/mean": 300.0, "response_length/max": 900,
            "response_length/clip_ratio": 0.0,
            "prompt_length/mean": 100, "prompt_length/max": 180},
        1: {"response_length/mean": 200.0, "response_length/max": 1024,
            "response_length/clip_ratio": 0.02,
            "prompt_length/mean": 120, "prompt_length/max": 150},
        2: {"response_length/mean": 1000.0},
    })  # fmt: skip
    lengths = recorded_lengths(run, [0, 1])
    assert lengths is not None
    assert lengths.steps == (0, 1)
    assert lengths.response_mean == pytest.approx(250.0)
    assert lengths.response_max == 1024
    assert lengths.clip_ratio == pytest.approx(0.01)
    assert lengths.prompt_mean == pytest.approx(110.0)
    assert lengths.prompt_max == 180
    assert lengths.keys[0] == "response_length/mean"
    # Default: every step.
    every = recorded_lengths(run)
    assert every is not None and every.response_mean == pytest.approx(500.0)


def test_roll_counts_and_nemo_rl_means() -> None:
    roll = recorded_lengths(_run({3: {
        "token/response_length/mean": 812.5, "token/response_length/max": 4096,
        "token/total_response_length/clip": 12, "token/prompt_length/mean": 95.0,
    }}))  # fmt: skip
    assert roll is not None
    assert (roll.response_mean, roll.response_max, roll.clip_count) == (812.5, 4096, 12)
    assert roll.clip_ratio is None and roll.prompt_mean == 95.0
    nemo = recorded_lengths(_run({1: {"train/mean_gen_tokens_per_sample": 749.0}}))
    assert nemo is not None and nemo.response_mean == 749.0 and nemo.response_max is None
    # wandb's history of a NeMo RL run has the longest response, the share truncated at the
    # token limit and the mean prompt too (nemo_rl/experience/rollouts.py, grpo.py).
    full = recorded_lengths(_run({
        1: {"train/mean_gen_tokens_per_sample": 700.0, "train/max_gen_tokens_per_sample": 4096,
            "train/truncation_rate": 0.02, "train/mean_prompt_length": 180.0},
        2: {"train/mean_gen_tokens_per_sample": 800.0, "train/max_gen_tokens_per_sample": 3000,
            "train/truncation_rate": 0.0, "train/mean_prompt_length": 200.0},
    }))  # fmt: skip
    assert full is not None
    assert (full.response_mean, full.response_max) == (750.0, 4096)
    assert full.clip_ratio == pytest.approx(0.01) and full.prompt_mean == pytest.approx(190.0)
    assert full.keys == ("train/mean_gen_tokens_per_sample", "train/max_gen_tokens_per_sample",
                         "train/truncation_rate", "train/mean_prompt_length")  # fmt: skip


def test_no_mean_response_length_is_nothing_to_use() -> None:
    # A maximum alone, a non-number, a flag or a NaN says nothing of how long responses were.
    assert recorded_lengths(_run({0: {"response_length/max": 900}})) is None
    assert recorded_lengths(_run({0: {"response_length/mean": "n/a"}})) is None
    assert recorded_lengths(_run({0: {"response_length/mean": True}})) is None
    assert recorded_lengths(_run({0: {"response_length/mean": float("nan")}})) is None
    assert recorded_lengths(_run({0: {"response_length/mean": 300.0}}), steps=[5]) is None


def test_a_figure_no_length_can_have_is_left_out_alone() -> None:
    """A prompt mean of 0, a negative maximum, a share above 1 or a negative count is no
    measurement: it is skipped, and the other figures of the record still count."""
    lengths = recorded_lengths(_run({0: {
        "response_length/mean": 300.0, "response_length/max": -1,
        "response_length/clip_ratio": 1.5, "prompt_length/mean": 0.0,
        "prompt_length/max": 180,
    }, 1: {"response_length/mean": 200.0, "prompt_length/mean": 100.0}}))  # fmt: skip
    assert lengths is not None
    assert lengths.response_mean == pytest.approx(250.0)
    assert lengths.response_max is None and lengths.clip_ratio is None
    assert lengths.prompt_mean == pytest.approx(100.0) and lengths.prompt_max == 180
    roll = recorded_lengths(_run({0: {"token/response_length/mean": 300.0,
                                      "token/total_response_length/clip": -3}}))  # fmt: skip
    assert roll is not None and roll.clip_count is None
