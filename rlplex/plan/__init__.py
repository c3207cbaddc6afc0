"""The planner: placement, scheduling, offload/reload insertion, bounds and verification.

Public entry points: :func:`make_plan` (a config to a :class:`Plan`; with the config
it was made from, :func:`plan_with_config`),
:func:`resolve_placement` (the one owner of placement: explicit, ``devices:
auto`` or every role, with the candidates it scored), :func:`step_pattern`
(the repeating step both the simulator and the executor unroll),
:func:`verify_plan`, :func:`lower_bound` and :func:`search_placements`.
Nothing here imports torch or ray.
"""

from rlplex.plan.bound import Bound, lower_bound
from rlplex.plan.ids import OpId, OpKind, OpWork
from rlplex.plan.model import Op, Plan
from rlplex.plan.pattern import StepPattern, step_pattern
from rlplex.plan.placement import ResolvedPlacement, resolve_placement
from rlplex.plan.planner import BASELINES, make_plan, plan_for_placement, plan_with_config
from rlplex.plan.search import PlacementCandidate, search_placements
from rlplex.plan.verify import PlanVerificationError, verify_plan

__all__ = [
    "BASELINES",
    "Bound",
    "Op",
    "OpId",
    "OpKind",
    "OpWork",
    "PlacementCandidate",
    "Plan",
    "PlanVerificationError",
    "ResolvedPlacement",
    "StepPattern",
    "lower_bound",
    "make_plan",
    "plan_for_placement",
    "plan_with_config",
    "resolve_placement",
    "search_placements",
    "step_pattern",
    "verify_plan",
]
