"""Decode of one inference replica under continuous batching, step by step in closed form.

An inference engine (vLLM, SGLang) decodes all its running sequences one token
per step. It keeps at most ``slots`` sequences running (``max_num_seqs``, or
fewer when the KV cache holds fewer) and starts a waiting sequence as soon as
one finishes. A step's time is a roofline of the memory it reads (the weights,
or the experts the batch touches, plus every running sequence's KV cache) and
the FLOPs it does, plus a per-step floor (kernel launches, the tensor-parallel
all-reduces of every layer, scheduling and sampling) and a host cost per running
sequence. So a replica is throughput-bound while its slots are full and
latency-bound while the last, longest responses finish with few companions:
the tail that makes RL generation slower than ``tokens / throughput``.

:func:`simulate_decode` walks the events (a sequence finishes, a waiting one
starts) rather than every step: between two events the batch is constant and
its context grows linearly, so each interval costs O(1). :func:`stream_decode` prices an
engine that never drains (partial rollouts across steps): every step at full slots.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepCosts:
    """What one decode step of a replica costs, per device of the replica."""

    weight_bytes: Callable[[float], float]
    """Weight bytes one device reads in a step of ``b`` sequences (MoE: the experts touched)."""
    kv_bytes_per_token: float
    """KV-cache bytes per cached token on one device."""
    flops_per_token: float
    """Matmul FLOPs per decoded token on one device (2 x active params / devices)."""
    attention_flops_per_context: float
    """Attention FLOPs per decoded token per cached token on one device."""
    bandwidth: float
    """Achieved memory bandwidth, bytes/s."""
    flop_rate: float
    """Achieved FLOP/s of one device."""
    floor_s: float
    """Fixed time of every step: launches, per-layer all-reduces, scheduling, sampling."""
    per_sequence_s: float
    """Host time per running sequence per step (scheduler, sampler, detokenizer)."""


@dataclass(frozen=True)
class DecodeTerms:
    """Decode seconds of one replica split by what bounds each step."""

    memory_s: float
    """Time of steps bound by memory traffic (weights + KV cache)."""
    compute_s: float
    """Time of steps bound by FLOPs."""
    floor_s: float
    """Per-step floors summed over all steps."""
    host_s: float
    """Per-sequence host costs summed over all steps."""
    steps: float
    """Decode steps (the longest chain of tokens the replica runs)."""
    mean_batch: float
    """Sequences per step, averaged over the steps."""
    slots: int
    """Sequences the replica ran at once at most."""

    @property
    def total_s(self) -> float:
        return self.memory_s + self.compute_s + self.floor_s + self.host_s

    def per_step(self, steps_in_flight: int) -> DecodeTerms:
        """One RL step's share when the replica decoded ``steps_in_flight`` steps' sequences
        together (the same batches, each step charged an equal part of every term)."""
        k = max(1, steps_in_flight)
        if k == 1:
            return self
        return DecodeTerms(
            memory_s=self.memory_s / k,
            compute_s=self.compute_s / k,
            floor_s=self.floor_s / k,
            host_s=self.host_s / k,
            steps=self.steps / k,
            mean_batch=self.mean_batch,
            slots=self.slots,
        )


def step_roofline(costs: StepCosts, batch: float, context: float) -> tuple[float, float]:
    """(memory-bound, compute-bound) seconds of one step of ``batch`` sequences holding
    ``context`` cached tokens in all: the larger one is the step's, the other is 0."""
    read = costs.weight_bytes(batch) + context * costs.kv_bytes_per_token
    flops = batch * costs.flops_per_token + context * costs.attention_flops_per_context
    t_mem, t_flop = read / costs.bandwidth, flops / costs.flop_rate
    return (t_mem, 0.0) if t_mem >= t_flop else (0.0, t_flop)


def stream_decode(
    tokens: float, running_context: float, slots: int, costs: StepCosts
) -> DecodeTerms:
    """Decode ``tokens`` with every one of ``slots`` always running (a streaming engine).

    An engine fed across steps (partial rollouts) replaces a finished sequence with the next
    step's and resumes interrupted ones, so its batch never drains: it runs ``tokens / slots``
    steps of ``slots`` sequences, each holding ``running_context`` cached tokens on average
    (its prompt plus, for a sequence seen at a random step, half its length, length-biased).
    """
    if tokens <= 0 or slots < 1:
        return DecodeTerms(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    steps = tokens / slots
    t_mem, t_flop = step_roofline(costs, slots, slots * running_context)
    return DecodeTerms(
        memory_s=steps * t_mem,
        compute_s=steps * t_flop,
        floor_s=steps * costs.floor_s,
        host_s=steps * slots * costs.per_sequence_s,
        steps=steps,
        mean_batch=float(slots),
        slots=slots,
    )


def simulate_decode(
    lengths: Sequence[float], prompt_tokens: float, slots: int, costs: StepCosts
) -> DecodeTerms:
    """Decode ``lengths`` (tokens each, in arrival order) with at most ``slots`` running.

    Each running sequence's context is its prompt plus what it has generated;
    a step reads every running context's KV cache.
    """
    slots = max(1, min(slots, len(lengths)))
    if not lengths:
        return DecodeTerms(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    queue = iter(lengths)
    running: list[float] = []  # end steps of the running sequences (a heap)
    by_end: dict[float, list[float]] = {}  # start steps of running sequences by end step
    start_sum = 0.0  # sum of the start steps of running sequences
    now = 0.0
    memory_s = compute_s = floor_s = host_s = 0.0
    batch_steps = 0.0

    def admit_all(at: float) -> None:
        nonlocal start_sum
        while len(running) < slots:
            length = next(queue, None)
            if length is None:
                return
            end = at + max(1.0, float(length))
            heapq.heappush(running, end)
            by_end.setdefault(end, []).append(at)
            start_sum += at

    admit_all(0.0)
    while running:
        nxt = running[0]
        span = nxt - now
        if span > 0:
            a = len(running)
            mid = now + span / 2
            t_mem, t_flop = step_roofline(costs, a, a * prompt_tokens + a * mid - start_sum)
            memory_s += span * t_mem
            compute_s += span * t_flop
            floor_s += span * costs.floor_s
            host_s += span * a * costs.per_sequence_s
            batch_steps += span * a
            now = nxt
        while running and running[0] <= now:
            end = heapq.heappop(running)
            start_sum -= by_end[end].pop()
        admit_all(now)
    return DecodeTerms(
        memory_s=memory_s,
        compute_s=compute_s,
        floor_s=floor_s,
        host_s=host_s,
        steps=now,
        mean_batch=batch_steps / now if now else 0.0,
        slots=slots,
    )
