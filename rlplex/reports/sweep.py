"""Sensitivity of the planned step to one config value nobody knows before launch.

Before a run, the mean response length (or the batch, or a parallel size) is a
guess. ``rlplex estimate CONFIG --sweep KEY=V1,V2,...`` re-loads the config
with ``--set KEY=V`` for each value (the same override machinery as ``--set``),
re-estimates what the config leaves to the estimator, plans it, and returns the
planned step (the period) and each stage's seconds against the swept value.
Values are numbers (a length, a GPU count) or, all of them, words (a GPU preset,
a model, ``true``/``false``): the points then keep their texts, in the order given.

:func:`parse_sweep` checks the option (a key the config has, two or more
distinct values, numbers and words not mixed) and raises a
:class:`~rlplex.errors.ConfigError` naming the key and the value otherwise;
:func:`sweep_config` does the work. A value at which the config does not load
(it does not fit on the GPUs, say) becomes a point with its error, so that the
rest of the range is still reported; a value the swept field itself refuses (a
negative floor, a share above 1) is the user's error and refuses the whole sweep.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from rlplex.config import Config, load_config, raw_file
from rlplex.config.loading import env_for
from rlplex.errors import ConfigError, InvalidValueError
from rlplex.estimate.context import planned_warnings

SWEEP_FIELD = "--sweep"


class SweepPoint(BaseModel):
    """The plan at one value of the swept key."""

    model_config = ConfigDict(frozen=True)

    value: float | str
    """The swept key's value: a number, or the text of a word value (``h20``)."""
    period_s: float | None = None
    """The planned step (period); None when the config does not load at this value."""
    stages: dict[str, float] = {}
    """Each stage's seconds as the plan uses them (dispatch excluded)."""
    error: str | None = None
    """Why the config does not load at this value (it does not fit, ...)."""


class Sweep(BaseModel):
    """The planned step and stage seconds of a config over the values of one key."""

    model_config = ConfigDict(frozen=True)

    config: str
    """The config file swept, as given."""
    key: str
    """The dotted config key swept (``workload.response_tokens.mean``)."""
    points: tuple[SweepPoint, ...]
    """One plan per value, in the order given (a value where the config does not load keeps
    its error)."""
    warnings: tuple[str, ...] = ()
    """The warnings every point that loads gives, once (an imported file's default stage
    costs, a model matched to a preset, its guessed mean response length unless the sweep
    sets it), for stderr: a sweep of a key that the defaults do not read would otherwise be
    a flat line with nothing saying why."""

    @property
    def stage_names(self) -> tuple[str, ...]:
        names: dict[str, None] = {}
        for point in self.points:
            names.update(dict.fromkeys(point.stages))
        return tuple(names)

    def period_range(self) -> tuple[float, float] | None:
        """(smallest, largest) planned step over the points that load; None if none does."""
        periods = [p.period_s for p in self.points if p.period_s is not None]
        return (min(periods), max(periods)) if periods else None

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "key": self.key,
            "points": [p.model_dump() for p in self.points],
            "warnings": list(self.warnings),
        }


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _non_finite(text: str) -> bool:
    """A numeral that is not a finite number (``nan``, ``inf``, ``1e999``)."""
    try:
        return not math.isfinite(float(text))
    except ValueError:
        return False


def is_numeric(texts: Sequence[str]) -> bool:
    """Whether the swept values are numbers (else they are words, all of them)."""
    return all(_number(t) is not None for t in texts)


def parse_sweep(spec: str) -> tuple[str, tuple[str, ...]]:
    """``KEY=V1,V2,...`` as (key, value texts): numbers, or words (``cluster.gpu=h100,h20``).

    Raises:
        ConfigError: no ``=``, an empty key, an empty value, a value that is not
            a finite number among numbers (``nan``), numbers and words mixed, or
            fewer than two distinct values (naming the key and value).
    """
    key, sep, raw = spec.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(
            "must look like KEY=V1,V2,... (a dotted config key and two or more values)",
            field=SWEEP_FIELD,
            value=spec,
        )
    texts = tuple(t.strip() for t in raw.split(","))
    for text in texts:
        if not text or _non_finite(text):
            raise ConfigError(
                f"{key}: {text!r} is not a number (give KEY=V1,V2,... with finite numbers,"
                " or words)",
                field=SWEEP_FIELD,
                value=spec,
            )
    numbers = [_number(t) for t in texts]
    if any(n is None for n in numbers) and any(n is not None for n in numbers):
        word = next(t for t, n in zip(texts, numbers, strict=True) if n is None)
        raise ConfigError(
            f"{key}: {word!r} is not a number, and the other values are (sweep numbers, or"
            " words, not both)",
            field=SWEEP_FIELD,
            value=spec,
        )
    distinct = {float(n) for n in numbers if n is not None} or {t.lower() for t in texts}
    if len(distinct) < 2:
        raise ConfigError(
            f"{key}: a sweep needs two or more distinct values, got {raw!r}",
            field=SWEEP_FIELD,
            value=spec,
        )
    return key, texts


def _lookup(node: Any, parts: Sequence[str]) -> bool:
    """Whether the dotted path ``parts`` names something in ``node`` (dicts, models, stages)."""
    for part in parts:
        if isinstance(node, Mapping):
            if part not in node:
                return False
            node = node[part]
            continue
        if isinstance(node, tuple) and node and all(hasattr(n, "name") for n in node):
            match = [n for n in node if n.name == part]
            if not match:
                return False
            node = match[0]
            continue
        model = node if isinstance(node, type) else type(node)
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return False
        value = getattr(node, part, None) if not isinstance(node, type) else None
        # An optional section left out (``efficiency:``) still has its fields, with defaults:
        # walk its model class instead.
        node = value if value is not None else _model_class(fields[part].annotation) or value
    return True


def _model_class(annotation: Any) -> type | None:
    """The pydantic model in a field's annotation (``Efficiency | None`` -> ``Efficiency``)."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
            return candidate
    return None


def check_key(
    path: str | Path, key: str, config: Config | None, env: Mapping[str, str] | None = None
) -> None:
    """Refuse a sweep key that names nothing in the file nor in the loaded config (``env``:
    the variables a launch script starts with, ``--env``).

    ``--set`` creates missing keys (it may add a field the file leaves to its
    default); a sweep of a misspelt key would otherwise give a flat line.

    Raises:
        ConfigError: naming the key.
    """
    parts = key.split(".")
    try:
        # a launch script's Hydra file with its overrides, composed
        raw = raw_file(path, env=env_for(path, env))
    except ConfigError:
        raw = None
    if (isinstance(raw, dict) and _lookup(raw, parts)) or (
        config is not None and _lookup(config, parts)
    ):
        return
    raise ConfigError(
        f"{key}: the config has no such field (a dotted key such as workload.response_tokens.mean)",
        field=SWEEP_FIELD,
        value=key,
        file=str(path),
    )


def _refuse_invalid(error: ConfigError, key: str) -> None:
    """Re-raise a swept value its own field refuses (a negative floor, a share above 1): the
    sweep asked for something no config can be, unlike a value at which the run does not fit."""
    if isinstance(error, InvalidValueError) and error.field == key:
        raise error


def plan_point(config: Config) -> tuple[float, dict[str, float]]:
    """(planned period, each stage's seconds as the plan uses them) of a loaded config.

    The stages are priced from the config the plan was made from, on the plan's devices
    (:func:`~rlplex.plan.plan_with_config`): of a ``devices: auto`` config the loaded one
    has no devices for its auto roles and the whole cluster's estimates (a generation of
    39.36 s shown beside the period of a plan that runs it in 41.97 s on 8 of 16 GPUs).
    """
    from rlplex.plan import plan_with_config
    from rlplex.plan.costs import stage_work_seconds

    planned, plan = plan_with_config(config)
    placement = {r: tuple(d) for r, d in plan.placement.items()}
    stages = {s.name: stage_work_seconds(planned, s, placement) for s in planned.pipeline.stages}
    return plan.period_s, stages


def sweep_config(
    path: str | Path,
    key: str,
    values: Sequence[str],
    *,
    overrides: Sequence[str] = (),
    format: str | None = None,
    costs: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Sweep:
    """Plan ``path`` with ``--set KEY=V`` (after ``overrides``) for each value; ``env``: the
    variables a launch script starts with (``--env``).

    The config as written need not load (a model too large for its GPUs may be
    what the sweep is for); each value's failure is its point's error.

    Raises:
        ConfigError: the key names nothing in the config (checked on the file
            and on the config as loaded with ``overrides``, before any value is
            applied); when the config does not load as written and the file
            lacks the key, the loader's own error; an
            :class:`~rlplex.errors.InvalidValueError` when the key's own field
            refuses one of the values.
    """
    try:
        base: Config | None = load_config(
            path, overrides=overrides, format=format, costs=costs, env=env
        )
        failure = None
    except ConfigError as exc:
        base, failure = None, exc
    try:
        check_key(path, key, base, env)
    except ConfigError:
        if failure is not None:
            raise failure from None
        raise
    numeric = is_numeric(values)
    points = []
    # The points' own warnings, not the config's as written: a swept GPU preset gives a file
    # without one its estimates, and the defaults warning would then be wrong.
    shared: list[str] | None = None
    for text in values:
        value: float | str = float(text) if numeric else text
        try:
            cfg = load_config(
                path, overrides=(*overrides, f"{key}={text}"), format=format, costs=costs,
                env=env,
            )  # fmt: skip
            period, stages = plan_point(cfg)
        except ConfigError as exc:
            _refuse_invalid(exc, key)
            points.append(SweepPoint(value=value, error=str(exc)))
            continue
        # What holds at every value holds for the sweep; what one value alone says is that
        # point's business (its figures show it).
        shared = list(cfg.warnings) if shared is None else [w for w in shared if w in cfg.warnings]
        points.append(SweepPoint(value=value, period_s=period, stages=stages))
    # Each point's figures are its plan's: a role the search places is estimated there.
    return Sweep(
        config=str(path), key=key, points=tuple(points),
        warnings=tuple(planned_warnings(shared or ())),
    )  # fmt: skip


class WhatIfPoint(BaseModel):
    """``whatif`` at one value of the swept key."""

    model_config = ConfigDict(frozen=True)

    value: float | str
    """The swept key's value: a number, or the text of a word value (``h20``)."""
    periods: dict[str, float | None] = {}
    """Predicted period of each alternative (and of the recorded config), by label."""
    best: str | None = None
    """The fastest alternative other than the recorded config; None if none can run."""
    error: str | None = None
    """Why what-if failed at this value."""


class WhatIfSweep(BaseModel):
    """Whether ``whatif``'s best alternative stays best over a swept key."""

    model_config = ConfigDict(frozen=True)

    key: str
    """The dotted config key swept, on the recorded config and every alternative from it."""
    baseline: str
    """The recorded config's label."""
    points: tuple[WhatIfPoint, ...]
    """One what-if per value, in the order given (a value where it fails keeps its error)."""
    warnings: tuple[str, ...] = ()
    """The what-ifs' warnings, once each (recorded stages the config lacks, and the
    config's the record lacks), as ``whatif`` without a sweep prints them."""

    @property
    def bests(self) -> tuple[str, ...]:
        """The distinct best alternatives over the points that ran, in order."""
        return tuple(dict.fromkeys(p.best for p in self.points if p.best is not None))

    @property
    def stays_best(self) -> bool:
        """One alternative is best at every swept value (and every value ran)."""
        return len(self.bests) == 1 and all(p.best is not None for p in self.points)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "baseline": self.baseline,
            "stays_best": self.stays_best,
            "bests": list(self.bests),
            "points": [p.model_dump() for p in self.points],
            "warnings": list(self.warnings),
        }


def whatif_sweep(source: Any, key: str, values: Sequence[str], **whatif_args: Any) -> WhatIfSweep:
    """``whatif_report(source, **whatif_args)`` with ``--set KEY=V`` on the recorded config
    and every alternative derived from it, for each value.

    ``source`` is a :class:`rlplex.reports.records.RecordSource`; alternatives given
    as whole config files (``alt_configs``) are not swept.

    Raises:
        ConfigError: the key names nothing in the recorded config, or its own field
            refuses one of the values (an :class:`~rlplex.errors.InvalidValueError`).
    """
    import dataclasses

    from rlplex.reports.records import RecordSource, whatif_report
    from rlplex.sim.whatif import BASELINE_LABEL

    check_key(source.config, key, source.load_config(), source.env)

    @dataclasses.dataclass(frozen=True)
    class _Swept(RecordSource):
        swept: tuple[str, ...] = ()
        """The ``KEY=V`` override put before every config's own (``--set``, ``--alt``)."""

        def load_config(self, overrides: Sequence[str] = ()) -> Config:
            return super().load_config((*self.swept, *overrides))

        def users_overrides(self) -> tuple[str, ...]:
            # A swept length is the user's, as a --config-set one is: the record's does not
            # replace it, nor does its share cut at the maximum go with it.
            return (*super().users_overrides(), *self.swept)

    fields = {f.name: getattr(source, f.name) for f in dataclasses.fields(RecordSource)}
    numeric = is_numeric(values)
    points = []
    warnings: dict[str, None] = {}
    for text in values:
        value: float | str = float(text) if numeric else text
        swept = _Swept(**fields, swept=(f"{key}={text}",))
        try:
            report = whatif_report(swept, **whatif_args)
        except ConfigError as exc:
            _refuse_invalid(exc, key)
            points.append(WhatIfPoint(value=value, error=str(exc)))
            continue
        warnings.update(dict.fromkeys(report.warnings))
        outcomes = report.result.alternatives
        periods = {o.label: o.period_s for o in outcomes}
        best = report.best.label if report.best is not None else None
        points.append(WhatIfPoint(value=value, periods=periods, best=best))
    return WhatIfSweep(
        key=key, baseline=BASELINE_LABEL, points=tuple(points), warnings=tuple(warnings)
    )
