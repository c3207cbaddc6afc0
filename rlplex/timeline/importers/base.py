"""The common result of every log importer, and the bookkeeping they share.

verl, ROLL and rlplex itself log per-stage step timings in different shapes.
Each importer turns its log into one :class:`RecordedRun`: per step, the
seconds each rlplex stage took, the recorded step time, the other metrics, and
what it could not map. :class:`Collector` holds the rules every importer
follows for bad input: a malformed *last* line is a crash mid-write and is
dropped with a warning; any other malformed line is an error naming the file
and the line, unless the caller asked to skip bad lines (then it is counted and
the first few are named). The same rules hold for values no run can produce:
a negative, NaN or infinite duration, and a step or op that appears twice (a
log concatenated with itself, or two runs' logs interleaved), which would
otherwise be summed in silence. :func:`read_lines` streams the file (bounded
line length, a directory or an oversized file refused up front), and
:func:`parse_json` turns JSON nested past Python's recursion limit into a bad
line instead of a crash.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rlplex.errors import ConfigError

MAX_LINE_CHARS = 2**20
"""A longer line is a bad line (read no further than this): no logger writes 1 MB lines."""
NAMED_SKIPS = 3
"""Skipped lines named one by one in the warnings; the rest are counted."""


def max_record_bytes() -> int:
    """Largest record read: ``RLPLEX_MAX_RECORD_MB`` (default 2,048 MB)."""
    raw = os.environ.get("RLPLEX_MAX_RECORD_MB")
    try:
        megabytes = float(raw) if raw else 2048.0
    except ValueError:
        raise ConfigError(
            "must be a number of MB", field="RLPLEX_MAX_RECORD_MB", value=raw
        ) from None
    return int(megabytes * 2**20)


def check_record_path(path: str | Path) -> Path:
    """``path`` as a readable record file, or a ConfigError (missing, a directory, too large)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(
            "is a directory, not a record file (a TensorBoard run's folder of event files is"
            " read as one, by detection or --format tensorboard)",
            file=str(path),
        )
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=str(path)) from None
    limit = max_record_bytes()
    if size > limit:
        raise ConfigError(
            f"the record is {size / 2**20:.0f} MB, over the limit of {limit / 2**20:g} MB"
            " (RLPLEX_MAX_RECORD_MB raises it)",
            file=str(path),
        )
    return path


def parse_json(text: str) -> tuple[Any, str | None]:
    """(value, None) or (None, why): invalid JSON, or nested too deeply to parse."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError:
        return None, "not valid JSON"
    except RecursionError:
        return None, "JSON nested too deeply"


class RecordedRun(BaseModel):
    """Per-step, per-stage durations (and more) read from a run's log."""

    model_config = ConfigDict(frozen=True)

    format: str
    """The log's format: ``rlplex``, ``verl``, ``roll``, ``nemo_rl``, ``summary`` or ``history``."""
    source: str | None = None
    """The file it was read from."""
    steps: dict[int, dict[str, float]] = Field(default_factory=dict)
    """Seconds per rlplex stage name, per step; a key of :attr:`joint` holds one timer's
    seconds that span several stages."""
    joint: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Keys of :attr:`steps` that are one timer spanning several stages, each with its
    member stages in the order they run (NeMo RL's ``policy_and_reference_logprobs``:
    ``old_logprob+ref_logprob`` -> (old_logprob, ref_logprob)). The log does not say how the
    seconds divide; :func:`rlplex.timeline.joint.split_joint` divides them among the
    stages of the config the record meets, and returns a record without joint keys. A
    member ``STAGE@ROLE`` is that stage only where the config runs it on that role
    (OpenRLHF times a rule reward inside generation, a reward model's inside
    ``make_experience``)."""
    concurrent: tuple[str, ...] = ()
    """Keys of :attr:`joint` whose members ran as the config places them: side by side
    where their devices are disjoint and neither waits for the other (OpenRLHF's
    ``ppo_train``, the critic's and the actor's training at once), one after the other
    otherwise. The others' members ran one after the other whatever the placement."""
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


def joint_key(members: tuple[str, ...]) -> str:
    """The key of a timer spanning the stages ``members``: their names joined by ``+``."""
    return "+".join(members)


ROLE_MARK = "@"
"""Separates a joint member's stage from the role it must run on (``reward@driver``)."""


def member_stage(member: str) -> tuple[str, str | None]:
    """(stage name, the role it must run on or None) of a joint member (``reward@driver``)."""
    stage, mark, role = member.partition(ROLE_MARK)
    return stage, (role if mark else None)


def require_stage_timings(run: RecordedRun) -> None:
    """Refuse a record in which no step has any stage's seconds: nothing to replay or fit.

    A log whose timing keys are all names rlplex does not map (another framework's
    timers, a stage named as rlplex names it in a verl-style log) reads without error
    but holds no stage time; replaying it would print an empty table. An rlplex record
    is let through: its ops' memory figures are checked against the plan even when its
    events name no stage.

    Raises:
        ConfigError: naming the file and the timing keys it has.
    """
    if run.steps or run.format == "rlplex":  # an rlplex record's ops carry memory to check
        return
    keys = run.unknown_keys
    shown = ", ".join(keys[:6]) + (f" and {len(keys) - 6} more" if len(keys) > 6 else "")
    found = f"its timing keys map to no stage ({shown})" if keys else "it has no stage timing"
    raise ConfigError(
        f"no step has a stage's seconds: {found}; docs/record.md lists the {run.format}"
        " timing names rlplex reads (another framework's timers: a summary record with a"
        " stages: mapping)",
        file=run.source,
    )


@dataclass(frozen=True)
class TimerTable:
    """How a framework's step timers map to rlplex stages (NeMo RL's, OpenRLHF's)."""

    total: str
    """The timer that is the step's recorded time."""
    stages: Mapping[str, str]
    """Timer -> the one stage it times (timers of one stage in a step add up)."""
    joint: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Timer -> the stages it spans (:attr:`RecordedRun.joint`)."""
    concurrent: frozenset[str] = frozenset()
    """Joint timers whose stages ran side by side (:attr:`RecordedRun.concurrent`)."""


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
        self.skipped = 0
        self.current: tuple[int, str, bool] = (0, "", False)
        self.field: str | None = None
        self.first_seen: dict[Any, int] = {}
        self.joint: dict[str, tuple[str, ...]] = {}
        self.concurrent: set[str] = set()

    def at(self, number: int, text: str, is_last: bool, field: str | None = None) -> None:
        """The line being read, for errors found in its values; ``field``: the column
        whose cell ``text`` is (a CSV history), so that an error names it."""
        self.current = (number, text, is_last)
        self.field = field

    def first_time(self, key: Any, what: str) -> bool:
        """True the first time ``key`` is seen; else a bad line naming both lines.

        A step or op logged twice is a log concatenated with itself or two runs
        interleaved: summing them would double the recorded time in silence.
        """
        number, text, _ = self.current
        first = self.first_seen.setdefault(key, number)
        if first == number:
            return True
        self.bad_line(  # never excused as a truncated last line: the line is whole
            number,
            f"{what} appears twice (first on line {first}): a log repeated, or two runs"
            " interleaved?",
            text,
            False,
        )
        return False

    def valid_seconds(self, what: str, seconds: float) -> bool:
        """A duration no run can have (negative, NaN, infinite) is a bad line."""
        if math.isfinite(seconds) and seconds >= 0:
            return True
        number, text, _ = self.current
        self.bad_line(
            number, f"{what}: expected a finite duration >= 0 s, got {seconds!r}", text, False
        )
        return False

    def stage(self, step: int, name: str, seconds: float) -> None:
        if not self.valid_seconds(f"stage {name!r} of step {step}", seconds):
            return
        stages = self.steps.setdefault(step, {})
        # A stage logged twice in one step (two events) took the sum of both.
        stages[name] = stages.get(name, 0.0) + seconds

    def joint_stage(
        self, step: int, members: tuple[str, ...], seconds: float, concurrent: bool = False
    ) -> None:
        """One timer's seconds spanning the stages ``members``, under their joint key;
        ``concurrent``: they ran as the config places them (:attr:`RecordedRun.concurrent`)."""
        key = joint_key(members)
        self.joint[key] = members
        if concurrent:
            self.concurrent.add(key)
        self.stage(step, key, seconds)

    def timer(
        self,
        step: int,
        key: str,
        name: str,
        seconds: float,
        table: TimerTable,
        skipped: frozenset[str] = frozenset(),
    ) -> bool:
        """A framework's timer ``name`` (logged as ``key``) of ``step`` read by its ``table``:
        the step's time, a stage's seconds, or a joint timer's (its members less
        ``skipped``, one member left: that stage's). False for a timer the table does not
        know (the caller keeps it as a metric)."""
        if name == table.total:
            if self.valid_seconds(f"{key} of step {step}", seconds):
                self.step_s[step] = seconds
            return True
        if name in table.stages:
            self.stage(step, table.stages[name], seconds)
            return True
        members = tuple(m for m in table.joint.get(name, ()) if m not in skipped)
        if len(members) > 1:
            self.joint_stage(step, members, seconds, concurrent=name in table.concurrent)
        elif members:
            self.stage(step, members[0], seconds)
        return bool(members)

    def transfer(self, step: int, key: str, seconds: float) -> None:
        if not self.valid_seconds(f"{key} of step {step}", seconds):
            return
        ops = self.transfers.setdefault(step, {})
        ops[key] = ops.get(key, 0.0) + seconds

    def metric(self, step: int, key: str, value: Any) -> None:
        self.metrics.setdefault(step, {})[key] = value

    def bad_line(self, number: int, reason: str, text: str, is_last: bool) -> None:
        """Report a malformed line: warn for the last line or when skipping, else raise."""
        where = f"line {number}" + (f", column {self.field!r}" if self.field else "")
        if is_last:
            self.warnings.append(f"{where}: {reason}; a truncated last line, ignored")
            return
        if self.skip_bad_lines:
            self.skipped += 1
            if self.skipped <= NAMED_SKIPS:
                self.warnings.append(f"{where}: {reason}; skipped")
            return
        raise ConfigError(reason, file=self.file, line=number, field=self.field, value=text[:120])

    def result(self) -> RecordedRun:
        if self.skipped > NAMED_SKIPS:
            self.warnings.append(
                f"{self.skipped:,} bad lines skipped in all (the first {NAMED_SKIPS} named above)"
            )
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
            joint=self.joint,
            concurrent=tuple(sorted(self.concurrent)),
            step_s=self.step_s,
            transfers=self.transfers,
            metrics=self.metrics,
            unknown_keys=tuple(sorted(self.unknown)),
            warnings=tuple(self.warnings),
        )


def read_lines(path: str | Path) -> Iterator[tuple[int, str, bool]]:
    """(1-based number, text, is_last_non_empty_line) for each non-empty line of ``path``.

    Streams the file with one line of look-ahead; a line longer than
    :data:`MAX_LINE_CHARS` is cut there (the rest is skipped unread into
    memory), so it fails to parse as the bad line it is.
    """
    path = check_record_path(path)
    pending: tuple[int, str] | None = None
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            number = 0
            while line := handle.readline(MAX_LINE_CHARS + 1):
                number += 1
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    line = line[:MAX_LINE_CHARS] + " ...(cut: a line over 1 MB)"
                    while (rest := handle.readline(MAX_LINE_CHARS)) and not rest.endswith("\n"):
                        pass
                text = line.rstrip("\r\n")
                if not text.strip():
                    continue
                if pending is not None:
                    yield pending[0], pending[1], False
                pending = (number, text)
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=str(path)) from None
    if pending is not None:
        yield pending[0], pending[1], True


def as_float(value: Any) -> float | None:
    """A number from a log value, or None (bools and text are not durations)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an integer past 1e308
            return math.inf
    return None
