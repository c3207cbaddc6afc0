"""GRPO learns split across GPUs, with a train role of two data-parallel workers.

The split layout of ``tests/pipelines/test_executor_learning.py`` (one logical
GPU per role, weights synced by broadcast), with ``actor_train`` on two logical
GPUs: the executor gives its two workers one gloo process group before their
setups run, each trains on its half of the batch, and the policy's trainer
all-reduces the gradients over the group, so both hold the same weights after
every step. One run checks both, since starting the role workers, not the steps,
is most of a run's time. The acceptance bar is the learning tests': mean reward
at most 0.3 over the first 5 steps, at least 0.8 over the last 5, in 35 steps.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlplex.config import Config
from rlplex.pipelines import grpo
from rlplex.pipelines.roles import cluster_config
from rlplex.plan import make_plan
from rlplex.runtime import execute

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]

SPLIT_STEPS = 35
"""Steps enough to clear the bar with room: seed 0's mean reward over the last 5 steps is
0.83 at 30, 0.90 at 35 and 0.94 at 40 (its in-process run, whose steps the two workers'
full-batch steps equal)."""


def train_and_checksum(ctx: Any, advantage: Any) -> Any:
    """The real train stage, then the sum of this worker's weights (runs on the workers)."""
    from rlplex.pipelines.stages import train

    out = train(ctx, advantage)
    total = float(sum(p.detach().double().sum() for p in ctx.state.model.parameters()))
    ctx.log(**{f"param_sum/{ctx.rank}": total, f"rows/{ctx.rank}": len(advantage["group"])})
    return out


def split_with_two_trainers() -> Config:
    """The split toy layout, with ``actor_train`` widened to two GPUs (two workers)."""
    config = cluster_config(grpo.build_pipeline(), "split")
    gpus = config.cluster.gpus_per_node
    roles = dict(config.roles)
    # The others keep their own GPUs; the second trainer worker takes a new one.
    trainer = roles["actor_train"]
    roles["actor_train"] = trainer.model_copy(
        update={"devices": (*trainer.devices, gpus), "world_size": 2}
    )
    cluster = config.cluster.model_copy(update={"gpus_per_node": gpus + 1})
    return config.model_copy(update={"roles": roles, "cluster": cluster})


def test_split_grpo_learns_and_its_two_train_workers_stay_identical(tmp_path) -> None:
    config = split_with_two_trainers()
    plan = make_plan(config)
    assert tuple(plan.placement["actor_train"]) == (0, 3)
    timeline = execute(
        plan,
        config,
        steps=SPLIT_STEPS,
        setups=grpo.setups(),
        implementations={"train": train_and_checksum},
        record=tmp_path / "record.jsonl",
    )
    rewards = [timeline.metrics[s]["reward/mean"] for s in range(SPLIT_STEPS)]
    assert sum(rewards[:5]) / 5 <= 0.3
    assert sum(rewards[-5:]) / 5 >= 0.8, rewards
    # Every role on GPUs of its own: nothing to time-share, nothing moved.
    assert not [e for e in timeline.events if e.kind in ("offload", "reload")]
    for step in range(SPLIT_STEPS):
        metrics = timeline.metrics[step]
        # Each worker trained on its own half of the batch...
        assert metrics["rows/0"] == metrics["rows/1"] > 0
        # ...and took the full batch's step: the same weights on both.
        assert metrics["param_sum/0"] == pytest.approx(metrics["param_sum/1"], rel=1e-6, abs=1e-6)
    assert timeline.metrics[1]["param_sum/0"] != pytest.approx(timeline.metrics[0]["param_sum/0"])
    last = timeline.metrics[SPLIT_STEPS - 1]
    for key in ("kl", "loss/policy", "response_length/mean", "tokens_per_s", "time/generate"):
        assert key in last, key
    assert (tmp_path / "record.jsonl").exists()
