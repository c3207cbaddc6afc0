"""What FSDP2 itself adds to a train or log-prob pass, on one GPU (CUDA only).

``python bench/gpu_fsdp_overhead.py --out FILE`` times the passes of
``bench/gpu_pass_speed.py`` (Hugging Face Qwen2 shapes of rlplex's presets, no padding)
twice in one process: the plain model in bf16, and the same model in fp32 wrapped the way
verl's and NeMo RL's FSDP workers wrap it (``fully_shard`` on every decoder layer and on
the root, ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``) on a process group
of one GPU. On one rank FSDP2 skips its all-gathers and reduce-scatters altogether (and
their copy-in and copy-out), so what the wrapped passes take beyond the plain ones is the
rest of FSDP's own work: casting every layer's fp32 weights to bf16 before each forward and
backward, the gradients to fp32, and the per-layer hooks. It is a lower bound on what a
sharded trainer pays per pass (with more ranks the gathers' copies add); rlplex prices none
of it (its FSDP terms are the gathers' and reductions' traffic between GPUs). Prints, and
writes to FILE as each case ends, each pass's seconds both ways and their ratio. Without
CUDA it prints ``no CUDA: not measured`` and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NOT_MEASURED = "no CUDA: not measured"

CASES: tuple[tuple[str, int, int], ...] = (
    ("qwen2.5-1.5b", 4, 1024),
    ("qwen2.5-1.5b", 8, 2048),
    ("qwen2.5-7b", 4, 1024),
)
"""(preset, rows, length): the 7B's fp32 weights and gradients (61 GB) leave room for 4K
tokens of activations beside the plain bf16 twin only when that one is freed first."""


def ratios(case: dict[str, Any]) -> dict[str, float]:
    """Each pass's FSDP seconds over the plain model's."""
    return {p: case["fsdp"][f"{p}_s"] / case["plain"][f"{p}_s"] for p in ("forward", "train")}


def measure(out_file: Path, repeats: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from gpu_pass_speed import hf_qwen2_config, measure_case
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl", rank=0, world_size=1)
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "repeats": repeats, "cases": []}  # fmt: skip
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for preset, rows, length in CASES:
        config = hf_qwen2_config(preset)
        case: dict[str, Any] = {"model": preset, "rows": rows, "length": length}
        for kind in ("plain", "fsdp"):
            dtype = torch.bfloat16 if kind == "plain" else torch.float32
            with torch.device("cuda"):
                model = AutoModelForCausalLM.from_config(config, dtype=dtype)
            model.train()
            if kind == "fsdp":
                for layer in model.model.layers:
                    fully_shard(layer, mp_policy=policy)
                fully_shard(model, mp_policy=policy)
            else:
                for p in model.parameters():
                    p.grad = torch.zeros_like(p)
            try:
                case[kind] = measure_case(model, rows, length, config.vocab_size, repeats)
            except torch.OutOfMemoryError as exc:
                case[kind] = {"error": f"out of memory: {str(exc).splitlines()[0]}"}
            del model
            torch.cuda.empty_cache()
        if "error" not in case["plain"] and "error" not in case["fsdp"]:
            case["ratio"] = ratios(case)
        result["cases"].append(case)
        out_file.write_text(json.dumps(result, indent=1))
        print(json.dumps({k: case.get(k) for k in ("model", "rows", "length", "ratio")}),
              flush=True)  # fmt: skip
    done = [c["ratio"] for c in result["cases"] if "ratio" in c]
    if done:
        result["median_ratio"] = {
            p: statistics.median(r[p] for r in done) for p in ("forward", "train")
        }
        out_file.write_text(json.dumps(result, indent=1))
        print("median FSDP / plain:", json.dumps(result["median_ratio"]))
    dist.destroy_process_group()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="write the measurements here")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(NOT_MEASURED)
        return 0
    started = time.perf_counter()
    measure(args.out, args.repeats)
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
