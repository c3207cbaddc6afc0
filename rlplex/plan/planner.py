"""From a config to a Plan: resolve the placement, pick the policy, schedule, package.

:func:`make_plan` is the entry point others call. It resolves the placement
(searching it for ``devices: auto`` roles), schedules with the planner's
policy or a baseline's, and turns the internal schedule into the plan JSON of
DESIGN.md (op ids, devices, dependencies by id, residency, bound); the last two
on an explicit placement are :mod:`rlplex.plan.placed`'s.
"""

from __future__ import annotations

from rlplex.config import Config
from rlplex.errors import ConfigError
from rlplex.plan.model import Plan
from rlplex.plan.placed import plan_for_placement, to_plan
from rlplex.plan.placement import resolve_placement
from rlplex.plan.policy import BASELINES, default_unroll, plan_options
from rlplex.resources.cluster import DRIVER

__all__ = [
    "BASELINES",
    "default_unroll",
    "make_plan",
    "plan_for_placement",
    "plan_options",
    "plan_with_config",
    "to_plan",
]


def make_plan(
    config: Config,
    *,
    baseline: str | None = None,
    steps: int | None = None,
    auto: bool = False,
) -> Plan:
    """The plan of ``config``: the planner's, or the ``sequential`` / ``naive-colocate`` baseline.

    The placement is resolved by :func:`rlplex.plan.placement.resolve_placement`
    (roles with ``devices: auto`` searched first; every GPU role with ``auto``,
    and in async mode the staleness too). ``steps`` is the number of steps to
    unroll (async; a sync plan is one step, which the simulator and the
    executor repeat through :meth:`rlplex.plan.pattern.StepPattern.unroll`).
    A caller that prices the plan's stages again (the simulator, the executor, a
    replay) takes the config it was made from with :func:`plan_with_config`.

    Raises:
        InfeasibleError: a stage's states plus transient memory exceed a GPU,
            naming the stage, the role and the GB figures.
        ConfigError: an unknown baseline, or an async weight sync between roles
            given shared devices.
    """
    return plan_with_config(config, baseline=baseline, steps=steps, auto=auto)[1]


def plan_with_config(
    config: Config,
    *,
    baseline: str | None = None,
    steps: int | None = None,
    auto: bool = False,
) -> tuple[Config, Plan]:
    """:func:`make_plan`'s plan, with the config it was made from.

    That is ``config`` itself unless the placement search chose a placement or a
    staleness: then it is ``config`` estimated again on the chosen devices and at the
    chosen staleness (:func:`rlplex.estimate.fill.at_placement`, ``at_staleness``). The
    simulator, the executor and a replay price the plan's stages from the config they
    are given, so they must be given this one: ``config``'s own estimated figures are
    those of the devices it was estimated on, scaled (a generation on 8 of 16 GPUs
    simulated twice as fast as it was planned).

    Raises:
        InfeasibleError, ConfigError: as :func:`make_plan`.
    """
    # A Config built in Python rather than loaded skips the loader's checks: the DAG and its
    # roles are checked here, so that a wrong one is named, not met as a KeyError deep inside.
    config.pipeline.check([*config.roles, DRIVER])
    if steps is not None and steps < 1:
        raise ConfigError("must be at least 1 step", field="steps", value=steps)
    resolved = resolve_placement(config, auto=auto, top=1)
    plan = plan_for_placement(resolved.config, resolved.placement, baseline=baseline, steps=steps)
    return resolved.config, plan
