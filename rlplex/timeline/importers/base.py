"""The common result of every log importer, and the bookkeeping they share.

verl, ROLL and rlplex itself log per-stage step timings in different shapes.
Each importer turns its log into one :class:`RecordedRun`: per step, the
seconds each rlplex stage took, the recorded step time, the other metrics, and
what it could not map. :class:`Collector` holds the rules every importer
follows for bad input: a malformed *last* line is a crash mid-write and is
dropped with a warning; any other malformed line is an error naming the file
and the line, unless the caller asked to skip bad lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rlplex.errors import ConfigError


class RecordedRun(BaseModel):
    """Per-step, per-stage durations (and more) read from a run's log."""

    model_config = ConfigDict(frozen=True)

    format: str
    """The log's format: ``rlplex``, ``verl`` or ``roll``."""
    source: str | None = None
    """The file it was read from."""
    steps: dict[int, dict[str, float]] = Field(default_factory=dict)
    """Seconds per rlplex stage name, per step."""
    step_s: dict[int, float] = Field(default_factory=dict)
    """The recorded wall time of each step (verl ``timing_s/step``, ROLL ``time/step_total``)."""
    transfers: dict[int, dict[str, float]] = Field(default_factory=dict)
    """Seconds per recorded offload/reload op, keyed by its op id without the ``s{step}/``
    prefix (``offload/actor_train/optimizer``), per step; only rlplex records have them."""
    metrics: dict[int, dict[str, Any]] = Field(default_factory=dict)
    """Every other value per step, under its original key (unknown timing keys included)."""
    unknown_keys: tuple[str, ...] = ()
    """Timing keys that map to no rlplex stage, sorted; their values stay in ``metrics``."""
    warnings: tuple[str, ...] = ()
    """Things the user should know: dropped lines, lagging keys, missing steps."""

    @property
    def step_numbers(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.steps) | set(self.step_s)))

    def stage_names(self) -> tuple[str, ...]:
        """Every stage seen in any step, in first-seen order."""
        seen: dict[str, None] = {}
        for stages in self.steps.values():
            for name in stages:
                seen.setdefault(name, None)
        return tuple(seen)


class Collector:
    """Accumulates one import; knows the bad-line rules."""

    def __init__(self, fmt: str, file: str, skip_bad_lines: bool) -> None:
        self.format = fmt
        self.file = file
        self.skip_bad_lines = skip_bad_lines
        self.steps: dict[int, dict[str, float]] = {}
        self.step_s: dict[int, float] = {}
        self.transfers: dict[int, dict[str, float]] = {}
        self.metrics: dict[int, dict[str, Any]] = {}
        self.unknown: set[str] = set()
        self.warnings: list[str] = []

    def stage(self, step: int, name: str, seconds: float) -> None:
        stages = self.steps.setdefault(step, {})
        # A stage logged twice in one step (two events) took the sum of both.
        stages[name] = stages.get(name, 0.0) + seconds

    def transfer(self, step: int, key: str, seconds: float) -> None:
        ops = self.transfers.setdefault(step, {})
        ops[key] = ops.get(key, 0.0) + seconds

    def metric(self, step: int, key: str, value: Any) -> None:
        self.metrics.setdefault(step, {})[key] = value

    def bad_line(self, number: int, reason: str, text: str, is_last: bool) -> None:
        """Report a malformed line: warn for the last line or when skipping, else raise."""
        if is_last:
            self.warnings.append(f"line {number}: {reason}; a truncated last line, ignored")
            return
        if self.skip_bad_lines:
            self.warnings.append(f"line {number}: {reason}; skipped")
            return
        raise ConfigError(reason, file=self.file, line=number, value=text[:120])

    def result(self) -> RecordedRun:
        if self.unknown:
            self.warnings.append(
                "timing keys with no rlplex stage (kept in metrics): "
                + ", ".join(sorted(self.unknown))
            )
        # Built without re-validation: the collector only stores well-typed values,
        # and validating 100,000 steps again would double the import time.
        return RecordedRun.model_construct(
            format=self.format,
            source=self.file,
            steps=self.steps,
            step_s=self.step_s,
            transfers=self.transfers,
            metrics=self.metrics,
            unknown_keys=tuple(sorted(self.unknown)),
            warnings=tuple(self.warnings),
        )


def read_lines(path: str | Path) -> Iterator[tuple[int, str, bool]]:
    """(1-based number, text, is_last_non_empty_line) for each non-empty line of ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc}", file=str(path)) from None
    lines = text.splitlines()
    last = len(lines)
    while last and not lines[last - 1].strip():
        last -= 1
    for number, line in enumerate(lines[:last], start=1):
        if line.strip():
            yield number, line, number == last


def as_float(value: Any) -> float | None:
    """A number from a log value, or None (bools and text are not durations)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None
