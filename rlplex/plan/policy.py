"""Scheduling policies: the planner's own, and the baselines it is compared with.

A policy is a :class:`~rlplex.plan.problem.Options`: how many steps to
unroll, whether the step is made cyclic, and what a baseline does that the
planner does not (one stage at a time; offload everything after each call).
The planner and the placement search both take their options from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlplex.config import Config
from rlplex.errors import ConfigError
from rlplex.plan.fit import crowded_roles
from rlplex.plan.problem import Options, Problem

BASELINES = ("sequential", "naive-colocate")
"""Baselines computed with the same cost model: today's frameworks' default behaviours."""


def default_unroll(staleness: int) -> int:
    """Steps unrolled for an async plan: enough for k steps in flight to reach steady state."""
    return 3 * (staleness + 1) + 4


def plan_options(
    config: Config,
    placement: Mapping[str, Sequence[int]],
    baseline: str | None = None,
    steps: int | None = None,
) -> Options:
    """The scheduling options of the planner (``baseline=None``) or of a baseline.

    Raises:
        ConfigError: an unknown baseline.
    """
    k = config.pipeline.staleness
    gpu_roles = tuple(placement)
    if baseline is None:
        if k > 0:
            return Options(steps=steps or default_unroll(k), staleness=k, cyclic=False)
        return Options(steps=1, cyclic=True)
    if baseline == "sequential":
        return Options(steps=1, cyclic=True, serial=True, offload_after=gpu_roles, start_empty=True)
    if baseline == "naive-colocate":
        base = plan_options(config, placement, None, steps)
        crowded = crowded_roles(Problem(config, placement, Options(steps=1)), gpu_roles)
        if not crowded:
            return base
        # Roles on devices where not everything fits offload everything after each call.
        return Options(
            steps=base.steps,
            staleness=base.staleness,
            cyclic=base.cyclic,
            offload_after=tuple(crowded),
            start_empty=True,
        )
    raise ConfigError(
        f"unknown baseline (expected one of: {', '.join(BASELINES)})",
        field="--baseline",
        value=baseline,
    )
