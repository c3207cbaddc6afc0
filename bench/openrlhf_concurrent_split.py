"""OpenRLHF's concurrent timers replayed two ways: on the members' modelled span, and in
proportion (the figures of docs/record.md, "Concurrent joint timers").

OpenRLHF's ``ppo_train`` and ``make_experience`` are wall times over passes that ran side
by side on their own GPUs. This script replays step 1 of
``examples/records/openrlhf_wandb.csv`` (made-up figures in OpenRLHF's wandb format)
through ``examples/records/openrlhf_ppo.sh`` on H100s, once as rlplex divides those timers
(:func:`rlplex.timeline.joint.split_joint`: each member its modelled seconds times the
measured over the modelled span) and once with the proportional division of sequential
timers in its place, and prints each stage's seconds and the replayed step against the
recorded one.

Run: ``.venv/bin/python bench/openrlhf_concurrent_split.py``.
"""

from __future__ import annotations

from pathlib import Path

import rlplex.timeline.joint as joint
from rlplex.reports.records import RecordSource, replay_report

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "examples" / "records" / "openrlhf_wandb.csv"
SCRIPT = ROOT / "examples" / "records" / "openrlhf_ppo.sh"


def replay_step_one() -> tuple[dict[str, float], dict[str, float]]:
    """(stage seconds, the replay's row) of step 1."""
    report = replay_report(RecordSource(RECORD, SCRIPT), ("cluster.gpu=h100",))
    row = next(r for r in report.to_dict()["steps"] if r["step"] == 1)
    return report.run.steps[1], row


def main() -> None:
    for label in ("span (rlplex)", "proportional"):
        if label == "proportional":
            # Every joint timer divided as the sequential ones are.
            joint._factors = lambda seconds, config: joint._shares(seconds)  # type: ignore[assignment]
        stages, row = replay_step_one()
        shown = ", ".join(f"{name} {seconds:.2f}" for name, seconds in stages.items())
        print(f"{label}: {shown}")
        print(
            f"  step 1: recorded {row['recorded_s']:.2f} s, replayed {row['predicted_s']:.2f} s"
            f" ({row['error_pct']:+.1f} %)"
        )


if __name__ == "__main__":
    main()
