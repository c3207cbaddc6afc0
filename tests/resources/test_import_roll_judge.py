"""ROLL's LLM judge read as its ``LLMJudgeRewardWorker`` runs it
(roll/pipeline/rlvr/rewards/llm_judge_reward_worker.py): each sample judged in a generate
call of its own on the judge's engine (``judge_model_type: inference``), or asked of an API
(``api``): a stage with a ``judge``, on an engine that runs one sequence at a time."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.estimate.estimator import estimate_config

JUDGE: dict[str, Any] = {
    "worker_cls": "roll.pipeline.rlvr.rewards.llm_judge_reward_worker.LLMJudgeRewardWorker",
    "judge_prompt": "Qwen2.5-7B-Instruct-RLVR-prompt",
    "judge_model_type": "inference",
    "tag_included": ["RLVR"],
    "generating_args": {"max_new_tokens": 100},
    "strategy_args": {"strategy_name": "hf_infer", "strategy_config": None},
    "device_mapping": "list(range(12,16))",
}
"""example_grpo.yaml's judge (Hugging Face's generate on 4 GPUs)."""

RLVR: dict[str, Any] = {
    "pretrain": "Qwen/Qwen2.5-7B",
    "num_gpus_per_node": 8,
    "rollout_batch_size": 64,
    "num_return_sequences_in_group": 8,
    "prompt_length": 1024,
    "response_length": 2048,
    "actor_train": {
        "data_args": {"domain_interleave_probs": {"math_rule": 0.75, "llm_judge": 0.25}},
        "strategy_args": {
            "strategy_name": "megatron_train",
            "strategy_config": {"use_distributed_optimizer": True},
        },
        "device_mapping": "list(range(0,12))",
    },
    "actor_infer": {
        "strategy_args": {"strategy_name": "vllm", "strategy_config": {}},
        "device_mapping": "list(range(0,12))",
    },
    "reference": {
        "strategy_args": {"strategy_name": "megatron_infer"},
        "device_mapping": "list(range(0,12))",
    },
    "rewards": {
        "math_rule": {"tag_included": ["deepmath_103k"], "world_size": 8},
        "llm_judge": JUDGE,
    },
}


def _load(tmp_path: Path, top: dict[str, Any] | None = None, **judge: Any) -> Any:
    data = copy.deepcopy(RLVR)
    data["rewards"]["llm_judge"] = {**JUDGE, **judge}
    data.update(top or {})
    path = tmp_path / "rlvr.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(path, overrides=["cluster.gpu=h100"])


def _stage(config: Any, name: str = "reward_llm_judge") -> Any:
    return next(s for s in config.pipeline.stages if s.name == name)


def test_an_hf_judge_runs_one_eager_sample_at_a_time(tmp_path: Path) -> None:
    """The RLVR prompt: 240 template tokens (bench/roll_judge_prompt_tokens.py), a YES or NO
    answer (2 tokens); Hugging Face's generate has no CUDA graphs; a quarter of the step's
    samples (its domain)."""
    config = _load(tmp_path)
    stage = _stage(config)
    assert (stage.judge.template_tokens, stage.judge.response_tokens) == (240, 2)
    assert stage.share == 0.25
    rollout = config.roles["llm_judge"].rollout
    assert (rollout.max_num_seqs, rollout.cuda_graphs) == (1, False)
    est = estimate_config(config).stages["reward_llm_judge"]
    assert est.kind == "judge"
    assert est.detail["samples_per_replica"] == 32  # 128 of the 512 samples over 4 GPUs
    # The importer's lengths: half the maxima on average.
    assert est.detail["judge_prompt_tokens"] == pytest.approx(240 + 512 + 1024)


def test_a_vllm_judge_keeps_its_engine_settings(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        strategy_args={
            "strategy_name": "vllm",
            "strategy_config": {"gpu_memory_utilization": 0.85, "enforce_eager": False},
        },
    )
    rollout = config.roles["llm_judge"].rollout
    assert (rollout.max_num_seqs, rollout.cuda_graphs) == (1, True)
    assert rollout.gpu_memory_utilization == 0.85


def test_rolls_own_prompt_asks_for_a_score_capped_by_max_new_tokens(tmp_path: Path) -> None:
    """No known ``judge_prompt``: ROLL's own prompt (124 tokens) asks for ``Score: N`` (5
    tokens); ``max_new_tokens: 3`` cuts it to 3."""
    judge = _stage(_load(tmp_path, judge_prompt=None)).judge
    assert (judge.template_tokens, judge.response_tokens) == (124, 5)
    capped = _stage(_load(tmp_path, judge_prompt=None, generating_args={"max_new_tokens": 3}))
    assert capped.judge.response_tokens == 3


def test_an_api_judge_holds_no_model_and_is_not_estimated(tmp_path: Path) -> None:
    """``judge_model_type: api``: the workers are clients of a remote model; the stage keeps
    the importer's default seconds, named as given."""
    config = _load(tmp_path, judge_model_type="api")
    role = config.roles["llm_judge"]
    assert not role.is_gpu and role.world_size == 4
    stage = _stage(config)
    assert stage.judge is not None
    est = estimate_config(config).stages["reward_llm_judge"]
    assert (est.kind, est.bound) == ("cpu", "given")


@pytest.mark.parametrize("mode", ["cluster", None, "local"])
def test_a_judge_mode_roll_refuses_is_refused(tmp_path: Path, mode: Any) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, judge_model_type=mode)
    assert info.value.field == "rewards.llm_judge.judge_model_type"
    assert "Unsupported model type" in info.value.message


def test_a_gpu_reward_cluster_that_is_not_a_judge_is_a_reward_models_pass(
    tmp_path: Path,
) -> None:
    """A reward cluster on GPUs without the judge's worker scores each sample in one forward
    pass, whatever its name's suffix (it was left unestimated as ``reward_NAME``)."""
    config = _load(tmp_path, worker_cls=None)
    assert _stage(config).judge is None
    est = estimate_config(config)
    assert est.stages["reward_llm_judge"].kind == "forward"
    # A reward model's score head, not the LM head (same checkpoint as the actor here): its
    # pass holds no vocabulary-wide logits.
    assert est.roles["llm_judge"].params < est.roles["actor_train"].params


VLLM = {"strategy_name": "vllm", "strategy_config": {"enforce_eager": False}}
SEPARATE = {
    "actor_infer": {**RLVR["actor_infer"], "device_mapping": "list(range(8,12))"},
    "actor_train": {**RLVR["actor_train"], "device_mapping": "list(range(0,8))"},
    "reference": {**RLVR["reference"], "device_mapping": "list(range(0,8))"},
}
"""actor_infer on GPUs of its own (ROLL's ``is_actor_infer_colocated`` false)."""


@pytest.mark.parametrize(
    ("top", "strategy", "every"),
    [
        # Per prompt (generate_opt_level 1, the default): each prompt's 8 samples a call,
        # offloaded after it; Hugging Face's strategy always, vLLM's when actor_infer is
        # colocated.
        ({}, None, 8),
        ({}, VLLM, 8),
        (SEPARATE, VLLM, None),
        (SEPARATE, None, 8),
        # A call per sample with is_num_return_sequences_expand.
        ({"is_num_return_sequences_expand": True}, None, 1),
        # generate_opt_level 0: one batched call per worker a step.
        ({"generate_opt_level": 0}, None, None),
    ],
)  # fmt: skip
def test_a_judge_sleeps_after_each_call_where_roll_offloads_it(
    tmp_path: Path, top: dict[str, Any], strategy: dict[str, Any] | None, every: int | None
) -> None:
    """ROLL's RLVR scheduler scores each prompt's samples in a ``compute_rewards`` call of
    their own (generate_scheduler.py ``RolloutContext.compute_rewards``) whose meta_info has
    no ``is_offload_states``: the judge's ``state_offload_manger`` reloads its engine before
    and offloads it after every call, where its strategy does offload
    (vllm_strategy.py: only with ``is_actor_infer_colocated``; hf_strategy.py: always)."""
    judge = {"strategy_args": strategy} if strategy else {}
    assert _stage(_load(tmp_path, top, **judge)).judge.reload_every == every


def test_a_judge_asleep_between_calls_pays_a_reload_per_prompt(tmp_path: Path) -> None:
    """32 samples a replica in calls of 8: 4 wakes, each copying the 7B judge's weights in
    and out."""
    est = estimate_config(_load(tmp_path)).stages["reward_llm_judge"]
    assert est.detail["reloads"] == 4 and est.detail["reload_s"] > 0


@pytest.mark.parametrize(
    ("top", "field"),
    [
        ({"generate_opt_level": "fast"}, "generate_opt_level"),
        ({"is_num_return_sequences_expand": "yes"}, "is_num_return_sequences_expand"),
    ],
)
def test_a_bad_call_setting_of_a_judged_file_names_its_field(
    tmp_path: Path, top: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, top)
    assert info.value.field == field


@pytest.mark.parametrize(("top", "streams"), [({}, True), ({"generate_opt_level": 0}, False)])
def test_a_judge_scores_each_prompt_as_it_is_generated(
    tmp_path: Path, top: dict[str, Any], streams: bool
) -> None:
    """ROLL's default (``generate_opt_level: 1``) scores each prompt's samples as soon as
    they are generated (generate_scheduler.py ``generate_and_reward``): the judge streams
    beside the rollout on its own GPUs, and the step waits only for what it has left when
    the rollout ends; level 0 scores the whole batch after it."""
    config = _load(tmp_path, top)
    assert _stage(config).judge.streams is streams
    est = estimate_config(config).stages["reward_llm_judge"]
    assert ("streams_beside" in est.detail) is streams
    if streams:
        assert est.detail["streams_beside"] == "generate"
        assert est.seconds < est.detail["judge_total_s"]
