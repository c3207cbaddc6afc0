"""The Plan: every op of a step with its devices, times and dependencies.

This is the machine-readable contract of DESIGN.md ("The machine-readable
plan"): ``rlplex plan FILE --json`` prints :meth:`Plan.to_json`, the executor
follows the ops in order, the simulator replays them with other durations,
and :func:`rlplex.plan.verify.verify_plan` checks every validity rule.
"""

from __future__ import annotations

import json
from dataclasses import fields as dataclass_fields
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, OpId, OpKind, OpWork

__all__ = ["COMPUTE_KINDS", "TRANSFER_KINDS", "Op", "OpId", "OpKind", "OpWork", "Plan"]


class Op(BaseModel):
    """One scheduled operation.

    Ids are ``s{step}/{stage}`` for runs and weight syncs and
    ``s{step}/{offload|reload}/{role}/{state}`` (with a ``#n`` suffix when the
    same transfer happens twice in a step) for transfers.

    This is the wire schema of the plan JSON (DESIGN.md): its fields, their
    order and ``exclude_none`` are the contract, so they are declared here as
    pydantic fields; what the op does is read off it as one
    :class:`~rlplex.plan.ids.OpWork` by :meth:`work`, never copied by hand.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    id: str
    """Unique op id within the plan."""
    kind: OpKind
    """``run`` (a stage), ``offload``, ``reload`` or ``weight_sync``."""
    step: int = 0
    """The RL step the op belongs to (async plans unroll several)."""
    devices: tuple[int, ...] = ()
    """Global GPU ranks the op occupies; empty for CPU and driver stages."""
    start_s: float
    """Planned start, seconds from the start of the plan."""
    end_s: float
    """Planned end."""
    deps: tuple[str, ...] = ()
    """Ids of the ops this one waits for."""
    stage: str | None = None
    """The stage, for ``run`` and ``weight_sync`` ops."""
    role: str | None = None
    """The role (for weight_sync: the destination role)."""
    state: str | None = None
    """The state moved, for ``offload`` and ``reload`` ops."""
    memory_gb: float = 0.0
    """Transient memory per device while a ``run`` op runs."""
    gb: float = 0.0
    """GB per device moved by a transfer or weight sync (0 for free ones)."""
    from_role: str | None = None
    """weight_sync only: the source role."""

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @classmethod
    def placed(
        cls,
        work: OpWork,
        *,
        id: str,
        step: int,
        start_s: float,
        end_s: float,
        deps: tuple[str, ...],
    ) -> Op:
        """The wire op doing ``work`` (its ``devices`` included), unvalidated (the planner's
        own values). ``dead`` is not written: the plan carries it only as an extra."""
        described = {name: getattr(work, name) for name in _WORK_ON_THE_WIRE}
        return cls.model_construct(
            id=id, step=step, start_s=start_s, end_s=end_s, deps=deps, **described
        )

    def work(self, dead: bool | None = None) -> OpWork:
        """What the op does; ``dead`` defaults to the plan's extra ``dead`` field (else False)."""
        if dead is None:
            dead = bool((self.model_extra or {}).get("dead", False))
        return OpWork.of(self, dead=dead)

    @property
    def op_id(self) -> OpId:
        """The typed id (step and name within the step)."""
        return OpId.parse(self.id, self.step)

    @property
    def name(self) -> str:
        """The id without its ``s{step}/`` prefix."""
        return self.op_id.name


_WORK_ON_THE_WIRE: tuple[str, ...] = tuple(
    f.name for f in dataclass_fields(OpWork) if f.name in Op.model_fields
)
"""The :class:`OpWork` fields the plan JSON declares (``dead`` is an extra)."""


class Plan(BaseModel):
    """A schedule of one step (sync) or of unrolled steps (async)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    mode: Literal["sync", "async"] = "sync"
    """The pipeline's mode."""
    makespan_s: float
    """From the first op's start to the last op's end."""
    period_s: float
    """Steady-state time per step (equals ``makespan_s`` in sync mode)."""
    lower_bound_s: float
    """A proven lower bound on ``period_s`` of any valid plan for this placement."""
    capacity_gb: float
    """Memory per GPU."""
    placement: dict[str, list[int]]
    """Devices of each GPU role."""
    states: dict[str, dict[str, float]]
    """GB per device of each role's states."""
    initial_residency: dict[str, list[str]]
    """States resident on each role's devices when the (steady-state) step starts."""
    ops: list[Op] = Field(default_factory=list)
    """Every op, ordered by start time, then id."""
    staleness: int = 0
    """k of the cross-step weight-sync edges (``max_staleness`` in async mode, else 0)."""
    unrolled_steps: int = 1
    """Steps the ops cover (async plans unroll several to reach the steady state)."""
    pattern_step: int = 0
    """The step whose ops repeat in the steady state (what the simulator replays)."""
    baseline: str | None = None
    """``sequential`` or ``naive-colocate`` for a baseline plan; None for the planner's."""
    dispatch_s: float = 0.0
    """Seconds of every ``run`` and ``weight_sync`` op's duration that are the executor's
    per-op overhead (``cluster.dispatch_s``), not the stage's work."""
    host_memory_gb: float | None = None
    """Host memory of one node (``cluster.host_memory_gb``) the plan was made for."""
    host_peaks: dict[int, float] | None = None
    """Peak GB of host copies each node holds over the step (see :mod:`rlplex.plan.host`)."""

    def to_json(self, indent: int | None = 2) -> str:
        """The machine-readable form printed by ``rlplex plan --json``."""
        return json.dumps(self.to_dict(), indent=indent)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.model_validate_json(text)

    def op(self, op_id: str) -> Op:
        for op in self.ops:
            if op.id == op_id:
                return op
        raise KeyError(op_id)

    @property
    def gap(self) -> float:
        """Relative distance of the period to the lower bound (0.05 = 5 % above)."""
        if self.lower_bound_s <= 0:
            return 0.0
        return self.period_s / self.lower_bound_s - 1.0
