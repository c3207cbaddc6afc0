"""Divide a record's joint timers among the stages of the config it meets.

Some frameworks time two rlplex stages with one timer: NeMo RL's
``policy_and_reference_logprobs`` is the old and the reference log-prob passes, run one
after the other on the same workers; its ``generation`` is the rollout with the
environment's scoring inside it. The importer keeps such a timer under one joint key
(:attr:`~rlplex.timeline.importers.base.RecordedRun.joint`), because the log does not say
how it divides. Wherever a record meets a config (``replay``, ``whatif`` and its
``--fit-from``, ``calibrate``), :func:`split_joint` divides it among the member stages
the config has, in proportion to the config's own modelled seconds of those stages on
its placement. Why in proportion: the joint figure says only how the members' measured
sum compares with their modelled sum, and the proportional split gives each member that
same measured/modelled ratio, adding nothing the figure does not say; a fit of a
per-kind efficiency to the members (the two log-prob passes are forward passes of the
same kind) is then the same whatever the true division was.

Rules: a member the config lacks gets nothing (all of it to the one member present), and a
member ``STAGE@ROLE`` is present only where the config runs that stage on that role; the
config pricing every present member at 0 s divides it equally; a timer none of whose
members the config has is left out of the replay. One warning line says what was split
and how.

A *concurrent* timer (:attr:`~rlplex.timeline.importers.base.RecordedRun.concurrent`:
OpenRLHF's ``ppo_train`` trains the critic and the actor at once on their own GPUs) is a
wall time over members that ran side by side, and a proportional split of it would make
each member shorter than it was (two equal members of a 60 s timer would get 30 s each,
and replayed side by side take 30 s). The same principle holds with the config's own
schedule of the members in place of their sum: each member gets its modelled seconds times
the timer's measured seconds over the members' modelled *span*, the time they take when
each starts once the members it depends on (the pipeline's ``after``, transitively) and
the members before it on a shared device (in pipeline order) are done. Members on one
device set, or each waiting for the last, have their sum as the span: the proportional
split above. Replayed on the config's placement, the members then span the measured time.
"""

from __future__ import annotations

from graphlib import TopologicalSorter

from rlplex.config import Config
from rlplex.plan.costs import config_placement, stage_work_seconds
from rlplex.timeline.importers.base import RecordedRun, member_stage

DRIVER = "driver"
"""The role of a stage that names none."""


def modelled_members(members: tuple[str, ...], config: Config) -> dict[str, float]:
    """``config``'s modelled seconds, on its own placement, of each of ``members`` it has
    (keyed by stage name; a ``STAGE@ROLE`` member only where the stage runs on that role)."""
    stages = {s.name: s for s in config.pipeline.stages}
    placement = config_placement(config)
    out: dict[str, float] = {}
    for member in members:
        name, role = member_stage(member)
        stage = stages.get(name)
        if stage is None or (role is not None and (stage.role or DRIVER) != role):
            continue
        out[name] = stage_work_seconds(config, stage, placement)
    return out


def modelled_span(seconds: dict[str, float], config: Config) -> float:
    """The wall time of the stages ``seconds`` (name -> modelled seconds) on ``config``'s
    placement, each starting once the others it depends on and those before it on a shared
    device are done (pipeline order): their sum where they share devices or wait for each
    other, their longest where they run side by side."""
    stages = {s.name: s for s in config.pipeline.stages}
    placement = config_placement(config)
    graph = {s.name: set(s.after) & set(stages) for s in config.pipeline.stages}
    ancestors: dict[str, set[str]] = {}
    for name in TopologicalSorter(graph).static_order():
        ancestors[name] = set().union(*(ancestors[p] | {p} for p in graph[name]))
    order = [n for n in TopologicalSorter(graph).static_order() if n in seconds]

    def devices(name: str) -> set[int]:
        return {d for role in stages[name].roles for d in placement.get(role, ())}

    finish: dict[str, float] = {}
    for i, name in enumerate(order):
        mine = devices(name)
        start = max(
            (
                finish[before]
                for before in order[:i]
                if before in ancestors[name] or mine & devices(before)
            ),
            default=0.0,
        )
        finish[name] = start + seconds[name]
    return max(finish.values(), default=0.0)


def joint_shares(members: tuple[str, ...], config: Config) -> dict[str, float]:
    """Each member stage's share (summing to 1) of a timer spanning ``members``, by
    ``config``'s modelled seconds (:func:`modelled_members`); equal where it prices them
    all at 0 s; empty when the config has none of them."""
    return _shares(modelled_members(members, config))


def _shares(seconds: dict[str, float]) -> dict[str, float]:
    total = sum(seconds.values())
    if total <= 0:
        return {m: 1 / len(seconds) for m in seconds}
    return {m: s / total for m, s in seconds.items()}


def _factors(seconds: dict[str, float], config: Config) -> dict[str, float]:
    """Each member's seconds per second of a concurrent timer: its modelled seconds over
    the members' modelled span (:func:`modelled_span`); equal shares where it is 0 s."""
    span = modelled_span(seconds, config) if seconds else 0.0
    if span <= 0:
        return _shares(seconds)
    return {m: s / span for m, s in seconds.items()}


def split_joint(run: RecordedRun, config: Config) -> RecordedRun:
    """``run`` with each joint timing divided among ``config``'s member stages
    (:func:`joint_shares`), added to what those stages recorded on their own in the step
    (a step where a pass was skipped has that stage alone), and a warning saying how.

    Pure: the record and the config in, a new record out; a record without joint keys
    comes back as it is.
    """
    if not run.joint:
        return run
    modelled = {key: modelled_members(members, config) for key, members in run.joint.items()}
    shares = {
        key: _factors(seconds, config) if key in run.concurrent else _shares(seconds)
        for key, seconds in modelled.items()
    }
    steps: dict[int, dict[str, float]] = {}
    for step, timings in run.steps.items():
        out: dict[str, float] = {}
        for name, seconds in timings.items():
            if name not in run.joint:
                out[name] = out.get(name, 0.0) + seconds
                continue
            for member, share in shares[name].items():
                out[member] = out.get(member, 0.0) + seconds * share
        if out:
            steps[step] = out
    return run.model_copy(
        update={
            "steps": steps,
            "joint": {},
            "concurrent": (),
            "warnings": (*run.warnings, _describe(run, shares, modelled)),
        }
    )


def _describe(
    run: RecordedRun, shares: dict[str, dict[str, float]], modelled: dict[str, dict[str, float]]
) -> str:
    parts = []
    for key, members in run.joint.items():
        share = shares[key]
        if not share:
            parts.append(f"{key}: the config has none of {', '.join(members)}, left out")
        elif len(share) == 1:
            (only,) = share
            parts.append(f"{key}: all to {only} (the config has no {_others(members, only)})")
        else:
            how = ", ".join(f"{m} {100 * s:.1f} %" for m, s in share.items())
            zero = not any(modelled[key].values())
            side = key in run.concurrent and sum(share.values()) > 1 + 1e-9
            parts.append(
                f"{key}: {how}"
                + (" (the config prices them at 0 s)" if zero else "")
                + (" (side by side on the config's devices: each its modelled seconds times"
                   " the measured over the modelled span)" if side else "")
            )  # fmt: skip
    return (
        "joint timers split by the config's modelled seconds of their stages (the log does"
        " not say how they divide): " + "; ".join(parts)
    )


def _others(members: tuple[str, ...], present: str) -> str:
    return ", ".join(m for m in members if m != present)
