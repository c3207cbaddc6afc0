"""Plan verification: every validity rule of DESIGN.md, checked on any plan.

A plan may come from the planner, a baseline, a file someone edited, or another
tool; :func:`verify_plan` trusts none of its numbers and recomputes what the
cost and memory model requires. It stops at the first violation and names the
rule and the op, so a failing plan is easy to debug:

1. ``deps``: every dependency exists and ends before the op starts;
2. ``compute``: no device runs two compute ops (run, weight_sync) at once;
3. ``transfer``: no device runs two transfers (offload, reload) at once;
4. ``duration``: no op is shorter than the model says (stage seconds with
   scaling, weight-sync copy, dirty/dead rules for transfers);
5. ``residency``: every run and weight sync finds the states it needs resident,
   and transfers alternate (no reload of a resident state);
6. ``memory``: no device ever holds more than ``capacity_gb``;
7. ``cyclic``: a sync plan ends with the residency it starts with;
8. ``host``: no node's host memory ever holds more than ``host_memory_gb`` of
   host copies (the config's, and the plan's when it names one; see
   :mod:`rlplex.plan.host`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence

from rlplex.config import Config
from rlplex.errors import RlplexError
from rlplex.plan.costs import stage_needs, stage_seconds, transfer_seconds
from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, OpKind
from rlplex.plan.model import Op, Plan
from rlplex.resources.cluster import COPIED_STATES

TOL = 1e-6

Pair = tuple[str, str]


class PlanVerificationError(RlplexError):
    """A plan breaks a validity rule.

    Attributes:
        rule: ``finite``, ``deps``, ``compute``, ``transfer``, ``duration``,
            ``residency``, ``memory``, ``cyclic`` or ``host``.
        op: the id of the offending op (None for plan-wide rules).
    """

    def __init__(self, rule: str, message: str, op: str | None = None) -> None:
        self.rule = rule
        self.op = op
        where = f" at op {op!r}" if op else ""
        super().__init__(f"plan violates rule {rule!r}{where}: {message}")


def verify_plan(plan: Plan, config: Config) -> None:
    """Check every validity rule; raise on the first violation.

    Raises:
        PlanVerificationError: naming the rule and the op.
    """
    _check_finite(plan, config)
    by_id: dict[str, Op] = {}
    for op in plan.ops:
        if op.id in by_id:
            raise PlanVerificationError("deps", "the op id appears twice", op.id)
        if op.end_s < op.start_s - TOL:
            raise PlanVerificationError("duration", "ends before it starts", op.id)
        by_id[op.id] = op
    _check_deps(plan.ops, by_id)
    # Time order; ops at the same instant (zero-length transfers) in dependency order.
    depth = _depths(plan.ops, by_id)
    ops = sorted(plan.ops, key=lambda o: (o.start_s, depth[o.id], o.end_s, o.id))
    _check_lanes(ops)
    cyclic = plan.mode == "sync" and plan.unrolled_steps <= 1
    residency = _Residency(plan, config, ops, cyclic)
    residency.check_durations()
    residency.check_needs()
    _check_memory(plan, ops)
    if cyclic:
        residency.check_cyclic()
    _check_host(plan, config, ops, residency.dead)


def _check_finite(plan: Plan, config: Config) -> None:
    """Every size, capacity and time is a finite number >= 0.

    NaN compares false with everything, so a NaN state size would pass every
    memory check below (and a NaN-sized offload would be "free"): the rules
    only mean something on finite numbers, so they are checked first.
    """
    figures: list[tuple[str, float, str | None]] = [
        ("capacity_gb", plan.capacity_gb, None),
        ("gpu_memory_gb", config.cluster.gpu_memory_gb, None),
        ("period_s", plan.period_s, None),
        ("makespan_s", plan.makespan_s, None),
    ]
    for role, states in plan.states.items():
        figures += [(f"states.{role}.{state}", gb, None) for state, gb in states.items()]
    for role in config.roles.values():
        figures += [(f"roles.{role.name}.states.{s}", gb, None) for s, gb in role.states.items()]
    for op in plan.ops:
        figures += [("start_s", op.start_s, op.id), ("end_s", op.end_s, op.id)]
        figures += [("memory_gb", op.memory_gb or 0.0, op.id), ("gb", op.gb or 0.0, op.id)]
    for name, value, op_id in figures:
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise PlanVerificationError(
                "finite", f"{name} is {value!r}, not a finite number >= 0", op_id
            )


def _check_deps(ops: Sequence[Op], by_id: Mapping[str, Op]) -> None:
    for op in ops:
        for dep in op.deps:
            other = by_id.get(dep)
            if other is None:
                raise PlanVerificationError("deps", f"waits for unknown op {dep!r}", op.id)
            if other.end_s > op.start_s + TOL:
                raise PlanVerificationError(
                    "deps",
                    f"starts at {op.start_s:.6g} s before its dependency {dep!r} ends"
                    f" ({other.end_s:.6g} s)",
                    op.id,
                )


def _depths(ops: Sequence[Op], by_id: Mapping[str, Op]) -> dict[str, int]:
    """Length of the longest dependency chain before each op (deps are known to exist)."""
    depth: dict[str, int] = {}
    for op in sorted(ops, key=lambda o: (o.start_s, o.end_s)):
        stack = [op]
        while stack:
            top = stack[-1]
            if top.id in depth:
                stack.pop()
                continue
            todo = [d for d in top.deps if d not in depth]
            if todo:
                if len(stack) > len(ops):
                    raise PlanVerificationError("deps", "the dependencies form a cycle", top.id)
                stack.extend(by_id[d] for d in todo)
                continue
            depth[top.id] = 1 + max((depth[d] for d in top.deps), default=-1)
            stack.pop()
    return depth


def _device_groups(ops: Sequence[Op]) -> list[list[int]]:
    """Op indices per group of devices touched by exactly the same ops."""
    per_device: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for d in op.devices:
            per_device.setdefault(d, []).append(i)
    groups: dict[tuple[int, ...], None] = {}
    for d in sorted(per_device):
        groups.setdefault(tuple(per_device[d]), None)
    return [list(g) for g in groups]


def _check_lanes(ops: Sequence[Op]) -> None:
    for group in _device_groups(ops):
        for kinds, rule in ((COMPUTE_KINDS, "compute"), (TRANSFER_KINDS, "transfer")):
            prev: Op | None = None
            for i in group:  # already sorted by start
                op = ops[i]
                if op.kind not in kinds or op.end_s - op.start_s <= TOL:
                    continue
                if prev is not None and prev.end_s > op.start_s + TOL:
                    shared = sorted(set(prev.devices) & set(op.devices))[:8]
                    raise PlanVerificationError(
                        rule,
                        f"overlaps {prev.id!r} on GPUs {shared}"
                        f" ({op.start_s:.6g} s < {prev.end_s:.6g} s)",
                        op.id,
                    )
                if prev is None or op.end_s > prev.end_s:
                    prev = op


class _Residency:
    """Per (role, state): the transfers in time order, dirty and dead facts, costs."""

    def __init__(self, plan: Plan, config: Config, ops: Sequence[Op], cyclic: bool) -> None:
        self.plan = plan
        self.config = config
        self.ops = ops
        self.cyclic = cyclic
        self.placement = {r: tuple(d) for r, d in plan.placement.items()}
        self.transfers: dict[Pair, list[Op]] = {}
        for op in ops:
            if op.kind in TRANSFER_KINDS:
                self.transfers.setdefault((op.role or "", op.state or ""), []).append(op)
        self.needs: dict[str, tuple[Pair, ...]] = {}
        self.dests = {s.to_role for s in config.pipeline.stages if s.is_weight_sync}
        # Accesses of each destination's weights: (position in ``ops``, is overwrite).
        # Positions, not start times: ``ops`` is in time order with ops at one instant in
        # dependency order, so a zero-length read that a transfer waits for comes first.
        self.accesses: dict[str, list[tuple[int, bool]]] = {d: [] for d in self.dests}
        for pos, op in enumerate(ops):
            if op.kind not in COMPUTE_KINDS or op.stage is None:
                continue
            needs = self._needs(op)
            for role, state in needs:
                if state == "weights" and role in self.accesses:
                    overwrite = op.kind == OpKind.WEIGHT_SYNC and op.role == role
                    self.accesses[role].append((pos, overwrite))

    def _needs(self, op: Op) -> tuple[Pair, ...]:
        name = op.stage or ""
        if name not in self.needs:
            try:
                stage = self.config.pipeline.stage(name)
            except KeyError:
                raise PlanVerificationError(
                    "duration", f"runs stage {name!r}, which the pipeline lacks", op.id
                ) from None
            self.needs[name] = tuple(
                p for p in stage_needs(self.config, stage) if p[0] in self.placement
            )
        return self.needs[name]

    def dead(self, pair: Pair, pos: int) -> bool:
        """Whether the next access of the pair after the op at position ``pos`` overwrites it.

        DESIGN.md: a state is dead from its last read until a weight sync
        overwrites it. A read that ends at the instant the transfer starts (a
        zero-length stage the transfer waits for) is before it, not after.
        """
        role, state = pair
        if state != "weights" or role not in self.accesses:
            return False
        acc = self.accesses[role]
        i = bisect.bisect_left(acc, (pos, False))
        if i < len(acc):
            return acc[i][1]
        if self.cyclic and acc:
            return acc[0][1]
        return False

    def _flags_pass(self, start_dirty: Mapping[Pair, bool], check: bool) -> dict[Pair, bool]:
        dirty = dict(start_dirty)
        cfg = self.config
        for pos, op in enumerate(self.ops):
            if op.kind in COMPUTE_KINDS:
                if op.stage is None:
                    continue
                stage = cfg.pipeline.stage(op.stage)
                if stage.is_weight_sync:
                    if (op.role or "", "weights") in self._all_pairs():
                        dirty[(op.role or "", "weights")] = True
                elif stage.kind == "train":
                    for pair in self._needs(op):
                        if pair[1] in COPIED_STATES:
                            dirty[pair] = True
                continue
            pair = (op.role or "", op.state or "")
            gb = self.plan.states.get(pair[0], {}).get(pair[1], 0.0)
            dead = self.dead(pair, pos)
            if op.kind == OpKind.OFFLOAD:
                need = transfer_seconds(cfg, pair[1], gb, free=dead or not dirty.get(pair))
            else:
                need = transfer_seconds(cfg, pair[1], gb, free=dead)
            if check and op.end_s - op.start_s < need - TOL:
                why = "dirty" if op.kind == OpKind.OFFLOAD else "not dead"
                raise PlanVerificationError(
                    "duration",
                    f"takes {op.end_s - op.start_s:.6g} s but moving {gb:g} GB ({why}) at"
                    f" {cfg.cluster.host_gb_per_s:g} GB/s takes {need:.6g} s",
                    op.id,
                )
            dirty[pair] = False
        return dirty

    def _all_pairs(self) -> set[Pair]:
        return {(r, s) for r, states in self.plan.states.items() for s in states}

    def check_durations(self) -> None:
        placement = self.placement
        for op in self.ops:
            if op.kind not in COMPUTE_KINDS:
                continue
            if op.stage is None:
                raise PlanVerificationError("duration", "a compute op without a stage", op.id)
            self._needs(op)
            need = stage_seconds(self.config, self.config.pipeline.stage(op.stage), placement)
            if op.end_s - op.start_s < need - TOL * max(1.0, need):
                raise PlanVerificationError(
                    "duration",
                    f"takes {op.end_s - op.start_s:.6g} s but stage {op.stage!r} takes"
                    f" {need:.6g} s on {len(op.devices) or 'CPU'} devices",
                    op.id,
                )
        clean = {p: False for p in self._all_pairs()}
        start = self._flags_pass(clean, check=False) if self.cyclic else clean
        self._flags_pass(start, check=True)

    def resident_at_start(self, pair: Pair) -> bool:
        return pair[1] in self.plan.initial_residency.get(pair[0], ())

    def check_needs(self) -> None:
        # Transfers alternate: offload only what is resident, reload only what is not.
        for pair, lst in self.transfers.items():
            resident = self.resident_at_start(pair)
            for op in lst:
                if (op.kind == OpKind.RELOAD) == resident:
                    state = "resident" if resident else "not resident"
                    raise PlanVerificationError(
                        "residency", f"{op.kind}s {pair[0]}.{pair[1]}, which is {state}", op.id
                    )
                resident = not resident
        for op in self.ops:
            if op.kind not in COMPUTE_KINDS:
                continue
            for pair in self._needs(op):
                # The last reload done by the op's start, and the offload after it.
                lst = self.transfers.get(pair, [])
                i = len(lst) - 1
                while i >= 0 and not (
                    lst[i].kind == OpKind.RELOAD and lst[i].end_s <= op.start_s + TOL
                ):
                    i -= 1
                ok = i >= 0 or self.resident_at_start(pair)
                if ok and i + 1 < len(lst) and lst[i + 1].start_s < op.end_s - TOL:
                    ok = False
                if not ok:
                    raise PlanVerificationError(
                        "residency",
                        f"needs {pair[0]}.{pair[1]} resident from {op.start_s:.6g} s"
                        f" to {op.end_s:.6g} s",
                        op.id,
                    )

    def check_cyclic(self) -> None:
        for pair, lst in self.transfers.items():
            end = lst[-1].kind == OpKind.RELOAD
            if end != self.resident_at_start(pair):
                raise PlanVerificationError(
                    "cyclic",
                    f"{pair[0]}.{pair[1]} is {'resident' if end else 'offloaded'} at the end"
                    f" of the step but {'not ' if end else ''}in initial_residency",
                    lst[-1].id,
                )


def _check_memory(plan: Plan, ops: Sequence[Op]) -> None:
    cap = plan.capacity_gb
    role_devices = {r: set(d) for r, d in plan.placement.items()}
    # Devices with the same roles on them hold the same states; check one per group.
    groups: dict[tuple[str, ...], int] = {}
    for d in sorted({d for devs in plan.placement.values() for d in devs}):
        key = tuple(r for r in plan.placement if d in role_devices[r])
        groups.setdefault(key, d)
    op_devices = [frozenset(op.devices) for op in ops]
    for roles, device in groups.items():
        level = sum(
            plan.states.get(r, {}).get(s, 0.0)
            for r in roles
            for s in plan.initial_residency.get(r, ())
        )
        events: list[tuple[float, int, float, str]] = []
        for op, devs in zip(ops, op_devices, strict=False):
            if device not in devs:
                continue
            if op.kind in TRANSFER_KINDS:
                gb = plan.states.get(op.role or "", {}).get(op.state or "", 0.0)
                if op.kind == OpKind.RELOAD:
                    events.append((op.start_s, 1, gb, op.id))
                else:
                    events.append((op.end_s, 0, -gb, op.id))
            elif op.memory_gb:
                events.append((op.start_s, 1, op.memory_gb, op.id))
                events.append((op.end_s, 0, -op.memory_gb, op.id))
        events.sort()
        if level > cap + TOL:
            raise PlanVerificationError(
                "memory",
                f"initial residency holds {level:g} GB on GPU {device} > {cap:g} GB",
            )
        for time, _, delta, op_id in events:
            level += delta
            if level > cap + TOL:
                raise PlanVerificationError(
                    "memory",
                    f"GPU {device} holds {level:.6g} GB at {time:.6g} s > {cap:g} GB",
                    op_id,
                )


def _check_host(plan: Plan, config: Config, ops: Sequence[Op], dead) -> None:
    from rlplex.plan.host import host_peaks

    cap = config.cluster.host_memory_gb
    if plan.host_memory_gb is not None:
        if not math.isfinite(plan.host_memory_gb) or plan.host_memory_gb <= 0:
            raise PlanVerificationError(
                "finite", f"host_memory_gb is {plan.host_memory_gb!r}, not a number > 0"
            )
        cap = min(cap, plan.host_memory_gb)
    for peak in host_peaks(plan, config, ops, dead).values():
        if peak.peak_gb > cap + TOL:
            held = " + ".join(f"{k} {v:g}" for k, v in sorted(peak.held.items()))
            raise PlanVerificationError(
                "host",
                f"node {peak.node} holds {peak.peak_gb:.6g} GB in host memory at"
                f" {peak.at_s:.6g} s ({held}) > {cap:g} GB",
            )
