"""The rules a role's devices must meet: workers tile them, the parallel layout divides them."""

from __future__ import annotations

import pytest

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.placement import (
    check_worker_layout,
    parallel_layout_problem,
    worker_layout_problem,
)

NODES_OF_8 = Cluster(nodes=4, gpus_per_node=8)


def test_a_worker_within_a_node_stays_in_it() -> None:
    assert worker_layout_problem(tuple(range(8)), 4, NODES_OF_8) is None
    problem = worker_layout_problem(tuple(range(2, 10)), 4, NODES_OF_8)
    assert problem is not None and "worker 1 would span nodes [0, 1]" in problem


def test_a_worker_wider_than_a_node_fills_whole_nodes() -> None:
    assert worker_layout_problem(tuple(range(8, 24)), 16, NODES_OF_8) is None
    problem = worker_layout_problem(tuple(range(4, 20)), 16, NODES_OF_8)
    assert problem is not None and "must fill whole consecutive nodes" in problem
    problem = worker_layout_problem(tuple(range(12)), 12, NODES_OF_8)  # not whole nodes
    assert problem is not None and "must fill whole consecutive nodes" in problem


def test_the_worker_count_divides_the_devices() -> None:
    assert worker_layout_problem(tuple(range(6)), 4, NODES_OF_8) == (
        "does not divide the role's 6 devices"
    )
    with pytest.raises(ConfigError) as err:
        check_worker_layout("infer", tuple(range(6)), 4, NODES_OF_8, "c.yaml")
    assert err.value.field == "roles.infer.num_gpus_per_worker" and err.value.value == 4


def test_the_parallel_layout_divides_the_devices() -> None:
    assert parallel_layout_problem(16, 2, 2, 4) is None  # 8 devices per stage, ep 4
    assert parallel_layout_problem(12, 4, 2, 1) == (
        "parallel",
        "tp x pp = 8 does not divide the role's 12 devices",
    )
    field, reason = parallel_layout_problem(96, 1, 16, 16) or ("", "")
    assert field == "parallel.ep"
    assert reason == (
        "expert-parallel size 16 does not divide the role's 6 devices per pipeline stage"
        " (devices / pp)"
    )


def _naive_fits(devices: tuple[int, ...], per: int, gpn: int) -> bool:
    for start in range(0, len(devices), per):
        worker = devices[start : start + per]
        nodes = sorted({d // gpn for d in worker})
        if per <= gpn and len(nodes) > 1:
            return False
        if per > gpn and (
            per % gpn or set(worker) != set(range(nodes[0] * gpn, (nodes[-1] + 1) * gpn))
        ):
            return False
    return True


@pytest.mark.parametrize("gpn", [4, 8])
def test_consecutive_blocks_follow_the_rule_worker_by_worker(gpn: int) -> None:
    """The shortcut for consecutive ranks (the placement search's blocks) agrees with the
    rule applied worker by worker, on every start, worker size and length tried."""
    cluster = Cluster(nodes=8, gpus_per_node=gpn)
    for per in (1, 2, 3, 4, 6, 8, 12, 16):
        for first in range(0, 2 * gpn + 3):
            for workers in (1, 2, 3):
                block = tuple(range(first, first + per * workers))
                if block[-1] >= cluster.num_gpus:
                    continue
                fits = worker_layout_problem(block, per, cluster) is None
                assert fits == _naive_fits(block, per, gpn), (per, first, workers)


@pytest.mark.parametrize("gpn", [4, 8])
def test_any_device_order_follows_the_rule_worker_by_worker(gpn: int) -> None:
    """Unsorted and gapped device lists (what a user may write) take the worker-by-worker
    path: the lowest and highest rank of a worker decide, as every rank would."""
    import random

    rng = random.Random(gpn)
    cluster = Cluster(nodes=8, gpus_per_node=gpn)
    for _ in range(2000):
        per = rng.choice([1, 2, 3, 4, 6, 8, 12, 16])
        workers = rng.choice([1, 2, 3])
        if per * workers > cluster.num_gpus:
            continue
        block = tuple(rng.sample(range(cluster.num_gpus), per * workers))
        if rng.random() < 0.5:  # whole nodes, shuffled within each worker
            first = rng.randrange(0, 8 - (per * workers + gpn - 1) // gpn + 1) * gpn
            block = tuple(range(first, first + per * workers))
            block = tuple(d for w in range(workers)
                          for d in rng.sample(block[w * per : (w + 1) * per], per))  # fmt: skip
        fits = worker_layout_problem(block, per, cluster) is None
        assert fits == _naive_fits(block, per, gpn), (per, block)
