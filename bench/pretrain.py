"""rlplex's train pass against Megatron-Bridge's published pretraining throughput.

Run: ``.venv/bin/python bench/pretrain.py [--json]``. Each row is one line of
NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary-archive.md`` @ 067f987df,
release "26.04.01 NeMo Container", "Pre-Training Performance" (tokens / sec / GPU,
FP8 or MXFP8, MoE routing force-balanced as its footnote says), for the models
and GPUs rlplex has presets for. Each is planned as one ``train`` stage: the
global batch of full sequences, the row's micro-batch, tensor / pipeline /
expert parallel sizes and FSDP, fp8 matmuls, ``efficiency.moe_imbalance`` 1
(balanced routing), no RL framework's per-step or per-sequence overhead
(``step_overhead_s`` and ``sequence_overhead_s`` 0); the distributed optimizer
(ZeRO-1) where FSDP is off. Not
expressed: virtual pipeline stages (the bubble is priced without them), the
recipes' selective recomputation, DeepEP/HybridEP dispatch and communication
overlap. A row whose activations do not fit without it is planned with full
recomputation (marked ``RC``).

A check of the train pass on figures that no RL run contains, not a target: RL
trainers do not run as these pretraining recipes do (docs/benchmarks.md, tenth
pass, item 5).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SOURCE = (
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @ 067f987df,"
    ' "26.04.01 NeMo Container", Pre-Training Performance'
)


class Row(NamedTuple):
    model: str
    """rlplex preset (Llama-3 70B has Llama-3.1 70B's architecture)."""
    gpu: str
    gpus: int
    gbs: int
    mbs: int
    seq: int
    fsdp: bool
    tp: int
    pp: int
    ep: int
    tokens_per_s_per_gpu: float
    """Published tokens / sec / GPU."""
    where: str
    """The table and its row's system and precision."""


ROWS: tuple[Row, ...] = (
    Row("llama-3.1-70b", "gb200", 64, 256, 2, 8192, True, 1, 1, 1, 4224, "LLAMA3_70B GB200 FP8"),
    Row("llama-3.1-70b", "gb200", 64, 256, 1, 8192, False, 2, 4, 1, 3712, "LLAMA3_70B GB200 MXFP8"),
    Row("llama-3.1-70b", "h100", 64, 256, 1, 8192, False, 4, 8, 1, 1664, "LLAMA3_70B H100 FP8"),
    Row("deepseek-v3", "gb200", 256, 4096, 1, 4096, False, 1, 4, 64, 4256, "DSV3 GB200 MXFP8"),
    Row("deepseek-v3", "b200", 256, 4096, 1, 4096, False, 1, 8, 32, 3328, "DSV3 B200 MXFP8"),
    Row("qwen3-30b-a3b", "gb200", 8, 512, 4, 4096, False, 1, 1, 8, 26112, "Qwen3_30B GB200 MXFP8"),
    Row("qwen3-30b-a3b", "b200", 8, 512, 4, 4096, False, 1, 1, 8, 27136, "Qwen3_30B B200 MXFP8"),
    Row("qwen3-30b-a3b", "h100", 16, 1024, 1, 4096, False, 1, 1, 16, 8960, "Qwen3_30B H100 FP8"),
    Row("qwen3-235b-a22b", "gb200", 256, 8192, 1, 4096, False, 1, 8, 32, 5680, "235B GB200 MXFP8"),
    Row("qwen3-235b-a22b", "b200", 256, 8192, 1, 4096, False, 1, 8, 8, 3776, "235B B200 MXFP8"),
    Row("qwen3-235b-a22b", "h100", 256, 8192, 1, 4096, False, 2, 8, 32, 1712, "235B H100 FP8"),
)  # fmt: skip


def row_config(row: Row, recompute: bool) -> dict[str, Any]:
    """A native config whose one train stage is the row's pretraining step."""
    per_node = 4 if row.gpu == "gb200" else 8
    parallel: dict[str, Any] = {"tp": row.tp, "pp": row.pp, "ep": row.ep, "recompute": recompute}
    parallel.update({"fsdp": True} if row.fsdp else {"zero": 1})
    half = row.seq // 2  # a sequence is "prompt" + "response": the train pass sees both
    return {
        "model": row.model,
        "workload": {
            "prompts_per_step": row.gbs, "samples_per_prompt": 1,
            "prompt_tokens": {"mean": half, "max": half},
            "response_tokens": {"mean": row.seq - half, "max": row.seq - half, "clip_ratio": 1.0},
            "micro_batch_size": row.mbs, "mini_batches": 1, "packing": False,
        },
        "cluster": {"nodes": row.gpus // per_node, "gpus_per_node": per_node, "gpu": row.gpu},
        # Balanced routing; no RL framework around the trainer (its per-step and
        # per-sequence overheads are the controller's, not Megatron's).
        "efficiency": {"moe_imbalance": 1.0, "step_overhead_s": 0.0, "sequence_overhead_s": 0.0},
        "roles": {"actor_train": {"devices": f"0-{row.gpus - 1}", "precision": "fp8",
                                  "parallel": parallel}},
        "pipeline": {"stages": {"train": {"role": "actor_train"}}},
    }  # fmt: skip


def predict(row: Row) -> dict[str, Any]:
    """Planned tokens / sec / GPU of one row, with the train stage's terms."""
    from rlplex.config import load_config
    from rlplex.errors import ConfigError
    from rlplex.estimate.estimator import estimate_config

    for recompute in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "row.yaml"
            path.write_text(yaml.safe_dump(row_config(row, recompute)), encoding="utf-8")
            try:
                train = estimate_config(load_config(path)).stages["train"]
            except ConfigError:
                if recompute:
                    raise
                continue
        predicted = row.gbs * row.seq / (train.seconds * row.gpus)
        return {
            "row": row.where, "model": row.model, "gpu": row.gpu, "gpus": row.gpus,
            "recompute": recompute, "published": row.tokens_per_s_per_gpu,
            "predicted": predicted, "error": predicted / row.tokens_per_s_per_gpu - 1.0,
            "terms": dict(train.terms),
        }  # fmt: skip
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = [predict(row) for row in ROWS]
    if args.json:
        print(json.dumps({"source": SOURCE, "rows": results}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="train pass: rlplex vs Megatron-Bridge pretraining (tokens/s/GPU)")
    for column in ("row", "GPUs", "RC", "predicted", "published", "error", "terms s"):
        table.add_column(column, justify="left" if column in ("row", "terms s") else "right")
    for r in results:
        terms = ", ".join(f"{k} {v:.1f}" for k, v in r["terms"].items() if v >= 0.05)
        table.add_row(
            r["row"], str(r["gpus"]), "RC" if r["recompute"] else "",
            f"{r['predicted']:,.0f}", f"{r['published']:,.0f}", f"{r['error'] * 100:+.0f}%",
            terms,
        )  # fmt: skip
    console = Console(width=160)
    console.print(table)
    console.print(f"source: {SOURCE}", highlight=False)


if __name__ == "__main__":
    main()
