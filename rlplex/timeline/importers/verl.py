"""Import verl's step metrics: the file logger's JSONL and console lines.

verl logs one dict of metrics per step. Its file logger writes
``{"step": 12, "data": {"timing_s/gen": 30.5, ...}}`` per line; its console
logger prints ``step:12 - timing_s/gen:30.5 - timing_s/update_actor:12.25``,
which under Ray arrives prefixed, e.g. ``(TaskRunner pid=1234) step:12 - ...``
(older releases: ``(main_task pid=...)``). Timing keys are ``timing_s/NAME``;
before early 2025 they were ``timing/NAME`` and ``timing(s)/NAME``.
:data:`STAGES` maps verl's names to rlplex stages; ``step`` is the recorded
step time. Timing keys of other names (``testing``, ``save_checkpoint`` ...)
are kept in the metrics and reported as unknown. Console lines that are not
step lines (Ray and vLLM chatter) are ignored. :func:`add_metric` is that
reading of one key; the per-step CSV importer (:mod:`.history`, a wandb export
of the same keys) shares it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlplex.timeline.importers.base import (
    Collector,
    RecordedRun,
    as_float,
    parse_json,
    read_lines,
)

STAGES: dict[str, str] = {
    "gen": "generate",
    "reward": "reward",
    "old_log_prob": "old_logprob",
    "ref": "ref_logprob",
    "values": "values",
    "adv": "advantage",
    "update_critic": "critic_train",
    "update_actor": "train",
    "update_weights": "weight_sync",
}
"""verl timing name -> rlplex stage."""

TIMING_PREFIXES = ("timing_s/", "timing(s)/", "timing/")
"""Current and older prefixes of verl's per-stage timing keys."""

_STEP_LINE = re.compile(r"^(?:.*?\)\s*)?step:(\d+)\s+-\s+(.*)$")
_WRAPPED = re.compile(r"^[A-Za-z_][\w.]*\((.*)\)$")  # np.float64(1.5) in newer numpy reprs


def parse_number(text: str) -> int | float | None:
    """The number ``text`` writes (an int when it is written as one), or None for text."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _value(text: str) -> Any:
    text = text.strip()
    wrapped = _WRAPPED.match(text)
    if wrapped:
        text = wrapped.group(1)
    number = parse_number(text)
    return text if number is None else number


def add_metric(out: Collector, step: int, key: str, value: Any) -> None:
    """One of verl's ``key: value`` metrics of ``step``, as every verl-named log reads it:
    a ``timing_s/`` key of a known stage is that stage's seconds, ``timing_s/step`` the
    step's time, anything else (lengths, losses, unknown timings) a metric under its key.
    """
    for prefix in TIMING_PREFIXES:
        if key.startswith(prefix):
            name = key[len(prefix) :]
            seconds = as_float(value)
            if seconds is None:
                break
            if name == "step":
                if out.valid_seconds(f"{key} of step {step}", seconds):
                    out.step_s[step] = seconds
                return
            stage = STAGES.get(name)
            if stage is not None:
                out.stage(step, stage, seconds)
                return
            out.unknown.add(key)
            break
    out.metric(step, key, value)


def parse_console_line(line: str) -> tuple[int, dict[str, Any]] | None:
    """(step, metrics) of a console step line, None for other lines.

    Raises:
        ValueError: a step line with a malformed ``key:value`` item.
    """
    match = _STEP_LINE.match(line.strip())
    if not match:
        return None
    values: dict[str, Any] = {}
    for item in match.group(2).split(" - "):
        key, sep, raw = item.strip().rpartition(":")
        if not sep or not key or not raw.strip():
            raise ValueError(f"malformed item {item.strip()!r} (expected key:value)")
        values[key] = _value(raw)
    return int(match.group(1)), values


def _ends_with_newline(path: str | Path) -> bool:
    """Whether the file's last byte is a newline (a line a crash cut short lacks it)."""
    with Path(path).open("rb") as handle:
        if handle.seek(0, 2) == 0:
            return True
        handle.seek(-1, 2)
        return handle.read(1) in (b"\n", b"\r")


def import_verl(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read a verl JSONL file or console log (detected per line).

    Raises:
        ConfigError: a malformed line that is not the last (unless skipping).
    """
    out = Collector("verl", str(path), skip_bad_lines)
    for number, line, is_last in read_lines(path):
        out.at(number, line, is_last)
        stripped = line.lstrip()
        if stripped.startswith("{"):
            obj, why = parse_json(stripped)
            if why is not None:
                out.bad_line(number, why, line, is_last)
                continue
            step, data = obj.get("step") if isinstance(obj, dict) else None, None
            if isinstance(obj, dict):
                data = obj.get("data")
            if isinstance(step, bool) or not isinstance(step, int) or not isinstance(data, dict):
                out.bad_line(number, 'expected {"step": N, "data": {...}}', line, is_last)
                continue
            if not out.first_time(step, f"step {step}"):
                continue
            for key, value in data.items():
                add_metric(out, step, key, value)
            continue
        try:
            parsed = parse_console_line(line)
        except ValueError as exc:
            out.bad_line(number, str(exc), line, is_last)
            continue
        if parsed is None:
            continue
        if is_last and not _ends_with_newline(path):
            # verl prints each step line whole, newline included: a last line without it was
            # cut mid-write, and its last value may be a number's first digits
            # (`timing_s/update_actor:2` of 21.033), which would parse.
            out.bad_line(number, "a step line with no newline at its end", line, True)
            continue
        step, values = parsed
        if not out.first_time(step, f"step {step}"):
            continue
        for key, value in values.items():
            add_metric(out, step, key, value)
    return out.result()
