"""Splitting batches across data-parallel workers and gathering results."""

from __future__ import annotations

import numpy as np
import torch

from rlplex.runtime.data import gather, reshard, shard


def test_lists_split_evenly_and_round_trip() -> None:
    batch = list(range(10))
    parts = [shard(batch, r, 3) for r in range(3)]
    assert [len(p) for p in parts] == [4, 3, 3]
    assert gather(parts) == batch


def test_dict_of_columns_splits_by_row() -> None:
    batch = {"prompt": ["a", "b", "c", "d"], "reward": [1, 2, 3, 4]}
    parts = [shard(batch, r, 2) for r in range(2)]
    assert parts[1] == {"prompt": ["c", "d"], "reward": [3, 4]}
    assert gather(parts) == batch


def test_arrays_and_tensors_split_on_dim0() -> None:
    t = torch.arange(6).reshape(6, 1)
    assert torch.equal(gather([shard(t, r, 4) for r in range(4)]), t)
    a = np.arange(5)
    assert np.array_equal(gather([shard(a, r, 2) for r in range(2)]), a)


def test_scalars_are_broadcast_and_none_gathers_to_none() -> None:
    assert shard(0.5, 1, 4) == 0.5
    assert gather([None, None]) is None
    assert gather([1, 2]) == [1, 2]


def test_reshard_between_world_sizes() -> None:
    parts = [[0, 1, 2], [3, 4, 5]]
    assert [reshard(parts, r, 3) for r in range(3)] == [[0, 1], [2, 3], [4, 5]]


def test_results_shared_on_the_device_come_back_whole_and_equal() -> None:
    """The colocated path (CUDA IPC on a GPU), run here with CPU tensors in shared memory."""
    import os

    import torch

    from rlplex.runtime.data import OnDevice, release_on_device, share_on_device, take_on_device

    batch = {
        "ids": torch.arange(12).view(3, 4),
        "logp": torch.randn(3, 4, dtype=torch.float64),
        "mask": torch.ones(3, 4, dtype=torch.bool),
        "parts": [torch.zeros(2), ("keep", 7)],
        "name": "step",
    }
    sent, keep = share_on_device(batch, device_types=("cpu",))
    assert isinstance(sent, OnDevice) and keep is not None
    got = take_on_device(sent)
    assert got["name"] == "step" and got["parts"][1] == ("keep", 7)
    for key in ("ids", "logp", "mask"):
        assert got[key].dtype == batch[key].dtype and torch.equal(got[key], batch[key])
    assert torch.equal(got["parts"][0], batch["parts"][0])
    # The consumer's copy is its own: the producer may free the buffer at once.
    release_on_device(keep)
    assert not os.path.exists(sent.shared.path)
    assert torch.equal(got["ids"], batch["ids"])


def test_values_without_device_tensors_are_sent_as_they_are() -> None:
    import torch

    from rlplex.runtime.data import share_on_device, take_on_device

    value = {"ids": torch.arange(3), "n": 3}
    assert share_on_device(value) == (value, None)  # CPU tensors: not on a CUDA device
    assert take_on_device(value) is value
