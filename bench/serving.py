"""rlplex's decode step against published serving benchmarks (time per output token).

Run: ``.venv/bin/python bench/serving.py [--json]``. Each row of
``bench/serving/serving_tpot.yaml`` is a published vLLM or SGLang measurement
at a fixed concurrency (model, GPU, tensor parallel size, input and output
lengths, mean TPOT), transcribed with its source. For each row the estimator
plans one generation stage that decodes ``concurrency`` sequences of the
output length after prompts of the input length, on one engine of ``tp`` GPUs
(``dp`` engines share the concurrency), and the predicted time per output
token is the engine's decode seconds over its decode steps (the same
:func:`rlplex.estimate.decode.simulate_decode` that prices RL generation), plus
the prefill of the requests that replace finished ones meanwhile (a serving
benchmark keeps its concurrency; an RL step prefills all its prompts at once).

It checks the decode model (weight and KV reads at the achieved bandwidth,
the per-step floor, tensor-parallel all-reduces within and across nodes, MoE
experts touched per step) on figures that no RL run and no held-out case
contains. Rows with speculative decoding are left out (the model has none).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "serving" / "serving_tpot.yaml"


def row_config(row: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A native config whose one generation stage is the benchmark's engine at its load."""
    tp = int(row["tp"])
    dp = int(row.get("dp") or 1)
    gpus = tp * dp
    per_node = min(8, gpus)
    role: dict[str, Any] = {
        "devices": f"0-{gpus - 1}",
        "num_gpus_per_worker": tp,
        "precision": "fp8"
        if str(row.get("precision", "bf16")).lower().startswith("fp8")
        else "bf16",
        "rollout": {
            "cuda_graphs": not bool(row.get("eager")),
            "gpu_memory_utilization": 0.9,
            "kv_cache_dtype": "fp8" if str(row.get("kv_dtype") or "").startswith("fp8") else "auto",
        },
    }
    if row.get("ep"):
        role["parallel"] = {"ep": tp}
    concurrency = int(row.get("batch") or row["concurrency"])
    return {
        "model": model,
        "workload": {
            "prompts_per_step": concurrency,
            "samples_per_prompt": 1,
            "prompt_tokens": {"mean": int(row["isl"]), "max": int(row["isl"])},
            "response_tokens": {"mean": int(row["osl"]), "max": int(row["osl"]),
                                "clip_ratio": 1.0},
        },
        "cluster": {"nodes": math.ceil(gpus / per_node), "gpus_per_node": per_node,
                    "gpu": str(row["gpu"]).lower()},
        "roles": {"actor_infer": role},
        "pipeline": {"mode": "sync", "stages": {"generate": {"role": "actor_infer"}}},
    }  # fmt: skip


def predict_tpot_ms(row: Mapping[str, Any]) -> dict[str, Any]:
    """The estimator's mean decode step for one row, with the step's floor and batch."""
    from rlplex.config import load_config
    from rlplex.estimate.estimator import estimate_config
    from rlplex.estimate.specs import match_preset, model_presets

    spec = model_presets()[row["preset"]] if row.get("preset") else match_preset(str(row["model"]))
    if spec is None:
        raise ValueError(f"no preset for {row['model']!r}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "row.yaml"
        path.write_text(yaml.safe_dump(row_config(row, spec.name)), encoding="utf-8")
        gen = estimate_config(load_config(path)).stages["generate"]
    d = gen.detail
    # A serving benchmark replaces each finished request at once, so every decode step also
    # runs (chunked) the prompts of the requests that arrive meanwhile: over a request's
    # output the engine prefills its batch-1 companions' successors. TPOT counts that; the
    # request's own prefill is its time to first token, not TPOT.
    # Per engine: dp engines share the benchmark's concurrency.
    batch = max(1, math.ceil(int(row.get("batch") or row["concurrency"]) / int(row.get("dp") or 1)))
    others_prefill_s = d["prefill_s"] * (batch - 1) / batch
    return {
        "predicted_ms": (d["decode_s"] + others_prefill_s) / d["decode_steps"] * 1e3,
        "floor_ms": d["step_floor_s"] * 1e3,
        "mean_batch": d["mean_batch"],
        "preset": spec.name,
        "moe": spec.is_moe,
    }


def rel_error(predicted: float, published: float) -> float:
    return predicted / published - 1.0


def run(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        if row.get("spec_decode"):
            continue
        pred = predict_tpot_ms(row)
        published = float(row["tpot_ms"])
        nodes = math.ceil(int(row["tp"]) / 8)
        out.append({
            "model": row["model"], "gpu": row["gpu"], "tp": row["tp"], "dp": row.get("dp") or 1,
            "precision": row.get("precision", "bf16"), "engine": row.get("engine"),
            "isl": row["isl"], "osl": row["osl"], "concurrency": row["concurrency"],
            "published_ms": published, **pred,
            "error": rel_error(pred["predicted_ms"], published),
            "across_nodes": nodes > 1, "source": row["source"],
            "layout_inferred": bool(row.get("layout_inferred")),
        })  # fmt: skip
    return out


def summary(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Median and worst |error| over all rows and by kind (dense/MoE, TP within/across nodes)."""

    def stats(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        errors = [r["error"] for r in rs]
        if not errors:
            return {"rows": 0}
        worst = max(errors, key=abs)
        return {"rows": len(errors), "median_abs": statistics.median(abs(e) for e in errors),
                "worst": worst}  # fmt: skip

    return {
        "all": stats(results),
        "dense": stats([r for r in results if not r["moe"]]),
        "moe": stats([r for r in results if r["moe"]]),
        "tp_across_nodes": stats([r for r in results if r["across_nodes"]]),
        "layout_printed": stats([r for r in results if not r["layout_inferred"]]),
    }


def print_report(results: Sequence[Mapping[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=170)
    table = Table(title="decode: rlplex vs published time per output token (serving benchmarks)")
    for column in ("model", "GPU", "tp", "prec", "engine", "ISL/OSL", "conc", "floor ms",
                   "predicted ms", "published ms", "error"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("model", "engine") else "right")
    for r in results:
        tp = f"{r['tp']}" + (f"x{r['dp']}" if r["dp"] > 1 else "")
        table.add_row(
            str(r["model"]), str(r["gpu"]), tp + ("?" if r["layout_inferred"] else ""),
            str(r["precision"]), str(r["engine"]), f"{r['isl']}/{r['osl']}", str(r["concurrency"]),
            f"{r['floor_ms']:.1f}", f"{r['predicted_ms']:.1f}", f"{r['published_ms']:.1f}",
            f"{r['error'] * 100:+.0f}%",
        )  # fmt: skip
    console.print(table)
    console.print("tp N?: the source does not print the tensor-parallel size", highlight=False)
    for kind, s in summary(results).items():
        if s["rows"]:
            console.print(
                f"{kind}: {s['rows']} rows, median |error| {s['median_abs'] * 100:.0f}%,"
                f" worst {s['worst'] * 100:+.0f}%",
                highlight=False,
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--data", type=Path, default=DATA, help="the rows (YAML, `rows:`)")
    args = parser.parse_args(argv)
    rows = yaml.safe_load(args.data.read_text(encoding="utf-8"))["rows"]
    results = run(rows)
    if args.json:
        print(json.dumps({"rows": results, "summary": summary(results)}, indent=2))
    else:
        print_report(results)


if __name__ == "__main__":
    main()
