"""Colocated weight sync: each destination worker is fed by the source worker holding its GPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlplex.runtime.errors import ExecutionError
from rlplex.runtime.executor import ipc_pairs


def group(role: str, workers: list[tuple[int, ...]]) -> SimpleNamespace:
    return SimpleNamespace(role=role, infos=[SimpleNamespace(devices=d) for d in workers])


def test_each_destination_worker_pairs_with_the_source_on_its_first_gpu() -> None:
    train = group("actor_train", [(0,), (1,), (2,), (3,)])
    infer = group("actor_infer", [(0, 1), (2, 3)])  # tensor parallel 2
    assert ipc_pairs(train, infer) == {0: (0,), 2: (1,)}
    # Train worker 1's GPU is no inference worker's first: only by any shared GPU (CPU).
    with pytest.raises(ExecutionError, match=r"GPU 1 of actor_train\[1\]"):
        ipc_pairs(infer, train)
    assert ipc_pairs(infer, train, exact=False) == {0: (0, 1), 1: (2, 3)}


def test_a_destination_gpu_without_a_source_worker_is_refused() -> None:
    with pytest.raises(ExecutionError, match=r"GPU 5 of actor_infer\[1\]"):
        ipc_pairs(group("actor_train", [(4,)]), group("actor_infer", [(4,), (5,)]))


@pytest.mark.parametrize(
    ("requested", "src", "dst", "alike", "method"),
    [
        ("auto", {0, 1}, {0, 1}, True, "ipc"),
        ("auto", {0, 1}, {0, 1}, False, "store"),  # split differently into workers
        ("auto", {0, 1}, {2, 3}, True, "broadcast"),
        ("auto", {0, 1}, {1, 2}, True, "store"),  # NCCL: no two ranks on one GPU
        ("broadcast", {0}, {0}, True, "broadcast"),
        ("store", {0}, {1}, True, "store"),
    ],
)
def test_auto_picks_the_path_the_cost_model_assumes(requested, src, dst, alike, method) -> None:
    from rlplex.runtime.executor import choose_sync_method

    assert choose_sync_method(requested, src, dst, split_alike=alike) == method
