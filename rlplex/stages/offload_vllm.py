"""Offload a vLLM engine with its sleep mode.

vLLM (``LLM(..., enable_sleep_mode=True)``) frees its GPU memory with
``llm.sleep(level=1)`` (weights backed up to host memory, KV cache dropped) or
``llm.sleep(level=2)`` (both dropped, for weights that a weight sync will
overwrite anyway), and takes it back with ``llm.wake_up(tags=["weights"])``
and ``llm.wake_up(tags=["kv_cache"])``: weights first, so a weight sync can
run before the KV cache is allocated. This backend maps the plan's calls:

- ``offload(["weights", ...])``: ``sleep(level=2)`` if ``dead`` else ``sleep(level=1)``;
  the KV cache goes too (vLLM always drops it while sleeping);
- ``offload(["kv_cache"])`` alone: vLLM cannot free only the KV cache, so it
  sleeps at level 1 and wakes the weights again (costs a weight round trip;
  the bytes report it);
- ``reload``: ``wake_up(tags=["weights"])`` then ``wake_up(tags=["kv_cache"])``,
  each only if asked for.

Any object with ``sleep(level)`` and ``wake_up(tags)`` works (tests use a
stand-in). Bytes: ``weights_bytes`` for copied weights (level 1 offload, wake
after level 1), 0 for dropped ones and for the KV cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class VllmOffload:
    """Offloadable for a vLLM ``LLM`` with sleep mode enabled.

    Args:
        llm: the engine (``vllm.LLM`` or anything with ``sleep``/``wake_up``).
        weights_bytes: bytes of the weights on this worker's GPUs.
        kv_cache_bytes: bytes of the KV cache on this worker's GPUs.
    """

    def __init__(self, llm: Any, *, weights_bytes: int = 0, kv_cache_bytes: int = 0) -> None:
        self.llm = llm
        self._sizes = {"weights": int(weights_bytes), "kv_cache": int(kv_cache_bytes)}
        self._resident = {"weights", "kv_cache"}
        self._weights_on_host = False

    def resident_states(self) -> frozenset[str]:
        return frozenset(self._resident)

    def state_bytes(self) -> dict[str, int]:
        return dict(self._sizes)

    def offload(self, states: Sequence[str], *, dead: bool = False) -> int:
        todo = {s for s in states if s in self._resident}
        if not todo:
            return 0
        if "weights" in todo:
            level = 2 if dead else 1
            self.llm.sleep(level=level)
            self._weights_on_host = level == 1
            self._resident -= {"weights", "kv_cache"}
            return self._sizes["weights"] if level == 1 else 0
        # Only the KV cache: sleep (weights to host) and wake the weights again.
        self.llm.sleep(level=1)
        self.llm.wake_up(tags=["weights"])
        self._resident.discard("kv_cache")
        return 2 * self._sizes["weights"]

    def reload(self, states: Sequence[str]) -> int:
        moved = 0
        if "weights" in states and "weights" not in self._resident:
            self.llm.wake_up(tags=["weights"])
            moved += self._sizes["weights"] if self._weights_on_host else 0
            self._weights_on_host = False
            self._resident.add("weights")
        if "kv_cache" in states and "kv_cache" not in self._resident:
            self.llm.wake_up(tags=["kv_cache"])
            self._resident.add("kv_cache")
        return moved
