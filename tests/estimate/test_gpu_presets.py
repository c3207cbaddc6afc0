"""GPU presets: the H800 is an H100 with its NVLink cut, and an engine sized to fill its GPU
exactly fits it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate.specs import gpu_spec


def test_the_h800_is_an_h100_with_400_gb_s_nvlink() -> None:
    """Same BF16 peak, memory and bandwidth; NVLink 400 GB/s both ways (200 each way, 160 at
    the link efficiency, the figure the DeepSeek-V3 report gives for its H800s)."""
    h100, h800 = gpu_spec("h100"), gpu_spec("h800")
    same = ("peak_tflops", "memory_gb", "memory_gb_per_s", "host_gb_per_s", "inter_node_gb_per_s")
    assert all(getattr(h100, k) == getattr(h800, k) for k in same)
    assert (h100.intra_node_gb_per_s, h800.intra_node_gb_per_s) == (450, 200)
    assert gpu_spec("H800-SXM").key == "h800"


def test_device_copies_on_an_h800_run_at_its_nvlink(base: dict[str, Any]) -> None:
    config = copy.deepcopy(base)
    config["cluster"]["gpu"] = "h800"
    loaded = config_from_dict(config, file="t.yaml")
    assert loaded.cluster.device_copy_gb_per_s == pytest.approx(200 * 0.8)


def test_an_engine_filling_its_gpu_fits(base: dict[str, Any]) -> None:
    """gpu_memory_utilization 1: the KV cache takes what the weights and a prefill chunk leave.
    Bug: the filled states, rounded to the MB, summed to 0.1 MB over the GPU and the config
    was refused as not fitting."""
    config = copy.deepcopy(base)
    config["model"] = "qwen2.5-7b"
    config["workload"].update(
        {"prompts_per_step": 512, "samples_per_prompt": 16,
         "response_tokens": {"mean": 8000, "max": 16384}}
    )  # fmt: skip
    config["roles"]["actor_infer"] = {
        "devices": "0-3", "num_gpus_per_worker": 4,
        "rollout": {"gpu_memory_utilization": 1.0, "vllm_v0": True},
    }  # fmt: skip
    config["workload"]["micro_batch_size"] = 1
    for role in ("actor_train", "reference"):
        config["roles"][role]["devices"] = "4-7"
        config["roles"][role]["parallel"] = {"fsdp": True, "recompute": True, "sp": 4}
    loaded = config_from_dict(config, file="t.yaml")
    states = loaded.roles["actor_infer"].states
    generate = next(s for s in loaded.pipeline.stages if s.name == "generate")
    total = sum(states.values()) + generate.memory_gb
    assert total <= loaded.cluster.gpu_memory_gb
    assert total == pytest.approx(loaded.cluster.gpu_memory_gb, abs=0.005)
