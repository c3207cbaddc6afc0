"""Benchmark: import and replay 100,000 recorded steps, and a what-if over them.

Reuses the log writer of ``bench/import_records.py`` (verl JSONL, verl console,
ROLL stdout), then for each log times ``import_record`` + ``replay`` through
the plan of the matching config (verl: ``examples/records/verl_quickstart.yaml``;
ROLL: ``examples/roll.yaml``), and once a what-if of the verl log with two
alternatives (4/12 split, sync and one-step-off async). Target: import and
replay of 100,000 steps under 10 s.

    .venv/bin/python bench/replay.py [--steps 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from import_records import write_logs  # noqa: E402

from rlplex.config import load_config  # noqa: E402
from rlplex.sim.replay import replay  # noqa: E402
from rlplex.sim.whatif import Alternative, whatif  # noqa: E402
from rlplex.timeline.importers import import_record  # noqa: E402

CONFIGS = {
    "verl jsonl": ROOT / "examples/records/verl_quickstart.yaml",
    "verl console": ROOT / "examples/records/verl_quickstart.yaml",
    "roll stdout": ROOT / "examples/roll.yaml",
}
SPLIT = [
    "cluster.nodes=2", "cluster.gpus_per_node=8", "roles.actor_infer.devices=0-3",
    "roles.actor_train.devices=4-15", "roles.reference.devices=4-15",
    "roles.critic.devices=4-15",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    args = parser.parse_args()
    print("| log | steps | import s | replay s | total s | mean abs error |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_logs(Path(tmp), args.steps)
        for name, path in paths.items():
            cfg = load_config(CONFIGS[name])
            t0 = time.perf_counter()
            run = import_record(path)
            t1 = time.perf_counter()
            result = replay(run, cfg)
            t2 = time.perf_counter()
            print(f"| {name} | {len(result.steps):,} | {t1 - t0:.2f} | {t2 - t1:.2f} |"
                  f" {t2 - t0:.2f} | {result.mean_abs_error_pct:.2f} % |")  # fmt: skip
        run = import_record(paths["verl jsonl"])
        cfg = load_config(CONFIGS["verl jsonl"])
        alternatives = [
            Alternative("4/12 sync", load_config(CONFIGS["verl jsonl"], overrides=SPLIT)),
            Alternative("4/12 async k=1", load_config(
                CONFIGS["verl jsonl"],
                overrides=[*SPLIT, "pipeline.mode=async", "pipeline.max_staleness=1"])),
        ]  # fmt: skip
        t0 = time.perf_counter()
        result = whatif(run, cfg, alternatives)
        elapsed = time.perf_counter() - t0
        best = result.alternatives[0]
        print(f"\nwhat-if of {len(run.steps):,} verl steps, baseline + 2 alternatives:"
              f" {elapsed:.2f} s (best: {best.label}, {best.period_s:.2f} s,"
              f" {best.speedup:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
