"""A toy task on which RL visibly teaches a tiny random model, on a CPU, in a minute.

Prompts are a few random digits; the answer is ``(last digit + 1) mod 10``
(rule ``next``) or the last digit itself (rule ``repeat``), then eos. A
randomly initialised 16-token model answers right about 1 time in 16, so the
mean reward starts near 0.06; the rule depends only on the last prompt
token, so a 2-layer model learns it within a few dozen GRPO steps. The reward
is 1 when the response starts with the right digit. (Also asking for an eos
right after it was tried: the model then learns "digit -> next digit" and
keeps counting, because the answer position and the prompt's last position
look alike to it; learning to stop takes far more steps than the budget.)
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rlplex.stages.tokenizer import CharTokenizer, CharTokenizerConfig


class ToyTaskConfig(BaseModel):
    """The toy task."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: Literal["next", "repeat"] = "next"
    """``next``: answer (last digit + 1) mod 10; ``repeat``: answer the last digit."""
    prompt_digits: int = Field(3, ge=1, le=16)
    """Digits per prompt."""
    prompts_per_step: int = Field(32, ge=1)
    """Prompts drawn per RL step (each sampled ``n`` times)."""
    seed: int = 0
    """Seed of the prompt stream."""


def toy_tokenizer() -> CharTokenizer:
    """Digits plus pad, bos, eos in 16 ids."""
    return CharTokenizer(CharTokenizerConfig(alphabet="0123456789", vocab_size=16))


def expected_answer(prompt: str, rule: str = "next") -> str:
    """The digit the rule asks for after ``prompt``."""
    last = int(prompt[-1])
    return str((last + 1) % 10 if rule == "next" else last)


def _score(prompt: str, response: str, rule: str) -> float:
    return 1.0 if response.startswith(expected_answer(prompt, rule)) else 0.0


def toy_reward(prompt: str, response: str) -> float:
    """Rule ``next``: 1 when the response starts with (last digit + 1) mod 10, else 0."""
    return _score(prompt, response, "next")


def toy_reward_repeat(prompt: str, response: str) -> float:
    """Rule ``repeat``: as :func:`toy_reward` with the last digit as the answer."""
    return _score(prompt, response, "repeat")


def reward_fn_ref(config: ToyTaskConfig) -> str:
    """The ``module:function`` of the rule's reward."""
    name = "toy_reward" if config.rule == "next" else "toy_reward_repeat"
    return f"{__name__}:{name}"


def prompts_for_step(config: ToyTaskConfig, step: int) -> list[str]:
    """The prompts of RL step ``step``: deterministic in (seed, step), so every runner agrees."""
    rng = random.Random(config.seed * 1_000_003 + step)
    return [
        "".join(rng.choice("0123456789") for _ in range(config.prompt_digits))
        for _ in range(config.prompts_per_step)
    ]
