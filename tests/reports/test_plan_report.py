"""The plan summary's helpers: a placed config prices stages as the plan did."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex import load_config
from rlplex.plan import make_plan
from rlplex.reports.plan import placed_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("stage", ["generate", "train", "ref_logprob"])
def test_placed_config_keeps_the_device_count_stages_were_measured_on(stage: str) -> None:
    """ppo.yaml's stages were measured on 8 GPUs; auto-placed on 16 they take half as long.

    The sequential baseline of the placed config must price them the same way
    (a bug once priced them as measured on 16, making the speed-up look 2x).
    """
    cfg = load_config(EXAMPLES / "ppo.yaml", overrides=["cluster.nodes=2"])
    roles = {
        n: r.model_copy(update={"auto": True}) if r.is_gpu else r for n, r in cfg.roles.items()
    }
    auto = cfg.model_copy(update={"roles": roles})
    plan = make_plan(auto)
    assert len(plan.placement["actor_train"]) == 16
    sequential = make_plan(placed_config(auto, plan), baseline="sequential")
    planned = plan.op(f"s0/{stage}").duration_s
    assert sequential.op(f"s0/{stage}").duration_s == pytest.approx(planned)
    assert planned == pytest.approx(cfg.pipeline.stage(stage).seconds / 2)
