"""Import recorded step timings: rlplex, verl, ROLL, NeMo RL and OpenRLHF logs, wandb's
CSV, TensorBoard event files, summaries.

:func:`import_record` reads a log, detects its format from the content (or
takes ``format``), and returns a :class:`RecordedRun`: per step, the seconds
each rlplex stage took, the recorded step time, the other metrics, the timing
keys it could not map, and warnings. Replay and what-if consume it.

Format detection looks at the first lines that say something:

- checked before all: a folder holding TensorBoard event files, a file named
  ``*tfevents*``, or one whose first bytes are an event file's first record
  (:mod:`.tensorboard`);
- a JSON object with ``op``/``kind``, ``metrics`` or ``meta``: an rlplex record;
- a JSON object with ``data``, or a ``step:N - key:value`` line: verl;
- a ``metrics_tag:`` line, or a JSON document with ``log_history``: ROLL;
- a ``===== Step N/M =====`` header and a ``⏱️  Timing:`` line after it, within the first
  :data:`NEMO_RL_SCAN` lines (NeMo RL prints its whole config, and each step vLLM's and
  the workers' output, before them): NeMo RL's console;
- a ``Global step N: {...}`` line within as many lines: OpenRLHF's console
  (:mod:`.openrlhf_console`);
- checked first: a ``.csv`` file whose header is one column per metric (more
  than two columns, or a step column such as ``_step``): a per-step history, as
  wandb exports a run (:mod:`.history`);
- then a ``.yaml``/``.yml``/``.csv`` file (a CSV of two columns, ``metric,value``),
  or a small JSON object with ``timing_s``: a summary record (per-stage means,
  :mod:`.summary`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlplex.errors import ConfigError
from rlplex.timeline.importers.base import (
    RecordedRun,
    check_record_path,
    parse_json,
    read_lines,
)
from rlplex.timeline.importers.history import import_history, looks_like_history
from rlplex.timeline.importers.nemo_rl import import_nemo_rl, is_step_header, is_timing_header
from rlplex.timeline.importers.openrlhf_console import import_openrlhf, is_step_line
from rlplex.timeline.importers.rlplex import import_rlplex
from rlplex.timeline.importers.roll import MARKER, import_roll
from rlplex.timeline.importers.summary import import_summary, looks_like_summary
from rlplex.timeline.importers.tensorboard import import_tensorboard, looks_like_tensorboard
from rlplex.timeline.importers.verl import import_verl, parse_console_line

RECORD_FORMATS: tuple[str, ...] = (
    "rlplex", "verl", "roll", "nemo_rl", "openrlhf", "summary", "history", "tensorboard",
)  # fmt: skip

NEMO_RL_SCAN = 100_000
"""Lines read for NeMo RL's step header and Timing block and OpenRLHF's step line (the
other formats are told by their first 200 lines)."""

_IMPORTERS: dict[str, Callable[..., RecordedRun]] = {
    "rlplex": import_rlplex,
    "verl": import_verl,
    "roll": import_roll,
    "nemo_rl": import_nemo_rl,
    "openrlhf": import_openrlhf,
    "summary": import_summary,
    "history": import_history,
    "tensorboard": import_tensorboard,
}


def detect_record_format(path: str | Path) -> str:
    """The format of a log, from its first informative lines.

    Raises:
        ConfigError: nothing in the first 200 lines looks like any known format.
    """
    if looks_like_tensorboard(path):
        return "tensorboard"
    if looks_like_history(check_record_path(path)):
        return "history"
    if looks_like_summary(path):
        return "summary"
    with check_record_path(path).open(encoding="utf-8", errors="replace") as handle:
        head = handle.read(2048).lstrip()
    if head.startswith("{") and '"log_history"' in head:
        return "roll"
    nemo_header = False
    for count, (_, line, _) in enumerate(read_lines(path)):
        if count >= NEMO_RL_SCAN:
            break
        if nemo_header and is_timing_header(line):
            return "nemo_rl"
        if is_step_line(line):
            return "openrlhf"
        if is_step_header(line):
            nemo_header = True
            continue
        if count >= 200:  # the other formats show themselves in their first lines
            continue
        if MARKER in line:
            return "roll"
        stripped = line.strip()
        if stripped.startswith("{"):
            obj, why = parse_json(stripped)
            if why is not None:
                continue
            if isinstance(obj, dict) and "data" in obj:
                return "verl"
            if isinstance(obj, dict) and (
                {"op", "kind"} <= obj.keys() or "metrics" in obj or "meta" in obj
            ):
                return "rlplex"
            continue
        try:
            if parse_console_line(line) is not None:
                return "verl"
        except ValueError:
            return "verl"
    raise ConfigError(
        "cannot tell the log's format (rlplex record, verl JSONL or console, ROLL stdout,"
        " NeMo RL console: a Step header and a Timing block; OpenRLHF console: a"
        " 'Global step N: {...}' line;"
        " a history or summary is a .csv, .yaml or .json file; TensorBoard: an event file"
        " or its folder); give --format",
        file=str(path),
    )


def import_record(
    path: str | Path, format: str | None = None, skip_bad_lines: bool = False
) -> RecordedRun:
    """Read a run's log into per-step, per-stage durations.

    Args:
        path: an rlplex Timeline JSONL, a verl JSONL or console log, a ROLL
            stdout log or a ROLL ``log_history`` JSON file, a NeMo RL or OpenRLHF
            console log, a summary record, a per-step CSV history (a wandb export), or a TensorBoard
            event file or run folder.
        format: ``rlplex``, ``verl``, ``roll``, ``nemo_rl``, ``openrlhf``, ``summary``,
            ``history`` or ``tensorboard``; detected when None.
        skip_bad_lines: skip malformed lines with a warning instead of failing.

    Raises:
        ConfigError: unknown format, unreadable file, or a malformed line (with
            its number) that is not the last one, unless ``skip_bad_lines``.
    """
    if format is not None and format not in _IMPORTERS:
        raise ConfigError(
            f"unknown record format (expected one of: {', '.join(RECORD_FORMATS)})",
            field="--format",
            value=format,
        )
    if not (Path(path).is_dir() and format in (None, "tensorboard")):
        check_record_path(path)  # a run's folder is TensorBoard's, checked file by file
    fmt = format or detect_record_format(path)
    return _IMPORTERS[fmt](path, skip_bad_lines=skip_bad_lines)


__all__ = ["RECORD_FORMATS", "RecordedRun", "detect_record_format", "import_record"]
