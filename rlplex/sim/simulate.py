"""Discrete-event execution of a plan for many steps, with modelled or recorded durations.

A plan fixes the order of ops on every device and what each op waits for
(its :class:`~rlplex.plan.pattern.StepPattern`, which the executor's schedule
unrolls too); the simulator keeps that order and recomputes the times when durations change (a
recorded slow ``generate``, jitter), so a slower op delays exactly the ops
that depend on it. It takes the plan's steady-state step as a pattern (its
ops, and its dependencies as (step offset, op) pairs), precomputes an order
in which every dependency is computed before its user, then runs N steps as
a loop over plain lists and floats: 10,000 steps of a 10-stage plan take well
under a second.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from rlplex.config import Config
from rlplex.errors import ConfigError
from rlplex.plan.costs import stage_seconds
from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, step_prefix
from rlplex.plan.model import Plan
from rlplex.plan.pattern import (
    StepPattern,
    StepPatternError,
    device_order_repeats,
    step_pattern,
)
from rlplex.plan.steady import max_cycle_ratio
from rlplex.resources.cluster import BYTES_PER_GB

__all__ = [
    "Pattern",
    "PatternError",
    "check_pattern",
    "device_order_repeats",
    "drain_steps",
    "extract_pattern",
    "run_pattern",
    "simulate",
    "steady_period",
    "step_gaps",
]
from rlplex.timeline.periods import steady_period, step_gaps
from rlplex.timeline.record import Event, Timeline

Durations = Callable[[int, str], "float | None"] | Mapping[int, Mapping[str, float]]
"""Seconds of a stage at a step: ``f(step, stage)`` or ``{step: {stage: seconds}}``."""


@dataclass(frozen=True)
class Pattern:
    """The repeating ops of a plan, ready for fast replay.

    What each op does and every edge are the :class:`StepPattern`'s (``step``);
    the pattern adds only the simulator's own figures: modelled durations,
    event fields, and the order rounds compute the ops in.
    """

    step: StepPattern
    """The step pattern: each op's :class:`~rlplex.plan.ids.OpWork`, its edges, the unrolling."""
    fields: tuple[dict, ...]
    """Constant event fields of each op (kind, stage, role, state, devices, bytes)."""
    base: tuple[float, ...]
    """Modelled duration of each op."""
    stages: tuple[str | None, ...]
    """Stage of run / weight_sync ops (their durations can be overridden)."""
    skew: tuple[int, ...]
    """Round offset of each op: op j of step n is computed in round n + skew[j]."""
    order: tuple[int, ...]
    """Op indices in the order they are computed within a round."""

    @property
    def keys(self) -> tuple[str, ...]:
        """Op ids without the ``s{step}/`` prefix."""
        return tuple(op.name for op in self.step.ops)

    @property
    def deps(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """For each op: (step offset, op index) it waits for."""
        return tuple(op.deps for op in self.step.ops)


class PatternError(StepPatternError):
    """A plan's pattern step does not repeat into a valid schedule (see :func:`check_pattern`)."""


def check_pattern(plan: Plan, pattern: Pattern) -> None:
    """Raise unless repeating ``pattern`` (``plan.pattern_step``) is a valid schedule.

    Raises:
        PatternError: a device's order differs between steps (two ops would
            overlap on it), or the pattern waits for itself.
    """
    try:
        pattern.step.check_repeats()
    except StepPatternError as exc:
        raise PatternError(str(exc)) from None
    if not pattern.step.barrier and max_cycle_ratio(pattern.base, pattern.deps) is None:
        raise PatternError(f"step {plan.pattern_step} of the plan waits for itself when repeated")


def extract_pattern(plan: Plan, config: Config, step: StepPattern | None = None) -> Pattern:
    """The steady-state step of ``plan`` ready for fast replay, from its :class:`StepPattern`.

    The ops and every edge (the plan's, device order, staleness, barrier) are
    the step pattern's, the one the executor's schedule unrolls too; only the
    durations of stages come from ``config``'s cost model.
    """
    sp = step if step is not None else step_pattern(plan)
    placement = {r: tuple(d) for r, d in plan.placement.items()}
    base, stages, fields = [], [], []
    for op in sp.ops:
        work = op.work
        if work.stage is not None and work.kind in COMPUTE_KINDS:
            stage = config.pipeline.stage(work.stage)
            base.append(stage_seconds(config, stage, placement))
            stages.append(work.stage)
        else:
            base.append(op.duration_s)
            stages.append(None)
        f = {"kind": work.kind, "devices": work.devices, "bytes": round(work.gb * BYTES_PER_GB)}
        for name in ("stage", "role", "state"):
            value = getattr(work, name)
            if value is not None:
                f[name] = value
        fields.append(f)
    skew, order = _skew_and_order(len(sp.ops), [op.deps for op in sp.ops])
    return Pattern(
        step=sp,
        fields=tuple(fields),
        base=tuple(base),
        stages=tuple(stages),
        skew=tuple(skew),
        order=tuple(order),
    )


def _skew_and_order(n: int, deps: list[tuple[tuple[int, int], ...]]) -> tuple[list[int], list[int]]:
    """Rounds and within-round order so that every dependency is computed first.

    Op j of step s waits for op j' of step s + off; computing (s, j) in round
    s + skew[j] needs skew[j] >= skew[j'] + off (a longest-path problem on the
    pattern), and within a round, edges with equality order the ops.
    """
    skew = [0] * n
    for _ in range(n + 1):
        changed = False
        for j in range(n):
            for off, k in deps[j]:
                if skew[k] + off > skew[j]:
                    skew[j] = skew[k] + off
                    changed = True
        if not changed:
            break
    low = min(skew, default=0)
    skew = [s - low for s in skew]
    # Topological order of same-round edges (Kahn, ties by index: deterministic).
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for j in range(n):
        for off, k in deps[j]:
            if skew[k] + off == skew[j] and k != j:
                indeg[j] += 1
                succ[k].append(j)
    ready = sorted(j for j in range(n) if indeg[j] == 0)
    order: list[int] = []
    while ready:
        j = ready.pop(0)
        order.append(j)
        for s in succ[j]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
                ready.sort()
    if len(order) < n:  # an inconsistent pattern: keep the remaining ops in plan order
        order += [j for j in range(n) if j not in order]
    return skew, order


def simulate(
    plan: Plan,
    config: Config,
    *,
    steps: int,
    durations: Durations | None = None,
    jitter: float = 0.0,
    seed: int = 0,
    jitter_transfers: bool = False,
) -> Timeline:
    """Execute ``plan``'s op pattern for ``steps`` steps in its per-device order.

    Args:
        plan: a plan from :func:`rlplex.plan.make_plan` (sync or async).
        config: the config it was made from (for modelled stage durations).
        steps: number of steps to run.
        durations: recorded seconds per step and stage (``durations[step][stage]``
            or ``durations(step, stage)``; None keeps the model); weight_sync too.
            Offloads and reloads are looked up by their op id without the step
            prefix (``offload/actor_train/optimizer``).
        jitter: each stage duration is multiplied by a uniform factor in
            ``[1 - jitter, 1 + jitter]``.
        seed: seed of the jitter.
        jitter_transfers: jitter offload and reload durations too (off by
            default, so that a jittered record replays with modelled transfers).

    Raises:
        PatternError: the plan's pattern step does not repeat into a valid
            schedule (see :func:`check_pattern`).
        ConfigError: ``steps`` below 1, ``jitter`` negative or not finite, or a recorded
            duration negative or not finite.

    Returns:
        A Timeline with one event per op, ``metrics[step]["step_s"]`` (time
        between the ends of consecutive steps) and ``meta["period_s"]`` (mean
        step time over the second half of the run, without the last steps of
        an async run that drain the pipeline: :func:`steady_period`).
    """
    if steps < 1:
        raise ConfigError("must be at least 1 step", field="steps", value=steps)
    if not (math.isfinite(jitter) and jitter >= 0.0):
        raise ConfigError("must be a finite share >= 0", field="jitter", value=jitter)
    pat = extract_pattern(plan, config)
    check_pattern(plan, pat)
    lookup = _duration_lookup(durations)
    rng = random.Random(seed)
    base = pat.base
    # The name durations are looked up by: the stage, or a transfer's op key.
    stage_of = [
        st if st is not None else (op.name if op.work.kind in TRANSFER_KINDS else None)
        for st, op in zip(pat.stages, pat.step.ops, strict=True)
    ]
    jittered = [st is not None or jitter_transfers for st in pat.stages]

    def duration(n: int, j: int) -> float:
        d = base[j]
        stage = stage_of[j]
        if stage is not None:
            if lookup is not None:
                rec = lookup(n, stage)
                if rec is not None:
                    d = float(rec)
                    if not (math.isfinite(d) and d >= 0):  # a record no run can have
                        raise ConfigError(
                            f"step {n}, stage {stage!r}: expected a finite duration >= 0 s",
                            field="durations", value=rec,
                        )  # fmt: skip
            if jitter and jittered[j]:
                d *= 1.0 + jitter * (2.0 * rng.random() - 1.0)
                if d < 0:
                    d = 0.0
        return d

    starts, ends, step_end = run_pattern(pat, steps, duration)
    return _timeline(plan, pat, starts, ends, step_end, steps)


def run_pattern(
    pattern: Pattern, steps: int, duration: Callable[[int, int], float]
) -> tuple[list[list[float]], list[list[float]], list[float]]:
    """Start and end of every op of ``steps`` steps of ``pattern``, and each step's end.

    Op j of step n starts when everything it waits for has ended (and, with a
    barrier, the previous step) and takes ``duration(n, j)``. The ops are
    computed round by round in ``pattern.order``, the order in which
    ``duration`` is called (so a jittered duration draws the same sequence).
    """
    n_ops = len(pattern.stages)
    starts = [[0.0] * n_ops for _ in range(steps)]
    ends = [[0.0] * n_ops for _ in range(steps)]
    step_end = [0.0] * steps
    skew, order, barrier = pattern.skew, pattern.order, pattern.step.barrier
    # The one unrolling (StepPattern.deps_at), inlined for speed: op j's edges
    # with ``n`` steps before and ``last - n`` left, kept when they point inside the run.
    within = pattern.step.deps_within
    deps, reach, back = pattern.deps, pattern.step.op_reach, pattern.step.op_back
    last = steps - 1
    for rnd in range(steps + max(skew, default=0)):
        for j in order:
            n = rnd - skew[j]
            if n < 0 or n >= steps:
                continue
            t = step_end[n - 1] if barrier and n > 0 else 0.0
            room = last - n
            for off, k in deps[j] if room >= reach[j] and n >= back[j] else within(j, n, room):
                s = n + off
                if 0 <= s < steps:
                    e = ends[s][k]
                    if e > t:
                        t = e
            end = t + duration(n, j)
            starts[n][j] = t
            ends[n][j] = end
            if end > step_end[n]:
                step_end[n] = end
    return starts, ends, step_end


def drain_steps(plan: Plan) -> int:
    """Last steps of an async run that drain the pipeline: k + 1 (0 in sync mode).

    Generation runs up to k steps ahead, so the last k + 1 steps of a run lack
    the later generations that share their devices in the steady state (when
    generation and training share GPUs the last step ends a whole ``generate``
    early): their step times are no steady-state figure.
    """
    if plan.mode == "sync" or plan.unrolled_steps <= 1:
        return 0
    return plan.staleness + 1


def _duration_lookup(durations: Durations | None) -> Callable[[int, str], float | None] | None:
    if durations is None:
        return None
    if callable(durations):
        return durations
    table = durations

    def lookup(step: int, stage: str) -> float | None:
        row = table.get(step)
        return None if row is None else row.get(stage)

    return lookup


def _timeline(plan, pat: Pattern, starts, ends, step_end, steps: int) -> Timeline:
    events = []
    construct = Event.model_construct
    keys = pat.keys
    order = sorted(range(len(keys)), key=lambda j: (pat.skew[j], j))
    for n in range(steps):
        prefix = step_prefix(n)
        row_s, row_e = starts[n], ends[n]
        for j in order:
            events.append(
                construct(
                    step=n,
                    op=prefix + keys[j],
                    start_s=row_s[j],
                    end_s=row_e[j],
                    **pat.fields[j],
                )
            )
    times = step_gaps(step_end)
    meta = {
        "source": "simulate",
        "mode": plan.mode,
        "steps": steps,
        "period_s": steady_period(times, drain_steps(plan)),
        "plan_period_s": plan.period_s,
        "lower_bound_s": plan.lower_bound_s,
    }
    metrics = {n: {"step_s": t} for n, t in enumerate(times)}
    return Timeline.model_construct(events=tuple(events), metrics=metrics, meta=meta)
