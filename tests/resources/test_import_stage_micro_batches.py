"""Each pass's own micro-batch, as verl gives each role one: the critic's update and values,
the reference's and the rollout's log-prob passes, each with its own count or token budget
(``pipeline.stages.S.micro_batch_size`` / ``micro_batch_tokens`` where it differs from the
workload's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
VERL = ROOT / "examples" / "verl.yaml"
WORKLOAD = (
    "data.train_batch_size=256",
    "data.max_prompt_length=512",
    "data.max_response_length=1024",
)
"""examples/verl.yaml's workload (tests/resources/test_importer_values.py)."""


def _stages(*overrides: str) -> dict[str, tuple[int | None, int | None]]:
    config = load_config(VERL, overrides=[*WORKLOAD, *overrides])
    return {s.name: (s.micro_batch_size, s.micro_batch_tokens) for s in config.pipeline.stages}


def test_the_critic_and_old_log_probs_keep_their_own_micro_batches() -> None:
    """verl's run_deepseek7b_llm.sh: actor 16, rollout log-probs 32, critic 32 (its values
    pass takes the critic's, as critic.yaml's forward_micro_batch_size_per_gpu defaults);
    the workload holds the actor's (train) and the rollout's (log-probs, no reference's)."""
    stages = _stages(
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32",
        "critic.ppo_micro_batch_size_per_gpu=32",
    )
    assert stages["critic_train"] == (32, None)
    assert stages["values"] == (None, None)  # 32: the workload's log-prob micro-batch
    assert stages["train"] == (None, None)
    assert stages["old_logprob"] == (None, None)


def test_a_reference_micro_batch_leaves_the_rollouts_on_old_log_probs() -> None:
    stages = _stages(
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32",
        "critic.ppo_micro_batch_size_per_gpu=4",
        "critic.forward_micro_batch_size_per_gpu=16",
    )
    assert stages["ref_logprob"] == (None, None)  # the workload's: the reference's 8
    assert stages["old_logprob"] == (32, None)
    assert stages["critic_train"] == (4, None)
    assert stages["values"] == (16, None)


def test_a_critics_own_token_budget() -> None:
    """verl's run_qwen2-7b_seq_balance.sh: dynamic batches, the actor's 24,000 tokens, the
    critic's 98,304 (its forward budget defaults to its update's)."""
    stages = _stages(
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24000",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=24000",
        "critic.ppo_max_token_len_per_gpu=98304",
    )
    assert stages["critic_train"] == (None, 98304)
    assert stages["values"] == (None, 98304)
    assert stages["train"] == (None, None)


def test_megatron_budgets_are_per_gpu_times_context_parallel() -> None:
    """verl's Megatron passes multiply a per-GPU budget by the context-parallel size
    (megatron_actor.py, megatron_critic.py): verl's run_ppo_trainer_megatron.sh, CP 2, the
    actor's 2,400 tokens and the critic's 4,800."""
    megatron = (
        "actor_rollout_ref.actor.strategy=megatron",
        "actor_rollout_ref.ref.strategy=megatron",
        "critic.strategy=megatron",
        "actor_rollout_ref.actor.megatron.context_parallel_size=2",
        "actor_rollout_ref.ref.megatron.context_parallel_size=2",
        "critic.megatron.context_parallel_size=2",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=2400",
        "critic.ppo_max_token_len_per_gpu=4800",
    )
    config = load_config(VERL, overrides=[*WORKLOAD, *megatron])
    assert config.workload is not None
    assert config.workload.micro_batch_tokens == 4800
    assert config.workload.logprob_micro_batch_tokens == 4800  # the actor's, by default
    stages = {s.name: (s.micro_batch_size, s.micro_batch_tokens) for s in config.pipeline.stages}
    assert stages["critic_train"] == (None, 9600)
    assert stages["values"] == (None, 9600)
    assert stages["old_logprob"] == (None, None)


def test_a_megatron_critics_values_run_its_update_micro_batch() -> None:
    """megatron_workers.py ``compute_values`` reads ``ppo_micro_batch_size_per_gpu``: a
    ``forward_micro_batch_size_per_gpu`` (an FSDP critic's key) is not the Megatron one's."""
    stages = _stages(
        "critic.strategy=megatron",
        "critic.ppo_micro_batch_size_per_gpu=4",
        "critic.forward_micro_batch_size_per_gpu=16",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    )
    assert stages["values"] == (4, None)


def test_a_pass_without_dynamic_batches_counts_beside_an_actor_with_them() -> None:
    """The actor's dynamic batches on, the critic's off (``critic.use_dynamic_bsz=False``):
    the critic counts its micro-batches (budget 0), the rest take theirs."""
    stages = _stages(
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24000",
        "critic.use_dynamic_bsz=False",
        "critic.ppo_micro_batch_size_per_gpu=4",
    )
    assert stages["critic_train"] == (4, 0)
    assert stages["values"] == (4, 0)
    assert stages["old_logprob"] == (None, None)


def test_the_new_worker_implementations_critic_always_packs_by_tokens() -> None:
    """``trainer.use_legacy_worker_impl: disable``: the critic is a TrainingWorker whose
    engine batches by tokens (EngineConfig ``use_dynamic_bsz`` true): its update at
    ``ppo_max_token_len_per_gpu``, its values at ``ppo_infer_max_token_len_per_gpu``
    (32,768 by default: CriticConfig)."""
    stages = _stages(
        "trainer.use_legacy_worker_impl=disable",
        "critic.ppo_micro_batch_size_per_gpu=4",
        "critic.ppo_max_token_len_per_gpu=16000",
    )
    assert stages["critic_train"] == (4, 16000)
    assert stages["values"] == (4, 32768)


def test_a_reward_model_follows_the_critics_dynamic_batches() -> None:
    """reward_model.yaml: ``use_dynamic_bsz: ${critic.use_dynamic_bsz}``,
    ``forward_max_token_len_per_gpu: ${critic.forward_max_token_len_per_gpu}``."""
    rm = ("reward_model.enable=True", "reward_model.model.path=Qwen/Qwen2.5-7B-Instruct")
    stages = _stages(
        *rm,
        "critic.use_dynamic_bsz=True",
        "critic.ppo_max_token_len_per_gpu=65536",
    )
    assert stages["reward"] == (None, 65536)


def test_a_reward_loop_has_no_micro_batches() -> None:
    """``reward_model.use_reward_loop`` (verl's default now) serves the reward model on an
    inference engine: the legacy worker's micro-batch keys are not read."""
    stages = _stages(
        "reward_model.enable=True",
        "reward_model.model.path=Qwen/Qwen2.5-7B-Instruct",
        "reward_model.use_reward_loop=True",
        "reward_model.micro_batch_size_per_gpu=32",
    )
    assert stages["reward"] == (None, None)


def test_a_bad_critic_micro_batch_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as info:
        _stages("critic.ppo_micro_batch_size_per_gpu=-4")
    assert info.value.field == "critic.ppo_micro_batch_size_per_gpu"


ROLL: dict[str, object] = {
    "pretrain": "Qwen/Qwen2.5-7B",
    "rollout_batch_size": 64,
    "num_return_sequences_in_group": 8,
    "prompt_length": 1024,
    "response_length": 2048,
    "actor_train": {
        "training_args": {"per_device_train_batch_size": 2},
        "infer_batch_size": 4,
        "strategy_args": {"strategy_name": "megatron_train",
                          "strategy_config": {"use_distributed_optimizer": True}},
        "device_mapping": "list(range(0,8))",
    },
    "actor_infer": {"strategy_args": {"strategy_name": "vllm"},
                    "device_mapping": "list(range(0,8))"},
    "reference": {"strategy_args": {"strategy_name": "megatron_infer"},
                  "device_mapping": "list(range(0,8))"},
}  # fmt: skip
"""A ROLL RLVR file: the actor trains 2 sequences a micro-batch, computes old log-probs 4 at
a time; the reference gives no infer_batch_size (ROLL's default, 16)."""


def _roll(tmp_path: Path, **blocks: dict[str, object]) -> dict[str, tuple[int | None, int | None]]:
    import copy

    import yaml

    data = copy.deepcopy(ROLL)
    for name, extra in blocks.items():
        data[name] = {**data[name], **extra}  # type: ignore[dict-item]
    path = tmp_path / "rlvr.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(path)
    return {s.name: (s.micro_batch_size, s.micro_batch_tokens) for s in config.pipeline.stages}


def test_roll_forward_passes_run_each_workers_infer_batch_size(tmp_path: Path) -> None:
    """base_worker.py sets each forward pass's micro-batch from its worker's
    ``infer_batch_size`` (16 when absent): old log-probs 4, reference 16; training keeps the
    workload's 2."""
    stages = _roll(tmp_path)
    assert stages["old_logprob"] == (4, None)
    assert stages["ref_logprob"] == (16, None)
    assert stages["train"] == (None, None)


def test_roll_sequence_packing_and_dynamic_batches_are_token_budgets(tmp_path: Path) -> None:
    """``use_sequence_packing`` with ``algorithm: load_balance``: micro-batches of up to
    ``max_packed_sequence_length_train`` / ``_forward`` tokens; ``use_dynamic_batching_in_infer``:
    up to ``max_tokens_per_microbatch_in_infer``."""
    packing = {
        "use_sequence_packing": True,
        "sequence_packing_args": {
            "algorithm": "load_balance",
            "max_packed_sequence_length_train": 16384,
            "max_packed_sequence_length_forward": 32768,
        },
    }
    dynamic = {"use_dynamic_batching_in_infer": True, "max_tokens_per_microbatch_in_infer": 24576}
    stages = _roll(tmp_path, actor_train=packing, reference=dynamic)
    assert stages["train"] == (None, 16384)
    assert stages["old_logprob"] == (4, 32768)
    assert stages["ref_logprob"] == (16, 24576)


def test_roll_sequence_packing_by_default_packs_count_micro_batches(tmp_path: Path) -> None:
    """ROLL's default packing algorithm ``none`` (SequencePackingPacker) chunks each batch
    into micro-batches of the count and packs each: no token budget, and none needed (only
    ``load_balance`` asserts ``max_packed_sequence_length``)."""
    packing = {
        "use_sequence_packing": True,
        "sequence_packing_args": {"max_packed_sequence_length_forward": 32768},
    }
    stages = _roll(tmp_path, actor_train=packing, reference={"use_sequence_packing": True})
    assert stages["train"] == (None, None)
    assert stages["old_logprob"] == (4, None)
    assert stages["ref_logprob"] == (16, None)


def test_roll_dynamic_batching_wins_over_sequence_packing(tmp_path: Path) -> None:
    """megatron_strategy.py ``forward_step`` / ``train_step``: ``if
    use_dynamic_batching_in_*: ... elif use_sequence_packing``."""
    both = {
        "use_dynamic_batching_in_train": True,
        "max_tokens_per_microbatch_in_train": 12288,
        "use_dynamic_batching_in_infer": True,
        "max_tokens_per_microbatch_in_infer": 24576,
        "use_sequence_packing": True,
        "sequence_packing_args": {
            "algorithm": "load_balance",
            "max_packed_sequence_length_train": 8192,
            "max_packed_sequence_length_forward": 8192,
        },
    }
    stages = _roll(tmp_path, actor_train=both)
    assert stages["train"] == (None, 12288)
    assert stages["old_logprob"] == (4, 24576)


def test_roll_only_megatron_batches_by_tokens(tmp_path: Path) -> None:
    """FSDP2, DeepSpeed and HF strategies chunk every batch by the count (their
    ``forward_step`` / ``train_step`` read neither switch): their budgets are not theirs."""
    fsdp2 = {
        "strategy_args": {"strategy_name": "fsdp2_infer", "strategy_config": {}},
        "use_dynamic_batching_in_infer": True,
        "max_tokens_per_microbatch_in_infer": 24576,
        "use_sequence_packing": True,
        "sequence_packing_args": {"algorithm": "load_balance",
                                  "max_packed_sequence_length_forward": 8192},
    }  # fmt: skip
    stages = _roll(tmp_path, reference=fsdp2)
    assert stages["ref_logprob"] == (16, None)


def test_roll_a_bad_packing_algorithm_is_refused_naming_it(tmp_path: Path) -> None:
    packing = {"use_sequence_packing": True, "sequence_packing_args": {"algorithm": "greedy"}}
    with pytest.raises(ConfigError) as info:
        _roll(tmp_path, reference=packing)
    assert info.value.field == "reference.sequence_packing_args.algorithm"


def test_roll_load_balance_packing_without_a_budget_is_refused(tmp_path: Path) -> None:
    packing = {"use_sequence_packing": True, "sequence_packing_args": {"algorithm": "load_balance"}}
    with pytest.raises(ConfigError) as info:
        _roll(tmp_path, reference=packing)
    assert info.value.field == "reference.sequence_packing_args.max_packed_sequence_length_forward"


def test_roll_dynamic_batches_without_a_budget_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _roll(tmp_path, reference={"use_dynamic_batching_in_infer": True})
    assert info.value.field == "reference.max_tokens_per_microbatch_in_infer"


def test_roll_distillation_trains_the_students_micro_batch(tmp_path: Path) -> None:
    """On-policy distillation's trainer is ``student_train`` (ROLL maps it onto actor_train):
    its ``per_device_train_batch_size`` is the workload's micro-batch (it was read from an
    ``actor_train`` block the file does not have: 1), its ``infer_batch_size`` the old
    log-probs', a teacher's its own."""
    import yaml

    data = {
        "pretrain": "Qwen/Qwen2.5-7B",
        "rollout_batch_size": 16,
        "num_return_sequences_in_group": 4,
        "prompt_length": 1024,
        "response_length": 2048,
        "student_train": {
            **ROLL["actor_train"],
            "training_args": {"per_device_train_batch_size": 8},
        },  # type: ignore[dict-item]
        "student_infer": ROLL["actor_infer"],
        "teacher": {**ROLL["reference"], "infer_batch_size": 2},  # type: ignore[dict-item]
    }
    path = tmp_path / "opd.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(path)
    assert config.workload is not None and config.workload.micro_batch_size == 8
    stages = {s.name: s.micro_batch_size for s in config.pipeline.stages}
    assert stages["old_logprob"] == 4
    assert stages["ref_logprob"] == 2
    assert stages["train"] is None


def _agentic(tmp_path: Path, **blocks: dict[str, object] | None) -> Path:
    """A ROLL agentic file: ROLL's RLVR blocks and one Sokoban environment, with ``blocks``
    added (None: that block removed)."""
    import copy

    import yaml

    data: dict[str, object] = copy.deepcopy(ROLL)
    data["custom_envs"] = {"SimpleSokoban": {"max_steps": 5, "max_tokens_per_step": 64}}
    for name, block in blocks.items():
        if block is None:
            data.pop(name, None)
        else:
            data[name] = block
    path = tmp_path / "agentic.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_roll_an_engine_on_vllm_has_no_micro_batches(tmp_path: Path) -> None:
    """An agentic file's reward worker on vLLM (ROLL's deepeyes example) is an engine that
    batches its own requests: its ``infer_batch_size`` is no forward pass's micro-batch."""
    reward = {"strategy_args": {"strategy_name": "vllm"}, "infer_batch_size": 4,
              "device_mapping": "list(range(0,8))"}  # fmt: skip
    config = load_config(_agentic(tmp_path, reward=reward))
    stages = {s.name: (s.micro_batch_size, s.micro_batch_tokens) for s in config.pipeline.stages}
    assert stages["reward"] == (None, None)
    assert stages["old_logprob"] == (4, None)


def test_roll_agentic_distillation_trains_the_students_micro_batch(tmp_path: Path) -> None:
    """agentic_config.py maps ``student_train`` onto actor_train as the RLVR config does."""
    student = {**ROLL["actor_train"], "training_args": {"per_device_train_batch_size": 8}}  # type: ignore[dict-item]
    config = load_config(_agentic(tmp_path, actor_train=None, student_train=student))
    assert config.workload is not None and config.workload.micro_batch_size == 8


def test_a_megatron_actor_packs_unless_its_own_switch_says_not() -> None:
    """verl's Megatron passes run ``thd`` (packed) unless ``actor.megatron.use_remove_padding``
    is false (megatron_actor.py); ``model.use_remove_padding`` (false in
    ppo_megatron_trainer.yaml) is the FSDP passes' switch, and the dynamic batches' budgets
    count only packed."""
    megatron = ("actor_rollout_ref.actor.strategy=megatron",
                "actor_rollout_ref.model.use_remove_padding=false")  # fmt: skip
    config = load_config(VERL, overrides=[*WORKLOAD, *megatron])
    assert config.workload is not None and config.workload.packing is True
    padded = "actor_rollout_ref.actor.megatron.use_remove_padding=false"
    config = load_config(VERL, overrides=[*WORKLOAD, *megatron, padded])
    assert config.workload is not None and config.workload.packing is False


def test_roll_pads_but_where_a_megatron_worker_packs(tmp_path: Path) -> None:
    """ROLL pads every sample to ``sequence_length`` (functionals.py ``pad_to_length``) and
    runs the padded rows: the workload is padded. A Megatron worker's dynamic batches or
    sequence packing run each sequence at its length: that worker's stages pack; an FSDP2
    worker's dynamic batching leaves its rows padded."""
    import copy

    import yaml

    data = copy.deepcopy(ROLL)
    data["actor_train"] = {**data["actor_train"], "use_sequence_packing": True}  # type: ignore[dict-item]
    data["reference"] = {  # type: ignore[assignment]
        "strategy_args": {"strategy_name": "fsdp2_infer"},
        "use_dynamic_batching_in_infer": True,
        "max_tokens_per_microbatch_in_infer": 8192,
        "device_mapping": "list(range(0,8))",
    }
    path = tmp_path / "rlvr.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(path)
    assert config.workload is not None and config.workload.packing is False
    packing = {s.name: s.packing for s in config.pipeline.stages}
    assert packing["train"] is True and packing["old_logprob"] is True
    assert packing["ref_logprob"] is None
