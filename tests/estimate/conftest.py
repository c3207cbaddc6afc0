"""A small estimated config, as a dict, for the estimator's tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

BASE: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "workload": {
        "prompts_per_step": 64,
        "samples_per_prompt": 4,
        "prompt_tokens": {"mean": 100, "max": 200},
        "response_tokens": {"mean": 300, "max": 600},
        "micro_batch_size": 2,
    },
    "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "h100"},
    "roles": {
        "actor_train": {"devices": "0-7", "parallel": {"zero": 1}},
        "actor_infer": {"devices": "0-7", "num_gpus_per_worker": 2},
        "reference": {"devices": "0-7", "parallel": {"fsdp": True}},
        "rewards": {"world_size": 2},
    },
    "pipeline": {
        "stages": {
            "generate": {"role": "actor_infer"},
            "reward": {"role": "rewards", "seconds": 3, "after": ["generate"]},
            "ref_logprob": {"role": "reference", "after": ["generate"]},
            "old_logprob": {"role": "actor_train", "after": ["generate"], "needs": ["weights"]},
            "advantage": {"role": "driver", "seconds": 1,
                          "after": ["reward", "ref_logprob", "old_logprob"]},
            "train": {"role": "actor_train", "after": ["advantage"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        }
    },
}  # fmt: skip


@pytest.fixture
def base() -> dict[str, Any]:
    return copy.deepcopy(BASE)
