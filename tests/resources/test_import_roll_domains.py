"""ROLL's reward domains read as its RLVR pipeline draws them: each domain of
``actor_train.data_args.domain_interleave_probs`` is a reward cluster, each step takes
``int(p x rollout_batch_size)`` prompts of it (the last domain what the others leave), and
the cluster scores only those: its stage's ``share`` (roll/pipeline/rlvr/rlvr_pipeline.py).
Teachers with ``tag_included`` take their domains' share (roll/utils/functionals.py)."""
# ruff: noqa: E501 -- exact error messages read best on one line

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlplex.config import load_config
from rlplex.errors import ConfigError

DOCS_PROBS = {
    "math_rule": 0.4,
    "code_sandbox": 0.3,
    "llm_judge": 0.1,
    "crossthinkqa": 0.1,
    "ifeval": 0.1,
}
"""examples/docs_examples/example_grpo.yaml's domains."""

RLVR: dict[str, Any] = {
    "num_gpus_per_node": 8,
    "rollout_batch_size": 100,
    "num_return_sequences_in_group": 8,
    "actor_train": {
        "strategy_args": {"strategy_name": "megatron_train",
                          "strategy_config": {"use_distributed_optimizer": True}},
        "data_args": {"domain_interleave_probs": DOCS_PROBS},
        "device_mapping": "list(range(0,16))",
    },
    "actor_infer": {
        "strategy_args": {"strategy_name": "vllm", "strategy_config": {"tensor_parallel_size": 1}},
        "device_mapping": "list(range(0,12))",
    },
    "reference": {"strategy_args": {"strategy_name": "megatron_infer"}, "device_mapping": "list(range(0,16))"},
    # In example_grpo.yaml's order, which is not the domains'.
    "rewards": {
        "crossthinkqa": {"tag_included": ["crossthinkqa"], "world_size": 8},
        "ifeval": {"tag_included": ["ifeval"], "world_size": 8},
        "math_rule": {"tag_included": ["deepmath_103k", "aime"], "world_size": 8},
        "code_sandbox": {"tag_included": ["KodCode"], "world_size": 8},
        "llm_judge": {
            "tag_included": ["RLVR"],
            "strategy_args": {"strategy_name": "hf_infer"},
            "device_mapping": "list(range(12,16))",
        },
    },
}  # fmt: skip
"""example_grpo.yaml's layout, with 100 prompts a step so that every quota is whole."""


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "rlvr.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _shares(path: Path) -> dict[str, float]:
    return {
        s.name: s.share for s in load_config(path).pipeline.stages if s.name.startswith("reward")
    }


def _with_probs(probs: Any, **top: Any) -> dict[str, Any]:
    """The RLVR file with ``probs`` as its domains and ``top`` over its top-level keys."""
    data = copy.deepcopy(RLVR)
    data["actor_train"]["data_args"]["domain_interleave_probs"] = probs
    return {**data, **top}


def test_each_reward_cluster_scores_its_domains_share(tmp_path: Path) -> None:
    assert _shares(_write(tmp_path, RLVR)) == {
        "reward_crossthinkqa": 0.1,
        "reward_ifeval": 0.1,
        "reward_math_rule": 0.4,
        "reward_code_sandbox": 0.3,
        "reward_llm_judge": 0.1,
    }


def test_quotas_are_whole_prompts_and_the_last_domain_takes_the_rest(tmp_path: Path) -> None:
    """example_grpo.yaml's 64 prompts: int(0.4 x 64) = 25 math, 19 code, 6 judge, 6
    crossthinkqa, and ifeval, last, the 8 left; probabilities summing to 0.9 (qwen3-235B's
    file) leave the last domain 0.2 more than its own value."""
    assert _shares(_write(tmp_path, _with_probs(DOCS_PROBS, rollout_batch_size=64))) == {
        "reward_crossthinkqa": 6 / 64,
        "reward_ifeval": 8 / 64,
        "reward_math_rule": 25 / 64,
        "reward_code_sandbox": 19 / 64,
        "reward_llm_judge": 6 / 64,
    }
    probs = {"math_rule": 0.4, "code_sandbox": 0.3, "crossthinkqa": 0.1, "ifeval": 0.1}
    shares = _shares(_write(tmp_path, _with_probs(probs)))
    assert shares["reward_ifeval"] == 0.2 and shares["reward_math_rule"] == 0.4


def test_a_reward_cluster_without_a_domain_has_no_stage_but_keeps_its_gpus(tmp_path: Path) -> None:
    """ROLL starts every reward cluster (validation scores with all of them) but a training
    step sends samples only to its domains' clusters."""
    probs = {"math_rule": 0.5, "code_sandbox": 0.3, "crossthinkqa": 0.1, "ifeval": 0.1}
    cfg = load_config(_write(tmp_path, _with_probs(probs)))
    names = [s.name for s in cfg.pipeline.stages]
    assert "reward_llm_judge" not in names
    assert cfg.roles["llm_judge"].devices == (12, 13, 14, 15)
    assert set(cfg.pipeline.stage("advantage").after) == {
        "reward_crossthinkqa", "reward_ifeval", "reward_math_rule", "reward_code_sandbox",
        "ref_logprob", "old_logprob",
    }  # fmt: skip


def test_a_single_domain_scores_the_whole_step(tmp_path: Path) -> None:
    data = _with_probs({"math_rule": 0.5})
    data["rewards"] = {"math_rule": {"world_size": 8}}
    stage = load_config(_write(tmp_path, data)).pipeline.stage("reward")
    assert stage.share == 1.0


def test_the_estimate_prices_each_cluster_over_its_share(tmp_path: Path) -> None:
    from rlplex.estimate.estimator import estimate_config

    data = {**RLVR, "pretrain": "Qwen/Qwen2.5-7B", "prompt_length": 1024, "response_length": 2048}
    cfg = load_config(_write(tmp_path, data), overrides=["cluster.gpu=h100"])
    est = estimate_config(cfg).stages
    # 100 prompts x 8 samples, 0.004 s each, 0.4 of them.
    assert est["reward_math_rule"].seconds == pytest.approx(0.4 * 800 * 0.004)
    assert est["reward_ifeval"].seconds == pytest.approx(0.1 * 800 * 0.004)


def test_routed_teachers_take_their_domains_share(tmp_path: Path) -> None:
    """ROLL's multi-teacher OPD example: the math teacher includes the math reward's tag, the
    code teacher the code reward's; 16 prompts give math int(0.6 x 16) = 9, code 7. A
    teacher of no domain computes nothing (no stage); once any teacher has tags, one without
    takes every domain."""
    data: dict[str, Any] = {
        "num_gpus_per_node": 8,
        "rollout_batch_size": 16,
        "student_train": {
            "strategy_args": {"strategy_name": "megatron_train"},
            "data_args": {"domain_interleave_probs": {"math_rule": 0.6, "code_rule": 0.4}},
            "device_mapping": "list(range(0,8))",
        },
        "student_infer": {"strategy_args": {"strategy_name": "vllm"}, "device_mapping": "list(range(0,8))"},
        "teacher": {
            "math_teacher": {"tag_included": ["math_dapo"], "device_mapping": "list(range(8,12))"},
            "code_teacher": {"tag_included": ["KodCode"], "device_mapping": "list(range(12,16))"},
            "image_teacher": {"tag_included": ["geo3k"], "device_mapping": "list(range(16,20))"},
            "any_teacher": {"device_mapping": "list(range(20,24))"},
        },
        "rewards": {
            "math_rule": {"tag_included": ["math_dapo"], "world_size": 4},
            "code_rule": {"tag_included": ["KodCode"], "world_size": 4},
        },
    }  # fmt: skip
    cfg = load_config(_write(tmp_path, data))
    stages = {s.name: s for s in cfg.pipeline.stages}
    assert stages["ref_logprob_math_teacher"].share == 9 / 16
    assert stages["ref_logprob_code_teacher"].share == 7 / 16
    assert stages["ref_logprob_any_teacher"].share == 1.0
    assert "ref_logprob_image_teacher" not in stages and "image_teacher" in cfg.roles
    assert stages["reward_math_rule"].share == 9 / 16
    # Without tags on any teacher there is no routing: each takes every sample.
    for body in data["teacher"].values():
        body.pop("tag_included", None)
    cfg = load_config(_write(tmp_path, data))
    assert {s.share for s in cfg.pipeline.stages if s.name.startswith("ref_logprob")} == {1.0}


PROBS = "actor_train.data_args.domain_interleave_probs"


@pytest.mark.parametrize(
    ("probs", "message"),
    [
        (
            {"math_rule": 0.5, "geometry": 0.5},
            f"{PROBS}.geometry: names no reward cluster (rewards: crossthinkqa, ifeval, math_rule, code_sandbox, llm_judge); ROLL's RLVR pipeline scores each domain on the reward cluster of its name (got 0.5)",
        ),
        (
            {"math_rule": 0.005, "ifeval": 0.5},
            f"{PROBS}.math_rule: leaves the domain 0 of the step's 100 prompts (ROLL draws int(p x rollout_batch_size) from each domain, the last one what the others leave), and ROLL fails on a domain without prompts (got 0.005)",
        ),
        (
            {"math_rule": 0.7, "code_sandbox": 0.4, "ifeval": 0.1},
            f"{PROBS}.ifeval: leaves the domain -10 of the step's 100 prompts (ROLL draws int(p x rollout_batch_size) from each domain, the last one what the others leave), and ROLL fails on a domain without prompts (got 0.1)",
        ),
        ({"math_rule": "0.4", "ifeval": 0.6}, f"{PROBS}.math_rule: must be a number (got '0.4')"),
        # YAML's .inf: int(inf x rollout_batch_size) raised OverflowError, a traceback.
        (
            {"math_rule": float("inf"), "ifeval": 0.5},
            f"{PROBS}.math_rule: must be a finite number (got inf)",
        ),
        (
            {},
            f"{PROBS}: must map each domain (a reward cluster of 'rewards') to its share of rollout_batch_size (got {{}})",
        ),
        (
            ["math_rule"],
            f"{PROBS}: must map each domain (a reward cluster of 'rewards') to its share of rollout_batch_size (got ['math_rule'])",
        ),
    ],
)
def test_refused_as_roll_fails(tmp_path: Path, probs: Any, message: str) -> None:
    path = _write(tmp_path, _with_probs(probs))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: {message}"
