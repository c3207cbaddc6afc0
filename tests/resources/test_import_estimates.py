"""Imported configs feed the estimator, and never keep a default cost in silence (issue 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.resources.inputs import Parallel, Rollout

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "importers"
VERL = FIXTURES / "verl" / "grpo.yaml"


def test_defaults_are_said_with_what_is_missing() -> None:
    cfg = load_config(ROOT / "examples" / "verl.yaml")
    (note,) = [w for w in cfg.warnings if "rlplex's defaults" in w]
    assert "lacks workload, cluster.gpu" in note
    # the hint is a --set that gives the first missing input (a workload here)
    assert "--set workload.prompts_per_step=64" in note
    assert not cfg.is_estimated("pipeline.stages.generate.seconds")
    gpu_only = load_config(
        ROOT / "examples" / "verl.yaml",
        overrides=["workload.prompts_per_step=8", "workload.prompt_tokens.mean=100",
                   "workload.prompt_tokens.max=200", "workload.response_tokens.mean=100",
                   "workload.response_tokens.max=200"],
    )  # fmt: skip
    (note,) = [w for w in gpu_only.warnings if "rlplex's defaults" in w]
    assert "lacks cluster.gpu (give them with --set, e.g. --set cluster.gpu=h100" in note


def test_a_gpu_preset_fills_an_imported_cluster() -> None:
    cfg = load_config(ROOT / "examples" / "verl.yaml", overrides=["cluster.gpu=h200"])
    assert cfg.cluster.gpu_memory_gb == 150.75
    assert cfg.is_estimated("cluster.gpu_memory_gb")


def test_an_imported_file_with_model_workload_and_gpu_is_estimated() -> None:
    small = load_config(VERL, overrides=["cluster.gpu=h100"])
    assert small.is_estimated("pipeline.stages.generate.seconds")
    assert small.is_estimated("roles.actor_train.states")
    assert not any("rlplex's defaults" in w for w in small.warnings)
    # The rule reward in verl's driver is the step's per-sequence controller work, which the
    # estimator prices (it used to keep the importer's 10 s default); the advantage keeps its.
    assert small.is_estimated("pipeline.stages.reward.seconds")
    assert small.pipeline.stage("reward").seconds != 10.0
    assert not small.is_estimated("pipeline.stages.advantage.seconds")
    bigger = load_config(
        VERL,
        overrides=[
            "cluster.gpu=h100",
            "actor_rollout_ref.model.path=Qwen/Qwen2.5-14B-Instruct",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
        ],
    )
    assert (
        bigger.roles["actor_infer"].states["weights"]
        > small.roles["actor_infer"].states["weights"] / 2
    )  # a model twice the size, on twice the TP
    assert (
        bigger.pipeline.stage("train").seconds > small.pipeline.stage("train").seconds
    )  # the model changed the plan's inputs, not nothing


def test_verl_roles_without_a_strategy_run_fsdp() -> None:
    """verl's trainer config defaults actor, ref and critic to FSDP; so does the importer."""
    cfg = load_config(ROOT / "tests" / "fixtures" / "importers" / "verl" / "self_first.yaml")
    for role in ("actor_train", "critic"):
        parallel = cfg.roles[role].parallel
        assert parallel is not None and parallel.fsdp, role


def test_verl_fsdp_runs_eager_kernels_unless_it_patches_in_liger() -> None:
    """verl's FSDP workers run Hugging Face modules (the format's eager default under FSDP);
    ``model.use_liger`` swaps in Liger's fused norm, rotary and SwiGLU kernels."""
    from rlplex.estimate.context import layer_kernels

    plain = load_config(VERL, overrides=["cluster.gpu=h100"])
    assert layer_kernels(plain.roles["actor_train"]) == "eager"
    assert plain.roles["actor_train"].parallel.kernels is None  # type: ignore[union-attr]
    liger = load_config(
        VERL, overrides=["cluster.gpu=h100", "actor_rollout_ref.model.use_liger=true"]
    )
    assert liger.roles["actor_train"].parallel.kernels == "fused"  # type: ignore[union-attr]
    assert (
        liger.pipeline.stage("train").seconds < plain.pipeline.stage("train").seconds
    )  # the eager traffic is gone


def test_verl_run_settings_reach_the_estimator() -> None:
    """The knobs real verl runs set (issue 18): engine, sequence parallel, offload, batching."""
    cfg = load_config(
        VERL,
        overrides=[
            "cluster.gpu=h100",
            "actor_rollout_ref.rollout.max_num_seqs=256",
            "actor_rollout_ref.rollout.gpu_memory_utilization=0.7",
            "actor_rollout_ref.rollout.enforce_eager=true",
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
            "actor_rollout_ref.actor.fsdp_config.param_offload=true",
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
            "actor_rollout_ref.actor.use_dynamic_bsz=true",
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384",
            "actor_rollout_ref.model.use_remove_padding=true",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
            "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=true",
            "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=32768",
        ],
    )
    engine = cfg.roles["actor_infer"].rollout
    assert engine is not None
    assert (engine.max_num_seqs, engine.gpu_memory_utilization, engine.cuda_graphs) == (
        256,
        0.7,
        False,
    )
    par = cfg.roles["actor_train"].parallel
    assert par is not None and par.sp == 2 and par.offload_params and par.offload_optimizer
    assert cfg.workload is not None
    assert cfg.workload.micro_batch_tokens == 16384 * 2
    assert cfg.workload.logprob_micro_batch_size == 16
    # The reference's Ulysses size defaults to the actor's (dp_ref.yaml), which multiplies its
    # budget (dp_actor.py) as the actor's does.
    assert cfg.workload.logprob_micro_batch_tokens == 32768 * 2
    assert cfg.workload.packing is True
    # verl's DataProto, padded to max_prompt_length + max_response_length: the default layout.
    assert cfg.workload.controller.padding == "max"
    assert cfg.workload.controller.bytes_per_token == 52
    prompts = cfg.workload.prompts_per_step
    assert cfg.workload.mini_batches >= 1 and prompts % cfg.workload.mini_batches == 0


LEGACY_VERL = """
# verl's trainer config of late 2024 (verl/trainer/config/ppo_trainer.yaml @ b40afd4b7, cut):
# global micro-batch sizes, no use_remove_padding, no use_kl_loss.
data: {train_batch_size: 256, max_prompt_length: 512, max_response_length: 256}
actor_rollout_ref:
  hybrid_engine: true
  model: {path: Qwen/Qwen2.5-0.5B-Instruct, enable_gradient_checkpointing: false}
  actor: {strategy: fsdp, ppo_mini_batch_size: 64, ppo_micro_batch_size: 16}
  ref: {log_prob_micro_batch_size: 32}
  rollout: {name: vllm, tensor_model_parallel_size: 1, log_prob_micro_batch_size: 64}
critic: {strategy: fsdp, ppo_micro_batch_size: 16, model: {path: Qwen/Qwen2.5-0.5B-Instruct}}
algorithm: {adv_estimator: gae, kl_ctrl: {type: fixed, kl_coef: 0.001}}
trainer: {nnodes: 1, n_gpus_per_node: 8}
cluster: {gpu: h100}
"""


def test_a_2024_verl_config_reads_as_that_verl_ran_it(tmp_path: Path) -> None:
    """Before 2025-01-27 verl's micro-batch sizes were global (divided over the GPUs), before
    2025-01-11 it padded every row, and in 2024 it always ran the reference policy."""
    path = tmp_path / "ppo_trainer.yaml"
    path.write_text(LEGACY_VERL, encoding="utf-8")
    cfg = load_config(path, format="verl")
    w = cfg.workload
    assert w is not None
    assert (w.micro_batch_size, w.logprob_micro_batch_size) == (16 // 8, 32 // 8)
    assert w.packing is False
    assert "reference" in cfg.roles and "critic" in cfg.roles
    assert cfg.pipeline.stage("ref_logprob").role == "reference"
    # A config of today's verl (per-GPU keys) is read as before.
    modern = LEGACY_VERL.replace("ppo_micro_batch_size: 16}", "ppo_micro_batch_size_per_gpu: 3}")
    path.write_text(modern, encoding="utf-8")
    cfg = load_config(path, format="verl")
    assert cfg.workload is not None and cfg.workload.micro_batch_size == 3
    assert cfg.workload.packing is True  # not set by the file: the format's default
    assert "reference" not in cfg.roles  # no KL switch on: verl's need_reference_policy
    assert not (cfg.roles["actor_infer"].rollout or Rollout()).vllm_v0


def test_a_2024_verl_config_ran_vllm_v0(tmp_path: Path) -> None:
    """verl before 2025-01-27 ran its own fork of vLLM <= 0.6.3 (``vllm<=0.6.3``), the V0
    engine; an HF rollout is no vLLM at all."""
    path = tmp_path / "ppo_trainer.yaml"
    path.write_text(LEGACY_VERL, encoding="utf-8")
    rollout = load_config(path, format="verl").roles["actor_infer"].rollout
    assert rollout is not None and rollout.vllm_v0 is True
    hf = load_config(path, format="verl", overrides=["actor_rollout_ref.rollout.name=hf"])
    assert not (hf.roles["actor_infer"].rollout or Rollout()).vllm_v0


def test_verl_without_legacy_workers_sends_the_batch_unpadded() -> None:
    """``trainer.use_legacy_worker_impl: disable``: verl's trainer strips the padding
    (``left_right_2_no_padding``) before each pass's dispatch."""
    cfg = load_config(VERL, overrides=["trainer.use_legacy_worker_impl=disable"])
    assert cfg.workload is not None and cfg.workload.controller.padding == "packed"
    cfg = load_config(VERL, overrides=["trainer.use_legacy_worker_impl=auto"])
    assert cfg.workload is not None and cfg.workload.controller.padding == "max"


@pytest.mark.parametrize("override", ["transfer_queue.enable=true", "trainer.data_plane=neoproto"])
def test_verl_data_planes_take_the_batch_off_the_controller(override: str) -> None:
    """verl's TransferQueue and NeoProto hand workers references, not the padded tensors."""
    cfg = load_config(VERL, overrides=[override])
    assert cfg.workload is not None and cfg.workload.controller.padding == "none"


def test_verl_rollout_drops_its_weights_unless_layered_summon() -> None:
    """verl's vLLM rollout sleeps at level 2 with vLLM >= 0.8.5 (the format's default) and at
    level 1 with ``layered_summon`` (verl/workers/rollout/vllm_rollout/vllm_rollout.py)."""
    cfg = load_config(VERL)
    assert (cfg.roles["actor_infer"].rollout or Rollout()).sleep_level == 2
    summoned = load_config(VERL, overrides=["actor_rollout_ref.rollout.layered_summon=true"])
    rollout = summoned.roles["actor_infer"].rollout
    assert rollout is not None and rollout.sleep_level == 1


def test_roll_vllm_sleeps_at_level_one_unless_the_file_says_two() -> None:
    """ROLL's vLLM strategy pops ``sleep_level`` from strategy_config with 1 as its default
    (roll/distributed/strategy/vllm_strategy.py); an SGLang engine keeps the format's 2."""
    path = FIXTURES / "roll" / "agentic_partial_gpu.yaml"
    rollout = load_config(path).roles["actor_infer"].rollout
    assert rollout is not None and rollout.sleep_level == 1
    two = load_config(
        path, overrides=["actor_infer.strategy_args.strategy_config.sleep_level=2"]
    ).roles["actor_infer"]
    assert two.rollout is not None and two.rollout.sleep_level == 2
    sglang = load_config(FIXTURES / "roll" / "rlvr_sglang_rewards.yaml").roles["actor_infer"]
    assert (sglang.rollout or Rollout()).sleep_level == 2


@pytest.mark.parametrize(("value", "v0"), [(None, False), (1, False), (0, True), ("0", True)])
def test_roll_vllm_use_v1_zero_runs_the_v0_engine(value: object, v0: bool) -> None:
    """ROLL exports ``strategy_config.VLLM_USE_V1`` (default 1) before its vLLM starts
    (roll/distributed/strategy/vllm_strategy.py): 0 is vLLM's V0 engine."""
    path = FIXTURES / "roll" / "agentic_partial_gpu.yaml"
    key = "actor_infer.strategy_args.strategy_config.VLLM_USE_V1"
    overrides = [] if value is None else [f"{key}={value}"]
    rollout = load_config(path, overrides=overrides).roles["actor_infer"].rollout
    assert (rollout or Rollout()).vllm_v0 is v0


def test_verl_global_micro_batches_split_over_data_parallel_ranks() -> None:
    """verl still reads the global ``ppo_micro_batch_size`` and ``log_prob_micro_batch_size``
    (sequences over the whole trainer) and divides them by its data-parallel ranks: GPUs over
    Ulysses sp (fsdp_workers.py), GPUs over tp x pp x cp (megatron_workers.py). Bug: only a
    2024 config's were read; verl's device-tuning LoRA scripts set nothing else, and imported
    with micro-batches of 1."""
    unset = "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null"
    fsdp = load_config(
        VERL,
        overrides=[
            unset,
            "actor_rollout_ref.actor.ppo_micro_batch_size=64",
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size=32",
        ],
    )
    assert fsdp.workload is not None
    assert fsdp.workload.micro_batch_size == 64 // (8 // 2)
    assert fsdp.workload.logprob_micro_batch_size == 32 // (8 // 2)
    megatron = load_config(
        VERL,
        overrides=[
            unset,
            "actor_rollout_ref.actor.ppo_micro_batch_size=64",
            "actor_rollout_ref.actor.strategy=megatron",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        ],
    )
    assert megatron.workload is not None and megatron.workload.micro_batch_size == 64 // 4


def test_a_gpu_preset_reaches_an_rlinf_config_whose_cluster_block_lacks_it() -> None:
    """RLinf files have their own ``cluster`` block (num_nodes, component_placement): a native
    cluster field it lacks (``cluster.gpu``, ``cluster.gpu_memory_gb``) sets the native cluster,
    as it does on ROLL and verl files; the block's own keys still set the block (bug: the GPU
    went into RLinf's block and the estimate said the config needed cluster.gpu)."""
    path = FIXTURES / "rlinf" / "node_groups.yaml"
    cfg = load_config(path, overrides=["cluster.gpu=h100", "cluster.gpu_memory_gb=80"])
    assert cfg.cluster.gpu == "h100" and cfg.cluster.gpu_memory_gb == 80
    assert cfg.cluster.nodes == 3


def test_verl_megatron_shards_the_optimizer_and_fsdp_references_hold_bf16_logits() -> None:
    """verl's Megatron actor and critic run the distributed optimizer by default
    (``megatron.use_distributed_optimizer: True``): ZeRO-1 (bug: imported unsharded, and
    verl's own Megatron PPO examples did not fit). Its FSDP passes compute log-probs over the
    model's bf16 logits (flash-attention's cross entropy), the actor's with their entropy."""
    megatron = load_config(
        VERL,
        overrides=[
            "actor_rollout_ref.actor.strategy=megatron",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        ],
    )
    par = megatron.roles["actor_train"].parallel
    assert par is not None and par.zero == 1
    assert par.sequence_parallel  # verl's megatron default: sequence_parallel True
    no_sp = load_config(
        VERL,
        overrides=[
            "actor_rollout_ref.actor.strategy=megatron",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
            "actor_rollout_ref.actor.megatron.sequence_parallel=false",
        ],
    )
    assert not (no_sp.roles["actor_train"].parallel or Parallel()).sequence_parallel
    off = load_config(
        VERL,
        overrides=[
            "actor_rollout_ref.actor.strategy=megatron",
            "actor_rollout_ref.actor.megatron.use_distributed_optimizer=false",
        ],
    )
    assert (off.roles["actor_train"].parallel or Parallel()).zero == 0
    fsdp = load_config(VERL, overrides=["actor_rollout_ref.actor.use_kl_loss=true"])
    assert (fsdp.roles["reference"].parallel or Parallel()).logits == "bf16"
    # the actor's old log-probs compute the logits' entropy (metrics), its training only with
    # an entropy term in the loss
    assert (fsdp.roles["actor_train"].parallel or Parallel()).logits == "bf16_entropy_forward"
    entropy = load_config(VERL, overrides=["actor_rollout_ref.actor.entropy_coeff=0.001"])
    # dp_actor.py compiles the entropy by default (use_torch_compile): 4 bytes, not 12
    compiled = (entropy.roles["actor_train"].parallel or Parallel()).logits
    assert compiled == "bf16_entropy_compiled"
    for off in ("actor.use_torch_compile", "model.use_remove_padding"):
        # compile switched off, or padded rows (that path calls the entropy eager: a bug
        # until found in review, 2026-11-29)
        eager = load_config(
            VERL,
            overrides=[
                "actor_rollout_ref.actor.entropy_coeff=0.001",
                f"actor_rollout_ref.{off}=false",
            ],
        )
        assert (eager.roles["actor_train"].parallel or Parallel()).logits == "bf16_entropy"


@pytest.mark.parametrize(("value", "zero"), [(None, 0), (True, 1), (False, 0)])
def test_rlinf_megatron_distributed_optimizer_shards_the_optimizer(
    value: object, zero: int
) -> None:
    """RLinf's Megatron actor with ``actor.optim.use_distributed_optimizer: True`` (its math
    examples) shards the optimizer state: ZeRO-1 (bug: imported unsharded)."""
    path = FIXTURES / "rlinf" / "one_key_tp.yaml"
    overrides = [] if value is None else [f"actor.optim.use_distributed_optimizer={value}"]
    cfg = load_config(path, overrides=overrides, format="rlinf")
    assert (cfg.roles["actor_train"].parallel or Parallel()).zero == zero


def test_roll_megatron_expert_and_context_parallel_are_read() -> None:
    """ROLL's megatron strategies set ``expert_model_parallel_size`` and
    ``context_parallel_size`` (its Qwen3-Next and Qwen3-MoE examples: ep 8). Bug: only tp and
    pp were read, so a MoE trainer held every expert on each GPU."""
    path = FIXTURES / "roll" / "rlvr_sglang_rewards.yaml"
    key = "actor_train.strategy_args.strategy_config"
    cfg = load_config(
        path, overrides=[f"{key}.expert_model_parallel_size=8", f"{key}.context_parallel_size=2"]
    )
    parallel = cfg.roles["actor_train"].parallel or Parallel()
    assert (parallel.ep, parallel.sp, parallel.tp, parallel.pp) == (8, 2, 2, 2)
    assert (load_config(path).roles["actor_train"].parallel or Parallel()).ep == 1


def test_rlinf_megatron_expert_and_context_parallel_are_read() -> None:
    """RLinf's Megatron actor sets ``actor.model.expert_model_parallel_size`` (its Qwen3-30B
    and Moonlight math examples: 8). Bug: ignored, every expert on each GPU."""
    path = FIXTURES / "rlinf" / "one_key_tp.yaml"
    overrides = ["actor.model.expert_model_parallel_size=8", "actor.model.context_parallel_size=2"]
    cfg = load_config(path, overrides=overrides, format="rlinf")
    parallel = cfg.roles["actor_train"].parallel or Parallel()
    assert (parallel.ep, parallel.sp) == (8, 2)


@pytest.mark.parametrize(
    ("value", "model"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("${reward_pretrain}", "Qwen/Qwen3-8B"),
        ("${pretrain}", None),  # the actor's own model: nothing to say
        (None, None),
    ],
)
def test_roll_reward_model_loads_its_own_checkpoint(value: str | None, model: str | None) -> None:
    """A ROLL reward or judge block names its model in ``model_args.model_name_or_path``,
    often ``${reward_pretrain}``. Bug: every role took the actor's model, so ROLL's Qwen3-235B
    example priced its 7B judge as a 235B model."""
    path = FIXTURES / "roll" / "rlvr_sglang_rewards.yaml"
    overrides = ["reward_pretrain=Qwen/Qwen3-8B"]
    if value is not None:
        overrides.append(f"rewards.llm_judge.model_args.model_name_or_path={value}")
    cfg = load_config(path, overrides=overrides)
    assert cfg.model == "Qwen/Qwen3-30B-A3B-Base"
    assert cfg.roles["llm_judge"].model == model


def test_verl_critic_and_reward_model_load_their_own_checkpoints() -> None:
    """``critic.model.path`` and ``reward_model.model.path`` name the critic's and the reward
    model's checkpoints. Bug: both took the actor's model."""
    overrides = [
        "reward_model.enable=true",
        "reward_model.model.path=Qwen/Qwen2.5-1.5B",
        "algorithm.adv_estimator=gae",
        "critic.model.path=Qwen/Qwen2.5-3B",
    ]
    cfg = load_config(VERL, overrides=overrides)
    assert cfg.model == "Qwen/Qwen2.5-7B-Instruct"
    assert cfg.roles["critic"].model == "Qwen/Qwen2.5-3B"
    assert cfg.roles["reward"].model == "Qwen/Qwen2.5-1.5B"
    assert cfg.roles["actor_train"].model is None


def test_verl_dapo_dynamic_sampling_generates_more_than_it_trains() -> None:
    """verl's DAPO trainer generates ``data.gen_batch_size`` prompts a round and keeps the
    groups whose rewards differ until ``data.train_batch_size`` are kept."""
    cfg = load_config(VERL, overrides=["cluster.gpu=h100"])
    assert cfg.workload is not None and cfg.workload.generated_per_trained == 1.0
    trained = cfg.workload.prompts_per_step
    dapo = load_config(
        VERL,
        overrides=[
            "cluster.gpu=h100",
            "algorithm.filter_groups.enable=true",
            f"data.gen_batch_size={trained * 3}",
        ],
    )
    assert dapo.workload is not None and dapo.workload.generated_per_trained == 3.0
    assert dapo.workload.prompts_per_step == trained
    off = load_config(VERL, overrides=["cluster.gpu=h100", f"data.gen_batch_size={trained * 3}"])
    assert off.workload is not None and off.workload.generated_per_trained == 1.0
    for bad in ("12.5", str(trained // 2)):
        with pytest.raises(ConfigError) as info:
            load_config(VERL, overrides=["algorithm.filter_groups.enable=true",
                                         f"data.gen_batch_size={bad}"])  # fmt: skip
        assert info.value.field == "data.gen_batch_size"


def test_verl_fully_async_dynamic_sampling_streams_one_prompt_at_a_time(tmp_path: Path) -> None:
    """Found in review (2026-11-29): fully async needs ``train_batch_size=0
    gen_batch_size=1``; with DAPO's filter on, the pair was refused as a ratio."""
    text = (
        "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
        "algorithm: {adv_estimator: grpo, filter_groups: {enable: true}}\n"
        "async_training: {staleness_threshold: 0.5, trigger_parameter_sync_step: 2}\n"
        "data: {train_batch_size: 0, gen_batch_size: 1, max_prompt_length: 512,"
        " max_response_length: 1024}\n"
        "actor_rollout_ref: {model: {path: Qwen/Qwen2.5-7B}, rollout: {n: 4},"
        " actor: {ppo_mini_batch_size: 32}}\n"
    )
    path = tmp_path / "fa.yaml"
    path.write_text(text)
    cfg = load_config(path)
    assert cfg.workload is not None and cfg.workload.generated_per_trained == 1.0
    assert cfg.workload.prompts_per_step == 64  # mini-batch x trigger x require_batches


def test_roll_strategies_outside_megatron_take_the_plain_log_softmax() -> None:
    """ROLL's FSDP2, DeepSpeed and Hugging Face strategies compute log-probs with
    ``log_probs_from_logits`` (``log_softmax(logits.float())``) and then the logits' fp32
    entropy for the metrics; training takes the entropy only with ``entropy_loss_coef`` > 0.
    Megatron's vocab-parallel path keeps the default."""
    fixture = FIXTURES / "roll" / "agentic_partial_gpu.yaml"
    cfg = load_config(fixture)
    for role in ("actor_train", "reference"):
        parallel = cfg.roles[role].parallel
        assert parallel is not None, role
        assert parallel.logits == "fp32_log_softmax_entropy_forward", role
    entropy = load_config(fixture, overrides=["entropy_loss_coef=0.01"])
    assert entropy.roles["actor_train"].parallel.logits == "fp32_log_softmax_entropy"
    with pytest.raises(ConfigError) as err:
        load_config(fixture, overrides=["entropy_loss_coef=lots"])
    assert err.value.field == "entropy_loss_coef"
    megatron = load_config(ROOT / "examples" / "roll.yaml").roles["actor_train"].parallel
    assert megatron is not None and megatron.logits == "fp32"
