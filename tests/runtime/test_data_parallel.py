"""A train role with two workers: each trains on its shard, gradients are all-reduced.

GRPO on the toy task with ``actor_train`` on two logical GPUs: the executor
gives the two workers one gloo process group before their setups run, and
the policy's trainer all-reduces the gradients over it, so both workers hold
the same weights after every step.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlplex.config import Config
from rlplex.pipelines import grpo
from rlplex.pipelines.roles import TRAIN_STATES, cluster_config
from rlplex.plan import make_plan
from rlplex.resources.cluster import Role
from rlplex.runtime import execute

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]


def train_and_checksum(ctx: Any, advantage: Any) -> Any:
    """The real train stage, then the sum of this worker's weights (runs on the workers)."""
    from rlplex.pipelines.stages import train

    out = train(ctx, advantage)
    total = float(sum(p.detach().double().sum() for p in ctx.state.model.parameters()))
    ctx.log(**{f"param_sum/{ctx.rank}": total, f"rows/{ctx.rank}": len(advantage["group"])})
    return out


def two_trainer_config() -> Config:
    """The colocated toy layout, with ``actor_train`` on GPUs 0 and 1 (two workers)."""
    config = cluster_config(grpo.build_pipeline(), "colocated")
    roles = dict(config.roles)
    roles["actor_train"] = Role(
        name="actor_train", devices=(0, 1), world_size=2, states=dict(TRAIN_STATES)
    )
    cluster = config.cluster.model_copy(update={"gpus_per_node": 2})
    return config.model_copy(update={"roles": roles, "cluster": cluster})


def test_two_train_workers_stay_identical() -> None:
    config = two_trainer_config()
    plan = make_plan(config)
    timeline = execute(
        plan,
        config,
        steps=2,
        setups=grpo.setups(),
        implementations={"train": train_and_checksum},
    )
    for step in (0, 1):
        metrics = timeline.metrics[step]
        # Each worker trained on its own half of the batch...
        assert metrics["rows/0"] == metrics["rows/1"] > 0
        # ...and took the full batch's step: the same weights on both.
        assert metrics["param_sum/0"] == pytest.approx(metrics["param_sum/1"], rel=1e-6, abs=1e-6)
    assert timeline.metrics[1]["param_sum/0"] != pytest.approx(timeline.metrics[0]["param_sum/0"])
