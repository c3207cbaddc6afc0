"""What if the recorded run had used another placement, mode or GPU count?

A recorded run fixes the *work*: how long each stage took, step by step, on
the devices its role had. An alternative config (another placement,
colocated instead of split, async with staleness k, more GPUs) changes where
and in which order that work runs. :func:`whatif` replays the recorded steps
through each alternative's plan, with every stage's recorded seconds scaled by
the cost model's rule from the device count it was recorded on, d0 (its
role's devices in the plan of the config the record came from), to its
role's device count d in the alternative: ``seconds * (d0 / d) ** s``.

The exponent s of a stage is, in order of precedence: one given explicitly
(``--scaling generate=0.9``), one fitted from records of the same work at two
or more device counts (least squares on log t = c - s log d), or the
alternative config's own ``scaling`` (1 by default). A recorded weight sync is
reused only where the alternative keeps both roles on the recorded devices;
elsewhere the model prices it (``gb / network_gb_per_s`` or
``gb / device_copy_gb_per_s``). Stages the record lacks keep the config's
modelled seconds.

Each alternative is planned on its *work config*: its own config with every
recorded stage's ``seconds`` replaced by the recorded mean, ``at_devices`` by
d0 and ``scaling`` by s, so that the planner (and the placement search of
``--auto``) decides with the recorded costs, and the plan's own cost model
gives the scaled durations. The predicted period is the steady-state time
per step of the recorded steps replayed as a cycle (pipeline already full, not
draining; each recorded step counted once; in sync mode simply the mean
replayed step time); the speed-up is relative to the same replay under the recorded config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rlplex.config import Config
from rlplex.errors import ConfigError, RlplexError
from rlplex.plan.costs import stage_seconds
from rlplex.plan.model import Plan
from rlplex.resources.devices import format_devices
from rlplex.sim.replay import cyclic_period, replay_plan, stage_columns
from rlplex.timeline.importers.base import RecordedRun

PLAN_PERIOD = (
    "the plan's device order changes from step to step, so it cannot be replayed step by"
    " step; period_s is the planner's period for the mean recorded durations"
)
"""Warning of an outcome whose period comes from the plan instead of the replay."""

BASELINE_LABEL = "as recorded"
"""Label of the recorded config's own replay, the reference of every speed-up."""


@dataclass(frozen=True)
class Alternative:
    """A config to replay the recorded work under."""

    label: str
    """How the alternative is named in the output."""
    config: Config
    """The checked config (roles with ``devices: auto`` are placed by the search)."""
    search: int = 0
    """With n > 0, search placements of every auto role and report the n best."""


@dataclass(frozen=True)
class RecordedWork:
    """The recorded steps, and where each stage ran when they were recorded."""

    rows: tuple[dict[str, float], ...]
    """Seconds per stage of each recorded step, in step order."""
    means: dict[str, float]
    """Mean recorded seconds of each stage over the steps that have it."""
    devices: dict[str, int]
    """Device count each GPU stage ran on in the recorded config's plan."""
    sync_devices: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]
    """For each weight_sync stage: the (source, destination) devices it ran between."""


@dataclass(frozen=True)
class Outcome:
    """The replay of the recorded work under one alternative."""

    label: str
    """The alternative's name."""
    period_s: float | None
    """Predicted steady-state time per step; None when the alternative cannot run."""
    speedup: float | None = None
    """Baseline period / this period."""
    mode: str = "sync"
    """sync or async."""
    staleness: int = 0
    """k of async mode."""
    placement: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Devices of each GPU role."""
    error: str | None = None
    """Why the alternative cannot run (infeasible placement, bad overrides)."""
    warning: str | None = None
    """Why the period is not a step-by-step replay (:data:`PLAN_PERIOD`)."""
    config: Config | None = field(default=None, repr=False, compare=False)
    """The work config it was planned with (for drawing)."""
    plan: Plan | None = field(default=None, repr=False, compare=False)
    """Its plan (for drawing)."""
    factors: dict[str, float] = field(default_factory=dict)
    """Scale factor (d0 / d) ** s applied to each recorded stage."""
    modelled: tuple[str, ...] = ()
    """Recorded stages priced by the model instead (weight syncs on other devices)."""
    estimated: tuple[str, ...] = ()
    """Recorded stages scaled by the estimator's ratio (GPU counts, TP, model) instead of
    a device-count exponent."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "period_s": self.period_s,
            "speedup": self.speedup,
            "mode": self.mode,
            "max_staleness": self.staleness,
            "placement": {r: format_devices(d) for r, d in self.placement.items()},
            "scale_factors": self.factors,
            **({"error": self.error} if self.error else {}),
            **({"warning": self.warning} if self.warning else {}),
        }


@dataclass(frozen=True)
class WhatIfResult:
    """Every alternative's predicted period, best first."""

    baseline: Outcome
    """The recorded config's own replay."""
    alternatives: tuple[Outcome, ...]
    """Every outcome, the baseline included, by period (infeasible ones last)."""
    exponents: dict[str, float]
    """Scaling exponents given or fitted, by stage."""
    notes: tuple[str, ...] = ()
    """Where the exponents came from, and other facts the user should know."""

    def to_dict(self) -> dict[str, Any]:
        """The ``rlplex whatif --json`` object."""
        return {
            "alternatives": [o.to_dict() for o in self.alternatives],
            "baseline_period_s": self.baseline.period_s,
            "exponents": self.exponents,
            "notes": list(self.notes),
        }


def parse_alt(text: str) -> tuple[str, list[str]]:
    """``"LABEL: KEY=VALUE KEY=VALUE"`` -> (label, overrides).

    The label ends at the first colon followed by a space; without one, the
    overrides are the label.

    Raises:
        ConfigError: no override, or a word that is not KEY=VALUE.
    """
    label, sep, rest = text.partition(": ")
    if not sep:
        label, rest = "", text
    overrides = rest.split()
    if not overrides:
        raise ConfigError("gives no KEY=VALUE override", field="--alt", value=text)
    for item in overrides:
        if "=" not in item or not item.partition("=")[0]:
            raise ConfigError(
                f"{item!r} is not KEY=VALUE (a value with spaces needs --alt-config)",
                field="--alt",
                value=text,
            )
    return label.strip() or " ".join(overrides), overrides


def parse_scaling(items: Sequence[str], config: Config) -> dict[str, float]:
    """``["generate=0.9", ...]`` -> ``{"generate": 0.9}``; stages checked against ``config``.

    Raises:
        ConfigError: not STAGE=NUMBER, an unknown stage, or a negative exponent.
    """
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            exponent = float(value)
        except ValueError:
            exponent = math.nan
        if not sep or math.isnan(exponent):
            raise ConfigError("must be STAGE=EXPONENT, e.g. generate=0.9", field="--scaling",
                              value=item)  # fmt: skip
        if name not in config.pipeline.names:
            raise ConfigError(
                f"unknown stage (stages: {', '.join(config.pipeline.names)})",
                field="--scaling",
                value=item,
            )
        if exponent < 0:
            raise ConfigError("the exponent must be >= 0", field="--scaling", value=item)
        out[name] = exponent
    return out


def placement_of(config: Config) -> dict[str, tuple[int, ...]]:
    """Devices of each GPU role, resolved by the placement owner (searched for auto roles)."""
    return as_planned(config)[1]


def as_planned(config: Config) -> tuple[Config, dict[str, tuple[int, ...]]]:
    """``config`` as its plan was made from it, and the devices of each GPU role.

    A config with ``devices: auto`` roles runs on the placement the search chose, with
    its estimated figures estimated again there (:func:`rlplex.plan.plan_with_config`);
    as read, those figures are the whole cluster's (a generation on 8 of 16 GPUs priced
    at twice its planned seconds) and its auto roles have no devices, so the estimator
    can neither scale nor price it. The recorded config's row, its exponents and its
    stage warnings take this config, as every alternative does.
    """
    from rlplex.plan.placement import resolve_placement

    resolved = resolve_placement(config, top=1)
    return resolved.config, resolved.placement


def placed(config: Config, placement: Mapping[str, Sequence[int]]) -> Config:
    """``config`` with every GPU role in ``placement`` on its devices there (none left
    ``auto``): what the estimator needs to price it (:mod:`rlplex.estimate.scaling`)."""
    roles = {
        n: r.with_devices(tuple(placement[n])) if n in placement else r
        for n, r in config.roles.items()
    }
    return config.model_copy(update={"roles": roles})


def recorded_work(
    run: RecordedRun, config: Config, placement: Mapping[str, Sequence[int]] | None = None
) -> RecordedWork:
    """The recorded steps of ``config``'s stages and the device counts they ran on.

    ``placement``: the config's, when the caller has resolved it already.
    """
    placement = placement if placement is not None else placement_of(config)
    names = set(config.pipeline.names)
    rows = tuple({s: v for s, v in run.steps[n].items() if s in names} for n in sorted(run.steps))
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for stage, seconds in row.items():
            sums[stage] = sums.get(stage, 0.0) + seconds
            counts[stage] = counts.get(stage, 0) + 1
    means = {s: sums[s] / counts[s] for s in sums}
    devices: dict[str, int] = {}
    syncs: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for stage in config.pipeline.stages:
        if stage.is_weight_sync:
            syncs[stage.name] = (
                tuple(sorted(placement.get(stage.from_role or "", ()))),
                tuple(sorted(placement.get(stage.to_role or "", ()))),
            )
        elif stage.role in placement:
            devices[stage.name] = len(placement[stage.role])
    return RecordedWork(rows=rows, means=means, devices=devices, sync_devices=syncs)


def fit_exponent(points: Sequence[tuple[int, float]]) -> float:
    """Least-squares s of ``t = c * d ** -s`` through (devices, seconds) points (two or more)."""
    xs = [math.log(d) for d, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return -cov / var


def fit_exponents(works: Sequence[RecordedWork]) -> tuple[dict[str, float], list[str]]:
    """Fit each stage's exponent from records of it at two or more device counts.

    Returns the exponents and one note per fitted stage saying from what.
    """
    points: dict[str, dict[int, list[float]]] = {}
    for work in works:
        for stage, d in work.devices.items():
            if stage in work.means and work.means[stage] > 0:
                points.setdefault(stage, {}).setdefault(d, []).append(work.means[stage])
    exponents: dict[str, float] = {}
    notes: list[str] = []
    for stage, by_d in points.items():
        if len(by_d) < 2:
            if len(works) > 1:  # more records were given to fit from: say why nothing was
                (d,) = by_d
                notes.append(
                    f"{stage}: not fitted: all {sum(map(len, by_d.values()))} records have it on"
                    f" {d} GPU{'s' if d > 1 else ''}; fitting needs two or more GPU counts"
                )
            continue
        pts = sorted((d, sum(v) / len(v)) for d, v in by_d.items())
        exponents[stage] = fit_exponent(pts)
        at = ", ".join(f"{t:.4g} s on {d} GPU{'s' if d > 1 else ''}" for d, t in pts)
        notes.append(f"{stage}: exponent {exponents[stage]:.3f} fitted from records ({at})")
    return exponents, notes


def work_config(
    config: Config,
    work: RecordedWork,
    exponents: Mapping[str, float],
    placement: Mapping[str, Sequence[int]] | None,
    ratios: Mapping[str, float] | None = None,
) -> tuple[Config, tuple[str, ...]]:
    """``config`` with the recorded work as its stage costs; and the weight syncs left modelled.

    Every recorded stage gets ``seconds`` = its recorded mean, ``at_devices`` =
    the device count it was recorded on, and ``scaling`` = ``exponents[stage]``
    when given. A stage in ``ratios`` (the estimator's time here over its time in
    the recorded config) instead takes ``seconds`` = mean x ratio, fixed
    (``scaling`` 0): the estimate already priced its GPUs and parallel sizes.
    A recorded weight sync is kept only when ``placement`` (None: not known
    yet) puts both of its roles on the recorded devices.
    """
    stages = []
    modelled = []
    measured: set[str] = set()  # syncs that take their recorded seconds
    recorded_run: set[str] = set()  # other stages whose seconds come from the record
    for stage in config.pipeline.stages:
        mean = work.means.get(stage.name)
        if mean is None:
            stages.append(stage)
            continue
        if stage.is_weight_sync:
            recorded = work.sync_devices.get(stage.name)
            here = None
            if placement is not None:
                here = (
                    tuple(sorted(placement.get(stage.from_role or "", ()))),
                    tuple(sorted(placement.get(stage.to_role or "", ()))),
                )
            if here is not None and here == recorded:
                stages.append(stage.model_copy(update={"seconds": mean}))
                measured.add(stage.name)
            else:
                stages.append(stage)
                modelled.append(stage.name)
            continue
        recorded_run.add(stage.name)
        if ratios and stage.name in ratios:
            update = {"seconds": mean * ratios[stage.name], "scaling": 0.0}
            stages.append(stage.model_copy(update=update))
            continue
        update: dict[str, Any] = {"seconds": mean}
        if stage.name in work.devices:
            update["at_devices"] = work.devices[stage.name]
        if stage.name in exponents:
            update["scaling"] = exponents[stage.name]
        stages.append(stage.model_copy(update=update))
    pipeline = config.pipeline.model_copy(update={"stages": tuple(stages)})
    # Recorded seconds are measured, not the estimator's: a plan on other devices would price
    # a sync again, and a staleness search (estimate.fill.at_staleness) a generation.
    estimated = frozenset(
        p
        for p in config.estimated
        if p not in {f"pipeline.stages.{n}.seconds" for n in measured | recorded_run}
    )
    return config.model_copy(update={"pipeline": pipeline, "estimated": estimated}), tuple(modelled)


def evaluate(
    label: str, cfg: Config, plan: Plan, work: RecordedWork, modelled: tuple[str, ...]
) -> Outcome:
    """Replay the recorded steps through ``plan`` of the work config ``cfg``."""
    placement = {r: tuple(d) for r, d in plan.placement.items()}
    factors: dict[str, float] = {}
    for stage in cfg.pipeline.stages:
        mean = work.means.get(stage.name)
        if mean is None or stage.name in modelled:
            continue
        # The plan's own cost model gives the scaled duration; its ratio to the
        # recorded mean scales every recorded step alike.
        factors[stage.name] = stage_seconds(cfg, stage, placement) / mean if mean > 0 else 1.0
    pattern, valid = replay_plan(plan, cfg)
    columns = stage_columns(pattern, work.rows, factors=factors, modelled=modelled)
    warmup = 4 * (plan.staleness + 1)
    # A plan that no one-step pattern replays validly keeps the planner's own
    # period for the mean recorded work (flagged) instead of an optimistic replay.
    period = cyclic_period(pattern, columns, len(work.rows), warmup) if valid else plan.period_s
    return Outcome(
        label=label,
        period_s=period,
        mode=plan.mode,
        staleness=plan.staleness,
        placement=placement,
        config=cfg,
        plan=plan,
        factors=factors,
        modelled=modelled,
        warning=None if valid else PLAN_PERIOD,
    )


def _placement_label(
    groups: Sequence[Sequence[str]], placement: Mapping[str, Sequence[int]]
) -> str:
    return " | ".join(
        f"{'+'.join(g)} {format_devices(tuple(placement[g[0]]))}" for g in groups if g
    )


def _outcomes(
    alt: Alternative,
    work: RecordedWork,
    exponents: Mapping[str, float],
    recorded: Config | None = None,
    explicit: frozenset[str] = frozenset(),
) -> list[Outcome]:
    from rlplex.plan import plan_for_placement
    from rlplex.plan.placement import resolve_placement

    try:
        if alt.search:
            cfg, modelled = work_config(alt.config, work, exponents, None)
            # The placement owner searches every GPU role, and in async mode the staleness.
            resolved = resolve_placement(cfg, auto=True, top=alt.search)
            out = []
            for i, cand in enumerate(resolved.candidates, start=1):
                # The config the search planned the candidate with: at its staleness, its
                # estimated figures (states, a stage the record lacks) on its devices.
                here = cand.config or cfg
                plan = plan_for_placement(here, cand.placement)
                name = f"{alt.label} #{i}: {_placement_label(cand.groups, cand.placement)}"
                if cand.staleness:
                    name += f" (k={cand.staleness})"
                out.append(evaluate(name, here, plan, work, modelled))
            return out
        # Roles with devices: auto are placed by the search, which plans on the config
        # estimated again on the devices it chose: that config is the alternative's.
        resolved = resolve_placement(alt.config, top=1)
        alt_config, placement = resolved.config, resolved.placement
        ratios: dict[str, float] = {}
        if recorded is not None:  # the estimator prices GPU counts, TP and the model at once
            from rlplex.estimate.scaling import estimator_ratios

            wanted = [n for n in work.means if n not in explicit]
            ratios = estimator_ratios(recorded, placed(alt_config, placement), wanted)
        cfg, modelled = work_config(alt_config, work, exponents, placement, ratios)
        outcome = evaluate(alt.label, cfg, plan_for_placement(cfg, placement), work, modelled)
        return [replace(outcome, estimated=tuple(sorted(ratios)))]
    except RlplexError as exc:
        return [Outcome(label=alt.label, period_s=None, error=str(exc))]


def whatif(
    run: RecordedRun,
    config: Config,
    alternatives: Sequence[Alternative],
    *,
    scaling: Mapping[str, float] | None = None,
    fit_from: Sequence[tuple[RecordedRun, Config]] = (),
) -> WhatIfResult:
    """Predict the period of the recorded work under each alternative, best first.

    Args:
        run: the imported log.
        config: the config the run used (its placement gives each stage's d0).
        alternatives: configs to replay the work under; an alternative that
            cannot run (infeasible, bad placement) is reported with its error.
        scaling: explicit exponents by stage; they win over fitted ones.
        fit_from: more records of the same work with the configs they came
            from; a stage recorded at two or more device counts gets its
            exponent fitted.

    Raises:
        RlplexError: the recorded config itself cannot be planned.
    """

    from rlplex.plan import plan_for_placement

    # The recorded config as planned: with devices: auto roles, on the searched placement
    # and with its figures estimated there (the record's d0 is that placement's too).
    config, placement = as_planned(config)
    on_devices = placed(config, placement)
    work = recorded_work(run, config, placement)
    fitted, notes = fit_exponents([work, *(recorded_work(r, c) for r, c in fit_from)])
    given = dict(scaling or {})
    for stage in given:
        if stage in fitted:
            notes.append(f"{stage}: --scaling {given[stage]:g} overrides the fitted exponent")
    from rlplex.estimate.scaling import estimator_exponents

    estimated = {
        k: v for k, v in estimator_exponents(on_devices).items() if k not in {**fitted, **given}
    }
    if estimated:
        notes.append(
            "exponents from the estimator (model, workload, GPU): "
            + ", ".join(f"{k} {v:g}" for k, v in estimated.items())
        )
    exponents = {**estimated, **fitted, **given}
    for stage, s in given.items():
        notes.append(f"{stage}: exponent {s:g} given")
    cfg, modelled = work_config(config, work, exponents, placement)
    first = evaluate(BASELINE_LABEL, cfg, plan_for_placement(cfg, placement), work, modelled)
    base = first.period_s or 0.0
    baseline = replace(first, speedup=1.0 if base else None)
    done = [baseline]
    for alt in alternatives:
        for o in _outcomes(alt, work, exponents, on_devices, frozenset({**fitted, **given})):
            done.append(replace(o, speedup=base / o.period_s if o.period_s and base else None))
    done.sort(key=lambda o: (o.period_s is None, o.period_s or 0.0, o.label))
    notes.append(
        "recorded seconds scale as t * (d0/d)**s from the GPUs each role had in the recorded"
        " config; s is 1 unless given (--scaling), fitted, estimated, or set in the config"
    )
    recorded = [run.step_s[n] for n in sorted(run.step_s)]
    if recorded and base:
        mean = sum(recorded) / len(recorded)
        notes.append(
            f"the record's mean step time is {mean:.4g} s; '{BASELINE_LABEL}' replays it at"
            f" {base:.4g} s (time no recorded stage explains is in no prediction)"
        )
    by_estimate = sorted({s for o in done for s in o.estimated})
    if by_estimate:
        notes.append(
            f"{', '.join(by_estimate)}: scaled by the estimator's time in the alternative over"
            " its time in the recorded config (GPU counts, tensor parallel and model alike)"
        )
    modelled_syncs = sorted({s for o in done for s in o.modelled})
    if modelled_syncs:
        notes.append(
            f"recorded {', '.join(modelled_syncs)} reused only on the recorded devices;"
            " elsewhere priced by the model"
        )
    return WhatIfResult(
        baseline=baseline,
        alternatives=tuple(done),
        exponents=exponents,
        notes=tuple(notes),
    )
