"""Multi-turn runs of ROLL (its agentic pipeline) and verl (``rollout.multi_turn``) import as
trajectories (``workload.turns``), as each framework runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.estimate.estimator import estimate_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers"
VERL = FIXTURES / "verl" / "grpo.yaml"

ROLL_AGENTIC = {
    "num_gpus_per_node": 8,
    "pretrain": "Qwen/Qwen2.5-0.5B-Instruct",
    "rollout_batch_size": 64,
    "sequence_length": 4096,
    "max_tokens_per_step": 64,
    "max_actions_per_traj": 10,
    "train_env_manager": {"group_size": 8, "tags": ["Sokoban"]},
    "custom_envs": {
        "Sokoban": {"max_steps": "${max_actions_per_traj}",
                    "max_tokens_per_step": "${max_tokens_per_step}"},
        "Unused": {"max_steps": 50, "max_tokens_per_step": 4096},
    },
    "actor_train": {"strategy_args": {"strategy_name": "fsdp2_train"},
                    "training_args": {"per_device_train_batch_size": 2},
                    "device_mapping": "list(range(0,8))"},
    "actor_infer": {"strategy_args": {"strategy_name": "vllm",
                                      "strategy_config": {"tensor_parallel_size": 1}},
                    "generating_args": {"max_new_tokens": 48},
                    "device_mapping": "list(range(0,8))"},
}  # fmt: skip


@pytest.fixture
def roll_agentic(tmp_path: Path) -> Path:
    path = tmp_path / "agentic.yaml"
    path.write_text(yaml.safe_dump(ROLL_AGENTIC), encoding="utf-8")
    return path


PROMPT = ["workload.prompt_tokens.mean=300", "workload.prompt_tokens.max=600"]


def test_roll_agentic_steps_are_trajectories_of_turns(roll_agentic: Path) -> None:
    """``rollout_batch_size`` counts trajectories (64 in groups of 8: 8 prompts x 8), each at
    most the train environment's 10 turns of ``min(max_tokens_per_step, max_new_tokens)`` = 48
    tokens within ``sequence_length`` less the prompt; means half the maxima, the turns' the
    midpoint of 1 and 10. Bug: with a ``prompt_length`` the import took ``rollout_batch_size``
    as prompts, each with ``group_size`` samples: 8x the trajectories."""
    cfg = load_config(roll_agentic, overrides=[*PROMPT, "cluster.gpu=h100"])
    w = cfg.workload
    assert w is not None and w.turns is not None
    assert (w.prompts_per_step, w.samples_per_prompt, w.micro_batch_size) == (8, 8, 2)
    assert (w.response_tokens.mean, w.response_tokens.max) == (24, 48)
    assert (w.turns.mean, w.turns.max, w.turns.max_tokens) == (5.5, 10, 4096)
    assert w.continuation_max() == 10 * 48
    stages = estimate_config(cfg).stages
    assert stages["generate"].detail["turns"] == 5.5


def test_roll_agentic_without_a_prompt_length_asks_for_it(roll_agentic: Path) -> None:
    """No agentic file gives its first prompt's length: the import keeps the 7B defaults and
    says which key to set, rather than guessing one."""
    cfg = load_config(roll_agentic, overrides=["cluster.gpu=h100"])
    assert cfg.workload is None
    warning = " ".join(cfg.warnings)
    assert "lacks workload.prompt_tokens" in warning
    assert "--set workload.prompt_tokens.mean=" in warning
    # estimate names the same field: it said the whole workload was missing, and its example
    # --set (prompts_per_step=64, response_tokens 1024/4096) overwrote what the file gives.
    with pytest.raises(ConfigError) as info:
        estimate_config(cfg)
    assert info.value.field == "workload.prompt_tokens"
    assert "prompts_per_step" not in str(info.value)
    assert "workload.prompt_tokens.mean=" in str(info.value)


def test_roll_agentic_prompt_length_bounds_the_trajectory(roll_agentic: Path) -> None:
    cfg = load_config(roll_agentic, overrides=["prompt_length=512", "cluster.gpu=h100"])
    w = cfg.workload
    assert w is not None and w.turns is not None
    assert (w.prompt_tokens.max, w.turns.max_tokens) == (512, 4096 - 512)
    assert (w.prompts_per_step, w.samples_per_prompt) == (8, 8)


def test_verl_multi_turn_tool_calls(tmp_path: Path) -> None:
    """``multi_turn.enable`` with 4 assistant turns and a tool: the 1,024-token response budget
    holds the whole trajectory; the tool's replies (at most 200 characters: 50 tokens at 4 a
    token, mean 25) and the answers share half of it: (512 - 1.5 x 25) / 2.5 = 189.8 per
    answer over 2.5 turns."""
    mt = "actor_rollout_ref.rollout.multi_turn"
    cfg = load_config(
        VERL,
        overrides=[
            f"{mt}.enable=true", f"{mt}.max_assistant_turns=4",
            f"{mt}.max_tool_response_length=200", f"{mt}.tool_config_path=tools.yaml",
        ],
    )  # fmt: skip
    w = cfg.workload
    assert w is not None and w.turns is not None
    assert (w.turns.mean, w.turns.max, w.turns.max_tokens) == (2.5, 4, 1024)
    assert w.turns.observation_tokens == 25
    assert w.response_tokens.max == 1024
    assert w.response_tokens.mean == pytest.approx((512 - 1.5 * 25) / 2.5)
    assert w.continuation_mean() == pytest.approx(512)


def test_verl_multi_turn_without_a_turn_limit_assumes_verls_examples(tmp_path: Path) -> None:
    """``max_assistant_turns`` null (verl: no limit but the budget): 5 assumed (mean 3); without
    a tool config the replies (an interaction's) have no bound to read: none assumed."""
    cfg = load_config(VERL, overrides=["actor_rollout_ref.rollout.multi_turn.enable=true"])
    w = cfg.workload
    assert w is not None and w.turns is not None
    assert (w.turns.mean, w.turns.max, w.turns.observation_tokens) == (3, 5, 0)
    assert w.continuation_mean() == pytest.approx(512)


def test_verl_without_multi_turn_has_no_turns() -> None:
    w = load_config(VERL).workload
    assert w is not None and w.turns is None


def test_roll_agentic_trajectory_mean_stays_within_half_its_cap(tmp_path: Path) -> None:
    """10 turns of up to 4,096 tokens within a 8,192-token sequence (ROLL's GEM configs): half
    the maxima would make a 11,264-token mean trajectory; the answers' mean is cut so that it
    is half the cap, 8,192 / 2 / 5.5 turns. Bug: the import was refused as over its maximum."""
    data = {**ROLL_AGENTIC, "max_tokens_per_step": 4096, "sequence_length": 8192}
    data["actor_infer"] = {**ROLL_AGENTIC["actor_infer"], "generating_args": {}}
    path = tmp_path / "gem.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    w = load_config(path, overrides=PROMPT).workload
    assert w is not None and w.turns is not None
    assert w.response_tokens.mean == pytest.approx(8192 / 2 / 5.5)
    assert w.continuation_mean() == pytest.approx(4096)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"train_env_manager": {"group_size": 8, "tags": 5}}, "train_env_manager.tags"),
        ({"train_env_manager": {"group_size": 8, "tags": "Sokoban"}}, "train_env_manager.tags"),
        ({"rollout_batch_size": 60}, "rollout_batch_size"),
    ],
)
def test_roll_agentic_bad_fields_are_named(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    """Bug: ``tags: 5`` raised a TypeError (a traceback); a batch that is not a multiple of the
    group size (ROLL asserts it) imported a rounded-down batch."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**ROLL_AGENTIC, **change}), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path, overrides=PROMPT)
    assert err.value.field == field


def test_verl_tool_replies_stay_within_the_budget() -> None:
    """Bug: a tool reply bound past the whole response budget (100,000 of 1,024 tokens) was
    taken as the replies' mean when the mean turns left no reply inside the mean."""
    mt = "actor_rollout_ref.rollout.multi_turn"
    w = load_config(
        VERL,
        overrides=[
            f"{mt}.enable=true", f"{mt}.max_assistant_turns=2",
            f"{mt}.max_tool_response_length=100000", f"{mt}.tool_config_path=x",
        ],
    ).workload  # fmt: skip
    assert w is not None and w.turns is not None
    assert w.turns.observation_tokens <= 1024 / 2


@pytest.mark.parametrize(
    "manager",
    [
        "roll.pipeline.agentic.env_manager.step_env_manager.StepEnvManager",
        "roll.pipeline.agentic.env_manager.step_concat_env_manager.StepConcatEnvManager",
        "roll.pipeline.agentic.env_manager.agent_native_env_manager.AgentNativeStepEnvManager",
    ],
)
def test_roll_step_wise_env_managers_train_each_turn(
    tmp_path: Path, roll_agentic: Path, manager: str
) -> None:
    """ROLL's AgentNativeStepEnvManager, GiGPO's StepEnvManager and its subclass
    StepConcatEnvManager build one training sample per turn (formulate_rollouts):
    ``turns.samples: turn``; the trajectory manager one (bug: StepConcatEnvManager was read
    as a trajectory manager)."""
    envs = dict(ROLL_AGENTIC["custom_envs"])
    envs["Sokoban"] = {**envs["Sokoban"], "env_manager_cls": manager}
    path = tmp_path / "step.yaml"
    path.write_text(yaml.safe_dump({**ROLL_AGENTIC, "custom_envs": envs}), encoding="utf-8")
    w = load_config(path, overrides=PROMPT).workload
    assert w is not None and w.turns is not None and w.turns.samples == "turn"
    whole = load_config(roll_agentic, overrides=PROMPT).workload
    assert whole is not None and whole.turns is not None and whole.turns.samples == "trajectory"


def test_rlinf_agent_loops_are_multi_turn() -> None:
    """RLinf's agent loops (``agentloop.max_turns``, rlinf/agents/searchr1) answer up to
    max_turns times within the response budget, tool replies of up to
    ``max_tool_response_length`` between them; a MultiAgentLoopWorker
    (``is_dynamic_rollout_batch``) trains one sample per turn, an AgentLoopWorker the
    trajectory."""
    rlinf = Path(__file__).resolve().parents[2] / "examples" / "rlinf.yaml"
    data = ["data.max_prompt_length=512", "runner.seq_length=2048",
            "data.rollout_batch_size=64", "algorithm.group_size=4"]  # fmt: skip
    plain = load_config(rlinf, overrides=data).workload
    assert plain is not None and plain.turns is None
    loop = ["agentloop.max_turns=3", "agentloop.max_tool_response_length=200"]
    whole = load_config(rlinf, overrides=[*data, *loop]).workload
    assert whole is not None and whole.turns is not None
    assert whole.turns.samples == "trajectory"  # an AgentLoopWorker (rstar2)
    w = load_config(
        rlinf, overrides=[*data, *loop, "agentloop.is_dynamic_rollout_batch=true"]
    ).workload
    assert w is not None and w.turns is not None
    # a 2,048 - 512 = 1,536-token budget: 2 turns on average, 25-token replies (half their
    # 200 characters at 4 a token), the answers the rest of half the budget: (768 - 25) / 2.
    assert (w.turns.mean, w.turns.max, w.turns.samples) == (2, 3, "turn")
    assert w.turns.max_tokens == 1536 and w.response_tokens.max == 1536
    assert w.turns.observation_tokens == 25
    assert w.response_tokens.mean == pytest.approx((768 - 25) / 2)
    assert w.trajectory_mean() == pytest.approx(768)
