"""A batch, length or engine value an imported file gives but that is not valid is refused.

Found in review (2026-11-30): the verl and ROLL importers (and partly RLinf and NeMo RL)
dropped such a value (``data.train_batch_size=-5``, ``rollout.n=0``,
``gpu_memory_utilization=1.5`` ...) and planned on rlplex's defaults or the engine's,
exiting 0 as if the value had been read. ``common.workload`` and ``common.rollout`` now
refuse it with an :class:`InvalidValueError` naming the framework's own field, the value
and the file; a value that is absent still falls back.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError, InvalidValueError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures" / "importers"

VERL_WORKLOAD = (
    "data.train_batch_size=256",
    "data.max_prompt_length=512",
    "data.max_response_length=1024",
)
"""Overrides that give examples/verl.yaml a whole workload: each case then spoils one key."""

ROLL_WORKLOAD = ("prompt_length=512",)
"""examples/roll.yaml gives every workload key but the prompt's length."""


def refusal(path: Path, overrides: tuple[str, ...], field: str, value: object) -> str:
    """The error loading ``path`` with ``overrides`` raises: an InvalidValueError naming
    ``field``, ``value`` and the file."""
    with pytest.raises(InvalidValueError) as info:
        load_config(path, overrides=list(overrides))
    message = str(info.value)
    assert info.value.field == field
    assert info.value.value == value
    assert message.startswith(f"{path}: {field}: ")
    assert message.endswith(f"(got {value!r})")
    return message


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("data.train_batch_size=-5", "data.train_batch_size", -5),
        ("data.train_batch_size=abc", "data.train_batch_size", "abc"),
        ("data.train_batch_size=0", "data.train_batch_size", 0),
        ("data.train_batch_size=true", "data.train_batch_size", True),
        ("data.max_response_length=0", "data.max_response_length", 0),
        ("data.max_prompt_length=-1", "data.max_prompt_length", -1),
        ("actor_rollout_ref.rollout.n=0", "actor_rollout_ref.rollout.n", 0),
        (
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=0",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
            0,
        ),
        (
            "actor_rollout_ref.actor.ppo_mini_batch_size=-1",
            "actor_rollout_ref.actor.ppo_mini_batch_size",
            -1,
        ),
        (
            "actor_rollout_ref.rollout.gpu_memory_utilization=1.5",
            "actor_rollout_ref.rollout.gpu_memory_utilization",
            1.5,
        ),
        (
            "actor_rollout_ref.rollout.max_num_seqs=0",
            "actor_rollout_ref.rollout.max_num_seqs",
            0,
        ),
    ],
)
def test_verl_refuses_a_wrong_value_it_reads(override: str, field: str, value: object) -> None:
    refusal(EXAMPLES / "verl.yaml", (*VERL_WORKLOAD, override), field, value)


def test_verl_fully_async_refuses_a_wrong_mini_batch() -> None:
    """Fully async's prompts per step are ppo_mini_batch_size x trigger x require_batches:
    a mini-batch of 0 made 0 prompts and the defaults."""
    field = "actor_rollout_ref.actor.ppo_mini_batch_size"
    refusal(FIXTURES / "verl" / "fully_async.yaml", (f"{field}=0",), field, 0)


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("rollout_batch_size=-64", "rollout_batch_size", -64),
        ("rollout_batch_size=abc", "rollout_batch_size", "abc"),
        ("response_length=0", "response_length", 0),
        ("prompt_length=-1", "prompt_length", -1),
        ("num_return_sequences_in_group=0", "num_return_sequences_in_group", 0),
        (
            "actor_train.training_args.per_device_train_batch_size=0",
            "actor_train.training_args.per_device_train_batch_size",
            0,
        ),
        (
            "actor_infer.strategy_args.strategy_config.gpu_memory_utilization=2",
            "actor_infer.strategy_args.strategy_config.gpu_memory_utilization",
            2,
        ),
        (  # vLLM sleeps at level 1 or 2; a 3 was dropped for ROLL's default 1
            "actor_infer.strategy_args.strategy_config.sleep_level=3",
            "actor_infer.strategy_args.strategy_config.sleep_level",
            3,
        ),
    ],
)
def test_roll_refuses_a_wrong_value_it_reads(override: str, field: str, value: object) -> None:
    refusal(EXAMPLES / "roll.yaml", (*ROLL_WORKLOAD, override), field, value)


def test_roll_sequence_length_must_leave_a_response() -> None:
    """Without response_length ROLL generates sequence_length - prompt_length tokens: a
    sequence no longer than the prompt leaves none (it planned on the defaults)."""
    path = EXAMPLES / "roll.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides=["prompt_length=512", "response_length=null",
                                     "sequence_length=512"])  # fmt: skip
    assert info.value.field == "sequence_length"
    assert "must be more than prompt_length (512)" in str(info.value)


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("rollout_batch_size=-64", "rollout_batch_size", -64),
        ("train_env_manager.group_size=0", "train_env_manager.group_size", 0),
        ("max_actions_per_traj=-1", "max_actions_per_traj", -1),
    ],
)
def test_roll_agentic_refuses_a_wrong_value_it_reads(
    override: str, field: str, value: object
) -> None:
    refusal(FIXTURES / "roll" / "agentic_partial_gpu.yaml", (override,), field, value)


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("data.rollout_batch_size=-1", "data.rollout_batch_size", -1),
        ("algorithm.group_size=0", "algorithm.group_size", 0),
        ("data.max_prompt_length=0", "data.max_prompt_length", 0),
        (
            "algorithm.sampling_params.max_new_tokens=abc",
            "algorithm.sampling_params.max_new_tokens",
            "abc",
        ),
        ("rollout.gpu_memory_utilization=0", "rollout.gpu_memory_utilization", 0),
        ("rollout.max_running_requests=-3", "rollout.max_running_requests", -3),
    ],
)
def test_rlinf_refuses_a_wrong_value_it_reads(override: str, field: str, value: object) -> None:
    refusal(EXAMPLES / "rlinf.yaml", (override,), field, value)


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        (
            "policy.generation.vllm_cfg.gpu_memory_utilization=3",
            "policy.generation.vllm_cfg.gpu_memory_utilization",
            3,
        ),
        (
            "policy.generation.vllm_kwargs.max_num_seqs=0",
            "policy.generation.vllm_kwargs.max_num_seqs",
            0,
        ),
        # Refused before, but as a plain ConfigError: a --sweep through it was not refused.
        ("policy.generation.max_new_tokens=0", "policy.generation.max_new_tokens", 0),
    ],
)
def test_nemo_rl_refuses_a_wrong_value_it_reads(override: str, field: str, value: object) -> None:
    refusal(EXAMPLES / "nemo_rl.yaml", (override,), field, value)


def test_a_wrong_value_exits_2_naming_it() -> None:
    """The CLI says the field and the value on one line and exits 2 (it planned on the
    defaults and exited 0)."""
    done = subprocess.run(
        [sys.executable, "-m", "rlplex.cli", "plan", "examples/verl.yaml",
         "--set", "cluster.gpu=h100", "--set", "data.train_batch_size=-5",
         "--set", "data.max_prompt_length=512", "--set", "data.max_response_length=1024"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "data.train_batch_size: must be an integer >= 1 (got -5)" in done.stderr + done.stdout
