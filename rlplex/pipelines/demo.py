"""The GRPO demo: a tiny model learns the toy task on a CPU, under Ray, time-sharing one GPU.

``python -m rlplex.pipelines.demo --out demo-out`` (what ``make demo`` runs):

1. calibrates the stage costs with four in-process steps (the median of the
   last three), so the plan's predicted times are this machine's;
2. places every GPU role on one *logical* GPU that cannot hold all their
   states at once and asks the planner for the offload/reload plan
   (``rlplex.plan.make_plan``);
3. runs ``--steps`` GRPO steps under the embedded local Ray following that
   plan (``rlplex.runtime.execute``), with the torch backend: real offloads
   and reloads of the policy's optimizer and grads, of the rollout engine's
   weights (dead between generation and weight sync) and its KV cache;
4. writes ``record.jsonl`` (ops and per-step metrics, ``reward/mean``
   included), ``plan.json``, ``gantt.html`` (the predicted step against a
   measured one) and ``reward.png`` (mean reward per step).

On a machine with CUDA, the same command runs the stages on the GPU
(``--device cuda``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rlplex.pipelines import grpo, local
from rlplex.pipelines.config import RLConfig
from rlplex.pipelines.roles import cluster_config
from rlplex.plan.ids import TRANSFER_KINDS
from rlplex.resources.cluster import BYTES_PER_GB


def calibrated_pipeline(cfg: RLConfig, steps: int = 4) -> Any:
    """The GRPO pipeline with each stage's ``seconds`` measured by a short in-process run.

    Each stage's seconds are its median over the steps after the first (the first
    pays for kernel selection, allocator growth and lazy initialisation).
    """
    if steps < 2:
        raise ValueError(f"steps={steps}: needs at least 2 (the first is a warm-up)")
    pipeline = grpo.build_pipeline(cfg)
    metrics = local.run_local(pipeline, grpo.setups(cfg), steps)
    stages = []
    for stage in pipeline.stages:
        seconds = [metrics[s].get(f"time/{stage.name}") for s in range(1, steps)]
        if None not in seconds and not stage.is_weight_sync:
            median = statistics.median(seconds)
            stage = stage.model_copy(update={"seconds": round(max(median, 1e-3), 4)})
        stages.append(stage)
    return pipeline.model_copy(update={"stages": tuple(stages)})


def weights_gb(cfg: RLConfig) -> float:
    """GB (10^9 bytes, the config's unit) of the policy's weights: the demo's state sizes."""
    from rlplex.stages.models import build_causal_lm

    model = build_causal_lm(cfg.model)
    return sum(p.numel() * p.element_size() for p in model.parameters()) / BYTES_PER_GB


def reward_curve(metrics: dict[int, dict[str, Any]], path: Path, title: str) -> None:
    """A PNG of mean reward per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = sorted(s for s in metrics if "reward/mean" in metrics[s])
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot(steps, [metrics[s]["reward/mean"] for s in steps], marker=".", lw=1.5)
    ax.set_xlabel("RL step")
    ax.set_ylabel("mean reward")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_gantt(plan: Any, measured: Any, step: int, path: Path) -> str:
    """Predicted (the plan) against measured (one step of the record), side by side."""
    from rlplex.timeline.record import Timeline, timeline_from_plan
    from rlplex.viz.compare import write_comparison
    from rlplex.viz.critical import period_of

    predicted = timeline_from_plan(plan)
    # One step alone has no steady state: give it the period measured over the whole run.
    one = Timeline(
        events=measured.step_events(step),
        metrics={step: measured.metrics.get(step, {})},
        meta={**measured.meta, "period_s": period_of(measured)},
    )
    result = write_comparison(
        predicted, one, names=("predicted", f"measured step {step}"), gantt=path
    )
    return result.text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlplex.pipelines.demo", description=__doc__)
    parser.add_argument("--out", default="demo-out", help="output folder")
    parser.add_argument("--steps", type=int, default=60, help="GRPO steps")
    parser.add_argument("--seed", type=int, default=0, help="seed of model and prompts")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument(
        "--layout",
        default="colocated",
        choices=["colocated", "split", "async"],
        help="where the roles live",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from rlplex.plan import make_plan
    from rlplex.runtime import execute

    async_ = args.layout == "async"
    cfg = RLConfig(
        seed=args.seed,
        model={"seed": args.seed},
        task={"seed": args.seed},
        device=args.device,
        mode="async" if async_ else "sync",
        max_staleness=1 if async_ else 0,
    )
    t0 = time.perf_counter()
    pipeline = calibrated_pipeline(cfg)
    config = cluster_config(pipeline, args.layout, scale_gb=weights_gb(cfg))
    plan = make_plan(config)
    (out / "plan.json").write_text(plan.to_json(), encoding="utf-8")
    transfers = sum(op.kind in TRANSFER_KINDS for op in plan.ops)
    print(
        f"plan: {args.layout}, {len(plan.ops)} ops ({transfers} offload/reload),"
        f" predicted {plan.period_s:.3f} s per step",
        flush=True,
    )

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        if step % 10 == 0 or step == args.steps - 1:
            print(
                f"step {step:3d}  reward {metrics.get('reward/mean', float('nan')):.3f}"
                f"  kl {metrics.get('kl', float('nan')):.3f}  step {metrics['step_s']:.3f} s",
                flush=True,
            )

    timeline = execute(
        plan,
        config,
        steps=args.steps,
        setups=grpo.setups(cfg),
        record=out / "record.jsonl",
        on_step=on_step,
        meta={"demo": "grpo toy task", "layout": args.layout},
    )
    rewards = [timeline.metrics[s]["reward/mean"] for s in range(args.steps)]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    reward_curve(
        timeline.metrics,
        out / "reward.png",
        f"GRPO on the toy task ({args.layout}): {first:.2f} -> {last:.2f}",
    )
    text = write_gantt(plan, timeline, args.steps - 1, out / "gantt.html")
    summary = {
        "steps": args.steps,
        "reward_first5": first,
        "reward_last5": last,
        "wall_s": time.perf_counter() - t0,
        "predicted_period_s": plan.period_s,
        "comparison": text,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    print(f"reward {first:.3f} (first 5 steps) -> {last:.3f} (last 5); {text}")
    print(f"wrote {out}/record.jsonl, gantt.html, reward.png, plan.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
