"""Property tests: random models, GPUs, workloads and parallel layouts always estimate to
finite, non-negative terms (or are refused with a ConfigError naming a field)."""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlplex.config import config_from_dict
from rlplex.errors import ConfigError
from rlplex.estimate.estimator import estimate_config

MODELS = ["qwen2.5-0.5b", "llama-3.1-8b", "qwen2.5-7b", "qwen3-30b-a3b", "qwen3-32b"]
GPUS = ["h100", "h20", "a100", "gb200", "b200"]


def _lengths(draw: Any, top: int) -> dict[str, Any]:
    longest = draw(st.integers(min_value=1, max_value=top))
    out: dict[str, Any] = {"mean": draw(st.floats(min_value=0.5, max_value=float(longest))),
                           "max": longest}  # fmt: skip
    if draw(st.booleans()):
        out["clip_ratio"] = draw(st.floats(min_value=0.0, max_value=1.0))
    return out


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    gpus_per_node = draw(st.sampled_from([4, 8]))
    nodes = draw(st.integers(min_value=1, max_value=4))
    total = nodes * gpus_per_node
    train_devices = draw(st.sampled_from([d for d in (1, 2, 4, 8, 16, 32) if d <= total]))
    parallel: dict[str, Any] = {
        "tp": draw(st.sampled_from([t for t in (1, 2, 4) if train_devices % t == 0])),
        "recompute": draw(st.booleans()),
        "sp": draw(st.sampled_from([1, 2])),
        "offload_params": draw(st.booleans()),
        "kernels": draw(st.sampled_from([None, "fused", "eager"])),
    }
    if draw(st.booleans()):
        parallel["fsdp"] = True
    else:
        parallel["zero"] = draw(st.sampled_from([0, 1, 2, 3]))
    parallel = {k: v for k, v in parallel.items() if v is not None}
    controller = {
        "padding": draw(st.sampled_from(["max", "longest", "none"])),
        "bytes_per_token": draw(st.floats(min_value=0, max_value=200)),
        "returned_bytes_per_token": draw(st.floats(min_value=0, max_value=20)),
        "per_rank": draw(st.booleans()),
    }
    workload = {
        "prompts_per_step": draw(st.integers(min_value=1, max_value=512)),
        "samples_per_prompt": draw(st.integers(min_value=1, max_value=16)),
        "prompt_tokens": _lengths(draw, 4096),
        "response_tokens": _lengths(draw, 32768),
        "micro_batch_size": draw(st.integers(min_value=1, max_value=8)),
        "mini_batches": draw(st.integers(min_value=1, max_value=8)),
        "packing": draw(st.booleans()),
        "controller": controller,
    }
    infer_gpus = draw(st.sampled_from([g for g in (1, 2, 4, 8) if g <= total]))
    return {
        "model": draw(st.sampled_from(MODELS)),
        "workload": workload,
        "cluster": {
            "nodes": nodes,
            "gpus_per_node": gpus_per_node,
            "gpu": draw(st.sampled_from(GPUS)),
        },
        "roles": {
            "actor_train": {"devices": f"0-{train_devices - 1}", "parallel": parallel},
            "actor_infer": {
                "devices": f"0-{total - 1}",
                "num_gpus_per_worker": infer_gpus,
                "rollout": {
                    "max_num_seqs": draw(st.integers(min_value=1, max_value=2048)),
                    "cuda_graphs": draw(st.booleans()),
                    "sleep_level": draw(st.sampled_from([1, 2])),
                },
            },
            "rewards": {"world_size": 2},
        },
        "pipeline": {
            "stages": {
                "generate": {"role": "actor_infer"},
                "reward": {"role": "rewards", "after": ["generate"]},
                "old_logprob": {
                    "role": "actor_train",
                    "after": ["generate"],
                    "needs": ["weights"],
                },
                "train": {"role": "actor_train", "after": ["reward", "old_logprob"]},
                "weight_sync": {
                    "kind": "weight_sync",
                    "from": "actor_train",
                    "to": "actor_infer",
                    "after": ["train"],
                },
            }
        },
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_every_estimate_is_finite_or_refused_by_field(data: dict[str, Any]) -> None:
    try:
        cfg = config_from_dict(copy.deepcopy(data), file="p.yaml")
    except ConfigError as err:
        assert err.field, err  # refused: it names the field
        return
    est = estimate_config(cfg)
    for name, stage in est.stages.items():
        assert math.isfinite(stage.seconds) and stage.seconds >= 0, (name, stage)
        for term, seconds in stage.terms.items():
            assert math.isfinite(seconds) and seconds >= 0, (name, term, seconds)
        assabs = abs(stage.seconds - sum(stage.terms.values()))
        assert assabs <= 1e-9 * max(1.0, stage.seconds), (name, stage.terms, stage.seconds)
    for role in est.roles.values():
        for gb in role.states.values():
            assert math.isfinite(gb) and gb >= 0
    train = est.stages["train"].detail
    c = data["workload"]["controller"]
    if c["padding"] == "none" or c["bytes_per_token"] + c["returned_bytes_per_token"] == 0:
        assert train["controller_s"] == 0.0
    else:
        longest = (
            data["workload"]["prompt_tokens"]["max"] + data["workload"]["response_tokens"]["max"]
        )
        assert 0 < train["controller_padded_tokens"] <= longest + 1e-9
