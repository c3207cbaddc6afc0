"""Planner and simulator speed, and the planner's period against the sequential baseline.

Run: ``.venv/bin/python bench/planner.py`` (``make bench``). Prints two tables
and rewrites the ``## Planner`` section of docs/benchmarks.md.

Targets (issue 3): a 10-stage PPO step with 5 GPU roles on 8 GPUs in < 20 ms,
the same on 4,096 GPUs in < 1 s, auto-placement of 4 GPU roles on 1,024 GPUs
in < 10 s, and 10,000 simulated steps of a 10-stage plan in < 2 s.
"""

from __future__ import annotations

import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlplex.config import config_from_dict, load_config  # noqa: E402
from rlplex.plan import make_plan, resolve_placement, search_placements, verify_plan  # noqa: E402
from rlplex.sim import simulate  # noqa: E402

TRAIN = {"weights": 4, "optimizer": 8, "grads": 4}


def ppo10(nodes: int, devices: str = "all", auto: bool = False) -> object:
    """PPO with 5 GPU roles (actor, rollout, reference, critic, reward model), 10 stages."""
    dev = "auto" if auto else devices
    roles = {
        "actor_train": {"devices": dev, "states": TRAIN},
        "actor_infer": {
            "devices": dev,
            "num_gpus_per_worker": 2,
            "states": {"weights": 4, "kv_cache": 20},
        },
        "reference": {"devices": dev, "states": {"weights": 4}},
        "critic": {"devices": dev, "states": TRAIN},
        "reward_model": {"devices": dev, "states": {"weights": 4}},
    }
    if auto:
        roles.pop("reward_model")
    stages = {
        "generate": {"role": "actor_infer", "seconds": 120, "memory_gb": 10},
        "reward": {
            "role": "reward_model" if not auto else "driver",
            "seconds": 10,
            "after": ["generate"],
        },
        "ref_logprob": {"role": "reference", "seconds": 20, "after": ["generate"]},
        "old_logprob": {
            "role": "actor_train",
            "seconds": 20,
            "after": ["generate"],
            "needs": ["weights"],
        },
        "values": {"role": "critic", "seconds": 20, "after": ["generate"], "needs": ["weights"]},
        "advantage": {
            "role": "driver",
            "seconds": 1,
            "after": ["reward", "ref_logprob", "old_logprob", "values"],
        },
        "critic_train": {"role": "critic", "seconds": 60, "memory_gb": 20, "after": ["advantage"]},
        "train": {"role": "actor_train", "seconds": 80, "memory_gb": 20, "after": ["advantage"]},
        "weight_sync": {
            "kind": "weight_sync",
            "from": "actor_train",
            "to": "actor_infer",
            "after": ["train"],
        },
        "log": {"role": "driver", "seconds": 0.5, "after": ["critic_train", "weight_sync"]},
    }
    for stage in stages.values():
        if stage.get("role") != "driver" and "seconds" in stage:
            stage["at_devices"] = 8
    return config_from_dict(
        {
            "cluster": {"nodes": nodes, "gpus_per_node": 8, "gpu_memory_gb": 80},
            "roles": roles,
            "pipeline": {"stages": stages},
        }
    )


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    rows = []
    cfg8 = ppo10(1)
    make_plan(cfg8)  # warm caches (imports, pydantic schemas)
    t, plan8 = best_of(lambda: make_plan(cfg8), 20)
    verify_plan(plan8, cfg8)
    rows.append(
        ("plan 10-stage PPO, 5 GPU roles, 8 GPUs", t, 0.020, f"period {plan8.period_s:.2f} s")
    )
    cfg4k = ppo10(512)
    t, plan4k = best_of(lambda: make_plan(cfg4k), 3)
    rows.append(
        ("plan the same on 4,096 GPUs (512 nodes)", t, 1.0, f"period {plan4k.period_s:.2f} s")
    )
    cfg_auto = ppo10(128, auto=True)
    t, cands = best_of(lambda: search_placements(cfg_auto, top=5), 1)
    best = cands[0]
    rows.append(
        (
            "auto-placement, 4 GPU roles, 1,024 GPUs",
            t,
            10.0,
            f"best {best.counts} period {best.period_s:.2f} s",
        )
    )
    # Published configs with in-flight engines: a staleness search that simulates the
    # collector's loop for the candidates it schedules (16.3 s before 2026-11-25's relaxed
    # bound), and a 512-GPU one whose engine workers span 4 nodes (no placement before then).
    for name, label in (
        ("heldout_nemorl06_qwen3_30ba3b_8off_64gen128train_h100.yaml",
         "plan --auto search, NeMo RL 8-step-off in-flight config, 192 GPUs, k 1-8"),
        ("heldout_nemorl06_deepseekv3_1off_256gen256train_h100.yaml",
         "plan --auto search, NeMo RL DeepSeek-V3 one-step-off, 512 GPUs (tp 32 engines)"),
    ):  # fmt: skip
        cfg_pub = load_config(ROOT / "bench" / "published" / name)
        t, resolved = best_of(lambda cfg=cfg_pub: resolve_placement(cfg, auto=True, top=5), 1)
        found = resolved.best
        assert found is not None
        cut = " (cut by the search's budget)" if any("budget" in n for n in resolved.notes) else ""
        note = f"best k={found.staleness}, period {found.period_s:.2f} s{cut}"
        rows.append((label, t, 10.0, note))
    t, timeline = best_of(lambda: simulate(plan8, cfg8, steps=10_000), 3)
    rows.append(
        ("simulate 10,000 steps of the 10-stage plan", t, 2.0, f"{len(timeline.events):,} events")
    )

    speed = ["| figure | seconds | target | ok | note |", "|---|---|---|---|---|"]
    for name, secs, target, note in rows:
        speed.append(
            f"| {name} | {secs:.4f} | < {target:g} | {'yes' if secs < target else 'NO'} | {note} |"
        )
    periods = [
        "| example | mode | planner period s | lower bound s | gap | sequential s |"
        " naive-colocate s | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        cfg = load_config(path)
        plan = make_plan(cfg)
        verify_plan(plan, cfg)
        seq = make_plan(cfg, baseline="sequential")
        naive = make_plan(cfg, baseline="naive-colocate")
        periods.append(
            f"| {path.name} | {plan.mode} | {plan.period_s:.2f} | {plan.lower_bound_s:.2f} |"
            f" {plan.gap * 100:.2f} % | {seq.period_s:.2f} | {naive.period_s:.2f} |"
            f" {seq.period_s / plan.period_s:.2f}x |"
        )
    text = "\n".join(speed) + "\n\n" + "\n".join(periods)
    print(text)
    section = (
        "## Planner\n\n"
        "`.venv/bin/python bench/planner.py` (also `make bench`) times the planner and the\n"
        "simulator (best of several runs) and compares the planner's period with the\n"
        "`sequential` and `naive-colocate` baselines on every example config. Measured on\n"
        f"the 2-core development container, Python {platform.python_version()}:\n\n" + text + "\n"
    )
    write_section(ROOT / "docs" / "benchmarks.md", section)


def write_section(path: Path, section: str) -> None:
    """Replace (or append) the ``## Planner`` section, leaving the others alone."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Planner\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _: section + "\n", old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + section
    path.write_text(new.rstrip("\n") + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
