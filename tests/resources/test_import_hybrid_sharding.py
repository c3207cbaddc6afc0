"""Hybrid sharding in verl's configs: the FSDP engine's ``fsdp_config.fsdp_size`` (the
critic's ``critic.fsdp.fsdp_size`` since 2026-04), VeOmni's ``veomni.fsdp_size`` and
TorchTitan's ``torchtitan.data_parallel_replicate_size`` become ``parallel.shard_group``.
Each test writes a small config of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError

BASE = "trainer: {nnodes: 2, n_gpus_per_node: 8}\nalgorithm: {adv_estimator: gae}\n"
NEW_REWARD = "reward: {reward_model: {enable: false}}\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("size", "group"), [(8, 8), (-1, None), (16, None), (32, None)])
def test_fsdp_size_of_actor_and_reference(tmp_path: Path, size: int, group: int | None) -> None:
    """-1 or at least the role's 16 GPUs: all of them (verl's create_device_mesh)."""
    text = BASE + "actor_rollout_ref: {actor: {strategy: fsdp, use_kl_loss: true,"
    text += f" fsdp_config: {{fsdp_size: {size}}}}}, ref: {{fsdp_config: {{fsdp_size: 4}}}}}}\n"
    cfg = load_config(write(tmp_path, text), format="verl")
    assert cfg.roles["actor_train"].parallel.shard_group == group
    assert cfg.roles["reference"].parallel.shard_group == 4


def test_critic_fsdp_size_in_both_locations(tmp_path: Path) -> None:
    new = BASE + NEW_REWARD + "critic: {strategy: fsdp, fsdp: {fsdp_size: 2}}\n"
    assert (
        load_config(write(tmp_path, new), format="verl").roles["critic"].parallel.shard_group == 2
    )
    old = BASE + "critic: {strategy: fsdp, model: {fsdp_config: {fsdp_size: 4}}}\n"
    assert (
        load_config(write(tmp_path, old), format="verl").roles["critic"].parallel.shard_group == 4
    )


def test_fsdp_size_that_does_not_divide_the_gpus(tmp_path: Path) -> None:
    text = BASE + "actor_rollout_ref: {actor: {fsdp_config: {fsdp_size: 6}}}\n"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), format="verl")
    assert info.value.field == "actor_rollout_ref.actor.fsdp_config.fsdp_size"
    assert info.value.value == 6


def test_veomni_fsdp_size_spans_its_ulysses_ranks(tmp_path: Path) -> None:
    """16 GPUs, Ulysses 2: 8 data-parallel ranks; fsdp_size 4 shards over 4 x 2 GPUs (its
    dp_shard_sp mesh); the reference takes the actor's size."""
    text = BASE + "actor_rollout_ref: {actor: {strategy: veomni, use_kl_loss: true, veomni:"
    text += " {fsdp_size: 4, ulysses_parallel_size: 2}}, ref: {strategy: veomni}}\n"
    cfg = load_config(write(tmp_path, text), format="verl")
    assert cfg.roles["actor_train"].parallel.shard_group == 8
    assert cfg.roles["reference"].parallel.shard_group == 4


def test_torchtitan_replicas(tmp_path: Path) -> None:
    """16 GPUs at tp 2: 8 data-parallel ranks in 2 replicas of 4."""
    text = BASE + "actor_rollout_ref: {actor: {strategy: torchtitan, torchtitan:"
    text += " {tensor_parallel_size: 2, data_parallel_replicate_size: 2,"
    text += " data_parallel_shard_size: 4}}}\n"
    par = load_config(write(tmp_path, text), format="verl").roles["actor_train"].parallel
    assert (par.tp, par.shard_group) == (2, 4)
    plain = text.replace("data_parallel_replicate_size: 2", "data_parallel_replicate_size: 1")
    par = load_config(write(tmp_path, plain), format="verl").roles["actor_train"].parallel
    assert par.shard_group is None
