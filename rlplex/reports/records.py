"""Replay and what-if as result objects: every figure computed once, for every view.

``rlplex replay`` and ``rlplex whatif`` print a table, print JSON and draw a
Gantt chart of the same analysis. Each is one call here that reads the
record and the configs and returns a report; the CLI only renders it. The
chart's periods are the report's periods (not recomputed from the drawn
steps), so the picture and the table cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rlplex.config import Config, load_config
from rlplex.config.loading import env_for, refuse_env
from rlplex.errors import ConfigError, RlplexError
from rlplex.plan.model import Plan
from rlplex.reports.lengths import config_warnings, load_with_lengths
from rlplex.reports.memory import MemoryCheck, memory_check
from rlplex.resources.importers.launch_script import is_launch_script
from rlplex.sim.replay import ReplayResult, replay, replay_timeline, stage_warnings
from rlplex.sim.whatif import Alternative, Outcome, WhatIfResult, parse_alt, parse_scaling, whatif
from rlplex.timeline.importers import RecordedRun, import_record
from rlplex.timeline.importers.base import require_stage_timings
from rlplex.timeline.joint import split_joint
from rlplex.timeline.record import Timeline

GANTT_STEPS = 8
"""Recorded steps drawn in a chart (the table and JSON cover every step)."""

AUTO_TOP = 3
"""Placements ``whatif --auto`` reports."""


@dataclass(frozen=True)
class RecordSource:
    """Where a recorded run and its config come from."""

    record: Path
    """The log: an rlplex record, a verl JSONL or console log, ROLL stdout."""
    config: Path
    """The config the run used."""
    record_format: str | None = None
    """rlplex, verl or roll; None: detected."""
    skip_bad_lines: bool = False
    """Skip malformed log lines with a warning instead of refusing the file."""
    config_format: str | None = None
    """native, roll, rlinf, verl or nemo_rl; None: detected."""
    costs: Path | None = None
    """A ``--costs`` file merged into every config read."""
    config_overrides: tuple[str, ...] = ()
    """``KEY=VALUE`` overrides of ``config`` itself (whatif's ``--config-set``: a GPU type a
    launch script does not name), put before every config's own overrides, so that the
    recorded config and every alternative derived from it have them."""

    def load_run(self) -> RecordedRun:
        """The record, refused when no step of it has a stage's seconds; its joint timers
        are still joint (:meth:`load_measured` divides them by the config it reads)."""
        run = import_record(
            self.record, format=self.record_format, skip_bad_lines=self.skip_bad_lines
        )
        require_stage_timings(run)
        return run

    recorded_lengths: tuple[str, ...] = ()
    """Overrides that put the lengths the record measured into the config read, before
    ``config_overrides`` (:meth:`load_measured` sets them for each config it reads)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """``--env NAME=VALUE``: the variables a launch script starts with (refused for a YAML
    ``config``; given to each other file that is a launch script)."""

    def load_config(self, overrides: Sequence[str] = ()) -> Config:
        return load_config(
            self.config,
            overrides=(*self.recorded_lengths, *self.config_overrides, *overrides),
            format=self.config_format,
            costs=self.costs,
            env=self.env,
        )

    def load_measured(
        self, run: RecordedRun, overrides: Sequence[str] = ()
    ) -> tuple[Config, str | None]:
        """The config read with ``overrides`` and ``run``'s measured lengths in place of its
        own (unless ``config_overrides`` or ``overrides`` set them), and the note saying so
        (:mod:`rlplex.reports.lengths`). Each config is checked on its own: an alternative
        whose maximum the record's lengths exceed is read without them, with the note."""
        config, _, note = load_with_lengths(
            lambda more: replace(self, recorded_lengths=tuple(more)).load_config(overrides),
            run,
            (*self.users_overrides(), *overrides),
        )
        return config, note

    def load_split(self, overrides: Sequence[str] = ()) -> tuple[RecordedRun, Config, str | None]:
        """The record (:meth:`load_run`), its config (:meth:`load_measured`) and the lengths
        note, with the record's joint timers divided among that config's stages
        (:func:`~rlplex.timeline.joint.split_joint`): the record as the run's config sees it."""
        run = self.load_run()
        config, note = self.load_measured(run, overrides)
        return split_joint(run, config), config, note

    def users_overrides(self) -> tuple[str, ...]:
        """The user's overrides that every config read has (``config_overrides``): a length
        they set is the user's, not the record's to replace."""
        return self.config_overrides


def _without_bound(timeline: Timeline, period_s: float | None) -> Timeline:
    """A replayed timeline headed by the report's period; the plan's bound does not apply."""
    meta = {k: v for k, v in timeline.meta.items() if k != "lower_bound_s"}
    if period_s is not None:
        meta["period_s"] = period_s
    return timeline.model_copy(update={"meta": meta})


@dataclass(frozen=True)
class ReplayReport:
    """A record replayed through its config's plan."""

    source: RecordSource
    """Where the record and its config came from."""
    run: RecordedRun
    """The record read: per-step, per-stage measured durations."""
    config: Config
    """The run's config, with the ``--set`` overrides applied."""
    plan: Plan
    """The config's plan, which the record is replayed through."""
    result: ReplayResult
    """Measured against predicted per step and stage (the table and ``--json``)."""
    warnings: tuple[str, ...]
    """Import and stage warnings, for stderr."""
    memory: MemoryCheck | None = None
    """Predicted against measured memory per op and device, when the record has it (an
    rlplex record made on a GPU)."""

    def to_dict(self) -> dict[str, Any]:
        out = self.result.to_dict()
        if self.memory is not None:
            out["memory"] = self.memory.to_dict()
        return out

    def timeline(self, steps: int = GANTT_STEPS) -> Timeline:
        """The first ``steps`` replayed steps, headed by the replay's mean predicted step time."""
        drawn = replay_timeline(self.run, self.config, self.plan, steps=steps)
        return _without_bound(drawn, self.result.mean_predicted_s)


def replay_report(source: RecordSource, overrides: Sequence[str] = ()) -> ReplayReport:
    """Replay ``source``'s record through the plan of its config (with ``overrides``)."""
    from rlplex.plan import plan_with_config

    run, cfg, lengths_note = source.load_split(overrides)
    cfg, plan = plan_with_config(cfg)
    result = replay(run, cfg, plan)
    memory = _recorded_memory(source, run, plan)
    notes = (lengths_note,) if lengths_note else ()
    warnings = (*run.warnings, *config_warnings(cfg), *notes, *result.warnings)
    return ReplayReport(source, run, cfg, plan, result, warnings, memory)


def _recorded_memory(source: RecordSource, run: RecordedRun, plan: Plan) -> MemoryCheck | None:
    """The memory check of an rlplex record (other formats hold no per-op memory)."""
    if run.format != "rlplex":
        return None
    try:
        timeline = Timeline.read_jsonl(source.record)
    except ConfigError:  # lines the import skipped (--skip-bad-lines): no memory view
        return None
    return memory_check(plan, timeline)


@dataclass(frozen=True)
class WhatIfReport:
    """The recorded work under each alternative, best first."""

    source: RecordSource
    """Where the record and its config came from."""
    run: RecordedRun
    """The record read: per-step, per-stage measured durations."""
    config: Config
    """The run's config as recorded (no overrides): the baseline the alternatives change."""
    result: WhatIfResult
    """Each alternative's outcome, the recorded config's included (the table and ``--json``)."""
    warnings: tuple[str, ...]
    """Import and stage warnings, for stderr."""
    notes: tuple[str, ...]
    """What the reader should know about the figures (printed under the table)."""

    def to_dict(self) -> dict[str, Any]:
        return self.result.to_dict()

    @property
    def best(self) -> Outcome | None:
        """The fastest alternative that is not the recorded config itself."""
        return next(
            (o for o in self.result.alternatives if o is not self.result.baseline and o.plan),
            None,
        )

    def timeline(self, outcome: Outcome, steps: int = GANTT_STEPS) -> Timeline:
        """``outcome``'s replay of the first ``steps`` steps, headed by its predicted period."""
        assert outcome.config is not None and outcome.plan is not None
        drawn = replay_timeline(self.run, outcome.config, outcome.plan, steps=steps,
                                factors=outcome.factors, modelled=outcome.modelled)  # fmt: skip
        return _without_bound(drawn, outcome.period_s)


def _fit_pairs(
    items: Sequence[str], config_format: str | None, env: Mapping[str, str] | None = None
) -> list[tuple[RecordedRun, Any]]:
    pairs = []
    for item in items:
        rec, sep, cfg = item.partition("=")
        if not sep or not rec or not cfg:
            raise ConfigError("must be RECORD=CONFIG", field="--fit-from", value=item)
        try:
            run = import_record(rec)
            config, _, _ = load_with_lengths(
                lambda extra, cfg=cfg: load_config(
                    cfg, overrides=extra, format=config_format, env=env_for(cfg, env)
                ),
                run,
            )
        except RlplexError as err:  # say which option the file came from; err names it
            raise ConfigError(str(err), field="--fit-from") from err
        pairs.append((split_joint(run, config), config))
    return pairs


def whatif_report(
    source: RecordSource,
    *,
    overrides: Sequence[str] = (),
    alts: Sequence[str] = (),
    alt_configs: Sequence[Path] = (),
    auto: bool = False,
    scaling: Sequence[str] = (),
    fit_from: Sequence[str] = (),
) -> WhatIfReport:
    """Replay ``source``'s recorded work under each alternative.

    Alternatives: ``overrides`` (one, unless ``auto``), each ``alts`` entry
    (``"LABEL: KEY=VALUE ..."``), each whole config in ``alt_configs``, and with
    ``auto`` the best placements the search finds on the cluster and mode that
    ``overrides`` give.

    Raises:
        ConfigError: no alternative, or a malformed one.
    """
    # The recorded config divides the record's joint timers: the alternatives replay the
    # stages as the run they were recorded in had them.
    run, base, lengths_note = source.load_split()
    # Every alternative replays the recorded work, so each is read with the record's lengths
    # too (the estimator's ratio of an alternative over the recorded config must not hold a
    # length the one has and the other lacks); where they do not apply, a note says so.
    alt_notes: list[str] = []

    def measured(label: str, loaded: tuple[Config, str | None]) -> Config:
        config, note = loaded
        if note and note != lengths_note:
            alt_notes.append(f"{label}: {note}")
        return config

    alternatives = []
    if overrides and not auto:
        label = " ".join(overrides)
        alt = measured(label, source.load_measured(run, overrides))
        alternatives.append(Alternative(label, alt))
    for text in alts:
        label, extra = parse_alt(text)
        alternatives.append(Alternative(label, measured(label, source.load_measured(run, extra))))
    for path in alt_configs:
        whole, _, note = load_with_lengths(
            lambda extra, path=path: load_config(
                path, overrides=extra, costs=source.costs, env=env_for(path, source.env)
            ),
            run,
        )
        alternatives.append(Alternative(path.name, measured(path.name, (whole, note))))
    if auto:
        auto_config = measured("auto", source.load_measured(run, overrides))
        alternatives.append(Alternative("auto", auto_config, search=AUTO_TOP))
    if not alternatives:
        raise ConfigError(
            "give at least one alternative: --set KEY=VALUE, --alt 'LABEL: KEY=VALUE ...',"
            " --alt-config FILE or --auto",
            field="whatif",
        )
    _check_labels(alternatives)
    result = whatif(run, base, alternatives, scaling=parse_scaling(scaling, base),
                    fit_from=_fit_pairs(fit_from, source.config_format, source.env))  # fmt: skip
    notes: list[str] = [*([lengths_note] if lengths_note else []), *alt_notes]
    if source.config_overrides:
        notes.append(f"the recorded config with {' '.join(source.config_overrides)}")
    if auto and overrides:
        notes.append(f"auto searched with {' '.join(overrides)}")
    flagged = next((o.warning for o in result.alternatives if o.warning), None)
    if flagged:
        notes.append(f"* {flagged}")
    notes.extend(result.notes)
    warnings = (*run.warnings, *config_warnings(base), *_stage_warnings(run, result.baseline))
    return WhatIfReport(source, run, base, result, warnings, tuple(notes))


def _check_labels(alternatives: Sequence[Alternative]) -> None:
    """Every alternative's label names one row: the table, ``--json`` and ``--sweep`` (whose
    periods are keyed by label) would otherwise show two rows of one name, or keep one.

    Raises:
        ConfigError: a label given twice, or the recorded config's own (naming ``--alt``).
    """
    from rlplex.sim.whatif import BASELINE_LABEL

    seen = {BASELINE_LABEL}
    for alt in alternatives:
        if alt.label in seen:
            why = ("is the recorded config's row" if alt.label == BASELINE_LABEL
                   else "names two alternatives")  # fmt: skip
            raise ConfigError(
                f"label {alt.label!r} {why}: give each --alt (or --alt-config file) its own",
                field="--alt",
                value=alt.label,
            )
        seen.add(alt.label)


def _stage_warnings(run: RecordedRun, baseline: Outcome) -> list[str]:
    """The stages on one side only, a modelled one quoted at the seconds the recorded
    config's row replays it with: that row's config and placement, so that a ``devices:
    auto`` config's are those of the searched devices, not the whole cluster's as read."""
    from rlplex.plan.costs import stage_seconds

    cfg, placement = baseline.config, baseline.placement
    assert cfg is not None  # the recorded config's row always plans (whatif raises otherwise)
    seconds = {s.name: stage_seconds(cfg, s, placement) for s in cfg.pipeline.stages}
    return stage_warnings(run, cfg, seconds)


CONFIG_SUFFIXES = (".yaml", ".yml")
"""A file with one of these suffixes is a config: its plan is drawn."""


def planned_timeline(
    path: str | Path,
    *,
    steps: int = 3,
    overrides: Sequence[str] | None = None,
    fmt: str | None = None,
    costs: Path | None = None,
    baseline: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Timeline:
    """The predicted timeline of a config: its plan, simulated for ``steps`` steps (``env``:
    the variables a launch script starts with, ``--env``)."""
    from rlplex.plan import plan_with_config
    from rlplex.sim.simulate import simulate

    cfg = load_config(path, overrides=overrides or (), format=fmt, costs=costs, env=env)
    cfg, plan = plan_with_config(cfg, baseline=baseline)
    timeline = simulate(plan, cfg, steps=steps)
    meta = {"gpus_per_node": cfg.cluster.gpus_per_node, "config": str(path)}
    return timeline.model_copy(update={"meta": {**meta, **timeline.meta}})


def at_plan_scale(timeline: Timeline) -> Timeline:
    """A rehearsal recorded with ``--time-scale X`` back on the plan's time scale.

    A rehearsed op sleeps its planned seconds times X, so comparing it with a
    simulation or a plan needs its times divided by X (ops that ran code of
    their own ran at real speed and are divided too: a rehearsal's record does
    not say which did). ``meta["time_scale_undone"]`` keeps X.
    """
    scale = timeline.meta.get("time_scale")
    if timeline.meta.get("source") != "ray" or not isinstance(scale, int | float):
        return timeline
    if scale in (0, 1):
        return timeline
    events = tuple(
        e.model_copy(update={"start_s": e.start_s / scale, "end_s": e.end_s / scale})
        for e in timeline.events
    )
    metrics = {
        step: {k: (v / scale if k.endswith("step_s") and isinstance(v, int | float) else v)
               for k, v in m.items()}
        for step, m in timeline.metrics.items()
    }  # fmt: skip
    meta = {**timeline.meta, "time_scale": 1.0, "time_scale_undone": scale}
    return timeline.model_copy(update={"events": events, "metrics": metrics, "meta": meta})


def load_timeline(
    path: str | Path,
    *,
    steps: int = 3,
    overrides: Sequence[str] | None = None,
    fmt: str | None = None,
    costs: Path | None = None,
    skip_bad_lines: bool = False,
    env: Mapping[str, str] | None = None,
) -> Timeline:
    """A timeline from a JSONL record, an rlplex Perfetto trace, or a config (its plan);
    ``env``: the variables a launch script starts with (``--env``), refused for a timeline.

    A record's bad lines are errors (file:line), or with ``skip_bad_lines``
    skipped and counted in ``meta["read_warnings"]``. A rehearsal's record comes
    back on the plan's time scale (:func:`at_plan_scale`).

    Raises:
        ConfigError: the file is missing, is not one of those, or holds no ops.
    """
    from rlplex.timeline.perfetto import read_timeline

    if Path(path).suffix.lower() in CONFIG_SUFFIXES or is_launch_script(path):
        return planned_timeline(
            path, steps=steps, overrides=overrides, fmt=fmt, costs=costs, env=env
        )
    refuse_env(path, env)
    try:
        timeline = read_timeline(path, skip_bad_lines=skip_bad_lines)
    except ConfigError as exc:
        if not exc.message.startswith("bad event"):
            raise
        raise ConfigError(
            f"not an rlplex timeline ({exc.field or 'event'}: {exc.message}); a verl or ROLL log is"
            " drawn by `rlplex replay LOG --config FILE --gantt F.html`",
            file=exc.file,
            line=exc.line,
        ) from None
    if not timeline.events:
        raise ConfigError(
            "no ops to draw: expected an rlplex timeline (JSONL, one op a line), a trace"
            " rlplex wrote, or a config (.yaml)",
            file=str(path),
        )
    return at_plan_scale(timeline)
