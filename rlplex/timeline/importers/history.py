"""Import a per-step CSV history: wandb's export of a run, one row per step, one column per metric.

verl (like most RL frameworks) logs its step metrics to wandb, and what a user
often has of a run is wandb's CSV of it, not the framework's own log. This
module reads that CSV as the per-step record it is: several steps, so that
``rlplex calibrate`` holds some out and ``replay`` replays each one, exactly as
it reads verl's JSONL of the same figures (every value goes through
:func:`rlplex.timeline.importers.verl.add_metric`: ``timing_s/gen`` is the
generate stage, ``timing_s/step`` the step time, lengths and the rest stay
metrics under their keys). A NeMo RL run's history has its timers as ``timing/train/NAME``
columns, read with NeMo RL's mapping (:func:`rlplex.timeline.importers.nemo_rl.add_timing`:
``timing/train/policy_training`` is the train stage, ``timing/train/total_step_time`` the
step time); its ``timing/validation/`` and ``timing/setup/`` columns are not the step's and
stay metrics. An OpenRLHF run's history has its timers as ``train/timing/NAME`` columns
(its ``WandbLogger`` logs the step's dict under ``train/``), read with OpenRLHF's mapping
(:func:`rlplex.timeline.importers.openrlhf.add_timing`); its step is ``train/global_step``
(wandb's ``_step`` counts OpenRLHF's every ``wandb.log`` call: the samples table and the
evaluations are logged apart), and a row with no ``train/timing/`` value (the samples
table's, an evaluation's; wandb's ``step_sync`` may repeat the last ``train/global_step``
in it) is not a step's and is skipped. Two shapes exist:

1. The run's history from wandb's public API, written with pandas' ``to_csv``:
   ``wandb.Api().run(PATH).history()`` (sampled: ``history(samples=500,
   keys=None, x_axis="_step", pandas=True, ...)`` in ``wandb/apis/public.py``)
   or ``pd.DataFrame(run.scan_history())`` (every row). The header is the
   metric names plus wandb's own columns (``_step``, ``_runtime``,
   ``_timestamp``) and, when written without ``index=False``, pandas' unnamed
   index column. A cell is empty (or ``NaN``, ``None``) where the metric was not
   logged on that row's step (validation metrics every N steps): not a value. wandb's docs warn that
   the CSV export and ``run.history`` may leave out steps past their export
   limits ("Why are steps missing from a CSV metric export?", docs.wandb.ai);
   ``scan_history`` reads them all.
2. A line plot panel's "Export CSV" (panel menu, Export, CSV): a ``Step``
   column, then per run and metric ``<run name> - <metric>`` with the band of
   a grouped line, ``<run name> - <metric>__MIN`` and ``__MAX``, written even
   for a single run (wandb/wandb#5349, #5222). The run prefix is stripped and
   the bands dropped; a panel of several runs is refused, naming them (export it
   with one run shown). A panel plots at most 1,500 sampled points per line in
   its default mode (docs.wandb.ai, line plot point aggregation), so a long
   run's panel CSV has gaps; every step present is read.

The step column is the first of ``_step``, ``step``/``Step``, ``global_step``,
``training/global_step``, ``train/global_step`` (any case) the header has (OpenRLHF's
``train/global_step`` first); verl's ``Tracking.log(data,
step)`` (``verl/utils/tracking.py``) hands the same step to wandb and to its
file logger, so ``_step`` is the ``step`` of its JSONL. Columns whose
name starts with ``_`` (wandb's), unnamed ones, and columns with no number in
them (media, text) are ignored. Refused, with the file, the line, the column
and the cell: a negative or non-finite time, a text cell in a column of numbers,
a step that is not a whole number or appears twice; with the file: a header
without a step column or without any ``timing_s/`` (or NeMo RL ``timing/train/``, OpenRLHF
``train/timing/``) column, and a file where no row has a timing or whose timing columns all
name something verl, NeMo RL and OpenRLHF do not log (another framework's timers). A row
shorter than the header on the last line is a crash mid-write, dropped with a warning (the
rules of
:class:`~rlplex.timeline.importers.base.Collector`, ``--skip-bad-lines`` too).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rlplex.errors import ConfigError
from rlplex.timeline.importers import openrlhf
from rlplex.timeline.importers.base import Collector, RecordedRun, check_record_path
from rlplex.timeline.importers.nemo_rl import PREFIX as NEMO_RL_PREFIX
from rlplex.timeline.importers.nemo_rl import add_timing
from rlplex.timeline.importers.verl import TIMING_PREFIXES, add_metric, parse_number

FORMAT = "history"
STEP_COLUMNS = ("_step", "step", "global_step", "training/global_step", openrlhf.STEP_COLUMN)
"""Names of the step column, in order of preference, compared in lower case (the panel
export's is ``Step``); an OpenRLHF history's is ``train/global_step`` whatever else it has."""
BAND_SUFFIXES = ("__MIN", "__MAX")
"""A panel export's band of a grouped line: not a value of the run."""
RUN_SEPARATOR = " - "
"""A panel export names each column ``<run name> - <metric>``."""
SUFFIX = ".csv"
NOT_THE_STEPS = ("timing/validation/", "timing/setup/")
"""NeMo RL's timings of validation and of the run's setup: kept as metrics, not read as
the step's (nor as verl's pre-2025 ``timing/NAME`` keys)."""
MISSING = frozenset({"", "nan", "none", "null"})
"""Cells that hold no value (lower case): pandas writes a missing value as an empty cell,
or as its ``na_rep`` (``NaN``); a dump of Python dicts writes ``None``."""


def _rows(path: str | Path) -> Iterator[tuple[int, list[str], bool]]:
    """(line number, cells, is_last) of each row with a non-blank cell, one row of look-ahead.

    The line number is the row's last line (a quoted cell may span lines).

    Raises:
        ConfigError: unreadable, or a row the CSV reader refuses (a NUL byte, a cell over
            its size limit).
    """
    path = check_record_path(path)
    pending: tuple[int, list[str]] | None = None
    # utf-8-sig: a spreadsheet's export starts with a byte-order mark, not part of the name.
    try:
        with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
            reader = csv.reader(handle)
            try:
                for cells in reader:
                    if not "".join(cells).strip():
                        continue
                    if pending is not None:
                        yield pending[0], pending[1], False
                    pending = (reader.line_num, cells)
            except csv.Error as exc:
                raise ConfigError(
                    f"not a CSV row: {exc}", file=str(path), line=reader.line_num
                ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=str(path)) from None
    if pending is not None:
        yield pending[0], pending[1], True


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


RUN_NAME_COLUMN = "name"
"""A wandb runs table's column of run names (``Name``, compared in lower case)."""


RUN_COLUMNS = frozenset(
    {"state", "notes", "user", "tags", "created", "runtime", "sweep", "id", "end time", "updated"}
)
"""A wandb runs table's columns about each run (lower case), beside ``Name``: its export
starts ``"Name","State","Notes","User","Tags","Created","Runtime","Sweep"`` by default (or
with ``ID``, ``End Time``, ``Updated`` shown), then the config and summary columns."""


def is_runs_table_header(cells: list[str]) -> bool:
    """Whether a CSV's first row is a wandb runs table's header (one row per run, each
    metric's summary value): ``Name`` first or beside a run column (:data:`RUN_COLUMNS`), or
    beside metric columns and no step column.

    A run's summary holds its step counters too (verl logs ``training/global_step``; a
    summary's ``_step``): a step column among the run columns does not make a runs table a
    history, whose exports have no ``Name`` (``_step`` and the metrics; a panel's ``Step``
    and ``<run> - <metric>``).
    """
    names = [c.strip().lower() for c in cells]
    if len(names) < 2 or RUN_NAME_COLUMN not in names:
        return False
    if names[0] == RUN_NAME_COLUMN or RUN_COLUMNS.intersection(names):
        return True
    return len(names) > 2 and not any(n in STEP_COLUMNS for n in names)


def is_history_header(cells: list[str]) -> bool:
    """Whether a CSV's first row is a per-step history's header, not a summary's row.

    A summary is two columns (``metric,value``, or a first figure such as
    ``timing_s/gen,22.1``) or a wandb runs table (:func:`is_runs_table_header`); a history
    has more columns, or a step column beside a name (``_step,timing_s/gen``).
    """
    names = [c.strip() for c in cells]
    if is_runs_table_header(names):
        return False
    if len(names) > 2:
        return True
    return any(n.lower() in STEP_COLUMNS for n in names) and not any(map(_is_number, names))


def looks_like_history(path: str | Path) -> bool:
    """Whether ``path`` is a per-step CSV history: a ``.csv`` file whose header says so."""
    path = Path(path)
    if path.suffix.lower() != SUFFIX:
        return False
    rows = _rows(path)
    try:
        first = next(rows, None)
    except ConfigError:
        return False
    finally:
        rows.close()
    return first is not None and is_history_header(first[1])


@dataclass(frozen=True)
class Columns:
    """What each column of a history's header holds."""

    step: int
    """The step column's index."""
    metrics: dict[int, str]
    """Index -> metric key (a panel's run prefix stripped), for every column read."""
    names: tuple[str, ...]
    """The header as written, to name a column in errors."""
    openrlhf_timers: tuple[int, ...] = ()
    """Indices of OpenRLHF's ``train/timing/`` columns: a row with none of them filled is
    not a step's (the samples table's, an evaluation's row) and is skipped."""


def read_columns(header: list[str], file: str) -> Columns:
    """The header's step column and metric columns.

    Raises:
        ConfigError: no step column, a panel export of several runs, a metric named
            twice, or no ``timing_s/`` column.
    """
    names = tuple(c.strip() for c in header)
    lowered = [n.lower() for n in names]
    if is_runs_table_header(list(names)):
        # Its step columns are each run's last step: read as a history, each run a step.
        raise ConfigError(
            "is a wandb runs table (a 'Name' column: one row per run, each metric's summary"
            " value), not a per-step history: give it without --format history (a summary"
            " record of one run), or export the run's history or a line plot panel",
            file=file,
            line=1,
            value=",".join(names)[:120],
        )
    # OpenRLHF's step is train/global_step: its wandb _step counts every wandb.log call.
    is_openrlhf = any(openrlhf.TIMING_COLUMN in n for n in lowered)
    preferred = (openrlhf.STEP_COLUMN, *STEP_COLUMNS) if is_openrlhf else STEP_COLUMNS
    step = next((lowered.index(s) for s in preferred if s in lowered), None)
    if step is None:
        raise ConfigError(
            f"a per-step CSV history needs a step column ({', '.join(STEP_COLUMNS)})",
            file=file,
            line=1,
            value=",".join(names)[:120],
        )
    kept = {
        i: name
        for i, name in enumerate(names)
        if i != step and name and not name.startswith("_") and not name.endswith(BAND_SUFFIXES)
    }
    if kept and all(RUN_SEPARATOR in name for name in kept.values()):
        # A panel export prefixes every line with its run; a metric name rarely holds " - ",
        # a run name may, so the prefix runs to the last one.
        split = {i: name.rpartition(RUN_SEPARATOR) for i, name in kept.items()}
        runs = list(dict.fromkeys(parts[0] for parts in split.values()))
        if len(runs) > 1:
            raise ConfigError(
                f"a chart export of {len(runs)} runs ("
                + ", ".join(repr(r) for r in runs)
                + "): rlplex reads one run's steps; export the chart with one run shown",
                file=file,
                line=1,
            )
        kept = {i: p[2] for i, p in split.items() if not p[2].startswith("_")}
    first: dict[str, int] = {}
    for i, key in kept.items():
        if key in first:
            raise ConfigError(
                f"names the metric {key!r} of column {first[key] + 1} again",
                field=names[i],
                file=file,
                line=1,
            )
        first[key] = i
    timing = (*TIMING_PREFIXES, openrlhf.TIMING_COLUMN)
    if not any(key.startswith(timing) for key in kept.values()):
        raise ConfigError(
            "no timing column (verl's timing_s/gen, timing_s/update_actor, ... timing_s/step;"
            " NeMo RL's timing/train/generation, ... timing/train/total_step_time;"
            " OpenRLHF's train/timing/generation, ... train/timing/step_total):"
            " nothing to replay or calibrate",
            file=file,
            line=1,
            value=",".join(names)[:120],
        )
    timers = tuple(i for i, key in kept.items() if key.startswith(openrlhf.TIMING_COLUMN))
    return Columns(step=step, metrics=kept, names=names, openrlhf_timers=timers)


def add_value(
    out: Collector,
    step: int,
    key: str,
    value: int | float,
    reading: openrlhf.StepReading = openrlhf.StepReading(),
) -> None:
    """One cell: NeMo RL's ``timing/train/`` timers by its mapping, its validation and setup
    timings as metrics, OpenRLHF's ``train/timing/`` timers by its mapping (``reading``:
    what the row's other values say of them), every other key as verl's reading of it
    (:func:`add_metric`)."""
    if key.startswith(openrlhf.TIMING_COLUMN):
        openrlhf.add_timing(out, step, key[len(openrlhf.TIMING_COLUMN) :], value, reading)
    elif key.startswith(NEMO_RL_PREFIX):
        add_timing(out, step, key[len(NEMO_RL_PREFIX) :], value)
    elif key.startswith(NOT_THE_STEPS):
        out.metric(step, key, value)
    else:
        add_metric(out, step, key, value)


def _openrlhf_row(columns: Columns, cells: list[str]) -> dict[str, float]:
    """An OpenRLHF row's timers and losses that hold a number (wandb key -> value)."""
    wanted = (openrlhf.TIMING_COLUMN, openrlhf.ACTOR_LOSS, openrlhf.CRITIC_LOSS)
    row: dict[str, float] = {}
    for index, key in columns.metrics.items():
        raw = cells[index].strip()
        if key.startswith(wanted) and raw.lower() not in MISSING:
            value = parse_number(raw)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[key] = float(value)
    return row


def openrlhf_warnings(out: Collector, frozen: list[int], waited: list[int]) -> None:
    """Say which OpenRLHF steps were read otherwise than the table says."""
    if frozen:
        out.warnings.append(
            f"steps {_steps(frozen)}: {openrlhf.CRITIC_LOSS} without {openrlhf.ACTOR_LOSS}"
            " (the actor frozen, --critic.freezing_steps): train/timing/ppo_train read as"
            " critic_train alone"
        )
    if waited:
        out.warnings.append(
            f"steps {_steps(waited)}: train/timing/step_total is not the sum of the other"
            " timers (OpenRLHF's async trainer): its train/timing/broadcast includes the"
            " wait for the engines' lock that generation holds, kept as a metric, and"
            " weight_sync is replayed from the config"
        )


def _steps(steps: list[int]) -> str:
    shown = ", ".join(map(str, steps[:5]))
    return shown + (f" and {len(steps) - 5} more" if len(steps) > 5 else "")


def _step_number(text: str) -> int | None:
    """A whole step number >= 0 (pandas writes ``3.0`` for a column with gaps), or None."""
    value = parse_number(text)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 0 else None


def import_history(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read a per-step CSV history (a wandb export) into a :class:`RecordedRun`.

    Raises:
        ConfigError: a bad header or cell (see the module docstring), naming the
            file, the line, the column and the cell.
    """
    file = str(path)
    out = Collector(FORMAT, file, skip_bad_lines)
    rows = _rows(path)
    first = next(rows, None)
    if first is None:
        raise ConfigError("is empty: expected a header of metric names", file=file)
    columns = read_columns(first[1], file)
    width, names = len(columns.names), columns.names
    step_name = names[columns.step]
    # Column -> the first line with a number in it; column -> its first text cell (line,
    # text) while it has no number: a column of text (media, notes) is not read, a text
    # cell among numbers is an error, whichever comes first.
    numeric: dict[int, int] = {}
    text_at: dict[int, tuple[int, str]] = {}
    frozen: list[int] = []  # OpenRLHF steps whose actor did not train
    waited: list[int] = []  # OpenRLHF steps timed by the async trainer
    for number, cells, is_last in rows:
        out.at(number, ",".join(cells), is_last)
        if len(cells) != width:
            out.bad_line(
                number,
                f"a row of {len(cells)} cells under a header of {width}",
                ",".join(cells),
                is_last and len(cells) < width,
            )
            continue
        if columns.openrlhf_timers and all(
            cells[i].strip().lower() in MISSING for i in columns.openrlhf_timers
        ):
            continue  # OpenRLHF's samples table or an evaluation: no step's timings
        raw_step = cells[columns.step].strip()
        out.at(number, raw_step, is_last, step_name)
        step = _step_number(raw_step)
        if step is None:
            out.bad_line(number, "expected a whole step number >= 0", raw_step, False)
            continue
        if not out.first_time(step, f"step {step}"):
            continue
        reading = openrlhf.StepReading()
        if columns.openrlhf_timers:
            reading = openrlhf.step_reading(_openrlhf_row(columns, cells))
            if reading.actor_frozen:
                frozen.append(step)
            if reading.waited:
                waited.append(step)
        for index, key in columns.metrics.items():
            raw = cells[index].strip()
            if raw.lower() in MISSING:
                continue  # not logged on this step
            out.at(number, raw, False, names[index])
            value = parse_number(raw)
            if value is None:
                if index in numeric:
                    out.bad_line(
                        number,
                        f"text in a column of numbers (a number on line {numeric[index]})",
                        raw,
                        False,
                    )
                else:
                    text_at.setdefault(index, (number, raw))
                continue
            if index in text_at:
                line, text = text_at.pop(index)
                out.at(line, text, False, names[index])
                out.bad_line(
                    line, f"text in a column of numbers (a number on line {number})", text,
                    False,
                )  # fmt: skip
                out.at(number, raw, False, names[index])
            numeric.setdefault(index, number)
            add_value(out, step, key, value, reading)
    openrlhf_warnings(out, frozen, waited)
    if not out.steps and not out.step_s:
        if out.unknown:  # timings there are, under names that are not verl's
            unknown = sorted(out.unknown)
            raise ConfigError(
                "no column is a stage or step time verl, NeMo RL or OpenRLHF logs"
                " (timing_s/gen, ... timing_s/step; timing/train/generation, ..."
                " timing/train/total_step_time; train/timing/generation, ..."
                " train/timing/step_total; docs/record.md): "
                + ", ".join(unknown[:6])
                + (f" and {len(unknown) - 6} more" if len(unknown) > 6 else "")
                + " name no rlplex stage (another framework's timers: a summary record"
                " with a stages: mapping)",
                file=file,
            )
        raise ConfigError(
            "no row has a timing value (every timing cell is empty)",
            file=file,
        )
    return out.result()
