"""Stage and state estimates, config filling and marking, given figures winning."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import estimate_config
from rlplex.estimate.lengths import response_lengths
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
    assert cfg.cluster.gpu_memory_gb == 85.52  # nvidia-smi: 81,559 MiB
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


def _size_factors(tokens_per_gpu: float) -> float:
    """Width (hidden 4096 on an H100) and micro-batch factors of the default efficiencies."""
    return 4096 / (4096 + 1024) * tokens_per_gpu / (tokens_per_gpu + 512)


def test_train_and_forward_terms_by_hand(base: dict[str, Any]) -> None:
    base["workload"]["packing"] = False  # padded: every sequence costs 200 + 600 tokens
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    spec = model_presets()["llama-3.1-8b"]
    sequences, padded = 256, 800
    fwd = f.forward_flops(spec, padded) * sequences
    train = est.stages["train"]
    assert train.flops == pytest.approx(3 * fwd)
    eff = 0.6 * _size_factors(2 * padded)
    assert train.terms["compute"] == pytest.approx(3 * fwd / (8 * H100 * eff))
    # 256 x 800 tokens over 8 data-parallel ranks in micro-batches of 2 x 800: 16 each.
    assert train.detail["micro_batches_per_rank"] == 16
    step_overhead = 2.0  # the policy's train stage: the step's fixed overhead (the reward
    # stage holds the per-sequence work)
    # per layer: a forward and a backward of 3.6 forwards' host work (HOST_BACKWARD_PASSES)
    launches = 16 * 0.0008 * 32 * (1 + 3.6)
    # The controller sends each pass's batch, 256 sequences padded to 200 + 600 tokens, 52
    # bytes a slot out and 4 back, at 0.5 GB/s (workload.controller's defaults).
    controller = 256 * 800 * (52 + 4) / 0.5e9
    assert train.terms["overhead"] == pytest.approx(launches + step_overhead + controller)
    # The optimizer step reads and writes weights, grads and optimizer state once, a fused
    # Adam at 0.7 of the bandwidth (optimizer_fused); ZeRO-1 steps each rank's 1/8 of the
    # weights from its 1/8 of the gradients.
    held = est.roles["actor_train"].states
    states = (held["weights"] + held["grads"]) / 8 + held["optimizer"]
    # ... and the LM head's logits: each rank's tokens x 128,256 vocabulary entries, 16 bytes
    # each per pass (three passes to train), at the peak bandwidth.
    logits = 256 * 800 / 8 * 128_256 * 16 / 3350e9
    assert train.terms["memory"] == pytest.approx(2 * states * 1e9 / (3350e9 * 0.7) + 3 * logits)
    assert train.detail["optimizer_s"] == pytest.approx(2 * states * 1e9 / (3350e9 * 0.7))
    # Gradient all-reduce on NVLink (360 GB/s) hides behind compute.
    assert train.bytes == pytest.approx(2 * P * 2 * 7 / 8)
    assert "communication" not in train.terms
    assert train.seconds == pytest.approx(sum(train.terms.values()))
    assert train.bound == max(train.terms, key=train.terms.__getitem__)
    ref = est.stages["ref_logprob"]
    assert ref.terms["compute"] == pytest.approx(fwd / (8 * H100 * eff))
    assert ref.terms["overhead"] == pytest.approx(16 * 0.0008 * 32 + controller)
    # The reference is FSDP (Hugging Face modules: eager kernels by default): per token and
    # layer 60 x 4,096 + 16 x (32 + 8) x 128 + 4 x 14,336 bytes beyond fused kernels, over
    # each rank's 25,600 tokens and 32 layers, one forward pass.
    eager = 256 * 800 / 8 * 32 * (60 * 4096 + 16 * 40 * 128 + 4 * 14336) / 3350e9
    assert ref.detail["eager_traffic_s"] == pytest.approx(eager)
    assert ref.terms["memory"] == pytest.approx(logits + eager)
    assert train.detail["eager_traffic_s"] == 0.0  # ZeRO-1: Megatron-Core's fused layers


def test_eager_kernels_traffic_by_hand(base: dict[str, Any]) -> None:
    """Hugging Face modules under FSDP move each norm's, rotary embedding's and activation's
    tensors through memory beyond fused kernels: forward x1, backward x2.3, recompute x1
    more; ``kernels: fused`` (Liger, Transformer Engine) removes it."""
    per_token = 60 * 4096 + 16 * 40 * 128 + 4 * 14336  # llama-3.1-8b
    assert f.eager_excess_bytes_per_token(model_presets()["llama-3.1-8b"]) == per_token
    # qwen3-8b: hidden 4,096, 32 + 8 heads of 128, MLP 12,288, and a per-head q/k RMSNorm
    # (32 bytes more per q/k element)
    assert f.eager_excess_bytes_per_token(model_presets()["qwen3-8b"]) == pytest.approx(
        60 * 4096 + 16 * 40 * 128 + 4 * 12288 + 32 * 40 * 128
    )
    base["workload"]["packing"] = False
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True, "recompute": True}
    train = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml")).stages["train"]
    tokens = 256 * 800 / 8  # each data-parallel rank's
    assert train.detail["eager_traffic_s"] == pytest.approx(
        tokens * 32 * per_token * (1 + 2.3 + 1) / 3350e9
    )
    base["roles"]["actor_train"]["parallel"]["kernels"] = "fused"
    fused = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml")).stages["train"]
    assert fused.detail["eager_traffic_s"] == 0.0
    assert fused.terms["memory"] == pytest.approx(
        train.terms["memory"] - train.detail["eager_traffic_s"]
    )
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "kernels": "eager"}
    zero1 = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml")).stages["train"]
    assert zero1.detail["eager_traffic_s"] == pytest.approx(
        tokens * 32 * per_token * (1 + 2.3) / 3350e9
    )


def test_controller_batch_by_hand(base: dict[str, Any]) -> None:
    """One process serializes every pass's padded batch: bytes over ``controller_gb_s``,
    whatever the GPU count; NeMo RL's layout pads to the longest sequence and, before v0.7,
    sends each shard to every tensor/pipeline/context-parallel rank; results come back from
    every such rank unless ``returned_per_rank`` is off; RLinf's none."""
    base["workload"]["packing"] = True  # the padded length is the controller's, not the pass's
    est = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    for name in ("old_logprob", "ref_logprob", "train"):
        d = est.stages[name].detail
        assert d["controller_padded_tokens"] == 800  # prompt max 200 + response max 600
        assert d["controller_gb"] == pytest.approx(256 * 800 * (52 + 4) / 1e9)
        assert d["controller_s"] == pytest.approx(256 * 800 * 56 / 0.5e9)
    # Half the GPUs: the same controller seconds (one process), the compute doubles.
    half = copy.deepcopy(base)
    for role in ("actor_train", "reference"):
        half["roles"][role]["devices"] = "0-3"
    small = estimate_config(config_from_dict(half, file="t.yaml")).stages["old_logprob"]
    assert small.detail["controller_s"] == est.stages["old_logprob"].detail["controller_s"]
    # NeMo RL: padded to the mean prompt + the expected longest of the 256 responses; the
    # trainer's shard sent to each of its tp 2 x pp 2 x cp 2 ranks and fetched from each.
    base["workload"]["controller"] = {
        "padding": "longest", "bytes_per_token": 27, "returned_bytes_per_token": 3,
        "per_rank": True,
    }  # fmt: skip
    base["roles"]["actor_train"]["parallel"] = {"tp": 2, "pp": 2, "sp": 2, "zero": 1}
    base["efficiency"] = {"controller_gb_s": 0.25}
    nemo = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    padded = 100 + response_lengths(300, 600, None).longest_of(256)
    assert padded < 800
    train = nemo.stages["train"].detail
    assert train["controller_padded_tokens"] == pytest.approx(padded)
    assert train["controller_s"] == pytest.approx(256 * padded * (27 * 8 + 3 * 8) / 0.25e9)
    ref = nemo.stages["ref_logprob"].detail  # FSDP, tp 1: one copy each way
    assert ref["controller_s"] == pytest.approx(256 * padded * (27 + 3) / 0.25e9)
    # One copy of the results per shard (verl's FSDP workers before 2025-08).
    base["workload"]["controller"]["returned_per_rank"] = False
    once = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    assert once.stages["train"].detail["controller_s"] == pytest.approx(
        256 * padded * (27 * 8 + 3) / 0.25e9
    )
    # Packed (verl without its legacy workers): each sequence at the mean, 100 + 300.
    base["workload"]["controller"]["padding"] = "packed"
    packed = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    assert packed.stages["train"].detail["controller_padded_tokens"] == 400
    # The longest sequence never exceeds the maxima: every response cut at the cap.
    base["workload"]["controller"]["padding"] = "longest"
    base["workload"]["response_tokens"]["clip_ratio"] = 0.3
    capped = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    assert capped.stages["train"].detail["controller_padded_tokens"] == 700  # 100 + the cap
    base["workload"]["controller"] = {"padding": "none"}
    none = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    assert none.stages["train"].detail["controller_s"] == 0.0
    assert none.stages["train"].terms["overhead"] == pytest.approx(
        capped.stages["train"].terms["overhead"] - capped.stages["train"].detail["controller_s"]
    )
    base["workload"]["controller"] = {"bytes_per_token": 0, "returned_bytes_per_token": 0}
    zero = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    assert zero.stages["train"].detail["controller_s"] == 0.0


def test_controller_warns_when_it_dominates_a_pass(base: dict[str, Any]) -> None:
    """A batch padded to a long cap (verl pads to ``max_response_length``) for a short mean:
    the warning says so and what shrinks it."""
    base["workload"]["response_tokens"] = {"mean": 300, "max": 16_000}
    base["workload"]["prompts_per_step"] = 512
    base["roles"]["actor_train"]["parallel"]["recompute"] = True  # a 16K sequence's micro-batch
    cfg = config_from_dict(base, file="t.yaml")
    notes = [n for n in cfg.warnings if n.startswith("workload.controller")]
    assert len(notes) == 1
    assert "padded to 16,200 tokens a sequence against a mean of 400" in notes[0]
    base["workload"]["controller"] = {"padding": "none"}
    cfg = config_from_dict(base, file="t.yaml")
    assert not [n for n in cfg.warnings if n.startswith("workload.controller")]


def test_log_prob_passes_take_their_own_micro_batch(base: dict[str, Any]) -> None:
    """verl's ``log_prob_micro_batch_size`` and NeMo's ``logprob_batch_size`` differ from the
    training micro-batch: forward-only passes count their launches and efficiency with it."""
    base["workload"]["packing"] = False
    base["workload"]["logprob_micro_batch_size"] = 8
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    spec = model_presets()["llama-3.1-8b"]
    fwd = f.forward_flops(spec, 800) * 256
    ref = est.stages["ref_logprob"]
    # 256 x 800 tokens over 8 ranks in micro-batches of 8 x 800: 4 each (training keeps 16).
    assert ref.detail["micro_batches_per_rank"] == 4
    assert est.stages["train"].detail["micro_batches_per_rank"] == 16
    assert ref.terms["overhead"] == pytest.approx(4 * 0.0008 * 32 + ref.detail["controller_s"])
    assert ref.terms["compute"] == pytest.approx(fwd / (8 * H100 * 0.6 * _size_factors(8 * 800)))
    # Its activations are those of an 8-sequence micro-batch, of FSDP's eager HF layers.
    assert ref.memory_gb == pytest.approx(
        f.activation_bytes(spec, 8 * 800, backward=False, eager=True) / 1e9 / 1, rel=1e-6
    )
    base["workload"].update(packing=True, micro_batch_tokens=4096, logprob_micro_batch_tokens=16384)
    packed = estimate_config(config_from_dict(base, file="t.yaml"))
    # A rank's 256 x 400 / 8 = 12,800 tokens: one log-prob micro-batch (under 16,384), and
    # four training ones of 3,200, as few as the 4,096 budget allows, spread evenly.
    assert packed.stages["ref_logprob"].detail["micro_batch_tokens"] == 12_800
    assert packed.stages["train"].detail["micro_batch_tokens"] == 3_200
    assert packed.stages["train"].detail["micro_batches_per_rank"] == 4


def test_packed_passes_hide_host_launches_behind_compute(base: dict[str, Any]) -> None:
    """Packed batches issue kernels ahead of the device: only host time beyond compute shows."""
    base["efficiency"] = {"layer_s": 0.02}  # a host far slower than the device
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    ref = est.stages["ref_logprob"]
    host_s = ref.detail["micro_batches_per_rank"] * 0.02 * 32
    assert ref.detail["host_s"] == pytest.approx(host_s)
    assert ref.terms["overhead"] == pytest.approx(
        host_s - ref.terms["compute"] + ref.detail["controller_s"]
    )
    base["efficiency"] = {"layer_s": 1e-6}  # a fast host: no launches show
    base["workload"]["controller"] = {"padding": "none"}
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    assert "overhead" not in est.stages["ref_logprob"].terms


def test_rule_reward_stage_without_seconds_carries_the_sequences(base: dict[str, Any]) -> None:
    """A CPU reward stage is the per-sequence controller work (priced when it has no seconds);
    the train stage carries it only when the pipeline has no such stage."""
    base["workload"]["packing"] = False
    with_reward = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    del base["pipeline"]["stages"]["reward"]["seconds"]
    est = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml"))
    reward = est.stages["reward"]
    assert reward.seconds == pytest.approx(256 * 0.004)
    assert reward.bound == "overhead"
    assert est.stages["train"].terms["overhead"] == pytest.approx(with_reward.terms["overhead"])
    stages = base["pipeline"]["stages"]
    del stages["reward"]
    stages["advantage"]["after"] = ["ref_logprob", "old_logprob"]
    alone = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    assert alone.terms["overhead"] == pytest.approx(with_reward.terms["overhead"] + 256 * 0.004)


def test_exposed_communication_across_nodes(base: dict[str, Any]) -> None:
    """FSDP gathers over a slow network show where they exceed compute."""
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "h100", "network_gb_per_s": 0.5}
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    train = est.stages["train"]
    comm_s = train.bytes / 0.5e9
    assert train.terms["communication"] == pytest.approx(comm_s - train.terms["compute"])


def test_sharded_gradients_are_reduced_every_micro_batch(base: dict[str, Any]) -> None:
    """FSDP and ZeRO-2/3 reduce-scatter each micro-batch's gradients (FSDP in fp32, ZeRO in the
    model's bf16); whole gradients (ZeRO-1, DDP) are reduced once per optimizer step."""
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "h100", "network_gb_per_s": 0.5}
    base["workload"]["mini_batches"] = 2
    ring = 7 / 8  # 8 data-parallel ranks

    def train(parallel: dict[str, Any]) -> Any:
        base["roles"]["actor_train"]["parallel"] = parallel
        return estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml")).stages["train"]

    fsdp = train({"fsdp": True})
    mb = fsdp.detail["micro_batches_per_rank"]
    assert mb > 2  # more micro-batches than optimizer steps
    # a fp32 reduce-scatter and two bf16 gathers (forward, backward) per micro-batch
    assert fsdp.bytes == pytest.approx(P * (4 + 2 * 2) * ring * mb)
    assert fsdp.detail["comm_s"] == pytest.approx(fsdp.bytes / 0.5e9)
    assert fsdp.detail["comm_exposed_s"] == pytest.approx(
        fsdp.detail["comm_s"] - fsdp.terms["compute"]
    )
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    warnings = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml")).warnings
    assert any(
        w.startswith("pipeline.stages.train: actor_train's data-parallel traffic")
        and "workload.micro_batch_tokens" in w
        for w in warnings
    )
    assert train({"zero": 3}).bytes == pytest.approx(P * (2 + 2 * 2) * ring * mb)
    steps = 2
    assert train({"zero": 2}).bytes == pytest.approx(P * 2 * ring * (mb + steps))
    assert train({"zero": 1}).bytes == pytest.approx(2 * P * 2 * ring * steps)


def test_a_faster_compute_never_lengthens_a_pass_that_communication_bounds(
    base: dict[str, Any],
) -> None:
    """Regression: exposed communication and host launches each hid behind the same compute,
    so where both exceeded it a higher efficiency made the train stage longer (comm + host -
    compute), and calibrate fitted it the wrong way. A pass now takes max(compute, comm, host)
    of those three."""
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "h100", "network_gb_per_s": 0.5}
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    seconds = []
    for train_eff in (0.2, 0.6, 0.95):
        base["efficiency"] = {"train": train_eff, "layer_s": 0.05}
        stage = estimate_config(config_from_dict(copy.deepcopy(base), file="t.yaml")).stages[
            "train"
        ]
        d, terms = stage.detail, stage.terms
        assert d["comm_s"] > terms["compute"] and d["host_s"] > terms["compute"]
        shown = terms["compute"] + terms["communication"] + d["launch_overhead_s"]
        assert shown == pytest.approx(
            max(terms["compute"], d["comm_s"], d["host_s"]) + d["tp_activation_s"]
        )
        seconds.append(stage.seconds)
    assert seconds[0] >= seconds[1] >= seconds[2]


def test_recompute_costs_a_third_more(base: dict[str, Any]) -> None:
    plain = estimate_config(config_from_dict(base, file="t.yaml"))
    base["roles"]["actor_train"]["parallel"]["recompute"] = True
    again = estimate_config(config_from_dict(base, file="t.yaml"))
    assert again.stages["train"].terms["compute"] == pytest.approx(
        plain.stages["train"].terms["compute"] * 4 / 3
    )
    assert again.stages["train"].memory_gb < plain.stages["train"].memory_gb


def test_offload_and_cpu_optimizer_terms(base: dict[str, Any]) -> None:
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    base["roles"]["actor_train"]["parallel"] = {
        "zero": 1, "offload_params": True, "offload_optimizer": True,
    }  # fmt: skip
    cfg = config_from_dict(base, file="t.yaml")
    est = estimate_config(cfg)
    states = est.roles["actor_train"].states
    host = cfg.cluster.host_gb_per_s
    extra = 2 * states["weights"] / host + 2 * states["optimizer"] / host
    assert est.stages["train"].terms["overhead"] == pytest.approx(plain.terms["overhead"] + extra)
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "cpu_optimizer": True}
    cpu_est = estimate_config(config_from_dict(base, file="t.yaml"))
    cpu = cpu_est.stages["train"]
    # Regression: a CPU optimizer's master weights and moments live in host memory; the GPU
    # holds weights and grads only (the optimizer state was counted on the GPU, so verl's
    # DeepSeek-V3 recipe on 96 H20 was refused as not fitting).
    on_cpu = cpu_est.roles["actor_train"]
    assert "optimizer" not in on_cpu.states
    # 12 bytes per parameter of AdamW state plus the fp32 gradients the CPU steps with.
    assert on_cpu.host_states["optimizer"] == pytest.approx(states["optimizer"] * 16 / 12)
    assert on_cpu.peak_gb == pytest.approx(est.roles["actor_train"].peak_gb - states["optimizer"])
    # 8 ranks on the node each update their (unsharded, zero 1 shards) P/8 parameters.
    cpu_s = P / 8 * 8 / 1e9 + 2 * states["grads"] / host
    assert cpu.terms["overhead"] == pytest.approx(plain.terms["overhead"] + cpu_s)
    assert cpu.terms["memory"] == pytest.approx(  # the logits only: no GPU optimizer pass
        plain.terms["memory"]
        - 2
        * ((states["weights"] + states["grads"]) / 8 + states["optimizer"])
        * 1e9
        / (3350e9 * 0.7)
    )


def test_the_busiest_data_parallel_group_sets_the_pace(base: dict[str, Any]) -> None:
    """Packed sequences split over data-parallel groups: a group cannot finish before the
    step's longest sequence, and the group holding it carries its attention beyond the mean.
    Hand-computed for 256 sequences of 100 + 300 tokens on average (600 at most) per
    optimizer step over 8 groups."""
    spec = model_presets()["llama-3.1-8b"]
    base["workload"]["micro_batch_tokens"] = 4096
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    dist = response_lengths(300, 600, None)
    mean_len = 100 + dist.mean
    mean_square = 100**2 + 2 * 100 * dist.mean + dist.mean_square()
    linear = 2 * f.active_params(spec)
    width = f.attention_width(spec) * spec.num_layers
    longest = 100 + dist.longest_of(256)
    # zero 1, tp 1: 8 groups; one optimizer step over the 256 sequences.
    per_group = 256 / 8 * mean_len
    mean_load = 256 / 8 * (linear * mean_len + width * mean_square)
    busiest = (
        max(per_group, longest) * linear
        + width * longest**2
        + max(0.0, per_group - longest) * width * mean_square / mean_len
    )
    assert plain.detail["straggler"] == pytest.approx(busiest / mean_load)
    assert plain.detail["straggler"] > 1.0
    # Eight optimizer steps: 32 sequences each, 4 per group, so the longest one dominates.
    base["workload"]["mini_batches"] = 8
    many = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    assert many.detail["straggler"] > plain.detail["straggler"]
    # So scaling is sublinear: with 8 sequences per group per optimizer step, twice the GPUs
    # take more than half the time (ideal scaling would halve it).
    base["workload"]["mini_batches"] = 4
    base["workload"]["prompts_per_step"] = 16
    eight = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    base["cluster"]["nodes"] = 2
    for name in ("actor_train", "actor_infer", "reference"):
        base["roles"][name]["devices"] = "0-15"
    sixteen = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    assert sixteen.terms["compute"] > 0.5 * eight.terms["compute"] * 1.05
    base["cluster"]["nodes"] = 1
    for name in ("actor_train", "actor_infer", "reference"):
        base["roles"][name]["devices"] = "0-7"
    base["workload"]["prompts_per_step"] = 64
    # Padded sequences all cost the longest: no straggler.
    base["workload"]["packing"] = False
    padded = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    assert padded.detail["straggler"] == 1.0


def test_generation_terms(base: dict[str, Any]) -> None:
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    gen = est.stages["generate"]
    d = gen.detail
    assert gen.seconds == pytest.approx(sum(gen.terms.values()))
    # 64 sequences per replica all fit: the step's longest response sets the steps.
    assert d["slots"] == 64
    assert d["decode_steps"] == pytest.approx(d["longest_response"])
    # Per-step floor: scheduling + every layer's small kernels + two all-reduces per layer at
    # tp 2 within a node.
    assert d["step_floor_s"] == pytest.approx(0.0041 + 32 * 3e-5 + 2 * 32 * 1e-5)
    assert gen.terms["latency"] == pytest.approx(d["decode_steps"] * d["step_floor_s"])
    spec = model_presets()["llama-3.1-8b"]
    eff_prefill = 0.6 * 4096 / (4096 + 1024)
    assert d["prefill_s"] == pytest.approx(
        f.forward_flops(spec, 100) * 64 / (2 * H100 * eff_prefill)
    )
    # Reading one tp rank's weights at 60% of HBM bandwidth bounds every step from below.
    one_step = P * 2 / 2 / (3350e9 * 0.6)
    assert gen.terms["memory"] >= d["decode_steps"] * one_step * 0.99
    # A given KV cache that holds only 4 sequences caps the batch: throughput-bound.
    kv_4 = 4 * 400 * 131_072 / 2 / 1e9
    base["roles"]["actor_infer"]["states"] = {"weights": 8.03, "kv_cache": kv_4 * 1.2}
    capped = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert capped.detail["slots"] < 8
    assert capped.seconds > gen.seconds * 5
    # 64 sequences of 300 tokens on average through the few slots the cache holds.
    assert capped.detail["decode_steps"] >= 64 * 300 / capped.detail["slots"] * 0.9


def test_decode_floor_grows_with_layers_and_moe_layers(base: dict[str, Any]) -> None:
    """An MoE layer's routing kernels cost more than a dense layer's; both grow with depth."""
    base["roles"]["actor_infer"]["num_gpus_per_worker"] = 1
    dense = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert dense["step_floor_s"] == pytest.approx(0.0041 + 32 * 3e-5)
    base["model"] = "qwen3-30b-a3b"  # 48 layers, every one MoE
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    moe = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert moe["step_floor_s"] == pytest.approx(0.0041 + 48 * 3e-5 + 48 * 3e-5)
    base["efficiency"] = {"decode_moe_layer_s": 0.0, "decode_layer_s": 1e-4}
    given = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert given["step_floor_s"] == pytest.approx(0.0041 + 48 * 1e-4)


def test_decode_floor_of_an_engine_across_hosts(base: dict[str, Any]) -> None:
    """tp 2 in a node: two NVLink all-reduces per layer. The same engine on 1-GPU hosts: its
    all-reduces cross the network and every step pays the cross-host step. On 1-GPU hosts
    joined by one NVLink fabric (a GB200 rack) only the cross-host step is added."""
    within = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert within["step_floor_s"] == pytest.approx(0.0041 + 32 * 3e-5 + 2 * 32 * 1e-5)
    base["cluster"] = {"nodes": 8, "gpus_per_node": 1, "gpu": "h100"}
    across = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert across["step_floor_s"] == pytest.approx(0.0041 + 32 * 3e-5 + 2 * 32 * 5e-5 + 0.008)
    base["cluster"]["nvlink_gpus"] = 8
    fabric = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert fabric["step_floor_s"] == pytest.approx(0.0041 + 32 * 3e-5 + 2 * 32 * 1e-5 + 0.008)
    base["efficiency"] = {"cross_host_step_s": 0.0}
    given = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert given["step_floor_s"] == pytest.approx(within["step_floor_s"])


def test_partial_rollout_streams_and_prefills_the_interrupted_again(base: dict[str, Any]) -> None:
    """An engine fed across steps runs its share of tokens at full slots (no tail) and
    prefills every interrupted sequence's running context again after the weight sync."""
    spec = model_presets()["llama-3.1-8b"]
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    base["cluster"]["nodes"] = 2
    base["roles"]["actor_infer"]["devices"] = "8-15"  # its own GPUs: it can stream
    base["roles"]["actor_infer"]["rollout"] = {"partial_rollout": True, "max_num_seqs": 32}
    est = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    d = est.detail
    assert d["partial_rollout"] and d["slots"] == 32 and d["mean_batch"] == 32
    # 256 sequences over 4 replicas: 64 each, 300 tokens on average, 32 at a time.
    assert d["decode_steps"] == pytest.approx(64 * 300 / 32)
    # The length-biased mean context of a running sequence: prompt + E[L^2] / (2 E[L]).
    dist = response_lengths(300, 600, None)
    assert d["clip_ratio"] == pytest.approx(dist.clip_ratio, abs=1e-6)
    context = 100 + dist.mean_square() / (2 * dist.mean)
    eff_prefill = 0.6 * 4096 / (4096 + 1024)
    assert d["resumed_prefill_s"] == pytest.approx(
        32 * f.forward_flops(spec, context) / (2 * H100 * eff_prefill)
    )
    assert est.terms["latency"] == pytest.approx(d["decode_steps"] * d["step_floor_s"])
    # Without a tail, the stream is faster than the drained engine at the same slot cap.
    base["roles"]["actor_infer"]["rollout"] = {"max_num_seqs": 32}
    capped = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert est.seconds - d["resumed_prefill_s"] < capped.seconds


def test_generation_running_steps_ahead_shares_one_tail_among_them(base: dict[str, Any]) -> None:
    """Async with max_staleness k: the engine holds k steps' requests at once (NeMo RL's
    collector admits prompts_per_step x max_trajectory_age_steps groups), so k steps'
    sequences are decoded together and one step is charged 1/k of it."""
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    one = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    base["pipeline"]["max_staleness"] = 4
    four = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert one.detail["steps_in_flight"] == 1 and four.detail["steps_in_flight"] == 4
    # The same tokens per step, but the tail (the longest response) is paid once per 4 steps.
    assert four.detail["decode_steps"] < one.detail["decode_steps"]
    assert four.seconds < one.seconds
    assert four.flops == pytest.approx(one.flops, rel=0.02)


def test_an_engine_holding_k_steps_sizes_its_kv_cache_for_them(base: dict[str, Any]) -> None:
    """Regression: with max_staleness k the KV cache was sized for one step's sequences, so
    an engine holding k steps' requests ran them in waves (NeMo RL's 8-step-off row); the
    cache is now what k steps need, within what gpu_memory_utilization leaves."""
    base["pipeline"]["mode"] = "async"
    base["workload"]["response_tokens"] = {"mean": 1500, "max": 2000}
    base["pipeline"]["max_staleness"] = 1
    one = estimate_config(config_from_dict(base, file="t.yaml"))
    base["pipeline"]["max_staleness"] = 4
    four = estimate_config(config_from_dict(base, file="t.yaml"))
    kv_one = one.roles["actor_infer"].states["kv_cache"]
    kv_four = four.roles["actor_infer"].states["kv_cache"]
    room = 0.9 * 85.52 - one.roles["actor_infer"].states["weights"]
    assert kv_one < room / 4  # one step's sequences fit with room to spare
    assert kv_four == pytest.approx(4 * kv_one)
    gen_one, gen_four = one.stages["generate"].detail, four.stages["generate"].detail
    per_replica = gen_one["sequences_per_replica"]
    assert gen_one["slots"] == per_replica
    assert gen_four["slots"] == 4 * per_replica  # every held sequence runs, no waves


def test_a_streaming_engine_sizes_its_kv_cache_for_one_step_more(base: dict[str, Any]) -> None:
    """A partial-rollout engine on its own GPUs keeps the next step's requests running
    beside the k steps' it holds: its KV cache is sized for 1 + k steps (twice the drained
    engine's at k = 1)."""
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    base["workload"]["response_tokens"] = {"mean": 1500, "max": 2000}
    base["cluster"]["nodes"] = 2
    base["roles"]["actor_infer"]["devices"] = "8-15"
    drained = estimate_config(config_from_dict(base, file="t.yaml"))
    base["roles"]["actor_infer"]["rollout"] = {"partial_rollout": True}
    streaming = estimate_config(config_from_dict(base, file="t.yaml"))
    assert streaming.stages["generate"].detail["partial_rollout"]
    kv_drained = drained.roles["actor_infer"].states["kv_cache"]
    kv_streaming = streaming.roles["actor_infer"].states["kv_cache"]
    assert kv_streaming == pytest.approx(2 * kv_drained)


def test_a_search_over_staleness_sizes_the_kv_cache_with_given_seconds(
    base: dict[str, Any],
) -> None:
    """Regression: at_staleness returned early when no generation seconds were estimated (a
    record's or a costs file's seconds, as what-if gives them), so the estimated KV cache
    kept the file's k and the plan at k = 4 understated the engine's memory."""
    from rlplex.estimate.fill import at_staleness

    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    base["pipeline"]["stages"]["generate"]["seconds"] = 20.0
    one = config_from_dict(base, file="t.yaml")
    base["pipeline"]["max_staleness"] = 4
    four = config_from_dict(base, file="t.yaml")
    moved = at_staleness(one, 4)
    assert moved.pipeline.stage("generate").seconds == 20.0
    kv_one, kv_four, kv_moved = (
        c.roles["actor_infer"].states["kv_cache"] for c in (one, four, moved)
    )
    assert kv_four > kv_one
    assert kv_moved == pytest.approx(kv_four, rel=1e-6)


def test_a_search_over_staleness_prices_generation_again(base: dict[str, Any]) -> None:
    """Regression: plan --auto's staleness search and what-if copied the pipeline with
    another max_staleness and kept the generation seconds estimated for the file's, so a
    config estimated at k = 1 and planned at k = 4 did not get the shared tail. at_staleness
    prices them as a config written with k = 4 does."""
    from rlplex.estimate.fill import at_staleness

    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    one = config_from_dict(base, file="t.yaml")
    base["pipeline"]["max_staleness"] = 4
    four = config_from_dict(base, file="t.yaml")
    moved = at_staleness(one, 4)
    assert moved.pipeline.max_staleness == 4
    assert moved.pipeline.stage("generate").seconds == pytest.approx(
        four.pipeline.stage("generate").seconds, rel=1e-6
    )
    assert moved.pipeline.stage("generate").seconds < one.pipeline.stage("generate").seconds
    assert moved.pipeline.stage("train").seconds == one.pipeline.stage("train").seconds
    # The engine's estimated KV cache follows k too (the plan's memory at k = 4).
    kv_one, kv_four, kv_moved = (
        c.roles["actor_infer"].states["kv_cache"] for c in (one, four, moved)
    )
    assert kv_moved == pytest.approx(kv_four, rel=1e-6) and kv_four > kv_one
    assert at_staleness(one, 1).pipeline.stage("generate").seconds == (
        one.pipeline.stage("generate").seconds
    )


def test_partial_rollout_takes_effect_only_on_an_engine_that_can_stream(
    base: dict[str, Any],
) -> None:
    """As verl ignores partial_rollout at staleness 0: a sync pipeline, or an engine that
    shares GPUs with the trainer (it sleeps while the trainer runs), is priced as a drained
    engine and the config says why (a warning, so that placements and sizing can vary the
    mode and the devices of such a config)."""
    base["roles"]["actor_infer"]["rollout"] = {"partial_rollout": True}
    drained = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    cfg = config_from_dict(base, file="t.yaml")
    assert any("roles.actor_infer.rollout.partial_rollout is ignored" in w for w in cfg.warnings)
    assert not drained.detail["partial_rollout"]
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 0
    assert any("partial_rollout is ignored" in w for w in config_from_dict(base).warnings)
    base["pipeline"]["max_staleness"] = 1
    shared = config_from_dict(base, file="t.yaml")  # the base colocates every role
    assert any("shares GPUs with actor_train" in w for w in shared.warnings)
    assert not estimate_config(shared).stages["generate"].detail["partial_rollout"]
    base["cluster"]["nodes"] = 2
    base["roles"]["actor_infer"]["devices"] = "8-15"
    split = config_from_dict(base, file="t.yaml")
    assert not any("partial_rollout" in w for w in split.warnings)
    assert estimate_config(split).stages["generate"].detail["partial_rollout"]


def test_a_candidate_placement_that_changes_streaming_is_priced_again(
    base: dict[str, Any],
) -> None:
    """Regression: a placement search scaled the file's generation seconds, so whether a
    partial-rollout engine streamed was fixed by the file's devices. A split config's
    colocated candidate is now priced as the colocated config is (drained), and the
    what-if exponent of a streaming engine keeps it streaming at twice the GPUs."""
    from rlplex.estimate.scaling import estimator_exponents
    from rlplex.plan.costs import stage_work_seconds

    base["cluster"]["nodes"] = 2
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    base["roles"]["actor_infer"]["rollout"] = {"partial_rollout": True}
    base["roles"]["actor_infer"]["devices"] = "8-15"
    split = config_from_dict(base, file="t.yaml")
    base["roles"]["actor_infer"]["devices"] = "0-7"
    colocated = config_from_dict(base, file="t.yaml")
    stage = split.pipeline.stage("generate")
    placement = {n: r.devices for n, r in colocated.roles.items() if r.devices}
    assert stage_work_seconds(split, stage, placement) == pytest.approx(
        colocated.pipeline.stage("generate").seconds, rel=1e-4
    )
    assert stage_work_seconds(split, stage, placement) != pytest.approx(stage.seconds)
    assert estimator_exponents(split, ["generate"])["generate"] > 0.1


def test_the_resumed_prefill_of_an_fp8_engine_runs_at_fp8_speed(base: dict[str, Any]) -> None:
    base["cluster"]["nodes"] = 2
    base["roles"]["actor_infer"]["devices"] = "8-15"
    base["roles"]["actor_infer"]["rollout"] = {"partial_rollout": True}
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    bf16 = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    base["roles"]["actor_infer"]["precision"] = "fp8"
    fp8 = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    assert fp8["resumed_prefill_s"] < bf16["resumed_prefill_s"] / 1.3


def test_eager_and_max_num_seqs(base: dict[str, Any]) -> None:
    graphs = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    base["roles"]["actor_infer"]["rollout"] = {"cuda_graphs": False, "max_num_seqs": 16}
    eager = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert eager.detail["step_floor_s"] == pytest.approx(graphs.detail["step_floor_s"] + 32 * 3e-4)
    assert eager.detail["slots"] == 16


def test_eager_moe_layers_issue_more_kernels(base: dict[str, Any]) -> None:
    """Eager decode of Qwen3-30B-A3B: each of its 48 MoE layers costs 1.42 dense layers at
    eager_layer_s (bench/vllm_eager_layers.py); with CUDA graphs nothing of it is paid."""
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    graphs = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    base["roles"]["actor_infer"]["rollout"] = {"cuda_graphs": False}
    eager = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    extra = eager.detail["step_floor_s"] - graphs.detail["step_floor_s"]
    assert extra == pytest.approx(48 * 1.42 * 3e-4)


def test_vllm_v0_engine_pays_its_host_work_per_running_sequence(base: dict[str, Any]) -> None:
    """A V0 engine's decode steps pay 73 us per running sequence (bench/vllm_v0_host.py) where
    V1's pay 5 us: the overhead term is sequence-steps x the per-sequence cost, by hand, and
    the rest of the stage is unchanged. A given ``decode_sequence_v0_s`` wins."""
    v1 = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    d = v1.detail
    sequence_steps = d["decode_steps"] * d["mean_batch"]
    assert v1.terms["overhead"] == pytest.approx(sequence_steps * 5e-6, rel=1e-3)
    base["roles"]["actor_infer"]["rollout"] = {"vllm_v0": True}
    v0 = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert v0.detail["decode_steps"] == d["decode_steps"]
    assert v0.terms["overhead"] == pytest.approx(sequence_steps * 73e-6, rel=1e-3)
    assert v0.terms["memory"] == pytest.approx(v1.terms["memory"])
    assert v0.seconds - v1.seconds == pytest.approx(sequence_steps * 68e-6, rel=1e-3)
    base["efficiency"] = {"decode_sequence_v0_s": 1e-4, "decode_sequence_s": 0.0}
    given = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert given.terms["overhead"] == pytest.approx(sequence_steps * 1e-4, rel=1e-3)


LOAD_S = 291 * 7.1e-5  # llama-3.1-8b's 291 checkpoint tensors at load_tensor_s


def test_colocated_weight_sync_pays_reshard_and_engine_switch(base: dict[str, Any]) -> None:
    """The engine's weights copied (device copy), loaded at reshard_gb_s, each of the 291
    checkpoint tensors loaded at load_tensor_s, and its wake and sleep (engine_switch_s)."""
    cfg = config_from_dict(base, file="t.yaml")
    sync = estimate_config(cfg).stages["weight_sync"]
    gb = P * 2 / 2 / 1e9  # the engine's weights per device (tp 2)
    assert sync.terms["communication"] == pytest.approx(gb / cfg.cluster.device_copy_gb_per_s)
    assert sync.detail["tensors"] == 291
    assert sync.terms["overhead"] == pytest.approx(gb / 3.6 + LOAD_S + 0.3)
    assert sync.detail["sleep_level"] == 2 and sync.detail["sleep_copy_s"] == 0.0
    # The plan uses it: the loader fills the sync's seconds (marked as estimated).
    assert cfg.is_estimated("pipeline.stages.weight_sync.seconds")
    assert cfg.pipeline.stage("weight_sync").seconds == pytest.approx(sync.seconds, abs=1e-6)
    # The trainer holds the whole model (ZeRO-1 shards only the optimizer): nothing to gather.
    assert sync.detail["gather_gb"] == 0.0


def test_colocated_server_loaded_sync_loads_the_whole_model_per_device(
    base: dict[str, Any],
) -> None:
    """verl's colocated sync (server_loaded): each tp-2 engine rank is handed every full
    tensor, so it loads the whole model (16.06 GB at 3.6 GB/s, 4.461 s), not its 8.03 GB
    half; the copy over the device and the rest are as for any colocated sync."""
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "server_loaded"}
    cfg = config_from_dict(base, file="t.yaml")
    sync = estimate_config(cfg).stages["weight_sync"]
    half, full = P * 2 / 2 / 1e9, P * 2 / 1e9
    assert sync.terms["communication"] == pytest.approx(half / cfg.cluster.device_copy_gb_per_s)
    assert sync.terms["overhead"] == pytest.approx(full / 3.6 + LOAD_S + 0.3)
    assert full / 3.6 == pytest.approx(4.461, abs=1e-3)
    assert sync.detail["whole_model"] and sync.detail["loaded_gb"] == pytest.approx(full)


def test_level_one_sleep_copies_the_engine_weights_to_host_and_back(
    base: dict[str, Any],
) -> None:
    """vLLM's level-1 sleep (NeMo RL) copies the engine's 8.03 GB per device (tp 2) to host
    memory and back each step over the H100's PCIe Gen5 link at host_copy 0.8:
    2 x 8.03 / (64 GB/s x 0.8) = 0.3137 s, by hand."""
    level2 = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    base["roles"]["actor_infer"]["rollout"] = {"sleep_level": 1}
    sync = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    gb = P * 2 / 2 / 1e9
    assert sync.detail["sleep_copy_s"] == pytest.approx(2 * gb / (64.0 * 0.8))
    assert sync.detail["sleep_copy_s"] == pytest.approx(0.31369, rel=1e-4)
    assert sync.terms["overhead"] == pytest.approx(gb / 3.6 + LOAD_S + 0.3 + 2 * gb / 51.2)
    assert sync.seconds > level2.seconds
    # An engine on its own GPUs never sleeps: the level changes nothing there.
    split = _split(base)
    own = estimate_config(config_from_dict(split, file="t.yaml")).stages["weight_sync"]
    split["roles"]["actor_infer"]["rollout"] = {"sleep_level": 2}
    assert estimate_config(config_from_dict(split, file="t.yaml")).stages[
        "weight_sync"
    ].seconds == pytest.approx(own.seconds)
    assert "sleep_copy_s" not in own.detail


@pytest.mark.parametrize("level", [0, 3, "1", True])
def test_sleep_level_must_be_one_or_two(base: dict[str, Any], level: Any) -> None:
    base["roles"]["actor_infer"]["rollout"] = {"sleep_level": level}
    with pytest.raises(ConfigError) as err:
        config_from_dict(base, file="t.yaml")
    assert "sleep_level" in str(err.value)


def _split(base: dict[str, Any], nodes: int = 1) -> dict[str, Any]:
    base["cluster"].update({"nodes": nodes, "gpus_per_node": 8 // nodes})
    base["roles"]["actor_infer"]["devices"] = "0-3"
    base["roles"]["actor_train"]["devices"] = "4-7"
    base["roles"]["reference"]["devices"] = "4-7"
    return base


@pytest.mark.parametrize("method", ["overlapped", "bucketed", "bucketed_overlapped", "per_tensor"])
def test_split_weight_sync_sends_every_engine_device_the_whole_model(
    base: dict[str, Any], method: str
) -> None:
    """Each engine rank receives every full tensor (not its tp-2 shard); an FSDP trainer on
    4 GPUs first gathers the 3/4 of the model it lacks; all on one node's NVLink, where
    ``refit_gather`` (measured across nodes) does not apply."""
    base = _split(base)
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": method}
    cfg = config_from_dict(base, file="t.yaml")
    sync = estimate_config(cfg).stages["weight_sync"]
    full = P * 2 / 1e9
    copy = cfg.cluster.device_copy_gb_per_s
    assert copy == pytest.approx(450 * 0.8)
    broadcast, gather = full / copy, 0.75 * full / copy
    assert sync.detail["gather_gb"] == pytest.approx(0.75 * full)
    if method == "overlapped":
        assert sync.terms == {"communication": pytest.approx(broadcast)}
    elif method == "bucketed":  # the engine loads each bucket's tensors after it arrives
        assert sync.terms == {
            "communication": pytest.approx(broadcast + gather),
            "overhead": pytest.approx(LOAD_S),
        }
    elif method == "bucketed_overlapped":  # the loads (0.021 s) hide behind the moves
        assert sync.terms == {"communication": pytest.approx(max(broadcast, gather))}
    else:
        assert sync.terms == {
            "communication": pytest.approx(broadcast + gather),
            "overhead": pytest.approx(291 * 7.7e-4),  # Llama-3.1-8B's 291 checkpoint tensors
        }
    # The plan uses it: more than the link rule (the engine's own shard over the link).
    assert cfg.pipeline.stage("weight_sync").seconds == pytest.approx(sync.seconds, abs=1e-6)
    assert cfg.is_estimated("pipeline.stages.weight_sync.seconds")


def test_server_loaded_sync_is_bound_by_the_engines_loads(base: dict[str, Any]) -> None:
    """verl's checkpoint engine since 2026-02: the buckets' moves (NVLink, one node) hide
    behind each engine device's loads of the whole model through the weight-update API
    (16.06 GB at reshard_gb_s 3.6 GB/s, 4.461 s, and 291 tensors at load_tensor_s, 0.021 s),
    and the engines' KV cache is released and resumed once (engine_switch_s, 0.3 s)."""
    base = _split(base)
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "server_loaded"}
    cfg = config_from_dict(base, file="t.yaml")
    sync = estimate_config(cfg).stages["weight_sync"]
    full = P * 2 / 1e9
    moves = full / cfg.cluster.device_copy_gb_per_s  # the broadcast; the gather is 3/4 of it
    load = full / 3.6 + LOAD_S
    assert load == pytest.approx(4.4819, abs=1e-4)
    assert sync.terms == {
        "communication": pytest.approx(moves),
        "overhead": pytest.approx(0.3 + load - moves),
    }
    assert sync.seconds == pytest.approx(0.3 + load)
    assert sync.bound == "overhead" and sync.detail["load_bound"]
    # A faster engine API leaves the moves bounding it.
    base["efficiency"] = {"reshard_gb_s": 1e4, "load_tensor_s": 0.0}
    fast = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert fast.terms == {"communication": pytest.approx(moves), "overhead": pytest.approx(0.3)}
    assert "load_bound" not in fast.detail


def test_split_weight_sync_across_nodes_goes_over_the_network(base: dict[str, Any]) -> None:
    """Two nodes of 4 GPUs: NeMo RL's refit (overlapped, the default) broadcasts over a
    communicator of every rank, so all 4 NICs of a node carry it (4 x 40 GB/s, under
    NVLink's 360); verl's syncs send from one trainer rank's NIC (40 GB/s)."""
    cfg = config_from_dict(_split(base, nodes=2), file="t.yaml")
    sync = estimate_config(cfg).stages["weight_sync"]
    assert cfg.cluster.network_gb_per_s == pytest.approx(50 * 0.8)
    assert sync.detail["gather_gb"] == 0  # the trainer holds every weight
    assert sync.terms == {"communication": pytest.approx(P * 2 / 1e9 / (4 * 50 * 0.8))}
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "bucketed"}
    bucketed = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert bucketed.terms == {
        "communication": pytest.approx(P * 2 / 1e9 / (50 * 0.8)),
        "overhead": pytest.approx(LOAD_S),
    }
    base["efficiency"] = {"sync_tensor_s": 0.01}
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "per_tensor"}
    slow = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert slow.terms["overhead"] == pytest.approx(291 * 0.01)


def test_resharded_sync_sends_each_engine_device_its_slice_of_the_projections(
    base: dict[str, Any],
) -> None:
    """NeMo RL's nccl_reshard refit, two nodes of 4 GPUs: the MLP projections (32 layers x 3
    x 4096 x 14336 weights, 11.27 GB) go shard to shard. Each tp-2 engine slice (5.64 GB) is
    held by 2 replicas: each receives half of it over its NIC (40 GB/s) while the 4 trainer
    devices send a quarter of the projections each, then the replicas all-gather the other
    half over NVLink (one node: 360 GB/s); 96 transfers at sync_tensor_s. The other 4.79 GB
    go as the overlapped refit (4 NICs, 160 GB/s), their 195 checkpoint tensors' loads
    (0.014 s) hidden behind it."""
    base = _split(base, nodes=2)
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "resharded"}
    sync = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    projections = 32 * 3 * 4096 * 14336 * 2 / 1e9
    rest = P * 2 / 1e9 - projections
    slice_ = projections / 2
    resharded = sync.detail["resharded"]
    assert resharded["received_gb"] == pytest.approx(slice_)
    assert resharded["sent_gb"] == pytest.approx(projections / 4)
    assert resharded["receive_s"] == pytest.approx(max(slice_ / 2, projections / 4) / 40)
    assert resharded["replica_gather_s"] == pytest.approx(slice_ / 2 / 360)
    assert sync.detail["tensors"] == 291 - 96
    assert sync.terms == {
        "communication": pytest.approx(projections / 4 / 40 + slice_ / 2 / 360 + rest / 160),
        "overhead": pytest.approx(96 * 7.7e-4),
    }
    assert sync.bytes == pytest.approx((rest + slice_) * 1e9)
    # Against the overlapped refit of the same GPUs: the whole model to every device.
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "overlapped"}
    whole = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert whole.bytes == pytest.approx(P * 2)


def test_resharded_sync_is_bound_by_its_largest_term_and_only_where_it_applies(
    base: dict[str, Any],
) -> None:
    """Loads that outlast the rest's moves no longer label the sync "overhead" when the
    slices' communication is larger (a bug found in review); adapters only (LoRA) and
    colocated roles take their own paths, which the method does not change."""
    base = _split(base, nodes=2)
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "resharded"}
    base["efficiency"] = {"load_tensor_s": 2e-4}  # 195 loads: 0.039 s, past the rest's 0.030
    sync = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert sync.terms["overhead"] == pytest.approx(
        0.039 - (P * 2 / 1e9 - 11.274) / 160 + 96 * 7.7e-4, rel=1e-3
    )
    assert sync.terms["communication"] > sync.terms["overhead"]
    assert sync.bound == "communication" and "load_bound" not in sync.detail
    colocated = copy.deepcopy(base)
    colocated["roles"]["actor_infer"]["devices"] = "4-7"
    shared = estimate_config(config_from_dict(colocated, file="t.yaml")).stages["weight_sync"]
    assert shared.detail["colocated"] and "resharded" not in shared.detail


def test_resharded_sync_sends_from_two_pipeline_stages_at_a_time(base: dict[str, Any]) -> None:
    """A trainer of pp 4: NeMo RL's two refit streams let two stages' ranks send at once, so
    2 of its 4 devices share out the 11.27 GB of projections (5.64 GB each, 0.14 s at 40
    GB/s), more than a replica's half slice."""
    base = _split(base, nodes=2)
    base["roles"]["actor_train"]["parallel"] = {"pp": 4}
    base["roles"]["reference"]["parallel"] = {"pp": 4}
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "resharded"}
    sync = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    projections = 32 * 3 * 4096 * 14336 * 2 / 1e9
    assert sync.detail["resharded"]["senders"] == 2
    assert sync.detail["resharded"]["receive_s"] == pytest.approx(projections / 2 / 40)


@pytest.mark.parametrize("method", ["overlapped", "bucketed_overlapped"])
def test_overlapped_sync_is_bound_by_the_engines_loads_when_they_outlast_the_moves(
    base: dict[str, Any], method: str
) -> None:
    """An overlapped sync loads one bucket's tensors while the next one moves: at 10 ms a
    tensor the 291 loads (2.91 s) outlast the 0.045 s broadcast, so they bound the sync; the
    overhead term is what the moves do not hide."""
    base = _split(base)
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": method}
    base["efficiency"] = {"load_tensor_s": 0.01}
    sync = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    moves = sync.terms["communication"]
    assert moves == pytest.approx(P * 2 / 1e9 / 360)
    assert sync.terms["overhead"] == pytest.approx(2.91 - moves)
    assert sync.seconds == pytest.approx(2.91)
    assert sync.detail["load_s"] == pytest.approx(2.91)
    assert sync.bound == "overhead"  # the loads bound it, though the moves are the larger term


def test_colocated_sync_gathers_a_trainer_sharded_across_nodes(base: dict[str, Any]) -> None:
    """Every GPU hands its engine whole tensors, so it gathers what its trainer shard lacks:
    over the network when tensor x pipeline parallel (8) spans the 4-GPU nodes, the node's
    four NICs sharing the bytes at ``refit_gather`` (0.34) of their 4 x 40 GB/s."""
    base["cluster"].update({"nodes": 2, "gpus_per_node": 4})
    base["roles"]["actor_train"]["parallel"] = {"tp": 4, "pp": 2}
    cfg = config_from_dict(base, file="t.yaml")
    sync = estimate_config(cfg).stages["weight_sync"]
    full = P * 2 / 1e9
    own = estimate_config(cfg).roles["actor_train"].states["weights"]
    assert sync.detail["gather_gb"] == pytest.approx(full - own)
    engine = P * 2 / 2 / 1e9
    assert sync.terms["communication"] == pytest.approx(
        engine / cfg.cluster.device_copy_gb_per_s + (full - own) / (0.34 * 4 * 50 * 0.8)
    )


def test_truncated_share_lengthens_generation(base: dict[str, Any]) -> None:
    base["workload"]["response_tokens"]["clip_ratio"] = 0.0
    none = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    base["workload"]["response_tokens"]["clip_ratio"] = 0.1
    some = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"]
    assert some.detail["longest_response"] == 600
    assert none.detail["longest_response"] < 600
    assert some.seconds > none.seconds


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
    # 16,384-token micro-batches of a 30B model on 8 GPUs fit with a CPU optimizer.
    base["roles"]["actor_train"]["parallel"] = {
        "fsdp": True, "recompute": True, "cpu_optimizer": True,
    }  # fmt: skip

    def moe_over_dense(micro_batch_tokens: int) -> float:
        cfg = copy.deepcopy(base)
        cfg["workload"]["micro_batch_tokens"] = micro_batch_tokens
        moe = estimate_config(config_from_dict(cfg, file="t.yaml"))
        dense = estimate_config(config_from_dict({**cfg, "model": "qwen3-32b"}, file="t.yaml"))
        return moe.stages["train"].terms["compute"] / dense.stages["train"].terms["compute"]

    # 3B of 30B active: each expert FLOP is dearer (768-wide grouped GEMMs on the tokens routed
    # to each expert, the busiest expert rank), most of all on small micro-batches, where a
    # few dozen tokens per expert leave the expert matmuls bound by reading their weights.
    large, small = moe_over_dense(16_384), moe_over_dense(800)
    assert 3.04 / 31.98 < large < 0.3
    assert small > 2 * large
    base["model"] = "deepseek-v3"
    base["cluster"] = {"nodes": 32, "gpus_per_node": 8, "gpu": "h200"}
    base["roles"] = {
        "actor_train": {"devices": "0-255", "parallel": {"fsdp": True, "recompute": True}},
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
    assert set(doc["stages"]["train"]) == {"seconds", "flops", "bytes", "bound", "terms", "detail"}
    json.dumps(doc)  # every figure, the detail too, is plain JSON
    train = doc["stages"]["train"]
    assert train["seconds"] == pytest.approx(sum(train["terms"].values()))
    assert set(doc["roles"]["actor_infer"]) == {"states", "host_states", "peak_gb"}
    assert doc["stages"]["advantage"]["bound"] == "given"
    assert doc["stages"]["reward"]["terms"] == {"overhead": pytest.approx(256 * 0.004)}
    assert doc["assumptions"]["efficiency"]["train"] == 0.6


def test_network_speed_across_nodes(base: dict[str, Any]) -> None:
    base["cluster"]["nodes"] = 2
    cfg = config_from_dict(base, file="t.yaml")
    assert cfg.cluster.network_gb_per_s == pytest.approx(50 * 0.8)  # one 400 Gb/s NIC per GPU
    assert cfg.cluster.device_copy_gb_per_s == pytest.approx(450 * 0.8)


def test_moe_imbalance_and_expert_all_to_all(base: dict[str, Any]) -> None:
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    uniform = dict(base, efficiency={"moe_imbalance": 1.0})
    flat = estimate_config(config_from_dict(uniform, file="t.yaml")).stages["ref_logprob"]
    skewed = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    spec = model_presets()["qwen3-30b-a3b"]
    routed = spec.moe_layers * spec.experts_per_token * 3 * spec.hidden_size
    share = routed * spec.moe_intermediate_size / f.active_params(spec)
    # The experts' grouped GEMMs are 768 wide on 800 x 8 / 128 = 50 tokens per expert against
    # the model's 2,048 wide on 800 tokens (width and micro-batch factors, halves 1024 and 512).
    slower = (2048 / 3072 * 800 / 1312) / (768 / 1792 * 50 / 562)
    assert skewed.detail["micro_batch_tokens"] == 800
    assert skewed.terms["compute"] == pytest.approx(
        flat.terms["compute"] * (1 - share + share * slower * 1.25) / (1 - share + share * slower)
    )
    base["roles"]["reference"]["parallel"] = {"fsdp": True, "ep": 4}
    cfg = config_from_dict(base, file="t.yaml")
    ep = estimate_config(cfg).stages["ref_logprob"]
    tokens = ep.detail["tokens"] / 8  # per device
    sent = 2 * tokens * 8 * spec.hidden_size * 2 * spec.moe_layers * 3 / 4  # k=8, ep 4
    assert ep.terms["communication"] == pytest.approx(
        sent / (cfg.cluster.device_copy_gb_per_s * 1e9)
    )


def test_expert_parallel_splits_the_routed_experts(base: dict[str, Any]) -> None:
    """ep ranks hold their own routed experts whole; the rest splits over tp and, with ZeRO,
    each part over its own data-parallel group."""
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "ep": 8}
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    spec = model_presets()["qwen3-30b-a3b"]
    experts = 48 * 128 * 3 * 2048 * 768  # layers x experts x SwiGLU of hidden 2048, width 768
    assert f.routed_expert_params(spec) == experts
    params = est.roles["actor_train"].params
    dense = params - experts
    states = est.roles["actor_train"].states
    assert states["weights"] == pytest.approx((dense + experts / 8) * 2 / 1e9)
    assert states["grads"] == pytest.approx((dense + experts / 8) * 2 / 1e9)
    # ZeRO-1: the dense part over 8 data-parallel ranks, the experts over their 1.
    per_param = f.optimizer_bytes_per_param("adamw", "bf16")
    assert states["optimizer"] == pytest.approx((dense / 8 + experts / 8) * per_param / 1e9)
    assert states["weights"] < params * 2 / 1e9 / 5  # whole, it would not fit an 80 GB GPU


def test_expert_parallel_size_must_divide_the_devices(base: dict[str, Any]) -> None:
    from rlplex.errors import ConfigError

    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "ep": 3}
    with pytest.raises(ConfigError) as info:
        estimate_config(config_from_dict(base, file="t.yaml"))
    assert info.value.field == "roles.actor_train.parallel.ep" and info.value.value == 3


def test_tensor_parallel_activation_collectives(base: dict[str, Any]) -> None:
    """Four all-gathers / reduce-scatters of tokens x hidden per layer and direction."""
    base["roles"]["reference"]["parallel"] = {"tp": 2}
    base["roles"]["actor_train"]["parallel"] = {"tp": 2, "zero": 1, "recompute": True}
    cfg = config_from_dict(base, file="t.yaml")
    est = estimate_config(cfg)
    tokens = 256 * (100 + 300)  # packed: prompt + response means
    # per device: its data-parallel group's tokens (dp 4) x 4,096 x 2 bytes, half of it moved
    one_way = (
        4 * 32 * tokens / 4 * 4096 * 2 * (2 - 1) / 2 / (cfg.cluster.device_copy_gb_per_s * 1e9)
    )
    ref = est.stages["ref_logprob"]
    assert ref.detail["tp_activation_s"] == pytest.approx(one_way)
    assert ref.terms["communication"] == pytest.approx(one_way)
    train = est.stages["train"]  # forward, backward and the recomputed forward
    assert train.detail["tp_activation_s"] == pytest.approx(3 * one_way)
    base["roles"]["reference"]["parallel"] = {"tp": 1}
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    assert "communication" not in plain.terms


def test_nvlink_fabric_across_nodes(base: dict[str, Any]) -> None:
    """GB200 NVL72: 4-GPU nodes in one 72-GPU NVLink fabric; traffic leaves it only past a rack."""
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "gb200"}
    rack = config_from_dict(base, file="t.yaml")
    assert rack.cluster.nvlink_gpus == 72
    assert rack.cluster.fabric_gpus == 72
    assert rack.cluster.network_gb_per_s == pytest.approx(900 * 0.8)  # NVLink, one rack
    base["cluster"]["nodes"] = 19  # 76 GPUs: two racks
    assert config_from_dict(base, file="t.yaml").cluster.network_gb_per_s == pytest.approx(50 * 0.8)
    base["cluster"]["nvlink_gpus"] = 4  # the file's figure wins: one node per fabric
    cfg = config_from_dict(base, file="t.yaml")
    assert cfg.cluster.fabric_gpus == 4 and cfg.cluster.fabric_of(4) == 1


def test_tensor_parallel_over_nodes_of_one_fabric(base: dict[str, Any]) -> None:
    """tp 8 over two 4-GPU nodes: NVLink all-reduces on an NVL72 rack, network ones elsewhere."""
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "gb200"}
    base["roles"]["actor_infer"]["num_gpus_per_worker"] = 8
    floor = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    base["cluster"]["nvlink_gpus"] = 4
    apart = estimate_config(config_from_dict(base, file="t.yaml")).stages["generate"].detail
    layers = model_presets()["llama-3.1-8b"].num_layers
    gap = apart["step_floor_s"] - floor["step_floor_s"]
    assert gap == pytest.approx(2 * layers * (5e-05 - 1e-05))


def test_fp8_roles_run_their_weight_matmuls_faster(base: dict[str, Any]) -> None:
    """An fp8 role's weight matmuls run ``fp8_matmul_speedup`` times faster, attention as in
    bf16; a GPU without FP8 tensor cores (A100) gains nothing."""
    from rlplex.estimate.context import Context, Inputs
    from rlplex.estimate.passes import _pass_flops

    bf16_cfg = config_from_dict(base, file="t.yaml")
    bf16 = estimate_config(bf16_cfg).stages["train"].terms["compute"]
    base["roles"]["actor_train"]["precision"] = "fp8"
    fp8 = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"].terms["compute"]
    ctx = Context(
        Inputs(
            cluster=bf16_cfg.cluster,
            roles=bf16_cfg.roles,
            pipeline=bf16_cfg.pipeline,
            model=bf16_cfg.model,
            workload=bf16_cfg.workload,
        )
    )
    matmul, attention = _pass_flops(ctx, model_presets()["llama-3.1-8b"], "lm")
    assert fp8 / bf16 == pytest.approx((matmul / 1.55 + attention) / (matmul + attention))
    base["cluster"]["gpu"] = "a100"
    a100_fp8 = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    base["roles"]["actor_train"]["precision"] = "bf16"
    a100_bf16 = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    assert a100_fp8.terms["compute"] == pytest.approx(a100_bf16.terms["compute"])


def test_fp8_memory_only_an_engines_weights_take_one_byte(base: dict[str, Any]) -> None:
    """vLLM's FP8 engine: 1-byte weights, a bf16 KV cache unless kv_cache_dtype fp8; an FP8
    trainer (Transformer Engine casts per GEMM) keeps bf16 weights and grads."""
    bf16 = estimate_config(config_from_dict(base, file="t.yaml")).roles
    for role in ("actor_train", "actor_infer"):
        base["roles"][role]["precision"] = "fp8"
    fp8 = estimate_config(config_from_dict(base, file="t.yaml")).roles
    assert fp8["actor_train"].states["weights"] == pytest.approx(P * 2 / 1e9)
    assert fp8["actor_train"].states["grads"] == pytest.approx(P * 2 / 1e9)
    assert fp8["actor_train"].states["optimizer"] == bf16["actor_train"].states["optimizer"]
    assert fp8["actor_infer"].states["weights"] == pytest.approx(P / 2 / 1e9)  # 1 byte, tp 2
    assert fp8["actor_infer"].states["kv_cache"] == pytest.approx(
        bf16["actor_infer"].states["kv_cache"]
    )
    base["roles"]["actor_infer"]["rollout"] = {"kv_cache_dtype": "fp8"}
    fp8_kv = estimate_config(config_from_dict(base, file="t.yaml")).roles["actor_infer"]
    assert fp8_kv.states["kv_cache"] == pytest.approx(bf16["actor_infer"].states["kv_cache"] / 2)


def test_a_split_sync_is_estimated_whatever_else_is_given(base: dict[str, Any]) -> None:
    """Regression: the loader estimated only when some other stage or state was missing, so
    the same split sync was 16x cheaper (the link rule) when every other figure was given."""
    base = _split(base)
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "per_tensor"}
    estimated = config_from_dict(base, file="t.yaml").pipeline.stage("weight_sync").seconds
    for stage in base["pipeline"]["stages"].values():
        if stage.get("kind") != "weight_sync":
            stage.setdefault("seconds", 10.0)
    for role in base["roles"].values():
        if "devices" in role:
            role.setdefault("states", {"weights": 8.0})
    given = config_from_dict(base, file="t.yaml")
    assert given.is_estimated("pipeline.stages.weight_sync.seconds")
    # The same whole-model broadcast and 291 tensors; only the gather differs (8 GB given
    # where the estimate held the whole 16 GB model on each trainer GPU).
    seconds = given.pipeline.stage("weight_sync").seconds
    assert seconds == pytest.approx(estimated + (P * 2 / 1e9 - 8) / (450 * 0.8), abs=2e-6)
    assert seconds > 10 * 8 / (450 * 0.8)  # the link rule: the engine's 8 GB over NVLink


def test_gather_with_expert_parallel_stays_inside_the_node(base: dict[str, Any]) -> None:
    """Regression: tp x pp x ep x dp counted expert-parallel ranks twice (they are carved out
    of the data-parallel ones), so an FSDP trainer with ep 2 on one node of a two-node
    cluster gathered over the network."""
    base["model"] = "qwen3-30b-a3b"
    base["cluster"] = {"nodes": 2, "gpus_per_node": 8, "gpu": "h100"}
    base["roles"]["actor_infer"]["devices"] = "8-15"
    base["roles"]["reference"]["devices"] = "0-7"
    base["roles"]["actor_train"] = {"devices": "0-7", "parallel": {"fsdp": True}}
    without = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    base["roles"]["actor_train"]["parallel"]["ep"] = 2
    with_ep = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    copy = 450 * 0.8
    assert without.detail["gather_s"] == pytest.approx(without.detail["gather_gb"] / copy)
    assert with_ep.detail["gather_s"] == pytest.approx(with_ep.detail["gather_gb"] / copy)


def test_fp8_speeds_up_prefill_and_log_prob_passes_too(base: dict[str, Any]) -> None:
    bf16 = estimate_config(config_from_dict(base, file="t.yaml")).stages
    for role in ("actor_train", "actor_infer"):
        base["roles"][role]["precision"] = "fp8"
    fp8 = estimate_config(config_from_dict(base, file="t.yaml")).stages
    assert fp8["old_logprob"].terms["compute"] < 0.8 * bf16["old_logprob"].terms["compute"]
    assert fp8["generate"].detail["prefill_s"] < 0.8 * bf16["generate"].detail["prefill_s"]


def _split_async(base: dict[str, Any]) -> dict[str, Any]:
    """The base config async (staleness 1) with the engine on GPUs of its own."""
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    base["cluster"]["nodes"] = 2
    base["roles"]["actor_infer"]["devices"] = "8-15"
    return base


def test_in_flight_turn_is_what_runs_between_generation_and_its_weights(
    base: dict[str, Any],
) -> None:
    """The trainer's turn: every GPU stage after generate and before the last sync into its
    role, in turn (ref 4 + old 5 + train 6; the CPU reward and the driver's advantage are
    not the trainer's), and the sync's own seconds; a stage after the sync is not in it.
    With a second sync into the engine after the first, the turn runs to the last one."""
    from rlplex.estimate.generation import in_flight_turn, trainer_seconds

    raw = _split_async(base)
    seconds = {"ref_logprob": 4, "old_logprob": 5, "train": 6, "weight_sync": 2, "generate": 9}
    for name, value in seconds.items():
        raw["pipeline"]["stages"][name]["seconds"] = value
    raw["pipeline"]["stages"]["report"] = {
        "role": "driver",
        "seconds": 50,
        "after": ["weight_sync"],
    }
    cfg = config_from_dict(raw, file="t.yaml")
    gen = cfg.pipeline.stage("generate")
    assert in_flight_turn(cfg.pipeline, gen, lambda s: trainer_seconds(cfg, s)) == (4 + 5 + 6, 2)
    raw["pipeline"]["stages"]["polish"] = {"role": "actor_train", "seconds": 7,
                                           "after": ["weight_sync"]}  # fmt: skip
    raw["pipeline"]["stages"]["weight_sync2"] = {
        "kind": "weight_sync", "from": "actor_train", "to": "actor_infer", "seconds": 3,
        "after": ["polish"],
    }  # fmt: skip
    cfg = config_from_dict(raw, file="t.yaml")
    turn = in_flight_turn(cfg.pipeline, gen, lambda s: trainer_seconds(cfg, s))
    assert turn == (4 + 5 + 6 + 2 + 7, 3)


def test_prompt_groups_spread_over_replicas() -> None:
    """8 prompts of 4 responses on 2 replicas: each replica holds 2 responses of each group
    (evenly spread representative lengths), and a group frees its place when the longest of
    its 4 ends (the other 2 from a second such set); with 8 replicas each holds one response
    per group. 16 responses on 6 replicas: 3 of each group here, standing for 2.67, so the
    replica's sequences add up to its share."""
    from rlplex.estimate.generation import prompt_groups

    dist = response_lengths(300, 600, None)
    groups, stands_for = prompt_groups(dist, 8, 4, 2, 1024)
    mine, others = dist.lengths(16), dist.lengths(16)
    assert stands_for == 1 and len(groups) == 8
    assert groups[1].lengths == tuple(mine[2:4])
    assert groups[1].longest == max(mine[2:4] + others[2:4])
    groups, _ = prompt_groups(dist, 8, 4, 8, 1024)
    assert [len(g.lengths) for g in groups] == [1] * 4  # 32 responses over 8 replicas
    groups, stands_for = prompt_groups(dist, 64, 16, 6, 1024)
    assert len(groups) == 64 and {len(g.lengths) for g in groups} == {3}
    assert sum(len(g.lengths) for g in groups) * stands_for == pytest.approx(math.ceil(1024 / 6))
    # 4,096 groups of one response on a replica, 12 slots: walked at 1,024 groups standing
    # for 4 each, 3 walked slots.
    groups, stands_for = prompt_groups(dist, 4096, 1, 1, 12)
    assert len(groups) == 1024 and stands_for == 4


def test_in_flight_weight_updates_hide_the_tail_only_while_the_trainer_keeps_up(
    base: dict[str, Any],
) -> None:
    """An engine that decodes through weight syncs: with a quick trainer its slots stay full
    (fewer decode steps than the drained engine's, which waits for the longest response);
    with a trainer slower than generation it drains and waits, as the drained engine."""
    from rlplex.estimate.generation import in_flight_grid

    raw = _split_async(base)
    drained = estimate_config(config_from_dict(raw, file="t.yaml")).stages["generate"]
    raw["roles"]["actor_infer"]["rollout"] = {"in_flight_weight_updates": True}
    raw["pipeline"]["stages"]["train"]["seconds"] = 0.5
    quick = estimate_config(config_from_dict(raw, file="t.yaml")).stages["generate"]
    d = quick.detail
    assert d["in_flight_weight_updates"] and not d["partial_rollout"]
    assert d["trainer_s"] > 0.5 and d["sync_s"] > 0  # the log-prob passes' estimates too
    assert quick.seconds < drained.seconds
    assert d["decode_steps"] < drained.detail["decode_steps"]
    assert d["idle_s"] == pytest.approx(0, abs=1e-9)
    assert d["loop_period_s"] == pytest.approx(
        quick.seconds - d["prefill_s"] + d["sync_s"], rel=0.02
    )
    raw["pipeline"]["stages"]["train"]["seconds"] = 10 * drained.seconds
    slow = estimate_config(config_from_dict(raw, file="t.yaml")).stages["generate"]
    assert slow.seconds == pytest.approx(drained.seconds, rel=0.02)
    assert slow.detail["idle_s"] > 0
    # The loop takes the turn on its 0.5 % grid (in_flight_grid).
    assert slow.detail["loop_period_s"] == pytest.approx(
        sum(in_flight_grid((slow.detail["trainer_s"], slow.detail["sync_s"])))
    )
    assert slow.detail["loop_period_s"] == pytest.approx(
        slow.detail["trainer_s"] + slow.detail["sync_s"], rel=0.003
    )


def test_in_flight_weight_updates_take_effect_only_on_an_engine_that_can_stream(
    base: dict[str, Any],
) -> None:
    """As partial rollouts: a sync pipeline, or an engine sharing the trainer's GPUs, drains
    every step, and the config says the field is ignored."""
    base["roles"]["actor_infer"]["rollout"] = {"in_flight_weight_updates": True}
    cfg = config_from_dict(base, file="t.yaml")
    assert any(
        "roles.actor_infer.rollout.in_flight_weight_updates is ignored" in w for w in cfg.warnings
    )
    assert not estimate_config(cfg).stages["generate"].detail.get("in_flight_weight_updates")
    split = config_from_dict(_split_async(base), file="t.yaml")
    assert not any("in_flight_weight_updates" in w for w in split.warnings)
    assert estimate_config(split).stages["generate"].detail["in_flight_weight_updates"]


def test_partial_rollout_and_in_flight_weight_updates_exclude_each_other(
    base: dict[str, Any],
) -> None:
    from rlplex.errors import ConfigError

    base["roles"]["actor_infer"]["rollout"] = {
        "partial_rollout": True, "in_flight_weight_updates": True,
    }  # fmt: skip
    with pytest.raises(ConfigError) as err:
        config_from_dict(base, file="t.yaml")
    assert "roles.actor_infer.rollout" in str(err.value) and "set one" in str(err.value)


def test_an_in_flight_engine_is_priced_again_with_the_trainer_of_each_placement(
    base: dict[str, Any],
) -> None:
    """A placement search scaled an in-flight engine's seconds by its own GPUs alone; its
    drain depends on the trainer's turn, so a candidate with the trainer on fewer GPUs (the
    engine's GPUs unchanged) prices more generation, and the config's own placement gives the
    config's own seconds."""
    from rlplex.plan.costs import config_placement, stage_work_seconds

    raw = _split_async(base)
    raw["roles"]["actor_infer"]["rollout"] = {"in_flight_weight_updates": True}
    raw["pipeline"]["stages"]["train"]["seconds"] = 0.5  # a trainer that keeps up on 8 GPUs
    raw["workload"]["response_tokens"] = {"mean": 300, "max": 2400}  # a long tail
    cfg = config_from_dict(raw, file="t.yaml")
    stage = cfg.pipeline.stage("generate")
    own = config_placement(cfg)
    assert stage_work_seconds(cfg, stage, own) == pytest.approx(stage.seconds, rel=1e-6)
    fewer = {**own, "actor_train": own["actor_train"][:2], "reference": own["reference"][:2]}
    slower = stage_work_seconds(cfg, stage, fewer)
    assert slower > stage.seconds * 1.01
    drained = copy.deepcopy(raw)
    drained["roles"]["actor_infer"]["rollout"] = {}
    assert slower <= config_from_dict(drained).pipeline.stage("generate").seconds * 1.001


def test_the_trainer_turn_grid() -> None:
    """Turns on a 0.5 % geometric grid: 0 stays 0, 1 s is on it, any turn within 0.25 %."""
    from rlplex.estimate.generation import TURN_STEP, in_flight_grid

    assert in_flight_grid((0.0, 1.0)) == (0.0, 1.0)
    trainer, sync = in_flight_grid((73.3, 2.04))
    assert trainer == pytest.approx(73.3, rel=0.0025) and sync == pytest.approx(2.04, rel=0.0025)
    assert math.log(trainer) / math.log(TURN_STEP) == pytest.approx(
        round(math.log(trainer) / math.log(TURN_STEP))
    )


def test_an_in_flight_engine_s_steady_state_bounds_its_loop(
    base: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound a placement search ranks in-flight engines by: one step's tokens at full
    slots, each sequence at the token-weighted mean context, plus the prefill. It lies below
    the loop with a quick trainer (slots nearly full) and a slow one (the engine drains)."""
    from rlplex.estimate.generation import generate_bound_at
    from rlplex.plan.costs import config_placement, stage_work_seconds

    raw = _split_async(base)
    raw["roles"]["actor_infer"]["rollout"] = {"in_flight_weight_updates": True}
    bounds = []
    for train_s in (0.5, 500.0):
        raw["pipeline"]["stages"]["train"]["seconds"] = train_s
        cfg = config_from_dict(raw, file="t.yaml")
        stage = cfg.pipeline.stage("generate")
        own = config_placement(cfg)
        bound = generate_bound_at(cfg, stage, own)
        assert bound is not None
        assert bound <= stage_work_seconds(cfg, stage, own)
        bounds.append(bound)
    # Its inputs, by hand: the loop's own walked responses (each standing for stands_for of
    # the replica's), their token-weighted mean context, the loop's walked slots; 1 % off.
    import rlplex.estimate.generation as generation
    from rlplex.estimate.generation import IN_FLIGHT_BOUND_SLACK, generate_seconds_at
    from rlplex.estimate.lengths import response_lengths

    seen: list[tuple[float, float, float]] = []
    real = generation.stream_decode

    def spy(tokens: float, context: float, slots: float, costs: Any) -> Any:
        seen.append((tokens, context, slots))
        return real(tokens, context, slots, costs)

    monkeypatch.setattr(generation, "stream_decode", spy)
    steady = generate_seconds_at(cfg, stage, own, throughput_bound=True)
    assert steady is not None and bounds[1] == pytest.approx(steady * (1 - IN_FLIGHT_BOUND_SLACK))
    dist = response_lengths(300, 600)
    groups, stands_for = generation.prompt_groups(dist, 64, 4, 4, 64)  # 4 engines of tp 2
    walked = [max(1.0, x) for g in groups for x in g.lengths]
    assert stands_for == 1 and len(walked) == 64  # 256 responses over 4 engines
    assert seen == [
        pytest.approx((sum(walked), 100 + sum(x * x for x in walked) / (2 * sum(walked)), 64))
    ]


def test_an_engine_whose_own_role_trains_does_not_stream(base: dict[str, Any]) -> None:
    """A role that generates and trains shares its GPUs with its own training: its engine
    sleeps while it trains, so it is priced as drained, with a warning naming the field (the
    check used to look at other trained roles only)."""
    raw = _split_async(base)
    raw["roles"]["actor_infer"]["rollout"] = {"in_flight_weight_updates": True}
    raw["pipeline"]["stages"]["train"]["role"] = "actor_infer"
    raw["pipeline"]["stages"]["weight_sync"]["from"] = "actor_infer"
    raw["pipeline"]["stages"]["weight_sync"]["to"] = "actor_train"
    cfg = config_from_dict(raw, file="t.yaml")
    assert any(
        "in_flight_weight_updates is ignored" in w and "own role trains" in w for w in cfg.warnings
    )
    assert not estimate_config(cfg).stages["generate"].detail.get("in_flight_weight_updates")


def test_an_in_flight_engine_s_other_stages_are_not_priced_as_generation(
    base: dict[str, Any],
) -> None:
    """A log-prob pass on the engine's own role kept its forward seconds on the config's own
    devices only by luck: a plan re-priced every estimated stage of an in-flight role as
    generation. Only generation stages are now."""
    from rlplex.plan.costs import config_placement, stage_seconds_bound, stage_work_seconds

    raw = _split_async(base)
    raw["roles"]["actor_infer"]["rollout"] = {"in_flight_weight_updates": True}
    raw["pipeline"]["stages"]["old_logprob"]["role"] = "actor_infer"
    cfg = config_from_dict(raw, file="t.yaml")
    own = config_placement(cfg)
    gen, old = cfg.pipeline.stage("generate"), cfg.pipeline.stage("old_logprob")
    assert estimate_config(cfg).stages["generate"].detail["in_flight_weight_updates"]
    assert old.seconds is not None and old.seconds != pytest.approx(gen.seconds, rel=0.05)
    assert stage_work_seconds(cfg, old, own) == pytest.approx(old.seconds)
    assert stage_seconds_bound(cfg, old, own) == pytest.approx(old.seconds)


def test_refit_gather_across_nodes_uses_every_nic_of_the_node(base: dict[str, Any]) -> None:
    """A trainer of tp 4 x pp 2 over two 4-GPU nodes lacks its shards' 7/8 of the model; NeMo
    RL's refit (overlapped) gathers it over all 4 NICs of a node at ``refit_gather`` of them
    (0.34 x 4 x 40 GB/s), while it broadcasts the whole model to the other nodes' engine at
    4 x 40 GB/s; the slower move bounds it. verl's bucketed sync gathers at one NIC and adds
    the two moves."""
    base["cluster"].update({"nodes": 4, "gpus_per_node": 4})
    base["roles"]["actor_train"] = {"devices": "0-7", "parallel": {"tp": 4, "pp": 2}}
    base["roles"]["reference"]["devices"] = "0-7"
    base["roles"]["actor_infer"]["devices"] = "8-15"
    cfg = config_from_dict(base, file="t.yaml")
    est = estimate_config(cfg)
    sync = est.stages["weight_sync"]
    full = P * 2 / 1e9
    missing = full - est.roles["actor_train"].states["weights"]
    assert missing == pytest.approx(full * 7 / 8, rel=0.02)
    nic = 50 * 0.8
    gather, broadcast = missing / (0.34 * 4 * nic), full / (4 * nic)
    assert sync.detail["gather_s"] == pytest.approx(gather)
    assert sync.detail["broadcast_s"] == pytest.approx(broadcast)
    assert sync.terms == {"communication": pytest.approx(max(gather, broadcast))}
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "bucketed"}
    verl = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert verl.terms == {
        "communication": pytest.approx(missing / nic + full / nic),
        "overhead": pytest.approx(LOAD_S),
    }
    base["roles"]["actor_infer"]["rollout"] = {"weight_sync": "bucketed_overlapped"}
    both = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert both.terms == {"communication": pytest.approx(max(missing, full) / nic)}


def test_nodes_network_counts_only_the_communicators_gpus() -> None:
    """Bytes cross into a node over the NICs of the communicator's GPUs there: the node with
    the fewest members bounds it, NVLink caps it, and a GB200 node's 4 NICs count, not its
    72-GPU NVLink rack's."""
    from rlplex.estimate.weight_sync import nodes_network_gb_per_s
    from rlplex.resources.cluster import Cluster

    h100 = Cluster(nodes=2, gpus_per_node=8, network_gb_per_s=40.0, device_copy_gb_per_s=360.0)
    assert nodes_network_gb_per_s(h100, range(16)) == pytest.approx(8 * 40)
    assert nodes_network_gb_per_s(h100, [0, 1, 8, 9]) == pytest.approx(2 * 40)
    assert nodes_network_gb_per_s(h100, [*range(8), 8]) == pytest.approx(40)
    fast = h100.model_copy(update={"network_gb_per_s": 100.0})
    assert nodes_network_gb_per_s(fast, range(16)) == pytest.approx(360)
    rack = Cluster(nodes=36, gpus_per_node=4, nvlink_gpus=72, network_gb_per_s=40.0,
                   device_copy_gb_per_s=1440.0)  # fmt: skip
    assert nodes_network_gb_per_s(rack, range(144)) == pytest.approx(4 * 40)


def test_split_sync_of_a_partial_node_uses_its_gpus_nics(base: dict[str, Any]) -> None:
    """Two trainer GPUs on node 0 send to two engine GPUs on node 1: the communicator holds
    two GPUs a node, so two NICs carry the broadcast (2 x 40 GB/s), not the node's eight; a
    plan that moves the roles prices the sync the same way (weight_sync_seconds_at)."""
    from rlplex.estimate.weight_sync import weight_sync_seconds_at

    base["cluster"].update({"nodes": 2, "gpus_per_node": 8})
    base["roles"]["actor_train"] = {"devices": "0-1", "parallel": {"zero": 1, "recompute": True}}
    base["roles"]["reference"]["devices"] = "0-1"
    base["roles"]["actor_infer"]["devices"] = "8-9"
    cfg = config_from_dict(base, file="t.yaml")
    sync = estimate_config(cfg).stages["weight_sync"]
    assert sync.detail["broadcast_s"] == pytest.approx(P * 2 / 1e9 / (2 * 50 * 0.8))
    stage = cfg.pipeline.stage("weight_sync")
    again = weight_sync_seconds_at(cfg, stage, {"actor_train": [0, 1], "actor_infer": [8, 9]})
    assert again == pytest.approx(sync.seconds)


def test_refit_gather_is_read_from_the_config(base: dict[str, Any]) -> None:
    """``efficiency.refit_gather`` is a cost term a config may set (calibration writes it)."""
    base["cluster"].update({"nodes": 2, "gpus_per_node": 4})
    base["roles"]["actor_train"]["parallel"] = {"tp": 4, "pp": 2}
    default = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    base["efficiency"] = {"refit_gather": 0.68}
    faster = estimate_config(config_from_dict(base, file="t.yaml")).stages["weight_sync"]
    assert faster.detail["gather_s"] == pytest.approx(default.detail["gather_s"] / 2)


def test_packed_micro_batches_hold_their_tokens_split_over_sequence_parallel(
    base: dict[str, Any],
) -> None:
    """A packed micro-batch's activations peak at the micro-batch that holds the step's longest
    sequence (800 tokens) beside mean ones (one of 400): 1,200 tokens, not 2 at the longest
    and not 2 at the mean (bug: the mean, which no micro-batch holding the longest sequence
    stays under); in a forward-only pass as in training; Ulysses or context parallel leaves
    each rank a slice of every sequence (bug: the forward pass held every sequence at the
    longest, and neither pass split over sp)."""
    spec = model_presets()["llama-3.1-8b"]
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    ref = est.stages["ref_logprob"]
    assert ref.memory_gb == pytest.approx(
        f.activation_bytes(spec, 400 + 800, backward=False, eager=True) / 1e9, rel=1e-6
    )
    base["roles"]["reference"]["parallel"]["sp"] = 2
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True, "sp": 2}
    split = estimate_config(config_from_dict(base, file="t.yaml"))
    assert split.stages["ref_logprob"].memory_gb == pytest.approx(
        f.activation_bytes(spec, (400 + 800) / 2, backward=False, eager=True) / 1e9, rel=1e-6
    )
    assert split.stages["train"].memory_gb == pytest.approx(
        f.activation_bytes(spec, (400 + 800) / 2, backward=True, eager=True) / 1e9, rel=1e-6
    )


def test_token_budgets_fill_each_micro_batch(base: dict[str, Any]) -> None:
    """A token budget (verl's ``ppo_max_token_len_per_gpu``, NeMo RL's ``train_mb_tokens``)
    makes a rank's share of an optimizer step into as few micro-batches as it allows, the
    tokens spread evenly (verl's rearrange_micro_batches): 12,800 tokens under 4,096 are four
    of 3,200, and the activations are theirs, as the time terms' micro-batches (bug: one
    sequence's, 800 tokens, whatever the budget); a rank whose share is smaller than the
    budget holds it all in one, and a sequence longer than the budget goes alone."""
    spec = model_presets()["llama-3.1-8b"]
    base["roles"]["reference"]["parallel"] = {"fsdp": True}
    base["workload"]["logprob_micro_batch_tokens"] = 4096
    ref = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    assert ref.detail["micro_batches_per_rank"] == 4
    assert ref.memory_gb == pytest.approx(
        f.activation_bytes(spec, 3200, backward=False, eager=True) / 1e9, rel=1e-6
    )
    # 256 sequences of 400 tokens on 8 ranks: 12,800 tokens each, less than a 65,536 budget.
    base["workload"]["logprob_micro_batch_tokens"] = 65_536
    whole = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    assert whole.memory_gb == pytest.approx(
        f.activation_bytes(spec, 256 * 400 / 8, backward=False, eager=True) / 1e9, rel=1e-6
    )
    base["workload"]["logprob_micro_batch_tokens"] = 500
    alone = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    assert alone.memory_gb == pytest.approx(
        f.activation_bytes(spec, 800, backward=False, eager=True) / 1e9, rel=1e-6
    )


def test_sharded_forward_passes_gather_the_weights_every_micro_batch(
    base: dict[str, Any],
) -> None:
    """An FSDP (or ZeRO-3) log-prob pass gathers the weights for each micro-batch's forward,
    bf16 over its 8 data-parallel ranks: what exceeds its compute shows (bug: forward passes
    paid no data-parallel traffic at all)."""
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "h100", "network_gb_per_s": 0.5}
    ref = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    mb = ref.detail["micro_batches_per_rank"]
    assert ref.bytes == pytest.approx(P * 2 * 7 / 8 * mb)
    assert ref.detail["comm_s"] == pytest.approx(ref.bytes / 0.5e9)
    assert ref.terms["communication"] == pytest.approx(
        ref.detail["comm_s"] - ref.terms["compute"] + ref.detail["tp_activation_s"]
    )
    # ZeRO-1 keeps whole weights: nothing to gather.
    old = estimate_config(config_from_dict(base, file="t.yaml")).stages["old_logprob"]
    assert old.bytes == 0.0 and old.detail["comm_s"] == 0.0


def test_expert_gradients_are_reduced_over_the_expert_data_parallel_ranks(
    base: dict[str, Any],
) -> None:
    """ZeRO-1 with ep 8 on 8 GPUs: every routed expert sits on one rank (expert data-parallel
    size 1), so only the dense weights' gradients are reduced and gathered (bug: the whole
    model's were, as if every expert were replicated over the 8 ranks)."""
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "ep": 8, "recompute": True}
    train = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    spec = model_presets()["qwen3-30b-a3b"]
    dense = f.total_params(spec) - f.routed_expert_params(spec)
    assert train.bytes == pytest.approx(2 * dense * 2 * 7 / 8)
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "ep": 4, "recompute": True}
    wider = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    experts = f.routed_expert_params(spec) / 4 * 1 / 2
    assert wider.bytes == pytest.approx(2 * (dense * 7 / 8 + experts) * 2)


def test_every_rule_reward_stage_is_priced_per_sequence(base: dict[str, Any]) -> None:
    """ROLL's multi-domain RLVR scores responses on one reward cluster per domain, each a CPU
    stage: every one without seconds is priced at sequence_overhead_s per sequence (bug: only
    the first was, and the config failed to load asking for the others' seconds)."""
    base["roles"]["code"] = {"world_size": 4}
    base["pipeline"]["stages"]["reward"].pop("seconds")
    base["pipeline"]["stages"]["reward_code"] = {"role": "code", "after": ["generate"]}
    cfg = config_from_dict(base, file="t.yaml")
    est = estimate_config(cfg)
    for name in ("reward", "reward_code"):
        assert est.stages[name].seconds == pytest.approx(64 * 4 * 0.004)
        assert cfg.is_estimated(f"pipeline.stages.{name}.seconds")


def test_bf16_logits_hold_two_bytes_a_logit(base: dict[str, Any]) -> None:
    """``parallel.logits: bf16`` (verl's reference pass: the model's bf16 logits, the cross
    entropy's gradient in place) holds 2 bytes per logit where the fp32 default holds 4 in a
    forward pass (8 in training)."""
    spec = model_presets()["llama-3.1-8b"]
    tokens = 400 + 800  # the packed micro-batch of 2 that holds the longest sequence
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    base["roles"]["reference"]["parallel"]["logits"] = "bf16"
    bf16 = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
    assert plain.memory_gb - bf16.memory_gb == pytest.approx(
        tokens * spec.vocab_size * (4 - 2) / 1e9
    )
    assert f.activation_bytes(spec, 100, backward=True, logits_bytes=2) == pytest.approx(
        f.activation_bytes(spec, 100, backward=True) - 100 * spec.vocab_size * 6
    )


@pytest.mark.parametrize(
    ("logits", "forward", "train"),
    [
        ("fp32", 4, 8),
        ("fp32_log_softmax", 10, 14),
        ("fp32_log_softmax_entropy_forward", 14, 14),
        ("fp32_log_softmax_entropy", 14, 34),
        ("bf16", 2, 2),
        ("bf16_entropy_forward", 6, 2),
        ("bf16_entropy", 6, 14),
        ("bf16_entropy_compiled", 6, 6),
    ],
)
def test_logits_bytes_by_how_the_pass_holds_them(
    base: dict[str, Any], logits: str, forward: float, train: float
) -> None:
    """Bytes per logit at a pass's peak: the bf16 logits, and verl's entropy over them (4 more
    forward, 12 more training: bench/logits_memory.py; compiled, 4 more training:
    bench/logits_memory.py --compiled); the plain fp32 log-softmax path the
    bf16 logits, an fp32 copy and the log-softmax (8 more forward, 12 more training:
    bench/logits_memory.py --plain)."""
    spec = model_presets()["llama-3.1-8b"]
    tokens = 400 + 800  # the packed micro-batch of 2 that holds the longest sequence
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "logits": logits}
    est = estimate_config(config_from_dict(base, file="t.yaml"))
    old, train_stage = est.stages["old_logprob"], est.stages["train"]
    assert old.memory_gb == pytest.approx(
        f.activation_bytes(spec, tokens, backward=False, logits_bytes=forward) / 1e9
    )
    assert train_stage.memory_gb == pytest.approx(
        f.activation_bytes(spec, tokens, backward=True, logits_bytes=train) / 1e9
    )


def test_micro_batches_never_span_optimizer_steps(base: dict[str, Any]) -> None:
    """Each optimizer step (``mini_batches``) runs its own micro-batches, epoch after epoch:
    a rank's 12,800 tokens in 4 mini-batches of 3,200 under a 16,384 budget are 4 micro-batches
    of 3,200 per epoch (bug: 1 of 12,800, spanning the steps, and a second epoch doubled the
    activations)."""
    spec = model_presets()["llama-3.1-8b"]
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "recompute": True}
    base["workload"].update(micro_batch_tokens=16_384, mini_batches=4, epochs=2)
    train = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    assert train.detail["micro_batches_per_rank"] == 2 * 4
    assert train.detail["micro_batch_tokens"] == 3_200
    assert train.memory_gb == pytest.approx(
        f.activation_bytes(spec, 3200, backward=True, recompute=True) / 1e9, rel=1e-6
    )


def test_activation_remedy_asks_for_recomputation_only_where_it_is_off(
    base: dict[str, Any],
) -> None:
    from rlplex.estimate.assumptions import activation_remedy

    roles = config_from_dict(base, file="t.yaml").roles
    assert "parallel.recompute" in activation_remedy(roles["actor_train"])
    base["roles"]["actor_train"]["parallel"]["recompute"] = True
    roles = config_from_dict(base, file="t.yaml").roles
    remedy = activation_remedy(roles["actor_train"])
    assert "recompute" not in remedy and "workload.micro_batch_tokens" in remedy
    # A long sequence is split only by sequence (context) parallel ranks or by tp.
    assert "roles.actor_train.parallel.sp" in remedy


def test_moe_under_tensor_parallel_routes_each_ranks_share(base: dict[str, Any]) -> None:
    """Megatron runs an MoE under tensor parallel with sequence parallel (expert tensor
    parallel 1): each rank routes its 1/tp of the micro-batch, so the experts' grouped GEMMs
    see half the tokens at tp 2 (800 / 2 x 8 / 128 = 25 per expert, not 50)."""
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    spec = model_presets()["qwen3-30b-a3b"]
    share = (
        spec.moe_layers * spec.experts_per_token * 3 * spec.hidden_size
        * spec.moe_intermediate_size / f.active_params(spec)
    )  # fmt: skip
    dense = 2048 / 3072 * 800 / 1312  # the model's width and micro-batch factors

    def moe_factor(per_expert: float) -> float:
        slower = dense / (768 / 1792 * per_expert / (per_expert + 512))
        return 1 - share + share * slower * 1.25

    stages = {}
    for tp in (1, 2):
        base["roles"]["reference"]["parallel"] = {"fsdp": True, "tp": tp}
        stage = estimate_config(config_from_dict(base, file="t.yaml")).stages["ref_logprob"]
        assert stage.detail["micro_batch_tokens"] == 800
        stages[tp] = stage.terms["compute"] / stage.detail["straggler"]
    assert stages[2] / stages[1] == pytest.approx(moe_factor(25) / moe_factor(50))


def test_dynamic_sampling_generates_and_scores_more_than_it_trains(base: dict[str, Any]) -> None:
    """``generated_per_trained`` 2: the rollout decodes twice the sequences (each replica
    holds twice as many) and the reward scores them all; the passes see the trained ones."""
    base["pipeline"]["stages"]["reward"].pop("seconds")
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages
    base["workload"]["generated_per_trained"] = 2.0
    oversampled = estimate_config(config_from_dict(base, file="t.yaml")).stages
    g0, g1 = plain["generate"].detail, oversampled["generate"].detail
    assert g1["sequences_per_replica"] == 2 * g0["sequences_per_replica"] == 2 * 64 * 4 // 4
    assert oversampled["reward"].seconds == pytest.approx(2 * plain["reward"].seconds)
    for name in ("ref_logprob", "old_logprob", "train"):
        assert oversampled[name].seconds == pytest.approx(plain[name].seconds)
    # Twice the tokens decoded; in batches of 64 -> 128 the per-step floor still bounds them.
    assert oversampled["generate"].flops == pytest.approx(2 * plain["generate"].flops, rel=0.03)
    assert oversampled["generate"].seconds > plain["generate"].seconds


def test_dynamic_sampling_reward_model_and_turn_samples_score_every_generated(
    base: dict[str, Any],
) -> None:
    """A reward model on GPUs scores the dropped groups too; with ``turns.samples: turn`` the
    reward's per-sample work scales with the generated trajectories (samples, not
    trajectories, against samples)."""
    base["roles"]["judge"] = {"devices": "0-7", "model": "qwen2.5-0.5b", "parallel": {"fsdp": True}}
    base["pipeline"]["stages"]["reward"] = {"role": "judge", "after": ["generate"]}
    plain = estimate_config(config_from_dict(base, file="t.yaml")).stages
    base["workload"]["generated_per_trained"] = 2.0
    twice = estimate_config(config_from_dict(base, file="t.yaml")).stages
    assert twice["reward"].flops == pytest.approx(2 * plain["reward"].flops)
    assert twice["ref_logprob"].flops == pytest.approx(plain["ref_logprob"].flops)
    turns = copy.deepcopy(base)
    turns["roles"].pop("judge")
    turns["pipeline"]["stages"]["reward"] = {"role": "rewards", "after": ["generate"]}
    turns["workload"]["turns"] = {"mean": 3, "max": 5, "samples": "turn"}
    seconds = {}
    for ratio in (1.0, 2.0, 4.0):
        turns["workload"]["generated_per_trained"] = ratio
        seconds[ratio] = estimate_config(config_from_dict(turns, file="t.yaml")).stages["reward"]
    per_sample = seconds[1.0].seconds / (64 * 4 * 3)  # 64 prompts x 4 samples x 3 turns
    assert per_sample == pytest.approx(0.004)  # sequence_overhead_s
    assert seconds[2.0].seconds == pytest.approx(2 * seconds[1.0].seconds)
    assert seconds[4.0].seconds == pytest.approx(4 * seconds[1.0].seconds)


def test_dynamic_sampling_in_an_in_flight_loop_walks_every_generated_group(
    base: dict[str, Any],
) -> None:
    base["roles"]["actor_infer"] = {
        "devices": "0-3", "num_gpus_per_worker": 2, "rollout": {"in_flight_weight_updates": True},
    }  # fmt: skip
    base["roles"]["actor_train"]["devices"] = "4-7"
    base["roles"]["reference"]["devices"] = "4-7"
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = 1
    plain = estimate_config(config_from_dict(base, file="t.yaml"))
    base["workload"]["generated_per_trained"] = 2.0
    twice = estimate_config(config_from_dict(base, file="t.yaml"))
    assert plain.stages["generate"].detail["in_flight_weight_updates"]
    # The loop decodes twice the groups per step: twice the tokens, and a KV room sized for
    # twice the sequences (up to the engine's memory share).
    assert twice.stages["generate"].flops == pytest.approx(
        2 * plain.stages["generate"].flops, rel=0.05
    )
    # The loop holds twice the groups: its decode per step grows (6.59 -> 7.36 s here; 6.79 s
    # if the loop walked the trained prompts only).
    assert twice.stages["generate"].seconds > 1.08 * plain.stages["generate"].seconds
    kv = (
        plain.roles["actor_infer"].states["kv_cache"],
        twice.roles["actor_infer"].states["kv_cache"],
    )
    assert kv[1] > kv[0]


def test_pipeline_bubble_idles_a_whole_micro_batch_slot(base: dict[str, Any]) -> None:
    """1F1B idles (pp - 1) slots per optimizer step of m micro-batches, and a slot holds all
    of one micro-batch's work on a stage: the expert GEMMs at their imbalance and the expert
    all-to-alls as well as the matmuls."""
    base["model"] = "qwen3-30b-a3b"
    base["workload"]["packing"] = False
    base["roles"]["actor_train"]["parallel"] = {"pp": 2, "ep": 4, "zero": 1}
    train = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
    d = train.detail
    # 256 sequences over 4 data-parallel groups (8 GPUs / pp 2), 2 x 800 tokens a micro-batch:
    # 32 micro-batches per step, so the bubble is 1/32 of the stage's work.
    assert d["micro_batches_per_rank"] == 32
    work = train.terms["compute"] + d["expert_all_to_all_s"]
    assert d["expert_all_to_all_s"] > 0
    assert train.terms["latency"] == pytest.approx(work * (2 - 1) / 32)


def test_every_epochs_optimizer_steps_have_their_pipeline_bubbles(base: dict[str, Any]) -> None:
    """Found in review (2026-11-29): the bubble divided the micro-batches of every epoch by
    one epoch's optimizer steps, so two epochs priced one epoch's bubbles. Two epochs double
    the work and the optimizer steps, so they double the bubble."""
    base["roles"]["actor_train"]["parallel"] = {"pp": 2}
    bubbles = []
    for epochs in (1, 2):
        base["workload"]["epochs"] = epochs
        train = estimate_config(config_from_dict(base, file="t.yaml")).stages["train"]
        bubbles.append(train.terms["latency"])
        d = train.detail
        assert train.terms["latency"] == pytest.approx(
            train.terms["compute"] * (2 - 1) / (d["micro_batches_per_rank"] / epochs)
        )
    assert bubbles[1] == pytest.approx(2 * bubbles[0])


def test_tensor_parallel_must_divide_the_attention_heads(base: dict[str, Any]) -> None:
    """Found in review (2026-11-29): a rollout of tp 2 on a 3-head model was estimated;
    vLLM and Megatron refuse it (each rank takes whole heads)."""
    from rlplex.errors import ConfigError

    base["model"] = "qwen2.5-0.5b"  # 14 heads, 2 KV heads
    base["roles"]["actor_train"]["parallel"] = {"tp": 4}
    with pytest.raises(ConfigError) as info:
        estimate_config(config_from_dict(base, file="t.yaml"))
    assert (info.value.field, info.value.value) == ("roles.actor_train.parallel.tp", 4)
    assert "does not divide the model's 14 attention heads" in str(info.value)
    base["roles"]["actor_train"]["parallel"] = {"tp": 2}
    assert estimate_config(config_from_dict(base, file="t.yaml")).stages["train"].seconds


def test_a_config_json_whose_heads_do_not_group_is_refused() -> None:
    from rlplex.errors import ConfigError
    from rlplex.estimate.specs import spec_from_hf_config

    data = {"num_hidden_layers": 2, "hidden_size": 96, "num_attention_heads": 3,
            "num_key_value_heads": 2, "vocab_size": 128, "intermediate_size": 256}  # fmt: skip
    with pytest.raises(ConfigError, match=r"num_attention_heads \(3\) is not a multiple of"):
        spec_from_hf_config(data, "c.json")


def test_a_config_without_the_estimators_inputs_is_told_how_to_give_them() -> None:
    """The error names what is missing and an example --set for the first (the loader's
    warning and this error share one hint table and one rule for what is missing)."""
    from rlplex.config import load_config
    from rlplex.errors import ConfigError
    from rlplex.estimate.context import MISSING_HINTS

    root = Path(__file__).resolve().parents[2]
    with pytest.raises(ConfigError) as info:
        estimate_config(load_config(root / "examples" / "ppo.yaml"))
    assert "the config needs model, workload, cluster.gpu" in str(info.value)
    assert f"(e.g. {MISSING_HINTS['model']};" in str(info.value)


def test_at_placement_estimates_as_set_devices_does() -> None:
    """at_placement (a placement search's candidates priced again) gives what loading the
    file with --set roles.R.devices gives: every estimated stage, memory and state."""
    from rlplex.config import load_config
    from rlplex.estimate.fill import at_placement

    path = Path(__file__).resolve().parents[2] / "examples" / "estimate_7b.yaml"
    over = ["cluster.nodes=2", "roles.actor_infer.devices=8-15"]
    config = load_config(path, overrides=over)
    every = {n: tuple(range(16)) for n in ("actor_train", "actor_infer", "reference")}
    moved = at_placement(config, every)
    placed = load_config(path, overrides=[*over, *(f"roles.{n}.devices=0-15" for n in every)])
    assert moved.pipeline == placed.pipeline
    assert moved.roles == placed.roles and moved.estimated == placed.estimated
    assert moved.pipeline.stage("generate").seconds != config.pipeline.stage("generate").seconds
    assert at_placement(config, {n: r.devices for n, r in config.gpu_roles.items()}) is config
