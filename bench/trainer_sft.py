"""The train-pass term alone against published Megatron training throughput (no RL around it).

Run: ``.venv/bin/python bench/trainer_sft.py [--json]``. An RL step's train stage carries
the trainer's physics (matmul efficiency, an MoE's grouped GEMMs, expert all-to-all,
pipeline bubbles, gradient reduction) under RL-only costs (the controller's batch moves,
the per-step overhead). Published supervised-training iteration times of the same models
check the first without the second: each case is a native config of one ``train`` stage
on the published parallel layout and batch, with the controller and the per-step and
per-sequence overheads set to zero, planned as any config, and its train seconds are held
against the published seconds per iteration. Nothing here is fitted.

Cases (each with its source and the approximations):

- Pai-Megatron-Patch issue #643 (alibaba/Pai-Megatron-Patch, 2025-08-08), Qwen3-30B-A3B on
  16 H800 (2 nodes), Megatron-core, sequence length 8,192, micro-batch 1, no recomputation,
  expert tensor parallel 1, ``--moe-expert-capacity-factor 1.0`` with token dropping (the
  busiest expert rank at the mean: ``moe_imbalance`` 1.0), CUDA graphs off: "tp=1, pp=2,
  ep=8 | 8192 | 128 | 16 | 10.361" and "tp=1, pp=4, ep=4 | 8192 | 256 | 16 | 20.992"
  (layout | sequence length | global batch | GPUs | seconds per iteration). Approximations:
  every sample a full 8,192 tokens (pre-training style packing); the h800 preset (the
  H100's BF16 peak and memory bandwidth, NVLink at 400 GB/s both ways: 160 GB/s each way
  at the link efficiency 0.8); the optimizer distributed (ZeRO-1), as Pai's Megatron
  examples run it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from typing import Any

from rlplex.config.build import config_from_dict
from rlplex.estimate.estimator import estimate_config


@dataclass(frozen=True)
class Case:
    id: str
    source: str
    model: str
    gpus_per_node: int
    nodes: int
    gpu: str
    parallel: dict[str, Any]
    sequences: int
    tokens: int
    published_s: float
    efficiency: dict[str, float]
    cluster: dict[str, Any]


_PAI = "alibaba/Pai-Megatron-Patch#643"
_DROP = {"moe_imbalance": 1.0}

CASES = (
    Case("qwen3-30b-a3b tp1 pp2 ep8, 16 H800", _PAI, "qwen3-30b-a3b", 8, 2, "h800",
         {"pp": 2, "ep": 8, "zero": 1}, 128, 8192, 10.361, _DROP, {}),
    Case("qwen3-30b-a3b tp1 pp4 ep4, 16 H800", _PAI, "qwen3-30b-a3b", 8, 2, "h800",
         {"pp": 4, "ep": 4, "zero": 1}, 256, 8192, 20.992, _DROP, {}),
)  # fmt: skip


def case_config(case: Case) -> dict[str, Any]:
    """A native config of one train stage over ``sequences`` full sequences."""
    gpus = case.nodes * case.gpus_per_node
    return {
        "model": case.model,
        "workload": {
            "prompts_per_step": case.sequences,
            "samples_per_prompt": 1,
            "prompt_tokens": {"mean": 1, "max": 1},
            "response_tokens": {"mean": case.tokens - 1, "max": case.tokens - 1},
            "micro_batch_size": 1,
            "mini_batches": 1,
            "controller": {"padding": "none"},
        },
        "cluster": {
            "nodes": case.nodes,
            "gpus_per_node": case.gpus_per_node,
            "gpu": case.gpu,
            **case.cluster,
        },
        "efficiency": {"step_overhead_s": 0.0, "sequence_overhead_s": 0.0, **case.efficiency},
        "roles": {"actor_train": {"devices": f"0-{gpus - 1}", "parallel": case.parallel}},
        "pipeline": {"mode": "sync", "stages": {"train": {"role": "actor_train"}}},
    }


GPU_GB = 85.52
"""An H800's (and H100's) memory as the h100 preset gives it."""


def run() -> list[dict[str, Any]]:
    """Each case's train seconds, priced with the GPU's memory check lifted (seconds do not
    depend on it), and the GB per GPU rlplex estimates the run needs beside the GPU's: a
    published run that fit where rlplex says it does not shows where the memory model is
    pessimistic (or what the run set that its post does not say)."""
    rows = []
    for case in CASES:
        data = case_config(case)
        data["cluster"]["gpu_memory_gb"] = 10 * GPU_GB
        est = estimate_config(config_from_dict(data, file=case.id))
        stage = est.stages["train"]
        rows.append({
            "case": case.id, "source": case.source, "published_s": case.published_s,
            "predicted_s": stage.seconds, "error": stage.seconds / case.published_s - 1.0,
            "terms": {k: round(v, 3) for k, v in stage.terms.items()},
            "estimated_gb": est.roles["actor_train"].peak_gb, "gpu_gb": GPU_GB,
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = run()
    median = statistics.median(abs(r["error"]) for r in rows)
    if args.json:
        print(json.dumps({"rows": rows, "median_abs_error": median}, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="train term vs published Megatron training iterations")
    for col in ("case", "source", "published s", "predicted s", "error", "terms (s)",
                "rlplex GB / GPU GB"):  # fmt: skip
        table.add_column(col, overflow="fold")
    for r in rows:
        terms = ", ".join(f"{k} {v:g}" for k, v in r["terms"].items() if v)
        table.add_row(r["case"], r["source"], f"{r['published_s']:.2f}",
                      f"{r['predicted_s']:.2f}", f"{r['error']:+.0%}", terms,
                      f"{r['estimated_gb']:.1f} / {r['gpu_gb']:.1f}")  # fmt: skip
    console = Console(width=160)
    console.print(table)
    console.print(f"{len(rows)} cases: median |error| {median:.1%}")


if __name__ == "__main__":
    main()
