"""Peak memory per GPU of a plan: when it peaks, during which op, and what is resident.

A plan already guarantees that no device exceeds ``gpu_memory_gb``; this module
says how close each one comes, for ``rlplex plan`` to print the peak and the
headroom per GPU. It follows the cost model's rule: a state occupies its
role's devices from the start of its reload until the end of its offload (the
states of ``initial_residency`` from the start of the plan), and a ``run`` op
adds its ``memory_gb`` while it runs.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, ConfigDict

from rlplex.plan.model import Plan


class DeviceMemory(BaseModel):
    """The peak of one GPU."""

    model_config = ConfigDict(frozen=True)

    device: int
    """The GPU's global rank."""
    peak_gb: float
    """Most GB the GPU holds at any instant: resident states plus the running op's transient
    memory (0 for a GPU that holds nothing)."""
    capacity_gb: float
    """The plan's ``gpu_memory_gb``, which the peak never exceeds."""
    at_s: float
    """When the peak is first reached, seconds from the plan's start."""
    during: str | None
    """The run op on the device at that moment (None: between ops)."""
    resident: dict[str, float]
    """``role.state`` -> GB resident at the peak."""
    transient_gb: float
    """The running op's transient memory at the peak."""

    @property
    def headroom_gb(self) -> float:
        return self.capacity_gb - self.peak_gb


def peak_memory_by_device(plan: Plan) -> dict[int, DeviceMemory]:
    """The peak memory of every GPU of ``plan``, by global rank."""
    devices_of = {role: tuple(devs) for role, devs in plan.placement.items()}
    # (time, order, device, key, delta): removals (order 0) before additions at one instant.
    events: list[tuple[float, int, int, str, float]] = []
    for role, states in plan.initial_residency.items():
        for state in states:
            gb = plan.states.get(role, {}).get(state, 0.0)
            for d in devices_of.get(role, ()):
                events.append((0.0, 1, d, f"{role}.{state}", gb))
    for op in plan.ops:
        if op.kind == "reload" and op.role and op.state:
            gb = plan.states.get(op.role, {}).get(op.state, 0.0)
            for d in op.devices:
                events.append((op.start_s, 1, d, f"{op.role}.{op.state}", gb))
        elif op.kind == "offload" and op.role and op.state:
            gb = plan.states.get(op.role, {}).get(op.state, 0.0)
            for d in op.devices:
                events.append((op.end_s, 0, d, f"{op.role}.{op.state}", -gb))
        elif op.kind == "run" and op.memory_gb > 0:
            for d in op.devices:
                events.append((op.start_s, 1, d, f"run:{op.id}", op.memory_gb))
                events.append((op.end_s, 0, d, f"run:{op.id}", -op.memory_gb))
    events.sort(key=lambda e: (e[0], e[1]))
    held: dict[int, dict[str, float]] = defaultdict(dict)
    best: dict[int, DeviceMemory] = {}
    all_devices = sorted({d for devs in devices_of.values() for d in devs})
    for d in all_devices:
        best[d] = DeviceMemory(
            device=d, peak_gb=0.0, capacity_gb=plan.capacity_gb, at_s=0.0, during=None,
            resident={}, transient_gb=0.0,
        )  # fmt: skip
    for time, _, d, key, delta in events:
        now = held[d]
        now[key] = now.get(key, 0.0) + delta
        if abs(now[key]) < 1e-12:
            del now[key]
        total = sum(now.values())
        if delta > 0 and total > best[d].peak_gb + 1e-9:
            runs = [k[4:] for k in now if k.startswith("run:")]
            best[d] = DeviceMemory(
                device=d, peak_gb=total, capacity_gb=plan.capacity_gb, at_s=time,
                during=runs[0] if runs else None,
                resident={k: v for k, v in now.items() if not k.startswith("run:")},
                transient_gb=sum(v for k, v in now.items() if k.startswith("run:")),
            )  # fmt: skip
    return best
