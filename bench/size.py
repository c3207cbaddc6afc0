"""How long ``rlplex size`` takes: five GPU counts x two GPU types on a four-role PPO config.

Run: ``.venv/bin/python bench/size.py``. Sizes a GRPO/PPO-style step of
Qwen2.5-7B with four GPU roles (actor_train, actor_infer, reference, critic)
and a CPU reward, nothing typed by hand (the estimator prices every
candidate), for 8, 16, 32, 64 and 128 GPUs of H100 and H20. Prints the wall
time of the whole search (config building, estimates and plans of every
candidate), the candidates planned, and the front.

Target (issue 19): under 60 s on the 2-core development machine.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlplex.reports.size import size_report  # noqa: E402

COUNTS = (8, 16, 32, 64, 128)
GPUS = ("h100", "h20")


def ppo_7b() -> dict:
    """PPO on Qwen2.5-7B: actor, rollout (vLLM tp 2), reference and critic, all estimated."""
    train = {"devices": "0-7", "parallel": {"fsdp": True, "recompute": True}}
    return {
        "model": "qwen2.5-7b",
        "workload": {
            "prompts_per_step": 1024,
            "samples_per_prompt": 4,
            "prompt_tokens": {"mean": 256, "max": 512},
            "response_tokens": {"mean": 512, "max": 1024},
            "micro_batch_size": 4,
        },
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "h100"},
        "roles": {
            "actor_train": train,
            "actor_infer": {"devices": "0-7", "num_gpus_per_worker": 2},
            "reference": {"devices": "0-7", "parallel": {"fsdp": True}},
            "critic": train,
            "rewards": {"world_size": 8},
        },
        "pipeline": {
            "stages": {
                "generate": {"role": "actor_infer"},
                "reward": {"role": "rewards", "seconds": 5, "after": ["generate"]},
                "ref_logprob": {"role": "reference", "after": ["generate"]},
                "old_logprob": {
                    "role": "actor_train",
                    "after": ["generate"],
                    "needs": ["weights"],
                },
                "values": {"role": "critic", "after": ["generate"], "needs": ["weights"]},
                "advantage": {
                    "role": "driver",
                    "seconds": 1,
                    "after": ["reward", "ref_logprob", "old_logprob", "values"],
                },
                "critic_train": {"role": "critic", "kind": "train", "after": ["advantage"]},
                "train": {"role": "actor_train", "after": ["advantage"]},
                "weight_sync": {
                    "kind": "weight_sync",
                    "from": "actor_train",
                    "to": "actor_infer",
                    "after": ["train"],
                },
            }
        },
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ppo_7b_four_roles.yaml"
        path.write_text(yaml.safe_dump(ppo_7b(), sort_keys=False))
        start, cpu = time.perf_counter(), time.process_time()
        report = size_report(path, COUNTS, GPUS)
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"python {platform.python_version()}, {platform.machine()}")
    print(
        f"size {len(COUNTS)} GPU counts x {len(GPUS)} GPU types, four GPU roles:"
        f" {len(report.candidates)} candidates planned in {took:.1f} s wall, {cpu:.1f} s CPU"
        f" (target < 60 s; load average {load:.1f} on {os.cpu_count()} cores)"
    )
    print("| GPUs | GPU | fastest plan | step s | peak GPU GB | peak host GB |")
    print("|---|---|---|---|---|---|")
    for row in report.rows:
        if row.best is None:
            print(f"| {row.gpus} | {row.gpu} | does not fit | - | - | - |")
            continue
        b = row.best
        print(
            f"| {row.gpus} | {row.gpu} | {b.knobs.label()} | {b.period_s:.2f}"
            f" | {b.peak_gpu_gb:.1f} | {b.peak_host_gb:.1f} |"
        )
    print("front:", ", ".join(f"{s.knobs.gpus} x {s.knobs.gpu}" for s in report.front))


if __name__ == "__main__":
    main()
