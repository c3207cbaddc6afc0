"""Import ROLL's step metrics: stdout tracker lines and a checkpoint's log history.

ROLL's stdout tracker prints ``metrics_tag: {"step": 12, "metrics": {...}}``
per step; a checkpoint's ``trainer_state.json``-style file keeps the same
metrics as ``{"log_history": [{"step": 12, ...}, ...]}``. Stage timings are
``time/NAME`` keys, mapped by :data:`STAGES`. ``time/step_total`` is written
*before* the step's own total is known, so it holds the previous step's time:
the value logged at step N is step N-1's recorded time. Other ``time/`` keys
(``time/val_step``, worker-level ``time/actor_train/train_step/total`` ...)
stay in the metrics and are reported as unknown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError
from rlplex.timeline.importers.base import (
    Collector,
    RecordedRun,
    as_float,
    check_record_path,
    parse_json,
    read_lines,
)

STAGES: dict[str, str] = {
    "time/step_generate": "generate",
    "time/ref_log_probs_values": "ref_logprob",
    "time/old_log_probs": "old_logprob",
    "time/step_train": "train",
    "time/step_model_update": "weight_sync",
}
"""ROLL timing key -> rlplex stage (reference log-probs and critic values run as one stage)."""

TOTAL_KEY = "time/step_total"
"""Lags one step: logged at step N, it is step N-1's total."""

MARKER = "metrics_tag:"


def add_step(out: Collector, step: int, metrics: dict[str, Any]) -> None:
    """One step's metrics by ROLL's names (its console line's, its log history's, its
    TensorBoard scalars)."""
    for key, value in metrics.items():
        seconds = as_float(value) if key.startswith("time/") else None
        if key == TOTAL_KEY and seconds is not None:
            if step > 0 and out.valid_seconds(f"{key} of step {step}", seconds):
                out.step_s[step - 1] = seconds
            continue
        stage = STAGES.get(key)
        if stage is not None and seconds is not None:
            out.stage(step, stage, seconds)
            continue
        if key.startswith("time/"):
            out.unknown.add(key)
        out.metric(step, key, value)


def _finish(out: Collector) -> RecordedRun:
    if out.step_s:
        last = max(out.steps, default=-1)
        if last not in out.step_s and last >= 0:
            out.warnings.append(
                f"step {last} has no recorded total: ROLL logs time/step_total one step late"
            )
    return out.result()


def import_roll(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read a ROLL stdout log or a ``log_history`` JSON file.

    Raises:
        ConfigError: a malformed line that is not the last (unless skipping).
    """
    out = Collector("roll", str(path), skip_bad_lines)
    head = _head(path, 4096)
    if head.startswith("{") and MARKER not in head and '"log_history"' in head:
        return _import_history(path, out)
    for number, line, is_last in read_lines(path):
        out.at(number, line, is_last)
        at = line.find(MARKER)
        if at < 0:
            continue
        obj, why = parse_json(line[at + len(MARKER) :])
        if why is not None:
            out.bad_line(number, f"{MARKER} is not followed by valid JSON ({why})", line, is_last)
            continue
        step = obj.get("step") if isinstance(obj, dict) else None
        metrics = obj.get("metrics") if isinstance(obj, dict) else None
        if isinstance(step, bool) or not isinstance(step, int) or not isinstance(metrics, dict):
            out.bad_line(number, 'expected {"step": N, "metrics": {...}}', line, is_last)
            continue
        if not out.first_time(step, f"step {step}"):
            continue
        add_step(out, step, metrics)
    return _finish(out)


def _head(path: str | Path, size: int) -> str:
    """The first ``size`` characters of a record (after the checks every record gets)."""
    with check_record_path(path).open(encoding="utf-8", errors="replace") as handle:
        return handle.read(size).lstrip()


def _import_history(path: str | Path, out: Collector) -> RecordedRun:
    try:
        data = json.loads(check_record_path(path).read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg}", file=str(path), line=exc.lineno) from None
    except RecursionError:
        raise ConfigError("JSON nested too deeply", file=str(path)) from None
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        raise ConfigError("must be a list of per-step metrics", field="log_history", file=str(path))
    for index, entry in enumerate(history):
        step = entry.get("step") if isinstance(entry, dict) else None
        out.at(index + 1, f"log_history[{index}]", False)
        is_step = isinstance(step, int) and not isinstance(step, bool)
        if is_step and not out.first_time(step, f"log_history[{index}]: step {step}"):
            continue
        if isinstance(step, bool) or not isinstance(step, int):
            if out.skip_bad_lines:
                out.warnings.append(f"log_history[{index}]: has no integer 'step'; skipped")
                continue
            raise ConfigError(
                "has no integer 'step'", field=f"log_history[{index}]", file=str(path)
            )
        add_step(out, step, {k: v for k, v in entry.items() if k != "step"})
    return _finish(out)
