"""Fit the cost model to a record: efficiency factors, stage seconds and per-op overhead.

``rlplex calibrate RECORD --config CONFIG`` reads any record rlplex reads (its
own Timeline, verl's and ROLL's logs) and fits, on the record's first steps:

- for each stage whose ``seconds`` the estimator filled: the physical
  parameters of its kind, one time ratio per kind (never a factor per stage):
  the efficiencies (``train``, ``forward``, ``prefill`` + ``decode``) divided
  by it and generation's per-step floors (``decode_step_s``,
  ``decode_layer_s``, ``decode_moe_layer_s``, ``decode_sequence_s``,
  ``decode_sequence_v0_s``, ``eager_layer_s``, the all-reduce latencies and
  ``cross_host_step_s``: every part of its latency term) multiplied by it, so
  that the terms they price (compute, memory traffic, latency floor) add up to
  the measured
  time summed over the kind's stages once the terms they do not price
  (communication, offload, the per-step overhead) are taken off. Parameters
  of the hardware and the model, not of one run, so the fit carries to other
  placements, GPU counts and modes;
- for each stage whose ``seconds`` the config gives (toy configs, imported
  defaults, CPU stages), and each recorded weight sync (estimated or not: the
  estimate has no fitted parameter): its median measured seconds (robust to a
  slow step);
- ``cluster.dispatch_s``: the per-op overhead that makes the planned period
  equal the measured one (what the stage durations do not explain: driver
  work between ops, Ray calls, data loading), solved by the secant method on
  the plan's period; or, when the plan with the fitted stages is already
  longer than the measured period, the estimated per-step overhead
  (``step_overhead_s``, ``sequence_overhead_s``: the only estimated time no
  recorded stage holds) lowered by one ratio until the two match.

It then checks the fit on the remaining steps (held out) and reports the
error per stage and of the period before and after. The fit is a costs file
(:func:`costs_document`) that ``--costs`` applies to ``plan``, ``simulate``,
``replay`` and ``whatif``.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from rlplex.config import Config, load_config
from rlplex.errors import ConfigError
from rlplex.reports.lengths import config_warnings, load_with_lengths
from rlplex.timeline.importers import RecordedRun, import_record
from rlplex.timeline.importers.base import member_stage, require_stage_timings
from rlplex.timeline.joint import split_joint
from rlplex.timeline.periods import period_over_steps, step_ends
from rlplex.timeline.record import Timeline

_KIND_KEYS = {"train": ("train",), "forward": ("forward",), "generate": ("prefill", "decode")}
"""Rate parameters of each estimated kind: fitted by dividing by the time ratio."""
_KIND_TIMES = {
    "generate": (
        "decode_step_s", "decode_layer_s", "decode_moe_layer_s", "decode_sequence_s",
        "decode_sequence_v0_s",
        "eager_layer_s", "allreduce_s", "allreduce_inter_node_s", "cross_host_step_s",
    )
}  # fmt: skip
"""Time parameters of each kind: fitted by multiplying by the time ratio."""
_SCALED_TERMS = {
    "train": ("compute", "latency"),
    "forward": ("compute", "latency"),
    "generate": ("compute", "memory", "latency", "overhead"),
}
"""The terms of each kind that the fitted parameters scale (the rest stays as estimated:
communication, offload, the per-step overhead)."""


class StageFit(BaseModel):
    """One stage's figures before and after calibration."""

    model_config = ConfigDict(frozen=True)

    stage: str
    """The stage's name."""
    how: str
    """``efficiency`` (estimated stage), ``seconds`` (given stage, or a recorded weight sync:
    its measured seconds), ``not recorded``, or ``not fitted`` (a rule reward whose
    figure is only its share of a joint timer: :mod:`rlplex.timeline.joint`)."""
    measured_fit_s: float | None
    """Mean measured seconds over the fitting steps."""
    measured_check_s: float | None
    """Mean measured seconds over the held-out steps (the fitting steps if none)."""
    before_s: float
    """The config's seconds for the stage before calibration (dispatch excluded, and the
    time outside every stage the estimate carries on it, the per-step overhead)."""
    after_s: float
    """After calibration, likewise."""

    @property
    def error_before(self) -> float | None:
        return _rel(self.before_s, self.measured_check_s)

    @property
    def error_after(self) -> float | None:
        return _rel(self.after_s, self.measured_check_s)


class Calibration(BaseModel):
    """What ``rlplex calibrate`` fitted and how well it predicts the held-out steps."""

    model_config = ConfigDict(frozen=True)

    record: str
    """The record file fitted, as given."""
    format: str
    """The format the record was read as (``rlplex``, ``verl``, ``roll``, ``summary``,
    ``history`` ...), detected unless given."""
    fit_steps: tuple[int, ...]
    """Step numbers fitted on: after the warm-up steps, the first ``--fit-steps`` (default:
    half of the rest)."""
    check_steps: tuple[int, ...]
    """Step numbers held out to check the fit; empty when all are fitted on (the errors are
    then measured on the fitting steps, with a warning)."""
    stages: tuple[StageFit, ...]
    """One fit per stage of the pipeline, in pipeline order."""
    efficiency: dict[str, Any] = Field(default_factory=dict)
    """Fitted efficiency factors (kinds and ``stages``)."""
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    """Fitted seconds of stages the config gives."""
    dispatch_s: float = 0.0
    """Fitted ``cluster.dispatch_s``, seconds added to every run and weight-sync op so that the
    planned period matches the record's; 0 when not fitted (``overhead_ratio`` was, or the
    record has no step times) or when the plan is already as long."""
    overhead_ratio: float | None = None
    """The factor on the estimated per-step overhead (``step_overhead_s``,
    ``sequence_overhead_s``) when the plan with the fitted stages was longer than the record's
    step; None when ``dispatch_s`` was fitted instead."""
    measured_period_s: float
    """Measured period over the held-out steps."""
    period_before_s: float
    """Planned period before calibration."""
    period_after_s: float
    """Planned period with the fit applied."""
    warnings: tuple[str, ...] = ()
    """What the fit could not do or assumed (no held-out steps, stages not recorded, a plan
    that stays longer than the record ...), the record's own warnings first; empty: none."""
    lengths: tuple[str, ...] = ()
    """The record's lengths the ``after`` figures were planned with, as ``--set`` overrides
    (``workload.response_tokens.mean=665.6`` ...); empty: the config's own. The costs file
    holds no lengths (they are the run's, not the hardware's): ``plan --costs`` of the
    config plans its own lengths unless given these."""

    @property
    def period_error_before(self) -> float | None:
        return _rel(self.period_before_s, self.measured_period_s)

    @property
    def period_error_after(self) -> float | None:
        return _rel(self.period_after_s, self.measured_period_s)

    def costs_document(self, base: dict[str, Any] | None = None) -> dict[str, Any]:
        """The costs file (``--costs``) of this fit, merged over ``base``."""
        doc: dict[str, Any] = {k: dict(v) for k, v in (base or {}).items()}
        stages = doc.setdefault("stages", {})
        for name, seconds in self.stage_seconds.items():
            stages[name] = {**stages.get(name, {}), "seconds": round(seconds, 6)}
        if not stages:
            doc.pop("stages")
        if self.efficiency:
            doc["efficiency"] = {**doc.get("efficiency", {}), **self.efficiency}
        doc["cluster"] = {**doc.get("cluster", {}), "dispatch_s": round(self.dispatch_s, 6)}
        return doc

    def to_json(self) -> dict[str, Any]:
        return {
            "record": self.record,
            "format": self.format,
            "fit_steps": list(self.fit_steps),
            "check_steps": list(self.check_steps),
            "stages": {
                s.stage: {
                    "how": s.how,
                    "measured_fit_s": s.measured_fit_s,
                    "measured_check_s": s.measured_check_s,
                    "before_s": s.before_s,
                    "after_s": s.after_s,
                    "error_before": s.error_before,
                    "error_after": s.error_after,
                }
                for s in self.stages
            },
            "efficiency": self.efficiency,
            "stage_seconds": self.stage_seconds,
            "dispatch_s": self.dispatch_s,
            "overhead_ratio": self.overhead_ratio,
            "period": {
                # 0: the record has no step times (the table prints "-"): nothing measured.
                "measured_s": self.measured_period_s if self.measured_period_s > 0 else None,
                "before_s": self.period_before_s,
                "after_s": self.period_after_s,
                "error_before": self.period_error_before,
                "error_after": self.period_error_after,
            },
            "warnings": list(self.warnings),
            "lengths": list(self.lengths),
        }


def _rel(predicted: float, measured: float | None) -> float | None:
    if measured is None or measured <= 0:
        return None
    return predicted / measured - 1.0


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def split_steps(
    steps: Sequence[int], fit_steps: int | None, warmup: int | None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(fitting steps, held-out steps): after ``warmup`` steps, the first ``fit_steps``.

    Defaults: one warm-up step when the record has 4 or more steps, and half
    of the rest to fit.

    Raises:
        ConfigError: too few steps for the split asked.
    """
    ordered = sorted(steps)
    if warmup is None:
        warmup = 1 if len(ordered) >= 4 else 0
    usable = ordered[warmup:]
    if not usable:
        raise ConfigError(
            f"the record has {len(ordered)} steps, none left after {warmup} warm-up steps",
            field="--warmup",
            value=warmup,
        )
    if fit_steps is None:
        fit_steps = max(1, len(usable) // 2)
    if fit_steps < 1 or fit_steps > len(usable):
        raise ConfigError(
            f"must be between 1 and {len(usable)} (the record's steps after warm-up)",
            field="--fit-steps",
            value=fit_steps,
        )
    return tuple(usable[:fit_steps]), tuple(usable[fit_steps:])


def recorded_period(run: RecordedRun, steps: Sequence[int]) -> float | None:
    """Mean step period over ``steps``.

    An rlplex record: :func:`~rlplex.timeline.periods.period_over_steps` of its
    step ends; other logs: their recorded step time.
    """
    if run.format == "rlplex" and run.source:
        period = period_over_steps(step_ends(Timeline.read_jsonl(run.source)), steps)
        if period is not None:
            return period
    values = [run.step_s[s] for s in steps if s in run.step_s]
    return _mean(values)


def _estimated_terms(
    cfg: Config,
) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, float]]:
    """Each estimated stage's named terms as the config's placement prices them, the
    seconds of each that stand for time outside every stage (``outside_s``), and a generate
    stage's waits for its environment (in its latency term; ``env_wait_s``)."""
    from rlplex.estimate.estimator import estimate_config

    stages = estimate_config(cfg).stages
    return (
        {name: dict(est.terms) for name, est in stages.items()},
        {name: est.outside_s for name, est in stages.items()},
        {name: float(est.detail.get("env_wait_s") or 0.0) for name, est in stages.items()},
    )


def _with_efficiency(cfg: Config, kind: str, ratio: float) -> Config:
    """``cfg`` with ``kind``'s fitted parameters at ``ratio``: its rates divided by it, its
    times multiplied."""
    from rlplex.estimate.context import efficiency_value
    from rlplex.resources.inputs import Efficiency

    eff = cfg.efficiency
    update = {key: efficiency_value(eff, key) / ratio for key in _KIND_KEYS[kind]}
    update |= {key: efficiency_value(eff, key) * ratio for key in _KIND_TIMES.get(kind, ())}
    return cfg.model_copy(update={"efficiency": (eff or Efficiency()).model_copy(update=update)})


def _estimated_stage_seconds(cfg: Config) -> dict[str, float]:
    from rlplex.estimate.estimator import estimate_config

    return {name: est.seconds or 0.0 for name, est in estimate_config(cfg).stages.items()}


def _kind_seconds(cfg: Config, kind: str, names: Sequence[str], ratio: float) -> float:
    seconds = _estimated_stage_seconds(_with_efficiency(cfg, kind, ratio))
    return sum(seconds[n] for n in names)


def _solve_ratio(seconds: Callable[[float], float], target: float, guess: float) -> float | None:
    """The ratio at which ``seconds`` (non-decreasing in it) meets ``target``, from ``guess``.

    The stage is re-estimated at each trial: time outside the fitted terms is not fixed
    (exposed communication and host launches shrink as compute grows), so the terms'
    linear ratio is only where the search starts. None when even a ratio near 0 leaves the
    stage above ``target`` (the unfitted terms alone exceed it).
    """
    if target <= 0:
        return None
    lo = hi = None
    low, high = _RATIO_BOUNDS
    ratio = min(max(guess, low), high)
    for _ in range(80):
        value = seconds(ratio)
        if abs(value - target) <= 1e-7 * target:
            return ratio
        if value < target:
            lo = ratio
            ratio = ratio * 2.0 if hi is None else (lo * hi) ** 0.5
        else:
            hi = ratio
            ratio = ratio / 2.0 if lo is None else (lo * hi) ** 0.5
        if ratio < low or ratio > high:
            return None
    return ratio


_RATIO_BOUNDS = (1e-4, 1e4)
"""The time ratios a fit searches: beyond them the record and the config describe different
runs."""


def _require_devices(cfg: Config, file: str | Path) -> None:
    """Refuse a role placed by the search (``devices: auto``): the record was made on the
    devices the run used, and the physical parameters fitted to it depend on them (a
    generation's decode floor on 8 GPUs is not the one on 16). A searched placement is
    where rlplex would run it, not where it ran.

    Raises:
        ConfigError: naming the first such role.
    """
    for name, role in cfg.roles.items():
        if role.is_gpu and role.auto:
            raise ConfigError(
                "calibrate fits the record to the devices the run used, and this role's are"
                f" left to the search: give them (--set roles.{name}.devices=0-7, the run's"
                " GPUs)",
                field=f"roles.{name}.devices",
                value="auto",
                file=str(file),
            )


def _plan_period(cfg: Config) -> float:
    from rlplex.plan import make_plan

    return make_plan(cfg).period_s


def _with_costs(
    config: str | Path,
    doc: dict[str, Any],
    overrides: Sequence[str],
    fmt: str | None,
    env: Mapping[str, str] | None = None,
) -> Config:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
        name = fh.name
    try:
        return load_config(config, overrides=overrides, format=fmt, costs=name, env=env)
    finally:
        Path(name).unlink(missing_ok=True)


def calibrate(
    record: str | Path,
    config: str | Path,
    *,
    overrides: Sequence[str] = (),
    config_format: str | None = None,
    costs: str | Path | None = None,
    record_format: str | None = None,
    skip_bad_lines: bool = False,
    fit_steps: int | None = None,
    warmup: int | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Calibration, dict[str, Any]]:
    """Fit ``config``'s costs to ``record``; returns the fit and its costs document. ``env``:
    the variables a launch script ``config`` starts with (``--env``).

    Raises:
        ConfigError: an unreadable record or config, no stage of the config in
            the record, or too few steps.
    """
    from rlplex.estimate.context import efficiency_value, is_rule_reward, stage_kind
    from rlplex.plan.costs import config_placement, stage_work_seconds
    from rlplex.resources.importers.common import check_costs
    from rlplex.resources.yaml_io import load_yaml_file

    base_doc: dict[str, Any] = {}
    if costs is not None:
        base_doc = check_costs(load_yaml_file(costs), str(costs))
    run = import_record(record, format=record_format, skip_bad_lines=skip_bad_lines)
    require_stage_timings(run)
    fit, check = split_steps(run.step_numbers, fit_steps, warmup)
    # Fitted with the lengths the run had: with the config's guess instead, the physical
    # parameters would absorb the difference and carry it to every other run.
    cfg, measured_lengths, lengths_note = load_with_lengths(
        lambda extra: load_config(
            config,
            overrides=(*extra, *overrides),
            format=config_format,
            costs=costs,
            env=env,
        ),
        run,
        overrides,
        fit,
    )
    _require_devices(cfg, config)
    # Joint timers divided by the config's own modelled seconds: each member keeps the
    # joint figure's measured/modelled ratio, so a fitted efficiency is the same whatever
    # the true division (rlplex.timeline.joint).
    shared = {member_stage(m)[0]: key for key, members in run.joint.items() for m in members}
    run = split_joint(run, cfg)
    warnings = [*run.warnings, *config_warnings(cfg)]
    user_overrides = tuple(overrides)
    overrides = (*measured_lengths, *overrides)
    if lengths_note:
        warnings.append(lengths_note)
    check_or_fit = check or fit
    if not check:
        warnings.append("no held-out steps: the errors are measured on the fitting steps")
    placement = config_placement(cfg)
    recorded = set(run.stage_names())
    if not recorded & set(cfg.pipeline.names):
        raise ConfigError(
            f"no stage of the config is in the record (record: {', '.join(sorted(recorded))};"
            f" config: {', '.join(cfg.pipeline.names)})",
            file=str(record),
        )

    def mean_over(stage: str, steps: Sequence[int]) -> float | None:
        return _mean([run.steps[s][stage] for s in steps if stage in run.steps.get(s, {})])

    def median_over(stage: str, steps: Sequence[int]) -> float | None:
        values = [run.steps[s][stage] for s in steps if stage in run.steps.get(s, {})]
        return statistics.median(values) if values else None

    before = {s.name: stage_work_seconds(cfg, s, placement) for s in cfg.pipeline.stages}
    # The fit takes each stage's median over the fitted steps: one step slowed by the
    # machine (a shared CPU, a garbage collection) must not move the whole fit.
    measured = {s.name: median_over(s.name, fit) for s in cfg.pipeline.stages}
    # Estimated stages: efficiency per kind, then per stage.
    eff = cfg.efficiency
    by_kind: dict[str, list[str]] = {}
    for stage in cfg.pipeline.stages:
        if cfg.is_estimated(f"pipeline.stages.{stage.name}.seconds") and measured[stage.name]:
            kind = stage_kind(stage, cfg.roles.get(stage.role or ""))
            # A judge generates on its engine: the same physical parameters as generation,
            # one ratio for both.
            kind = "generate" if kind == "judge" else kind
            if kind in _KIND_KEYS:
                by_kind.setdefault(kind, []).append(stage.name)
    efficiency: dict[str, Any] = {}
    after = dict(before)
    terms, outside, env_waits = _estimated_terms(cfg) if by_kind else ({}, {}, {})
    for kind, names in by_kind.items():
        # Physical parameters only, one ratio per kind: the time of the terms they scale
        # must become what was measured once the unscaled terms are taken off. A recorded
        # stage holds none of the time outside every stage that the estimate carries on it
        # (``outside_s``, the per-step overhead): that stays in the planned stage, unfitted.
        # Nor does any parameter price a trajectory's waits for its environment.
        scaled = {
            n: sum(terms[n].get(t, 0.0) for t in _SCALED_TERMS[kind]) - env_waits.get(n, 0.0)
            for n in names
        }
        fixed = {n: max(0.0, before[n] - scaled[n]) for n in names}
        want = sum((measured[n] or 0.0) - (fixed[n] - outside[n]) for n in names)
        have = sum(scaled.values())
        target = sum((measured[n] or 0.0) + outside[n] for n in names)
        ratio = _solve_ratio(
            lambda r, kind=kind, names=names: _kind_seconds(cfg, kind, names, r),
            target,
            want / have if have > 0 and want > 0 else 1.0,
        )
        if ratio is None:
            below = _kind_seconds(cfg, kind, names, _RATIO_BOUNDS[0]) > target
            warnings.append(
                f"{kind} stages ({', '.join(names)}): the measured time is "
                + (
                    "below the estimated communication and overhead alone"
                    if below
                    else f"beyond what {_RATIO_BOUNDS[1]:g}x the estimate reaches"
                )
                + "; not fitted"
            )
            continue
        too_long = [
            key for key in _KIND_TIMES.get(kind, ()) if efficiency_value(eff, key) * ratio > 10
        ]
        if too_long:
            warnings.append(
                f"{kind} stages ({', '.join(names)}): the measured time needs {ratio:.3g}x the"
                f" estimate, which puts {', '.join(too_long)} above 10 s; not fitted"
            )
            continue
        bound = {max(terms[n], key=terms[n].__getitem__) for n in names if terms[n]}
        if not 0.5 <= ratio <= 2.0 and bound - {"compute", "memory", "latency"}:
            warnings.append(
                f"{kind} stages ({', '.join(names)}): bound by {', '.join(sorted(bound))} here,"
                f" which no fitted parameter prices; the fitted {kind} parameters moved"
                f" {ratio:.2f}x to absorb it and will not carry to other placements"
            )
        for key in _KIND_KEYS[kind]:
            efficiency[key] = round(efficiency_value(eff, key) / ratio, 6)
        for key in _KIND_TIMES.get(kind, ()):
            efficiency[key] = round(efficiency_value(eff, key) * ratio, 9)
        fitted = _estimated_stage_seconds(_with_efficiency(cfg, kind, ratio))
        for n in names:
            after[n] = fitted[n]
    # A recorded rule-reward stage is the per-sequence controller work the estimate prices
    # at sequence_overhead_s: its measured seconds fit that parameter (what remains of the
    # per-step overhead is then step_overhead_s alone).
    overhead_keys = _OVERHEAD_KEYS
    unfitted: set[str] = set()  # recorded, but only as a share of a joint timer
    for stage in cfg.pipeline.stages:
        name = stage.name
        if (
            measured[name]
            and before[name] > 0
            and cfg.is_estimated(f"pipeline.stages.{name}.seconds")
            and is_rule_reward(stage, cfg.roles.get(stage.role or ""))
        ):
            key = "sequence_overhead_s"
            if name in shared:
                # Its figure is the split's share of a timer it shares with generation (NeMo
                # RL's generation scores each response inside the rollout): the estimate's
                # own proportion times generation's ratio, no measure of this parameter.
                warnings.append(
                    f"{name}: its seconds are a share of the joint timer {shared[name]}"
                    f" divided by the estimate, not a measurement: {key} not fitted"
                )
                unfitted.add(name)
                continue
            scale = float(measured[name] or 0.0) / before[name]
            efficiency[key] = round(efficiency_value(eff, key) * scale, 9)
            after[name] = float(measured[name] or 0.0)
            overhead_keys = ("step_overhead_s",)
            break
    if any(v > 1.0 for k, v in efficiency.items() if k in ("train", "forward", "prefill")):
        warnings.append(
            "a fitted efficiency exceeds 1 (more than the GPU preset's peak): the preset's"
            " figures are too low for this machine (expected with the nominal 'cpu' preset)"
        )
    # Given stages (and weight syncs the record has): their measured seconds.
    stage_seconds: dict[str, float] = {}
    for stage in cfg.pipeline.stages:
        name = stage.name
        if measured[name] is None:
            continue
        # An estimated sync is not a fitted kind: the record's seconds are what it took.
        if cfg.is_estimated(f"pipeline.stages.{name}.seconds") and not stage.is_weight_sync:
            continue
        if stage.is_weight_sync and stage.seconds is None and name not in recorded:
            continue
        d0_scale = before[name] / float(stage.seconds) if stage.seconds else 1.0
        stage_seconds[name] = measured[name] / d0_scale if d0_scale else measured[name]
        after[name] = measured[name]
    missing = [s for s in cfg.pipeline.names if measured[s] is None]
    if missing:
        warnings.append("not in the record (kept as the config has them): " + ", ".join(missing))
    # A recorded stage the config lacks (a critic the config has no role for) fits nothing,
    # but its time stays in the recorded step that dispatch_s (or the per-step overhead) is
    # fitted to: say so, as replay does, or a record of another run passes unnoticed.
    extra = [s for s in run.stage_names() if s not in cfg.pipeline.names]
    if extra:
        seconds = ", ".join(f"{s} {mean_over(s, fit) or 0.0:.4g} s" for s in extra)
        warnings.append(
            f"recorded stage(s) not in the config, not fitted: {seconds} a step, left in the"
            " recorded step time that dispatch_s (or the per-step overhead) is fitted to; does"
            " the config describe the recorded run?"
        )
    # dispatch_s: the planned period must equal the measured one over the fitting steps.
    target = recorded_period(run, fit)
    period_before = _plan_period(cfg)
    draft = Calibration(
        record=str(record), format=run.format, fit_steps=fit, check_steps=check, stages=(),
        efficiency=efficiency, stage_seconds=stage_seconds, dispatch_s=0.0,
        measured_period_s=0.0, period_before_s=period_before, period_after_s=0.0,
    )  # fmt: skip
    dispatch = 0.0
    if target is not None:

        def period_of(fit: Calibration) -> float:
            doc = fit.costs_document(base_doc)
            return _plan_period(_with_costs(config, doc, overrides, config_format, env))

        ratio = _fit_overhead(period_of, draft, target, cfg, overhead_keys)
        if ratio is not None:
            efficiency = {
                **efficiency,
                **{k: round(efficiency_value(eff, k) * ratio, 9) for k in overhead_keys},
            }
            draft = draft.model_copy(update={"efficiency": efficiency, "overhead_ratio": ratio})
            warnings.append(
                "the plan with the fitted stages is longer than the record's step: the"
                f" estimated per-step overhead ({', '.join(overhead_keys)}) scaled by"
                f" {ratio:.3g}"
            )
        else:
            dispatch = _fit_dispatch(period_of, draft, target)
    else:
        warnings.append("the record has no step times: dispatch_s not fitted (0)")
    final = draft.model_copy(update={"dispatch_s": dispatch})
    doc = final.costs_document(base_doc)
    cfg_fitted = _with_costs(config, doc, overrides, config_format, env)
    # The held-out steps are predicted with the lengths they had (responses grow over a run):
    # with the fitting steps' instead, the check would count the growth as the model's error.
    cfg_after, check_note = cfg_fitted, None
    planned_lengths = tuple(measured_lengths)
    if measured_lengths and check:
        cfg_after, check_lengths, note = load_with_lengths(
            lambda extra: _with_costs(config, doc, (*extra, *user_overrides), config_format, env),
            run,
            user_overrides,
            check,
        )
        if check_lengths and check_lengths != measured_lengths:
            check_note = note
            planned_lengths = tuple(check_lengths)
            # The estimate before the fit is checked on the same lengths as after it.
            cfg_before = load_config(
                config, overrides=(*check_lengths, *user_overrides), format=config_format,
                costs=costs, env=env,
            )  # fmt: skip
            before = {
                s.name: stage_work_seconds(cfg_before, s, placement)
                for s in cfg_before.pipeline.stages
            }
            outside = _estimated_terms(cfg_before)[1] if by_kind else {}
            period_before = _plan_period(cfg_before)
        else:  # nothing of their own to predict them with: the fitting steps' lengths
            cfg_after = cfg_fitted
    if check_note:
        warnings.append(check_note.replace("the record's", "the held-out steps' own", 1))
    # A recorded stage holds none of the time outside every stage that the estimate carries
    # on it (the per-step overhead on the policy's train stage): the errors compare the
    # rest with what was measured.
    outside_after = _estimated_terms(cfg_after)[1] if by_kind else {}
    fits = tuple(
        StageFit(
            stage=n,
            how=(
                "not recorded"
                if measured[n] is None
                else "not fitted"
                if n in unfitted
                else "efficiency"
                if cfg.is_estimated(f"pipeline.stages.{n}.seconds")
                and not cfg.pipeline.stage(n).is_weight_sync
                else "seconds"
            ),
            measured_fit_s=measured[n],
            measured_check_s=mean_over(n, check_or_fit),
            before_s=before[n] - outside.get(n, 0.0),
            after_s=stage_work_seconds(cfg_after, cfg_after.pipeline.stage(n), placement)
            - outside_after.get(n, 0.0),
        )
        for n in cfg.pipeline.names
    )
    period_after = _plan_period(cfg_after)
    period_fitted = period_after if cfg_after is cfg_fitted else _plan_period(cfg_fitted)
    if target is not None and period_fitted > target * 1.01:
        warnings.append(
            f"the plan stays {period_fitted / target - 1:.1%} longer than the record's step"
            f" ({period_fitted:.3f} s against {target:.3f} s): no fitted parameter moves the"
            " rest (a stage's terms that are not fitted, or a given seconds)"
        )
    result = final.model_copy(
        update={
            "period_before_s": period_before,
            "stages": fits,
            "measured_period_s": recorded_period(run, check_or_fit) or 0.0,
            "period_after_s": period_after,
            "warnings": tuple(warnings),
            "lengths": planned_lengths,
        }
    )
    return result, doc


_OVERHEAD_KEYS = ("step_overhead_s", "sequence_overhead_s")
"""The estimated per-step overhead: estimated time no recorded stage holds (unless the record
has the rule-reward stage, whose measured seconds fit ``sequence_overhead_s``)."""


def _fit_overhead(
    period_of: Callable[[Calibration], float],
    draft: Calibration,
    target: float,
    cfg: Config,
    keys: Sequence[str] = _OVERHEAD_KEYS,
) -> float | None:
    """The ratio in [0, 1) by which the estimated per-step overhead is multiplied so that the
    planned period falls to ``target``; None when the plan is not longer than ``target`` (then
    ``dispatch_s`` covers the rest) or the overhead does not move the period.

    Time the plan lacks may be anything the model does not price (driver work between ops:
    ``dispatch_s``); time it has in excess, once every recorded stage is fitted, can only be
    estimated time outside them: the framework's per-step and per-sequence overhead.
    """
    from rlplex.estimate.context import efficiency_value

    base = {k: efficiency_value(cfg.efficiency, k) for k in keys}

    def period(r: float) -> float:
        eff = {**draft.efficiency, **{k: v * r for k, v in base.items()}}
        return period_of(draft.model_copy(update={"efficiency": eff}))

    p1 = period(1.0)
    # Within the bisection's precision of the target: nothing to lower (a fit calibrated
    # again on its own record stays as it is).
    if p1 <= target * (1 + 1e-4):
        return None
    p0 = period(0.0)
    if p0 >= p1 - 1e-9 * p1:
        return None
    if p0 >= target:
        return 0.0
    # The period is piecewise linear in r (the overhead moves from one path to another):
    # bisection, to a thousandth of the ratio.
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-3:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if period(mid) < target else (lo, mid)
    return (lo + hi) / 2


def _fit_dispatch(
    period_of: Callable[[Calibration], float], draft: Calibration, target: float
) -> float:
    """The dispatch_s >= 0 whose planned period matches ``target`` (secant steps)."""

    def period(d: float) -> float:
        return period_of(draft.model_copy(update={"dispatch_s": d}))

    p0 = period(0.0)
    if p0 >= target:
        return 0.0
    x0, y0 = 0.0, p0 - target
    x1 = (target - p0) / 4  # at least a few ops per step lie on the critical path
    y1 = period(x1) - target
    for _ in range(6):
        if abs(y1) < 1e-6 * target or y1 == y0:
            break
        x0, y0, x1 = x1, y1, max(0.0, x1 - y1 * (x1 - x0) / (y1 - y0))
        y1 = period(x1) - target
    return x1
