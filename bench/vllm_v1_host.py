"""The host work of vLLM's V1 engine core per decode step and running sequence: a check of
``decode_sequence_s``.

Run: ``.venv/bin/python bench/vllm_v1_host.py [--running 64,128,256] [--json]``.

``decode_sequence_s`` (5 us per running sequence and decode step) was assumed from vLLM's V1
blog. V1 (the default engine from vLLM 0.8) moved detokenization and output processing to a
separate process and vectorized the model runner's input preparation; what stays in the engine
core's loop, every step and per sequence, is the scheduler's pass and its bookkeeping of the
sampled tokens (``Scheduler.schedule`` and ``Scheduler.update_from_output``). This script
installs vLLM 0.8.5 (the version of verl's DeepSeek-V3 run; the wheel without its
dependencies, once, as ``bench/vllm_v0_host.py`` does for 0.6.3) and times those two calls of
vLLM's own V1 scheduler on this machine's CPU for a Qwen2.5-0.5B config, the model runner's
output made up (one sampled token per sequence, with or without one log-prob). The model
runner's input preparation (numpy over the whole batch) is not timed: the figure is a floor of
the engine core's host work per sequence.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# The shared installer sits beside this script (on the path when it runs; appended for tests,
# after every installed package).
sys.path.append(str(Path(__file__).resolve().parent))
from vllm_v0_host import QWEN25_05B, default_target, install, use

VERSION = "0.8.5"
EXTRAS = ("msgspec", "gguf", "cloudpickle", "mistral_common", "pydantic_extra_types",
          "pycountry", "tiktoken", "openai", "sniffio", "pyzmq", "blake3", "cachetools",
          "fastapi", "starlette", "llguidance", "triton==3.2.0")  # fmt: skip
"""What vLLM 0.8.5's config, scheduler and request modules import besides torch."""


def _config(model_dir: Path) -> Any:
    """A V1 engine config for the model on a CPU-only machine: vLLM's platform cannot be
    detected without CUDA, so the checks that ask it are answered as a CUDA platform would."""
    import vllm.platforms as platforms

    platform = type(platforms.current_platform)
    platform.is_async_output_supported = classmethod(lambda cls, enforce_eager: False)
    platform.check_and_update_config = classmethod(lambda cls, config: None)
    platform.device_type = "cuda"
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(
        model=str(model_dir), skip_tokenizer_init=True, max_model_len=768, max_num_seqs=256
    )
    config = args.create_engine_config()
    config.cache_config.num_gpu_blocks = 200_000
    return config


def measure(running: list[int], steps: int, target: Path) -> list[dict[str, Any]]:
    import torch
    from vllm.sampling_params import SamplingParams
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
        KVCacheTensor,
    )
    from vllm.v1.outputs import LogprobsLists, ModelRunnerOutput
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager

    model_dir = target / "qwen2.5-0.5b"
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.json").write_text(json.dumps(QWEN25_05B))
    config = _config(model_dir)
    spec = FullAttentionSpec(
        block_size=16, num_kv_heads=2, head_size=64, dtype=torch.bfloat16, use_mla=False
    )
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(24)]
    kv_cache = KVCacheConfig(
        num_blocks=200_000,
        tensors={name: KVCacheTensor(size=1) for name in layers},
        kv_cache_groups=[KVCacheGroupSpec(layers, spec)],
    )
    rows = []
    for logprobs in (None, 1):
        for n in running:
            scheduler = Scheduler(config, kv_cache, StructuredOutputManager(config))
            params = SamplingParams(
                n=1, max_tokens=steps, ignore_eos=True, detokenize=False, logprobs=logprobs
            )
            prompt = list(range(100, 205))
            for i in range(n):
                scheduler.add_request(
                    Request(str(i), prompt, None, None, None, params, 151645, time.time())
                )
            schedule_s, update_s = [], []
            while scheduler.has_unfinished_requests():
                start = time.perf_counter()
                out = scheduler.schedule()
                scheduled = time.perf_counter()
                ids = [r.req_id for r in out.scheduled_new_reqs]
                ids += [r.req_id for r in out.scheduled_cached_reqs]
                runner = ModelRunnerOutput(
                    req_ids=ids,
                    req_id_to_index={r: i for i, r in enumerate(ids)},
                    sampled_token_ids=[[1000 + i % 5000] for i in range(len(ids))],
                    spec_token_ids=None,
                    logprobs=LogprobsLists([[1000]] * len(ids), [[-0.5]] * len(ids), [1] * len(ids))
                    if logprobs is not None
                    else None,
                    prompt_logprobs_dict={},
                )
                scheduler.update_from_output(out, runner)
                schedule_s.append(scheduled - start)
                update_s.append(time.perf_counter() - scheduled)
            decode = slice(3, -3)  # the first step prefills, the last ones free
            schedule = statistics.median(schedule_s[decode]) / n * 1e6
            update = statistics.median(update_s[decode]) / n * 1e6
            rows.append({
                "running": n, "logprobs": logprobs, "schedule_us": schedule,
                "update_us": update, "per_sequence_us": schedule + update,
            })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--running", default="64,128,256", help="running sequences, e.g. 64,256")
    parser.add_argument("--steps", type=int, default=64, help="decode steps per run")
    parser.add_argument(
        "--target", type=Path, default=default_target(VERSION), help="where vLLM 0.8.5 goes"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    install(args.target, VERSION, EXTRAS)
    use(args.target)
    rows = measure([int(v) for v in args.running.split(",")], args.steps, args.target)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"vLLM {VERSION} V1 engine core, host work per decode step (Qwen2.5-0.5B config):")
    print(f"{'running':>8} {'logprobs':>8} {'schedule':>9} {'update':>7} {'us/seq':>7}")
    for r in rows:
        print(
            f"{r['running']:>8} {r['logprobs'] or '-':>8} {r['schedule_us']:>9.1f}"
            f" {r['update_us']:>7.1f} {r['per_sequence_us']:>7.1f}"
        )
    print(
        "median: "
        f"{statistics.median(r['per_sequence_us'] for r in rows):.1f} us per running sequence"
        " (decode_sequence_s: 5 us)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
