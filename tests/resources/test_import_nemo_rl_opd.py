"""NeMo RL's multi-teacher on-policy distillation (MOPD) read as NeMo RL runs it: each
non-colocated teacher worker group a role on the nodes the policy gives up, with its own
log-prob stage over the rollouts (nemo_rl/algorithms/opd.py, nemo_rl/models/policy/
teacher_worker_group.py, grpo.py ``setup`` and ``async_grpo_train``).

Every config is a small hand-written recipe over the fixture base, in the shape of NeMo RL's
``examples/configs/recipes/llm/mopd-qwen3-1.7b-3n8g-megatron-pack.yaml``.
"""
# ruff: noqa: E501 -- exact error messages read best on one line

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.estimate.estimator import estimate_config
from rlplex.plan.planner import make_plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "nemo_rl"
OPD = "on_policy_distillation"
TEACHERS = f"{OPD}.non_colocated_teachers"

MOPD: dict[str, Any] = {
    "cluster": {"num_nodes": 3, "gpus_per_node": 8},
    "grpo": {
        "num_prompts_per_step": 8, "num_generations_per_prompt": 4,
        "async_grpo": {"enabled": True}, "adv_estimator": {"name": "opd"},
        "seq_logprob_error_threshold": 2.0,
    },
    "loss_fn": {"reference_policy_kl_penalty": 0.0},
    "policy": {
        "model_name": "Qwen/Qwen3-1.7B",
        "train_global_batch_size": 32,
        "train_micro_batch_size": 1,
        "dtensor_cfg": {"enabled": False},
        "megatron_cfg": {"enabled": True, "tensor_model_parallel_size": 2,
                         "sequence_parallel": True},
        "generation": {
            "vllm_cfg": {"async_engine": True, "tensor_parallel_size": 2},
            "colocated": {"enabled": False, "resources": {"num_nodes": 1, "gpus_per_node": 8}},
        },
    },
    OPD: {
        "enabled": True,
        "teacher_model_by_agent_name": {"default_teacher": "Qwen/Qwen3-1.7B"},
        "default_teacher_alias": "default_teacher",
        "non_colocated_teachers": {
            "enabled": True,
            "default_teacher_cfg": {"tensor_model_parallel_size": 2, "num_nodes": 1,
                                    "gpus_per_node": 8, "precision": "bf16",
                                    "micro_batch_size": 1},
        },
    },
}  # fmt: skip
"""NeMo RL's Qwen3-1.7B MOPD recipe, the keys rlplex reads: 1 policy node, 1 vLLM node,
1 teacher node (self-distillation)."""


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``; a teacher map replaces the recipe's whole."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if key == "teacher_model_by_agent_name":
            out[key] = value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def recipe(tmp_path: Path, over: dict[str, Any] | None = None, name: str = "mopd.yaml") -> Path:
    """The MOPD recipe with ``over`` merged into it, inheriting the fixture base by path."""
    path = tmp_path / name
    body = merge(MOPD, over or {})
    path.write_text(
        yaml.safe_dump({"defaults": str(FIXTURES / "grpo_base.yaml"), **body}, sort_keys=False)
    )
    return path


def teachers(aliases: dict[str, str], **cfg: Any) -> dict[str, Any]:
    """An ``on_policy_distillation`` override mapping agents to checkpoints."""
    out: dict[str, Any] = {"teacher_model_by_agent_name": aliases,
                           "default_teacher_alias": next(iter(aliases))}  # fmt: skip
    if cfg:
        out["non_colocated_teachers"] = cfg
    return {OPD: out}


def error(path: Path, *overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides=overrides)
    return info.value


def test_one_teacher_is_a_role_on_the_node_the_policy_gives_up(tmp_path: Path) -> None:
    cfg = load_config(recipe(tmp_path))
    assert cfg.roles["actor_train"].devices == tuple(range(8))
    assert cfg.roles["actor_infer"].devices == tuple(range(8, 16))
    teacher = cfg.roles["teacher_default_teacher"]
    assert teacher.devices == tuple(range(16, 24)) and teacher.num_gpus_per_worker == 1
    assert teacher.model is None  # self-distillation: the policy's checkpoint, the top-level model
    p = teacher.parallel
    assert p is not None and (p.tp, p.pp, p.sp, p.ep, p.zero, p.fsdp) == (2, 1, 1, 1, 0, False)
    assert set(teacher.states) == {"weights"}  # inference only: no optimizer, no gradients
    stages = {s.name: s for s in cfg.pipeline.stages}
    scored = stages["ref_logprob_teacher_default_teacher"]
    assert scored.role == "teacher_default_teacher" and scored.after == ("reward",)
    # The OPD advantage is teacher minus student log-prob: training waits on both passes.
    assert set(stages["train"].after) == {"old_logprob", "ref_logprob_teacher_default_teacher"}
    assert "ref_logprob" not in stages and "reference" not in cfg.roles  # no KL penalty
    assert cfg.pipeline.mode == "async"
    plan = make_plan(cfg)
    assert any(op.stage == "ref_logprob_teacher_default_teacher" for op in plan.ops)


def test_a_teacher_of_its_own_checkpoint_is_estimated_as_that_model(tmp_path: Path) -> None:
    path = recipe(tmp_path, teachers({"math": "Qwen/Qwen3-8B"}))
    lengths = (
        "cluster.gpu=h100",
        "workload.prompt_tokens.mean=300",
        "workload.prompt_tokens.max=600",
    )
    cfg = load_config(path, overrides=lengths)
    assert cfg.roles["teacher_math"].model == "Qwen/Qwen3-8B"
    est = estimate_config(cfg)
    assert est.roles["teacher_math"].model == "qwen3-8b"
    assert est.roles["actor_train"].model == "qwen3-1.7b"
    teacher, student = est.stages["ref_logprob_teacher_math"], est.stages["old_logprob"]
    assert teacher.kind == student.kind == "forward"
    # The same rollouts on as many GPUs (tp 2 each): the 8B teacher's pass costs more FLOPs.
    assert teacher.flops > 3 * student.flops


def test_two_distinct_teachers_each_get_their_nodes_and_stage(tmp_path: Path) -> None:
    over = merge(
        teachers({"math": "Qwen/Qwen3-8B", "chat": "Qwen/Qwen3-4B"},
                 teacher_overrides={"chat": {"num_nodes": 2, "gpus_per_node": 4,
                                             "tensor_model_parallel_size": 4}}),
        {"cluster": {"num_nodes": 5}},
    )  # fmt: skip
    cfg = load_config(recipe(tmp_path, over))
    assert cfg.roles["actor_train"].devices == tuple(range(8))  # 5 - 1 - 2 teacher nodes: 2
    assert cfg.roles["actor_infer"].devices == tuple(range(8, 16))
    math, chat = cfg.roles["teacher_math"], cfg.roles["teacher_chat"]
    assert math.devices == tuple(range(16, 24)) and math.model == "Qwen/Qwen3-8B"
    # the override: 2 nodes, their first 4 GPUs each, tensor parallel 4
    assert chat.devices == (*range(24, 28), *range(32, 36)) and chat.model == "Qwen/Qwen3-4B"
    assert math.parallel is not None and chat.parallel is not None
    assert (math.parallel.tp, chat.parallel.tp) == (2, 4)
    stages = {s.name: s for s in cfg.pipeline.stages}
    assert stages["ref_logprob_teacher_math"].role == "teacher_math"
    assert stages["ref_logprob_teacher_chat"].role == "teacher_chat"
    assert {"ref_logprob_teacher_math", "ref_logprob_teacher_chat"} <= set(stages["train"].after)


def test_each_of_two_teachers_is_assumed_to_score_half_the_rollouts(tmp_path: Path) -> None:
    """NeMo RL sends each rollout to one teacher, its agent's (trajectory_collector.py
    ``_compute_teacher_logprobs``); with no split in the config, an even one: each teacher's
    pass is priced over half the rollouts. One teacher scores them all."""
    over = merge(teachers({"math": "Qwen/Qwen3-8B", "chat": "Qwen/Qwen3-4B"}),
                 {"cluster": {"num_nodes": 4}})  # fmt: skip
    lengths = ("cluster.gpu=h100", "workload.prompt_tokens.mean=300",
               "workload.prompt_tokens.max=600")  # fmt: skip
    cfg = load_config(recipe(tmp_path, over), overrides=lengths)
    assert cfg.pipeline.stage("ref_logprob_teacher_math").share == 0.5
    assert cfg.pipeline.stage("ref_logprob_teacher_chat").share == 0.5
    assert cfg.pipeline.stage("old_logprob").share == 1.0
    half = estimate_config(cfg).stages["ref_logprob_teacher_math"]
    one = load_config(recipe(tmp_path, teachers({"math": "Qwen/Qwen3-8B"}), "one.yaml"),
                      overrides=lengths)  # fmt: skip
    assert one.pipeline.stage("ref_logprob_teacher_math").share == 1.0
    whole = estimate_config(one).stages["ref_logprob_teacher_math"]
    assert half.flops == pytest.approx(whole.flops / 2)


def test_aliases_sharing_a_checkpoint_are_one_teacher_unless_told_not_to(
    tmp_path: Path,
) -> None:
    shared = teachers({"math": "Qwen/Qwen3-8B", "code": "Qwen/Qwen3-8B"})
    cfg = load_config(recipe(tmp_path, merge(shared, {"cluster": {"num_nodes": 4}})))
    assert [r for r in cfg.roles if r.startswith("teacher_")] == ["teacher_math"]
    assert len(cfg.roles["actor_train"].devices) == 16  # 4 nodes - 1 vLLM - 1 teacher
    assert [s.name for s in cfg.pipeline.stages if s.name.startswith("ref_")] == [
        "ref_logprob_teacher_math"
    ]
    assert cfg.pipeline.stage("ref_logprob_teacher_math").share == 1.0  # every alias's
    apart = merge(shared, {"cluster": {"num_nodes": 4},
                           OPD: {"deduplicate_shared_teacher_checkpoints": False}})  # fmt: skip
    cfg = load_config(recipe(tmp_path, apart, "apart.yaml"))
    assert cfg.roles["teacher_code"].devices == tuple(range(24, 32))
    assert len(cfg.roles["actor_train"].devices) == 8


def test_teacher_sizes_and_switches_read_as_nemo_rls_pydantic_config(tmp_path: Path) -> None:
    """Found in review (2026-11-29): a teacher's "2" nodes were refused and a dedupe switch of
    "no" read as on; NeMo RL's pydantic config converts both, as the importer does elsewhere."""
    shared = teachers(
        {"math": "Qwen/Qwen3-8B", "code": "Qwen/Qwen3-8B"},
        default_teacher_cfg={"num_nodes": "1", "tensor_model_parallel_size": 2.0},
    )
    apart = merge(shared, {"cluster": {"num_nodes": 4},
                           OPD: {"deduplicate_shared_teacher_checkpoints": "no"}})  # fmt: skip
    cfg = load_config(recipe(tmp_path, apart))
    assert [r for r in cfg.roles if r.startswith("teacher_")] == ["teacher_math", "teacher_code"]
    assert cfg.roles["teacher_code"].devices == tuple(range(24, 32))
    parallel = cfg.roles["teacher_math"].parallel
    assert parallel is not None and parallel.tp == 2


def test_overrides_sequence_parallel_fp8_and_the_reward_models_nodes(tmp_path: Path) -> None:
    """A teacher's Megatron overrides (its cfg's unknown keys and ``megatron_cfg_overrides``)
    go over the policy's ``megatron_cfg``; FP8 comes with it; the teachers' nodes lie after
    the reward model's."""
    over = merge(
        teachers({"math": "Qwen/Qwen3-8B", "chat": "Qwen/Qwen3-4B"},
                 default_teacher_cfg={"context_parallel_size": 2, "expert_model_parallel_size": 2,
                                      "moe_shared_expert_overlap": False},
                 teacher_overrides={"chat": {"megatron_cfg_overrides": {"sequence_parallel": False}}}),
        {"cluster": {"num_nodes": 5},
         "policy": {"megatron_cfg": {"fp8_cfg": {"enabled": True}}},
         "data": {"default": {"env_name": "reward_model"}},
         "env": {"reward_model": {"model_name": "Skywork/Skywork-Reward-V2-Llama-3.1-8B",
                                  "resources": {"num_nodes": 1, "gpus_per_node": 8}}}},
    )  # fmt: skip
    cfg = load_config(recipe(tmp_path, over))
    assert cfg.roles["reward"].devices == tuple(range(16, 24))
    math, chat = cfg.roles["teacher_math"], cfg.roles["teacher_chat"]
    assert (math.devices[0], chat.devices[0]) == (24, 32)
    assert math.parallel is not None and chat.parallel is not None
    assert (math.parallel.tp, math.parallel.sp, math.parallel.ep) == (2, 2, 2)
    assert math.parallel.sequence_parallel and not chat.parallel.sequence_parallel
    assert math.precision == chat.precision == "fp8"


def test_sync_grpo_reserves_the_teachers_but_never_calls_them(tmp_path: Path) -> None:
    """grpo_train (sync) gets no teacher worker groups: the nodes stay reserved, idle."""
    over = {"grpo": {"async_grpo": {"enabled": False}, "adv_estimator": {"name": "grpo"}}}
    cfg = load_config(recipe(tmp_path, over))
    assert cfg.roles["teacher_default_teacher"].devices == tuple(range(16, 24))
    assert cfg.roles["actor_train"].devices == tuple(range(8))
    assert not any(s.role == "teacher_default_teacher" for s in cfg.pipeline.stages)
    make_plan(cfg)


def test_distillation_without_non_colocated_teachers_is_plain_grpo(tmp_path: Path) -> None:
    """Found in review (2026-11-29): NeMo RL's Nemotron OPD recipe ("1 generation, 1 teacher,
    and 8 policy nodes") gave the trainer the teacher's node too. Without non-colocated
    teachers NeMo RL reserves none and computes no teacher log-probs: GRPO's advantage
    plans as plain GRPO on every node."""
    over = {"cluster": {"num_nodes": 10}, "grpo": {"adv_estimator": {"name": "grpo"}}}
    path = recipe(tmp_path, over)
    assert len(load_config(path).roles["actor_train"].devices) == 64
    off = recipe(
        tmp_path, merge(over, {OPD: {"non_colocated_teachers": {"enabled": False}}}), "off.yaml"
    )
    cfg = load_config(off)
    assert len(cfg.roles["actor_train"].devices) == 72
    assert not any(r.startswith("teacher") for r in cfg.roles)


def test_ppo_reads_no_teachers(tmp_path: Path) -> None:
    base = yaml.safe_load((FIXTURES / "grpo_base.yaml").read_text())
    body = merge(merge(base, MOPD), {"value": {"model_name": "Qwen/Qwen3-1.7B",
                                               "megatron_cfg": {"enabled": True}}})  # fmt: skip
    body["ppo"] = body.pop("grpo")
    body["ppo"].pop("adv_estimator")
    body["ppo"]["async_ppo"] = body["ppo"].pop("async_grpo")
    path = tmp_path / "ppo.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    cfg = load_config(path)
    assert "critic" in cfg.roles
    assert not any(r.startswith("teacher") for r in cfg.roles)
    assert len(cfg.roles["actor_train"].devices) == 16


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({OPD: {"enabled": False}}, f"{OPD}.enabled", "without teacher log-probs"),
        ({OPD: {"non_colocated_teachers": {"enabled": False}}}, f"{TEACHERS}.enabled",
         "it has no colocated teacher"),
        ({OPD: {"teacher_model_by_agent_name": {}, "default_teacher_alias": None}},
         f"{OPD}.teacher_model_by_agent_name", "'OPD requires teacher_logprobs'"),
        ({"grpo": {"async_grpo": {"enabled": False}}}, "grpo.async_grpo.enabled",
         "only with non-colocated teachers in async GRPO"),
        ({"loss_fn": {"force_on_policy_ratio": True}, "grpo": {"seq_logprob_error_threshold": None}},
         "loss_fn.force_on_policy_ratio", "skips the student's log-probs"),
        ({"policy": {"generation": {"vllm_cfg": {"async_engine": False}}}},
         "policy.generation.vllm_cfg.async_engine", "NeMo RL asserts they score async rollouts"),
        ({"policy": {"dtensor_cfg": {"enabled": True}, "megatron_cfg": {"enabled": False}}},
         "policy.dtensor_cfg.enabled", "NeMo RL refuses a DTensor policy"),
        ({OPD: {"default_teacher_alias": "chat"}}, f"{OPD}.default_teacher_alias",
         "is not an alias of on_policy_distillation.teacher_model_by_agent_name (default_teacher)"),
        ({OPD: {"teacher_model_by_agent_name": {"default_teacher": 7}}},
         f"{OPD}.teacher_model_by_agent_name.default_teacher", "must name the teacher's checkpoint"),
        ({OPD: {"non_colocated_teachers": {"default_teacher_cfg": {"gpus_per_node": 16}}}},
         f"{TEACHERS}.default_teacher_cfg.gpus_per_node", "must be at most cluster.gpus_per_node (8)"),
        ({OPD: {"non_colocated_teachers": {"teacher_overrides": {"default_teacher": {"tensor_model_parallel_size": 3}}}}},
         f"{TEACHERS}.teacher_overrides.default_teacher.tensor_model_parallel_size",
         "teacher 'default_teacher''s 8 GPUs (1 nodes x 8) are not a multiple of tensor x pipeline x context parallel (3 x 1 x 1)"),
        ({OPD: {"non_colocated_teachers": {"default_teacher_cfg": {"num_nodes": 0}}}},
         f"{TEACHERS}.default_teacher_cfg.num_nodes", "must be"),
        ({OPD: {"non_colocated_teachers": {"default_teacher_cfg": {"num_nodes": 3}}}},
         TEACHERS, "leave the policy no node of cluster.num_nodes (3, 0 for a reward model)"),
    ],
)  # fmt: skip
def test_refused_as_nemo_rl_refuses(
    tmp_path: Path, over: dict[str, Any], field: str, words: str
) -> None:
    refused = error(recipe(tmp_path, over))
    assert refused.field == field and words in refused.message, str(refused)


def test_strict_agent_matching_needs_no_default_alias(tmp_path: Path) -> None:
    over = {OPD: {"default_teacher_alias": "chat", "strict_agent_name_match": True}}
    assert "teacher_default_teacher" in load_config(recipe(tmp_path, over)).roles


def test_cli_refuses_in_one_line(tmp_path: Path) -> None:
    path = recipe(tmp_path, {OPD: {"non_colocated_teachers": {"enabled": False}}})
    out = CliRunner().invoke(app, ["plan", str(path)])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit)
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"{TEACHERS}.enabled" in lines[0] and "Traceback" not in out.output


def test_a_teacher_runs_its_own_log_prob_micro_batch(tmp_path: Path) -> None:
    """teacher_worker_group.py ``get_logprobs`` runs the teacher's ``micro_batch_size``
    (TeacherResourceConfig's default 4): the recipe's 1 is the policy's log-prob
    micro-batch here too (nothing to say); an alias's override is that teacher's pass
    alone, the default cfg's every other teacher's."""
    lengths = {"data": {"max_input_seq_length": 256}}  # a whole workload: prompts too
    config = load_config(recipe(tmp_path, lengths))
    assert config.workload is not None and config.workload.logprob_micro_batch_size == 1
    stages = {s.name: s.micro_batch_size for s in config.pipeline.stages}
    assert stages["ref_logprob_teacher_default_teacher"] is None
    cfg = teachers(
        {"math": "Qwen/Qwen3-4B", "code": "Qwen/Qwen3-8B"},
        default_teacher_cfg={"tensor_model_parallel_size": 2, "num_nodes": 1,
                             "gpus_per_node": 8, "micro_batch_size": 8},
        teacher_overrides={"math": {"micro_batch_size": 2}},
    )  # fmt: skip
    path = recipe(tmp_path, {"cluster": {"num_nodes": 4}, **lengths, **cfg}, name="two.yaml")
    stages = {s.name: s.micro_batch_size for s in load_config(path).pipeline.stages}
    assert stages["ref_logprob_teacher_math"] == 2
    assert stages["ref_logprob_teacher_code"] == 8
