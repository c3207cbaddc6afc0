"""Train and log-prob passes of real-sized models on one GPU, measured vs rlplex's estimate.

rlplex prices a train or log-prob pass (issue 18) as FLOPs at an efficiency that
falls for narrow models and small micro-batches (``efficiency.yaml``: the
``train`` and ``forward`` ceilings, ``width_half``, ``tokens_half``), plus the
traffic of Hugging Face's unfused operators, the logits, and the host's launches;
and its activation memory with ``formulas.activation_bytes``. Those shapes were
taken from GEMM guides and checked only through whole published steps. This
bench measures them on the models verl's FSDP workers run:

``python bench/gpu_pass_speed.py --out FILE`` (CUDA) builds Hugging Face Qwen2
models with the layer numbers of rlplex's presets (``qwen2.5-0.5b`` to
``qwen2.5-7b``; random bf16 weights, SDPA attention) and, for each micro-batch of
ROWS x LENGTH tokens with no padding, times

- a log-prob pass: forward with no grad, then the fp32 log-softmax of the logits
  gathered at the next tokens (NeMo RL's path without tensor parallelism; rlplex's
  ``parallel.logits: fp32_log_softmax``);
- a train pass: the same with grad and a policy-gradient-shaped loss (log-probs
  times a random advantage), backward into bf16 gradients kept allocated (no
  optimizer step; ``recompute`` cases with Hugging Face's gradient checkpointing);

the median of ``--repeats`` after two warm-ups, each between device
synchronisations, and each pass's peak memory allocated above the weights and
gradients. It writes the measurements as JSON to FILE as each case ends, then
compares them.

``python bench/gpu_pass_speed.py --compare FILE`` (no GPU needed) estimates each
case as a one-GPU rlplex config (the preset; ROWS sequences of LENGTH tokens, one
micro-batch; packing on, since no row is padded; layers eager, as Hugging Face
runs them) and prints, per case, measured vs estimated seconds of each pass
(the train stage less its optimizer step and per-step overhead, which the
measurement leaves out) and activation GB, the efficiency the measurement implies
(the estimate's FLOPs over seconds times the GPU's peak), and the median
|error| of each. ``--json`` prints the comparison as JSON.

Without CUDA, ``--out`` prints ``no CUDA: not measured`` and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NOT_MEASURED = "no CUDA: not measured"

CASES: tuple[tuple[str, int, int, bool], ...] = (
    # (preset, rows, length, recompute)
    ("qwen2.5-0.5b", 1, 1024, False),
    ("qwen2.5-0.5b", 4, 1024, False),
    ("qwen2.5-0.5b", 8, 2048, False),
    ("qwen2.5-1.5b", 1, 1024, False),
    ("qwen2.5-1.5b", 4, 1024, False),
    ("qwen2.5-1.5b", 8, 2048, False),
    ("qwen2.5-3b", 1, 1024, False),
    ("qwen2.5-3b", 4, 1024, False),
    ("qwen2.5-3b", 8, 2048, False),
    ("qwen2.5-7b", 1, 256, False),
    ("qwen2.5-7b", 1, 512, False),
    ("qwen2.5-7b", 1, 1024, False),
    ("qwen2.5-7b", 4, 1024, False),
    ("qwen2.5-7b", 4, 2048, False),
    ("qwen2.5-7b", 8, 2048, True),
)
"""Each case: a model preset and a micro-batch of rows x length tokens. The 7B's
16K-token micro-batch without recomputation would not fit beside its gradients."""

GPU_KEY = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100"}
"""GPU preset of a device name (``torch.cuda.get_device_name``)."""


def hf_qwen2_config(preset: str) -> Any:
    """A Hugging Face Qwen2 config with the numbers of rlplex's preset ``preset``."""
    from transformers import Qwen2Config

    from rlplex.estimate.specs import model_presets

    spec = model_presets()[preset]
    return Qwen2Config(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        tie_word_embeddings=spec.tied_embeddings,
        max_position_embeddings=32768,
        use_cache=False,
        attn_implementation="sdpa",
    )


def measure_case(model: Any, rows: int, length: int, vocab: int, repeats: int) -> dict[str, Any]:
    """Seconds and peak activation GB of one log-prob pass and one train pass."""
    import torch

    ids = torch.randint(0, vocab, (rows, length + 1), device="cuda")
    inputs, targets = ids[:, :-1], ids[:, 1:]
    advantage = torch.randn(rows, length, device="cuda")

    def logprobs(grad: bool) -> Any:
        with torch.set_grad_enabled(grad):
            logits = model(input_ids=inputs).logits
            return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets[..., None])[..., 0]

    def forward() -> None:
        logprobs(False)

    def train() -> None:
        loss = -(logprobs(True) * advantage).mean()
        loss.backward()

    out: dict[str, Any] = {}
    for name, fn in (("forward", forward), ("train", train)):
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        out[f"{name}_s"] = statistics.median(times)
        out[f"{name}_all_s"] = [round(t, 5) for t in times]
        out[f"{name}_activation_gb"] = (torch.cuda.max_memory_allocated() - base) / 1e9
    return out


def measure(out_file: Path, repeats: int, only: str | None) -> dict[str, Any]:
    """Every case of :data:`CASES` (or of preset ``only``), written to ``out_file`` as it ends."""
    import torch
    from transformers import AutoModelForCausalLM

    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "repeats": repeats,
        "cases": [],
    }
    # Each preset once, in the order of its first case: one model built per preset.
    presets = list(dict.fromkeys(c[0] for c in CASES if only in (None, c[0])))
    for preset in presets:
        config = hf_qwen2_config(preset)
        t0 = time.perf_counter()
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model.train()
        # Gradients allocated once and kept, as a trainer accumulating micro-batches has them.
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        torch.cuda.synchronize()
        weights_and_grads = torch.cuda.memory_allocated() / 1e9
        built_s = time.perf_counter() - t0
        for name, rows, length, recompute in CASES:
            if name != preset:
                continue
            if recompute:
                model.gradient_checkpointing_enable(
                    gradient_checkpointing_kwargs={"use_reentrant": False}
                )
            else:
                model.gradient_checkpointing_disable()
            case = {"model": preset, "rows": rows, "length": length, "recompute": recompute,
                    "weights_and_grads_gb": weights_and_grads, "built_s": built_s}  # fmt: skip
            try:
                case.update(measure_case(model, rows, length, config.vocab_size, repeats))
            except torch.OutOfMemoryError as exc:
                case["error"] = f"out of memory: {str(exc).splitlines()[0]}"
            torch.cuda.empty_cache()
            result["cases"].append(case)
            out_file.write_text(json.dumps(result, indent=1))
            print(json.dumps(case), flush=True)
        del model
        torch.cuda.empty_cache()
    for preset in OPTIMIZER_PRESETS:
        if only in (None, preset):
            result.setdefault("optimizer", []).append(measure_optimizer(preset, repeats))
            out_file.write_text(json.dumps(result, indent=1))
            print(json.dumps(result["optimizer"][-1]), flush=True)
    return result


OPTIMIZER_PRESETS = ("qwen2.5-1.5b", "qwen2.5-3b")
"""Models whose AdamW step is timed (fp32 weights, gradients and moments: 16 bytes a parameter)."""


def measure_optimizer(preset: str, repeats: int) -> dict[str, Any]:
    """Seconds of one AdamW step over fp32 tensors of a preset's parameter shapes, PyTorch's
    multi-tensor (``foreach``, its default on CUDA) and fused implementations."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        shapes = [p.shape for p in AutoModelForCausalLM.from_config(
            hf_qwen2_config(preset)).parameters()]  # fmt: skip
    params = [torch.zeros(shape, device="cuda", requires_grad=True) for shape in shapes]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    out: dict[str, Any] = {"model": preset, "params": sum(p.numel() for p in params)}
    for name, kwargs in (("foreach", {"foreach": True}), ("fused", {"fused": True})):
        opt = torch.optim.AdamW(params, lr=1e-6, **kwargs)
        for _ in range(2):
            opt.step()
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            opt.step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        out[f"{name}_s"] = statistics.median(times)
        del opt
        torch.cuda.empty_cache()
    del params
    torch.cuda.empty_cache()
    return out


def case_config(case: dict[str, Any], gpu: str) -> dict[str, Any]:
    """The one-GPU rlplex config of a measured case."""
    half = case["length"] // 2
    return {
        "model": case["model"],
        "workload": {
            "prompts_per_step": case["rows"],
            "samples_per_prompt": 1,
            "prompt_tokens": {"mean": half, "max": half},
            "response_tokens": {"mean": case["length"] - half, "max": case["length"] - half},
            "micro_batch_size": case["rows"],
            "mini_batches": 1,
            "packing": True,
        },
        "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": gpu},
        "roles": {
            "actor": {
                "devices": "0",
                # The optimizer's states on the host: the measurement has none on the GPU,
                # and a 7B's fp32 AdamW states beside its activations would not fit one.
                "parallel": {
                    "kernels": "eager",
                    "recompute": case["recompute"],
                    "cpu_optimizer": True,
                    # The log-probs as this bench computes them: the plain fp32 log-softmax.
                    "logits": "fp32_log_softmax",
                },
            }
        },
        "pipeline": {
            "mode": "sync",
            "stages": {
                "old_logprob": {"role": "actor"},
                "train": {"role": "actor", "after": ["old_logprob"]},
            },
        },
    }


def predict(case: dict[str, Any], gpu: str) -> dict[str, Any]:
    """rlplex's estimate of a case's two passes (train: less its optimizer and step overhead)."""
    from rlplex.config.build import config_from_dict
    from rlplex.estimate.estimator import estimate_config
    from rlplex.estimate.specs import gpu_spec

    est = estimate_config(config_from_dict(case_config(case, gpu)))
    fwd, train = est.stages["old_logprob"], est.stages["train"]
    left_out = sum(train.detail.get(k, 0.0) for k in
                   ("optimizer_s", "cpu_optimizer_s", "step_overhead_s"))  # fmt: skip
    peak = gpu_spec(gpu).peak_tflops * 1e12
    out: dict[str, Any] = {}
    for name, stage, seconds in (
        ("forward", fwd, fwd.seconds or 0.0),
        ("train", train, (train.seconds or 0.0) - left_out),
    ):
        measured = case[f"{name}_s"]
        out[name] = {
            "measured_s": measured,
            "estimated_s": seconds,
            "error": seconds / measured - 1.0,
            "terms": {k: v for k, v in stage.terms.items() if v},
            "efficiency_estimated": stage.detail["efficiency"],
            "efficiency_measured": stage.flops / (measured * peak),
            "activation_measured_gb": case[f"{name}_activation_gb"],
            "activation_estimated_gb": stage.memory_gb,
            "activation_error": stage.memory_gb / case[f"{name}_activation_gb"] - 1.0,
        }
    return out


def compare(measured: dict[str, Any]) -> dict[str, Any]:
    """Every measured case against its estimate, and the median |error| of each figure."""
    gpu = GPU_KEY.get(measured["device"])
    if gpu is None:
        raise SystemExit(f"no GPU preset for {measured['device']!r}: add it to GPU_KEY")
    rows = []
    for case in measured["cases"]:
        if "error" in case:
            rows.append(
                {**{k: case[k] for k in ("model", "rows", "length")}, "error": case["error"]}
            )
            continue
        rows.append({k: case[k] for k in ("model", "rows", "length", "recompute")}
                    | predict(case, gpu))  # fmt: skip
    summary = {}
    for name in ("forward", "train"):
        done = [r[name] for r in rows if name in r]
        if done:
            summary[name] = {
                "median_abs_error": statistics.median(abs(r["error"]) for r in done),
                "worst_error": max((r["error"] for r in done), key=abs),
                "median_abs_activation_error": statistics.median(
                    abs(r["activation_error"]) for r in done
                ),
            }
    optimizer = [optimizer_row(o, gpu) for o in measured.get("optimizer", [])]
    return {"device": measured["device"], "gpu": gpu, "cases": rows, "summary": summary,
            "optimizer": optimizer}  # fmt: skip


ADAMW_BYTES_PER_PARAM = 32
"""What the estimator counts an AdamW step to move per parameter: weights, gradients and
optimizer state (16 bytes here, all fp32) each read and written once. The step really reads
16 and writes 12; the shares are stated in the estimator's count so that they are the
``optimizer_*`` efficiencies."""


def optimizer_row(measured: dict[str, Any], gpu: str) -> dict[str, Any]:
    """Timed AdamW steps against the estimate's optimizer term for the same model on one GPU:
    ``foreach`` as an FSDP role's (PyTorch's AdamW), ``fused`` as a Megatron role's."""
    from rlplex.config.build import config_from_dict
    from rlplex.estimate.estimator import estimate_config
    from rlplex.estimate.specs import gpu_spec

    case = {"model": measured["model"], "rows": 1, "length": 1024, "recompute": False}
    bandwidth = gpu_spec(gpu).memory_gb_per_s
    moved_gb = measured["params"] * ADAMW_BYTES_PER_PARAM / 1e9
    out: dict[str, Any] = {"model": measured["model"]}
    for kind, fsdp in (("foreach", True), ("fused", False)):
        config = case_config(case, gpu)
        config["roles"]["actor"]["parallel"].update(cpu_optimizer=False, fsdp=fsdp)
        est = estimate_config(config_from_dict(config)).stages["train"]
        out[f"{kind}_s"] = measured[f"{kind}_s"]
        out[f"{kind}_estimated_s"] = est.detail["optimizer_s"]
        out[f"{kind}_bandwidth_share"] = moved_gb / measured[f"{kind}_s"] / bandwidth
    return out


def print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"passes on one {result['device']}: measured vs estimated")
    for col in ("model", "tokens", "pass", "measured s", "estimated s", "error",
                "eff. measured", "eff. estimated", "act. GB meas.", "act. GB est."):  # fmt: skip
        table.add_column(col, justify="right" if col not in ("model", "pass") else "left")
    for row in result["cases"]:
        tokens = f"{row['rows']}x{row['length']}" + (" rc" if row.get("recompute") else "")
        if "forward" not in row:
            table.add_row(row["model"], tokens, "-", row["error"])
            continue
        for name in ("forward", "train"):
            r = row[name]
            table.add_row(
                row["model"], tokens, name, f"{r['measured_s']:.4f}", f"{r['estimated_s']:.4f}",
                f"{r['error']:+.1%}", f"{r['efficiency_measured']:.3f}",
                f"{r['efficiency_estimated']:.3f}", f"{r['activation_measured_gb']:.2f}",
                f"{r['activation_estimated_gb']:.2f}",
            )  # fmt: skip
    Console().print(table)
    for o in result["optimizer"]:
        print(
            f"AdamW step, {o['model']}: foreach {o['foreach_s'] * 1e3:.1f} ms"
            f" ({o['foreach_bandwidth_share']:.2f} of the memory bandwidth; estimated"
            f" {o['foreach_estimated_s'] * 1e3:.1f} ms), fused {o['fused_s'] * 1e3:.1f} ms"
            f" ({o['fused_bandwidth_share']:.2f}; estimated {o['fused_estimated_s'] * 1e3:.1f} ms)"
        )
    for name, s in result["summary"].items():
        print(
            f"{name}: median |error| {s['median_abs_error']:.1%}, worst {s['worst_error']:+.1%};"
            f" activations median |error| {s['median_abs_activation_error']:.1%}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="measure on this machine's GPU into FILE")
    parser.add_argument("--compare", type=Path, help="compare a measured FILE with estimates")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", help="measure only this preset's cases")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    args = parser.parse_args(argv)
    if (args.out is None) == (args.compare is None):
        parser.error("give one of --out FILE (measure) or --compare FILE")
    if args.out is not None:
        import torch

        if not torch.cuda.is_available():
            print(NOT_MEASURED)
            return 0
        measured = measure(args.out, args.repeats, args.only)
    else:
        measured = json.loads(args.compare.read_text())
    result = compare(measured)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
