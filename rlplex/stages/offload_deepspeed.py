"""Offload a DeepSpeed engine's states with DeepSpeed's own API.

DeepSpeed (ZeRO-3) can move its buffers to host memory and back:
``engine.offload_states(include=[OffloadStateTypeEnum...], device=OffloadDeviceEnum.cpu,
pin_memory=True, non_blocking=False)`` and ``engine.reload_states(non_blocking=False)``
(``deepspeed.runtime.zero.offload_config``). Its buffer types map onto the
cost model's states:

=============  ==========================================
rlplex state   DeepSpeed ``OffloadStateTypeEnum`` members
=============  ==========================================
weights        ``lp_params`` (the low-precision model parameters)
optimizer      ``hp_params`` (fp32 master copy), ``optim_states``
grads          ``lp_grads``, ``contiguous_grad_buffer``
=============  ==========================================

``reload_states()`` brings back *everything* DeepSpeed offloaded, so when the
plan reloads only some states the others are offloaded again at once (the
plan's residency is what the memory check assumed). Bytes are measured from
``torch.cuda.memory_allocated`` before and after each call, or taken from
``sizes`` when there is no CUDA.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

STATE_TYPES: dict[str, tuple[str, ...]] = {
    "weights": ("lp_params",),
    "optimizer": ("hp_params", "optim_states"),
    "grads": ("lp_grads", "contiguous_grad_buffer"),
}
"""rlplex state -> DeepSpeed ``OffloadStateTypeEnum`` values."""


def _enums(states: Sequence[str]) -> tuple[list[Any], Any]:
    names = [t for s in states for t in STATE_TYPES.get(s, ())]
    try:
        from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum, OffloadStateTypeEnum
    except ImportError:  # a stand-in engine in tests: the enum values are plain strings
        return names, "cpu"
    return [OffloadStateTypeEnum(n) for n in names], OffloadDeviceEnum.cpu


def _allocated() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return int(torch.cuda.memory_allocated())


class DeepSpeedOffload:
    """Offloadable for a DeepSpeed engine.

    Args:
        engine: the ``DeepSpeedEngine`` (anything with ``offload_states`` and ``reload_states``).
        sizes: bytes of each state, reported without CUDA (and before the first measurement).
        pin_memory: passed to ``offload_states``.
    """

    def __init__(
        self, engine: Any, sizes: Mapping[str, int] | None = None, *, pin_memory: bool = True
    ) -> None:
        self.engine = engine
        self._sizes = dict(sizes or {})
        self._pin = pin_memory
        self._resident = {s for s in STATE_TYPES}

    def resident_states(self) -> frozenset[str]:
        return frozenset(self._resident)

    def state_bytes(self) -> dict[str, int]:
        return dict(self._sizes)

    def _offload(self, states: Sequence[str]) -> int | None:
        """Offload through DeepSpeed; the bytes freed on the device, or None without CUDA."""
        include, device = _enums(states)
        if not include:
            return 0
        before = _allocated()
        self.engine.offload_states(
            include=include, device=device, pin_memory=self._pin, non_blocking=False
        )
        after = _allocated()
        return None if before is None or after is None else max(0, before - after)

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        todo = [s for s in states if s in self._resident and s in STATE_TYPES]
        if not todo:
            return 0
        measured = self._offload(todo)
        self._resident -= set(todo)
        if measured is not None:
            # DeepSpeed has no "drop": even dead states are copied, so report what moved.
            return measured
        return 0 if dead else sum(self._sizes.get(s, 0) for s in todo if s != "grads")

    def reload(self, states: Sequence[str]) -> int:
        todo = [s for s in states if s not in self._resident and s in STATE_TYPES]
        if not todo:
            return 0
        before = _allocated()
        self.engine.reload_states(non_blocking=False)
        after = _allocated()
        moved = (
            max(0, after - before)
            if before is not None and after is not None
            else sum(self._sizes.get(s, 0) for s in todo if s != "grads")
        )
        self._resident |= set(todo)
        # DeepSpeed reloaded every offloaded buffer; send back what the plan keeps off.
        still_off = [s for s in STATE_TYPES if s not in self._resident]
        if still_off:
            back = self._offload(still_off)
            if back is not None:
                moved = max(0, moved - back)
        return moved
