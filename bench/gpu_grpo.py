"""GPU check of GRPO under the executor: every role colocated on one GPU, measured vs predicted.

``RAY_AUTH_MODE=disabled python bench/gpu_grpo.py [--model 8x1024|tiny] [--steps 30]``
on a CUDA machine:

1. measures this GPU's pinned host copy and on-device copy speeds (the
   cluster's ``host_gb_per_s`` and ``device_copy_gb_per_s``);
2. measures each stage's seconds with two in-process steps on the GPU
   (:func:`rlplex.pipelines.demo.calibrated_pipeline`);
3. places every GPU role on GPU 0 with less memory than all their states
   need (states and each stage's transient memory sized from the model and
   the batch, :func:`toy_memory`), asks the planner for the offload/reload
   plan and its period, with the executor's per-op cost on this machine
   measured by a rehearsal of that plan (:func:`rehearsed_dispatch`: no model,
   every op sleeps its planned seconds);
4. runs ``--steps`` GRPO steps under Ray following it (torch backend, real
   offloads, weight sync by CUDA IPC buckets) and compares the measured period
   (median step of the second half) with the prediction, before and after
   ``rlplex calibrate`` fits the first half of the record (its defaults: one
   warm-up step, then half of the rest; stage seconds and ``cluster.dispatch_s``)
   to ``config.yaml``, the planned config written beside the record.

``--out`` keeps ``plan.json``, ``config.yaml`` and ``record.jsonl``, so that
``rlplex calibrate OUT/record.jsonl --config OUT/config.yaml`` repeats step 4's
fit anywhere (no GPU needed).

Targets (issue 11), ``--model 8x1024`` (8 layers, hidden 1024, 0.41 GB of
fp32 weights): measured within 25 % of the prediction before the fit, 10 %
after. ``--model tiny --steps 60`` is the learning check (reward of the last
5 steps >= 0.8, first 5 <= 0.3). Prints JSON; without CUDA prints ``no CUDA:
not measured`` and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import yaml

NOT_MEASURED = "no CUDA: not measured"

MODELS = {
    "tiny": {},
    "8x1024": {
        "num_layers": 8,
        "hidden_size": 1024,
        "intermediate_size": 2816,
        "num_heads": 16,
        "num_kv_heads": 16,
    },
}


def copy_speeds(nbytes: int = 2**30) -> dict[str, float]:
    """GB/s (10^9 bytes, the config's unit) of a pinned host->device copy and of a
    device->device copy on this GPU."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    out = {}
    for name, (a, b) in {"host": (src, host), "device": (dst, src)}.items():
        times = []
        for _ in range(4):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a.copy_(b, non_blocking=True)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        out[name] = nbytes / 1e9 / statistics.median(times[1:])
    del src, dst, host
    torch.cuda.empty_cache()
    return out


def toy_memory(cfg: Any) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """GB per device of the toy's states and of each stage's transient memory, from the model
    and the batch with rlplex's formulas (``rlplex estimate``'s), not from ratios.

    - weights: the parameters' bytes (fp32); AdamW's moments twice that;
    - the rollout's KV cache: what transformers' ``generate`` holds at the end of the
      batch, every sequence at prompt + answer tokens (fp32 K and V of every layer);
    - log-prob passes: a forward of one micro-batch (one layer's activations and the
      logits); the train step: its gradients (the weights' bytes: the toy's trainer makes
      them in the backward and drops them after its optimizer step, ``zero_grad(
      set_to_none=True)``, so they are the stage's memory, not a state other stages hold;
      the first H200 record planned them as a state and over-predicted ``old_logprob`` by
      20 %) and the larger of a micro-batch's activations kept for the backward and
      AdamW's step, whose multi-tensor path makes one moment-sized temporary
      (``torch._foreach_sqrt`` of the second moments; ``bench/toy_train_tensors.py``
      counts exactly these two at the stage's peak).
    Not counted (the per-op check shows them): each process's cuBLAS workspace (32 MiB
    on Hopper) and the weight sync's bucket on the source.
    """
    from rlplex.estimate import formulas as f
    from rlplex.estimate.specs import spec_from_hf_config
    from rlplex.stages.models import hf_config

    spec = spec_from_hf_config(hf_config(cfg.model).to_dict(), "toy model")
    weights = f.total_params(spec, "lm") * 4 / f.GB
    sequences = cfg.task.prompts_per_step * cfg.sampling.n
    length = cfg.task.prompt_digits + 1 + cfg.sampling.max_new_tokens  # bos + digits + answer
    kv = sequences * length * f.kv_bytes_per_token(spec, "fp32") / f.GB
    micro_tokens = cfg.optim.micro_batch_size * length
    forward = f.activation_bytes(spec, micro_tokens, precision="fp32", backward=False, eager=True)
    forward /= f.GB
    backward = f.activation_bytes(spec, micro_tokens, precision="fp32", backward=True, eager=True)
    backward /= f.GB
    states = {
        "actor_train": {"weights": weights, "optimizer": 2 * weights},
        "actor_infer": {"weights": weights, "kv_cache": kv},
        "reference": {"weights": weights},
    }
    stages = {
        "ref_logprob": forward,
        "old_logprob": forward,
        "train": weights + max(backward, weights),
    }
    return states, stages


def shared_gpu_gb(states: dict[str, dict[str, float]], stage_gb: dict[str, float]) -> float:
    """A GPU too small for every state at once, so that the planner must time-share it:
    three quarters of all states plus the largest transient, but never less than the
    largest role's states plus its transient (and 5 % to spare)."""
    roles = {"actor_train": ("old_logprob", "train"), "reference": ("ref_logprob",)}
    need = max(
        sum(held.values()) + max((stage_gb.get(s, 0.0) for s in roles.get(role, ())), default=0)
        for role, held in states.items()
    )
    everything = sum(sum(held.values()) for held in states.values()) + max(stage_gb.values())
    return max(1.05 * need, 0.75 * everything)


def sized_pipeline(pipeline: Any, stage_gb: dict[str, float]) -> Any:
    """``pipeline`` with each named stage's ``memory_gb``."""
    return pipeline.model_copy(
        update={
            "stages": tuple(
                s.model_copy(update={"memory_gb": round(stage_gb[s.name], 6)})
                if s.name in stage_gb
                else s
                for s in pipeline.stages
            )
        }
    )


def rehearsed_dispatch(config: Any, out: Path, steps: int = 8) -> float:
    """Seconds the executor adds to each op on this machine, from a rehearsal of the plan.

    Every stage callable is removed, so each op sleeps its planned seconds and each
    transfer is book-kept: what the period gains over the plan is Ray's dispatch and
    the executor's own work, measured before any GRPO step runs under the executor
    (``rlplex calibrate``'s ``dispatch_s`` fit of the rehearsal's record, whose stage
    seconds are the plan's by construction).
    """
    import yaml

    from rlplex.pipelines.roles import native_config
    from rlplex.plan import make_plan
    from rlplex.reports.calibrate import calibrate
    from rlplex.runtime import execute

    bare = config.pipeline.model_copy(
        update={"stages": tuple(s.model_copy(update={"fn": None}) for s in config.pipeline.stages)}
    )
    rehearsal = config.model_copy(update={"pipeline": bare})
    record, written = out / "rehearsal.jsonl", out / "rehearsal.yaml"
    written.write_text(yaml.safe_dump(native_config(rehearsal), sort_keys=False), encoding="utf-8")
    execute(make_plan(rehearsal), rehearsal, steps=steps, record=record)
    fit, _ = calibrate(record, written)
    return fit.dispatch_s


def calibrated_period(record: Path, config: Path) -> dict[str, Any]:
    """``rlplex calibrate`` of ``record`` on ``config`` with its defaults, and the fit's plan."""
    from rlplex.reports.calibrate import calibrate

    fit, _ = calibrate(record, config)
    return {
        "calibrated_on_steps": [fit.fit_steps[0], fit.fit_steps[-1]],
        "fitted_dispatch_s": fit.dispatch_s,
        "fitted_stage_s": fit.stage_seconds,
        "predicted_after_fit_s": fit.period_after_s,
        "held_out_period_s": fit.measured_period_s,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="8x1024", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", default=None, help="folder for record.jsonl and plan.json")
    parser.add_argument(
        "--smoke-cpu", action="store_true", help="tiny model, 6 steps on CPU: check the script"
    )
    args = parser.parse_args(argv)
    if args.smoke_cpu:
        args.model, args.steps = "tiny", 6
    elif not torch.cuda.is_available():
        print(NOT_MEASURED)
        return 0
    device = "cpu" if args.smoke_cpu else "cuda"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from rlplex.pipelines import grpo
    from rlplex.pipelines.config import RLConfig
    from rlplex.pipelines.demo import calibrated_pipeline, weights_gb
    from rlplex.pipelines.roles import cluster_config, native_config
    from rlplex.plan import make_plan
    from rlplex.reports.memory import memory_check
    from rlplex.runtime import execute

    out = Path(args.out or tempfile.mkdtemp(prefix="rlplex-gpu-grpo-"))
    out.mkdir(parents=True, exist_ok=True)
    # On a CPU the copy speeds are the cluster's defaults (nothing to measure them on).
    speeds = copy_speeds() if device == "cuda" else {"host": 25.0, "device": 200.0}
    cfg = RLConfig(device=device, model=MODELS[args.model])
    states, stage_gb = toy_memory(cfg)
    pipeline = sized_pipeline(calibrated_pipeline(cfg), stage_gb)
    scale = weights_gb(cfg)
    config = cluster_config(
        pipeline,
        "colocated",
        gpu_memory_gb=shared_gpu_gb(states, stage_gb) / scale,
        scale_gb=scale,
        host_gb_per_s=speeds["host"],
        states=states,
    )
    config = config.model_copy(
        update={
            "cluster": config.cluster.model_copy(update={"device_copy_gb_per_s": speeds["device"]})
        }
    )
    # Planned before anything runs under the executor: the in-process stage seconds, the
    # measured copy speeds, and the executor's per-op cost measured by a rehearsal.
    undispatched_period = make_plan(config).period_s
    dispatch_s = rehearsed_dispatch(config, out)
    config = config.model_copy(
        update={"cluster": config.cluster.model_copy(update={"dispatch_s": dispatch_s})}
    )
    plan = make_plan(config)
    (out / "plan.json").write_text(plan.to_json(), encoding="utf-8")
    (out / "config.yaml").write_text(
        yaml.safe_dump(native_config(config), sort_keys=False), encoding="utf-8"
    )
    timeline = execute(
        plan,
        config,
        steps=args.steps,
        setups=grpo.setups(cfg),
        record=out / "record.jsonl",
        meta={"bench": "gpu_grpo", "model": args.model},
    )
    half = args.steps // 2
    measured = statistics.median(timeline.metrics[s]["step_s"] for s in range(half, args.steps))
    calibrated = calibrated_period(out / "record.jsonl", out / "config.yaml")
    memory = memory_check(plan, timeline)
    rewards = [timeline.metrics[s].get("reward/mean", 0.0) for s in range(args.steps)]
    syncs = [e for e in timeline.events if e.kind == "weight_sync" and e.step >= half]
    result = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (smoke)",
        "model": args.model,
        "weights_gb": weights_gb(cfg),
        "host_gb_per_s": speeds["host"],
        "device_copy_gb_per_s": speeds["device"],
        "weight_sync_method": timeline.meta.get("weight_sync"),
        "weight_sync_s_median": statistics.median(e.end_s - e.start_s for e in syncs)
        if syncs
        else None,
        "predicted_period_without_dispatch_s": undispatched_period,
        "rehearsed_dispatch_s": dispatch_s,
        "predicted_period_s": plan.period_s,
        "measured_period_s": measured,
        "ratio_before_fit": measured / plan.period_s,
        **calibrated,
        "ratio_after_fit": measured / calibrated["predicted_after_fit_s"],
        # Planned GB per op against each op's measured peak (rlplex replay prints the same).
        "memory": memory.to_dict() if memory is not None else None,
        "reward_first5": sum(rewards[:5]) / 5,
        "reward_last5": sum(rewards[-5:]) / 5,
        "record": str(out / "record.jsonl"),
    }
    if args.smoke_cpu:
        result["ok"] = result["predicted_after_fit_s"] > 0
    elif args.model == "tiny":
        result["ok"] = result["reward_first5"] <= 0.3 and result["reward_last5"] >= 0.8
    else:
        result["ok"] = (
            abs(result["ratio_before_fit"] - 1) <= 0.25
            and abs(result["ratio_after_fit"] - 1) <= 0.10
        )
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 2


if __name__ == "__main__":
    sys.exit(main())
