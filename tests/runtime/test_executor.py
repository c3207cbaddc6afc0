"""The Ray executor on logical GPUs: data flow, planned order, offload calls, async, faults."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from plans import colocated_config, colocated_plan

from rlplex.config import config_from_dict
from rlplex.plan import make_plan
from rlplex.runtime import (
    ClusterFitError,
    OpTimeoutError,
    StageFailedError,
    WorkerDiedError,
    execute,
)
from rlplex.runtime.recorder import plan_path
from rlplex.runtime.schedule import expand_plan
from rlplex.stages.offload import BookkeepingOffload
from rlplex.timeline.record import Timeline
from rlplex.viz.critical import period_of

pytestmark = pytest.mark.usefixtures("ray_session")


def assert_no_placement_groups_left() -> None:
    import ray

    table = ray.util.placement_group_table()
    assert all(pg["state"] == "REMOVED" for pg in table.values()), table


# -- stage implementations (run on the workers) ---------------------------------


def generate(ctx):
    return [f"s{ctx.step}-r{ctx.rank}-{i}" for i in range(3)]


def reward(generate):
    return [len(text) for text in generate]


def advantage(ctx, reward):
    ctx.log(**{"reward/mean": sum(reward) / len(reward)})
    return [r - 5 for r in reward]


def train(ctx, advantage):
    return {"rank": [ctx.rank], "rows": [len(advantage)]}


class CallLog(BookkeepingOffload):
    """Bookkeeping offload that appends each call to a file shared by the test."""

    def __init__(self, path: str, role: str, rank: int, resident) -> None:
        super().__init__({"weights": 10, "optimizer": 20, "kv_cache": 5, "grads": 3}, resident)
        self.path, self.role, self.rank = path, role, rank

    def _log(self, kind: str, states) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps([self.role, self.rank, kind, list(states)]) + "\n")

    def offload(self, states, *, dead=False):
        self._log("offload", states)
        return super().offload(states, dead=dead)

    def reload(self, states):
        self._log("reload", states)
        return super().reload(states)


def logging_setup(path: str):
    def setup(info):
        return CallLog(path, info.role, info.rank, info.initial_residency)

    return setup


# -- tests ---------------------------------------------------------------------


@pytest.mark.slow
def test_stages_pass_data_between_roles_and_the_record_is_written(tmp_path: Path) -> None:
    cfg, plan = colocated_config(), colocated_plan()
    record = tmp_path / "run.jsonl"
    seen: list[int] = []
    timeline = execute(
        plan,
        cfg,
        steps=2,
        record=record,
        time_scale=0.01,
        implementations={
            "generate": generate,
            "reward": reward,
            "advantage": advantage,
            "train": train,
        },
        on_step=lambda step, metrics: seen.append(step),
    )
    assert seen == [0, 1]
    # actor_infer has 2 workers of 3 rows each; rewards (1 worker) gathers all 6
    assert timeline.metrics[0]["reward/mean"] == pytest.approx(
        sum(len(f"s0-r{r}-{i}") for r in range(2) for i in range(3)) / 6
    )
    on_disk = Timeline.read_jsonl(record)
    assert len(on_disk.events) == 2 * len(plan.ops)
    assert on_disk.metrics[1]["step_s"] > 0
    assert json.loads(plan_path(record).read_text())["ops"][0]["id"] == plan.ops[0].id
    transfer = next(e for e in on_disk.events if e.op == "s0/offload/actor_train/optimizer")
    assert transfer.model_extra["worker_s"] >= 0 and transfer.end_s >= transfer.start_s
    # The plan's figures are kept as the plan's; the period viz shows is the measured one.
    assert "period_s" not in on_disk.meta and "makespan_s" not in on_disk.meta
    assert on_disk.meta["plan"] == {
        "period_s": plan.period_s,
        "makespan_s": plan.makespan_s,
        "lower_bound_s": plan.lower_bound_s,
    }
    measured = on_disk.step_span(1)[1] - on_disk.step_span(0)[1]
    assert period_of(on_disk) == pytest.approx(measured) and measured < plan.period_s / 2
    # A record written before the fix claimed the plan's period as its own: not believed.
    old = on_disk.model_copy(update={"meta": {**on_disk.meta, "period_s": plan.period_s}})
    assert period_of(old) == pytest.approx(measured)
    assert_no_placement_groups_left()


def test_rehearsal_sleeps_the_planned_time_scaled() -> None:
    cfg, plan = colocated_config(), colocated_plan()
    timeline = execute(plan, cfg, steps=1, time_scale=0.05)
    events = {e.op: e for e in timeline.events}
    assert 2.0 * 0.05 <= events["s0/generate"].model_extra["worker_s"] < 2.0 * 0.05 + 0.2
    assert events["s0/advantage"].duration_s >= 0.5 * 0.05
    assert timeline.metrics[0]["step_s"] >= 6.0 * 0.05 * 0.8


def _lane_orders(timeline: Timeline) -> dict[tuple[int, str], list[str]]:
    lanes: dict[tuple[int, str], list[tuple[float, str]]] = defaultdict(list)
    for e in timeline.events:
        lane = "compute" if e.kind in ("run", "weight_sync") else "transfer"
        for d in e.devices:
            lanes[(d, lane)].append((e.start_s, e.op))
    return {k: [op for _, op in sorted(v)] for k, v in lanes.items()}


def tight_and_roomy(memory: float) -> Any:
    return config_from_dict(
        {
            "cluster": {
                "nodes": 1,
                "gpus_per_node": 2,
                "gpu_memory_gb": memory,
                "host_gb_per_s": 100,
            },
            "roles": {
                "actor_train": {
                    "devices": "0-1",
                    "states": {"weights": 4, "optimizer": 8, "grads": 4},
                },
                "actor_infer": {"devices": "0-1", "states": {"weights": 4, "kv_cache": 16}},
            },
            "pipeline": {
                "stages": {
                    "generate": {"role": "actor_infer", "seconds": 2, "memory_gb": 2},
                    "old_logprob": {
                        "role": "actor_train",
                        "seconds": 1,
                        "after": ["generate"],
                        "needs": ["weights"],
                    },
                    "train": {
                        "role": "actor_train",
                        "seconds": 2,
                        "memory_gb": 4,
                        "after": ["old_logprob"],
                    },
                    "weight_sync": {
                        "kind": "weight_sync",
                        "from": "actor_train",
                        "to": "actor_infer",
                        "after": ["train"],
                    },
                }
            },
        }
    )


@pytest.mark.parametrize("memory", [30.0, 80.0], ids=["tight", "roomy"])
def test_offload_calls_and_device_order_follow_the_plan(tmp_path: Path, memory: float) -> None:
    cfg = tight_and_roomy(memory)
    plan = make_plan(cfg)
    calls = tmp_path / "calls.jsonl"
    timeline = execute(
        plan,
        cfg,
        steps=2,
        time_scale=0.02,
        setups={r: logging_setup(str(calls)) for r in cfg.roles},
    )
    # every device runs its ops in the planned order
    sched = expand_plan(plan, 2, staleness=0)
    assert _lane_orders(timeline) == {k: list(v) for k, v in sched.lane_ids().items()}
    # the workers saw exactly the plan's transfers, in its order, on every rank
    seen: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    if calls.exists():
        for line in calls.read_text().splitlines():
            role, rank, kind, states = json.loads(line)
            seen[(role, rank)].extend((kind, s) for s in states)
    for role in cfg.roles:
        planned = [
            (o.work.kind, o.work.state)
            for o in sched.ops
            if o.work.role == role and o.work.kind in ("offload", "reload")
        ]
        for rank in range(cfg.roles[role].world_size):
            assert seen.get((role, rank), []) == planned
    return_value = sorted(seen.items())
    (tmp_path / f"seq-{memory}").write_text(json.dumps(return_value))


def test_tight_and_roomy_plans_offload_differently() -> None:
    tight, roomy = make_plan(tight_and_roomy(30.0)), make_plan(tight_and_roomy(80.0))
    moves = lambda p: [(o.kind, o.role, o.state) for o in p.ops if o.kind in ("offload", "reload")]  # noqa: E731
    assert moves(tight) != moves(roomy)
    assert len(moves(tight)) > len(moves(roomy))


def async_config() -> Any:
    return config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": 2, "gpu_memory_gb": 80},
            "roles": {
                "actor_infer": {"devices": [0], "states": {"weights": 4, "kv_cache": 20}},
                "actor_train": {"devices": [1], "states": {"weights": 4, "optimizer": 8}},
            },
            "pipeline": {
                "mode": "async",
                "max_staleness": 1,
                "stages": {
                    "generate": {"role": "actor_infer", "seconds": 2},
                    "advantage": {"role": "driver", "seconds": 0.2, "after": ["generate"]},
                    "train": {"role": "actor_train", "seconds": 3, "after": ["advantage"]},
                    "weight_sync": {
                        "kind": "weight_sync",
                        "from": "actor_train",
                        "to": "actor_infer",
                        "after": ["train"],
                    },
                },
            },
        }
    )


def test_async_generation_runs_at_most_k_steps_ahead() -> None:
    cfg = async_config()
    plan = make_plan(cfg)
    k = cfg.pipeline.max_staleness
    steps = 6
    timeline = execute(plan, cfg, steps=steps, time_scale=0.05)
    ev = {e.op: e for e in timeline.events}
    for t in range(steps - k - 1):
        assert ev[f"s{t + k + 1}/generate"].start_s >= ev[f"s{t}/weight_sync"].end_s
    # and it does run ahead: generation of t+1 starts before training of t ends
    assert any(ev[f"s{t + 1}/generate"].start_s < ev[f"s{t}/train"].end_s for t in range(steps - 1))


# -- faults ----------------------------------------------------------------------


def failing_train(ctx, advantage):
    if ctx.step == 1 and ctx.rank == 1:
        raise ValueError("loss is NaN")
    return None


@pytest.mark.slow
def test_stage_exception_names_stage_step_role_rank_and_keeps_the_record(tmp_path: Path) -> None:
    cfg, plan = colocated_config(), colocated_plan()
    record = tmp_path / "run.jsonl"
    with pytest.raises(StageFailedError) as info:
        execute(
            plan,
            cfg,
            steps=3,
            record=record,
            time_scale=0.01,
            implementations={"train": failing_train},
        )
    err = info.value
    assert (err.stage, err.step, err.role, err.rank) == ("train", 1, "actor_train", 1)
    assert "loss is NaN" in str(err) and "ValueError" in err.remote_traceback
    on_disk = Timeline.read_jsonl(record)
    assert {e.step for e in on_disk.events} >= {0}
    assert on_disk.metrics[0]["step_s"] > 0
    assert on_disk.metrics[1].get("incomplete") is True
    assert_no_placement_groups_left()


def dying_generate(ctx):
    if ctx.step == 1:
        os._exit(1)


@pytest.mark.slow
def test_killed_worker_gives_a_clear_error_within_the_timeout() -> None:
    cfg, plan = colocated_config(), colocated_plan()
    t0 = time.monotonic()
    with pytest.raises((WorkerDiedError, OpTimeoutError)) as info:
        execute(
            plan,
            cfg,
            steps=3,
            time_scale=0.01,
            timeout_s=20,
            implementations={"generate": dying_generate},
        )
    assert time.monotonic() - t0 < 60
    assert "actor_infer" in str(info.value) and "s1/generate" in str(info.value)
    assert_no_placement_groups_left()


def slow_train(advantage):
    time.sleep(30)


@pytest.mark.slow
def test_op_overrunning_the_timeout_is_reported() -> None:
    cfg, plan = colocated_config(), colocated_plan()
    t0 = time.monotonic()
    with pytest.raises(OpTimeoutError, match="s0/train"):
        execute(
            plan,
            cfg,
            steps=1,
            time_scale=0.01,
            timeout_s=1.0,
            implementations={"train": slow_train},
        )
    assert time.monotonic() - t0 < 25
    assert_no_placement_groups_left()


def test_plan_needing_more_gpus_than_the_cluster_is_refused_before_start() -> None:
    cfg = colocated_config(gpus=16)
    plan = colocated_plan(devices=tuple(range(16)))
    with pytest.raises(ClusterFitError, match="16 GPUs"):
        execute(plan, cfg, steps=1)
    assert_no_placement_groups_left()


def test_plan_needing_a_missing_node_is_refused_with_the_numbers() -> None:
    cfg = config_from_dict(
        {
            "cluster": {"nodes": 2, "gpus_per_node": 4},
            "roles": {
                "actor_train": {"devices": [0, 4], "states": {"weights": 1}},
                "actor_infer": {"devices": [0, 4], "states": {"weights": 1}},
            },
            "pipeline": {
                "stages": {
                    "generate": {"role": "actor_infer", "seconds": 1},
                    "train": {"role": "actor_train", "seconds": 1, "after": ["generate"]},
                }
            },
        }
    )
    plan = make_plan(cfg)
    with pytest.raises(ClusterFitError, match="node"):
        execute(plan, cfg, steps=1)
    assert_no_placement_groups_left()


@pytest.mark.slow
def test_ctrl_c_finishes_the_ops_in_flight_and_flushes_the_record(tmp_path: Path) -> None:
    from rlplex.runtime import RunInterrupted

    cfg, plan = colocated_config(), colocated_plan()
    record = tmp_path / "run.jsonl"

    def interrupt(step: int, metrics: dict) -> None:
        if step == 0:
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted):
        execute(plan, cfg, steps=5, record=record, time_scale=0.01, on_step=interrupt)
    on_disk = Timeline.read_jsonl(record)
    assert on_disk.metrics[0]["step_s"] > 0
    assert max(e.step for e in on_disk.events) < 4
    assert_no_placement_groups_left()
