"""OpenRLHF's console log: the step's ``status`` dict, printed once a step.

A run with neither wandb nor TensorBoard leaves its driver's output, and in it every
step's figures: OpenRLHF's trainers log the step's ``status`` (its timers, losses and
lengths; the generated samples left out) with Python's ``repr`` of the dict, at
OpenRLHF 3c3be623:

- ``openrlhf/trainer/ppo_trainer.py:547``:
  ``logger.info(f"✨ Global step {global_step}: {log_status}")``;
- ``openrlhf/trainer/ppo_trainer_async.py:244``: the same line without the sparkle.

The logger's own prefix (``[time] INFO ppo_trainer.py:547]``) and Ray's
(``(PPOTrainer pid=1234)``) come before it. The dict's keys are the ``status`` keys that
wandb gets under ``train/`` (``openrlhf/utils/logging_utils.py``, ``log_train``), so each
value is read as the wandb history's column ``train/KEY``
(:func:`rlplex.timeline.importers.openrlhf.add_timing` for the ``timing/`` timers, with
the row's :func:`~rlplex.timeline.importers.openrlhf.step_reading`; the rest metrics under
their wandb names, where the lengths are found). Values are Python literals; numpy's and
torch's scalars print as ``np.float64(1.5)`` or ``tensor(1.5)`` and are read as their
number, ``nan`` as a value not logged.

The evaluation's line (``✨ Evaluation completed in ..., global_step N, eval_metrics:
{...}``) and every other line are passed over. A step line whose dict does not parse is a
bad line (the last one, cut by a crash, is dropped with a warning); a step printed twice
is refused, as in every record.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError
from rlplex.timeline.importers import openrlhf
from rlplex.timeline.importers.base import Collector, RecordedRun, read_lines

FORMAT = "openrlhf"
STEP_LINE = re.compile(r"(?:^|[\s\]])(?:✨\s*)?Global step (\d+): (\{.*\})\s*$")
"""A trainer's step line: the step and its ``status`` dict's repr."""
_SCALAR_CALL = re.compile(
    r"\b(?:np|numpy|torch)?\.?(?:float\d*|int\d*|tensor)\(\s*([-+]?(?:[\d.]+(?:[eE][-+]?\d+)?|nan|inf))"
    r"\s*(?:,[^()]*)?\)"
)
"""``np.float64(1.5)``, ``np.int64(3)``, ``tensor(1.5, device='cuda:0')``: their number."""
_NOT_A_NUMBER = re.compile(r"(?<![\w'\"])(-?inf|nan)(?![\w'\"])")


def is_step_line(line: str) -> bool:
    """Whether ``line`` is a trainer's ``Global step N: {...}`` line."""
    return "Global step " in line and STEP_LINE.search(line) is not None


def parse_status(text: str) -> dict[str, Any]:
    """The ``status`` dict a step line prints.

    Raises:
        ValueError: not a dict of Python literals.
    """
    text = _SCALAR_CALL.sub(r"\1", text)
    # repr(float("nan")) is nan and repr(float("inf")) inf: no literal; inf as 1e999 reads as
    # infinity, nan as None (not logged).
    text = _NOT_A_NUMBER.sub(
        lambda m: "None" if m.group(1) == "nan" else m.group(1)[:-3] + "1e999", text
    )
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"the status dict does not parse ({type(exc).__name__})") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError("the status is not a dict of named values")
    return value


def import_openrlhf(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read OpenRLHF's console log into a :class:`RecordedRun`.

    Raises:
        ConfigError: a step line that does not parse or a step printed twice (naming the
            file and the line), or a log with no step line.
    """
    file = str(path)
    out = Collector(FORMAT, file, skip_bad_lines)
    frozen: list[int] = []
    waited: list[int] = []
    for number, line, is_last in read_lines(path):
        if "Global step " not in line:
            continue
        match = STEP_LINE.search(line)
        if match is None:
            continue
        out.at(number, line, is_last)
        step = int(match.group(1))
        try:
            status = parse_status(match.group(2))
        except ValueError as exc:
            out.bad_line(number, str(exc), match.group(2), is_last)
            continue
        if not out.first_time(step, f"step {step}"):
            continue
        row = {
            openrlhf.WANDB_PREFIX + key: float(value)
            for key, value in status.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        reading = openrlhf.step_reading(row)
        if reading.actor_frozen:
            frozen.append(step)
        if reading.waited:
            waited.append(step)
        for key, value in status.items():
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue  # not logged on this step
            if key.startswith(openrlhf.PREFIX):
                openrlhf.add_timing(out, step, key[len(openrlhf.PREFIX) :], value, reading)
            else:
                out.metric(step, openrlhf.WANDB_PREFIX + key, value)
    from rlplex.timeline.importers.history import openrlhf_warnings

    openrlhf_warnings(out, frozen, waited)
    if not out.steps and not out.step_s:
        raise ConfigError(
            "no 'Global step N: {...}' line with OpenRLHF's timers (timing/generation, ..."
            " timing/step_total; OpenRLHF v0.9.6 and later print them)",
            file=file,
        )
    return out.result()
