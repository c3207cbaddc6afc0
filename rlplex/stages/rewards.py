"""The reward stage: rule-based scores from plain Python callables, or a reward model.

A rule reward is any ``fn(prompt: str, response: str) -> float``: no torch,
so it runs on a CPU role. The response text is decoded up to and including
its eos (kept as the tokenizer's eos text), so a rule can tell a finished
answer from a truncated one. A CPU role with several workers scores its shard
of the batch on each (:func:`shard`); the driver concatenates the shards back
in order. The reward-model option scores sequences with a sequence
classification head (:func:`rlplex.stages.logprobs.reward_model_scores`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rlplex.stages.batch import Batch

if TYPE_CHECKING:
    import torch

RewardFn = Callable[[str, str], float]
"""``fn(prompt_text, response_text) -> score``."""

T = TypeVar("T")


def load_reward_fn(ref: str) -> RewardFn:
    """The callable named ``"module:function"`` (e.g. ``rlplex.stages.toy:toy_reward``)."""
    module_name, sep, name = ref.partition(":")
    if not sep:
        raise ValueError(f"reward function must look like 'module:function', got {ref!r}")
    fn = getattr(importlib.import_module(module_name), name, None)
    if not callable(fn):
        raise ValueError(f"{module_name!r} has no callable {name!r}")
    return fn


def shard(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """The contiguous slice of ``items`` worker ``rank`` of ``world_size`` scores."""
    n = len(items)
    start, end = n * rank // world_size, n * (rank + 1) // world_size
    return list(items[start:end])


def decode_batch(batch: Batch, tokenizer: Any) -> tuple[list[str], list[str]]:
    """Prompt and response texts of every row; the response keeps its eos as text."""
    prompts, responses = [], []
    for ids, pmask, rids, rmask in zip(
        batch["prompt_ids"],
        batch["prompt_mask"],
        batch["response_ids"],
        batch["response_mask"],
        strict=True,
    ):
        prompts.append(tokenizer.decode(ids[pmask.bool()].tolist(), skip_special_tokens=True))
        responses.append(tokenizer.decode(rids[rmask.bool()].tolist(), skip_special_tokens=False))
    return prompts, responses


def rule_scores(fn: RewardFn, prompts: Sequence[str], responses: Sequence[str]) -> list[float]:
    """``fn`` on each (prompt, response) pair."""
    return [float(fn(p, r)) for p, r in zip(prompts, responses, strict=True)]


def scores_tensor(scores: Sequence[float]) -> torch.Tensor:
    import torch

    return torch.tensor(list(scores), dtype=torch.float32)
