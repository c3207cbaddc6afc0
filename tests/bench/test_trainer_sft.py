"""bench/trainer_sft.py: its one-stage configs plan as the published layouts say, with no RL
costs around the train pass."""

from __future__ import annotations

import pytest
from bench_loader import load_bench

from rlplex.config.build import config_from_dict


def test_cases_are_the_published_layouts_without_rl_costs() -> None:
    bench = load_bench("trainer_sft")
    for case in bench.CASES:
        data = bench.case_config(case)
        data["cluster"]["gpu_memory_gb"] = 10 * bench.GPU_GB  # as run() prices the seconds
        cfg = config_from_dict(data, file=case.id)
        role = cfg.roles["actor_train"]
        assert len(role.devices) == case.nodes * case.gpus_per_node
        assert cfg.workload is not None and cfg.workload.controller.padding == "none"
        assert cfg.workload.sequence_mean() == case.tokens  # every sample a full sequence
        assert [s.name for s in cfg.pipeline.stages] == ["train"]
    rows = bench.run()
    assert len(rows) == len(bench.CASES)
    for row in rows:
        # No controller and no per-step overhead: the overhead term holds host work only.
        assert row["terms"].get("overhead", 0.0) == pytest.approx(0.0, abs=0.5)
        assert row["predicted_s"] > 0
        assert row["estimated_gb"] > 0 and row["gpu_gb"] == bench.GPU_GB
