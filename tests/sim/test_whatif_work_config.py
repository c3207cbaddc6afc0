"""whatif's work config: recorded stages take their measured seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.plan.costs import weight_sync_seconds
from rlplex.sim.whatif import RecordedWork, work_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "estimate_7b.yaml"


def test_a_recorded_sync_stays_measured_on_other_devices_than_the_configs() -> None:
    """The loader marks the sync's seconds as estimated, and a plan on other devices prices an
    estimated sync again; a sync the record has, at the placement's devices, must keep its
    measured seconds instead (regression: the mark survived the recorded seconds)."""
    config = load_config(EXAMPLE)
    assert config.is_estimated("pipeline.stages.weight_sync.seconds")
    split = {"actor_infer": (0, 1, 2, 3), "actor_train": (4, 5, 6, 7), "reference": (4, 5, 6, 7)}
    work = RecordedWork(
        rows=({"weight_sync": 3.0},), means={"weight_sync": 3.0}, devices={},
        sync_devices={"weight_sync": ((4, 5, 6, 7), (0, 1, 2, 3))},
    )  # fmt: skip
    cfg, modelled = work_config(config, work, {}, split)
    assert modelled == ()
    assert not cfg.is_estimated("pipeline.stages.weight_sync.seconds")
    stage = cfg.pipeline.stage("weight_sync")
    assert weight_sync_seconds(cfg, stage, split) == pytest.approx(3.0)
    # Elsewhere than recorded: left to the model, which prices these devices again.
    cfg, modelled = work_config(config, work, {}, {**split, "actor_infer": (0, 1)})
    assert modelled == ("weight_sync",)
    assert cfg.is_estimated("pipeline.stages.weight_sync.seconds")


def test_recorded_stages_are_not_priced_again_by_a_staleness_search() -> None:
    """Regression: work_config kept the estimated mark on recorded run stages, so the async
    search's at_staleness replaced a recorded 100 s generate with a fresh estimate."""
    from rlplex.estimate.fill import at_staleness

    config = load_config(EXAMPLE)
    assert config.is_estimated("pipeline.stages.generate.seconds")
    work = RecordedWork(rows=({"generate": 100.0},), means={"generate": 100.0}, devices={},
                        sync_devices={})  # fmt: skip
    cfg, _ = work_config(config, work, {}, None)
    assert not cfg.is_estimated("pipeline.stages.generate.seconds")
    async_cfg = cfg.model_copy(
        update={"pipeline": cfg.pipeline.model_copy(update={"mode": "async"})}
    )
    moved = at_staleness(async_cfg, 2)
    assert moved.pipeline.stage("generate").seconds == pytest.approx(100.0)
