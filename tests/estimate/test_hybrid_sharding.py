"""Hybrid sharding (``parallel.shard_group``, PyTorch's HSDP): states split over a group of
data-parallel ranks, gathers and reduce-scatters within it, gradient shards all-reduced
across its replicas; values computed by hand from the ``base`` fixture (llama-3.1-8b,
tests/estimate/conftest.py) laid out on two nodes of 8 H100."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import config_from_dict
from rlplex.errors import ConfigError
from rlplex.estimate.estimator import Estimate, estimate_config

P = 8_030_261_248  # llama-3.1-8b parameters (tests/estimate/test_formulas.py)
NVLINK = 450 * 0.8  # GB/s per device within a node
NETWORK = 50 * 0.8  # GB/s per device across nodes


def _two_nodes(base: dict[str, Any], parallel: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(base)
    config["cluster"]["nodes"] = 2
    for role in ("actor_train", "actor_infer", "reference"):
        config["roles"][role]["devices"] = "0-15"
    config["roles"]["actor_train"]["parallel"] = parallel
    return config


def _estimate(config: dict[str, Any]) -> Estimate:
    return estimate_config(config_from_dict(copy.deepcopy(config), file="t.yaml"))


def test_states_split_over_the_group_not_every_rank(base: dict[str, Any]) -> None:
    """16 ranks in groups of 4: each GPU holds a quarter of the bf16 weights and grads and
    of the 12-byte Adam state (fp32 master, two moments), not a sixteenth."""
    states = _estimate(_two_nodes(base, {"fsdp": True, "shard_group": 4})).roles["actor_train"]
    assert states.states["weights"] == pytest.approx(P * 2 / 4 / 1e9)
    assert states.states["grads"] == pytest.approx(P * 2 / 4 / 1e9)
    assert states.states["optimizer"] == pytest.approx(P * 12 / 4 / 1e9)
    full = _estimate(_two_nodes(base, {"fsdp": True})).roles["actor_train"]
    assert full.states["weights"] == pytest.approx(P * 2 / 16 / 1e9)


def test_zero_1_partitions_the_optimizer_over_the_group(base: dict[str, Any]) -> None:
    """Megatron's num_distributed_optimizer_instances: the optimizer over the group only;
    weights and grads stay whole on every rank."""
    roles = _estimate(_two_nodes(base, {"zero": 1, "shard_group": 8})).roles["actor_train"]
    assert roles.states["optimizer"] == pytest.approx(P * 12 / 8 / 1e9)
    assert roles.states["weights"] == pytest.approx(P * 2 / 1e9)


def test_a_group_of_every_rank_is_plain_sharding(base: dict[str, Any]) -> None:
    grouped = _estimate(_two_nodes(base, {"fsdp": True, "shard_group": 16}))
    plain = _estimate(_two_nodes(base, {"fsdp": True}))
    assert grouped.roles["actor_train"].states == plain.roles["actor_train"].states
    assert grouped.stages["train"].seconds == pytest.approx(plain.stages["train"].seconds)


def test_gathers_stay_in_the_node_and_shards_are_all_reduced_across_it(
    base: dict[str, Any],
) -> None:
    """Groups of 8 (one node each), 2 replicas. A forward gathers 7/8 of the bf16 weights
    per micro-batch over NVLink. Training per micro-batch: the forward's and backward's
    gathers (bf16) and the fp32 gradients' reduce-scatter, each 7/8 of the model, over
    NVLink; then the fp32 gradient shard (1/8) all-reduced between the 2 replicas,
    2 x (2 - 1) / 2 of it, over the network."""
    est = _estimate(_two_nodes(base, {"fsdp": True, "shard_group": 8}))
    forward = est.stages["old_logprob"].detail
    gather = P * 7 / 8 * 2
    assert forward["comm_s"] == pytest.approx(
        gather * forward["micro_batches_per_rank"] / (NVLINK * 1e9)
    )
    train = est.stages["train"].detail
    micro = train["micro_batches_per_rank"]
    within = (2 * P * 7 / 8 * 2 + P * 7 / 8 * 4) * micro / (NVLINK * 1e9)
    across = 2 * (P / 8) * (2 - 1) / 2 * 4 * micro / (NETWORK * 1e9)
    assert train["comm_s"] == pytest.approx(within + across)
    # Against sharding over all 16 ranks, which gathers across the network.
    full = _estimate(_two_nodes(base, {"fsdp": True})).stages["train"].detail
    assert full["comm_s"] == pytest.approx(
        (2 * P * 15 / 16 * 2 + P * 15 / 16 * 4) * micro / (NETWORK * 1e9)
    )


def test_shard_group_without_sharding_is_refused(base: dict[str, Any]) -> None:
    base["roles"]["actor_train"]["parallel"] = {"shard_group": 4}
    with pytest.raises(ConfigError) as info:
        config_from_dict(base, file="bad.yaml")
    err = info.value
    assert (err.file, err.field, err.value) == (
        "bad.yaml",
        "roles.actor_train.parallel.shard_group",
        4,
    )
    assert "nothing is sharded" in err.message


@pytest.mark.parametrize(
    ("parallel", "words"),
    [
        ({"fsdp": True, "dp": 8, "shard_group": 3}, "does not divide dp 8"),
        ({"fsdp": True, "shard_group": 3}, "does not divide the role's 8 data-parallel ranks"),
        ({"fsdp": True, "shard_group": 0}, "greater than or equal to 1"),
    ],
)
def test_a_group_that_does_not_tile_dp_is_refused(
    base: dict[str, Any], tmp_path: Path, parallel: dict[str, Any], words: str
) -> None:
    base["roles"]["actor_train"]["parallel"] = parallel
    with pytest.raises(ConfigError) as info:
        config_from_dict(copy.deepcopy(base), file="bad.yaml")
    assert info.value.field == "roles.actor_train.parallel.shard_group"
    assert info.value.value == parallel["shard_group"]
    assert words in info.value.message
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(base))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "roles.actor_train.parallel.shard_group" in result.output
    lines = [line for line in result.output.splitlines() if "shard_group" in line]
    assert len(lines) == 1, result.output


def test_expert_replicas_must_divide_the_expert_ranks(base: dict[str, Any]) -> None:
    """qwen3-30b-a3b with ep 8 on 8 ranks: each expert on one rank (expert dp 1), which
    2 replicas cannot split."""
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True, "ep": 8, "shard_group": 4}
    with pytest.raises(ConfigError) as info:
        config_from_dict(base, file="bad.yaml")
    assert info.value.field == "roles.actor_train.parallel.shard_group"
    assert "expert data-parallel" in info.value.message


def test_memory_advice_names_the_group_that_fits_not_more_gpus(
    base: dict[str, Any], tmp_path: Path
) -> None:
    """16 ranks in groups of 2 on 48 GB GPUs: the 8B model's states take 64 GB per GPU.
    More GPUs add replicas and shrink nothing, so the advice is the smallest group that
    divides 16 and fits (4: the states halve), said for the state and for the stage; with
    it the estimate fits."""
    config = _two_nodes(base, {"fsdp": True, "shard_group": 2})
    config["cluster"]["gpu_memory_gb"] = 48
    path = tmp_path / "hsdp.yaml"
    path.write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(app, ["estimate", str(path)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    advice = "raise roles.actor_train.parallel.shard_group from 2 to 4"
    assert (
        f"actor_train optimizer: needs 48.18 GB of 48.00 (over by 0.18 GB, 1.00x); {advice}" in text
    )
    assert (
        f"stage train on actor_train: needs 73.18 GB of 48.00 (over by 25.18 GB, 1.52x); {advice}"
        in text
    )
    assert "the GPUs if its states are sharded" not in text
    fits = CliRunner().invoke(
        app, ["estimate", str(path), "--set", "roles.actor_train.parallel.shard_group=4"]
    )
    assert fits.exit_code == 0, fits.output


def test_a_group_of_every_rank_that_does_not_fit_asks_for_more_gpus(base: dict[str, Any]) -> None:
    from rlplex.estimate.assumptions import group_remedy

    config = config_from_dict(_two_nodes(base, {"fsdp": True, "shard_group": 16}), file="t.yaml")
    role = config.roles["actor_train"]
    assert group_remedy(role, 1.5) == (
        "shard over all 16 data-parallel ranks (drop roles.actor_train.parallel.shard_group:"
        " 16) and give roles.actor_train 1.5x the GPUs"
    )
    config = config_from_dict(_two_nodes(base, {"fsdp": True, "shard_group": 4}), file="t.yaml")
    assert "from 4 to 8 " in group_remedy(config.roles["actor_train"], 1.2)
    assert "from 4 to 16 " in group_remedy(config.roles["actor_train"], 2.5)
