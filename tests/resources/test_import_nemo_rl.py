"""NeMo RL GRPO configs read as NeMo RL reads them (nemo_rl/utils/config.py inheritance,
nemo_rl/algorithms/grpo.py ``setup``): placement, the trainer's sizes, the workload.

Fixtures under ``tests/fixtures/importers/nemo_rl/`` are hand-written in the shape of NeMo
RL's examples/configs (a base file, performance recipes inheriting it by path); variants are
written per test from small YAML strings.
"""
# ruff: noqa: E501 -- exact error messages read best on one line

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.config.formats import detect_format
from rlplex.errors import ConfigError
from rlplex.plan.planner import make_plan
from rlplex.resources.importers.compose import inherit
from rlplex.resources.yaml_io import load_yaml_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "nemo_rl"
RECIPES = FIXTURES / "recipes" / "performance"
ONPOLICY = RECIPES / "grpo-qwen3-30ba3b-4n8g.yaml"
ONE_OFF = RECIPES / "grpo-qwen3-30ba3b-4n8g-async-1off.yaml"
LENGTHS = (
    "cluster.gpu=h100",
    "workload.prompt_tokens.mean=100",
    "workload.prompt_tokens.max=512",
    "workload.response_tokens.mean=3103",
    "workload.response_tokens.max=3996",
)


def recipe(tmp_path: Path, body: dict, name: str = "recipe.yaml") -> Path:
    """A recipe inheriting the fixture base by path, with ``body`` over it."""
    path = tmp_path / name
    base = FIXTURES / "grpo_base.yaml"
    path.write_text(yaml.safe_dump({"defaults": str(base), **body}))
    return path


def error(path: Path, *overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides=overrides)
    return info.value


def test_detected_from_the_file_as_written() -> None:
    assert detect_format(load_yaml_file(ONPOLICY)) == "nemo_rl"
    assert detect_format(load_yaml_file(ONE_OFF)) == "nemo_rl"  # only defaults and grpo/policy
    assert detect_format({"defaults": "../base.yaml", "grpo": {}}) == "nemo_rl"
    assert detect_format({"defaults": ["ppo_trainer", "_self_"]}) == "native"  # Hydra's groups
    assert detect_format({"eval": {}, "generation": {}}) == "nemo_rl"


def test_inheritance_merges_parents_then_the_file_and_resolves_mul() -> None:
    data = inherit(load_yaml_file(ONE_OFF), str(ONE_OFF)).data
    assert data["policy"]["model_name"] == "Qwen/Qwen3-30B-A3B"  # from the middle file
    assert data["policy"]["generation"]["colocated"]["enabled"] is False  # from the file
    assert data["env"]["math"]["num_workers"] == 8  # from the base
    # ${mul:${policy.max_total_sequence_length}, ${policy.logprob_batch_size}} = 4096 x 4
    assert data["policy"]["sequence_packing"]["logprob_mb_tokens"] == 16384
    assert data["policy"]["generation"]["max_new_tokens"] == 4096


def test_override_marker_replaces_the_parents_section(tmp_path: Path) -> None:
    path = recipe(tmp_path, {"env": {"_override_": True, "code": {"num_workers": 3}}})
    data = inherit(load_yaml_file(path), str(path)).data
    assert data["env"] == {"code": {"num_workers": 3}}


def test_colocated_megatron_recipe() -> None:
    cfg = load_config(ONPOLICY, overrides=LENGTHS[1:3])  # the prompt: NeMo RL's file lacks it
    assert cfg.format == "nemo_rl" and cfg.cluster.nodes == 4 and cfg.cluster.gpus_per_node == 8
    assert cfg.pipeline.mode == "sync"
    train, infer = cfg.roles["actor_train"], cfg.roles["actor_infer"]
    assert train.devices == infer.devices == tuple(range(32))
    assert infer.num_gpus_per_worker == 4  # vllm_cfg.tensor_parallel_size
    assert infer.rollout is not None and infer.rollout.sleep_level == 1
    assert infer.rollout.gpu_memory_utilization == 0.6 and infer.rollout.cuda_graphs
    p = train.parallel
    assert p is not None and (p.tp, p.pp, p.ep, p.zero, p.recompute) == (2, 1, 8, 1, False)
    ref = cfg.roles["reference"]
    assert ref.devices == train.devices and ref.parallel is not None
    assert (ref.parallel.tp, ref.parallel.ep, ref.parallel.zero) == (2, 8, 0)
    assert cfg.roles["rewards"].world_size == 8 and not cfg.roles["rewards"].devices
    stages = {s.name: s.role for s in cfg.pipeline.stages}
    assert stages["ref_logprob"] == "reference" and stages["old_logprob"] == "actor_train"
    assert stages["reward"] == "rewards"
    assert cfg.model == "Qwen/Qwen3-30B-A3B"
    w = cfg.workload
    assert w is not None and (w.prompts_per_step, w.samples_per_prompt) == (64, 32)
    assert w.mini_batches == 4  # 64 x 32 / train_global_batch_size 512
    assert (w.micro_batch_size, w.logprob_micro_batch_size) == (1, 4)
    assert w.packing and (w.micro_batch_tokens, w.logprob_micro_batch_tokens) == (4096, 16384)
    assert w.controller.padding == "longest" and w.controller.bytes_per_token == 27
    assert not w.controller.per_rank


def test_one_step_off_recipe_splits_nodes_trainer_first() -> None:
    cfg = load_config(ONE_OFF)
    assert cfg.pipeline.mode == "async" and cfg.pipeline.max_staleness == 1
    assert cfg.roles["actor_train"].devices == tuple(range(16))  # the train cluster is made first
    infer = cfg.roles["actor_infer"]
    assert infer.devices == tuple(range(16, 32))
    assert infer.rollout is not None and infer.rollout.in_flight_weight_updates
    assert infer.rollout.sleep_level == 2  # never sleeps: the format's default, unused
    assert infer.rollout.gpu_memory_utilization == 0.8


def test_single_node_split_gives_the_engines_the_last_gpus(tmp_path: Path) -> None:
    path = recipe(tmp_path, {
        "cluster": {"num_nodes": 1, "gpus_per_node": 8},
        "policy": {"generation": {"colocated": {"enabled": False, "resources": {"gpus_per_node": 2}}}},
    })  # fmt: skip
    cfg = load_config(path)
    assert cfg.roles["actor_train"].devices == tuple(range(6))
    assert cfg.roles["actor_infer"].devices == (6, 7)


def test_dtensor_trainer_with_offload_and_lora(tmp_path: Path) -> None:
    path = recipe(tmp_path, {
        "cluster": {"num_nodes": 1, "gpus_per_node": 8},
        "policy": {"dtensor_cfg": {"tensor_parallel_size": 2, "cpu_offload": True,
                                   "activation_checkpointing": True,
                                   "lora_cfg": {"enabled": True, "dim": 16}}},
    })  # fmt: skip
    cfg = load_config(path)
    p = cfg.roles["actor_train"].parallel
    assert p is not None and p.fsdp and p.tp == 2 and p.recompute
    assert p.offload_params and p.offload_optimizer
    assert cfg.roles["actor_train"].lora is not None and cfg.roles["actor_train"].lora.rank == 16
    # NeMo RL swaps the reference's full weights in from host memory, LoRA or not.
    assert {s.name: s.role for s in cfg.pipeline.stages}["ref_logprob"] == "reference"
    # Tensor parallel: the vocab-parallel log-probs work on their fp32 shard in place.
    assert p.logits == "fp32"


def test_dtensor_without_tensor_parallel_takes_the_plain_log_softmax(tmp_path: Path) -> None:
    """One rank's logits are a plain tensor: ``log_softmax(logits.float())`` keeps the bf16
    logits, their fp32 copy and the log-softmax (10 bytes a logit, 14 training)."""
    path = recipe(tmp_path, {
        "cluster": {"num_nodes": 1, "gpus_per_node": 8},
        "policy": {"dtensor_cfg": {"tensor_parallel_size": 1}},
    })  # fmt: skip
    cfg = load_config(path)
    p = cfg.roles["actor_train"].parallel
    assert p is not None and p.fsdp and p.logits == "fp32_log_softmax"
    # The reference's log-prob pass runs the same worker code.
    ref = cfg.roles["reference"].parallel
    assert ref is not None and ref.logits == "fp32_log_softmax"
    # Context parallelism makes the logits a DTensor: the vocab-parallel path.
    cp = load_config(path, overrides=["policy.dtensor_cfg.context_parallel_size=2"])
    assert cp.roles["actor_train"].parallel.logits == "fp32"


def test_skipped_reference_and_fp8(tmp_path: Path) -> None:
    path = recipe(tmp_path, {
        "grpo": {"skip_reference_policy_logprobs_calculation": True},
        "policy": {"megatron_cfg": {"enabled": True, "fp8_cfg": {"enabled": True}},
                "dtensor_cfg": {"enabled": False},
                   "generation": {"vllm_cfg": {"precision": "fp8"}}},
    })  # fmt: skip
    cfg = load_config(path)
    assert "reference" not in cfg.roles
    assert not any(s.name.startswith("ref_logprob") for s in cfg.pipeline.stages)
    assert cfg.roles["actor_train"].precision == "fp8"
    assert cfg.roles["actor_infer"].precision == "fp8"


def test_neither_packing_nor_dynamic_batching_pads(tmp_path: Path) -> None:
    path = recipe(tmp_path, {"policy": {"sequence_packing": {"enabled": False}}})
    w = load_config(path, overrides=LENGTHS[1:3]).workload
    assert w is not None and not w.packing and w.micro_batch_tokens is None


def test_prompt_length_only_where_the_file_bounds_it(tmp_path: Path) -> None:
    # NeMo RL's default data.max_input_seq_length is the total: no prompt bound.
    path = recipe(tmp_path, {"policy": {"max_total_sequence_length": 4096}})
    native_load = load_config(
        path, overrides=["workload.prompt_tokens.mean=100", "workload.prompt_tokens.max=512"]
    ).workload
    assert native_load is not None and native_load.response_tokens.max == 4096
    bounded = recipe(
        tmp_path,
        {"policy": {"max_total_sequence_length": 4096}, "data": {"max_input_seq_length": 1024}},
        "bounded.yaml",
    )
    w = load_config(bounded).workload
    assert w is not None and (w.prompt_tokens.mean, w.prompt_tokens.max) == (512, 1024)
    assert w.response_tokens.max == 4096 - 512  # the engine's max_model_len bounds both


def test_estimate_needs_the_prompt_and_says_so() -> None:
    out = CliRunner().invoke(app, ["estimate", str(ONPOLICY), "--set", "cluster.gpu=h100"])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit)
    assert "workload.prompt_tokens" in out.stderr


def test_recipe_estimates_and_plans_with_the_lengths() -> None:
    for path in (ONPOLICY, ONE_OFF):
        cfg = load_config(path, overrides=LENGTHS)
        plan = make_plan(cfg)
        assert plan.period_s > 0
        assert all(s.seconds is not None and s.seconds > 0
                   for s in cfg.pipeline.stages if s.name in ("generate", "train"))  # fmt: skip


def test_older_releases_per_rank_controller_by_set() -> None:
    cfg = load_config(ONPOLICY, overrides=[*LENGTHS, "workload.controller.per_rank=true"])
    assert cfg.workload is not None and cfg.workload.controller.per_rank


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (
            {"sft": {"max_num_epochs": 1}, "grpo": None},
            "sft",
            "a NeMo RL SFT config, not an RL training step",
        ),
        ({"dpo": {"max_num_epochs": 1}, "grpo": None}, "dpo", "a NeMo RL DPO config"),
        (
            {"policy": {"generation": {"backend": "sglang"}}},
            "policy.generation.backend",
            "vLLM generation only",
        ),
        (
            {
                "cluster": {"num_nodes": 2, "gpus_per_node": 8},
                "policy": {
                    "generation": {
                        "colocated": {
                            "enabled": False,
                            "resources": {"num_nodes": 2, "gpus_per_node": 8},
                        }
                    }
                },
            },
            "policy.generation.colocated.resources.num_nodes",
            "leaves the trainer no node",
        ),
        (
            {
                "cluster": {"num_nodes": 2, "gpus_per_node": 8},
                "policy": {
                    "generation": {
                        "colocated": {
                            "enabled": False,
                            "resources": {"num_nodes": 1, "gpus_per_node": 4},
                        }
                    }
                },
            },
            "policy.generation.colocated.resources.gpus_per_node",
            "must equal cluster.gpus_per_node (8)",
        ),
        (
            {
                "cluster": {"num_nodes": 1, "gpus_per_node": 8},
                "policy": {"generation": {"colocated": {"enabled": False}}},
            },
            "policy.generation.colocated.resources.gpus_per_node",
            "is missing",
        ),
        (
            {
                "cluster": {"num_nodes": 1, "gpus_per_node": 8},
                "policy": {"generation": {"vllm_cfg": {"tensor_parallel_size": 3}}},
            },
            "policy.generation.vllm_cfg.tensor_parallel_size",
            "does not divide the role's 8 devices",
        ),
        (
            {"policy": {"megatron_cfg": {"enabled": True}}},
            "policy.megatron_cfg.enabled",
            "both Megatron and DTensor are enabled",
        ),
        (
            {"policy": {"dtensor_cfg": {"enabled": False}}},
            "policy.megatron_cfg.enabled",
            "neither Megatron nor DTensor",
        ),
        (
            {"policy": {"dynamic_batching": {"enabled": True}}},
            "policy.dynamic_batching.enabled",
            "both enabled",
        ),
        (
            {"policy": {"dtensor_cfg": {"tensor_parallel_size": "two"}}},
            "policy.dtensor_cfg.tensor_parallel_size",
            "must be an integer >= 1",
        ),
        (
            {"grpo": {"async_grpo": {"enabled": True}}},
            "policy.generation.colocated.enabled",
            "needs generation on its own GPUs",
        ),
        (
            {
                "cluster": {"num_nodes": 2, "gpus_per_node": 8},
                "policy": {
                    "generation": {"colocated": {"enabled": False, "resources": {"num_nodes": 1}}}
                },
            },
            "policy.generation.colocated.resources.gpus_per_node",
            "must equal cluster.gpus_per_node (8)",
        ),
        (
            {
                "cluster": {"num_nodes": 1, "gpus_per_node": 8},
                "policy": {
                    "generation": {
                        "colocated": {
                            "enabled": False,
                            "resources": {"gpus_per_node": 2, "num_nodes": 2},
                        }
                    }
                },
            },
            "policy.generation.colocated.resources.num_nodes",
            "must be 1 or null",
        ),
    ],
)
def test_errors_name_the_field(tmp_path: Path, body: dict, field: str, says: str) -> None:
    if body.get("grpo", {}) is None:  # a non-RL file: no grpo section at all
        body = {k: v for k, v in body.items() if k != "grpo"}
        path = tmp_path / "other.yaml"
        path.write_text(yaml.safe_dump({"policy": {"model_name": "x"}, **body}))
    else:
        path = recipe(tmp_path, body)
    exc = error(path)
    assert exc.field == field and says in str(exc)
    assert str(path) in str(exc)


def test_inheritance_errors(tmp_path: Path) -> None:
    loop = tmp_path / "loop.yaml"
    loop.write_text("defaults: loop.yaml\npolicy: {model_name: x}\n")
    exc = error(loop)
    assert exc.field == "defaults" and "inherits from itself" in str(exc)
    orphan = tmp_path / "orphan.yaml"
    orphan.write_text(
        "defaults: nowhere/base.yaml\ngrpo: {num_prompts_per_step: 8}\npolicy: {model_name: x}\n"
    )
    exc = error(orphan)
    assert exc.field == "cluster.num_nodes" and "nowhere/base.yaml" in str(exc)


def test_cli_refuses_an_sft_config_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "sft.yaml"
    path.write_text("sft: {max_num_epochs: 1}\npolicy: {model_name: x}\n")
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit)
    assert out.stderr.strip().count("\n") == 0 and "SFT config" in out.stderr


def test_ppo_value_model_is_a_critic_on_the_trainer_gpus(tmp_path: Path) -> None:
    base = yaml.safe_load((FIXTURES / "grpo_base.yaml").read_text())
    grpo = base.pop("grpo")
    ppo = {k: v for k, v in grpo.items() if k != "skip_reference_policy_logprobs_calculation"}
    body = {
        **base,
        "ppo": ppo,
        "cluster": {"num_nodes": 1, "gpus_per_node": 8},
        "value": {"model_name": "Qwen/Qwen2.5-0.5B",
                  "dtensor_cfg": {"enabled": True, "tensor_parallel_size": 2}},
    }  # fmt: skip
    path = tmp_path / "ppo.yaml"
    path.write_text(yaml.safe_dump(body))
    cfg = load_config(path, overrides=LENGTHS[1:3])
    critic = cfg.roles["critic"]
    assert critic.devices == cfg.roles["actor_train"].devices == tuple(range(8))
    assert critic.model == "Qwen/Qwen2.5-0.5B"
    assert critic.parallel is not None and critic.parallel.fsdp and critic.parallel.tp == 2
    stages = {s.name: s.role for s in cfg.pipeline.stages}
    assert stages["values"] == "critic" and stages["critic_train"] == "critic"
    assert "ref_logprob" not in stages  # PPO skips the reference unless told not to
    assert cfg.workload is not None and cfg.workload.epochs == 4  # ppo_epochs' default


def test_no_reference_at_a_kl_penalty_of_zero(tmp_path: Path) -> None:
    path = recipe(tmp_path, {"loss_fn": {"reference_policy_kl_penalty": 0.0}})
    cfg = load_config(path, overrides=LENGTHS[1:3])
    assert "reference" not in cfg.roles
    assert not any(s.name == "ref_logprob" for s in cfg.pipeline.stages)


def test_an_absent_kl_penalty_is_nemo_rls_default_and_a_negative_one_loads_no_reference(
    tmp_path: Path,
) -> None:
    # ClippedPGLossConfig's default is 0.01, and grpo.py loads the reference only above 0.
    base = yaml.safe_load((FIXTURES / "grpo_base.yaml").read_text())
    del base["loss_fn"]["reference_policy_kl_penalty"]
    path = tmp_path / "no_kl.yaml"
    path.write_text(yaml.safe_dump(base))
    cfg = load_config(path, overrides=LENGTHS[1:3])
    assert "reference" in cfg.roles
    assert any(s.name == "ref_logprob" for s in cfg.pipeline.stages)
    negative = recipe(tmp_path, {"loss_fn": {"reference_policy_kl_penalty": -0.1}})
    assert "reference" not in load_config(negative, overrides=LENGTHS[1:3]).roles


def test_forced_on_policy_ratio_skips_the_old_log_probs(tmp_path: Path) -> None:
    path = recipe(tmp_path, {"loss_fn": {"force_on_policy_ratio": True}})
    stages = {s.name: s for s in load_config(path, overrides=LENGTHS[1:3]).pipeline.stages}
    assert "old_logprob" not in stages and stages["train"].after == ("ref_logprob",)
    checked = recipe(
        tmp_path,
        {"loss_fn": {"force_on_policy_ratio": True}, "grpo": {"seq_logprob_error_threshold": 2.0}},
        "checked.yaml",
    )
    assert any(s.name == "old_logprob" for s in load_config(checked).pipeline.stages)


def test_reward_model_environment_takes_its_gpus(tmp_path: Path) -> None:
    rm_env = {
        "reward_model": {
            "model_name": "Qwen/Qwen3-0.6B",
            "resources": {"num_nodes": 1, "gpus_per_node": 2},
            "dtensor_cfg": {"enabled": True, "tensor_parallel_size": 1},
        }
    }
    one = recipe(tmp_path, {
        "cluster": {"num_nodes": 1, "gpus_per_node": 8},
        "data": {"default": {"env_name": "reward_model"}}, "env": rm_env,
    })  # fmt: skip
    cfg = load_config(one)
    assert cfg.roles["actor_train"].devices == cfg.roles["actor_infer"].devices == tuple(range(6))
    assert cfg.roles["reward"].devices == (6, 7) and cfg.roles["reward"].model == "Qwen/Qwen3-0.6B"
    assert "rewards" not in cfg.roles
    assert {s.name: s.role for s in cfg.pipeline.stages}["reward"] == "reward"
    nodes = recipe(tmp_path, {
        "cluster": {"num_nodes": 4, "gpus_per_node": 8},
        "data": {"train": [{"env_name": "reward_model"}]}, "env": rm_env,
        "policy": {"generation": {"colocated": {"enabled": False,
                                                "resources": {"num_nodes": 1, "gpus_per_node": 8}}}},
    }, "nodes.yaml")  # fmt: skip
    cfg = load_config(nodes)
    assert cfg.roles["actor_train"].devices == tuple(range(16))  # 3 policy nodes: 2 train
    assert cfg.roles["actor_infer"].devices == tuple(range(16, 24))  # and 1 for generation
    assert cfg.roles["reward"].devices == (24, 25)  # the last node, 2 of its GPUs


def test_expert_parallel_sizes_of_the_dtensor_trainer_and_the_engine(tmp_path: Path) -> None:
    path = recipe(tmp_path, {
        "cluster": {"num_nodes": 1, "gpus_per_node": 8},
        "policy": {"model_name": "Qwen/Qwen3-30B-A3B",
                   "dtensor_cfg": {"expert_parallel_size": 8},
                   "generation": {"vllm_cfg": {"tensor_parallel_size": 2, "expert_parallel_size": 4}}},
    })  # fmt: skip
    cfg = load_config(path)
    assert cfg.roles["actor_train"].parallel is not None
    assert cfg.roles["actor_train"].parallel.ep == 8
    engine = cfg.roles["actor_infer"].parallel
    assert engine is not None and (engine.tp, engine.ep) == (2, 4)


def test_a_missing_parent_is_named_when_the_algorithm_section_is_absent(tmp_path: Path) -> None:
    orphan = tmp_path / "orphan.yaml"
    orphan.write_text("defaults: nowhere/base.yaml\npolicy: {model_name: x}\n")
    exc = error(orphan)
    assert exc.field == "grpo" and "nowhere/base.yaml" in str(exc)


def test_long_context_token_counts_are_not_gpu_counts(tmp_path: Path) -> None:
    """Token budgets past 65,536 are read (a 256K YaRN recipe); a bad one names its field."""
    path = recipe(tmp_path, {"policy": {"max_total_sequence_length": 262144}})
    w = load_config(path, overrides=LENGTHS[1:3]).workload
    assert w is not None and w.response_tokens.max == 262144
    assert w.micro_batch_tokens == 262144 * 4  # ${mul:...} of the base's packing budget
    bad = recipe(tmp_path, {"policy": {"max_total_sequence_length": "long"}}, "bad.yaml")
    exc = error(bad)
    assert exc.field == "policy.max_total_sequence_length" and "token count" in str(exc)


def test_dynamic_sampling_batch_multiplier(tmp_path: Path) -> None:
    path = recipe(tmp_path, {"grpo": {"use_dynamic_sampling": True, "batch_multiplier": 3}})
    w = load_config(path, overrides=LENGTHS[1:3]).workload
    assert w is not None and w.generated_per_trained == 3.0 and w.prompts_per_step == 32
    off = recipe(tmp_path, {"grpo": {"batch_multiplier": 3}}, "off.yaml")
    exc = error(off)
    assert exc.field == "grpo.batch_multiplier" and "without grpo.use_dynamic_sampling" in str(exc)
    word = recipe(
        tmp_path, {"grpo": {"use_dynamic_sampling": True, "batch_multiplier": "x"}}, "w.yaml"
    )
    assert error(word).field == "grpo.batch_multiplier"
    bad = recipe(
        tmp_path, {"grpo": {"use_dynamic_sampling": True, "batch_multiplier": 0.5}}, "bad.yaml"
    )
    exc = error(bad)
    assert exc.field == "grpo.batch_multiplier" and "from 1 to 100" in str(exc)


@pytest.mark.parametrize(("setting", "expected"), [(True, True), (False, False), (None, False)])
def test_megatron_sequence_parallel_is_read_false_by_default(
    tmp_path: Path, setting: bool | None, expected: bool
) -> None:
    """NeMo RL's megatron_cfg.sequence_parallel (false in its base configs): without it each
    tensor-parallel rank keeps the norms' activations whole, and so does the reference."""
    megatron: dict = {"enabled": True, "tensor_model_parallel_size": 2}
    if setting is not None:
        megatron["sequence_parallel"] = setting
    path = recipe(
        tmp_path,
        {
            "policy": {"megatron_cfg": megatron, "dtensor_cfg": {"enabled": False}},
            "cluster": {"gpus_per_node": 2, "num_nodes": 1},  # tp 2 needs two GPUs
        },
    )
    cfg = load_config(path)
    for role in ("actor_train", "reference"):
        par = cfg.roles[role].parallel
        assert par is not None and par.tp == 2 and par.sequence_parallel is expected


def test_nccl_reshard_refit_is_the_resharded_weight_sync(tmp_path: Path) -> None:
    """refit_transport: nccl_reshard (NeMo RL's shard-to-shard refit) on the one-step-off
    recipe's own GPUs and Megatron trainer; NeMo RL refuses it colocated or under DTensor."""
    base = yaml.safe_load(ONE_OFF.read_text())
    base["defaults"] = str(ONE_OFF.parent / base["defaults"])
    base["policy"]["generation"]["refit_transport"] = "nccl_reshard"
    path = tmp_path / "reshard.yaml"
    path.write_text(yaml.safe_dump(base))
    infer = load_config(path).roles["actor_infer"]
    assert infer.rollout is not None and infer.rollout.weight_sync == "resharded"
    assert load_config(ONE_OFF).roles["actor_infer"].rollout.weight_sync == "overlapped"
    field = "policy.generation.refit_transport"
    colocated = error(
        path, "policy.generation.colocated.enabled=true", "grpo.async_grpo.enabled=false"
    )
    assert colocated.field == field and "generation on its own GPUs" in colocated.message
    for overrides, says in (
        (("policy.megatron_cfg.enabled=false", "policy.dtensor_cfg.enabled=true"),
         "the Megatron trainer"),
        (("policy.megatron_cfg.expert_tensor_parallel_size=2",), "expert tensor parallel 1"),
        (("policy.generation.vllm_cfg.pipeline_parallel_size=2",),
         "engines of one pipeline stage"),
        (("policy.generation.vllm_cfg.expert_parallel_size=2",),
         "engine expert parallel 1 or its tensor parallel"),
    ):  # fmt: skip
        refused = error(path, *overrides)
        assert refused.field == field and says in refused.message, refused
    engine = load_config(path).roles["actor_infer"]
    tp = engine.num_gpus_per_worker  # the engine's tensor parallel size (pp 1)
    with_ep = load_config(path, overrides=[f"policy.generation.vllm_cfg.expert_parallel_size={tp}"])
    assert with_ep.roles["actor_infer"].rollout.weight_sync == "resharded"
    # Other transports are priced as the default refit; PPO takes none but the default.
    nixl = load_config(path, overrides=["policy.generation.refit_transport=nixl"])
    assert nixl.roles["actor_infer"].rollout.weight_sync == "overlapped"


def test_ppo_refuses_every_refit_transport_but_the_default(tmp_path: Path) -> None:
    base = yaml.safe_load((FIXTURES / "grpo_base.yaml").read_text())
    base["ppo"] = base.pop("grpo")
    base["value"] = {"model_name": "Qwen/Qwen2.5-0.5B"}
    base["policy"]["generation"]["refit_transport"] = "nixl"
    path = tmp_path / "ppo.yaml"
    path.write_text(yaml.safe_dump(base))
    refused = error(path)
    assert refused.field == "policy.generation.refit_transport" and "PPO" in refused.message


SPLIT = {"policy": {"generation": {"colocated": {"enabled": False,
                                                 "resources": {"num_nodes": 2, "gpus_per_node": 8}}}}}  # fmt: skip
"""The on-policy recipe's generation on 2 of its 4 nodes, as the single controller needs."""


@pytest.mark.parametrize(
    ("sampler", "mode", "staleness"),
    [
        ({"name": "windowed", "max_staleness_versions": 1}, "async", 1),
        ({"name": "weight_fifo", "max_staleness_versions": 2}, "async", 2),
        ({"name": "ready_first"}, "async", 1),  # its default bound
        ({"name": "in_order", "max_lookahead_versions": 0}, "sync", 0),
        ({}, "async", 1),  # no sampler: in_order, max_lookahead_versions 1
    ],
)
def test_single_controller_runs_as_far_ahead_as_its_sampler_lets(
    tmp_path: Path, sampler: dict, mode: str, staleness: int
) -> None:
    """NeMo RL's single-controller recipes (``async_rl``, run_grpo_single_controller.py)
    were read as sync: ``grpo-llama3.1-8b-instruct-2n8g-async-1off-single-controller-
    streaming2.yaml`` (windowed, 1 version) planned as an on-policy step (tour 30)."""
    body = {"defaults": str(ONPOLICY), **SPLIT, "grpo": {"async_grpo": None},
            "data_plane": {"enabled": True}, "async_rl": {"sampler": sampler}}  # fmt: skip
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(body))
    cfg = load_config(path)
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == (mode, staleness)
    # Without the data plane the single-controller entry point refuses to start: the file
    # runs on the legacy path, which reads no async_rl.
    legacy = load_config(path, overrides=["data_plane.enabled=false"])
    assert (legacy.pipeline.mode, legacy.pipeline.max_staleness) == ("sync", 0)


@pytest.mark.parametrize(
    ("sampler", "field", "says"),
    [
        ({"name": "custom", "target": "m:C"}, "async_rl.sampler.name", "custom one"),
        ({"name": "windowed", "max_staleness_versions": -1},
         "async_rl.sampler.max_staleness_versions", ">= 0"),
    ],
)  # fmt: skip
def test_single_controller_errors_name_the_field(
    tmp_path: Path, sampler: dict, field: str, says: str
) -> None:
    body = {"defaults": str(ONPOLICY), **SPLIT, "data_plane": {"enabled": True},
            "async_rl": {"sampler": sampler}}  # fmt: skip
    path = tmp_path / "sc.yaml"
    path.write_text(yaml.safe_dump(body))
    exc = error(path)
    assert exc.field == field and says in str(exc)
    colocated = recipe(tmp_path, {"data_plane": {"enabled": True}, "async_rl": {}}, "co.yaml")
    exc = error(colocated)
    assert exc.field == "policy.generation.colocated.enabled"
    assert "the single-controller path needs generation on its own GPUs" in str(exc)
