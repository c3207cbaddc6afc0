"""Multi-turn trajectories (``workload.turns``): what they add to generation and what the
trainer sees, each against a hand-computed value or the single-turn workload it reduces to."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import estimate_config
from rlplex.estimate.specs import model_presets
from rlplex.estimate.turns import multi_turn
from rlplex.resources.inputs import Workload

TURNS = {"mean": 3, "max": 6, "observation_tokens": 100}
"""3 answers of 200 tokens (at most 6 of 400) with 100-token observations between them."""


def _multi_turn(base: dict[str, Any], **turns: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["workload"]["response_tokens"] = {"mean": 200, "max": 400}
    out["workload"]["turns"] = {**TURNS, **turns}
    return out


def _stages(data: dict[str, Any]) -> dict[str, Any]:
    return dict(estimate_config(config_from_dict(data)).stages)


def test_a_trajectory_holds_its_answers_and_the_observations_between_them(
    base: dict[str, Any],
) -> None:
    w = config_from_dict(_multi_turn(base)).workload
    assert w is not None
    assert w.continuation_mean() == 3 * 200 + 2 * 100
    assert w.continuation_max() == 6 * 400 + 5 * 100
    assert w.generated_share() == pytest.approx(600 / 800)
    assert w.sequence_mean() == 100 + 800 and w.sequences() == 64 * 4
    capped = config_from_dict(_multi_turn(base, max_tokens=2000)).workload
    assert capped is not None and capped.continuation_max() == 2000


def test_the_trainer_sees_the_single_turn_workload_of_the_whole_trajectory(
    base: dict[str, Any],
) -> None:
    """Train and log-prob passes see a trajectory as one sequence: a multi-turn workload costs
    them what a single-turn one whose response is the trajectory's tokens costs."""
    single = copy.deepcopy(base)
    single["workload"]["response_tokens"] = {"mean": 800, "max": 2900}
    turns, one = _stages(_multi_turn(base)), _stages(single)
    for name in ("train", "old_logprob", "ref_logprob"):
        assert turns[name].seconds == pytest.approx(one[name].seconds, rel=1e-12), name


def test_one_turn_without_observations_is_single_turn_generation(base: dict[str, Any]) -> None:
    single = copy.deepcopy(base)
    single["workload"]["response_tokens"] = {"mean": 200, "max": 400}
    one = _stages(single)["generate"]
    turn = _stages(_multi_turn(base, mean=1, max=1, observation_tokens=0))["generate"]
    assert turn.seconds == pytest.approx(one.seconds, rel=1e-12)
    assert turn.detail["turn_prefill_tokens"] == 0 and turn.detail["env_wait_s"] == 0


def test_the_engine_decodes_the_answers_only(base: dict[str, Any]) -> None:
    """The longest trajectory decodes its tokens' answer share (600 of 800 on average), over
    its mean turns scaled by how much longer it is, at most ``turns.max``."""
    gen = _stages(_multi_turn(base))["generate"]
    single = copy.deepcopy(base)
    single["workload"]["response_tokens"] = {"mean": 800, "max": 2900}
    whole = _stages(single)["generate"]
    longest = gen.detail["longest_response"]
    assert longest == pytest.approx(whole.detail["longest_response"] * 0.75, rel=1e-9)
    assert gen.detail["longest_turns"] == pytest.approx(min(6, longest / 200), abs=1e-3)


def test_each_turn_of_the_longest_trajectory_waits_for_its_environment(
    base: dict[str, Any],
) -> None:
    waits = _stages(_multi_turn(base, env_s=2.5))["generate"]
    none = _stages(_multi_turn(base))["generate"]
    expected = waits.detail["longest_turns"] * 2.5
    assert waits.detail["env_wait_s"] == pytest.approx(expected, rel=1e-3)
    assert waits.terms["latency"] - none.terms["latency"] == pytest.approx(
        waits.detail["env_wait_s"], rel=1e-12
    )
    assert waits.seconds - none.seconds == pytest.approx(waits.detail["env_wait_s"], rel=1e-9)


def test_later_turns_prefill_the_observation_or_the_whole_context(base: dict[str, Any]) -> None:
    """With prefix caching each of the 2 later turns prefills its 100-token observation;
    without, turn j prefills the prompt and j answers and observations: 2 x 100 + 300 x 3."""
    cached = _stages(_multi_turn(base))["generate"]
    assert cached.detail["turn_prefill_tokens"] == pytest.approx(2 * 100)
    again = _stages(_multi_turn(base, prefix_caching=False))["generate"]
    assert again.detail["turn_prefill_tokens"] == pytest.approx(2 * 100 + 300 * (1 + 2))
    assert again.terms["compute"] > cached.terms["compute"]


def test_prefill_flops_by_hand() -> None:
    """Turn j (1, 2) adds o = 100 tokens after a context of p + j u - o (u = 300 tokens of
    answer and observation): their matmuls, and attention to p + j u - o/2 keys on average;
    without caching, turn j's whole context p + j u from scratch (forward_flops)."""
    spec = model_presets()["llama-3.1-8b"]
    base = {"prompts_per_step": 1, "prompt_tokens": {"mean": 100, "max": 200},
            "response_tokens": {"mean": 200, "max": 400}}  # fmt: skip
    w = Workload.model_validate({**base, "turns": TURNS})
    width = f.attention_width(spec) * spec.num_layers
    matmul = 2.0 * f.active_params(spec)
    keys = sum(100 + j * 300 - 50 for j in (1, 2))
    assert multi_turn(w).prefill_flops(spec) == pytest.approx(
        matmul * 200 + 2 * width * 100 * keys, rel=1e-12
    )
    again = Workload.model_validate({**base, "turns": {**TURNS, "prefix_caching": False}})
    expected = sum(f.forward_flops(spec, 100 + j * 300) for j in (1, 2))
    assert multi_turn(again).prefill_flops(spec) == pytest.approx(expected, rel=1e-12)
    single = Workload.model_validate(base)
    assert multi_turn(single).prefill_flops(spec) == 0 and multi_turn(single).prefill_tokens == 0


@pytest.mark.parametrize(
    ("turns", "field"),
    [
        ({"mean": 7, "max": 6}, "workload.turns"),
        ({"mean": 0, "max": 6}, "workload.turns.mean"),
        ({"mean": 3, "max": 6, "observation_tokens": -1}, "workload.turns.observation_tokens"),
        ({"mean": 3, "max": 6, "env_s": -0.5}, "workload.turns.env_s"),
        ({"mean": 3, "max": 6, "max_tokens": 500}, "workload.turns"),
    ],
)
def test_bad_turns_name_the_field(base: dict[str, Any], turns: dict[str, Any], field: str) -> None:
    data = _multi_turn(base)
    data["workload"]["turns"] = turns
    with pytest.raises(ConfigError) as err:
        config_from_dict(data)
    assert field in str(err.value)


def test_a_mean_of_one_turn_is_one_answer_and_one_wait(base: dict[str, Any]) -> None:
    """Every trajectory answers once when the mean is 1, whatever ``max`` allows: single-turn
    generation plus one environment wait. Bug: it was capped at ``max`` answers and the
    longest waited for turns that cannot happen."""
    single = copy.deepcopy(base)
    single["workload"]["response_tokens"] = {"mean": 200, "max": 400}
    one = _stages(single)["generate"]
    turn = _stages(_multi_turn(base, mean=1, env_s=3.0))["generate"]
    assert turn.detail["longest_turns"] == 1 and turn.detail["env_wait_s"] == 3.0
    assert turn.seconds == pytest.approx(one.seconds + 3.0, rel=1e-9)


def test_a_trajectory_at_its_cap_takes_the_most_turns(base: dict[str, Any]) -> None:
    """Bug: with every trajectory at its cap (clip_ratio 1) the longest was said to take the
    mean turns, each answer past the answer's max."""
    data = _multi_turn(base, env_s=1.0)
    data["workload"]["response_tokens"]["clip_ratio"] = 1.0
    gen = _stages(data)["generate"]
    assert gen.detail["longest_turns"] == 6 and gen.detail["env_wait_s"] == pytest.approx(6.0)


def test_an_engine_that_streams_hides_waits_only_behind_what_it_holds(
    base: dict[str, Any],
) -> None:
    """Partial rollouts keep the engine's slots full across steps, but a trajectory waiting for
    its environment holds none: with ``held`` trajectories, each living T x env_s plus its
    decode, a step's n take n / held lifetimes (Little's law). Bug: the waits were dropped."""
    data = _multi_turn(base, env_s=0.0)
    data["roles"]["actor_train"]["devices"] = "0-3"
    data["roles"]["reference"]["devices"] = "0-3"
    data["roles"]["actor_infer"] = {"devices": "4-7", "num_gpus_per_worker": 2,
                                    "rollout": {"partial_rollout": True}}  # fmt: skip
    data["pipeline"]["mode"] = "async"
    data["pipeline"]["max_staleness"] = 1
    fast = _stages(data)["generate"]
    data["workload"]["turns"]["env_s"] = 600.0
    slow = _stages(data)["generate"]
    d = slow.detail
    n, held = d["sequences_per_replica"], d["sequences_per_replica"] * 2
    decode = fast.detail["decode_s"]
    lifetime = 3 * 600.0 + decode * d["slots"] / n
    assert d["env_wait_s"] == pytest.approx(n * lifetime / held - decode, rel=1e-9)
    assert slow.seconds - fast.seconds == pytest.approx(d["env_wait_s"], rel=1e-9)
    assert fast.detail["env_wait_s"] == 0


def test_a_trajectory_past_the_longest_workload_names_turns(base: dict[str, Any]) -> None:
    data = _multi_turn(base, max=1_000_000)
    with pytest.raises(ConfigError) as err:
        config_from_dict(data)
    assert err.value.field == "workload.turns" and "turns.max_tokens" in str(err.value)


def test_turns_trained_as_samples_hold_the_context_before_each(base: dict[str, Any]) -> None:
    """``turns.samples: turn`` (ROLL's step-wise env managers): 64 x 4 trajectories of 3 turns
    train as 768 samples; turn j holds the prompt, j - 1 answers and observations and its
    answer: 200 + 300 x (3 - 1) / 2 = 500 tokens after the prompt on average. Generation is the
    same trajectories either way."""
    w = config_from_dict(_multi_turn(base, samples="turn")).workload
    assert w is not None
    assert (w.trajectories(), w.sequences()) == (256, 768)
    assert w.continuation_mean() == pytest.approx(200 + 300 * (3 - 1) / 2)
    assert (w.trajectory_mean(), w.continuation_max()) == (800, 2900)
    per_turn = _stages(_multi_turn(base, samples="turn"))
    whole = _stages(_multi_turn(base))
    assert per_turn["generate"].seconds == pytest.approx(whole["generate"].seconds, rel=1e-12)
    assert per_turn["train"].detail["tokens"] == pytest.approx(768 * (100 + 500))
    assert whole["train"].detail["tokens"] == pytest.approx(256 * (100 + 800))


def test_a_share_of_trajectories_at_the_cap_is_not_the_samples(base: dict[str, Any]) -> None:
    """With each turn trained as a sample, ``clip_ratio`` stays the trajectories' share (every
    one at its cap here) and the samples take the default shape (bug: it was divided by the
    turns and refused with a value the user never gave)."""
    data = _multi_turn(base, samples="turn")
    data["workload"]["response_tokens"]["clip_ratio"] = 1.0
    est = _stages(data)
    assert est["generate"].detail["clip_ratio"] == 1.0
    assert est["train"].seconds > 0
