"""What the toy GRPO's train stage allocates at its peak, counted tensor by tensor on the CPU.

``.venv/bin/python bench/toy_train_tensors.py`` runs two in-process GRPO steps of
``bench/gpu_grpo.py``'s 8-layer, 1024-hidden model (fp32) with AdamW's multi-tensor
path (``foreach``, CUDA's default) and, during the second step's train stage (the
optimizer's moments already made), counts every storage the operators create while it
lives (a ``TorchDispatchMode``; an output sharing an input's storage is not new).
Prints, as JSON, the peak of those bytes and what is alive then, grouped by the
operator that made it: the tensors the train step adds beside the weights and moments,
without an allocator's rounding. The H200
run of 2026-11-28 measured the stage's device peak 0.16 GB above the plan; this says
whether tensors account for it. About a minute on two cores.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import weakref
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveStorages(TorchDispatchMode):
    """Bytes of the storages operators create, alive until freed; the peak and who made it."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, tuple[int, str]] = {}
        self.now = 0
        self.peak = 0
        self.at_peak: dict[int, tuple[int, str]] = {}

    def _track(self, tensor: torch.Tensor, op: str) -> None:
        storage = tensor.untyped_storage()
        key, size = storage.data_ptr(), storage.nbytes()
        if key in self.live or size == 0:
            return
        self.live[key] = (size, op)
        self.now += size
        if self.now > self.peak:
            self.peak, self.at_peak = self.now, dict(self.live)

        def gone(key: int = key, size: int = size) -> None:
            if self.live.pop(key, None) is not None:
                self.now -= size

        weakref.finalize(storage, gone)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        # An output sharing an input's storage (a view, an in-place result) is not new memory.
        inputs = {
            t.untyped_storage().data_ptr()
            for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor)
        }
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor) and item.untyped_storage().data_ptr() not in inputs:
                self._track(item, str(func))
        return out


def main() -> int:
    from gpu_grpo import MODELS

    from rlplex.pipelines import grpo, local
    from rlplex.pipelines.config import RLConfig

    torch.optim.AdamW = functools.partial(torch.optim.AdamW, foreach=True)  # type: ignore[misc]
    cfg = RLConfig(device="cpu", model=MODELS["8x1024"])
    pipeline = grpo.build_pipeline(cfg)
    mode = LiveStorages()

    def counted(fn: Any) -> Any:
        def run(**kwargs: Any) -> Any:
            if kwargs["ctx"].step != 1:
                return fn(**kwargs)
            with mode:
                return fn(**kwargs)

        run.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
        return run

    stages = tuple(
        s.model_copy(update={"fn": counted(s.fn)}) if s.name == "train" else s
        for s in pipeline.stages
    )
    local.run_local(pipeline.model_copy(update={"stages": stages}), grpo.setups(cfg), 2)
    groups: dict[str, list[int]] = {}
    for size, op in mode.at_peak.values():
        group = groups.setdefault(op, [0, 0])
        group[0] += 1
        group[1] += size
    print(
        json.dumps(
            {
                "peak_gb": mode.peak / 1e9,
                "alive_at_peak": [
                    {"op": op, "tensors": n, "gb": round(b / 1e9, 4)}
                    for op, (n, b) in sorted(groups.items(), key=lambda kv: -kv[1][1])
                    if b >= 1e6
                ],
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
