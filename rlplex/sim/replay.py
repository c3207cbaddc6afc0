"""Replay recorded step timings through a config's plan: where did each step's time go?

A run's log (rlplex record, verl, ROLL; see :mod:`rlplex.timeline.importers`)
says how long every stage took at every step and how long the step took. The
plan of the config that ran says which stages ran in parallel, which waited
for which, and which offloads and reloads sat between them. Replaying the
recorded stage durations through that plan predicts each step's time; the
difference to the recorded step time is the model's error. Transfers are
modelled, except in an rlplex record, which has the ones that ran. Replaying the same
plan with *only* the recorded stages (modelled transfers and unrecorded
stages at 0 s) gives the time the recorded stages explain; what is left of
the recorded step is *unattributed* (driver overhead, data loading, logging).

The replay runs the plan's op pattern (:func:`rlplex.sim.simulate.extract_pattern`)
through the simulator's recurrence (:func:`rlplex.sim.simulate.run_pattern`) but
builds no events, so 100,000 recorded steps replay in about a second.
:func:`replay_timeline` draws the first steps with the simulator itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlplex.config import Config
from rlplex.plan.model import Plan
from rlplex.sim.simulate import (
    Pattern,
    extract_pattern,
    run_pattern,
    simulate,
    step_gaps,
)
from rlplex.timeline.importers.base import RecordedRun
from rlplex.timeline.record import Timeline

UNRELIABLE = (
    "the plan's device order changes from step to step, so its one-step pattern may let two"
    " ops overlap on a device: the replayed times may be optimistic"
)
"""Warning for a plan no single step of which repeats into a valid schedule."""

Column = float | Sequence[float]
"""Durations of one op: the same every step (a float) or one per step."""


@dataclass(frozen=True)
class StepReplay:
    """One recorded step against its replay."""

    step: int
    """The step number as recorded."""
    recorded_s: float | None
    """The recorded step time; None when the log has none for this step."""
    predicted_s: float
    """The replayed step time: recorded durations through the plan, the rest modelled."""
    explained_s: float
    """The step time the recorded stages alone explain (transfers, unrecorded stages at 0 s)."""

    @property
    def unattributed_s(self) -> float | None:
        """Recorded time that no recorded stage explains (None without a recorded time)."""
        return None if self.recorded_s is None else self.recorded_s - self.explained_s

    @property
    def error_pct(self) -> float | None:
        """(predicted - recorded) / recorded, in percent."""
        if not self.recorded_s:
            return None
        return (self.predicted_s - self.recorded_s) / self.recorded_s * 100.0


@dataclass(frozen=True)
class ReplayResult:
    """Every replayed step and the warnings about stages that did not match."""

    steps: tuple[StepReplay, ...]
    """Replayed steps, in step order."""
    warnings: tuple[str, ...] = ()
    """Recorded stages the config lacks, config stages the record lacks."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Record file, format, config file, mode."""

    def _mean(self, values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    @property
    def mean_abs_error_pct(self) -> float | None:
        """Mean of |error| over the steps that have a recorded time."""
        return self._mean([abs(s.error_pct) for s in self.steps if s.error_pct is not None])

    @property
    def mean_recorded_s(self) -> float | None:
        return self._mean([s.recorded_s for s in self.steps if s.recorded_s is not None])

    @property
    def mean_predicted_s(self) -> float | None:
        return self._mean([s.predicted_s for s in self.steps])

    @property
    def mean_unattributed_s(self) -> float | None:
        return self._mean([s.unattributed_s for s in self.steps if s.unattributed_s is not None])

    def to_dict(self) -> dict[str, Any]:
        """The ``rlplex replay --json`` object."""
        return {
            "steps": [
                {
                    "step": s.step,
                    "recorded_s": s.recorded_s,
                    "predicted_s": s.predicted_s,
                    "unattributed_s": s.unattributed_s,
                    "explained_s": s.explained_s,
                    "error_pct": s.error_pct,
                }
                for s in self.steps
            ],
            "mean_abs_error_pct": self.mean_abs_error_pct,
            "mean_recorded_s": self.mean_recorded_s,
            "mean_predicted_s": self.mean_predicted_s,
            "mean_unattributed_s": self.mean_unattributed_s,
            "warnings": list(self.warnings),
            **self.meta,
        }


def stage_warnings(run: RecordedRun, config: Config, base: Mapping[str, float]) -> list[str]:
    """Name the recorded stages the config lacks and the config stages the record lacks.

    ``base`` gives the modelled seconds of each config stage, quoted for the
    ones the replay has to model.
    """
    recorded = run.stage_names()
    names = config.pipeline.names
    out = []
    extra = [s for s in recorded if s not in names]
    if extra:
        out.append(
            f"recorded stage(s) not in the config, left out of the replay: {', '.join(extra)}"
        )
    missing = [s for s in names if s not in recorded]
    if missing:
        modelled = ", ".join(f"{s} {base.get(s, 0.0):.4g} s" for s in missing)
        out.append(f"config stage(s) not in the record, replayed with the model: {modelled}")
    return out


def replay_plan(plan: Plan, config: Config) -> tuple[Pattern, bool]:
    """``plan``'s op pattern, and whether repeating that pattern is a valid schedule.

    The planner picks a ``pattern_step`` that repeats (see
    :mod:`rlplex.plan.steady`), so this is False only for a plan from
    elsewhere (an edited or older plan file): its replay may then let two ops
    overlap on a device.
    """
    pattern = extract_pattern(plan, config)
    return pattern, pattern.step.repeats


def step_times(pattern: Pattern, columns: Sequence[Column], steps: int) -> list[float]:
    """Step times (between consecutive step ends) of ``steps`` steps of ``pattern``.

    ``columns[j]`` gives op j's duration, per step or constant: the
    simulator's recurrence (:func:`rlplex.sim.simulate.run_pattern`) without
    building events.
    """
    const = [c if isinstance(c, (int, float)) else None for c in columns]

    def duration(n: int, j: int) -> float:
        c = const[j]
        return c if c is not None else columns[j][n]  # type: ignore[index]

    return step_gaps(run_pattern(pattern, steps, duration)[2])


def cyclic_period(pattern: Pattern, columns: Sequence[Column], steps: int, warmup: int) -> float:
    """Steady-state time per step of the recorded sequence repeated end to end.

    The ``steps`` recorded steps are replayed ``warmup`` steps into a cyclic
    repetition of themselves (so an async pipeline is already full) and
    followed by ``warmup`` more (so it is not draining); the period is the
    mean over exactly the ``steps`` steps in between. Each recorded step thus
    counts once; in sync mode this is the mean of the steps' own times.
    """
    if steps <= 0:
        return 0.0
    total = steps + 2 * warmup

    def cycle(column: Column) -> Column:
        if isinstance(column, (int, float)):
            return column
        return [column[(n - warmup) % steps] for n in range(total)]

    times = step_times(pattern, [cycle(c) for c in columns], total)
    return sum(times[warmup : warmup + steps]) / steps


def stage_columns(
    pattern: Pattern,
    rows: Sequence[Mapping[str, float]],
    *,
    factors: Mapping[str, float] | None = None,
    modelled: Collection[str] = (),
    explained: bool = False,
    transfers: Sequence[Mapping[str, float]] | None = None,
) -> list[Column]:
    """Per-op duration columns for :func:`step_times` from recorded rows (one per step).

    A stage op takes its recorded seconds times ``factors[stage]`` (default 1)
    where the row has it, else the pattern's modelled
    duration; stages in ``modelled`` always take the modelled duration. A
    transfer op takes its recorded seconds where ``transfers`` (one mapping
    per row, op key -> seconds) has it. With ``explained``, everything that is
    not recorded (modelled transfers, modelled stages) takes 0 s.
    """
    factors = factors or {}
    columns: list[Column] = []
    for j, stage in enumerate(pattern.stages):
        base = pattern.base[j]
        key = pattern.keys[j]
        if stage is None and transfers and any(key in row for row in transfers):
            fallback = 0.0 if explained else base
            columns.append([row.get(key, fallback) for row in transfers])
            continue
        if stage is None or stage in modelled:
            columns.append(0.0 if explained else base)
            continue
        f = factors.get(stage, 1.0)
        fallback = 0.0 if explained else base
        if not any(stage in row for row in rows):
            columns.append(fallback)
            continue
        columns.append([row[stage] * f if stage in row else fallback for row in rows])
    return columns


def replay(run: RecordedRun, config: Config, plan: Plan | None = None) -> ReplayResult:
    """Replay every recorded step through the plan of ``config``.

    Args:
        run: the imported log.
        config: the config the run used (its placement and mode).
        plan: its plan; :func:`rlplex.plan.make_plan` of ``config`` when None.

    Returns:
        Per step: recorded, predicted and explained step times; warnings for
        stages present on one side only.
    """
    if plan is None:
        from rlplex.plan import plan_with_config

        config, plan = plan_with_config(config)
    pattern, valid = replay_plan(plan, config)
    base = {s: pattern.base[j] for j, s in enumerate(pattern.stages) if s is not None}
    numbers = sorted(run.steps)
    rows = [run.steps[n] for n in numbers]
    # An rlplex record has the transfers that ran too: replay them as recorded.
    moved = [run.transfers.get(n, {}) for n in numbers]
    predicted = step_times(pattern, stage_columns(pattern, rows, transfers=moved), len(rows))
    explained = step_times(
        pattern, stage_columns(pattern, rows, explained=True, transfers=moved), len(rows)
    )
    steps = tuple(
        StepReplay(step=n, recorded_s=run.step_s.get(n), predicted_s=p, explained_s=e)
        for n, p, e in zip(numbers, predicted, explained, strict=True)
    )
    warnings = stage_warnings(run, config, base)
    if not valid:
        warnings.append(UNRELIABLE)
    if not rows:
        warnings.append("the record has no stage durations to replay")
    return ReplayResult(
        steps=steps,
        warnings=tuple(warnings),
        meta={"record": run.source, "format": run.format, "config": config.source,
              "mode": plan.mode},
    )  # fmt: skip


def recorded_durations(
    run: RecordedRun, factors: Mapping[str, float] | None = None, modelled: Collection[str] = ()
) -> Any:
    """``f(index, stage)`` for :func:`rlplex.sim.simulate`: the index-th recorded step, scaled.

    Stages in ``modelled`` (and stages the step lacks) give None: the simulator models them.
    """
    rows = [run.steps[n] for n in sorted(run.steps)]
    factors = factors or {}

    def lookup(index: int, stage: str) -> float | None:
        if index >= len(rows) or stage in modelled or stage not in rows[index]:
            return None
        return rows[index][stage] * factors.get(stage, 1.0)

    return lookup


def replay_timeline(
    run: RecordedRun,
    config: Config,
    plan: Plan,
    *,
    steps: int = 8,
    factors: Mapping[str, float] | None = None,
    modelled: Collection[str] = (),
) -> Timeline:
    """The first ``steps`` replayed steps as a Timeline (for a Gantt chart), by the simulator."""
    count = max(1, min(steps, len(run.steps)))
    timeline = simulate(
        plan, config, steps=count, durations=recorded_durations(run, factors, modelled)
    )
    meta = {**timeline.meta, "source": "replay", "record": run.source}
    return timeline.model_copy(update={"meta": meta})
