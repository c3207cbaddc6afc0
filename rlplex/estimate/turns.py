"""What multi-turn trajectories add to generation: prefills between turns and environment waits.

An agentic RL step (ROLL's agentic pipeline, verl's multi-turn rollout and agent
loops) does not generate one answer per prompt: the model answers, an
environment or a tool replies, the model answers again, up to ``turns.max``
times. The engine sees each turn as a new request. So besides decoding the
answers (the same continuous batching as single-turn generation, over each
trajectory's answer tokens), generation

- prefills what each later turn adds: with prefix caching (vLLM's automatic
  prefix caching, SGLang's radix cache) the observation only, at a context
  that has grown by every earlier turn; without it the whole context again,
  which grows with the square of the turns;
- decodes with the trajectory's observations in its KV cache besides its own
  answers (half of them on average over its turns);
- and, where the step waits for its slowest trajectory, waits for that
  trajectory's environment once per turn (``turns.env_s``), since its turns
  run one after another.

Every figure uses the mean number of turns ``T``; the longest trajectory takes
``T`` turns scaled by how much longer it is than the mean, at most ``turns.max``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlplex.estimate import formulas as f
from rlplex.estimate.specs import ModelSpec
from rlplex.resources.inputs import Turns, Workload


@dataclass(frozen=True)
class MultiTurn:
    """One trajectory's work beyond its first prompt and its answers (all zero without turns)."""

    turns: Turns | None
    """The workload's turns, or None for single-turn generation."""
    later_turns: float = 0.0
    """Turns after the first (each a new request that prefills before it decodes)."""
    prompt_tokens: float = 0.0
    """The first prompt's mean tokens."""
    answer_tokens: float = 0.0
    """One turn's mean answer tokens."""

    @property
    def observation_tokens(self) -> float:
        return self.turns.observation_tokens if self.turns else 0.0

    @property
    def prefill_tokens(self) -> float:
        """Tokens each trajectory prefills after its first prompt: each later turn's
        observation with prefix caching, else each later turn's whole context."""
        if self.turns is None or self.later_turns <= 0:
            return 0.0
        k, p, o = self.later_turns, self.prompt_tokens, self.observation_tokens
        if self.turns.prefix_caching:
            return k * o
        u = self.answer_tokens + o
        return k * p + u * k * (k + 1) / 2

    def prefill_flops(self, spec: ModelSpec) -> float:
        """FLOPs of :attr:`prefill_tokens` (matmuls, and attention to the context each
        prefilled token sees), per trajectory."""
        if self.turns is None or self.later_turns <= 0:
            return 0.0
        k, p, o = self.later_turns, self.prompt_tokens, self.observation_tokens
        u = self.answer_tokens + o
        width = f.attention_width(spec)
        matmul = f.token_flops(spec) * self.prefill_tokens
        full, windowed = spec.full_attention_layers, spec.sliding_window_layers
        window = spec.sliding_window
        # A windowed layer's share is the full one less what passes the window, so a window
        # that never binds gives the full formula exactly.
        if self.turns.prefix_caching:
            # Turn j's observation (o tokens) attends to p + j u - o/2 keys on average (at
            # most the window in a windowed layer).
            keys = k * p + u * k * (k + 1) / 2 - k * o / 2
            beyond = (
                _over_turns(k, lambda j: max(0.0, p + j * u - o / 2 - window)) if windowed else 0
            )
            return matmul + 2.0 * width * o * ((full + windowed) * keys - windowed * beyond)
        # Turn j prefills p + j u tokens from scratch: width x length**2 each (forward_flops).
        squares = k * p * p + p * u * k * (k + 1) + u * u * k * (k + 1) * (2 * k + 1) / 6
        beyond = _over_turns(k, lambda j: max(0.0, p + j * u - window) ** 2) if windowed else 0
        return matmul + width * ((full + windowed) * squares - windowed * beyond)

    @property
    def observation_context(self) -> float:
        """Observation tokens a decoding trajectory holds on average (half of all of them)."""
        return self.later_turns * self.observation_tokens / 2

    def longest_turns(self, longest: float) -> float:
        """Turns of the trajectory that decodes ``longest`` tokens: that many mean answers,
        at least one and at most ``turns.max`` (one when every trajectory answers once)."""
        if self.turns is None:
            return 1.0
        answers = longest / self.answer_tokens if self.answer_tokens > 0 else 1.0
        return min(float(self.turns.most()), max(1.0, answers))

    def env_wait_s(self, longest: float) -> float:
        """Seconds the longest trajectory (``longest`` tokens decoded) waits for its
        environment over its turns."""
        if self.turns is None or self.turns.env_s == 0:
            return 0.0
        return self.longest_turns(longest) * self.turns.env_s

    def streamed_wait_s(
        self, decode_s: float, sequences: float, slots: float, held: float
    ) -> float:
        """Seconds an engine that streams across steps adds to a step's ``decode_s`` because
        its trajectories wait for their environment (Little's law).

        The engine holds ``held`` trajectories, at most ``slots`` decoding at once. A
        trajectory lives ``T x env_s`` waiting plus its decode, ``decode_s x slots /
        sequences`` (a step's ``sequences`` decoded ``slots`` at a time); so at most ``held``
        per lifetime finish, and a step's ``sequences`` take ``sequences / held`` lifetimes.
        Where more trajectories wait than free slots can hide, that exceeds ``decode_s``.
        """
        if self.turns is None or self.turns.env_s == 0 or held <= 0 or sequences <= 0:
            return 0.0
        lifetime = self.turns.mean * self.turns.env_s + decode_s * slots / sequences
        return max(0.0, sequences * lifetime / held - decode_s)

    def detail(self, longest: float, env_wait_s: float) -> dict[str, Any]:
        """The generate stage's detail entries for turns (none without them)."""
        if self.turns is None:
            return {}
        return {
            "turns": self.turns.mean,
            "longest_turns": round(self.longest_turns(longest), 3),
            "turn_prefill_tokens": round(self.prefill_tokens, 3),
            "env_wait_s": env_wait_s,
        }


def multi_turn(w: Workload) -> MultiTurn:
    """The multi-turn figures of workload ``w``."""
    if w.turns is None:
        return MultiTurn(None)
    r = w.response_tokens
    return MultiTurn(
        turns=w.turns,
        later_turns=w.turns.mean - 1,
        prompt_tokens=w.prompt_tokens.mean,
        answer_tokens=min(r.mean, r.max),
    )


def _over_turns(k: float, term: Callable[[float], float]) -> float:
    """``term(1) + ... + term(k)`` for a mean count of turns ``k`` that may be fractional
    (the last turn counted by its fraction)."""
    whole = int(k)
    total = sum(term(j) for j in range(1, whole + 1))
    return total + (k - whole) * term(whole + 1) if k > whole else total
