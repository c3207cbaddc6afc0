"""``cluster.dispatch_s``: every run and weight-sync op pays it, in the plan and in its check."""

from __future__ import annotations

import pytest

from rlplex.config import config_from_dict
from rlplex.plan import make_plan
from rlplex.plan.verify import PlanVerificationError, verify_plan


def colocated(dispatch_s: float):
    return config_from_dict(
        {
            "cluster": {
                "nodes": 1,
                "gpus_per_node": 1,
                "gpu_memory_gb": 10,
                "host_gb_per_s": 10,
                "device_copy_gb_per_s": 100,
                "dispatch_s": dispatch_s,
            },
            "roles": {
                "actor_train": {"devices": [0], "states": {"weights": 2, "optimizer": 4}},
                "actor_infer": {"devices": [0], "states": {"weights": 2, "kv_cache": 4}},
            },
            "pipeline": {
                "stages": {
                    "generate": {"role": "actor_infer", "seconds": 1.0},
                    "reward": {"role": "driver", "seconds": 0.25, "after": ["generate"]},
                    "train": {"role": "actor_train", "seconds": 2.0, "after": ["reward"]},
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


def durations(plan) -> dict[str, float]:
    step = plan.ops[0].step
    return {
        op.id.partition("/")[2]: op.end_s - op.start_s
        for op in plan.ops
        if op.step == step and op.kind in ("run", "weight_sync")
    }


def transfers(plan) -> list[float]:
    return sorted(op.end_s - op.start_s for op in plan.ops if op.kind in ("offload", "reload"))


def test_dispatch_s_is_added_to_every_run_and_weight_sync_op() -> None:
    base, slow = make_plan(colocated(0.0)), make_plan(colocated(0.05))
    assert durations(base) == pytest.approx(
        {"generate": 1.0, "reward": 0.25, "train": 2.0, "weight_sync": 2 / 100}
    )
    assert durations(slow) == pytest.approx({k: v + 0.05 for k, v in durations(base).items()})
    # Offloads and reloads are copies on the copy engine: no dispatch overhead.
    assert transfers(slow) == pytest.approx(transfers(base))
    verify_plan(slow, colocated(0.05))


def test_the_verifier_refuses_ops_shorter_than_their_dispatch_overhead() -> None:
    plan = make_plan(colocated(0.0))
    verify_plan(plan, colocated(0.0))
    with pytest.raises(PlanVerificationError, match="duration"):
        verify_plan(plan, colocated(0.05))


def test_the_plan_takes_apart_the_overhead_it_added() -> None:
    """Every planned op's duration splits back into the stage's work and the dispatch
    overhead (``split_op_seconds``, the inverse of ``stage_seconds``, both in plan.costs)."""
    from rlplex.plan.costs import split_op_seconds

    base, slow = make_plan(colocated(0.0)), make_plan(colocated(0.05))
    work = {op.id: op.end_s - op.start_s for op in base.ops}
    for op in slow.ops:
        work_s, overhead_s = split_op_seconds(op.end_s - op.start_s, op.kind, slow.dispatch_s)
        assert work_s == pytest.approx(work[op.id])
        assert overhead_s == (0.05 if op.kind in ("run", "weight_sync") else 0.0)
