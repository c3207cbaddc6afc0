"""Memory over time of a plan: GPU groups stacked by state, hosts per node, peaks and their ops."""

from __future__ import annotations

import pytest
from test_host_memory import PEAK, colocated_7b

from rlplex.config import config_from_dict
from rlplex.plan import make_plan
from rlplex.plan.memory_lanes import TRANSIENT, memory_lanes


def test_gpu_and_host_lanes_of_the_colocated_7b_plan():
    """GPU peak while train runs: actor 14 + 10.5 + 14, reference 14, transient 20 = 72.5 GB.

    (The rollout's weights are dead after generate and dropped, its KV cache is
    scratch: neither is resident during train.) Host peak: 308 GB (see
    test_host_memory).
    """
    config = config_from_dict(colocated_7b(1024))
    plan = make_plan(config)
    gpu, host = memory_lanes(plan, config)
    assert gpu.name == "GPUs 0-7" and gpu.kind == "gpu" and gpu.capacity_gb == 80
    assert gpu.peak_gb == pytest.approx(14 + 10.5 + 14 + 14 + 20)
    assert gpu.peak_op == "s0/train"
    i = gpu.times.index(plan.op("s0/train").start_s)
    assert gpu.stacks[TRANSIENT][i] == 20
    assert gpu.stacks["actor_infer.weights"][i] == 0
    assert max(gpu.totals) == pytest.approx(gpu.peak_gb)
    assert all(t <= 80 + 1e-6 for t in gpu.totals)
    assert host.name == "host of node 0" and host.kind == "host" and host.capacity_gb == 1024
    assert host.peak_gb == pytest.approx(PEAK)
    assert gpu.times[-1] == host.times[-1] == plan.makespan_s


def test_one_lane_per_group_of_gpus_holding_the_same_roles():
    config = config_from_dict(
        {
            **colocated_7b(1024),
            "roles": {
                "actor_train": {
                    "devices": "4-7",
                    "states": {"weights": 14, "optimizer": 21, "grads": 14},
                },
                "actor_infer": {"devices": "0-3", "states": {"weights": 14, "kv_cache": 40}},
                "reference": {"devices": "4-7", "states": {"weights": 14}},
            },
        }
    )
    lanes = memory_lanes(make_plan(config), config)
    assert [lane.name for lane in lanes] == ["GPUs 0-3", "GPUs 4-7", "host of node 0"]
