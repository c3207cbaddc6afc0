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
``torch.cuda.memory_allocated`` before and after each call when the engine's
model is on CUDA, else taken from ``sizes``.

Copy speed. DeepSpeed's ``offload_states`` pins new host memory on every
call (its reload drops the pinned buffers), which on an H100 ran at 1.3-8 GB/s
against ~55 GB/s for a copy into pinned memory that already exists. So with
``mover="rlplex"`` (the default for ZeRO stages 0-2) the weights and optimizer
state are moved by rlplex's own :class:`~rlplex.stages.offload_torch.StorageMover`:
DeepSpeed's flat partitions (``bit16_groups_flat``, ``single_partition_of_fp32_groups``
and the inner optimizer's moments) keep their tensor objects, their storages
are copied into pinned buffers allocated once and kept, then resized to 0
bytes; a reload resizes them back and copies in. Gradients still go through
``offload_states`` (they are scratch: DeepSpeed re-creates them). ZeRO-3
partitions its parameters itself, so it always uses DeepSpeed's API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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


def _engine_tensors(engine: Any) -> tuple[Callable[[], list[Any]], Callable[[], list[Any]]]:
    """Functions listing a ZeRO-0/1/2 engine's weight tensors and optimizer-state tensors."""
    import torch

    def weights() -> list[Any]:
        module = engine.module
        # The flat buffers the parameters view (ZeRO-1/2): DeepSpeed writes through them.
        flats = list(getattr(engine.optimizer, "bit16_groups_flat", []))
        return [*flats, *module.parameters(), *module.buffers()]

    def optimizer() -> list[Any]:
        outer = engine.optimizer
        inner = getattr(outer, "optimizer", outer)
        out = list(getattr(outer, "single_partition_of_fp32_groups", []))
        if isinstance(inner, torch.optim.Optimizer):
            out += [p for group in inner.param_groups for p in group["params"]]
            out += [
                v
                for per_param in inner.state.values()
                for v in per_param.values()
                if isinstance(v, torch.Tensor) and v.numel() > 1
            ]
        return out

    return weights, optimizer


class DeepSpeedOffload:
    """Offloadable for a DeepSpeed engine.

    Args:
        engine: the ``DeepSpeedEngine`` (anything with ``offload_states`` and ``reload_states``).
        sizes: bytes of each state, reported without CUDA (and before the first measurement).
        pin_memory: pin host buffers (``offload_states``' argument too).
        mover: ``rlplex`` (weights and optimizer by rlplex's pinned buffers kept
            across calls), ``deepspeed`` (everything through ``offload_states``)
            or ``auto`` (``rlplex`` for a real engine at ZeRO stage 0-2).
        copy_on_cpu: with the ``rlplex`` mover, really move CPU tensors too (tests).
    """

    def __init__(
        self,
        engine: Any,
        sizes: Mapping[str, int] | None = None,
        *,
        pin_memory: bool = True,
        mover: str = "auto",
        copy_on_cpu: bool = False,
    ) -> None:
        if mover not in ("auto", "rlplex", "deepspeed"):
            raise ValueError(f"mover must be auto, rlplex or deepspeed (got {mover!r})")
        self.engine = engine
        self._sizes = dict(sizes or {})
        self._pin = pin_memory
        self._resident = {s for s in STATE_TYPES}
        if mover == "auto":
            stage = getattr(engine, "zero_optimization_stage", None)
            real = callable(stage) and hasattr(engine, "module")
            mover = "rlplex" if real and stage() < 3 else "deepspeed"
        self.mover = mover
        """Who moves ``weights`` and ``optimizer``: ``rlplex`` or ``deepspeed``."""
        self._movers: dict[str, Any] = {}
        if mover == "rlplex":
            from rlplex.stages.offload_torch import StorageMover

            weights, optimizer = _engine_tensors(engine)
            self._movers["weights"] = StorageMover(
                weights, pin_memory=pin_memory, copy_on_cpu=copy_on_cpu, trust_versions=False
            )

            def weight_storages() -> set[int]:
                return {t.untyped_storage().data_ptr() for t in weights()}

            self._movers["optimizer"] = StorageMover(
                optimizer,
                pin_memory=pin_memory,
                copy_on_cpu=copy_on_cpu,
                exclude=weight_storages,
                trust_versions=False,
            )

    def _allocated(self) -> int | None:
        """CUDA bytes allocated, only when the engine's model lives on CUDA (a stand-in
        engine, or a CPU model on a CUDA machine, is never measured with CUDA counters)."""
        module = getattr(self.engine, "module", None)
        params = getattr(module, "parameters", None)
        if not callable(params) or not any(getattr(p, "is_cuda", False) for p in params()):
            return None
        return _allocated()

    def resident_states(self) -> frozenset[str]:
        return frozenset(self._resident)

    def state_bytes(self) -> dict[str, int]:
        sizes = dict(self._sizes)
        for state, mover in self._movers.items():
            if state in self._resident:
                sizes[state] = mover.resident_bytes()
            elif mover.storages:
                sizes[state] = sum(mover.nbytes)
        return sizes

    def _offload(self, states: Sequence[str]) -> int | None:
        """Offload through DeepSpeed; the bytes freed on the device, or None without CUDA."""
        include, device = _enums(states)
        if not include:
            return 0
        before = self._allocated()
        self.engine.offload_states(
            include=include, device=device, pin_memory=self._pin, non_blocking=False
        )
        after = self._allocated()
        return None if before is None or after is None else max(0, before - after)

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        todo = [s for s in states if s in self._resident and s in STATE_TYPES]
        if not todo:
            return 0
        own = [s for s in todo if s in self._movers]
        moved = 0
        if own:
            for state in own:
                moved += self._movers[state].offload(dead)
            self._resident -= set(own)
            if any(
                m.physical and m.storages[0].device.type == "cuda"
                for m in self._movers.values()
                if m.storages
            ):
                import torch

                torch.cuda.empty_cache()
            todo = [s for s in todo if s not in self._movers]
            if not todo:
                return moved
        return moved + self._deepspeed_offload(todo, dead)

    def _deepspeed_offload(self, todo: list[str], dead: bool) -> int:
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
        moved = 0
        for state in [s for s in todo if s in self._movers]:
            moved += self._movers[state].reload()
            self._resident.add(state)
        todo = [s for s in todo if s not in self._movers]
        if not todo:
            return moved
        return moved + self._deepspeed_reload(todo)

    def _deepspeed_reload(self, todo: list[str]) -> int:
        before = self._allocated()
        self.engine.reload_states(non_blocking=False)
        after = self._allocated()
        moved = (
            max(0, after - before)
            if before is not None and after is not None
            else sum(self._sizes.get(s, 0) for s in todo if s != "grads")
        )
        self._resident |= set(todo)
        # DeepSpeed reloaded every buffer it offloaded; send back what the plan keeps off.
        still_off = [s for s in STATE_TYPES if s not in self._resident and s not in self._movers]
        if still_off:
            back = self._offload(still_off)
            if back is not None:
                moved = max(0, moved - back)
        return moved
