"""The host work of vLLM's V0 engine per decode step and running sequence: the source of
``decode_sequence_v0_s``.

Run: ``.venv/bin/python bench/vllm_v0_host.py [--running 64,128,256] [--repeats 3] [--json]``.

vLLM's V0 engine (every release before 0.8, and later ones with ``VLLM_USE_V1=0``; verl's
hybrid-engine fork of vLLM 0.6.3 is one) runs its decode loop in one Python process: for every
step it schedules the running sequences, builds the model's inputs (tokens, positions, KV-cache
slots, attention and sampling metadata), samples and turns the sampled tokens (and, with
``logprobs``, their log-probabilities) into Python objects, then appends them to each sequence
and checks its stop conditions. All of it is per-sequence Python, and the GPU waits for it:
the step is synchronous, and with ``enforce_eager`` (verl's default then) vLLM also turns off
the async output processor that would overlap the last part with the next forward pass.

This script measures that work with vLLM's own code on this machine's CPU. It installs vLLM
0.6.3 (the version of verl's fork; ``pip install --no-deps`` of the wheel into ``--target``,
once) and runs the real ``LLMEngine.step()`` of a Qwen2.5-0.5B config: the real scheduler and
output processor, the real GPU model runner's ``prepare_model_input`` (with its tensors on the
CPU) and the real ``Sampler`` (random sampling, ``logprobs=1``, as verl's rollout asked); only
the model's forward pass is left out, its logits drawn at random over a 32-token vocabulary so
that the sampler's arithmetic is negligible and what is timed is the host's work. vLLM's CUDA
extensions cannot load here: the script removes the one whose failure breaks the import (its
scalar types then come from vLLM's Python fallback) and stands in for the flash-attention
kernels it never calls.

It prints, per number of running sequences, the median step and its parts in microseconds per
sequence (the scheduler's pass, input preparation, sampler, output processing, and the engine's
other work), and the per-sequence cost the estimator's ``decode_sequence_v0_s`` is held
against. Under CUDA graphs V0's async output processor overlaps the output processing with the
next forward pass; with ``enforce_eager`` every part adds to the step. A GPU server's
host CPU may be faster or slower than this one; the figure is this CPU's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

VLLM_VERSION = "0.6.3"
VOCAB = 32
"""Vocabulary of the stand-in logits: small, so that the sampler's tensor arithmetic on the CPU
(which a GPU does in microseconds) does not count as host work."""
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "hidden_act": "silu",
}
"""Qwen2.5-0.5B's config.json (the verl quickstart's model); no weights are needed."""


V0_EXTRAS = ("msgspec", "gguf", "cloudpickle", "mistral_common", "pydantic_extra_types",
             "pycountry", "tiktoken", "openai", "sniffio", "triton==3.1.0")  # fmt: skip
"""What vLLM 0.6.3's engine and model files import besides torch (triton: its MoE kernels'
module, never run here)."""


def default_target(version: str = VLLM_VERSION) -> Path:
    """Where the benchmarks install a vLLM unless told: the user's cache."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / f"rlplex-vllm-{version}"


def install(target: Path, version: str = VLLM_VERSION, extras: tuple[str, ...] = V0_EXTRAS) -> None:
    """vLLM's wheel, without its dependencies (torch comes from the project's environment), and
    the pure-Python packages its engine imports; the CUDA extension whose failure to load
    breaks the import removed (the others fail with a warning, which vLLM tolerates, and vLLM
    falls back to Python for what these benchmarks run)."""
    marker = target / f".vllm-{version}-{len(extras)}"
    if marker.exists():
        return
    target.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    print(f"installing vllm=={version} (no dependencies) into {target} ...", flush=True)
    subprocess.run([*pip, f"vllm=={version}", *extras], check=True)
    for so in (target / "vllm").glob("_core_C*.so"):
        so.unlink()
    marker.write_text("ok\n")


def use(target: Path) -> None:
    """Import vLLM from ``target`` here and in the child Pythons vLLM starts (it inspects model
    classes in one); quiet its logs and the newer torch's deprecation notices about it."""
    import logging
    import warnings

    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(target), os.environ.get("PYTHONPATH", "")) if p
    )
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")


def _stand_ins() -> None:
    """What a CPU-only process must put in place before vLLM's GPU model runner imports."""
    flash = types.ModuleType("vllm.vllm_flash_attn")
    flash.flash_attn_varlen_func = flash.flash_attn_with_kvcache = lambda *a, **k: None
    sys.modules["vllm.vllm_flash_attn"] = flash


def measure(running: list[int], repeats: int, response_tokens: int) -> list[dict[str, float]]:
    import torch

    _stand_ins()
    import vllm.config as vllm_config
    import vllm.model_executor.sampling_metadata as sampling_metadata
    import vllm.worker.model_runner as model_runner
    from vllm.attention.backends.flash_attn import FlashAttentionBackend
    from vllm.engine.arg_utils import EngineArgs
    from vllm.engine.llm_engine import LLMEngine
    from vllm.executor.executor_base import ExecutorBase
    from vllm.inputs import TokensPrompt
    from vllm.model_executor.layers.sampler import Sampler
    from vllm.sampling_params import SamplingParams

    model_runner.get_attn_backend = lambda *a, **k: FlashAttentionBackend
    model_runner.get_pp_group = lambda: types.SimpleNamespace(is_last_rank=True, is_first_rank=True)
    sampling_metadata.is_pin_memory_available = lambda: False
    verify_max_len = vllm_config._get_and_verify_max_len

    def _plain_rope(hf_config: Any, *args: Any, **kwargs: Any) -> int:
        # Newer transformers write rope_scaling {"rope_type": "default"} where 0.6.3 expects none.
        scaling = getattr(hf_config, "rope_scaling", None)
        if isinstance(scaling, dict) and scaling.get("rope_type", "default") == "default":
            hf_config.rope_scaling = None
        return verify_max_len(hf_config, *args, **kwargs)

    vllm_config._get_and_verify_max_len = _plain_rope
    parts: dict[str, list[float]] = {"prepare": [], "sampler": [], "schedule": [], "outputs": []}

    def timed(part: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                parts[part].append(time.perf_counter() - start)

        return wrapper

    class HostOnlyExecutor(ExecutorBase):
        """vLLM's GPU model runner and sampler on the CPU, with no model forward."""

        uses_ray = False

        def _init_executor(self) -> None:
            self.runner = model_runner.ModelRunner(
                self.model_config, self.parallel_config, self.scheduler_config,
                self.device_config, self.cache_config, self.load_config, None,
                is_driver_worker=True,
            )  # fmt: skip
            self.runner.device = torch.device("cpu")
            self.runner.pin_memory = False
            self.sampler = Sampler()
            self.generator = torch.Generator().manual_seed(0)

        def determine_num_available_blocks(self) -> tuple[int, int]:
            return (200_000, 0)

        def initialize_cache(self, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
            pass

        def execute_model(self, execute_model_req: Any) -> list[Any]:
            req = execute_model_req
            start = time.perf_counter()
            model_input = self.runner.prepare_model_input(
                req.seq_group_metadata_list, req.virtual_engine, req.finished_requests_ids
            )
            prepared = time.perf_counter()
            rows = len(model_input.sampling_metadata.selected_token_indices)
            logits = torch.randn(rows, VOCAB, generator=self.generator)
            out = self.sampler(logits, model_input.sampling_metadata)
            parts["prepare"].append(prepared - start)
            parts["sampler"].append(time.perf_counter() - prepared)
            return [out]

        def check_health(self) -> None:
            pass

        def stop_remote_worker_execution_loop(self) -> None:
            pass

        def add_lora(self, lora_request: Any) -> bool:
            return False

        def remove_lora(self, lora_id: int) -> bool:
            return False

        def pin_lora(self, lora_id: int) -> bool:
            return False

        def list_loras(self) -> set[int]:
            return set()

        def add_prompt_adapter(self, request: Any) -> bool:
            return False

        def remove_prompt_adapter(self, adapter_id: int) -> bool:
            return False

        def pin_prompt_adapter(self, adapter_id: int) -> bool:
            return False

        def list_prompt_adapters(self) -> set[int]:
            return set()

    model_dir = Path(os.environ.get("TMPDIR", "/tmp")) / "rlplex-vllm-v0-qwen2.5-0.5b"
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(QWEN25_05B))
    rows = []
    for n in running:
        samples: dict[str, list[float]] = {
            "step": [], "prepare": [], "sampler": [], "schedule": [], "outputs": []
        }  # fmt: skip
        for _ in range(repeats):
            args = EngineArgs(
                model=str(model_dir), skip_tokenizer_init=True, max_model_len=768,
                enforce_eager=True, max_num_seqs=max(running), device="cuda",
                disable_log_stats=True,
            )  # fmt: skip
            engine = LLMEngine(
                **args.create_engine_config().to_dict(),
                executor_class=HostOnlyExecutor,
                log_stats=False,
            )
            params = SamplingParams(
                n=1, logprobs=1, max_tokens=response_tokens, ignore_eos=True, detokenize=False
            )
            # The scheduler's pass and the output processing (which V0's async output
            # processor would overlap with the next forward under CUDA graphs), timed apart.
            scheduler = engine.scheduler[0]
            scheduler.schedule = timed("schedule", scheduler.schedule)
            engine._process_model_outputs = timed("outputs", engine._process_model_outputs)
            prompt = TokensPrompt(prompt_token_ids=list(range(100, 205)))
            for i in range(n):
                engine.add_request(str(i), prompt, params)
            for part in parts.values():
                part.clear()
            steps = []
            while engine.has_unfinished_requests():
                start = time.perf_counter()
                engine.step()
                steps.append(time.perf_counter() - start)
            # The first step prefills and the last ones free finished sequences: decode steps only.
            decode = slice(3, -3)
            samples["step"].append(statistics.median(steps[decode]))
            for part, times in parts.items():
                samples[part].append(statistics.median(times[decode]))
        per_seq = {k: statistics.median(v) / n * 1e6 for k, v in samples.items()}
        rows.append({
            "running": n, "step_ms": statistics.median(samples["step"]) * 1e3,
            "per_sequence_us": per_seq["step"],
            **{f"{part}_us": per_seq[part] for part in parts},
            "other_us": per_seq["step"] - sum(per_seq[part] for part in parts),
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--running", default="64,128,256", help="running sequences, e.g. 64,256")
    parser.add_argument("--repeats", type=int, default=3, help="engine runs per row (median)")
    parser.add_argument("--response-tokens", type=int, default=64, help="decode steps per run")
    parser.add_argument(
        "--target", type=Path, default=default_target(), help="where vLLM 0.6.3 is installed"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    install(args.target)
    use(args.target)
    running = [int(v) for v in args.running.split(",")]
    rows = measure(running, args.repeats, args.response_tokens)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"vLLM {VLLM_VERSION} V0 engine, host work per decode step"
        " (Qwen2.5-0.5B config, logprobs=1, eager):"
    )
    header = ("running", "step ms", "us/seq", "schedule", "prepare", "sampler", "outputs", "other")
    print(" ".join(f"{h:>8}" for h in header))
    for r in rows:
        cells = [r[k] for k in ("per_sequence_us", "schedule_us", "prepare_us", "sampler_us")]
        cells += [r["outputs_us"], r["other_us"]]
        print(f"{r['running']:>8} {r['step_ms']:>8.2f} " + " ".join(f"{c:>8.1f}" for c in cells))
    per_seq = statistics.median(r["per_sequence_us"] for r in rows)
    print(f"median over the rows: {per_seq:.1f} us per running sequence per decode step")


if __name__ == "__main__":
    main()
