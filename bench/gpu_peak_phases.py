"""Where a train step's peak device memory is, and which tensors make it (CUDA only).

``python bench/gpu_peak_phases.py`` builds the model of
``tests/estimate/test_cuda_peak_memory.py`` (8 layers, hidden 1024, fp32, AdamW),
runs two steps and prints, as JSON, each phase's peak (forward, backward,
optimizer step) and, from torch's allocator trace of the second step, the blocks
alive at its peak grouped by size and by the innermost frame of this model's code
that allocated them. Without CUDA it prints ``no CUDA: not measured``.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch


def live_at_peak(snapshot: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """Replay the allocator trace: the bytes alive at the peak and the blocks making them."""
    live: dict[int, dict[str, Any]] = {}
    total = peak = 0
    at_peak: list[dict[str, Any]] = []
    for trace in snapshot["device_traces"]:
        for event in trace:
            if event["action"] == "alloc":
                live[event["addr"]] = event
                total += event["size"]
                if total > peak:
                    peak, at_peak = total, list(live.values())
            elif event["action"] in ("free_requested", "free_completed"):
                gone = live.pop(event["addr"], None)
                if gone is not None:
                    total -= gone["size"]
    return peak, at_peak


def where(event: dict[str, Any]) -> str:
    for frame in event.get("frames", []):
        name = frame.get("filename", "")
        if "/torch/" in name:
            continue
        if name.endswith(".py"):
            return f"{Path(name).name}:{frame.get('line')} {frame.get('name')}"
    return "?"


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA: not measured")
        return 0
    from rlplex.stages.models import ModelConfig, build_causal_lm

    tiny = ModelConfig(arch="qwen2", num_layers=8, hidden_size=1024, intermediate_size=2816,
                       num_heads=16, num_kv_heads=4, vocab_size=32000,
                       max_positions=1024)  # fmt: skip
    model = build_causal_lm(tiny).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randint(3, 32000, (4, 512), device="cuda")
    out: dict[str, Any] = {"device": torch.cuda.get_device_name()}

    def phase(name: str, fn: Any) -> Any:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        result = fn()
        torch.cuda.synchronize()
        out.setdefault(name, []).append(
            {
                "peak_gb": torch.cuda.max_memory_allocated() / 1e9,
                "after_gb": torch.cuda.memory_allocated() / 1e9,
            }
        )
        return result

    for step in range(2):
        if step == 1:
            torch.cuda.synchronize()
            out["step2_start_gb"] = torch.cuda.memory_allocated() / 1e9
            torch.cuda.memory._record_memory_history(max_entries=200_000)
        logits = phase("forward", lambda: model(input_ids=batch).logits.float())
        loss = logits.log_softmax(-1).mean()
        del logits
        phase("backward", loss.backward)
        phase("optimizer_step", optimizer.step)
        optimizer.zero_grad(set_to_none=True)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak, blocks = live_at_peak(snapshot)
    groups: dict[str, list[int]] = collections.defaultdict(list)
    for block in blocks:
        groups[where(block)].append(block["size"])
    # The trace sees what step 2 allocated; what it started with comes on top.
    out["step2_new_at_peak_gb"] = peak / 1e9
    out["alive_at_peak"] = sorted(
        (
            {
                "where": k,
                "blocks": len(v),
                "gb": sum(v) / 1e9,
                "sizes_mb": sorted({s // 2**20 for s in v})[:6],
            }
            for k, v in groups.items()
        ),
        key=lambda g: -g["gb"],
    )[:20]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
