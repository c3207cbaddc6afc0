"""Import a summary record: per-stage mean seconds and lengths, as a paper or wandb gives them.

Published runs seldom come with their logs: a framework's documentation, a
paper or a wandb panel gives each phase's mean seconds over some steps and the
response length's mean, max and clip ratio. A summary record writes those
figures down, so that ``rlplex calibrate`` (and ``replay``) take them like a
log. YAML or JSON::

    framework: verl          # verl: timing names as verl logs them (gen, old_log_prob,
                             # update_actor, ...); nemo_rl: as NeMo RL does (generation,
                             # policy_training, total_step_time ...); openrlhf: as
                             # OpenRLHF does (generation, make_experience, ppo_train,
                             # broadcast, step_total); rlplex: stage names
    steps: 20                # how many steps the means are over (informative)
    timing_s: {gen: 22.2, ref: 4.34, values: 5.88, adv: 0.11,
               update_critic: 15.7, update_actor: 20.4, step: 69.3}
    response_length: {mean: 210, max: 512, clip_ratio: 0.02}
    prompt_length: {mean: 120, max: 512}
    stages: {generate_sequences: generate}   # optional: more names -> rlplex stages

Keys may also be written flat, as verl and wandb name them
(``timing_s/gen: 22.2``, ``response_length/mean: 210``). A CSV file holds two
columns, ``metric,value`` (a header row of those two words is optional), with
the flat keys; a CSV of one column per metric and one row per step (wandb's
export of a run) is a per-step history instead (:mod:`.history`).

The record becomes a :class:`RecordedRun` of ONE step (step 1): each timing is
mapped to its rlplex stage (verl's names by :data:`rlplex.timeline.importers.verl.STAGES`),
``step`` is the recorded step time, and every length figure stays in the step's
metrics under verl's key (``response_length/mean``), so that whatever reads a
verl log's lengths reads these. Bad values (a negative or non-numeric time, a
clip ratio outside [0, 1], an unknown framework) are errors naming the file,
the key and the value.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError
from rlplex.resources.yaml_io import load_yaml_text, read_text_bounded
from rlplex.timeline.importers import nemo_rl, openrlhf
from rlplex.timeline.importers.base import (
    RecordedRun,
    check_record_path,
    joint_key,
    max_record_bytes,
)
from rlplex.timeline.importers.history import (
    MISSING,
    RUN_NAME_COLUMN,
    is_runs_table_header,
    looks_like_history,
)
from rlplex.timeline.importers.verl import STAGES as VERL_STAGES
from rlplex.timeline.importers.verl import TIMING_PREFIXES

FRAMEWORKS = ("verl", "nemo_rl", "openrlhf", "rlplex")
"""How the timing names are read: as verl, NeMo RL or OpenRLHF logs them, or as rlplex
stage names."""
SUFFIXES = (".yaml", ".yml", ".csv")
"""File names that are summary records whatever their content."""
LENGTH_KEYS = ("response_length", "prompt_length")
_LENGTH_FIELDS = ("mean", "max", "min", "clip_ratio")
_MAX_SUMMARY_BYTES = 2**20
"""A summary is a few lines; a larger JSON file is not one (detection reads no further)."""


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name != "stages":
            flat.update(_flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def looks_like_summary(path: str | Path) -> bool:
    """Whether ``path`` is a summary record: by its suffix, or a small JSON object of timings."""
    path = Path(path)
    if path.suffix.lower() in SUFFIXES:
        # A CSV of one column per metric is a per-step history, not a summary.
        return not looks_like_history(path)
    try:
        if path.stat().st_size > _MAX_SUMMARY_BYTES:
            return False
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return False
    if not text.startswith("{"):
        return False
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    if not isinstance(obj, dict) or "data" in obj:
        return False
    return "timing_s" in obj or any(str(k).startswith("timing_s/") for k in obj)


def _read_csv(text: str, file: str) -> dict[str, Any]:
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if header is not None and is_runs_table_header(header):
        return _read_runs_table(header, rows, file)
    data: dict[str, Any] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 2:
            # The first row wider than two: a per-step history read as a summary (forced).
            hint = "; a per-step history is --format history" if number == 1 else ""
            raise ConfigError(
                f"a summary CSV row is 'metric,value', got {len(row)} columns{hint}",
                file=file,
                line=number,
                value=",".join(row)[:120],
            )
        key, raw = row[0].strip(), row[1].strip()
        if number == 1 and (key.lower(), raw.lower()) == ("metric", "value"):
            continue
        if key in data:
            raise ConfigError(f"metric {key!r} appears twice", file=file, line=number)
        data[key] = _cell_value(raw)
    return data


def _cell_value(raw: str) -> Any:
    """A CSV cell as the number it spells (an int, else a float), else the text."""
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    return raw


def _read_runs_table(header: list[str], rows: Iterator[list[str]], file: str) -> dict[str, Any]:
    """The one run of a wandb runs table's CSV export as flat keys: each metric column's
    value (wandb's run summary: the metric's last logged value unless the project defines
    another), ``run/name`` its ``Name``; empty cells (not logged) left out.

    Raises:
        ConfigError: no run, or several (naming them: filter the table to one), a row wider
            than the header, or a column named twice.
    """
    names = [c.strip() for c in header]
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name and name in seen:
            raise ConfigError(
                f"names the column {name!r} of column {seen[name] + 1} again",
                file=file, line=1,
            )  # fmt: skip
        seen[name] = i
    runs = [(n, r) for n, r in enumerate(rows, start=2) if r and "".join(r).strip()]
    column = [n.lower() for n in names].index(RUN_NAME_COLUMN)
    if len(runs) != 1:
        listed = ", ".join(repr(r[column]) for _, r in runs[:5] if len(r) > column)
        more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
        raise ConfigError(
            f"a wandb runs table of {len(runs)} runs"
            + (f" ({listed}{more})" if runs else "")
            + ": rlplex reads one run's figures; filter the table to one run before exporting",
            file=file,
        )
    line, row = runs[0]
    if len(row) > len(names):
        raise ConfigError(f"has {len(row)} cells, the header {len(names)}", file=file, line=line)
    data: dict[str, Any] = {}
    for i, cell in enumerate(row):
        key, raw = names[i], cell.strip()
        if i == column:
            data["run/name"] = raw
            continue
        if not key or raw.lower() in MISSING:
            continue
        data[key] = _cell_value(raw)
    return data


def read_summary(path: str | Path) -> dict[str, Any]:
    """The record's figures as flat keys (``timing_s/gen``), and ``stages`` as a mapping.

    Raises:
        ConfigError: unreadable, not a mapping, or a CSV row that is not two columns.
    """
    file = str(path)
    text = read_text_bounded(check_record_path(path), max_record_bytes(), "summary record")
    if Path(path).suffix.lower() == ".csv":
        data = _read_csv(text, file)
    else:
        data = load_yaml_text(text, file)  # JSON is YAML
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            "a summary record is a mapping (framework, timing_s, response_length, ...)",
            file=file,
        )
    flat = _flatten(data)
    stages = flat.get("stages", {})
    if isinstance(stages, Mapping):
        flat["stages"] = dict(stages)
    for key in [k for k in flat if k.startswith("stages/")]:
        flat.setdefault("stages", {})[key.removeprefix("stages/")] = flat.pop(key)
    return flat


def _number(value: Any, key: str, file: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError("must be a finite number", field=key, value=value, file=file)
    return float(value)


def _check_length(key: str, value: float, file: str) -> None:
    field = key.rpartition("/")[2]
    if field == "clip_ratio" and not 0.0 <= value <= 1.0:
        raise ConfigError(
            "is the share of responses cut at the maximum length: between 0 and 1",
            field=key,
            value=value,
            file=file,
        )
    if field in ("mean", "max") and value <= 0:
        raise ConfigError("must be > 0 tokens", field=key, value=value, file=file)


def _check_ordered_lengths(metrics: Mapping[str, Any], file: str) -> None:
    """A length's min <= mean <= max: a summary with them out of order (a mean above the
    max) was read and fitted (the native workload refuses the same)."""
    for key in LENGTH_KEYS:
        low, mean, high = (metrics.get(f"{key}/{f}") for f in ("min", "mean", "max"))
        if mean is not None and high is not None and mean > high:
            raise ConfigError(
                f"is above {key}/max ({high:g})", field=f"{key}/mean", value=mean, file=file
            )
        if low is not None and mean is not None and low > mean:
            raise ConfigError(
                f"is above {key}/mean ({mean:g})", field=f"{key}/min", value=low, file=file
            )


def _async_broadcast(
    stages: dict[str, float], total: float, metrics: dict[str, Any], warnings: list[str]
) -> None:
    """OpenRLHF's async trainer: a ``step_total`` that is not the sum of the other timers
    (:func:`rlplex.timeline.importers.openrlhf.step_reading`) makes ``broadcast`` its wait
    for the engines' lock and the sync, kept as a metric instead of ``weight_sync``."""
    row = {openrlhf.TIMING_COLUMN + openrlhf.TOTAL: total}
    for name, key in (
        ("broadcast", "weight_sync"),
        *((n, joint_key(m)) for n, m in openrlhf.JOINT.items()),
    ):
        if key in stages:
            row[openrlhf.TIMING_COLUMN + name] = stages[key]
    if openrlhf.step_reading(row).waited:
        metrics["timing/broadcast"] = stages.pop("weight_sync")
        warnings.append(
            "step_total is not the sum of the other timers (OpenRLHF's async trainer): its"
            " broadcast includes the wait for the engines' lock that generation holds, kept"
            " as a metric, and weight_sync is replayed from the config"
        )


def import_summary(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read a summary record (YAML, JSON or CSV) into a one-step :class:`RecordedRun`.

    ``skip_bad_lines`` is accepted for the importers' common signature; a
    summary has no lines to skip.

    Raises:
        ConfigError: a bad value, naming the file, the key and the value.
    """
    del skip_bad_lines
    file = str(path)
    flat = read_summary(path)
    # A wandb runs table has no framework column: OpenRLHF's train/timing/ columns say it.
    logged_by = (
        "openrlhf" if any(str(k).startswith(openrlhf.TIMING_COLUMN) for k in flat) else "verl"
    )
    framework = flat.pop("framework", logged_by)
    if framework not in FRAMEWORKS:
        raise ConfigError(
            f"must be one of: {', '.join(FRAMEWORKS)} (how the timing names are read)",
            field="framework",
            value=framework,
            file=file,
        )
    steps_over = flat.pop("steps", None)
    if steps_over is not None and (
        isinstance(steps_over, bool) or not isinstance(steps_over, int) or steps_over < 1
    ):
        raise ConfigError("must be a whole number of steps >= 1", field="steps",
                          value=steps_over, file=file)  # fmt: skip
    extra = flat.pop("stages", {}) or {}
    if not isinstance(extra, Mapping) or not all(isinstance(v, str) for v in extra.values()):
        raise ConfigError("must map timing names to rlplex stage names", field="stages",
                          value=extra, file=file)  # fmt: skip
    own = {"verl": VERL_STAGES, "nemo_rl": nemo_rl.STAGES, "openrlhf": openrlhf.STAGES}
    names = {**own.get(framework, {}), **extra}
    # NeMo RL's and OpenRLHF's timers that span several stages (NeMo RL's generation holds
    # the scoring, its log-prob timer both passes; OpenRLHF's make_experience every scoring
    # pass and the advantages), divided where the record meets a config.
    joints = {"nemo_rl": nemo_rl.JOINT, "openrlhf": openrlhf.JOINT}.get(framework, {})
    concurrent = openrlhf.CONCURRENT if framework == "openrlhf" else frozenset()
    joint: dict[str, tuple[str, ...]] = {}
    side_by_side: set[str] = set()
    stages: dict[str, float] = {}
    step_s: dict[int, float] = {}
    metrics: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in flat.items():
        if framework == "openrlhf" and key.startswith(openrlhf.TIMING_COLUMN):
            # wandb's name of the timer (a runs table's column): train/timing/NAME.
            key = key.removeprefix(openrlhf.WANDB_PREFIX)
        prefix = next((p for p in TIMING_PREFIXES if key.startswith(p)), None)
        if prefix is not None:
            seconds = _number(value, key, file)
            if seconds < 0:
                raise ConfigError("must be >= 0 seconds", field=key, value=value, file=file)
            name = key[len(prefix) :]
            if framework == "nemo_rl":  # wandb's timing/train/NAME, or timing_s: {NAME: ...}
                name = name.removeprefix("train/")
                name = "step" if name == nemo_rl.TOTAL else name
            if framework == "openrlhf" and name == openrlhf.TOTAL:
                name = "step"
            if name == "step":
                step_s[1] = seconds
                continue
            if name in joints and name not in extra:
                members = joints[name]
                joint[joint_key(members)] = members
                if name in concurrent:
                    side_by_side.add(joint_key(members))
                stages[joint_key(members)] = stages.get(joint_key(members), 0.0) + seconds
                continue
            stage = names.get(name, name if framework == "rlplex" else None)
            if stage is None:
                unknown.append(key)
                metrics[key] = seconds
                continue
            stages[stage] = stages.get(stage, 0.0) + seconds
            continue
        if key.partition("/")[0] in LENGTH_KEYS:
            if key.rpartition("/")[2] not in _LENGTH_FIELDS:
                raise ConfigError(
                    f"unknown length figure (expected one of: {', '.join(_LENGTH_FIELDS)})",
                    field=key,
                    value=value,
                    file=file,
                )
            number = _number(value, key, file)
            _check_length(key, number, file)
            metrics[key] = number
            continue
        metrics[key] = value
    _check_ordered_lengths(metrics, file)
    warnings: list[str] = []
    if framework == "openrlhf" and "weight_sync" in stages and 1 in step_s:
        _async_broadcast(stages, step_s[1], metrics, warnings)
    if not stages and not step_s:
        raise ConfigError(
            "has no timings: give timing_s: {STAGE: seconds, ..., step: seconds}",
            field="timing_s",
            file=file,
        )
    if "run/name" in metrics:
        warnings.append(
            f"a wandb runs table (run {metrics['run/name']!r}): each figure is the run's"
            " summary value, by wandb's default the last step's, not a mean over steps"
        )
    if unknown:
        warnings.append(
            "timing keys with no rlplex stage (kept in metrics; map them with stages:): "
            + ", ".join(sorted(unknown))
        )
    if steps_over is not None:
        metrics["summary/steps"] = steps_over
    metrics["summary/framework"] = framework
    return RecordedRun(
        format="summary",
        source=file,
        steps={1: stages} if stages else {},
        step_s=step_s,
        joint=joint,
        concurrent=tuple(sorted(side_by_side)),
        metrics={1: metrics},
        unknown_keys=tuple(sorted(unknown)),
        warnings=tuple(warnings),
    )
