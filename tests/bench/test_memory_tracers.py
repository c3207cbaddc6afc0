"""bench/toy_train_tensors.py and bench/gpu_peak_phases.py: their counting, on made-up input."""

from __future__ import annotations

import torch
from bench_loader import load_bench


def test_live_storages_count_new_memory_only() -> None:
    """Views and in-place results share an input's storage: not new. Freed storage is gone."""
    bench = load_bench("toy_train_tensors")
    base = torch.ones(1000)  # made before the mode: never counted
    mode = bench.LiveStorages()
    with mode:
        view = base.view(10, 100).t()  # a view of old memory
        base.mul_(2)  # in place
        first = base * 3  # 4,000 new bytes
        second = first + 1  # 4,000 more: 8,000 at once
        del first
        third = second * 2  # 8,000 again, not 12,000
        del second, third
    assert view.shape == (100, 10)
    assert mode.peak == 8000
    assert mode.now == 0


def test_the_allocator_trace_replay_finds_the_peak_and_its_blocks() -> None:
    bench = load_bench("gpu_peak_phases")
    frame = {"filename": "/site/transformers/models/qwen2/modeling_qwen2.py", "line": 7,
             "name": "forward"}  # fmt: skip
    torch_frame = {"filename": "/site/torch/nn/functional.py", "line": 1, "name": "linear"}
    trace = [
        {"action": "alloc", "addr": 1, "size": 100, "frames": [torch_frame, frame]},
        {"action": "alloc", "addr": 2, "size": 50, "frames": []},
        {"action": "free_requested", "addr": 1, "size": 100},
        {"action": "free_completed", "addr": 1, "size": 100},
        {"action": "alloc", "addr": 3, "size": 30, "frames": [frame]},
        {"action": "segment_alloc", "addr": 9, "size": 4096},
    ]
    peak, blocks = bench.live_at_peak({"device_traces": [trace]})
    assert peak == 150
    assert sorted(b["addr"] for b in blocks) == [1, 2]
    # The innermost frame outside torch names where a block came from.
    assert bench.where(blocks[0] if blocks[0]["addr"] == 1 else blocks[1]).startswith(
        "modeling_qwen2.py:7 forward"
    )
    assert bench.where({"frames": []}) == "?"
