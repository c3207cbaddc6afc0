"""The generate stage's cost terms against values computed by hand from the config's inputs and
the documented default efficiencies (rlplex/estimate/data/efficiency.yaml).

The ``base`` fixture (tests/estimate/conftest.py) is llama-3.1-8b on one node of 8 H100
(989.5 TFLOPS, 3,350 GB/s of HBM, 85.52 GB): an engine of tp 2, so 4 replicas, each of 64 of
the step's 64 x 4 = 256 sequences, prompts of 100 tokens on average (200 at most) and
responses of 300 (600 at most). Llama-3.1-8B: 32 layers, hidden 4,096, 32 query heads and 8
KV heads of 128, a vocabulary of 128,256 (untied).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlplex.cli.stage_lines import generation_line
from rlplex.config import config_from_dict
from rlplex.estimate.decode import StepCosts, simulate_decode
from rlplex.estimate.estimator import Estimate, estimate_config
from rlplex.estimate.lengths import response_lengths
from rlplex.estimate.specs import model_presets
from rlplex.estimate.states import generate_transient_gb

P = 8_030_261_248  # llama-3.1-8b parameters (tests/estimate/test_formulas.py)
# Weights a token multiplies: all but the input embedding (a lookup) and the final norm.
ACTIVE = P - 128_256 * 4096 - 4096
LAYERS = 32
ATTENTION_WIDTH = 2 * 32 * 128  # heads x (query/key width + value width)
KV_PER_TOKEN = 2 * LAYERS * (8 // 2) * 128 * 2  # K and V, 4 KV heads per rank at tp 2, bf16
H100 = 989.5e12  # peak bf16 FLOP/s
HBM = 3350e9  # bytes/s
MEMORY_GB = 85.52
TP = 2
PER_REPLICA = 64  # 256 sequences over 4 replicas

# Default efficiencies (efficiency.yaml).
PREFILL = 0.6
DECODE = 0.6
WIDTH_HALF = 1024
FP8_MATMUL_SPEEDUP = 1.55
DECODE_STEP_S = 0.0041
DECODE_LAYER_S = 3e-5
ALLREDUCE_S = 1e-5
DECODE_SEQUENCE_S = 5e-6

EFF_PREFILL = PREFILL * 4096 / (4096 + WIDTH_HALF)  # 0.48: the width factor at hidden 4,096
PROMPT_FLOPS = 2 * ACTIVE * 100 + ATTENTION_WIDTH * LAYERS * 100**2  # one 100-token prompt


def _estimate(config: dict[str, Any]) -> Estimate:
    return estimate_config(config_from_dict(copy.deepcopy(config), file="t.yaml"))


def _running_context() -> float:
    """Mean context of a running sequence: the prompt and, for a sequence seen at a random
    decode step, half its response, length-biased: ``E[R^2] / (2 E[R])``."""
    dist = response_lengths(300, 600)
    return 100 + dist.mean_square() / (2 * dist.mean)


def test_a_small_kv_cache_caps_the_running_sequences(base: dict[str, Any]) -> None:
    """An engine runs as many sequences as its KV cache holds at their mean running context:
    ``kv_gb // (running context x KV bytes per token)``, when that is below
    ``max_num_seqs`` and the replica's sequences. A 0.11 memory share leaves a cache for
    34 of the 64."""
    # The base config's cache is what its 64 sequences need at their longest (200 + 600
    # tokens): room for more of them at their mean running context.
    roomy = _estimate(base).stages["generate"].detail
    need = PER_REPLICA * 800 * KV_PER_TOKEN
    assert roomy["kv_slots"] == int(need // (_running_context() * KV_PER_TOKEN))
    assert roomy["kv_slots"] > PER_REPLICA and roomy["slots"] == PER_REPLICA
    base["roles"]["actor_infer"]["rollout"] = {"gpu_memory_utilization": 0.11}
    est = _estimate(base)
    spec = model_presets()["llama-3.1-8b"]
    weights_gb = P * 2 / TP / 1e9
    room = 0.11 * MEMORY_GB - weights_gb - generate_transient_gb(spec, "bf16", TP, 1)
    assert room * 1e9 < need
    assert est.roles["actor_infer"].states["kv_cache"] == pytest.approx(room)
    d = est.stages["generate"].detail
    kv_slots = int(room * 1e9 // (_running_context() * KV_PER_TOKEN))
    assert kv_slots < PER_REPLICA  # the cache binds, not max_num_seqs (1,024) nor the batch
    assert d["kv_slots"] == kv_slots
    assert d["slots"] == kv_slots
    assert f"at most {kv_slots:,} running (KV cache room for {kv_slots:,})" in generation_line(d)


def test_an_fp8_engine_prefills_its_matmuls_faster(base: dict[str, Any]) -> None:
    """Prefill is compute-bound: the replica's 64 prompts' FLOPs over its 2 GPUs at the
    prefill efficiency. An fp8 engine runs the weight matmuls (``2 x active params`` a
    token) ``fp8_matmul_speedup`` (1.55) times faster; attention stays bf16."""
    bf16 = _estimate(base).stages["generate"]
    base["roles"]["actor_infer"]["precision"] = "fp8"
    fp8 = _estimate(base).stages["generate"]
    assert bf16.detail["eff_prefill"] == pytest.approx(EFF_PREFILL)
    assert fp8.detail["eff_prefill"] == pytest.approx(EFF_PREFILL)
    rate = TP * H100 * EFF_PREFILL
    assert bf16.detail["prefill_s"] == pytest.approx(PROMPT_FLOPS * PER_REPLICA / rate)
    matmul = 2 * ACTIVE * 100 * PER_REPLICA
    attention = ATTENTION_WIDTH * LAYERS * 100**2 * PER_REPLICA
    assert fp8.detail["prefill_s"] == pytest.approx(
        (matmul / FP8_MATMUL_SPEEDUP + attention) / rate
    )
    # A given speed-up replaces the default; 1 (no gain) gives bf16's prefill back.
    base["efficiency"] = {"fp8_matmul_speedup": 1.0}
    same = _estimate(base).stages["generate"]
    assert same.detail["prefill_s"] == pytest.approx(bf16.detail["prefill_s"])


def _step_costs() -> StepCosts:
    """One decode step of a tp-2 replica of the base engine, per GPU, by hand: half the bf16
    weights read but the untied embedding table (a lookup of the batch's rows), 4 KV heads'
    cache a token, half the matmul and attention
    FLOPs, 60% of HBM, the prefill efficiency's FLOP rate, and a floor of the step, every
    layer's small kernels and two all-reduces per layer."""
    return StepCosts(
        weight_bytes=lambda b: 2 * (P - 128_256 * 4096 + b * 4096) / TP,
        kv_bytes_per_token=KV_PER_TOKEN,
        flops_per_token=2 * ACTIVE / TP,
        attention_flops_per_context=2 * ATTENTION_WIDTH * LAYERS / TP,
        bandwidth=HBM * DECODE,
        flop_rate=H100 * EFF_PREFILL,
        floor_s=DECODE_STEP_S + LAYERS * DECODE_LAYER_S + 2 * LAYERS * ALLREDUCE_S,
        per_sequence_s=DECODE_SEQUENCE_S,
    )


def _held_lengths(k: int) -> list[float]:
    """The responses a replica decodes holding ``k`` steps: 64 k representative lengths. The
    default shape puts 11.4% of responses at the 600 cap, so the replica already holds one
    there, the step's longest (which the estimator gives the slowest replica)."""
    lengths = response_lengths(300, 600).lengths(PER_REPLICA * k)
    assert max(lengths) == 600
    return lengths


@pytest.mark.parametrize("k", [1, 2])
def test_an_async_engine_decodes_k_steps_together_and_charges_each_one_kth(
    base: dict[str, Any], k: int
) -> None:
    """Async with ``max_staleness: k``: the engine holds k steps' sequences (64 k per
    replica, all running at once) and decodes them together, so they share one tail of 600
    steps; each RL step is charged 1/k of every decode term. The decode of the held
    sequences is :func:`simulate_decode` with the replica's step costs by hand."""
    base["pipeline"]["mode"] = "async"
    base["pipeline"]["max_staleness"] = k
    gen = _estimate(base).stages["generate"]
    d = gen.detail
    assert d["steps_in_flight"] == k
    assert d["slots"] == PER_REPLICA * k  # the cache is sized for k steps: no waves
    assert d["step_floor_s"] == pytest.approx(0.0057)
    held = simulate_decode(_held_lengths(k), 100, PER_REPLICA * k, _step_costs())
    assert held.steps == pytest.approx(600)  # all start together: the cap sets the steps
    assert d["decode_steps"] == pytest.approx(600 / k)
    assert d["mean_batch"] == pytest.approx(round(held.mean_batch, 2))
    assert gen.terms["memory"] == pytest.approx(held.memory_s / k)
    assert gen.terms["latency"] == pytest.approx(600 / k * 0.0057)
    # Host time: every sequence's every step, over the k steps.
    assert gen.terms["overhead"] == pytest.approx(DECODE_SEQUENCE_S * sum(_held_lengths(k)) / k)
    # Prefill is the step's own prompts'; decode here is memory-bound throughout.
    assert held.compute_s == 0.0
    assert gen.terms["compute"] == pytest.approx(
        PROMPT_FLOPS * PER_REPLICA / (TP * H100 * EFF_PREFILL)
    )


@pytest.mark.parametrize("prefix_caching", [True, False])
def test_later_turns_add_their_prefill_to_the_compute_term(
    base: dict[str, Any], prefix_caching: bool
) -> None:
    """Multi-turn trajectories (3 turns on average, 50-token observations): each of the 2
    later turns is a new request that prefills before it decodes. With prefix caching only
    the observation, attending to the context before it; without, the whole context again
    (prompt and every earlier answer and observation), from scratch."""
    base["workload"]["turns"] = {
        "mean": 3, "max": 4, "observation_tokens": 50, "prefix_caching": prefix_caching,
    }  # fmt: skip
    gen = _estimate(base).stages["generate"]
    k, p, o = 2, 100, 50  # later turns, prompt, observation
    u = 300 + o  # what each turn adds to the context: its answer and the next observation
    if prefix_caching:
        # Turn j's observation attends to p + j u - o/2 keys on average.
        keys = sum(p + j * u - o / 2 for j in (1, 2))
        later = 2 * ACTIVE * k * o + 2 * ATTENTION_WIDTH * LAYERS * o * keys
    else:
        contexts = [p + j * u for j in (1, 2)]  # 450 and 800 tokens
        later = sum(2 * ACTIVE * c + ATTENTION_WIDTH * LAYERS * c * c for c in contexts)
    hand = (PROMPT_FLOPS + later) * PER_REPLICA / (TP * H100 * EFF_PREFILL)
    assert gen.detail["turn_prefill_tokens"] == pytest.approx(k * o if prefix_caching else 1250)
    assert gen.detail["prefill_s"] == pytest.approx(hand)
    assert gen.terms["compute"] == pytest.approx(hand)  # decode is memory-bound


def test_generating_two_prompts_per_trained_one_doubles_the_replicas_work(
    base: dict[str, Any],
) -> None:
    """``generated_per_trained: 2`` (dynamic sampling): the rollout generates 128 prompts'
    groups for the 64 the step trains on, so each replica gets 128 sequences instead of 64
    and prefills twice the prompts."""
    one = _estimate(base).stages["generate"].detail
    base["workload"]["generated_per_trained"] = 2
    two = _estimate(base).stages["generate"].detail
    assert one["sequences_per_replica"] == PER_REPLICA
    assert two["sequences_per_replica"] == 128 * 4 // 4  # 128 prompts x 4 samples, 4 replicas
    rate = TP * H100 * EFF_PREFILL
    assert one["prefill_s"] == pytest.approx(PROMPT_FLOPS * PER_REPLICA / rate)
    assert two["prefill_s"] == pytest.approx(PROMPT_FLOPS * 2 * PER_REPLICA / rate)
