"""Stage and state estimates, config filling and marking, given figures winning."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import estimate_config
from rlplex.estimate.specs import model_presets

P = 8_030_261_248  # llama-3.1-8b parameters (tests/estimate/test_formulas.py)
H100 = 989.5e12


def test_states_by_hand(base: dict[str, Any]) -> None:
    cfg = config_from_dict(base, file="t.yaml")
    est = estimate_config(cfg)
    train = est.roles["actor_train"].states
    assert train["weights"] == pytest.approx(P * 2 / 1e9)  # bf16, not sharded (zero 1)
    assert train["grads"] == pytest.approx(P * 2 / 1e9)
    assert train["optimizer"] == pytest.approx(P * 12 / 8 / 1e9)  # fp32 master + 2 moments / dp
    assert est.roles["reference"].states == {"weights": pytest.approx(P * 2 / 8 / 1e9)}  # fsdp
    infer = est.roles["actor_infer"].states
    assert infer["weights"] == pytest.approx(P * 2 / 2 / 1e9)  # tp 2
    # KV cache: the replica's share of the batch at the longest prompt + response, if it fits.
    per_replica = math.ceil(64 * 4 / 4)
    need = per_replica * (200 + 600) * 131_072 / 2 / 1e9
    assert infer["kv_cache"] == pytest.approx(need)


def test_config_filled_and_marked(base: dict[str, Any]) -> None:
    cfg = config_from_dict(base, file="t.yaml")
    est = estimate_config(cfg)
    assert cfg.cluster.gpu_memory_gb == 80
    assert cfg.cluster.host_gb_per_s == pytest.approx(64 * 0.8)
    assert cfg.cluster.network_gb_per_s == pytest.approx(450 * 0.8)
    assert cfg.pipeline.stage("train").seconds == pytest.approx(est.stages["train"].seconds)
    assert cfg.pipeline.stage("reward").seconds == 3
    assert cfg.is_estimated("pipeline.stages.train.seconds")
    assert cfg.is_estimated("roles.actor_train.states.weights")
    assert cfg.is_estimated("cluster.gpu_memory_gb")
    assert not cfg.is_estimated("pipeline.stages.reward.seconds")
    assert cfg.roles["actor_train"].states["optimizer"] == pytest.approx(P * 12 / 8 / 1e9, abs=1e-3)
    assert cfg.pipeline.stage("train").memory_gb > 0


def test_train_and_forward_seconds_by_hand(base: dict[str, Any]) -> None:
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    spec = model_presets()["llama-3.1-8b"]
    sequences, tokens = 256, 400
    fwd = f.forward_flops(spec, tokens) * sequences
    assert est.stages["train"].flops == pytest.approx(3 * fwd)
    assert est.stages["train"].seconds == pytest.approx(3 * fwd / (8 * H100 * 0.35))
    assert est.stages["ref_logprob"].seconds == pytest.approx(fwd / (8 * H100 * 0.40))
    assert est.stages["train"].bound == "compute"


def test_recompute_costs_a_third_more(base: dict[str, Any]) -> None:
    plain = estimate_config(config_from_dict(base, file="t.yaml"))
    base["roles"]["actor_train"]["parallel"]["recompute"] = True
    again = estimate_config(config_from_dict(base, file="t.yaml"))
    assert again.stages["train"].seconds == pytest.approx(plain.stages["train"].seconds * 4 / 3)
    assert again.stages["train"].memory_gb < plain.stages["train"].memory_gb


def test_generation_latency_and_kv_cap(base: dict[str, Any]) -> None:
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    gen = est.stages["generate"]
    d = gen.detail
    assert gen.seconds == pytest.approx(
        d["prefill_s"] + max(d["decode_throughput_s"], d["decode_latency_s"])
    )
    # 64 sequences per replica all fit: the longest response's 600 steps set the time.
    assert d["batch"] == 64
    assert gen.bound == "latency"
    spec = model_presets()["llama-3.1-8b"]
    one_step = P * 2 / 2 / (3350e9 * 0.6)  # weights of one tp rank at 60% of HBM bandwidth
    assert d["decode_latency_s"] == pytest.approx(600 * one_step, rel=0.02)
    assert d["prefill_s"] == pytest.approx(f.forward_flops(spec, 100) * 64 / (2 * H100 * 0.5))
    # A given KV cache that holds only 4 sequences caps the batch: throughput-bound.
    kv_4 = 4 * 400 * 131_072 / 2 / 1e9
    base["roles"]["actor_infer"]["states"] = {"weights": 8.03, "kv_cache": kv_4 + 1e-6}
    capped = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert capped.detail["batch"] == 4
    assert capped.seconds > gen.seconds * 5
    assert capped.bound in ("memory", "compute")


def test_given_figures_win(base: dict[str, Any]) -> None:
    base["pipeline"]["stages"]["train"]["seconds"] = 42.0
    base["roles"]["actor_train"]["states"] = {"weights": 5, "optimizer": 10, "grads": 5}
    base["cluster"]["gpu_memory_gb"] = 64
    cfg = config_from_dict(base, file="t.yaml")
    assert cfg.pipeline.stage("train").seconds == 42.0
    assert cfg.roles["actor_train"].states == {"weights": 5, "optimizer": 10, "grads": 5}
    assert cfg.cluster.gpu_memory_gb == 64
    assert not cfg.is_estimated("pipeline.stages.train.seconds")
    assert not cfg.is_estimated("roles.actor_train.states")
    assert not cfg.is_estimated("cluster.gpu_memory_gb")
    assert cfg.is_estimated("cluster.host_gb_per_s")


def test_moe_and_mla_presets_estimate(base: dict[str, Any]) -> None:
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True, "recompute": True}
    moe = estimate_config(config_from_dict(base, file="t.yaml"))
    dense = estimate_config(config_from_dict({**base, "model": "qwen3-32b"}, file="t.yaml"))
    assert moe.stages["train"].seconds < dense.stages["train"].seconds / 5  # 3B of 30B active
    base["model"] = "deepseek-v3"
    base["cluster"] = {"nodes": 32, "gpus_per_node": 8, "gpu": "h200"}
    base["roles"] = {
        "actor_train": {"devices": "0-255", "parallel": {"fsdp": True}},
        "actor_infer": {"devices": "0-255", "num_gpus_per_worker": 8, "precision": "fp8"},
        "reference": {"devices": "0-255", "parallel": {"fsdp": True}},
        "rewards": {"world_size": 2},
    }
    big = estimate_config(config_from_dict(base, file="t.yaml"))
    assert big.roles["actor_train"].params / 1e9 == pytest.approx(671, rel=0.01)
    assert big.roles["actor_infer"].states["weights"] == pytest.approx(671.03 / 8, rel=0.01)


def test_dispatch_s_is_added_to_every_compute_op(base: dict[str, Any]) -> None:
    from rlplex.plan import make_plan

    period = make_plan(config_from_dict(base, file="t.yaml")).period_s
    base["cluster"]["dispatch_s"] = 0.5
    slower = make_plan(config_from_dict(base, file="t.yaml")).period_s
    assert slower > period + 0.5 * 4  # at least generate, ..., train, weight_sync in a chain


def test_json_document_shape(base: dict[str, Any]) -> None:
    doc = estimate_config(config_from_dict(base, file="t.yaml")).to_json()
    assert set(doc) == {"stages", "roles", "assumptions"}
    assert set(doc["stages"]["train"]) == {"seconds", "flops", "bytes", "bound"}
    assert set(doc["roles"]["actor_infer"]) == {"states", "peak_gb"}
    assert doc["stages"]["reward"]["bound"] == "given"
    assert doc["assumptions"]["efficiency"]["train"] == 0.35


def test_network_speed_across_nodes(base: dict[str, Any]) -> None:
    base["cluster"]["nodes"] = 2
    cfg = config_from_dict(base, file="t.yaml")
    assert cfg.cluster.network_gb_per_s == pytest.approx(50 * 0.8)  # one 400 Gb/s NIC per GPU
    assert cfg.cluster.device_copy_gb_per_s == pytest.approx(450 * 0.8)
