"""Hand-written plans and small configs for executor tests (no planner needed)."""

from __future__ import annotations

from typing import Any

from rlplex.config import Config, config_from_dict
from rlplex.plan.model import Op, Plan


def op(id: str, kind: str, start: float, end: float, deps: tuple[str, ...] = (), **kw: Any) -> Op:
    step = int(id.split("/", 1)[0][1:])
    if kind in ("run", "weight_sync") and "stage" not in kw:
        kw["stage"] = id.split("/", 1)[1]
    return Op(id=id, kind=kind, step=step, start_s=start, end_s=end, deps=deps, **kw)


def colocated_config(gpus: int = 2) -> Config:
    """Trainer and rollout on the same GPUs, a CPU reward role, a driver stage."""
    return config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": gpus, "gpu_memory_gb": 40},
            "roles": {
                "actor_train": {
                    "devices": f"0-{gpus - 1}",
                    "states": {"weights": 4, "optimizer": 8},
                },
                "actor_infer": {
                    "devices": f"0-{gpus - 1}",
                    "states": {"weights": 4, "kv_cache": 20},
                },
                "rewards": {"world_size": 1},
            },
            "pipeline": {
                "stages": {
                    "generate": {"role": "actor_infer", "seconds": 2},
                    "reward": {"role": "rewards", "seconds": 1, "after": ["generate"]},
                    "advantage": {"role": "driver", "seconds": 0.5, "after": ["reward"]},
                    "train": {"role": "actor_train", "seconds": 2, "after": ["advantage"]},
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


def colocated_plan(devices: tuple[int, ...] = (0, 1)) -> Plan:
    """A tight colocated step: the trainer's optimizer leaves while rollout runs."""
    d = devices
    ops = [
        op(
            "s0/offload/actor_train/optimizer",
            "offload",
            0.0,
            0.3,
            (),
            devices=d,
            role="actor_train",
            state="optimizer",
            gb=8.0,
        ),
        op(
            "s0/reload/actor_infer/kv_cache",
            "reload",
            0.3,
            0.3,
            ("s0/offload/actor_train/optimizer",),
            devices=d,
            role="actor_infer",
            state="kv_cache",
        ),
        op(
            "s0/generate",
            "run",
            0.3,
            2.3,
            ("s0/reload/actor_infer/kv_cache",),
            devices=d,
            role="actor_infer",
        ),
        op(
            "s0/offload/actor_infer/kv_cache",
            "offload",
            2.3,
            2.3,
            ("s0/generate",),
            devices=d,
            role="actor_infer",
            state="kv_cache",
        ),
        op("s0/reward", "run", 2.3, 3.3, ("s0/generate",), role="rewards"),
        op(
            "s0/reload/actor_train/optimizer",
            "reload",
            2.3,
            2.6,
            ("s0/offload/actor_infer/kv_cache",),
            devices=d,
            role="actor_train",
            state="optimizer",
            gb=8.0,
        ),
        op("s0/advantage", "run", 3.3, 3.8, ("s0/reward",), role="driver"),
        op(
            "s0/train",
            "run",
            3.8,
            5.8,
            ("s0/advantage", "s0/reload/actor_train/optimizer"),
            devices=d,
            role="actor_train",
        ),
        op(
            "s0/weight_sync",
            "weight_sync",
            5.8,
            6.0,
            ("s0/train",),
            devices=d,
            role="actor_infer",
            from_role="actor_train",
            gb=4.0,
        ),
    ]
    return Plan(
        mode="sync",
        makespan_s=6.0,
        period_s=6.0,
        lower_bound_s=5.5,
        capacity_gb=40.0,
        placement={"actor_train": list(d), "actor_infer": list(d)},
        states={
            "actor_train": {"weights": 4, "optimizer": 8},
            "actor_infer": {"weights": 4, "kv_cache": 20},
        },
        initial_residency={"actor_train": ["weights", "optimizer"], "actor_infer": ["weights"]},
        ops=ops,
    )
