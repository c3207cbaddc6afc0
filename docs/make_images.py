"""Regenerate the README's schedule pictures from the example configs.

docs/img/colocated.png: examples/ppo.yaml (every role on the same 8 GPUs) on
48 GB GPUs and slower 4 GB/s host copies, so the plan must offload and reload
states between stages and the transfers are wide enough to see.
docs/img/async.png: examples/async.yaml, one-step-off async GRPO.
docs/img/memory.png: the plan of examples/colocated_7b_host.yaml with each GPU
group's memory and the node's host copies drawn under the chart.

Run: .venv/bin/python docs/make_images.py
"""

from __future__ import annotations

from pathlib import Path

from rlplex.reports.records import planned_timeline
from rlplex.viz.views import write_views

ROOT = Path(__file__).resolve().parents[1]
IMAGES = (
    ("colocated.png", "ppo.yaml", ["cluster.gpu_memory_gb=48", "cluster.host_gb_per_s=4"], 2,
     "colocated PPO (examples/ppo.yaml, 48 GB GPUs, 4 GB/s host copies): offload/reload"),
    ("async.png", "async.yaml", [], 4, "one-step-off async GRPO (examples/async.yaml)"),
)  # fmt: skip


def main() -> None:
    out = ROOT / "docs" / "img"
    for name, config, overrides, steps, title in IMAGES:
        timeline = planned_timeline(ROOT / "examples" / config, steps=steps, overrides=overrides)
        for path in write_views(timeline, png=out / name, title=title):
            print(f"wrote {path.relative_to(ROOT)}")
    memory_picture(out / "memory.png")


def memory_picture(path: Path) -> None:
    """One step of the colocated 7B plan, with GPU and host memory under the Gantt."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan
    from rlplex.plan.memory_lanes import memory_lanes
    from rlplex.timeline.record import timeline_from_plan

    config = load_config(ROOT / "examples" / "colocated_7b_host.yaml")
    plan = make_plan(config)
    title = "colocated 7B (examples/colocated_7b_host.yaml): GPU and host memory"
    for written in write_views(
        timeline_from_plan(plan), png=path, title=title, memory=memory_lanes(plan, config)
    ):
        print(f"wrote {written.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
