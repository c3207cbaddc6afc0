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

Rules: a member the config lacks gets nothing (all of it to the one member present); the
config pricing every present member at 0 s divides it equally; a timer none of whose
members the config has is left out of the replay. One warning line says what was split
and how.
"""

from __future__ import annotations

from rlplex.config import Config
from rlplex.plan.costs import config_placement, stage_work_seconds
from rlplex.timeline.importers.base import RecordedRun


def modelled_members(members: tuple[str, ...], config: Config) -> dict[str, float]:
    """``config``'s modelled seconds, on its own placement, of each of ``members`` it has."""
    stages = {s.name: s for s in config.pipeline.stages}
    placement = config_placement(config)
    return {m: stage_work_seconds(config, stages[m], placement) for m in members if m in stages}


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
    shares = {key: _shares(seconds) for key, seconds in modelled.items()}
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
            parts.append(f"{key}: {how}" + (" (the config prices them at 0 s)" if zero else ""))
    return (
        "joint timers split by the config's modelled seconds of their stages (the log does"
        " not say how they divide): " + "; ".join(parts)
    )


def _others(members: tuple[str, ...], present: str) -> str:
    return ", ".join(m for m in members if m != present)
