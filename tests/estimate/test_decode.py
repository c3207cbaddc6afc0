"""Continuous-batching decode: terms of hand-worked replicas."""

from __future__ import annotations

import pytest

from rlplex.estimate.decode import (
    InFlightLoop,
    PromptGroup,
    StepCosts,
    simulate_decode,
    simulate_in_flight,
    stream_decode,
)


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


def _singles(*lengths: float) -> list[PromptGroup]:
    """Prompt groups of one response each (its place frees when it ends)."""
    return [PromptGroup((length,), length) for length in lengths]


def test_in_flight_loop_with_a_trainer_that_takes_no_time() -> None:
    """Two 10-token responses a step, the collector holding one step's worth (k = 1): each
    step runs 10 decode steps of 2 sequences (2 + 0.5 s each), one step every 25 s."""
    costs = _costs(weights=2.0, floor_s=0.5)
    loop = simulate_in_flight(_singles(10, 10), 0, 4, 1, 0.0, 0.0, costs)
    assert loop.per_step.steps == pytest.approx(10)
    assert loop.per_step.mean_batch == pytest.approx(2)
    assert loop.per_step.memory_s == pytest.approx(20)
    assert loop.per_step.floor_s == pytest.approx(5)
    assert loop.period_s == pytest.approx(25)
    assert loop.idle_s == pytest.approx(0)


def test_in_flight_loop_waits_for_a_slow_trainer() -> None:
    """The trainer takes 100 s and each weight load 1 s: step t + 2 is admitted only when
    step t's weights arrive, so the engine decodes its 25 s, then idles; a step every 101 s.
    Eight steps ahead (k = 8) start with eight steps admitted at once; the warm-up outlasts
    that backlog and the loop settles at the trainer's pace all the same."""
    costs = _costs(weights=2.0, floor_s=0.5)
    loop = simulate_in_flight(_singles(10, 10), 0, 4, 1, 100.0, 1.0, costs)
    assert loop.period_s == pytest.approx(101)
    assert loop.per_step.total_s == pytest.approx(25)
    assert loop.idle_s == pytest.approx(101 - 25 - 1)
    ahead = simulate_in_flight(_singles(10, 10), 0, 4, 8, 100.0, 1.0, costs)
    assert ahead.period_s == pytest.approx(101)
    assert ahead.idle_s == pytest.approx(101 - 1 - ahead.per_step.total_s)


def test_in_flight_loop_hides_the_tail_of_one_response_groups() -> None:
    """10 and 30 tokens a step, each its own prompt group: drained, a step takes 30 decode
    steps (the last 20 alone); with the next step admitted as groups finish, two always run:
    20 decode steps."""
    costs = _costs(weights=1.0)
    assert simulate_decode([10, 30], 0, 2, costs).steps == 30
    loop = simulate_in_flight(_singles(10, 30), 0, 2, 1, 0.0, 0.0, costs)
    assert loop.per_step.steps == pytest.approx(20)
    assert loop.per_step.mean_batch == pytest.approx(2)
    assert loop.period_s == pytest.approx(20)
    # Two steps ahead (k = 2) with four slots: 40 tokens a step over up to four running, 10
    # decode steps a step; now and then step t - 1's long response holds back step t + 2's
    # admission and fewer run.
    ahead = simulate_in_flight(_singles(10, 30), 0, 4, 2, 0.0, 0.0, costs)
    assert ahead.period_s == pytest.approx(10)
    assert ahead.per_step.steps == pytest.approx(10)
    assert 3.5 < ahead.per_step.mean_batch <= 4
    assert simulate_in_flight([], 0, 2, 1, 3.0, 1.0, costs).period_s == 4


def test_a_prompt_group_holds_its_place_until_its_longest_response_ends() -> None:
    """NeMo RL frees a group's place when all its responses are done: one group of 10 and 30
    tokens drains as a drained engine does (30 decode steps, 4/3 running on average); a
    group whose longest response (30) runs on another replica leaves this one 10 steps of
    its own response (1 + 0.5 s each) and 20 steps of waiting at the same pace."""
    costs = _costs(weights=1.0, floor_s=0.5)
    pair = simulate_in_flight([PromptGroup((10, 30), 30)], 0, 2, 1, 0.0, 0.0, costs)
    assert pair.per_step.steps == pytest.approx(30)
    assert pair.per_step.mean_batch == pytest.approx((10 * 2 + 20) / 30)
    elsewhere = simulate_in_flight([PromptGroup((10,), 30)], 0, 2, 1, 0.0, 0.0, costs)
    assert elsewhere.per_step.steps == pytest.approx(10)
    assert elsewhere.per_step.total_s == pytest.approx(15)
    assert elsewhere.idle_s == pytest.approx(30)
    assert elsewhere.period_s == pytest.approx(45)


def test_in_flight_loop_walks_representative_groups_for_a_large_replica() -> None:
    """Groups of 10 and 30 tokens standing for two each: the same loop as both twice,
    walked one by one (a step of 2 walked sequences costs what 4 running ones do)."""
    costs = _costs(weights=1.0, kv_bytes_per_token=0.01, floor_s=0.25, per_sequence_s=0.1)
    whole = simulate_in_flight(_singles(10, 10, 30, 30), 5, 4, 1, 3.0, 1.0, costs)
    walked = simulate_in_flight(_singles(10, 30), 5, 4, 1, 3.0, 1.0, costs, stands_for=2)
    assert walked.period_s == pytest.approx(whole.period_s)
    assert walked.per_step.total_s == pytest.approx(whole.per_step.total_s)
    assert walked.per_step.mean_batch == pytest.approx(whole.per_step.mean_batch)


def _long_walk(
    monkeypatch: pytest.MonkeyPatch,
    groups: list[PromptGroup],
    slots: int,
    k: int,
    trainer_s: float,
    costs: StepCosts,
) -> InFlightLoop:
    """The loop walked through 1,680 measured steps (whole cycles of any 1 to 8 steps)."""
    import rlplex.estimate.decode as decode

    with monkeypatch.context() as m:
        m.setattr(decode, "IN_FLIGHT_MEASURED_STEPS", 1680 - 2 * k)
        return simulate_in_flight(groups, 0, slots, k, trainer_s, 0.0, costs, stop_on_repeat=False)


@pytest.mark.parametrize(
    ("groups", "slots", "k", "trainer_s", "why"),
    [
        # Four steps in flight, a cycle of four gaps: 6 + 2k = 14 measured steps cut it
        # (41.79 s a step for the loop's 41.25).
        (_singles(40, 40, 30), 4, 4, 5.0, "a window of 14 steps cuts a cycle of 4"),
        # Gaps of 15, 15, 15 and 0 s: three alike in a row are not yet a repeating loop
        # (taken as one at 15 s a step; the loop's own mean is 11.21).
        (_singles(20, 10), 4, 3, 0.0, "three gaps alike inside a cycle of four"),
        # Eight steps admitted at once keep the slots full for 20 steps of 40 s, each
        # decoding 53 tokens of a 41-token step: the backlog repeats, the loop does not.
        (_singles(30, 10.85), 2, 8, 40.0, "the first k steps' backlog"),
    ],
)
def test_in_flight_loop_stops_on_a_repeating_cycle_with_the_loops_own_mean(
    monkeypatch: pytest.MonkeyPatch,
    groups: list[PromptGroup],
    slots: int,
    k: int,
    trainer_s: float,
    why: str,
) -> None:
    """A walk that stops once the loop repeats gives what a long walk averages."""
    costs = _costs(weights=1.0, floor_s=0.5)
    loop = simulate_in_flight(groups, 0, slots, k, trainer_s, 0.0, costs)
    long = _long_walk(monkeypatch, groups, slots, k, trainer_s, costs)
    assert loop.period_s == pytest.approx(long.period_s, rel=1e-9), why
    assert loop.per_step.total_s == pytest.approx(long.per_step.total_s, rel=1e-9), why
    assert loop.idle_s == pytest.approx(long.idle_s, rel=1e-9, abs=1e-9), why


def test_a_window_of_6_plus_2k_steps_cuts_a_cycle_the_repeat_does_not() -> None:
    """The cycle of four gaps above, walked through the window alone: off the loop's mean."""
    costs = _costs(weights=1.0, floor_s=0.5)
    args = (_singles(40, 40, 30), 0, 4, 4, 5.0, 0.0, costs)
    cut = simulate_in_flight(*args, stop_on_repeat=False)
    whole = simulate_in_flight(*args)
    assert whole.period_s == pytest.approx(41.25)
    assert cut.period_s == pytest.approx(41.25 * 1.013, rel=2e-3)
