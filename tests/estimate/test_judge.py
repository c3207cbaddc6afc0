"""A generative judge's stage (``pipeline.stages.S.judge``) against values computed by hand.

The ``base`` fixture (tests/estimate/conftest.py) is llama-3.1-8b on one node of 8 H100 with
64 prompts x 4 samples a step (prompts of 100 tokens on average, responses of 300). Here a
``judge`` role of 2 GPUs (tp 1: two replicas of 128 samples each) judges every sample in a
200-token template and answers in 3 tokens: each judge prompt is 200 + 100 + 300 = 600
tokens. Llama-3.1-8B: 32 layers, hidden 4,096, 32 query heads and 8 KV heads of 128, a
vocabulary of 128,256 (untied).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.cli.stage_lines import judge_line
from rlplex.config import config_from_dict
from rlplex.errors import ConfigError
from rlplex.estimate.decode import StepCosts, simulate_decode
from rlplex.estimate.estimator import Estimate, estimate_config

P = 8_030_261_248  # llama-3.1-8b parameters (tests/estimate/test_formulas.py)
ACTIVE = P - 128_256 * 4096 - 4096  # weights a token multiplies
LAYERS = 32
ATTENTION_WIDTH = 2 * 32 * 128
KV_PER_TOKEN = 2 * LAYERS * 8 * 128 * 2  # K and V, 8 KV heads at tp 1, bf16
H100 = 989.5e12
HBM = 3350e9
PREFILL, DECODE, WIDTH_HALF, TOKENS_HALF = 0.6, 0.6, 1024, 512  # efficiency.yaml
DECODE_STEP_S, DECODE_LAYER_S, DECODE_SEQUENCE_S = 0.0041, 3e-5, 5e-6
EFF_PREFILL = PREFILL * 4096 / (4096 + WIDTH_HALF)
CONTEXT = 200 + 100 + 300
PER_REPLICA = 128
JUDGE_FLOPS = 2 * ACTIVE * CONTEXT + ATTENTION_WIDTH * LAYERS * CONTEXT**2


def _with_judge(base: dict[str, Any], **rollout: Any) -> dict[str, Any]:
    base["cluster"]["nodes"] = 2
    base["roles"]["judge"] = {"devices": "8-9", "rollout": {"max_num_seqs": 1, **rollout}}
    base["pipeline"]["stages"]["reward"] = {
        "role": "judge", "after": ["generate"],
        "judge": {"template_tokens": 200, "response_tokens": 3},
    }  # fmt: skip
    return base


def _estimate(config: dict[str, Any]) -> Estimate:
    return estimate_config(config_from_dict(copy.deepcopy(config), file="t.yaml"))


def _costs() -> StepCosts:
    """One decode step of a tp-1 judge replica by hand: the bf16 weights but the embedding
    table (a lookup of the batch's rows), 8 KV heads' cache a token, the matmul and attention
    FLOPs, 60% of HBM, and the floor of a step and every layer's small kernels."""
    return StepCosts(
        weight_bytes=lambda b: 2 * (P - 128_256 * 4096 + b * 4096),
        kv_bytes_per_token=KV_PER_TOKEN,
        flops_per_token=2 * ACTIVE,
        attention_flops_per_context=2 * ATTENTION_WIDTH * LAYERS,
        bandwidth=HBM * DECODE,
        flop_rate=H100 * EFF_PREFILL,
        floor_s=DECODE_STEP_S + LAYERS * DECODE_LAYER_S,
        per_sequence_s=DECODE_SEQUENCE_S,
    )


def test_a_judge_prefills_each_prompt_alone_and_decodes_its_answer(base: dict[str, Any]) -> None:
    """One sample at a time (``max_num_seqs: 1``): each replica prefills its 128 judge
    prompts one by one (matmuls of 600 tokens: the tokens factor 600 / (600 + 512)), each
    prefill an engine step of its own that writes the answer's first token, then decodes the
    other 2 tokens of each: 256 decode steps at batch 1, and 128 + 256 step floors."""
    est = _estimate(_with_judge(base)).stages["reward"]
    assert est.kind == "judge"
    rate = H100 * EFF_PREFILL * CONTEXT / (CONTEXT + TOKENS_HALF)
    prefill = PER_REPLICA * JUDGE_FLOPS / rate
    dec = simulate_decode([2.0] * PER_REPLICA, CONTEXT + 1, 1, _costs())
    floor = DECODE_STEP_S + LAYERS * DECODE_LAYER_S
    assert dec.steps == pytest.approx(2 * PER_REPLICA)
    assert est.detail["decode_steps"] == pytest.approx(256)
    assert est.detail["prefill_steps"] == 128
    assert est.detail["prefill_s"] == pytest.approx(prefill)
    assert est.terms["compute"] == pytest.approx(prefill + dec.compute_s)
    assert est.terms["memory"] == pytest.approx(dec.memory_s)
    assert est.terms["latency"] == pytest.approx((128 + 256) * floor)
    assert est.terms["overhead"] == pytest.approx(256 * DECODE_SEQUENCE_S)
    assert est.seconds == pytest.approx(prefill + dec.total_s + 128 * floor)
    assert "128 samples each per step, judged 1 at a time" in judge_line(est.detail)
    assert "prompts of 600 tokens" in judge_line(est.detail)


def test_a_batching_judge_prefills_together_and_decodes_in_waves(base: dict[str, Any]) -> None:
    """``max_num_seqs: 8``: a prefill chunk holds 8 prompts (4,800 tokens: a larger tokens
    factor), and the answers decode 8 at a time: 16 waves of the 2 steps after the
    prefill's token."""
    one = _estimate(_with_judge(base)).stages["reward"]
    est = _estimate(_with_judge(base, max_num_seqs=8)).stages["reward"]
    rate = H100 * EFF_PREFILL * 4800 / (4800 + TOKENS_HALF)
    assert est.detail["prefill_s"] == pytest.approx(PER_REPLICA * JUDGE_FLOPS / rate)
    assert est.detail["decode_steps"] == pytest.approx(32)  # 16 waves of 2 steps
    assert est.detail["prefill_steps"] == 16  # chunks of 8 prompts
    assert est.detail["slots"] == 8
    assert est.seconds < one.seconds


def test_a_judge_over_a_share_judges_that_share(base: dict[str, Any]) -> None:
    """``share: 0.25`` (one domain of ROLL's): 32 samples a replica."""
    config = _with_judge(base)
    config["pipeline"]["stages"]["reward"]["share"] = 0.25
    est = _estimate(config).stages["reward"]
    assert est.detail["samples_per_replica"] == 32
    assert est.detail["decode_steps"] == pytest.approx(64)


def test_a_one_token_answer_is_written_by_the_prefill_alone(base: dict[str, Any]) -> None:
    """``response_tokens: 1`` (a verdict with no end-of-sequence token of its own): the
    prefill's forward pass writes it; no decode step, one step floor per prompt."""
    config = _with_judge(base)
    config["pipeline"]["stages"]["reward"]["judge"]["response_tokens"] = 1
    est = _estimate(config).stages["reward"]
    assert est.detail["decode_steps"] == 0
    assert est.terms.get("memory", 0.0) == 0.0  # zero terms are left out
    assert est.terms["latency"] == pytest.approx(128 * (DECODE_STEP_S + LAYERS * DECODE_LAYER_S))


def test_a_judge_that_sleeps_between_calls_copies_its_weights_each_time(
    base: dict[str, Any],
) -> None:
    """``reload_every: 8`` (ROLL's judge asleep after each prompt's 8 samples): 128 samples
    a replica are 16 calls, each waking the engine (engine_switch_s, 0.3 s) and copying its
    16.06 GB of bf16 weights a GPU in and out over the host link (64 GB/s x host_copy 0.8)."""
    plain = _estimate(_with_judge(base)).stages["reward"]
    config = _with_judge(base)
    config["pipeline"]["stages"]["reward"]["judge"]["reload_every"] = 8
    result = _estimate(config)
    est = result.stages["reward"]
    weights = result.roles["judge"].states["weights"]
    assert weights == pytest.approx(2 * P / 1e9)
    reload_s = 16 * (0.3 + 2 * weights / (64 * 0.8))
    assert (est.detail["reloads"], est.detail["reload_s"]) == (16, pytest.approx(reload_s))
    assert est.terms["overhead"] == pytest.approx(plain.terms["overhead"] + reload_s)
    assert est.seconds == pytest.approx(plain.seconds + reload_s)
    assert "woken and put back to sleep 16 times" in judge_line(est.detail)


def test_a_judge_role_sizes_its_kv_cache_for_the_prompts_it_runs(base: dict[str, Any]) -> None:
    """The judge's engine holds the judge prompts running at once, each at the longest
    sample: 200 + 200 + 600 + 3 tokens of KV cache, one at a time here; it writes with its
    language-model head (all 8.03 B parameters, not a reward model's score head)."""
    est = _estimate(_with_judge(base))
    states = est.roles["judge"].states
    assert states["kv_cache"] == pytest.approx(1003 * KV_PER_TOKEN / 1e9)
    assert est.roles["judge"].params == P


def test_a_judge_on_a_cpu_role_is_a_remote_model_and_not_estimated(base: dict[str, Any]) -> None:
    """A judge whose role has no GPUs asks a remote model (an API): not a rule reward's
    per-sequence overhead; its seconds are the file's."""
    config = _with_judge(base)
    config["roles"]["judge"] = {"world_size": 4}
    config["pipeline"]["stages"]["reward"]["seconds"] = 30.0
    est = _estimate(config).stages["reward"]
    assert (est.kind, est.bound, est.seconds) == ("cpu", "given", 30.0)


@pytest.mark.parametrize(
    ("stage", "body", "field", "words"),
    [
        ("reward", {"response_tokens": 0}, "pipeline.stages.reward.judge.response_tokens",
         "greater than or equal to 1"),
        ("reward", {"response_tokens": 2, "template_tokens": -1},
         "pipeline.stages.reward.judge.template_tokens", "greater than or equal to 0"),
        ("reward", {"template_tokens": 5}, "pipeline.stages.reward.judge.response_tokens",
         "required"),
        ("generate", {"response_tokens": 2}, "pipeline.stages.generate.judge",
         "a judge scores samples"),
        ("reward", {"response_tokens": 2, "reload_every": 0},
         "pipeline.stages.reward.judge.reload_every", "greater than or equal to 1"),
    ],
)  # fmt: skip
def test_bad_judges_name_the_field(
    base: dict[str, Any], tmp_path: Path, stage: str, body: dict[str, Any], field: str, words: str
) -> None:
    config = _with_judge(base)
    config["pipeline"]["stages"][stage]["judge"] = body
    with pytest.raises(ConfigError) as info:
        config_from_dict(copy.deepcopy(config), file="bad.yaml")
    assert info.value.field == field and words in info.value.message
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(app, ["estimate", str(path)])
    assert result.exit_code == 2
    assert field in result.output and "Traceback" not in result.output


def _streaming(base: dict[str, Any], generate_s: float | None, devices: str = "8-9") -> Any:
    config = _with_judge(base)
    config["roles"]["judge"]["devices"] = devices
    config["pipeline"]["stages"]["reward"]["judge"]["streams"] = True
    if generate_s is not None:
        config["pipeline"]["stages"]["generate"]["seconds"] = generate_s
    return _estimate(config).stages["reward"]


def test_a_streaming_judge_keeps_what_the_rollout_does_not_hide(base: dict[str, Any]) -> None:
    """``streams``: the judge scores samples as the rollout produces them, on other GPUs. A
    rollout longer than the judge's work leaves only the last call (one sample here, its
    1/128 of a replica's work); a shorter one leaves the backlog, total - rollout."""
    whole = _estimate(_with_judge(base)).stages["reward"]
    total = whole.seconds
    long = _streaming(base, 10 * total)
    assert long.seconds == pytest.approx(total / PER_REPLICA)
    assert long.detail["hidden_s"] == pytest.approx(total - total / PER_REPLICA)
    assert sum(long.terms.values()) == pytest.approx(long.seconds)
    short = _streaming(base, total / 4)
    assert short.seconds == pytest.approx(total - total / 4)
    assert "hidden behind generate's" in judge_line(short.detail)


def test_a_streaming_judge_on_the_rollouts_gpus_cannot_hide(base: dict[str, Any]) -> None:
    """A judge on GPUs the rollout uses (actor_infer's 0-7) waits for it: its whole work."""
    whole = _estimate(_with_judge(base)).stages["reward"]
    shared = _streaming(base, 1000.0, devices="6-7")
    assert shared.seconds == pytest.approx(whole.seconds)
    assert "streams_beside" not in shared.detail
