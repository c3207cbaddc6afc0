"""GPU check of TorchOffload: memory returned to the device, and copy speed.

Run on a CUDA machine with only torch installed (rlplex optional: the
backend is loaded from this checkout): ``python bench/gpu_offload.py``.
Prints the device name and figures as JSON; exits 1 without CUDA.

Targets (issue 5): offloading a >= 1 GB model leaves <= 5 % of its memory
allocated; offload and reload reach >= 80 % of the bandwidth of a plain
pinned-memory copy of the same bytes, measured in the same run.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print(json.dumps({"error": "CUDA is not available"}))
        return 1
    from rlplex.stages.offload_torch import TorchOffload

    device = torch.device("cuda")
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    # 2 GiB of fp32 weights in 32 layers of 4096 x 4096 (64 MiB each).
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, bias=False) for _ in range(32)]).to(
        device
    )
    backend = TorchOffload(model)
    torch.cuda.synchronize()
    model_bytes = torch.cuda.memory_allocated() - base
    checksum = sum(float(p.double().sum()) for p in model.parameters())

    offload_s, reload_s, left = [], [], []
    for i in range(4):
        with torch.no_grad():
            model[0].weight.add_(0.0)  # dirty the weights: every offload copies
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        moved_out = backend.offload(["weights"])
        offload_s.append(time.perf_counter() - t0)
        left.append(torch.cuda.memory_allocated() - base)
        t0 = time.perf_counter()
        moved_in = backend.reload(["weights"])
        torch.cuda.synchronize()
        reload_s.append(time.perf_counter() - t0)
        assert moved_out == moved_in == model_bytes or i == 0, (moved_out, moved_in, model_bytes)
    intact = abs(sum(float(p.double().sum()) for p in model.parameters()) - checksum) < 1e-3 * max(
        1.0, abs(checksum)
    )

    # The reference: one plain pinned copy of the same bytes each way.
    src = torch.empty(model_bytes, dtype=torch.uint8, device=device)
    host = torch.empty(model_bytes, dtype=torch.uint8, pin_memory=True)
    d2h, h2d = [], []
    for _ in range(4):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        host.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        d2h.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        src.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        h2d.append(time.perf_counter() - t0)

    gb = model_bytes / 1e9
    best = lambda xs: statistics.median(xs[1:])  # noqa: E731 - skip the first (allocation) round
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "model_gb": gb,
        "allocated_after_offload_fraction": max(left) / model_bytes,
        "offload_gb_per_s": gb / best(offload_s),
        "reload_gb_per_s": gb / best(reload_s),
        "pinned_d2h_gb_per_s": gb / best(d2h),
        "pinned_h2d_gb_per_s": gb / best(h2d),
        "weights_intact": intact,
    }
    result["offload_vs_pinned"] = result["offload_gb_per_s"] / result["pinned_d2h_gb_per_s"]
    result["reload_vs_pinned"] = result["reload_gb_per_s"] / result["pinned_h2d_gb_per_s"]
    result["ok"] = (
        result["allocated_after_offload_fraction"] <= 0.05
        and result["offload_vs_pinned"] >= 0.8
        and result["reload_vs_pinned"] >= 0.8
        and intact
    )
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 2


if __name__ == "__main__":
    sys.exit(main())
