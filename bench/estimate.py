"""How long estimating takes: every example config and a 4,096-GPU one, each < 50 ms.

Run: ``.venv/bin/python bench/estimate.py``. Prints one row per config (median
of 20): the time to check the native form of the config with the estimator
filling what it lacks (``config_from_dict``: YAML parsing and the ROLL / RLinf /
verl conversion are not included), the time of ``estimate_config`` alone, and
the period the planner then finds (not timed). Example configs that name no
model, workload or GPU are given ``qwen2.5-7b``, a 1024 x 5 workload and
``h100``, with their own ``seconds``/``states`` kept (given figures win), so
their rows time the estimate without changing their plans.

Target (issue 10): < 50 ms per config for the estimate. The check column is
the whole config check (device parsing, worker layout, DAG), which the
estimate rides on; on 4,096 GPUs it is dominated by the worker-layout check,
not by the estimator.
"""

from __future__ import annotations

import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlplex.config import config_from_dict, detect_format, to_native  # noqa: E402
from rlplex.estimate.estimator import estimate_config  # noqa: E402
from rlplex.plan import make_plan  # noqa: E402
from rlplex.resources.yaml_io import load_yaml_file  # noqa: E402

REPEAT = 20
MODEL = "qwen2.5-7b"
WORKLOAD = {
    "prompts_per_step": 1024,
    "samples_per_prompt": 5,
    "prompt_tokens": {"mean": 256, "max": 512},
    "response_tokens": {"mean": 512, "max": 1024},
}


def big_config(path: Path) -> None:
    """4,096 GPUs (512 nodes of 8): Qwen2.5-72B, FSDP training on 2,048 GPUs, vLLM tp 8 on
    2,048, reference colocated with training, one-step-off async, nothing typed by hand."""
    doc = {
        "model": "qwen2.5-72b",
        "workload": {
            "prompts_per_step": 8192,
            "samples_per_prompt": 16,
            "prompt_tokens": {"mean": 512, "max": 1024},
            "response_tokens": {"mean": 2048, "max": 8192},
            "micro_batch_size": 1,
        },
        "cluster": {"nodes": 512, "gpus_per_node": 8, "gpu": "h100"},
        "roles": {
            "actor_train": {"devices": "0-2047", "parallel": {"fsdp": True, "recompute": True}},
            "reference": {"devices": "0-2047", "parallel": {"fsdp": True}},
            "actor_infer": {"devices": "2048-4095", "num_gpus_per_worker": 8},
            "rewards": {"world_size": 64},
        },
        "pipeline": {
            "mode": "async",
            "max_staleness": 1,
            "stages": {
                "generate": {"role": "actor_infer"},
                "reward": {"role": "rewards", "seconds": 20, "after": ["generate"]},
                "ref_logprob": {"role": "reference", "after": ["generate"]},
                "old_logprob": {"role": "actor_train", "after": ["generate"], "needs": ["weights"]},
                "advantage": {
                    "role": "driver",
                    "seconds": 2,
                    "after": ["reward", "ref_logprob", "old_logprob"],
                },
                "train": {"role": "actor_train", "after": ["advantage"]},
                "weight_sync": {
                    "kind": "weight_sync",
                    "from": "actor_train",
                    "to": "actor_infer",
                    "after": ["train"],
                },
            },
        },
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def native_form(path: Path) -> dict:
    """The config as the native dict the checker reads, with estimator inputs added."""
    data = load_yaml_file(path)
    native = to_native(detect_format(data), data, str(path), None)
    native.setdefault("model", MODEL)
    native.setdefault("workload", WORKLOAD)
    cluster = native.get("cluster") or {}
    native["cluster"] = {**cluster, "gpu": cluster.get("gpu") or "h100"}
    return native


def median_ms(fn: object) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "4096_gpus_qwen72b_async.yaml"
        big_config(big)
        paths = [*sorted((ROOT / "examples").glob("*.yaml")), big]
        print(f"python {platform.python_version()}, {platform.machine()}; median of {REPEAT}")
        print("| config | GPUs | check + fill, ms | estimate, ms | estimated figures | period, s |")
        print("|---|---|---|---|---|---|")
        worst = 0.0
        for path in paths:
            native = native_form(path)
            base = path.parent

            def check(n: dict = native, p: Path = path, b: Path = base) -> object:
                return config_from_dict(n, file=str(p), base_dir=b)

            cfg = check()  # warm: imports, Python pipelines
            load = median_ms(check)
            est = median_ms(lambda c=cfg: estimate_config(c))
            worst = max(worst, est)
            period = make_plan(cfg).period_s
            name = path.name if path.parent != Path(tmp) else path.name + " (generated)"
            print(
                f"| {name} | {cfg.cluster.num_gpus} | {load:.1f} | {est:.2f} |"
                f" {len(cfg.estimated)} | {period:.2f} |"
            )
        verdict = "meets" if worst < 50 else "MISSES"
        print(f"\nslowest estimate: {worst:.2f} ms ({verdict} the < 50 ms target)")


if __name__ == "__main__":
    main()
