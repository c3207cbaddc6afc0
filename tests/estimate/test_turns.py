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
    assert gen.detail["longest_turns"] == pytest.approx(min(6, 3 * longest / 600), abs=1e-3)


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
