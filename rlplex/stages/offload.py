"""The offload protocol: how the executor moves a role's state off and onto its GPUs.

When roles share GPUs, the plan inserts ``offload`` and ``reload`` ops at
exact places; the executor calls them on the role's workers through
:class:`Offloadable`. Anything with these four methods is an Offloadable; the
backends cover the usual engines:

- :class:`~rlplex.stages.offload_torch.TorchOffload`: plain torch modules and
  optimizers (weights and optimizer state flattened into one buffer per dtype,
  pinned host buffers allocated once and kept, byte copies on a side CUDA
  stream, device storage freed, one ``torch.cuda.empty_cache()`` per call);
- :class:`~rlplex.stages.offload_deepspeed.DeepSpeedOffload`: a DeepSpeed engine
  (ZeRO 0-2: its flat partitions moved by the same kept pinned buffers; grads
  and ZeRO-3 through ``engine.offload_states(include=...)`` / ``engine.reload_states()``);
- :class:`~rlplex.stages.offload_vllm.VllmOffload`: a vLLM engine
  (``sleep(level=1|2)``, ``wake_up(tags=["weights"])`` then ``["kv_cache"]``);
- :class:`BookkeepingOffload`: tracks residency only (rehearsals, CPU roles).

State names are those of the cost model: ``weights`` and ``optimizer`` are
*copied* (kept on the host while off the device), ``grads`` and ``kv_cache``
are *scratch* (dropped on offload, re-allocated on reload). ``dead=True`` means
the plan knows the content will be overwritten before it is read again (the
inference weights between generation and the next weight sync): the backend
may drop it instead of copying (vLLM sleep level 2).

Return values are bytes per worker: what an offload copied device-to-host (0
for a clean state whose host copy is current, a dead state, or a scratch
state) and what a reload copied host-to-device. Without CUDA nothing moves
physically; the backends still keep residency and report the bytes the copy
would move, so CPU runs exercise every call.

A worker is given its Offloadable by the role's setup function (see
:mod:`rlplex.runtime.worker`): return an Offloadable, or an object with an
``offloader`` attribute holding one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from rlplex.resources.cluster import COPIED_STATES, SCRATCH_STATES

COPIED = COPIED_STATES
"""States copied to the host on offload and back on reload (the cost model's)."""
SCRATCH = SCRATCH_STATES
"""States dropped on offload and re-allocated on reload (the cost model's)."""


@runtime_checkable
class Offloadable(Protocol):
    """Moves named states of one worker between its GPUs and host memory."""

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        """Free ``states`` on the device; returns the bytes copied to the host."""
        ...

    def reload(self, states: Sequence[str]) -> int:
        """Make ``states`` resident again; returns the bytes copied to the device."""
        ...

    def resident_states(self) -> frozenset[str]:
        """The states now on the device."""
        ...

    def state_bytes(self) -> dict[str, int]:
        """Bytes of each state on this worker's device(s)."""
        ...


def find_offloadable(state: Any) -> Offloadable | None:
    """The Offloadable a setup function returned: the object itself or its ``offloader``."""
    if isinstance(state, Offloadable):
        return state
    inner = getattr(state, "offloader", None)
    if isinstance(inner, Offloadable):
        return inner
    return None


class BookkeepingOffload:
    """Tracks which states are resident and moves nothing.

    Used for rehearsals and for roles whose setup gives no backend, so that
    the executor's residency bookkeeping (and the calls in the record) is the
    same with or without real models. ``sizes`` are the bytes it reports.
    """

    def __init__(
        self, sizes: Mapping[str, int] | None = None, resident: Sequence[str] | None = None
    ) -> None:
        self._sizes = dict(sizes or {})
        self._resident = set(self._sizes if resident is None else resident)
        self.calls: list[tuple[str, tuple[str, ...], bool]] = []
        """Every call, in order: ``(offload|reload, states, dead)``."""

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        self.calls.append(("offload", tuple(states), dead))
        moved = 0
        for state in states:
            if state in self._resident and state in COPIED and not dead:
                moved += self._sizes.get(state, 0)
            self._resident.discard(state)
        return moved

    def reload(self, states: Sequence[str]) -> int:
        self.calls.append(("reload", tuple(states), False))
        moved = 0
        for state in states:
            if state not in self._resident and state in COPIED:
                moved += self._sizes.get(state, 0)
            self._resident.add(state)
        return moved

    def resident_states(self) -> frozenset[str]:
        return frozenset(self._resident)

    def state_bytes(self) -> dict[str, int]:
        return dict(self._sizes)


def __getattr__(name: str) -> Any:
    # The backends import torch (or DeepSpeed, vLLM); load them only when asked.
    if name == "TorchOffload":
        from rlplex.stages.offload_torch import TorchOffload

        return TorchOffload
    if name == "DeepSpeedOffload":
        from rlplex.stages.offload_deepspeed import DeepSpeedOffload

        return DeepSpeedOffload
    if name == "VllmOffload":
        from rlplex.stages.offload_vllm import VllmOffload

        return VllmOffload
    raise AttributeError(name)
