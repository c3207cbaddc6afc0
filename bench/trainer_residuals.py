"""How much slower or faster than their compute term the published trainer phases ran.

Run: ``.venv/bin/python bench/trainer_residuals.py [--json]`` (a second or two, no GPU).

A train or log-prob stage's estimate is its compute term (FLOPs at the ``train`` /
``forward`` ceiling times the width and micro-batch factors) plus terms priced apart
(memory traffic, communication not hidden, host launches, pipeline bubbles, offload, the
controller). For every published phase of ``bench/published.py``'s cases that is one such
stage, this prints the compute multiplier the published seconds imply,

    k = (published - the other terms) / compute,

so ``k`` = 1 where the ceiling is right for that run, ``k`` < 1 where its passes ran faster
than the ceiling says, ``k`` > 1 where something not yet a term made them slower; and the
median ``k`` by GPU and trainer (``fsdp``; ``megatron``: sharded otherwise; ``unsharded``:
a role with no parallel layout, such as a one-GPU reference). A row whose ``k`` would put
its compute above the GPU's peak (the estimate's efficiency over ``k`` above 1) is flagged
and left out of the medians: there the published seconds, their mapping to stages, or the
other terms are wrong. One H200 running Hugging Face passes alone
(``bench/gpu_pass_speed.py``) gives ``k`` of 0.70-0.80 at micro-batches of 8-16K tokens:
the spread above that is what multi-GPU trainers lose, and how it differs between GPUs of
different FLOP/s is what a term for it must explain (docs/benchmarks.md, "Third H200
run").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PASS_STAGES = frozenset({"train", "critic_train", "old_logprob", "ref_logprob", "values"})
"""Stages whose estimate is a pass's compute and the terms priced apart."""


@dataclass(frozen=True)
class Residual:
    case: str
    phase: str
    stage: str
    gpu: str
    trainer: str
    """``fsdp``, ``megatron`` (sharded otherwise) or ``unsharded`` (no parallel layout)."""
    devices: int
    heldout: bool
    compute_s: float
    """The estimate's compute term."""
    other_s: float
    """Its other terms, less the per-step overhead a framework's phase does not hold."""
    published_s: float
    k: float
    """(published - other) / compute."""
    efficiency: float
    """The estimate's efficiency for the pass (a fraction of peak)."""
    attention_share: float
    """Attention's share of the pass's FLOPs."""

    @property
    def implied_efficiency(self) -> float:
        """The fraction of peak the published seconds imply for the compute."""
        return self.efficiency / self.k if self.k > 0 else float("inf")

    @property
    def consistent(self) -> bool:
        """Whether the published seconds leave the passes at or below the GPU's peak."""
        return 0 < self.implied_efficiency <= 1.0


def residuals() -> list[Residual]:
    """One row per published phase that is a single train or log-prob stage."""
    import published

    from rlplex.config import load_config
    from rlplex.estimate.estimator import estimate_config

    rows = []
    for case in published.CORPUS_CASES + published.HELDOUT_CASES:
        if not case.phases:
            continue
        config = load_config(published.CONFIGS / case.config)
        stages = estimate_config(config).stages
        for phase, published_s in case.phases.items():
            names = case.predicted_as[phase]
            if len(names) != 1 or names[0] not in PASS_STAGES:
                continue
            est = stages[names[0]]
            compute = est.terms.get("compute", 0.0)
            other = (est.seconds or 0.0) - compute - est.outside_s
            role = config.roles[config.pipeline.stage(names[0]).role or ""]
            par = role.parallel
            trainer = "unsharded" if par is None else "fsdp" if par.fsdp else "megatron"
            rows.append(
                Residual(
                    case.id,
                    phase,
                    names[0],
                    str(config.cluster.gpu),
                    trainer,
                    est.detail["devices"],
                    case.heldout,
                    compute,
                    other,
                    published_s,
                    (published_s - other) / compute,
                    est.detail["efficiency"],
                    est.detail["attention_flop_share"],
                )
            )
    return rows


def by_gpu(rows: list[Residual]) -> dict[str, dict[str, float]]:
    """Median ``k`` of the consistent rows and the phases counted, per GPU and trainer."""
    out = {}
    for key in sorted({(r.gpu, r.trainer) for r in rows}):
        ks = [r.k for r in rows if (r.gpu, r.trainer) == key and r.consistent]
        flagged = sum(1 for r in rows if (r.gpu, r.trainer) == key and not r.consistent)
        if ks:
            out[f"{key[0]} {key[1]}"] = {
                "phases": len(ks), "median_k": statistics.median(ks),
                "least_k": min(ks), "most_k": max(ks), "inconsistent": flagged,
            }  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    rows = residuals()
    summary = by_gpu(rows)
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "by_gpu": summary}, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="published trainer phases: the compute multiplier k they imply")
    cols = ("case", "phase", "GPU", "trainer", "GPUs", "compute s", "other s", "published s",
            "k", "implied eff.", "attention")  # fmt: skip
    for col in cols:
        left = col in ("case", "phase", "GPU", "trainer")
        table.add_column(col, justify="left" if left else "right")
    for r in sorted(rows, key=lambda r: (r.gpu, r.trainer, r.k)):
        table.add_row(
            ("held-out " if r.heldout else "") + r.case.removeprefix("heldout-"), r.phase,
            r.gpu, r.trainer, str(r.devices), f"{r.compute_s:.1f}", f"{r.other_s:.1f}",
            f"{r.published_s:.1f}", f"{r.k:.2f}",
            f"{r.implied_efficiency:.2f}" + ("" if r.consistent else " (over peak)"),
            f"{r.attention_share:.0%}",
        )  # fmt: skip
    console = Console()
    console.print(table)
    for key, s in summary.items():
        console.print(
            f"{key}: {s['phases']} phases, k {s['least_k']:.2f} / {s['median_k']:.2f} /"
            f" {s['most_k']:.2f} (least / median / most)"
            + (f"; {s['inconsistent']} over the GPU's peak left out" if s["inconsistent"] else "")
        )


if __name__ == "__main__":
    main()
