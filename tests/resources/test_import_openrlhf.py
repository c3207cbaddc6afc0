"""OpenRLHF launch scripts read as OpenRLHF's parser and ``train()`` read their flags
(openrlhf/cli/train_ppo_ray.py): roles and their GPUs, models, engines, trainers, the
workload, the step; both spellings of the flags; refusals naming the flag.

The scripts are hand-written here in the shape of OpenRLHF's examples/scripts (the
dotted flags of today and the flat ones of the releases before 2026-04-19).
"""
# ruff: noqa: E501 -- exact error messages read best on one line

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config, load_native, raw_file
from rlplex.errors import ConfigError
from rlplex.plan.planner import make_plan

HYBRID = """set -x

python3 -m openrlhf.cli.train_ppo_ray \\
   --ref.num_nodes 1 \\
   --ref.num_gpus_per_node 8 \\
   --reward.num_nodes 1 \\
   --reward.num_gpus_per_node 8 \\
   --critic.num_nodes 1 \\
   --critic.num_gpus_per_node 8 \\
   --actor.num_nodes 1 \\
   --actor.num_gpus_per_node 8 \\
   --vllm.num_engines 4 \\
   --vllm.tensor_parallel_size 2 \\
   --train.colocate_all \\
   --vllm.gpu_memory_utilization 0.5 \\
   --actor.model_name_or_path OpenRLHF/Llama-3-8b-sft-mixture \\
   --reward.model_name_or_path OpenRLHF/Llama-3-8b-rm-700k \\
   --train.micro_batch_size 4 \\
   --train.batch_size 128 \\
   --rollout.micro_batch_size 8 \\
   --rollout.batch_size 1024 \\
   --data.max_len 2048 \\
   --ds.zero_stage 3 \\
   --algo.kl.init_coef 0.01 \\
   --actor.gradient_checkpointing_enable \\
   --ds.packing_samples \\
   --vllm.enforce_eager \\
   --vllm.enable_sleep \\
   --ds.enable_sleep
"""
"""OpenRLHF's PPO hybrid engine (examples/scripts/train_ppo_ray_hybrid_engine.sh)."""

HYBRID_OLD = """set -x

python3 -m openrlhf.cli.train_ppo_ray \\
   --ref_num_nodes 1 \\
   --ref_num_gpus_per_node 8 \\
   --reward_num_nodes 1 \\
   --reward_num_gpus_per_node 8 \\
   --critic_num_nodes 1 \\
   --critic_num_gpus_per_node 8 \\
   --actor_num_nodes 1 \\
   --actor_num_gpus_per_node 8 \\
   --vllm_num_engines 4 \\
   --vllm_tensor_parallel_size 2 \\
   --colocate_all_models \\
   --vllm_gpu_memory_utilization 0.5 \\
   --pretrain OpenRLHF/Llama-3-8b-sft-mixture \\
   --reward_pretrain OpenRLHF/Llama-3-8b-rm-700k \\
   --micro_train_batch_size 4 \\
   --train_batch_size 128 \\
   --micro_rollout_batch_size 8 \\
   --rollout_batch_size 1024 \\
   --prompt_max_len 1024 \\
   --generate_max_len 1024 \\
   --zero_stage 3 \\
   --bf16 \\
   --init_kl_coef 0.01 \\
   --gradient_checkpointing \\
   --packing_samples \\
   --enforce_eager \\
   --vllm_enable_sleep \\
   --deepspeed_enable_sleep
"""
"""The same run as OpenRLHF v0.9 wrote it (flat flags, prompt and response bounds)."""

SEPARATE = """ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json='{"working_dir": "/openrlhf"}' \\
   -- python3 -m openrlhf.cli.train_ppo_ray \\
   --ref.num_nodes 1 \\
   --ref.num_gpus_per_node 2 \\
   --critic.num_nodes 1 \\
   --critic.num_gpus_per_node 2 \\
   --actor.num_nodes 1 \\
   --actor.num_gpus_per_node 2 \\
   --vllm.num_engines 2 \\
   --vllm.tensor_parallel_size 2 \\
   --train.colocate_actor_ref \\
   --actor.model_name_or_path OpenRLHF/Llama-3-8b-sft-mixture \\
   --reward.remote_url /openrlhf/examples/python/reward_func.py \\
   --train.micro_batch_size 8 \\
   --rollout.micro_batch_size 16 \\
   --rollout.batch_size 1024 \\
   --data.max_len 2048 \\
   --ds.zero_stage 3 \\
   --ds.adam_offload \\
   --ds.packing_samples \\
   --actor.gradient_checkpointing_enable \\
   --logger.wandb.key {wandb_token}
"""
"""Separate GPUs, a reward function (examples/scripts/train_ppo_with_reward_fn.sh)."""

GRPO = """MODEL_PATH="Qwen/Qwen3-4B-Thinking-2507"
ENGINE_ARGS=(
   --actor.num_nodes 1
   --actor.num_gpus_per_node 4
   --vllm.num_engines 2
   --vllm.tensor_parallel_size 2
   --train.colocate_all
   # --ds.adam_offload
   --ds.ring_attn_size 2
)
python3 -m openrlhf.cli.train_ppo_ray \\
   --actor.model_name_or_path ${MODEL_PATH} \\
   --train.agent_func_path examples/python/agent_func.py \\
   --algo.advantage.estimator group_norm \\
   --algo.kl.init_coef 0 \\
   --rollout.batch_size 128 \\
   --rollout.n_samples_per_prompt 8 \\
   --train.batch_size 512 \\
   --data.max_len 9216 \\
   --rollout.max_new_tokens 8192 \\
   --train.max_epochs 2 \\
   --train.dynamic_batch_enable \\
   --train.max_tokens_per_gpu 16384 \\
   ${ENGINE_ARGS[@]}
"""
"""GRPO without a critic or a reference, scored by an agent function."""


def script(tmp_path: Path, text: str, name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def native(path: Path, *overrides: str) -> dict:
    return load_native(path, overrides=overrides).data


def error(path: Path, *overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides=overrides)
    return info.value


def ranks(data: dict, role: str) -> tuple[int, int]:
    devices = data["roles"][role]["devices"]
    return devices[0], devices[-1]


def test_colocate_all_puts_every_model_and_the_engines_on_the_actor_gpus(tmp_path: Path) -> None:
    data = native(script(tmp_path, HYBRID))
    assert data["cluster"] == {"nodes": 1, "gpus_per_node": 8}
    roles = data["roles"]
    assert list(roles) == ["actor_train", "actor_infer", "reference", "critic", "reward"]
    assert {name: ranks(data, name) for name in roles} == dict.fromkeys(roles, (0, 7))
    infer = roles["actor_infer"]
    assert infer["num_gpus_per_worker"] == 2 and infer["parallel"] == {"tp": 2}
    # vLLM's sleep(level=1) (vllm_engine.py); --vllm.enforce_eager: no CUDA graphs
    assert infer["rollout"] == {
        "sleep_level": 1,
        "gpu_memory_utilization": 0.5,
        "cuda_graphs": False,
    }
    assert roles["actor_train"]["parallel"] == {"kernels": "eager", "zero": 3, "recompute": True}
    assert roles["critic"]["parallel"] == roles["actor_train"]["parallel"]
    assert roles["reference"]["parallel"] == {"kernels": "eager", "zero": 3}  # eval: ZeRO-3 at 3
    # gae: the critic starts from the reward model (train_ppo_ray.py)
    assert data["model"] == "OpenRLHF/Llama-3-8b-sft-mixture"
    assert roles["critic"]["model"] == roles["reward"]["model"] == "OpenRLHF/Llama-3-8b-rm-700k"
    stages = data["pipeline"]["stages"]
    assert data["pipeline"]["mode"] == "sync"
    assert list(stages) == [
        "generate", "reward", "ref_logprob", "old_logprob", "values", "advantage",
        "critic_train", "train", "weight_sync",
    ]  # fmt: skip
    assert stages["reward"]["role"] == "reward" and stages["old_logprob"]["role"] == "actor_train"
    load = data["workload"]
    assert (load["prompts_per_step"], load["samples_per_prompt"]) == (1024, 1)
    # --data.max_len alone: halves (rlplex's choice), means half the maxima
    assert load["prompt_tokens"] == {"mean": 512, "max": 1024}
    assert load["response_tokens"] == {"mean": 512, "max": 1024}
    # --train.batch_size counts samples: 1024 of them make 8 optimizer steps
    assert (load["mini_batches"], load["micro_batch_size"], load["logprob_micro_batch_size"]) == (
        8,
        4,
        8,
    )
    assert load["packing"] is True and load["controller"] == {"padding": "longest"}
    assert make_plan(load_config(tmp_path / "run.sh", overrides=["cluster.gpu=h100"])).period_s > 0


def test_both_spellings_of_the_flags_give_the_same_run(tmp_path: Path) -> None:
    new = native(script(tmp_path, HYBRID, "new.sh"))
    old = native(script(tmp_path, HYBRID_OLD, "old.sh"))
    assert old == new


def test_separate_placement_and_a_reward_function(tmp_path: Path) -> None:
    data = native(script(tmp_path, SEPARATE))
    roles = data["roles"]
    assert "reward" not in roles  # --reward.remote_url: scored in the engines' processes
    assert data["pipeline"]["stages"]["reward"]["role"] == "driver"
    # Ray's order: the actor's shared group, the engines, then the critic (first fit)
    assert ranks(data, "actor_train") == ranks(data, "reference") == (0, 1)
    assert ranks(data, "actor_infer") == (2, 5)
    assert ranks(data, "critic") == (6, 7)
    assert data["cluster"] == {"nodes": 1, "gpus_per_node": 8}
    # engines on their own GPUs: weights broadcast tensor by tensor; no sleep without colocate_all
    assert roles["actor_infer"]["rollout"] == {
        "gpu_memory_utilization": 0.95,
        "weight_sync": "per_tensor",
    }
    assert roles["actor_train"]["parallel"]["cpu_optimizer"] is True  # --ds.adam_offload
    assert "model" not in roles["critic"]  # a remote reward: the critic starts from the actor
    assert data["workload"]["mini_batches"] == 8  # --train.batch_size's default, 128


def test_group_norm_without_kl_has_no_critic_nor_reference(tmp_path: Path) -> None:
    data = native(script(tmp_path, GRPO))
    assert set(data["roles"]) == {"actor_train", "actor_infer"}
    assert data["cluster"] == {"nodes": 1, "gpus_per_node": 4}
    assert list(data["pipeline"]["stages"]) == [
        "generate", "reward", "old_logprob", "advantage", "train", "weight_sync",
    ]  # fmt: skip
    assert data["model"] == "Qwen/Qwen3-4B-Thinking-2507"
    assert data["roles"]["actor_train"]["parallel"]["sp"] == 2  # ring attention
    load = data["workload"]
    # --rollout.max_new_tokens bounds the response, the prompt takes what is left
    assert load["response_tokens"]["max"] == 8192 and load["prompt_tokens"]["max"] == 1024
    assert (load["mini_batches"], load["epochs"]) == (2, 2)
    # dynamic batches: the per-GPU budget over the ring-attention group; packing forced
    assert load["micro_batch_tokens"] == load["logprob_micro_batch_tokens"] == 32768
    assert load["packing"] is True


def test_gae_against_group_norm(tmp_path: Path) -> None:
    gae = native(script(tmp_path, HYBRID, "gae.sh"))
    grpo = native(
        script(
            tmp_path,
            HYBRID.replace(
                "--ds.enable_sleep",
                "--ds.enable_sleep \\\n   --algo.advantage.estimator group_norm \\\n   --rollout.n_samples_per_prompt 4",
            ),
            "grpo.sh",
        )
    )
    assert "critic" in gae["roles"] and "critic" not in grpo["roles"]
    assert "values" not in grpo["pipeline"]["stages"] and "reward" in grpo["roles"]


def test_async_runs_ahead_by_the_queue_size(tmp_path: Path) -> None:
    text = GRPO.replace(
        "--train.colocate_all",
        "--train.colocate_all\n   --train.async_enable\n   --train.async_queue_size 2",
    )
    data = native(script(tmp_path, text))
    assert (data["pipeline"]["mode"], data["pipeline"]["max_staleness"]) == ("async", 2)
    # async colocate_all colocates the DeepSpeed models only: the engines get GPUs of their own
    assert ranks(data, "actor_train") == (0, 3) and ranks(data, "actor_infer") == (4, 7)
    assert data["cluster"] == {"nodes": 1, "gpus_per_node": 8}


def test_a_remote_reward_model_server_is_no_gpu_role(tmp_path: Path) -> None:
    text = HYBRID.replace(
        "--reward.model_name_or_path OpenRLHF/Llama-3-8b-rm-700k",
        "--reward.remote_url http://rm:5000/get_reward",
    )
    data = native(script(tmp_path, text))
    assert "reward" not in data["roles"] and "model" not in data["roles"]["critic"]


def test_old_lengths_and_the_old_cap(tmp_path: Path) -> None:
    capped = HYBRID_OLD.replace(
        "--generate_max_len 1024", "--generate_max_len 1536 \\\n   --max_len 2048"
    )
    load = native(script(tmp_path, capped))["workload"]
    assert load["response_tokens"]["max"] == 1536 and load["prompt_tokens"]["max"] == 512


def test_set_reaches_the_flags_in_either_spelling(tmp_path: Path) -> None:
    path = script(tmp_path, HYBRID_OLD)
    data = native(path, "rollout.batch_size=256", "algo.kl.init_coef=0")
    assert data["workload"]["prompts_per_step"] == 256 and "reference" not in data["roles"]
    assert raw_file(path, ["vllm.num_engines=8"])["vllm"] == {"num_engines": 8}
    form = load_native(path, overrides=["actor.num_nodez=2"])
    assert any("actor.num_nodez" in note for note in form.notes)


def test_non_rl_entry_points_are_refused(tmp_path: Path) -> None:
    sft = script(
        tmp_path,
        "set -x\n\nread -r -d '' training_commands <<EOF\nopenrlhf.cli.train_sft \\\n"
        "   --data.max_len 2048 \\\n   --model.model_name_or_path meta-llama/Meta-Llama-3-8B\nEOF\n"
        'if [[ ${1} != "slurm" ]]; then\n    deepspeed --module $training_commands\nfi\n',
    )
    assert str(error(sft)) == (
        f"{sft}: line 9: this is an OpenRLHF SFT run (openrlhf.cli.train_sft), not an RL training step (PPO/GRPO); rlplex plans RL steps only"
    )
    dpo = script(
        tmp_path, "deepspeed --module openrlhf.cli.train_dpo --ds.zero_stage 3\n", "dpo.sh"
    )
    assert "an OpenRLHF DPO run" in str(error(dpo))
    ppo = script(tmp_path, "deepspeed --module openrlhf.cli.train_ppo --pretrain x\n", "ppo.sh")
    assert "OpenRLHF's PPO without Ray" in str(error(ppo))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "--actor.num_gpus_per_node 8",
            "--actor.num_gpus_per_node x",
            "--actor.num_gpus_per_node: must be an integer >= 1 (got 'x')",
        ),
        (
            "--rollout.batch_size 1024",
            "--rollout.batch_size 0",
            "--rollout.batch_size: must be an integer >= 1 (got 0)",
        ),
        (
            "--vllm.gpu_memory_utilization 0.5",
            "--vllm.gpu_memory_utilization 1.5",
            "--vllm.gpu_memory_utilization: must be a share of the GPU, above 0 and at most 1 (got 1.5)",
        ),
        (
            "--ds.zero_stage 3",
            "--ds.zero_stage 4",
            "--ds.zero_stage: must be a DeepSpeed ZeRO stage: 0, 1, 2 or 3 (got '4')",
        ),
        (
            "--algo.kl.init_coef 0.01",
            "--algo.kl.init_coef high",
            "--algo.kl.init_coef: must be a number (got 'high')",
        ),
        (
            "--train.colocate_all",
            "--train.colocate_all yes",
            "--train.colocate_all: is a switch: give it bare, without a value (OpenRLHF's parser refuses one) (got 'yes')",
        ),
        (
            "--vllm.num_engines 4",
            "--vllm.num_engines 3",
            "--vllm.num_engines: x --vllm.tensor_parallel_size must fill the actor's 8 GPUs with --train.colocate_all in a synchronous run (6 engine GPUs; OpenRLHF asserts it) (got 3)",
        ),
        (
            "--vllm.num_engines 4",
            "",
            "--vllm.num_engines: is missing: OpenRLHF's PPO generates with vLLM engines, which this flag starts (older releases without them generated with Hugging Face's generate on the actor, which rlplex does not price)",
        ),
        (
            "--ref.num_gpus_per_node 8",
            "--ref.num_gpus_per_node 4",
            "--ref.num_gpus_per_node: must equal --actor.num_gpus_per_node (8) with --train.colocate_all (OpenRLHF asserts it) (got 4)",
        ),
        (
            "--reward.model_name_or_path OpenRLHF/Llama-3-8b-rm-700k",
            "",
            "--reward.model_name_or_path: is missing: without --reward.remote_url (a reward server or a reward_func file) or --train.agent_func_path, OpenRLHF scores with a reward model",
        ),
        (
            "--ds.enable_sleep",
            "--ds.enable_sleep --train.async_enable",
            "--vllm.enable_sleep: cannot be given with --train.async_enable (OpenRLHF asserts it) (got True)",
        ),
        (
            "--ds.enable_sleep",
            "--ds.enable_sleep --train.partial_rollout_enable",
            "--train.partial_rollout_enable: needs --train.async_enable (OpenRLHF asserts it) (got True)",
        ),
        (
            "--ds.enable_sleep",
            "--ds.enable_sleep --algo.advantage.estimator grpo",
            "--algo.advantage.estimator: must be one of: gae, reinforce, rloo, reinforce_baseline, group_norm, dr_grpo (got 'grpo')",
        ),
        (
            "--ds.enable_sleep",
            "--ds.enable_sleep --algo.advantage.estimator rloo",
            "--rollout.n_samples_per_prompt: must be more than 1 with --algo.advantage.estimator rloo (a per-prompt baseline; OpenRLHF asserts it) (got 1)",
        ),
        (
            "--data.max_len 2048",
            "--data.max_len 2048 --rollout.max_new_tokens 4096",
            "--data.max_len: must be more than --rollout.max_new_tokens (4096): it bounds prompt and response together (got 2048)",
        ),
        (
            "--critic.num_nodes 1",
            "--critic.num_nodes 2",
            "--critic.num_gpus_per_node: x --critic.num_nodes is 16 GPUs, more than the 8 of the actor GPUs it shares with --train.colocate_all (Ray cannot place it) (got 8)",
        ),
        (
            "--actor.num_nodes 1",
            "--actor_num_nodes 1",
            "--actor_num_nodes: is OpenRLHF's spelling before the dotted flags (ed62d0e2, 2026-04-19), --ref.num_nodes that of the releases since; no release takes both: write --actor.num_nodes",
        ),
    ],
)
def test_bad_values_are_refused_naming_the_flag(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in HYBRID
    path = script(tmp_path, HYBRID.replace(old, new))
    assert str(error(path)) == f"{path}: {message}"


def test_old_spelling_named_as_written(tmp_path: Path) -> None:
    path = script(
        tmp_path, HYBRID_OLD.replace("--actor_num_gpus_per_node 8", "--actor_num_gpus_per_node 0")
    )
    assert str(error(path)) == f"{path}: --actor_num_gpus_per_node: must be an integer >= 1 (got 0)"


def test_the_cli_estimates_a_script_and_refuses_another_format(tmp_path: Path) -> None:
    path = script(tmp_path, HYBRID)
    runner = CliRunner()
    result = runner.invoke(app, ["estimate", str(path), "--set", "cluster.gpu=h100"])
    assert result.exit_code == 0, result.output
    assert "critic_train" in result.output
    wrong = runner.invoke(app, ["validate", str(path), "--format", "verl"])
    assert wrong.exit_code == 2
    assert "--format: is an OpenRLHF launch script" in wrong.output


def test_import_corpus_counts_openrlhf_scripts_apart(tmp_path: Path, capsys) -> None:
    """bench/import_corpus.py: an OpenRLHF script is its own framework, SFT not RL."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "import_corpus", Path(__file__).resolve().parents[2] / "bench" / "import_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    script(tmp_path, HYBRID, "train_ppo.sh")
    script(tmp_path, "deepspeed --module openrlhf.cli.train_sft --a 1\n", "train_sft.sh")
    assert module.main([str(tmp_path), "--set", "cluster.gpu=h100"]) == 0
    assert "| openrlhf script | 2 | 1 | 1 | 0 | 0 | 0 | 0 |" in capsys.readouterr().out


# Found in review (2026-11-30), each against OpenRLHF's code at 3c3be623:


@pytest.mark.parametrize(("stage", "offloaded"), [("2", False), ("3", True)])
def test_ref_and_reward_offload_only_under_zero3(
    tmp_path: Path, stage: str, offloaded: bool
) -> None:
    """--ref.offload / --reward.offload set DeepSpeed's offload_param in the evaluation config
    (launcher.py), which runs at stage 0 below ZeRO-3 (get_ds_eval_config): DeepSpeed then
    moves the whole model to the GPU, and the flags change nothing."""
    text = HYBRID.replace(
        "--ds.zero_stage 3", f"--ds.zero_stage {stage} --ref.offload --reward.offload"
    )
    roles = native(script(tmp_path, text))["roles"]
    for name in ("reference", "reward"):
        assert roles[name]["parallel"].get("offload_params", False) is offloaded


def test_liger_kernels_are_the_causal_models_only(tmp_path: Path) -> None:
    """Liger replaces the layers of the Actor class (openrlhf/models/actor.py: the actor and
    the reference); the critic and the reward model, built by get_llm_for_sequence_regression,
    keep Hugging Face's."""
    roles = native(
        script(
            tmp_path, HYBRID.replace("--ds.enable_sleep", "--ds.enable_sleep --ds.use_liger_kernel")
        )
    )["roles"]
    kernels = {
        name: role["parallel"]["kernels"] for name, role in roles.items() if name != "actor_infer"
    }
    assert kernels == {
        "actor_train": "fused",
        "reference": "fused",
        "critic": "eager",
        "reward": "eager",
    }


def test_left_out_micro_batches_take_the_defaults_of_the_spelling(tmp_path: Path) -> None:
    """Every flat-flag release until v0.10.0 defaulted --micro_train_batch_size to 4 and
    --micro_rollout_batch_size to 8; the dotted flags' parser defaults both to 1."""
    cut = ("--micro_train_batch_size 4", "--micro_rollout_batch_size 8")
    old = HYBRID_OLD
    for flag in cut:
        old = old.replace(f"   {flag} \\\n", "")
    new = HYBRID
    for flag in ("--train.micro_batch_size 4", "--rollout.micro_batch_size 8"):
        new = new.replace(f"   {flag} \\\n", "")
    old_load = native(script(tmp_path, old, "old.sh"))["workload"]
    new_load = native(script(tmp_path, new, "new.sh"))["workload"]
    assert (old_load["micro_batch_size"], old_load["logprob_micro_batch_size"]) == (4, 8)
    assert (new_load["micro_batch_size"], new_load["logprob_micro_batch_size"]) == (1, 1)


def test_a_backslash_before_trailing_blanks_is_named(tmp_path: Path) -> None:
    """bash reads ``\\ `` as an escaped blank, not a continuation: the command ends there."""
    path = script(
        tmp_path,
        HYBRID.replace("--actor.num_gpus_per_node 8 \\\n", "--actor.num_gpus_per_node 8 \\  \n"),
    )
    assert str(error(path)) == (
        f"{path}: line 3: passes a word of blanks (' ') after --actor.num_gpus_per_node: a"
        " backslash followed by blanks at a line's end continues no line, and the flags of the"
        " lines after it are no part of the command; remove the blanks after the backslash"
    )


def test_flags_given_through_variables(tmp_path: Path) -> None:
    text = (
        'PLACE="--actor.num_gpus_per_node 4 --vllm.num_engines 4 --train.colocate_all "\n'
        'MODEL_ARGS=" --actor.model_name_or_path Qwen/Qwen3-4B --reward.remote_url http://rm/x "\n'
        'ray job submit --address=${RAY_ADDRESS} --runtime-env-json=\'{"working_dir": "/w"}\' \\\n'
        "   -- python3 -m openrlhf.cli.train_ppo_ray $PLACE $MODEL_ARGS \\\n"
        "   --algo.advantage.estimator=group_norm --rollout.n_samples_per_prompt=8 \\\n"
        "   --algo.kl.init_coef=0 \\\n"
        "   --train.micro_batch_size 2 $EXTRA_ARGS\n"
    )
    data = native(script(tmp_path, text))
    assert ranks(data, "actor_train") == ranks(data, "actor_infer") == (0, 3)
    assert data["workload"]["micro_batch_size"] == 2 and "reward" not in data["roles"]


def test_a_number_left_to_an_unset_variable_is_named(tmp_path: Path) -> None:
    path = script(tmp_path, HYBRID.replace("--vllm.num_engines 4", "--vllm.num_engines $ENGINES"))
    assert str(error(path)) == (
        f"{path}: --vllm.num_engines: is a shell variable the script does not set (rlplex reads"
        " no environment of its own): give its value with --set vllm.num_engines=VALUE, or the"
        " variable's with --env ENGINES=VALUE (got '$ENGINES')"
    )
    # given with --env: read
    given = native(script(tmp_path, HYBRID, "given.sh"))
    assert load_native(path, env={"ENGINES": "4"}).data == given
    assert native(path, "vllm.num_engines=4") == native(script(tmp_path, HYBRID, "given.sh"))


def after(data: dict) -> dict[str, set[str]]:
    return {name: set(stage.get("after", [])) for name, stage in data["pipeline"]["stages"].items()}


def test_the_step_keeps_openrlhfs_own_order_of_its_passes(tmp_path: Path) -> None:
    # A reward_func scores inside generation: the forward passes start once it is done
    # (make_experience follows generate_samples, ppo_trainer.py:525-537). The actor's pass
    # blocks the driver under colocate_actor_ref (experience_maker.py:154-158), so the
    # critic's is dispatched after it; the advantages wait for them all.
    order = after(native(script(tmp_path, SEPARATE)))
    assert order["old_logprob"] == {"generate", "reward"}
    assert order["ref_logprob"] == {"generate", "reward", "old_logprob"}
    assert order["values"] == {"generate", "reward", "old_logprob"}
    assert order["train"] == {"advantage"}  # without --ds.enable_sleep: side by side


def test_colocate_all_dispatches_each_pass_after_the_last_and_sleep_trains_in_turn(
    tmp_path: Path,
) -> None:
    # colocate_all: every pass blocks the driver (reward, actor, critic, reference, in
    # that order: experience_maker.py:138-182); --ds.enable_sleep: the critic's fit, then
    # the actor's (ppo_trainer.py:281-286).
    order = after(native(script(tmp_path, HYBRID)))
    assert order["reward"] == {"generate"}
    assert order["old_logprob"] == {"generate", "reward"}
    assert order["values"] == {"generate", "reward", "old_logprob"}
    assert order["ref_logprob"] == {"generate", "old_logprob", "values"}
    assert order["train"] == {"advantage", "critic_train"}


def test_colocate_critic_reward_dispatches_the_reference_after_the_critic(tmp_path: Path) -> None:
    text = SEPARATE.replace(
        "--train.colocate_actor_ref", "--train.colocate_critic_reward --ds.enable_sleep"
    ).replace(
        "--reward.remote_url /openrlhf/examples/python/reward_func.py",
        "--reward.model_name_or_path OpenRLHF/Llama-3-8b-rm-700k --reward.num_gpus_per_node 2",
    )
    order = after(native(script(tmp_path, text)))
    # the reward model's pass starts at once, the actor's beside it; the critic waits for
    # the reward model (:162-164) and blocks the driver, so the reference comes after it
    assert order["old_logprob"] == {"generate"}
    assert order["values"] == {"generate", "reward"}
    assert order["ref_logprob"] == {"generate", "values"}
    # --ds.enable_sleep trains the critic, then the actor, even on GPUs of their own
    assert order["train"] == {"advantage", "critic_train"}
