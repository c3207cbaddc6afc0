"""Op ids and op kinds: one definition of ``s{step}/{name}`` and of what an op does.

Every op of a plan, a run and a timeline is named ``s{step}/{name}``: the
step it belongs to and a name unique within the step (``train``,
``offload/actor_train/optimizer``, ``reload/actor_infer/kv_cache#2`` when the
same transfer happens twice in a step). The planner builds these ids, the
simulator and the executor unroll them over N steps, the importers and the
reports read them back; they all go through :class:`OpId` (or the fast
helpers :func:`format_id` and :func:`op_name` in hot loops) instead of string
surgery, and compare kinds against :class:`OpKind`.

What an op *does* (its kind, devices, stage, role, state, bytes, memory) is
declared once, in :class:`OpWork`; the internal op classes of the step
pattern, the simulator and the executor hold one and add only their own
coordinates (step, index, times, dependencies). The plan JSON's
:class:`~rlplex.plan.model.Op` is the wire schema and gives its
:class:`OpWork` through :meth:`~rlplex.plan.model.Op.work`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any


class OpKind(StrEnum):
    """What an op does (the plan JSON's ``kind``)."""

    RUN = "run"
    """A stage runs on its role's devices (or a CPU role)."""
    OFFLOAD = "offload"
    """A state leaves its role's devices for host memory (or is dropped)."""
    RELOAD = "reload"
    """A state comes back onto its role's devices (or is re-allocated)."""
    WEIGHT_SYNC = "weight_sync"
    """Trained weights are written into the inference role's weights."""


COMPUTE_KINDS: frozenset[str] = frozenset({OpKind.RUN, OpKind.WEIGHT_SYNC})
"""Kinds that occupy a device's compute lane (one at a time per device)."""
TRANSFER_KINDS: frozenset[str] = frozenset({OpKind.OFFLOAD, OpKind.RELOAD})
"""Kinds that occupy a device's copy engine (one at a time per device)."""


class DeviceLane(StrEnum):
    """The lane of a device an op occupies (one op at a time per lane and device).

    A different concept from :class:`OpKind` (two kinds share a lane) and from
    the views' lanes (a picture's rows: ``gpu``, ``cpu``, ``driver``).
    """

    COMPUTE = "compute"
    """The compute engine: runs and weight syncs."""
    TRANSFER = "transfer"
    """The copy engine: offloads and reloads."""


def lane_of(kind: str) -> DeviceLane:
    """``compute`` for runs and weight syncs, ``transfer`` for offloads and reloads."""
    return DeviceLane.COMPUTE if kind in COMPUTE_KINDS else DeviceLane.TRANSFER


@dataclass(frozen=True, slots=True)
class OpWork:
    """What one op does, wherever it sits (a plan step, a pattern, a simulated or real run).

    The one declaration of an op's description: :class:`~rlplex.plan.pattern.PatternOp`,
    the simulator's :class:`~rlplex.sim.simulate.Pattern` and the executor's
    :class:`~rlplex.runtime.schedule.ExecOp` hold one and add only their own
    coordinates.
    """

    kind: OpKind
    """What the op does."""
    devices: tuple[int, ...] = ()
    """Global GPU ranks it occupies; empty for CPU and driver stages."""
    stage: str | None = None
    """The stage, for run and weight_sync ops."""
    role: str | None = None
    """The role (weight_sync: the destination)."""
    state: str | None = None
    """The state moved by an offload or reload."""
    from_role: str | None = None
    """weight_sync: the source role."""
    gb: float = 0.0
    """GB per device moved by a transfer or weight sync (0 for free ones)."""
    memory_gb: float = 0.0
    """Transient GB per device while a run op runs."""
    dead: bool = False
    """An offload of a dead state: dropped, not copied (vLLM sleep level 2)."""

    @classmethod
    def of(cls, source: Any, **override: Any) -> OpWork:
        """The description read off any object with these attributes (a plan op, a pattern op).

        ``override`` replaces fields (``dead``, which a plan op may not carry).
        """
        values = {
            name: override[name] if name in override else getattr(source, name, None)
            for name in _WORK_FIELDS
        }
        values["kind"] = OpKind(values["kind"])
        values["devices"] = tuple(values["devices"] or ())
        values["gb"] = values["gb"] or 0.0
        values["memory_gb"] = values["memory_gb"] or 0.0
        values["dead"] = bool(values["dead"])
        return cls(**values)

    @property
    def lane(self) -> DeviceLane:
        """``compute`` or ``transfer``: the device lane the op occupies."""
        return lane_of(self.kind)


_WORK_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(OpWork))

_ID = re.compile(r"^s(\d+)/(.+)$")


@dataclass(frozen=True, slots=True, order=True)
class OpId:
    """An op id: the step and the name within the step."""

    step: int
    """The RL step."""
    name: str
    """The name within the step: a stage, or ``{kind}/{role}/{state}[#n]`` for a transfer."""

    @classmethod
    def parse(cls, text: str, default_step: int | None = None) -> OpId:
        """``"s3/train"`` -> ``OpId(3, "train")``.

        A text without the ``s{step}/`` prefix is a bare name at ``default_step``.

        Raises:
            ValueError: no prefix and no ``default_step``.
        """
        match = _ID.match(text)
        if match:
            return cls(int(match.group(1)), match.group(2))
        if default_step is None:
            raise ValueError(f"not an op id (expected s{{step}}/{{name}}): {text!r}")
        return cls(default_step, text)

    @classmethod
    def transfer(cls, step: int, kind: str, role: str, state: str, nth: int = 1) -> OpId:
        """The id of the ``nth`` offload or reload of ``role``'s ``state`` in ``step``."""
        return cls(step, transfer_name(kind, role, state, nth))

    def shifted(self, steps: int) -> OpId:
        """The same op ``steps`` steps later (earlier when negative)."""
        return OpId(self.step + steps, self.name) if steps else self

    def at(self, step: int) -> OpId:
        """The same op at ``step``."""
        return OpId(step, self.name)

    def __str__(self) -> str:
        return f"s{self.step}/{self.name}"


def format_id(step: int, name: str) -> str:
    """``(3, "train") -> "s3/train"`` (the string of :class:`OpId`, without the object)."""
    return f"s{step}/{name}"


def step_prefix(step: int) -> str:
    """``"s3/"``: what every id of ``step`` starts with."""
    return f"s{step}/"


def op_name(op_id: str) -> str:
    """The name of an id without its step: ``"s3/offload/a/w" -> "offload/a/w"``.

    A text without the prefix is returned as it is.
    """
    match = _ID.match(op_id)
    return match.group(2) if match else op_id


def op_step(op_id: str) -> int | None:
    """The step of an id, or None when it has no ``s{step}/`` prefix."""
    match = _ID.match(op_id)
    return int(match.group(1)) if match else None


def shift_id(op_id: str, steps: int) -> str:
    """The id of the same op ``steps`` steps later."""
    return str(OpId.parse(op_id).shifted(steps)) if steps else op_id


def transfer_name(kind: str, role: str, state: str, nth: int = 1) -> str:
    """``offload/actor_train/optimizer`` (``#n`` appended from the second time in a step)."""
    base = f"{OpKind(kind)}/{role}/{state}"
    return base if nth <= 1 else f"{base}#{nth}"
