"""Comparing a run with its plan: replaying measured durations reproduces the run."""

from __future__ import annotations

import pytest

from rlplex.config import config_from_dict
from rlplex.plan import make_plan
from rlplex.runtime.report import stage_durations
from rlplex.sim import simulate
from rlplex.timeline.periods import measured_period

CONFIG = {
    "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory_gb": 4, "host_gb_per_s": 2},
    "roles": {
        "actor_train": {"devices": [0], "states": {"weights": 1, "optimizer": 2}},
        "actor_infer": {"devices": [0], "states": {"weights": 1, "kv_cache": 1}},
    },
    "pipeline": {"stages": {
        "generate": {"role": "actor_infer", "seconds": 1},
        "train": {"role": "actor_train", "seconds": 1, "after": ["generate"]},
        "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                        "after": ["train"]},
    }},
}  # fmt: skip


def test_measured_transfers_are_replayed_as_measured() -> None:
    """A run whose offloads and reloads took 0 s (a CPU run) replays at its own period."""
    cfg = config_from_dict(CONFIG)
    plan = make_plan(cfg)
    assert any(op.kind == "offload" and op.end_s > op.start_s for op in plan.ops)

    def instant(_step: int, name: str) -> float | None:
        return 0.0 if name.startswith(("offload/", "reload/")) else None

    run = simulate(plan, cfg, steps=6, durations=instant)  # stands in for a recorded run
    durations = stage_durations(run)
    assert durations[0]["offload/actor_train/weights"] == 0.0
    replayed = simulate(plan, cfg, steps=6, durations=durations)
    assert replayed.meta["period_s"] == pytest.approx(measured_period(run))
