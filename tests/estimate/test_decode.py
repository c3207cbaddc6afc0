"""Continuous-batching decode: terms of hand-worked replicas."""

from __future__ import annotations

import pytest

from rlplex.estimate.decode import StepCosts, simulate_decode, stream_decode


def _costs(**kw: float) -> StepCosts:
    args = {"weight_bytes": lambda b: kw.get("weights", 0.0), "kv_bytes_per_token": 0.0,
            "flops_per_token": 0.0, "attention_flops_per_context": 0.0, "bandwidth": 1.0,
            "flop_rate": 1.0, "floor_s": 0.0, "per_sequence_s": 0.0}  # fmt: skip
    args.update({k: v for k, v in kw.items() if k != "weights"})
    return StepCosts(**args)  # type: ignore[arg-type]


def test_two_sequences_share_steps_until_the_short_one_ends() -> None:
    costs = _costs(weights=2.0, floor_s=0.5, per_sequence_s=0.1)
    dec = simulate_decode([10, 20], 0, slots=2, costs=costs)
    assert dec.steps == 20
    assert dec.memory_s == pytest.approx(20 * 2.0)  # the weights once per step
    assert dec.floor_s == pytest.approx(20 * 0.5)
    assert dec.host_s == pytest.approx((10 * 2 + 10 * 1) * 0.1)
    assert dec.mean_batch == pytest.approx(1.5)


def test_one_slot_runs_them_back_to_back() -> None:
    dec = simulate_decode([10, 20], 0, slots=1, costs=_costs(weights=1.0))
    assert dec.steps == 30
    assert dec.slots == 1


def test_kv_reads_grow_with_the_context() -> None:
    # One sequence of 10 tokens after a 4-token prompt: the mean context is 4 + 5.
    dec = simulate_decode([10], 4, slots=1, costs=_costs(kv_bytes_per_token=1.0))
    assert dec.memory_s == pytest.approx(10 * 9)


def test_compute_bound_steps() -> None:
    dec = simulate_decode([5, 5], 0, slots=2, costs=_costs(weights=1.0, flops_per_token=3.0))
    assert dec.compute_s == pytest.approx(5 * 6.0)  # 2 tokens x 3 FLOPs per step > 1 byte
    assert dec.memory_s == 0


def test_a_streaming_engine_keeps_every_slot_running() -> None:
    """10 and 20 tokens through 2 slots that never drain: 15 steps of 2 sequences (the
    drained engine above runs 20 steps, the last 10 with one sequence)."""
    costs = _costs(weights=2.0, kv_bytes_per_token=0.1, floor_s=0.5, per_sequence_s=0.1)
    dec = stream_decode(30, running_context=9.0, slots=2, costs=costs)
    assert dec.steps == pytest.approx(15)
    assert dec.mean_batch == 2 and dec.slots == 2
    assert dec.memory_s == pytest.approx(15 * (2.0 + 2 * 9.0 * 0.1))
    assert dec.floor_s == pytest.approx(15 * 0.5)
    assert dec.host_s == pytest.approx(15 * 2 * 0.1)
    bound = stream_decode(30, 0.0, 2, _costs(weights=1.0, flops_per_token=3.0))
    assert bound.compute_s == pytest.approx(15 * 6.0) and bound.memory_s == 0
    assert stream_decode(0, 9.0, 2, costs).total_s == 0


def test_a_steps_share_of_decoding_several_steps_together() -> None:
    dec = simulate_decode([10, 20, 10, 20], 0, slots=4, costs=_costs(weights=2.0, floor_s=0.5))
    share = dec.per_step(2)
    assert share.steps == pytest.approx(dec.steps / 2)
    assert share.total_s == pytest.approx(dec.total_s / 2)
    assert share.mean_batch == dec.mean_batch and share.slots == dec.slots
    assert dec.per_step(1) is dec
