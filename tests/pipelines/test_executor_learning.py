"""The same GRPO pipeline learns under the Ray executor in three layouts, and PPO too.

Colocated (one logical GPU, the planner's offloads and reloads between roles),
split (one logical GPU per role, weight sync by broadcast) and async
one-step-off (generation of step t+1 overlaps training of step t). The
acceptance bar is the same in each: mean reward at most 0.3 over the first 5
steps, at least 0.8 over the last 5, within 60 steps. Colocated and split
clear it by step 40 (0.93 there, 0.96 at 60), so they run 40 steps; async
one-step-off learns slower (0.84 at 60) and runs all 60.

Starting the role workers, not the steps (a quarter of a second each), takes
most of a run's time, so each run checks all it can: the colocated layout is
the demo's test (``tests/pipelines/test_demo.py``: the demo *is* GRPO colocated
under the executor); the split layout's is ``tests/runtime/test_data_parallel.py``,
with a train role of two data-parallel workers; the async layout's is
``tests/runtime/test_run_cli.py``'s run of ``examples/toy_grpo.yaml`` through
``rlplex run``; and PPO colocated, here, runs its policy on DeepSpeed ZeRO-2, which
checks that the plan's offloads reach the engine's buffers (its flat partitions by
rlplex's mover, its gradients by ``offload_states``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlplex.pipelines import ppo
from rlplex.pipelines.roles import cluster_config
from rlplex.plan import make_plan
from rlplex.stages.optim import OptimConfig


def _mean(xs):
    return sum(xs) / len(xs)


def _execute(module, cfg, layout, steps, tmp_path):
    from rlplex.runtime import execute

    pipeline = module.build_pipeline(cfg)
    config = cluster_config(pipeline, layout)
    plan = make_plan(config)
    timeline = execute(
        plan, config, steps=steps, setups=module.setups(cfg), record=tmp_path / "record.jsonl"
    )
    rewards = [timeline.metrics[s]["reward/mean"] for s in range(steps)]
    return plan, timeline, rewards


PPO_STEPS = 30


@pytest.mark.slow
def test_ppo_learns_colocated_with_a_deepspeed_policy_offloaded_through_its_engine(
    ray_session, tmp_path
):
    pytest.importorskip("deepspeed")
    cfg = ppo.default_config().model_copy(
        update={
            "optim": OptimConfig(backend="deepspeed", zero_stage=2, micro_batch_size=64, lr=3e-3)
        }
    )
    _, timeline, rewards = _execute(ppo, cfg, "colocated", PPO_STEPS, tmp_path)
    value_loss = [timeline.metrics[s]["loss/value"] for s in range(PPO_STEPS)]
    assert _mean(rewards[-5:]) > _mean(rewards[:5]) + 0.3, rewards
    assert _mean(value_loss[-5:]) < _mean(value_loss[:5]), value_loss
    # The plan's offloads reached the DeepSpeed engine's buffers: its optimizer
    # partitions left the GPU and came back holding bytes (none before step 0's update).
    offloads = [e for e in timeline.events if e.role == "actor_train" and e.kind == "offload"]
    reloads = [e for e in timeline.events if e.role == "actor_train" and e.kind == "reload"]
    assert any(e.state == "optimizer" for e in offloads)
    assert any(e.state == "optimizer" and e.bytes > 0 for e in reloads if e.step > 0)
