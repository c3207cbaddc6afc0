"""``--env NAME=VALUE``: every command that reads a config takes it, gives it to a launch
script, and refuses it for a YAML config or a malformed item, in one line (exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import invoke, one_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RECORDS = EXAMPLES / "records"
CONF = ROOT / "tests" / "fixtures" / "importers" / "verl" / "conf"
PPO = EXAMPLES / "ppo.yaml"
RECORD = (RECORDS / "verl_quickstart.jsonl", "-c", RECORDS / "verl_quickstart.yaml")

DEVICE_SCRIPT = """\
#!/usr/bin/env bash
DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)}
NGPUS_PER_NODE=${NGPUS_PER_NODE:-8}
case "${DEVICE}" in
    gpu)
        ;;
    npu)
        NGPUS_PER_NODE=16
        ;;
    *)
        exit 1
        ;;
esac
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=128 \\
    actor_rollout_ref.rollout.n=4 \\
    trainer.n_gpus_per_node=${NGPUS_PER_NODE} trainer.nnodes=1 "$@"
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    """A verl checkout's skeleton with a launch script that picks its GPUs in a
    ``case "${DEVICE}"`` (verl's examples since 2026), DEVICE probed by a command."""
    trainer = tmp_path / "verl" / "trainer"
    shutil.copytree(CONF, trainer / "config")
    (trainer / "config" / "trainer_base.yaml").rename(trainer / "config" / "ppo_trainer.yaml")
    (tmp_path / "verl" / "__init__.py").write_text("")
    (trainer / "__init__.py").write_text("")
    (trainer / "main_ppo.py").write_text(
        "import hydra\n\n"
        '@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)\n'
        "def main(config): ...\n"
    )
    examples = tmp_path / "examples"
    examples.mkdir()
    path = examples / "run_device.sh"
    path.write_text(DEVICE_SCRIPT)
    return path


def test_a_device_case_is_refused_without_env_and_suggests_it(script: Path) -> None:
    result = invoke("validate", script)
    one_line(result, "--set trainer.n_gpus_per_node=..., or the environment variable that"
                     " decides it with --env DEVICE=...")  # fmt: skip
    assert "line 4" in result.stderr


@pytest.mark.parametrize(("device", "gpus"), [("gpu", 8), ("npu", 16)])
def test_env_device_takes_its_branch(script: Path, device: str, gpus: int) -> None:
    result = invoke("validate", script, "--env", f"DEVICE={device}", "--set", "cluster.gpu=h100")
    assert result.exit_code == 0, result.output
    assert f"{gpus} GPUs" in result.stdout
    # the script's own assignment of a variable wins over --env, as in bash: given
    # NGPUS_PER_NODE=4, the npu branch's 16 still holds
    both = invoke("validate", script, "--env", f"DEVICE={device}", "--env", "NGPUS_PER_NODE=4")
    assert both.exit_code == 0, both.output
    assert f"{16 if device == 'npu' else 4} GPUs" in both.stdout


YAML_REFUSAL = f"error: --env applies to launch scripts; {PPO} is a YAML config"


@pytest.mark.parametrize(
    "args",
    [
        ("validate", PPO),
        ("show", PPO),
        ("dag", PPO),
        ("estimate", PPO),
        ("estimate", PPO, "--sweep", "workload.response_tokens.mean=500,1000"),
        ("plan", PPO),
        ("simulate", PPO),
        ("run", PPO),
        ("size", PPO, "--gpus", "8"),
        ("viz", PPO),
        ("compare", PPO, "--baseline", "sequential"),
        ("replay", RECORDS / "verl_quickstart.jsonl", "-c", PPO),
        ("whatif", RECORDS / "verl_quickstart.jsonl", "-c", PPO, "--set", "pipeline.mode=async"),
        ("calibrate", RECORDS / "verl_quickstart.jsonl", "-c", PPO),
    ],
    ids=lambda a: "-".join(str(x) for x in a if not str(x).startswith("/"))[:40],
)
def test_every_config_command_takes_env_and_refuses_it_for_yaml(args) -> None:
    one_line(invoke(*args, "--env", "DEVICE=gpu"), YAML_REFUSAL)


@pytest.mark.parametrize("item", ["DEVICE", "=x", "1DEVICE=gpu", "DE-VICE=gpu"])
@pytest.mark.parametrize("command", ["validate", "replay"])
def test_a_malformed_env_item_is_refused_naming_option_and_value(command: str, item: str) -> None:
    args = (PPO,) if command == "validate" else RECORD
    one_line(invoke(command, *args, "--env", item), "error: --env: expects NAME=VALUE")
    assert repr(item) in invoke(command, *args, "--env", item).stderr


def test_whatif_gives_env_to_its_launch_script_alt_config(script: Path, tmp_path: Path) -> None:
    # the recorded config is a launch script as well: --env reads both (a YAML --config
    # would refuse it, naming that file)
    result = invoke(
        "whatif", RECORDS / "verl_quickstart.jsonl", "-c", script, "--alt-config", script,
        "--env", "DEVICE=npu", "--config-set", "cluster.gpu=h100", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {a["label"]: a for a in json.loads(result.stdout)["alternatives"]}
    assert rows[script.name].get("error") is None and rows[script.name]["period_s"] > 0
    # without --env the alternative file's GPUs are not known: the command is refused
    refused = invoke("whatif", RECORDS / "verl_quickstart.jsonl", "-c", script,
                     "--alt-config", script, "--config-set", "cluster.gpu=h100")  # fmt: skip
    assert refused.exit_code == 2 and "--env DEVICE=..." in refused.stderr


def test_env_for_a_timeline_is_refused() -> None:
    timeline = RECORDS / "verl_quickstart.jsonl"
    one_line(
        invoke("viz", timeline, "--env", "DEVICE=gpu"),
        f"error: --env applies to launch scripts; {timeline} is not a launch script (.sh)",
    )
    # compare: one of the two must be a launch script
    one_line(invoke("compare", PPO, timeline, "--env", "DEVICE=gpu"), YAML_REFUSAL)


def test_a_later_env_item_for_a_name_wins(script: Path) -> None:
    result = invoke("validate", script, "--env", "DEVICE=npu", "--env", "DEVICE=gpu")
    assert result.exit_code == 0, result.output
    assert "8 GPUs" in result.stdout


def test_an_env_variable_the_script_never_reads_is_warned_not_refused(script: Path) -> None:
    """A misspelt name (NGPUS for NGPUS_PER_NODE) used to change nothing silently: the
    command still runs (one set of --env may serve several scripts) and says so, once, for
    that name only; the variables the script reads are not named."""
    result = invoke(
        "validate", script, "--env", "DEVICE=gpu", "--env", "NGPUS=4", "--env", "X=a=b"
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "8 GPUs" in result.stdout
    warned = [line for line in result.stderr.splitlines() if "changed nothing" in line]
    assert len(warned) == 2, result.stderr
    assert "--env NGPUS=4 changed nothing: run_device.sh never reads $NGPUS" in warned[0]
    assert "--env X=a=b changed nothing" in warned[1]
    assert "DEVICE" not in result.stderr
    quiet = invoke("validate", script, "--env", "DEVICE=gpu", "--env", "NGPUS_PER_NODE=4")
    assert quiet.exit_code == 0 and "changed nothing" not in quiet.stderr, quiet.output


OPENRLHF_SCRIPT = """\
#!/bin/bash
NODES=${NODES:-1}
GPUS=8
ray job submit --address="http://127.0.0.1:8265" -- python3 -m openrlhf.cli.train_ppo_ray \\
   --ref_num_nodes ${NODES} --ref_num_gpus_per_node ${GPUS} \\
   --actor_num_nodes ${NODES} --actor_num_gpus_per_node ${GPUS} \\
   --critic_num_nodes ${NODES} --critic_num_gpus_per_node ${GPUS} \\
   --vllm_num_engines $((NODES * 4)) --vllm_tensor_parallel_size 2 --colocate_all_models \\
   --pretrain Qwen/Qwen2.5-7B-Instruct --micro_train_batch_size 4 --train_batch_size 128 \\
   --micro_rollout_batch_size 8 --rollout_batch_size 128 --n_samples_per_prompt 4 \\
   --prompt_max_len 1024 --generate_max_len 1024 --zero_stage 3 --bf16 \\
   --remote_rm_url /tmp/reward.py
"""


def test_env_reaches_an_openrlhf_script_and_one_it_sets_itself_is_warned(
    tmp_path: Path,
) -> None:
    path = tmp_path / "train_ppo.sh"
    path.write_text(OPENRLHF_SCRIPT)
    result = invoke("show", path, "--env", "NODES=2", "--env", "GPUS=4")
    assert result.exit_code == 0, result.output
    assert "actor_train (16 GPUs)" in " ".join(result.stdout.split())
    # GPUS=8 is the script's own: --env GPUS=4 changes nothing, and is said to
    warned = [line for line in result.stderr.splitlines() if "changed nothing" in line]
    assert len(warned) == 1 and "--env GPUS=4" in warned[0], result.stderr
