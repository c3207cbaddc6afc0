"""Import NeMo RL's step timings: its console log, and (through :func:`add_timing`) wandb's.

NeMo RL (NVIDIA-NeMo/RL) times each GRPO step with named timers
(``nemo_rl/algorithms/grpo.py`` ``grpo_train`` and ``async_grpo_train``, read at
v0.3.0-v0.7.0 and later) and at the step's end prints them, summed over the step
(``Timer.get_timing_metrics(reduction_op="sum")``, ``nemo_rl/utils/timer.py``)::

    ========================= Step 3/100 =========================
    ...
    📊 Training Results:
      • Loss: 0.0123
      • Mean Generation Length: 345.1234
    ⏱️  Timing:
      • Total step time: 92.30s
      • generation: 41.20s (44.6%)
      • policy_training: 30.10s (32.6%)

one ``  • NAME: SECONDS s (PERCENT%)`` line per timer, longest first; the same dict goes
to wandb and TensorBoard as ``timing/train/NAME`` (``logger.log_metrics(timing_metrics,
step, prefix="timing/train")``). Ray may prefix a line (``(TaskRunner pid=1234) ``).
What each timer spans, from the source, and the rlplex stage it becomes:

- ``generation``: ``run_multi_turn_rollout`` (or NeMo Gym's, or the async rollout), which
  also scores each response with the environment as it ends (``calculate_rewards`` in
  ``nemo_rl/experience/rollouts.py``, every turn of a multi-turn rollout), then
  ``finish_generation`` (colocated: the engines' sleep): the stages ``generate`` and
  ``reward`` in one timer, recorded under their joint key (:data:`JOINT`).
- ``policy_and_reference_logprobs``: ``policy.get_logprobs`` then
  ``policy.get_reference_policy_logprobs`` on the same workers, one after the other: the
  stages ``old_logprob`` and ``ref_logprob`` in one timer (joint). From v0.7 the log says
  when a pass is skipped (``▶ Skipping prev_logprobs ...``, ``▶ Skipping reference_logprobs
  ...``): that step's timer is then the other pass alone. Earlier releases skip the
  reference pass silently, and async GRPO the old one: the config, which lacks the pass,
  then takes the whole timer (:mod:`rlplex.timeline.joint`).
- ``reward_calculation`` (the rewards' per-prompt baseline and std, and dynamic sampling;
  before v0.6 the whole advantage) and ``advantage_calculation`` (the advantage
  estimator, v0.6 on): driver work on the finished batch, the stage ``advantage``.
- ``policy_training``: ``policy.train``, the stage ``train``.
- ``prepare_for_generation/transfer_and_update_weights`` (the weights streamed to the
  engines, by CUDA IPC or NCCL) and, in async GRPO, ``weight_sync`` (the refit after
  waiting for in-flight generation): the stage ``weight_sync``.
- ``total_step_time``: the step's recorded time (validation and checkpointing inside it,
  on the steps that run them).

``prepare_for_generation/total`` adds to the weight transfer the trainer's offload, the
engines' wake-up (weights, then KV cache) in colocated runs, or the wake-up alone on a
step without a refit: rlplex's offload and reload ops, so it stays a metric (as v0.3's
``prepare_for_generation``, its whole refit, does). Async GRPO's ``exposed_generation`` is
the trainer's *wait* for generation, not generation's duration: a metric, with a warning.
Other timers (``data_processing``, ``logprob_inference_prep``, ``training_prep``,
``checkpointing``, ``idle/...``, sub-timers such as ``get_logprobs/shard_data``) stay
metrics under ``timing/train/NAME`` and are reported as unknown, as verl's unknown keys
are. ``Mean Generation Length`` is kept as ``mean_gen_tokens_per_sample``, the name
:mod:`rlplex.timeline.lengths` reads.

The step is the header's number, counted on across ``Epoch E/M`` headers (the header
restarts at 1 each epoch; wandb's step is the run's total). A header printed again for
the same step (dynamic sampling draws another batch) continues that step. Validation
prints its own ``⏱️  Validation Timing:`` block, which is not the step's. A block is
the lines of the process that printed its header: another process's lines inside it (a
worker's warning, through Ray) are skipped, and only a section line of its own (one that
opens with a symbol: ``🔍 Performance Metrics:``) ends it. A log resumed from a checkpoint in
a later epoch counts its steps from that epoch's headers (the epochs before it are not in
it), not from the run's total as wandb does. Refused, naming
the file, the line and the text (:class:`~rlplex.timeline.importers.base.Collector`'s rules,
``--skip-bad-lines`` too): a negative or non-finite time, a timing line that does not
parse, a step's Timing block twice, a Timing block before any Step header; a malformed
last line is a crash mid-write, dropped with a warning.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from rlplex.timeline.importers.base import (
    Collector,
    RecordedRun,
    TimerTable,
    as_float,
    read_lines,
)

FORMAT = "nemo_rl"

STAGES: dict[str, str] = {
    "reward_calculation": "advantage",
    "advantage_calculation": "advantage",
    "policy_training": "train",
    "prepare_for_generation/transfer_and_update_weights": "weight_sync",
    "weight_sync": "weight_sync",
}
"""NeMo RL timer -> rlplex stage (timers of one stage in a step add up)."""

JOINT: dict[str, tuple[str, ...]] = {
    "generation": ("generate", "reward"),
    "policy_and_reference_logprobs": ("old_logprob", "ref_logprob"),
}
"""NeMo RL timers that span several rlplex stages, with the stages in the order they run."""

SKIPS: dict[str, str] = {"prev_logprobs": "old_logprob", "reference_logprobs": "ref_logprob"}
"""A ``▶ Skipping NAME`` line's pass -> the stage it leaves out of its joint timer."""

TOTAL = "total_step_time"
"""The step's recorded time."""
TABLE = TimerTable(total=TOTAL, stages=STAGES, joint=JOINT)
"""NeMo RL's timers as :meth:`Collector.timer` reads them."""
EXPOSED = "exposed_generation"
"""Async GRPO: the trainer's wait for generation (not generation's duration)."""
NOT_TIMES = frozenset({"valid_tokens_per_sec_per_gpu"})
"""Figures NeMo RL logs among its timings that are not seconds (a throughput)."""
PREFIX = "timing/train/"
"""The step's timings as wandb and TensorBoard have them; ``timing/validation/`` and
``timing/setup/`` are not the step's."""
LENGTH_KEY = "mean_gen_tokens_per_sample"

EXPOSED_WARNING = (
    f"{PREFIX}{EXPOSED} (async GRPO) is the trainer's wait for generation, not"
    " generation's duration: kept as a metric, not the generate stage"
)

_HEADER = re.compile(r"={5,}\s*Step\s+(\d+)/(\d+)\s*={5,}")
_EPOCH = re.compile(r"={5,}\s*Epoch\s+(\d+)/(\d+)\s*={5,}")
_TIMING = re.compile(r"⏱\S*\s+Timing:\s*$")  # not "⏱️  Validation Timing:"
_RESULTS = re.compile(r"📊\s*Training Results:\s*$")
_SKIP = re.compile(r"▶\s*Skipping\s+(prev_logprobs|reference_logprobs)\b")
_PREFIX = re.compile(r"^\([^)]*\)\s?")  # Ray's "(TaskRunner pid=1234) "
_BULLET = "•"


def is_step_header(line: str) -> bool:
    """Whether ``line`` is NeMo RL's ``===== Step N/M =====`` header."""
    return _HEADER.search(line) is not None


def is_timing_header(line: str) -> bool:
    """Whether ``line`` opens a step's ``⏱️  Timing:`` block (not validation's)."""
    return _TIMING.search(line) is not None


def add_timing(
    out: Collector, step: int, name: str, value: Any, skipped: frozenset[str] = frozenset()
) -> None:
    """One NeMo RL timer of ``step`` (``name`` without ``timing/train/``), as every NeMo RL
    log reads it: a stage's seconds, a joint timer's (its members less ``skipped``), the
    step's time, or a metric under ``timing/train/NAME`` (unknown timers named)."""
    key = PREFIX + name
    seconds = as_float(value)
    if seconds is None or name in NOT_TIMES:
        out.metric(step, key, value)
        return
    if out.timer(step, key, name, seconds, TABLE, skipped):
        return
    if name == EXPOSED and EXPOSED_WARNING not in out.warnings:
        out.warnings.append(EXPOSED_WARNING)
    elif name != EXPOSED:
        out.unknown.add(key)
    out.metric(step, key, value)


def _content(line: str) -> str:
    """The line without Ray's prefix, stripped."""
    return _split(line)[1]


def _split(line: str) -> tuple[str, str]:
    """(Ray's prefix, or "" for the driver's own line; the rest, stripped)."""
    text = line.strip()
    match = _PREFIX.match(text)
    if match is None:
        return "", text
    return match.group(0).strip(), text[match.end() :].strip()


def _ends_block(text: str) -> bool:
    """Whether a non-bullet line of the block's own process opens a new section.

    NeMo RL opens each section with a symbol (``🔍 Performance Metrics:``, ``📊 ...``,
    ``▶ ...``, ``✅ ...``): Unicode's "other symbol" category. Anything else (a warning
    that starts with its path, a ``***`` line on stderr) is an interleaved line, not a
    section, and must not drop the timers after it.
    """
    return bool(text) and unicodedata.category(text[0]) == "So"


def _bullet(text: str) -> tuple[str, str] | None:
    """(name, value text) of a ``• NAME: VALUE`` line, None for other lines."""
    if not text.startswith(_BULLET):
        return None
    name, sep, value = text[len(_BULLET) :].strip().rpartition(": ")
    return (name.strip(), value.strip()) if sep and name.strip() else ("", text)


def _seconds(text: str) -> float | None:
    """The seconds of a timing line's value (``12.34s (13.4%)``), None if it is not one."""
    match = re.fullmatch(r"(\S+?)s(?:\s+\([^)]*%\))?", text)
    if match is None:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None


def import_nemo_rl(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read a NeMo RL console log (GRPO, sync or async).

    Raises:
        ConfigError: a bad line that is not the last (unless skipping; see the module
            docstring).
    """
    out = Collector(FORMAT, str(path), skip_bad_lines)
    step: int | None = None
    offset = 0  # steps of the epochs before the current one
    block: str | None = None  # "timing" or "results" while reading its bullets
    owner = ""  # the Ray prefix of the process that printed the open block's header
    skipped: dict[int, set[str]] = {}
    last_step = -1
    for number, line, is_last in read_lines(path):
        out.at(number, line, is_last)
        prefix, text = _split(line)
        if block is not None and prefix != owner:
            # Another process's line (a worker's, through Ray) printed inside the block:
            # not the block's, and not its end.
            continue
        epoch = _EPOCH.search(text)
        if epoch is not None:
            if int(epoch.group(1)) > 1:
                offset = max(last_step, offset)
            block = None
            continue
        header = _HEADER.search(text)
        if header is not None:
            step = offset + int(header.group(1))
            last_step = max(last_step, step)
            block = None
            continue
        skip = _SKIP.search(text)
        if skip is not None and step is not None:
            skipped.setdefault(step, set()).add(SKIPS[skip.group(1)])
            continue
        if is_timing_header(text):
            if step is None:
                out.bad_line(number, "a Timing block before any Step header", line, is_last)
                block = None
                continue
            block = (
                "timing"
                if out.first_time(("timing", step), f"step {step}'s Timing block")
                else None
            )
            owner = prefix
            continue
        if _RESULTS.search(text):
            block = "results" if step is not None else None
            owner = prefix
            continue
        item = _bullet(text)
        if item is None:
            # A new section (🔍 Performance Metrics, ▶ ..., 📊 Validation Results) ends the
            # block; other lines of the same process (a stray stderr line) do not.
            if _ends_block(text):
                block = None
            continue
        if block is None or step is None:
            continue
        name, raw = item
        if block == "results":
            if name == "Mean Generation Length":
                value = as_float(_number(raw))
                if value is None:
                    out.bad_line(number, f"{name}: expected a number, got {raw!r}", line, is_last)
                    continue
                out.metric(step, LENGTH_KEY, value)
            elif name:
                out.metric(step, name, _number(raw))
            continue
        seconds = _seconds(raw) if name else None
        if seconds is None:
            out.bad_line(
                number, f"expected '• NAME: SECONDSs (PERCENT%)', got {text!r}", line, is_last
            )
            continue
        if name == "Total step time":
            name = TOTAL
        if not out.valid_seconds(f"{PREFIX}{name} of step {step}", seconds):
            continue
        add_timing(out, step, name, seconds, frozenset(skipped.get(step, ())))
    return out.result()


def _number(text: str) -> Any:
    """A number from a bullet's value text, else the text."""
    try:
        return float(text)
    except ValueError:
        return text
