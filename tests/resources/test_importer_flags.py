"""A switch, turn count, parallel size or coefficient an imported file gives is read as the
framework reads it, or refused.

Found in review (2026-12-01): the importers read switches by truthiness (the quoted YAML
string ``"false"`` is true), or with ``is True`` (so ``"true"`` was off), or dropped a value
that was not a bool; they dropped a negative or fractional turn count, parallel size or
LoRA rank for the default, and read a coefficient given as a string as 0. Each such value is
now read once, in :mod:`rlplex.resources.importers.common` (``flag``, ``given_count``,
``given_size``, ``given_number``), as its framework reads it: accepted where the framework
accepts it (NeMo RL's pydantic config turns ``"no"`` into false and ``"8"`` into 8), refused
with one line naming the file, the framework's field and the value where the framework
fails on it or reads it otherwise than it looks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError, InvalidValueError
from rlplex.resources.importers.common import flag, given_count, given_number, given_size

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "fixtures" / "importers"

VERL = (
    "data.train_batch_size=256",
    "data.max_prompt_length=512",
    "data.max_response_length=1024",
)
"""Overrides that give examples/verl.yaml a whole workload."""

VERL_MEGATRON = (
    *VERL,
    "actor_rollout_ref.actor.strategy=megatron",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
)
VERL_MULTI_TURN = (
    *VERL,
    "actor_rollout_ref.rollout.multi_turn.enable=true",
    "actor_rollout_ref.rollout.multi_turn.tool_config_path=tools.yaml",
)
ROLL = ("prompt_length=512",)
ROLL_DEEPSPEED = (
    *ROLL,
    "actor_train.strategy_args.strategy_name=deepspeed_train",
    "actor_train.strategy_args.strategy_config={zero_optimization: {stage: 2}}",
)
RLINF_WORKLOAD = (
    "data.rollout_batch_size=64",
    "algorithm.group_size=8",
    "data.max_prompt_length=512",
    "algorithm.sampling_params.max_new_tokens=4096",
)
"""Overrides that give examples/rlinf.yaml a workload (its agent loop is read with one)."""
RLINF_AGENT = (*RLINF_WORKLOAD, "agentloop.max_tool_response_length=500")


def refused(path: Path, overrides: tuple[str, ...], field: str, value: object) -> str:
    """The InvalidValueError loading ``path`` with ``overrides`` raises: one line naming the
    file, ``field`` and ``value``."""
    with pytest.raises(InvalidValueError) as info:
        load_config(path, overrides=list(overrides))
    message = str(info.value)
    assert info.value.field == field
    assert info.value.value == value
    assert message.startswith(f"{path}: {field}: ")
    assert message.endswith(f"(got {value!r})")
    assert "\n" not in message
    return message


def role(path: Path, overrides: tuple[str, ...], name: str) -> Any:
    return load_config(path, overrides=list(overrides)).roles[name]


# -- the shared readings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reading", "read"),
    [
        (True, "truthy", True), (False, "truthy", False), (1, "truthy", True),
        (0, "truthy", False), (None, "truthy", None), ("???", "truthy", None),
        (True, "typed", True), (False, "typed", False),
        ("false", "pydantic", False), ("no", "pydantic", False), ("OFF", "pydantic", False),
        ("0", "pydantic", False), (0, "pydantic", False), ("yes", "pydantic", True),
        ("true", "pydantic", True), (1.0, "pydantic", True),
        (1, "literal", True), (0, "literal", False), (False, "literal", False),
    ],
)  # fmt: skip
def test_flag_accepts_what_the_framework_reads(value: object, reading: Any, read: object) -> None:
    assert flag(value, field="x", file="f.yaml", reading=reading) is read


@pytest.mark.parametrize(
    ("value", "reading"),
    [
        ("false", "truthy"), ("no", "truthy"), ("true", "truthy"), (2, "truthy"),
        (0.0, "truthy"), ([], "truthy"),
        (0, "typed"), (1, "typed"), ("false", "typed"),
        ("maybe", "pydantic"), (2, "pydantic"), ("", "pydantic"),
        ("true", "literal"), ("false", "literal"),
    ],
)  # fmt: skip
def test_flag_refuses_what_the_framework_misreads_or_refuses(value: object, reading: Any) -> None:
    with pytest.raises(InvalidValueError) as info:
        flag(value, field="a.b", file="f.yaml", reading=reading)
    assert str(info.value).startswith("f.yaml: a.b: must be true or false")


def test_flag_says_an_unresolved_interpolation_is_not_a_value() -> None:
    with pytest.raises(ConfigError) as info:
        flag("${oc.env:EAGER}", field="a", file="f.yaml")
    assert not isinstance(info.value, InvalidValueError)
    assert "interpolation" in str(info.value)


def test_counts_sizes_and_numbers() -> None:
    assert given_count(0, field="t", file="f", least=0) == 0
    with pytest.raises(InvalidValueError, match=r"t: must be an integer >= 0 \(0: none\)"):
        given_count(-1, field="t", file="f", least=0, hint=" (0: none)")
    assert given_size(None, field="tp", file="f") is None
    assert given_size(4, field="tp", file="f") == 4
    for bad in (0, -2, 2.5, "2", True):
        with pytest.raises(InvalidValueError):
            given_size(bad, field="tp", file="f")
    assert given_number(1, field="c", file="f") == 1.0
    assert given_number(None, field="c", file="f") is None
    for bad in ("0.01", True, float("nan")):
        with pytest.raises(InvalidValueError, match="must be a number"):
            given_number(bad, field="c", file="f")
    with pytest.raises(InvalidValueError, match="must be a number >= 0"):
        given_number(-0.5, field="c", file="f", least=0)
    for infinite in (float("inf"), float("-inf")):  # YAML's .inf: int() and ceil() overflow
        with pytest.raises(InvalidValueError, match="must be a finite number"):
            given_number(infinite, field="c", file="f", least=0)


# -- verl -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "override", "field", "value"),
    [
        # Switches verl tests for truth: the quoted "false" is on, dropped here before.
        (VERL, "actor_rollout_ref.rollout.enforce_eager='false'",
         "actor_rollout_ref.rollout.enforce_eager", "false"),
        (VERL, "actor_rollout_ref.model.use_remove_padding='no'",
         "actor_rollout_ref.model.use_remove_padding", "no"),
        (VERL, "actor_rollout_ref.model.enable_gradient_checkpointing='false'",
         "actor_rollout_ref.model.enable_gradient_checkpointing", "false"),
        (VERL, "actor_rollout_ref.actor.fsdp_config.param_offload='false'",
         "actor_rollout_ref.actor.fsdp_config.param_offload", "false"),
        (VERL, "actor_rollout_ref.actor.fsdp_config.optimizer_offload='true'",
         "actor_rollout_ref.actor.fsdp_config.optimizer_offload", "true"),
        (VERL, "actor_rollout_ref.actor.use_dynamic_bsz='true'",
         "actor_rollout_ref.actor.use_dynamic_bsz", "true"),
        (VERL, "critic.enable='false'", "critic.enable", "false"),
        (VERL, "actor_rollout_ref.actor.use_kl_loss='false'",
         "actor_rollout_ref.actor.use_kl_loss", "false"),
        (VERL, "reward_model.enable=2", "reward_model.enable", 2),
        (VERL, "actor_rollout_ref.rollout.multi_turn.enable='yes'",
         "actor_rollout_ref.rollout.multi_turn.enable", "yes"),
        (VERL_MEGATRON, "actor_rollout_ref.actor.megatron.param_offload='false'",
         "actor_rollout_ref.actor.megatron.param_offload", "false"),
        (VERL_MEGATRON, "actor_rollout_ref.actor.megatron.use_distributed_optimizer='false'",
         "actor_rollout_ref.actor.megatron.use_distributed_optimizer", "false"),
        # Turn counts: 0 or null is no limit; a negative one stops after the first answer in
        # verl, a fraction or a string is no count.
        (VERL_MULTI_TURN, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=-1",
         "actor_rollout_ref.rollout.multi_turn.max_assistant_turns", -1),
        (VERL_MULTI_TURN, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2.5",
         "actor_rollout_ref.rollout.multi_turn.max_assistant_turns", 2.5),
        (VERL_MULTI_TURN, "actor_rollout_ref.rollout.multi_turn.max_user_turns=abc",
         "actor_rollout_ref.rollout.multi_turn.max_user_turns", "abc"),
        (VERL_MULTI_TURN, "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=-5",
         "actor_rollout_ref.rollout.multi_turn.max_tool_response_length", -5),
        # Parallel sizes: dropped for 1 before.
        (VERL, "actor_rollout_ref.rollout.expert_parallel_size=-2",
         "actor_rollout_ref.rollout.expert_parallel_size", -2),
        (VERL, "actor_rollout_ref.actor.ulysses_sequence_parallel_size=0",
         "actor_rollout_ref.actor.ulysses_sequence_parallel_size", 0),
        (VERL_MEGATRON, "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=1.5",
         "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", 1.5),
        (VERL_MEGATRON, "actor_rollout_ref.actor.megatron.context_parallel_size=0",
         "actor_rollout_ref.actor.megatron.context_parallel_size", 0),
        # Numbers: a string was read as 0 (no entropy, no CPU optimizer).
        (VERL, "actor_rollout_ref.actor.entropy_coeff='0.01'",
         "actor_rollout_ref.actor.entropy_coeff", "0.01"),
        (VERL_MEGATRON,
         "actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction=x",
         "actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction",
         "x"),
        (VERL, "actor_rollout_ref.model.lora_rank=8.5", "actor_rollout_ref.model.lora_rank", 8.5),
        (VERL, "actor_rollout_ref.model.lora_rank='32'", "actor_rollout_ref.model.lora_rank",
         "32"),
    ],
)  # fmt: skip
def test_verl_refuses_a_value_it_reads_otherwise(
    base: tuple[str, ...], override: str, field: str, value: object
) -> None:
    refused(EXAMPLES / "verl.yaml", (*base, override), field, value)


def test_verl_fully_async_refuses_a_negative_staleness_threshold() -> None:
    """verl's rollouter asserts ``staleness_threshold >= 0``; rlplex read -1 as 0 (sync)."""
    field = "async_training.staleness_threshold"
    refused(FIXTURES / "verl" / "fully_async.yaml", (f"{field}=-1",), field, -1)
    refused(FIXTURES / "verl" / "fully_async.yaml", (f"{field}='0.5'",), field, "0.5")


@pytest.mark.parametrize(("value", "graphs"), [("0", True), ("1", False), ("false", True)])
def test_verl_reads_enforce_eager_0_and_1_as_it_does(value: str, graphs: bool) -> None:
    infer = role(
        EXAMPLES / "verl.yaml", (*VERL, f"actor_rollout_ref.rollout.enforce_eager={value}"),
        "actor_infer",
    )  # fmt: skip
    assert infer.rollout.cuda_graphs is graphs


def test_verl_turn_counts_of_0_are_no_limit_and_a_0_reply_is_none() -> None:
    path = EXAMPLES / "verl.yaml"
    mt = "actor_rollout_ref.rollout.multi_turn"
    turns = load_config(path, overrides=[*VERL_MULTI_TURN, f"{mt}.max_assistant_turns=0",
                                         f"{mt}.max_user_turns=0"]).workload.turns  # fmt: skip
    assert turns.max == 5  # MULTI_TURN_DEFAULT_TURNS: verl bounds it by the budget only
    replies = load_config(path, overrides=[*VERL_MULTI_TURN,
                                           f"{mt}.max_tool_response_length=0"])  # fmt: skip
    assert replies.workload.turns.observation_tokens == 0  # was 256, the default


def test_verl_megatron_sizes_and_switches_read_as_written() -> None:
    train = role(EXAMPLES / "verl.yaml", (*VERL_MEGATRON,
                 "actor_rollout_ref.actor.megatron.param_offload=1"), "actor_train")  # fmt: skip
    assert train.parallel.tp == 2
    assert train.parallel.offload_params is True


def test_verl_a_negative_lora_rank_is_no_lora_as_in_verl() -> None:
    """verl adapts the model when ``lora_rank > 0``: -1 is as 0, no LoRA (accepted)."""
    train = role(EXAMPLES / "verl.yaml", (*VERL, "actor_rollout_ref.model.lora_rank=-1"),
                 "actor_train")  # fmt: skip
    assert train.lora is None


# -- ROLL -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "override", "field", "value"),
    [
        # ModelArguments is a dataclass ROLL builds with dacite: a bool or nothing.
        (ROLL, "actor_train.model_args.disable_gradient_checkpointing='false'",
         "actor_train.model_args.disable_gradient_checkpointing", "false"),
        (ROLL, "actor_train.model_args.disable_gradient_checkpointing=1",
         "actor_train.model_args.disable_gradient_checkpointing", 1),
        # The strategy config goes to vLLM and Megatron as given: tested for truth.
        (ROLL, "actor_infer.strategy_args.strategy_config.enforce_eager='false'",
         "actor_infer.strategy_args.strategy_config.enforce_eager", "false"),
        (ROLL, "actor_train.strategy_args.strategy_config.use_distributed_optimizer='no'",
         "actor_train.strategy_args.strategy_config.use_distributed_optimizer", "no"),
        (ROLL, "actor_train.strategy_args.strategy_config.tensor_model_parallel_size=0",
         "actor_train.strategy_args.strategy_config.tensor_model_parallel_size", 0),
        (ROLL, "actor_train.strategy_args.strategy_config.expert_model_parallel_size=-1",
         "actor_train.strategy_args.strategy_config.expert_model_parallel_size", -1),
        (ROLL_DEEPSPEED,
         "actor_train.strategy_args.strategy_config.zero_optimization.stage=4",
         "actor_train.strategy_args.strategy_config.zero_optimization.stage", 4),
        # peft wants a rank >= 1; ROLL's dataclass an int.
        (ROLL, "actor_train.model_args.lora_target=all-linear",
         "actor_train.model_args.lora_rank", None),
        (ROLL, "entropy_loss_coef='0.1'", "entropy_loss_coef", "0.1"),
    ],
)  # fmt: skip
def test_roll_refuses_a_value_it_reads_otherwise(
    base: tuple[str, ...], override: str, field: str, value: object
) -> None:
    if value is None:  # the LoRA case: a rank of 0 with a target
        base, override, value = (*base, override), f"{field}=0", 0
    refused(EXAMPLES / "roll.yaml", (*base, override), field, value)


def test_roll_reads_its_switches_and_zero_stage_as_written() -> None:
    path = EXAMPLES / "roll.yaml"
    train = role(path, (*ROLL, "actor_train.model_args.disable_gradient_checkpointing=true"),
                 "actor_train")  # fmt: skip
    assert not train.parallel or not train.parallel.recompute
    infer = role(path, (*ROLL, "actor_infer.strategy_args.strategy_config.enforce_eager=1"),
                 "actor_infer")  # fmt: skip
    assert infer.rollout.cuda_graphs is False
    assert role(path, ROLL_DEEPSPEED, "actor_train").parallel.zero == 2
    zero0 = role(path, (*ROLL_DEEPSPEED,
                        "actor_train.strategy_args.strategy_config.zero_optimization.stage=0"),
                 "actor_train")  # fmt: skip
    assert zero0.parallel.zero == 0  # ZeRO off, a stage DeepSpeed takes


# -- RLinf ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "override", "field", "value"),
    [
        ((), "rollout.enforce_eager='false'", "rollout.enforce_eager", "false"),
        ((), "actor.offload_weight='no'", "actor.offload_weight", "no"),
        ((), "actor.optim.use_distributed_optimizer='true'",
         "actor.optim.use_distributed_optimizer", "true"),
        ((), "reward.use_reward_model='false'", "reward.use_reward_model", "false"),
        ((), "runner.only_eval='false'", "runner.only_eval", "false"),
        ((), "actor.model.tensor_model_parallel_size=-1",
         "actor.model.tensor_model_parallel_size", -1),
        ((), "actor.model.context_parallel_size=0", "actor.model.context_parallel_size", 0),
        ((), "inference.model.pipeline_model_parallel_size=2.0",
         "inference.model.pipeline_model_parallel_size", 2.0),
        (RLINF_AGENT, "agentloop.max_turns=-1", "agentloop.max_turns", -1),
        (RLINF_AGENT, "agentloop.max_assistant_turns=1.5", "agentloop.max_assistant_turns", 1.5),
        ((*RLINF_WORKLOAD, "agentloop.max_turns=4"), "agentloop.max_tool_response_length=-1",
         "agentloop.max_tool_response_length", -1),
        ((*RLINF_WORKLOAD, "agentloop.max_turns=4"), "agentloop.is_dynamic_rollout_batch='true'",
         "agentloop.is_dynamic_rollout_batch", "true"),
    ],
)  # fmt: skip
def test_rlinf_refuses_a_value_it_reads_otherwise(
    base: tuple[str, ...], override: str, field: str, value: object
) -> None:
    refused(EXAMPLES / "rlinf.yaml", (*base, override), field, value)


def test_rlinf_node_group_ignore_hardware_must_be_a_bool(tmp_path: Path) -> None:
    """RLinf tests ``ignore_hardware`` for truth: "false" made the group CPU-only there."""
    text = (FIXTURES / "rlinf" / "node_groups.yaml").read_text()
    path = tmp_path / "groups.yaml"
    path.write_text(
        text.replace(
            "{label: a800, node_ranks: 1}", "{label: a800, node_ranks: 1, ignore_hardware: 'false'}"
        )
    )
    refused(path, (), "cluster.node_groups.0.ignore_hardware", "false")
    path.write_text(
        text.replace(
            "{label: a800, node_ranks: 1}", "{label: a800, node_ranks: 1, ignore_hardware: false}"
        )
    )
    assert load_config(path).roles["actor_train"].devices


def test_rlinf_turns_of_0_are_no_limit() -> None:
    """rstar2's loop: ``if max_assistant_turns and turns >= max_assistant_turns``: 0 is no
    limit, so the next key bounds the turns."""
    load = load_config(EXAMPLES / "rlinf.yaml", overrides=[
        *RLINF_WORKLOAD, "agentloop.max_turns=0", "agentloop.max_assistant_turns=3",
    ]).workload  # fmt: skip
    assert load is not None and load.turns is not None
    assert load.turns.max == 3


# -- NeMo RL ----------------------------------------------------------------------------------


NEMO = EXAMPLES / "nemo_rl.yaml"
NEMO_SPLIT = (
    "policy.generation.colocated.resources.gpus_per_node=8",
    "policy.generation.colocated.resources.num_nodes=1",
)


@pytest.mark.parametrize("spelling", ["'false'", "'no'", "'off'", "0", "'0'"])
def test_nemo_rl_reads_a_bool_field_as_pydantic_does(spelling: str) -> None:
    """``colocated.enabled: bool`` in NeMo RL's pydantic MasterConfig: "no" is false there,
    and was colocated (the default) here."""
    config = load_config(NEMO, overrides=[
        *NEMO_SPLIT, f"policy.generation.colocated.enabled={spelling}",
    ])  # fmt: skip
    assert not set(config.roles["actor_train"].devices) & set(config.roles["actor_infer"].devices)


def test_nemo_rl_reads_typed_numbers_as_pydantic_does() -> None:
    """A typed int given as "2" or 2.0 is 2 to pydantic; a typed float "0.01" is 0.01."""
    config = load_config(NEMO, overrides=[
        "cluster.num_nodes='2'", "policy.megatron_cfg.tensor_model_parallel_size=2.0",
        "loss_fn.reference_policy_kl_penalty='0.01'",
        "policy.megatron_cfg.activation_checkpointing='yes'",
    ])  # fmt: skip
    assert config.cluster.nodes == 2
    assert config.roles["actor_train"].parallel.tp == 2
    assert config.roles["actor_train"].parallel.recompute is True
    assert "reference" in config.roles


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        # Literal[True] | Literal[False]: pydantic refuses a string.
        ("policy.megatron_cfg.enabled='true'", "policy.megatron_cfg.enabled", "true"),
        ("policy.sequence_packing.enabled='false'", "policy.sequence_packing.enabled", "false"),
        # A bool field: pydantic refuses what is no boolean.
        ("policy.megatron_cfg.sequence_parallel=maybe", "policy.megatron_cfg.sequence_parallel",
         "maybe"),
        ("grpo.async_grpo.enabled=2", "grpo.async_grpo.enabled", 2),
        # vllm_cfg is untyped (GenerationConfig does not declare it): as written to vLLM.
        ("policy.generation.vllm_cfg.enforce_eager='false'",
         "policy.generation.vllm_cfg.enforce_eager", "false"),
        ("policy.generation.vllm_cfg.expert_parallel_size='2'",
         "policy.generation.vllm_cfg.expert_parallel_size", "2"),
        ("grpo.batch_multiplier=lots", "grpo.batch_multiplier", "lots"),
        ("loss_fn.reference_policy_kl_penalty=x", "loss_fn.reference_policy_kl_penalty", "x"),
        ("policy.megatron_cfg.pipeline_model_parallel_size=1.5",
         "policy.megatron_cfg.pipeline_model_parallel_size", 1.5),
    ],
)  # fmt: skip
def test_nemo_rl_refuses_a_value_it_refuses_or_reads_otherwise(
    override: str, field: str, value: object
) -> None:
    refused(NEMO, (override,), field, value)


def test_nemo_rl_env_switch_is_untyped() -> None:
    """``env`` is ``dict[str, Any]`` to NeMo RL: its switches are tested for truth."""
    field = "env.reward_model.enabled"
    refused(NEMO, (f"{field}='no'",), field, "no")


def test_a_misread_switch_exits_2_naming_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rlplex.cli", "plan", "examples/verl.yaml",
         "--set", "cluster.gpu=h100", *(f"--set={o}" for o in VERL),
         "--set", "actor_rollout_ref.rollout.enforce_eager='false'"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert (
        "actor_rollout_ref.rollout.enforce_eager: must be true or false (the framework tests"
        " it for truth: a string is true, even 'false') (got 'false')"
    ) in done.stderr + done.stdout
