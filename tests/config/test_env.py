"""``env`` of :mod:`rlplex.config.loading` (``--env NAME=VALUE``): parsed, and refused for a
file that runs no shell."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.config.loading import check_env_any, env_for, parse_env
from rlplex.errors import ConfigError

PPO = Path(__file__).resolve().parents[2] / "examples" / "ppo.yaml"


def test_parse_env_reads_items_in_order() -> None:
    assert parse_env(["DEVICE=gpu", "X_1=a=b", "EMPTY=", "DEVICE=npu"]) == {
        "DEVICE": "npu", "X_1": "a=b", "EMPTY": "",
    }  # fmt: skip
    assert parse_env([]) == {}


@pytest.mark.parametrize("item", ["DEVICE", "=x", "1A=x", "A-B=x", "A B=x", ""])
def test_parse_env_refuses_a_malformed_item_naming_option_and_value(item: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_env(["OK=1", item])
    assert info.value.field == "--env" and info.value.value == item


def test_env_for_a_yaml_config_is_refused_naming_the_file() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(PPO, env={"DEVICE": "gpu"})
    assert str(info.value) == f"--env applies to launch scripts; {PPO} is a YAML config"
    assert load_config(PPO, env={}).cluster.num_gpus > 0  # none given: nothing to refuse


def test_a_command_of_several_files_gives_env_to_its_launch_scripts() -> None:
    assert env_for("run.sh", {"A": "1"}) == {"A": "1"} and env_for(PPO, {"A": "1"}) is None
    check_env_any([PPO, "run.sh"], {"A": "1"})  # one launch script: taken
    with pytest.raises(ConfigError, match="is a YAML config"):
        check_env_any([PPO, "t.jsonl"], {"A": "1"})
