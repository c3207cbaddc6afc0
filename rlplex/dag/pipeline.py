"""The step DAG: stages, their order, and the edges that cross steps.

A :class:`Pipeline` is plain frozen data. :meth:`Pipeline.check` validates it
against the roles a config defines, using the standard library's
:mod:`graphlib` for order and cycles. Errors are subclasses of
:class:`PipelineError` and name the offending stage.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rlplex.dag.stage import Stage
from rlplex.errors import RlplexError

Mode = Literal["sync", "async"]


class PipelineError(RlplexError):
    """The step DAG is malformed.

    Attributes:
        stage: the offending stage's name.
        field: the stage field at fault (``after``, ``role``, ``from`` ...), if any.
    """

    def __init__(self, message: str, *, stage: str, field: str | None = None) -> None:
        self.stage = stage
        self.field = field
        super().__init__(message)


class DuplicateStageError(PipelineError):
    """Two stages share a name."""


class UnknownDependencyError(PipelineError):
    """A stage lists in ``after`` a stage that does not exist."""


class UnknownRoleError(PipelineError):
    """A stage runs on, or a weight sync names, a role that is not defined."""


class WeightSyncError(PipelineError):
    """A weight_sync stage lacks its ``from``/``to`` roles, or names the same role twice."""


class CycleError(PipelineError):
    """The ``after`` edges form a cycle. ``cycle`` lists it, first node repeated last."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__(
            "the stages form a cycle: " + " -> ".join(cycle), stage=cycle[0], field="after"
        )


class CrossStepEdge(BaseModel):
    """``dst`` of step ``t + lag`` waits for ``src`` of step ``t``."""

    model_config = ConfigDict(frozen=True)

    src: str
    """The weight-sync stage the edge leaves."""
    dst: str
    """The stage that reads the synced weights, ``lag`` steps later."""
    lag: int
    """Steps between the two: 1 + ``max_staleness`` in async mode, 1 in sync."""


class Pipeline(BaseModel):
    """The DAG of one RL step, and how steps follow each other."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stages: tuple[Stage, ...]
    """The stages, in definition order (ties in scheduling keep this order)."""
    mode: Mode = "sync"
    """``sync``: steps do not overlap. ``async``: generation runs ahead of training."""
    max_staleness: int = Field(0, ge=0)
    """Async: generation of step t+1+k waits only for the weight sync of step t."""

    def stage(self, name: str) -> Stage:
        """The stage called ``name``; ``KeyError`` if there is none."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.stages)

    @property
    def staleness(self) -> int:
        """k of the cross-step edges: ``max_staleness`` in async mode, 0 in sync."""
        return self.max_staleness if self.mode == "async" else 0

    def roles_used(self) -> tuple[str, ...]:
        """Every role a stage runs on or a weight sync names, in first-use order."""
        seen: dict[str, None] = {}
        for stage in self.stages:
            for role in stage.roles:
                seen.setdefault(role, None)
        return tuple(seen)

    def check(self, roles: Iterable[str] | None = None) -> None:
        """Validate the DAG; with ``roles``, also that every role it uses exists.

        Raises:
            DuplicateStageError: two stages share a name.
            WeightSyncError: a weight_sync lacks ``from`` or ``to``, or they are equal.
            UnknownRoleError: a role is not in ``roles``.
            UnknownDependencyError: ``after`` names a missing stage.
            CycleError: the edges form a cycle (the error lists it).
        """
        names: set[str] = set()
        for stage in self.stages:
            if stage.name in names:
                raise DuplicateStageError(
                    f"stage {stage.name!r} is defined twice", stage=stage.name
                )
            names.add(stage.name)
        known_roles = set(roles) if roles is not None else None
        for stage in self.stages:
            self._check_stage_roles(stage, known_roles)
            for dep in stage.after:
                if dep not in names:
                    raise UnknownDependencyError(
                        f"stage {stage.name!r} runs after {dep!r}, which is not a stage"
                        f" (stages: {', '.join(sorted(names))})",
                        stage=stage.name,
                        field="after",
                    )
        self.topological_order()

    @staticmethod
    def _check_stage_roles(stage: Stage, known_roles: set[str] | None) -> None:
        if stage.is_weight_sync:
            for field, role in (("from", stage.from_role), ("to", stage.to_role)):
                if not role:
                    raise WeightSyncError(
                        f"weight_sync stage {stage.name!r} needs a {field!r} role",
                        stage=stage.name,
                        field=field,
                    )
            if stage.from_role == stage.to_role:
                raise WeightSyncError(
                    f"weight_sync stage {stage.name!r} sends {stage.from_role!r} to itself",
                    stage=stage.name,
                    field="to",
                )
        elif not stage.role:
            raise UnknownRoleError(
                f"stage {stage.name!r} has no role", stage=stage.name, field="role"
            )
        if known_roles is None:
            return
        fields = (
            (("from", stage.from_role), ("to", stage.to_role))
            if stage.is_weight_sync
            else (("role", stage.role),)
        )
        for field, role in fields:
            if role not in known_roles:
                raise UnknownRoleError(
                    f"stage {stage.name!r} uses role {role!r}, which is not defined"
                    f" (roles: {', '.join(sorted(known_roles))})",
                    stage=stage.name,
                    field=field,
                )

    def topological_order(self) -> tuple[str, ...]:
        """Stage names in an order that respects ``after``; ties keep definition order.

        Raises:
            CycleError: the edges form a cycle.
        """
        sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for stage in self.stages:
            sorter.add(stage.name, *stage.after)
        try:
            sorter.prepare()
        except graphlib.CycleError as exc:
            cycle = list(exc.args[1])
            raise CycleError(cycle) from None
        position = {name: i for i, name in enumerate(self.names)}
        order: list[str] = []
        while sorter.is_active():
            ready = sorted(sorter.get_ready(), key=lambda n: position.get(n, len(position)))
            order.extend(ready)
            sorter.done(*ready)
        return tuple(order)

    def successors(self) -> dict[str, tuple[str, ...]]:
        """For each stage, the stages of the same step that run after it."""
        succ: dict[str, list[str]] = {s.name: [] for s in self.stages}
        for stage in self.stages:
            for dep in stage.after:
                succ[dep].append(stage.name)
        return {k: tuple(v) for k, v in succ.items()}

    def weight_readers(
        self, sync: Stage, role_states: dict[str, tuple[str, ...]]
    ) -> tuple[str, ...]:
        """Stages that read the weights ``sync`` overwrites (``generate``, usually)."""
        readers = []
        for stage in self.stages:
            if stage.is_weight_sync or stage.role != sync.to_role:
                continue
            if stage.reads_state("weights", role_states.get(stage.role, ("weights",))):
                readers.append(stage.name)
        return tuple(readers)

    def cross_step_edges(
        self, role_states: dict[str, tuple[str, ...]] | None = None
    ) -> tuple[CrossStepEdge, ...]:
        """Edges from a weight sync of step t to its readers of step t + 1 + k.

        ``role_states`` maps each role to its state names (to honour ``needs``);
        without it every stage on the destination role counts as a reader.
        """
        states = role_states or {}
        edges = []
        for stage in self.stages:
            if stage.is_weight_sync:
                for reader in self.weight_readers(stage, states):
                    edges.append(CrossStepEdge(src=stage.name, dst=reader, lag=1 + self.staleness))
        return tuple(edges)
