"""The response and prompt lengths a record measured, under each framework's metric names.

A config can only guess the mean response length (frameworks set maxima only, and an
imported file's mean is half its maximum); a run's log says what the run produced. verl
logs ``response_length/mean``, ``/max`` and ``/clip_ratio`` (and ``prompt_length/``) per
step; ROLL's RLVR pipeline ``token/response_length/mean`` and ``/max`` and the *count* of
responses cut at the maximum, ``token/total_response_length/clip``
(``roll/utils/metrics/metrics_manager.py`` ``add_token_metrics``); NeMo RL
``mean_gen_tokens_per_sample``, ``max_gen_tokens_per_sample``, ``truncation_rate`` and
``mean_prompt_length`` (under ``train/`` in wandb; its console log prints the first);
OpenRLHF (v0.10.0 on) ``rollout/response_length_mean`` and ``rollout/truncated_rate`` (under
``train/`` in wandb; ``openrlhf/trainer/ppo_trainer.py`` ``_compute_rollout_stats``);
rlplex's own pipelines and summary records use verl's names. :func:`recorded_lengths`
averages them over the steps a workflow uses, so that ``calibrate`` fits, and ``replay``
and ``whatif`` re-estimate, with the lengths the run had (``rlplex.reports.lengths``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlplex.timeline.importers.base import RecordedRun

RESPONSE_MEAN_KEYS = (
    "response_length/mean",
    "token/response_length/mean",
    "mean_gen_tokens_per_sample",
    "train/mean_gen_tokens_per_sample",
    "rollout/response_length_mean",
    "train/rollout/response_length_mean",
)
"""A step's mean response length in tokens, by framework (verl and rlplex, ROLL, NeMo RL,
OpenRLHF: the tokens from a sample's first generated token to its last, before dynamic
batching, ``ppo_utils/samples_generator.py`` ``_process_response_into_experience``)."""
RESPONSE_MAX_KEYS = (
    "response_length/max",
    "token/response_length/max",
    "max_gen_tokens_per_sample",
    "train/max_gen_tokens_per_sample",
)
"""A step's longest response in tokens."""
CLIP_RATIO_KEYS = (
    "response_length/clip_ratio",
    "truncation_rate",
    "train/truncation_rate",
    "rollout/truncated_rate",
    "train/rollout/truncated_rate",
)
"""The share of a step's responses cut at the maximum (verl; NeMo RL's share of samples whose
response hit its token limit, ``nemo_rl/experience/rollouts.py``; OpenRLHF's share whose
generation ended at ``max_tokens``, vLLM's ``finish_reason == "length"``)."""
CLIP_COUNT_KEYS = ("token/total_response_length/clip",)
"""How many of a step's responses were cut at the maximum (ROLL): a count, not a share."""
PROMPT_MEAN_KEYS = (
    "prompt_length/mean",
    "token/prompt_length/mean",
    "mean_prompt_length",
    "train/mean_prompt_length",
)
"""A step's mean prompt length in tokens (NeMo RL's: the batch's ``length``, the prompt's)."""
PROMPT_MAX_KEYS = ("prompt_length/max", "token/prompt_length/max")
"""A step's longest prompt in tokens."""


@dataclass(frozen=True)
class RecordedLengths:
    """What a record measured of its sequences' lengths, over some of its steps.

    Means and shares are averaged over the steps that give them (each step weighs the same:
    frameworks log each step's mean), maxima are the largest of any step; None where no
    step gives the figure.
    """

    steps: tuple[int, ...]
    """The steps whose metrics were read."""
    response_mean: float | None = None
    """Mean response tokens."""
    response_max: float | None = None
    """Longest response of any step, in tokens."""
    clip_ratio: float | None = None
    """Share of responses cut at the maximum."""
    clip_count: float | None = None
    """Responses cut at the maximum per step (ROLL logs a count; the config's batch makes it a
    share)."""
    prompt_mean: float | None = None
    """Mean prompt tokens."""
    prompt_max: float | None = None
    """Longest prompt of any step, in tokens."""
    keys: tuple[str, ...] = ()
    """The metric names read, in the order above."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _positive(value: float) -> bool:
    return value > 0


def _share(value: float) -> bool:
    return 0.0 <= value <= 1.0


def _count(value: float) -> bool:
    return value >= 0


def _per_step(
    metrics: Mapping[int, Mapping[str, Any]],
    steps: Sequence[int],
    keys: Sequence[str],
    valid: Callable[[float], bool],
) -> tuple[list[float], str | None]:
    """Each step's figure under the first of ``keys`` that any of ``steps`` holds, leaving out
    a value no such figure can have (a length <= 0, a share outside [0, 1], a negative
    count): a corrupt figure is no measurement, and it must not take the others with it."""
    for key in keys:
        values = [
            v for s in steps if (v := _number(metrics.get(s, {}).get(key))) is not None and valid(v)
        ]
        if values:
            return values, key
    return [], None


def recorded_lengths(
    run: RecordedRun, steps: Sequence[int] | None = None
) -> RecordedLengths | None:
    """The lengths ``run`` measured over ``steps`` (default: all its steps); None when no step
    gives a mean response length (nothing to use: a maximum or a share alone does not say
    how long the responses were)."""
    chosen = tuple(run.step_numbers if steps is None else steps)
    metrics = run.metrics
    found: dict[str, float | None] = {}
    keys: list[str] = []
    for name, names, pick, valid in (
        ("response_mean", RESPONSE_MEAN_KEYS, "mean", _positive),
        ("response_max", RESPONSE_MAX_KEYS, "max", _positive),
        ("clip_ratio", CLIP_RATIO_KEYS, "mean", _share),
        ("clip_count", CLIP_COUNT_KEYS, "mean", _count),
        ("prompt_mean", PROMPT_MEAN_KEYS, "mean", _positive),
        ("prompt_max", PROMPT_MAX_KEYS, "max", _positive),
    ):
        values, key = _per_step(metrics, chosen, names, valid)
        if key is None:
            found[name] = None
            continue
        keys.append(key)
        found[name] = max(values) if pick == "max" else sum(values) / len(values)
    if found["response_mean"] is None:
        return None
    return RecordedLengths(steps=chosen, keys=tuple(keys), **found)
