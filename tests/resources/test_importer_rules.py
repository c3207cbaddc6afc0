"""ROLL, RLinf and verl files read as their frameworks read them (issue 12, one test per class).

Each fixture under ``tests/fixtures/importers/`` is hand-written to reproduce a
structure found in the frameworks' own example configs; the expected roles,
devices, GPUs per worker, world sizes, nodes and mode follow the framework
code named in each test.
"""
# ruff: noqa: E501 -- exact error messages read best on one line

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.plan.planner import make_plan
from rlplex.plan.verify import verify_plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers"


def layout(cfg, name: str) -> tuple[int, int, int]:
    """(GPUs, GPUs per worker, world size) of a role."""
    role = cfg.roles[name]
    return len(role.devices), role.num_gpus_per_worker, role.world_size


def error(path: Path, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, **kwargs)
    return str(info.value)


# 1. ROLL sglang / hf_infer keep the block's num_gpus_per_worker; megatron is forced to 1.
def test_roll_sglang_and_hf_infer_keep_block_gpus_per_worker() -> None:
    cfg = load_config(FIXTURES / "roll" / "rlvr_sglang_rewards.yaml")
    assert cfg.format == "roll" and cfg.cluster.nodes == 4
    assert layout(cfg, "actor_infer") == (24, 2, 12)  # not 24 one-GPU workers from tp_size
    assert layout(cfg, "actor_train") == (32, 1, 32)  # megatron_train: forced to 1
    assert layout(cfg, "llm_judge") == (8, 2, 4)  # hf_infer keeps 2


# 2. Each ROLL reward cluster is its own role, named as in the file.
def test_roll_reward_clusters_stay_separate() -> None:
    cfg = load_config(FIXTURES / "roll" / "rlvr_sglang_rewards.yaml")
    assert cfg.roles["math_rule"].world_size == 8 and not cfg.roles["math_rule"].devices
    assert cfg.roles["code_sandbox"].world_size == 4
    assert cfg.roles["llm_judge"].devices == tuple(range(24, 32))
    rewards = {s.name: s.role for s in cfg.pipeline.stages if s.name.startswith("reward")}
    assert rewards == {
        "reward_math_rule": "math_rule",
        "reward_code_sandbox": "code_sandbox",
        "reward_llm_judge": "llm_judge",
    }
    assert set(cfg.pipeline.stage("advantage").after) >= set(rewards)


def test_roll_model_workload_and_parallel() -> None:
    cfg = load_config(FIXTURES / "roll" / "rlvr_sglang_rewards.yaml")
    assert cfg.model == "Qwen/Qwen3-30B-A3B-Base"
    load = cfg.workload
    assert load is not None
    assert (load.prompts_per_step, load.samples_per_prompt, load.micro_batch_size) == (64, 8, 2)
    assert (load.prompt_tokens.max, load.prompt_tokens.mean) == (2048, 1024)  # mean = max / 2
    assert (load.response_tokens.max, load.response_tokens.mean) == (4096, 2048)
    # ROLL pads the batch to sequence_length in a verl-style DataProto: the format's default;
    # with a TransferQueue backend the pipeline passes keys instead.
    assert load.controller.padding == "max"
    queued = load_config(
        FIXTURES / "roll" / "rlvr_sglang_rewards.yaml",
        overrides=["transfer_backend.backend_name=TransferQueue"],
    ).workload
    assert queued is not None and queued.controller.padding == "none"
    train = cfg.roles["actor_train"].parallel
    assert train is not None and (train.tp, train.pp, train.zero, train.recompute) == (
        2,
        2,
        1,
        True,
    )


# 3. ROLL partial-GPU async (train a strict subset of infer) is read and planned.
def test_roll_partial_gpu_async_plans() -> None:
    cfg = load_config(FIXTURES / "roll" / "agentic_partial_gpu.yaml")
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 1)
    assert cfg.roles["actor_train"].devices == (0, 1, 2, 3)
    assert cfg.roles["actor_infer"].devices == tuple(range(8))
    verify_plan(make_plan(cfg), cfg)  # raises on any broken validity rule


# 13. The agentic refusal names the file's own field, not an internal one.
def test_roll_agentic_overlap_async_refused_by_file_field() -> None:
    path = FIXTURES / "roll" / "agentic_partial_gpu.yaml"
    message = error(path, overrides=["actor_infer.device_mapping=list(range(2,6))"])
    assert message.startswith(
        f"{path}: actor_train.device_mapping: async generation (async_generation_ratio 1) needs"
        " actor_train's GPUs disjoint from actor_infer's, or a strict subset of them"
    )


# 4. A worker larger than a node fills whole consecutive nodes (ROLL and verl).
def test_roll_worker_spans_whole_nodes() -> None:
    path = FIXTURES / "roll" / "tp16_spans_nodes.yaml"
    cfg = load_config(path)
    assert layout(cfg, "actor_infer") == (32, 16, 2)
    assert error(path, overrides=["actor_infer.device_mapping=list(range(4,20))"]).startswith(
        f"{path}: actor_infer.device_mapping: worker 0 needs 16 GPUs, more than a node's 8,"
        " so it must fill whole consecutive nodes"
    )


def test_verl_rollout_tp32_spans_four_nodes() -> None:
    cfg = load_config(FIXTURES / "verl" / "tp32.yaml")
    assert (cfg.cluster.nodes, cfg.cluster.gpus_per_node) == (4, 8)
    assert layout(cfg, "actor_infer") == (32, 32, 1)


# 5. RLinf: components after 'rollout' under one key get one GPU per process.
def test_rlinf_one_key_for_several_components() -> None:
    cfg = load_config(FIXTURES / "rlinf" / "one_key_tp.yaml")
    assert layout(cfg, "actor_infer") == (8, 4, 2)
    assert layout(cfg, "reward") == (0, 1, 8)  # rule scoring: 8 processes, on the CPU
    assert layout(cfg, "actor_train") == (8, 1, 8)
    assert cfg.model == "/models/Moonlight-16B"
    load = cfg.workload
    assert load is not None and (load.prompts_per_step, load.samples_per_prompt) == (128, 8)
    assert load.response_tokens.max == 8192 - 1024  # RLinf's ${subtract:...} resolved
    # RLinf's workers pass the batch through channels, not through one controller.
    assert load.controller.padding == "none"
    actor = cfg.roles["actor_train"].parallel
    assert actor is not None and (actor.tp, actor.recompute) == (4, True)


# 6. RLinf auto scheduler: the actor on all GPUs.
def test_rlinf_auto_scheduler_places_actor_on_all_gpus() -> None:
    cfg = load_config(FIXTURES / "rlinf" / "auto_scheduler.yaml")
    assert cfg.roles["actor_train"].devices == tuple(range(8))
    assert layout(cfg, "actor_infer") == (4, 2, 2)
    assert cfg.roles["inference"].devices == (6, 7)


# 7. RLinf async runner: staleness_threshold k -> async, max_staleness k, shared GPUs.
def test_rlinf_staleness_threshold_is_async() -> None:
    cfg = load_config(FIXTURES / "rlinf" / "async_embodied.yaml")
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 2)
    assert cfg.roles["actor_train"].devices == cfg.roles["actor_infer"].devices == tuple(range(8))
    assert layout(cfg, "env") == (8, 1, 8)
    verify_plan(make_plan(cfg), cfg)


# 8. RLinf node groups: ranks inside groups; a hardware group is a CPU role.
def test_rlinf_node_groups() -> None:
    cfg = load_config(FIXTURES / "rlinf" / "node_groups.yaml")
    assert cfg.cluster.nodes == 3
    assert cfg.roles["actor_train"].devices == tuple(range(8, 16))  # a800 is node 1
    assert cfg.roles["actor_infer"].devices == tuple(range(8))  # "4090" is node 0
    assert not cfg.roles["env"].devices and cfg.roles["env"].world_size == 2


def test_rlinf_unknown_node_group() -> None:
    path = FIXTURES / "rlinf" / "node_groups.yaml"
    message = error(path, overrides=["cluster.component_placement.actor.node_group=h100"])
    assert message == (
        f"{path}: cluster.component_placement.actor.node_group: no node group labelled 'h100'"
        " in cluster.node_groups (labels: a800, 4090, franka) (got 'h100')"
    )


# 9. RLinf reasoning without a reward placement is refused as RLinf refuses it.
def test_rlinf_reasoning_needs_reward() -> None:
    path = FIXTURES / "rlinf" / "no_reward.yaml"
    assert error(path) == (
        f"{path}: cluster.component_placement: has no 'reward' component; RLinf's reasoning"
        ' runners assert "Reward GPUs must be specified in the component_placement config."'
    )


# 10. verl Hydra composition: defaults, group@package, override, _self_ order, oc.select.
def test_verl_composes_defaults() -> None:
    cfg = load_config(FIXTURES / "verl" / "grpo.yaml")
    assert cfg.format == "verl"  # detected from the composed keys
    assert layout(cfg, "actor_infer") == (8, 2, 4)  # rollout option overridden tp4 -> tp2
    assert "critic" not in cfg.roles  # grpo from _self_ beats the defaults' gae
    assert cfg.model == "Qwen/Qwen2.5-7B-Instruct"
    load = cfg.workload
    assert load is not None
    assert (load.prompts_per_step, load.samples_per_prompt, load.micro_batch_size) == (256, 8, 4)
    assert (load.prompt_tokens.max, load.response_tokens.max) == (512, 1024)
    actor = cfg.roles["actor_train"].parallel
    assert actor is not None and actor.fsdp and actor.recompute


def test_verl_self_first_lets_defaults_win() -> None:
    cfg = load_config(FIXTURES / "verl" / "self_first.yaml")
    assert cfg.cluster.gpus_per_node == 8  # trainer_base's 8 merged after this file's 4
    assert layout(cfg, "actor_infer") == (8, 4, 2)
    assert "critic" in cfg.roles  # gae from the defaults


def test_compose_resolves_oc_select() -> None:
    from rlplex.resources.importers.compose import compose
    from rlplex.resources.yaml_io import load_yaml_file

    path = FIXTURES / "verl" / "grpo.yaml"
    composed = compose(load_yaml_file(path), str(path))
    assert composed.missing_defaults == ()
    rollout = composed.data["actor_rollout_ref"]["rollout"]
    assert rollout == {"tensor_model_parallel_size": 2, "n": 8}  # tp2 has no prompt_length
    base = FIXTURES / "verl" / "conf" / "trainer_base.yaml"
    assert (
        compose(load_yaml_file(base), str(base)).data["actor_rollout_ref"]["rollout"][
            "prompt_length"
        ]
        == 512
    )  # ${oc.select:data.max_prompt_length,64}


# 13. A missing key says it is missing and where it may live.
def test_verl_missing_key_names_the_defaults() -> None:
    path = FIXTURES / "verl" / "missing_defaults.yaml"
    assert error(path, format="verl") == (
        f"{path}: trainer.n_gpus_per_node: is missing (verl sets it in a defaults file;"
        " rlplex could not find: not_there_trainer)"
    )


# 11. verl's separate pools: one-step-off split of one node, fully async, split placement.
def test_verl_one_step_off_splits_one_node() -> None:
    cfg = load_config(FIXTURES / "verl" / "one_step_off.yaml")
    assert (cfg.cluster.nodes, cfg.cluster.gpus_per_node) == (1, 8)
    assert cfg.roles["actor_train"].devices == tuple(range(6))
    assert cfg.roles["actor_infer"].devices == (6, 7)
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 1)


def test_verl_fully_async_models_sync_period_and_staleness() -> None:
    cfg = load_config(FIXTURES / "verl" / "fully_async.yaml")
    assert cfg.cluster.nodes == 3
    assert cfg.roles["actor_train"].devices == tuple(range(16))
    assert cfg.roles["actor_infer"].devices == tuple(range(16, 24))
    # staleness_threshold 0.5: the rollouter starts the next sync's samples early, one step
    # ahead (it was 1 + ceil(0.5) = 2, though verl calls a threshold of 1 "basically
    # equivalent to one_step_off")
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 1)
    # one rlplex step = one weight sync = 4 trainer steps of 16 x 2 prompts
    assert cfg.workload is not None and cfg.workload.prompts_per_step == 16 * 2 * 4


@pytest.mark.parametrize(
    ("threshold", "mode", "staleness"),
    [(0, "sync", 0), (0.1, "async", 1), (1, "async", 1), (1.5, "async", 2)],
)
def test_verl_fully_async_staleness_threshold(
    tmp_path: Path, threshold: float, mode: str, staleness: int
) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += f"algorithm: {{adv_estimator: grpo}}\nasync_training: {{staleness_threshold: {threshold}}}\n"
    path = tmp_path / "fully_async.yaml"
    path.write_text(text)
    cfg = load_config(path)
    assert (cfg.pipeline.mode, cfg.pipeline.staleness) == (mode, staleness)


def test_verl_split_placement_puts_critic_on_its_own_gpus() -> None:
    cfg = load_config(FIXTURES / "verl" / "split" / "ppo_split.yaml")
    assert cfg.roles["actor_train"].devices == cfg.roles["actor_infer"].devices == (0, 1, 2, 3)
    assert cfg.roles["critic"].devices == (4, 5, 6, 7)


# 12. Files that are not an RL step are refused, saying what they are, exit 2.
@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("roll/sft.yaml", "a ROLL SFT config (it has an 'sft_train' block)"),
        ("rlinf/sft.yaml", "an RLinf SFT config (runner.task_type: sft)"),
        ("verl/sft.yaml", "a verl SFT config (like verl/trainer/config/sft_trainer.yaml)"),
        # Found in review (2026-11-29): read as a native file ("data: unknown key").
        (
            "verl/evaluation.yaml",
            "a verl evaluation config (like verl/trainer/config/evaluation.yaml)",
        ),
    ],
)
def test_non_rl_files_refused(path: str, what: str) -> None:
    message = error(FIXTURES / path)
    assert f"this is {what}, not an RL training step (PPO/GRPO)" in message


def test_non_rl_refusal_exits_2() -> None:
    path = FIXTURES / "verl" / "sft.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "rlplex.cli", "plan", str(path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert done.returncode == 2
    assert "a verl SFT config" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_import_corpus_over_the_fixtures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench/import_corpus.py: counts per framework, grouped reasons, one JSON row per file."""
    spec = importlib.util.spec_from_file_location(
        "import_corpus", Path(__file__).resolve().parents[2] / "bench" / "import_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "rows.json"
    assert module.main([str(FIXTURES), "--json", str(out), "--plan"]) == 0
    printed = capsys.readouterr().out
    assert "| roll | 5 | 4 | 1 | 0 | 0 | 0 | 0 |" in printed  # every accepted file plans
    assert "| unrecognised | 5 | 0 | 0 | 0 | 5 | 0 | 0 |" in printed  # fragments (envs.yaml ...)
    assert "1 × refused: cluster.component_placement: has no 'reward' component" in printed
    rows = {Path(r["file"]).name: r for r in json.loads(out.read_text())}
    assert rows["tp16_spans_nodes.yaml"]["roles"] == "actor_train:32/1 actor_infer:32/16"
    assert rows["tp16_spans_nodes.yaml"]["period_s"] > 0
    assert rows["sft.yaml"]["status"] == "not RL"


@pytest.mark.parametrize(
    ("path", "override", "message"),
    [
        ("rlinf/one_key_tp.yaml", "cluster.num_nodes=null", "cluster.num_nodes: is missing"),
        (
            "roll/tp16_spans_nodes.yaml",
            "actor_infer.strategy_args.strategy_config.tensor_parallel_size=???",
            "actor_infer.strategy_args.strategy_config.tensor_parallel_size: is missing",
        ),
        (
            "verl/tp32.yaml",
            "trainer.nnodes=${nowhere.defined}",
            "trainer.nnodes: is an interpolation rlplex cannot resolve (a key no composed file"
            " defines, or an unset environment variable) (got '${nowhere.defined}')",
        ),
    ],
)
def test_missing_keys_say_missing(path: str, override: str, message: str) -> None:
    file = FIXTURES / path
    assert error(file, overrides=[override]) == f"{file}: {message}"


def test_roll_opd_students_and_several_teachers() -> None:
    """ROLL _handle_opd_mapping: students are the actor; each teacher a reference cluster."""
    cfg = load_config(FIXTURES / "roll" / "multi_teacher_opd.yaml")
    assert layout(cfg, "actor_train") == (8, 1, 8)
    assert layout(cfg, "actor_infer") == (8, 2, 4)
    assert cfg.roles["math_teacher"].devices == (8, 9, 10, 11)
    assert cfg.pipeline.stage("ref_logprob_math_teacher").role == "math_teacher"
    assert cfg.pipeline.stage("ref_logprob_code_teacher").role == "code_teacher"
    assert cfg.pipeline.stage("reward").role == "math_rule"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("defaults: 3\n", "defaults: must be a list of defaults entries (got 3)"),
        (
            "defaults: [[1]]\n",
            "defaults: a defaults entry must be a name or a GROUP: OPTION mapping (got [1])",
        ),
        ("defaults: [c]\n", "defaults: defaults nest too deeply (a cycle?)"),
    ],
)
def test_compose_errors(tmp_path: Path, text: str, message: str) -> None:
    """A malformed defaults list is a one-line ConfigError, never a traceback."""
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    assert message in error(path, format="verl")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "cluster.component_placement.inference=7",
            "cluster.auto_scheduler needs the disaggregated placement actor -> rollout [-> inference] on consecutive GPUs from 0 to the last, as RLinf asserts",
        ),
        (
            "algorithm.recompute_logprobs=false",
            "algorithm.recompute_logprobs is false, which disables inference, so inference GPUs must not be given (RLinf asserts it)",
        ),
        (
            "cluster.component_placement.rollout=0-1",
            "inference GPUs must not be given in collocated mode (actor and rollout on the same GPUs), as RLinf asserts",
        ),
    ],
)
def test_rlinf_model_parallel_assertions(override: str, message: str) -> None:
    """rlinf/utils/placement.py ModelParallelComponentPlacement's own checks."""
    path = FIXTURES / "rlinf" / "auto_scheduler.yaml"
    assert message in error(path, overrides=[override])


def test_roll_world_size_comes_from_device_mapping() -> None:
    """worker_config.py: world_size = len(device_mapping) // num_gpus_per_worker, overriding the block's."""
    cfg = load_config(
        FIXTURES / "roll" / "tp16_spans_nodes.yaml", overrides=["actor_infer.world_size=5"]
    )
    assert layout(cfg, "actor_infer") == (32, 16, 2)
