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
:func:`simulate_in_flight` walks an engine that keeps decoding through weight syncs (NeMo
RL's in-flight weight updates) with its collector's admission rule and a trainer beside it,
step after step, to its steady state: full while the collector may admit, draining while the
trainer trains and syncs.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepCosts:
    """What one decode step of a replica costs, per device of the replica."""

    weight_bytes: Callable[[float], float]
    """Bytes one device moves in a step of ``b`` sequences besides their KV cache: weights
    (MoE: the experts touched) and linear-attention states (hybrid models)."""
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
    tokens: float, running_context: float, slots: float, costs: StepCosts
) -> DecodeTerms:
    """Decode ``tokens`` with every one of ``slots`` always running (a streaming engine).

    An engine fed across steps (partial rollouts) replaces a finished sequence with the next
    step's and resumes interrupted ones, so its batch never drains: it runs ``tokens / slots``
    steps of ``slots`` sequences, each holding ``running_context`` cached tokens on average
    (its prompt plus, for a sequence seen at a random step, half its length, length-biased).
    ``slots`` may be fractional where each sequence stands for several
    (:func:`simulate_in_flight`'s walked slots).
    """
    if tokens <= 0 or slots <= 0:
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
        slots=math.ceil(slots),
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


IN_FLIGHT_MAX_SEQUENCES = 1024
"""Most sequences per step :func:`simulate_in_flight` walks one by one (milliseconds, so that
a placement search can price every candidate); a replica with more is walked at fewer
representative prompt groups, each sequence standing for several (docs/cost-model.md)."""
IN_FLIGHT_WARMUP_STEPS = 3
"""Steps :func:`simulate_in_flight` runs before it measures, besides two per step of
staleness, and longer until the gaps between training starts decode one step's tokens (the
loop starts with k steps' prompt groups admitted at once; near balance that backlog clears
slowly), up to sixteen per step of staleness."""
IN_FLIGHT_MEASURED_STEPS = 6
"""Steps :func:`simulate_in_flight` averages over once settled, besides two per step of
staleness (k steps' groups in flight make the loop's pattern longer)."""
IN_FLIGHT_LONGEST_CYCLE = 6
"""Steps of the longest cycle :func:`simulate_in_flight` looks for, besides two per step of
staleness: a loop that repeats every p steps stops the walk once the last p + this many
gaps between training starts repeat. Walked loops of toy and published configs repeat
every 1 to 6 steps, or every k (a long step and short ones taking turns); one whose cycle
is longer is walked through its warm-up and window."""


@dataclass(frozen=True)
class PromptGroup:
    """One prompt's responses as one replica sees them."""

    lengths: tuple[float, ...]
    """The replica's own responses of the group (tokens each, in arrival order)."""
    longest: float
    """The group's longest response over every replica: its slot in the collector is freed
    when that one finishes (NeMo RL releases a prompt group's semaphore when all its samples
    are done)."""


@dataclass(frozen=True)
class InFlightLoop:
    """Decode of one replica in steady state under in-flight weight updates: what one RL
    step costs the engine, and how often steps come."""

    per_step: DecodeTerms
    """Decode terms of one step: the seconds the engine decodes, averaged (not idle or
    loading weights)."""
    period_s: float
    """Seconds between two training steps' starts (the loop's own period: decode, the
    trainer's turn, the engine's pauses to load weights)."""
    idle_s: float
    """Seconds per step the engine has nothing of its own to decode (waiting for weights
    that admit the next step's prompts, or for other replicas to finish a group's last
    responses)."""


def simulate_in_flight(
    groups: Sequence[PromptGroup],
    prompt_tokens: float,
    slots: int,
    steps_ahead: int,
    trainer_s: float,
    sync_s: float,
    costs: StepCosts,
    stands_for: float = 1.0,
    *,
    stop_on_repeat: bool = True,
) -> InFlightLoop:
    """Decode step after step on a replica whose engine keeps going through weight syncs.

    Every RL step brings ``groups`` (one per prompt, in arrival order). The collector keeps
    at most ``steps_ahead`` (k) steps' prompt groups in flight, frees a group's place when
    its longest response (on whichever replica) has finished, and admits step t's groups
    once the weights trained on step t - 1 - k have arrived (steps 0..k from the start):
    NeMo RL's AsyncTrajectoryCollector, its semaphore of ``num_prompts_per_step x
    max_trajectory_age_steps`` prompt groups and its target weight versions. The engine runs
    ``slots`` sequences at a time. Step t trains once its last group finished and the
    trainer is done with step t - 1; ``trainer_s`` later the engine stops ``sync_s`` to load
    the new weights. Where the trainer keeps up, the engine's slots stay full but for the
    drain while groups finish and the trainer trains; where it does not, the engine drains
    and waits. While the replica has nothing of its own to run but waits for a group's last
    response elsewhere, time passes at the pace of a replica decoding that one response.

    Each sequence may stand for ``stands_for`` of the replica's (a replica with more than
    :data:`IN_FLIGHT_MAX_SEQUENCES` sequences is walked at fewer representative groups: a
    step of ``a`` of them costs what ``a x stands_for`` running sequences cost, and the
    engine runs ``slots / stands_for`` of them at a time).

    Returns the decode terms per step averaged over :data:`IN_FLIGHT_MEASURED_STEPS` + 2k
    steps (the terms scaled to one step's tokens) after a warm-up (at least
    :data:`IN_FLIGHT_WARMUP_STEPS` + 2k steps, longer until two gaps between training starts
    in a row decode one step's tokens within 2 %, at most 3 + 16k), or, once the loop
    repeats exactly (a cycle of p steps, the last p + :data:`IN_FLIGHT_LONGEST_CYCLE` (at
    least 2k) gaps between training starts alike every p), over its whole cycles (a long
    step and short ones take turns: a window of 6 + 2k steps cut a cycle, up to 6 % off the
    loop's own mean at k = 4, and max(2, k) steps alike in a row were taken for a loop that
    repeats although longer cycles hold them); the period between training starts and the
    replica's idle seconds per step. ``stop_on_repeat=False`` walks the whole warm-up and
    window even so (what a check of the repeat's average compares with).
    """
    per_step = len(groups)
    if per_step == 0 or not any(g.lengths for g in groups):
        return InFlightLoop(DecodeTerms(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0), trainer_s + sync_s, 0.0)
    k = max(1, steps_ahead)
    w = stands_for if stands_for > 0 else 1.0
    slots = max(1, slots)
    walked_slots = max(1, round(slots / w))
    cap = per_step * k  # prompt groups in flight
    running: list[tuple[float, float, int]] = []  # (end step, start step, group id): a heap
    waiting: deque[tuple[float, int]] = deque()  # admitted, not running: (length, group id)
    releases: list[tuple[float, int]] = []  # (step the group's longest response ends, id)
    own_left: dict[int, int] = {}  # the replica's unfinished sequences of each group
    free_at: dict[int, float] = {}  # decode step at which each group's longest one ends
    step_of: dict[int, int] = {}  # the RL step of each group
    left: dict[int, int] = {}  # unreleased groups of each RL step
    done_at: dict[int, float] = {}  # seconds when each RL step's last group was released
    clock = 0.0  # decode steps so far
    now = 0.0  # seconds so far
    start_sum = 0.0
    in_flight = 0
    version = 0
    next_step, next_index, next_id = 0, 0, 0
    trainer_free, trained = 0.0, 0
    weights_at: tuple[float, int] | None = None  # (seconds, version they bring)
    starts: list[tuple[float, list[float]]] = []  # (seconds, the totals then) per training
    # Settled: at least 3 + 2k steps, and the last two gaps between training starts decoding
    # one step's tokens within 2 % (a loop near balance works off its first k steps' backlog
    # slowly), at most 3 + 16k steps; then 6 + 2k steps are measured.
    shortest = IN_FLIGHT_WARMUP_STEPS + 2 * k
    longest_warmup = IN_FLIGHT_WARMUP_STEPS + 16 * k
    measured = IN_FLIGHT_MEASURED_STEPS + 2 * k
    warmup: int | None = None
    # One step's tokens: a gap between training starts that decodes about that many (twice
    # in a row) has worked off the first k steps' backlog.
    step_tokens = w * sum(sum(max(1.0, float(x)) for x in g.lengths) for g in groups)
    alone = step_roofline(costs, w, w * prompt_tokens)  # one response (standing for w)
    alone_dt = sum(alone) + costs.floor_s + w * costs.per_sequence_s

    longest_cycle = max(IN_FLIGHT_LONGEST_CYCLE, 2 * k)

    def alike(i: int, j: int) -> bool:
        """Whether the i-th and j-th gaps from the end between training starts took one time
        with the same work in every term."""
        gi = starts[-i][0] - starts[-i - 1][0]
        gj = starts[-j][0] - starts[-j - 1][0]
        if abs(gi - gj) > 1e-9 * max(gi, gj):
            return False
        wi, wi0, wj, wj0 = starts[-i][1], starts[-i - 1][1], starts[-j][1], starts[-j - 1][1]
        for term in range(7):
            a, b = wi[term] - wi0[term], wj[term] - wj0[term]
            if abs(a - b) > 1e-9 * max(abs(a), abs(b), 1.0):
                return False
        return True

    def repeats() -> int:
        """Gaps to average over once the loop repeats exactly (0 while it does not): the
        smallest p such that the last p + ``longest_cycle`` gaps between training starts
        repeat every p steps (time and every term) and a cycle decodes p steps' tokens,
        whole cycles of them. A loop whose true cycle has q <= ``longest_cycle`` steps and
        shows period p over p + q gaps repeats every gcd(p, q) (Fine and Wilf), so the
        average is the loop's own."""
        gaps = len(starts) - 1
        if gaps < shortest:
            return 0
        for p in range(1, longest_cycle + 1):
            window = p + longest_cycle
            if gaps < window:
                break
            # A cycle in steady state decodes its steps' tokens: one that decodes more is
            # still working off the first k steps' backlog at full slots.
            tokens = starts[-1][1][5] - starts[-1 - p][1][5]
            if abs(tokens - p * step_tokens) > 1e-6 * p * step_tokens:
                continue
            if all(alike(i, i + p) for i in range(1, longest_cycle + 1)):
                return p * (window // p)
        return 0

    # The step's roofline (step_roofline) inlined with the weight reads kept per batch, the
    # totals in locals and the lengths floored once: the loop takes thousands of steps per
    # call and a placement search thousands of calls.
    inf = float("inf")
    floor_s, per_seq_s = costs.floor_s, costs.per_sequence_s
    kv_bytes, bandwidth = costs.kv_bytes_per_token, costs.bandwidth
    flops_token, flops_context = costs.flops_per_token, costs.attention_flops_per_context
    flop_rate = costs.flop_rate
    weight_reads: dict[float, float] = {}
    floored = [
        (tuple(max(1.0, float(x)) for x in g.lengths), max(1.0, float(g.longest))) for g in groups
    ]
    push, pop = heapq.heappush, heapq.heappop
    t_mem = t_flop = host = a = 0.0
    # Totals so far, each start's copy in ``starts``: memory, compute, floor, host, decode
    # steps, batch x steps, idle.
    s_mem = s_flop = s_floor = s_host = s_steps = s_batch = s_idle = 0.0
    settled_loop = 0  # gaps to average once the loop repeats (0: not yet)
    while not settled_loop and (warmup is None or len(starts) < warmup + measured + 1):
        while in_flight < cap and next_step <= version + k:
            lengths, longest = floored[next_index]
            gid, next_id = next_id, next_id + 1
            step_of[gid] = next_step
            left[next_step] = left.get(next_step, 0) + 1
            own_left[gid] = len(lengths)
            free_at[gid] = clock + longest
            for length in lengths:
                waiting.append((length, gid))
            if not lengths:
                push(releases, (free_at[gid], gid))
            in_flight += 1
            next_index += 1
            if next_index == per_step:
                next_step, next_index = next_step + 1, 0
        n_running = len(running)
        while n_running < walked_slots and waiting:
            length, gid = waiting.popleft()
            push(running, (clock + length, clock, gid))
            start_sum += clock
            n_running += 1
        if weights_at is None and trained in done_at:
            start = max(done_at[trained], trainer_free)
            starts.append((start, [s_mem, s_flop, s_floor, s_host, s_steps, s_batch, s_idle]))
            if (
                warmup is None
                and len(starts) > shortest
                and (
                    len(starts) > longest_warmup
                    or all(
                        abs(starts[-i][1][5] - starts[-i - 1][1][5] - step_tokens)
                        <= 0.02 * step_tokens
                        for i in (1, 2)
                    )
                )
            ):
                warmup = len(starts) - 1
            settled_loop = repeats() if stop_on_repeat else 0
            weights_at = (start + trainer_s, trained + 1)
            trainer_free = start + trainer_s + sync_s
            trained += 1
            continue
        event = weights_at[0] if weights_at is not None else inf
        freed = releases[0][0] if releases else inf
        if not n_running:
            if freed < inf:  # the group's last responses run elsewhere
                span = freed - clock
                dt = alone_dt
                busy = False
            else:
                if weights_at is None:  # cannot happen: a step in flight finishes or trains
                    break
                s_idle += max(0.0, event - now)
                now = max(now, event)
                span = 0.0
                dt = 0.0
                busy = False
        else:
            a = n_running * w
            ends = running[0][0]
            span = (ends if ends < freed else freed) - clock
            mid = clock + span / 2
            context = a * prompt_tokens + (n_running * mid - start_sum) * w
            weights = weight_reads.get(a)
            if weights is None:
                weights = weight_reads[a] = costs.weight_bytes(a)
            t_mem = (weights + context * kv_bytes) / bandwidth
            t_flop = (a * flops_token + context * flops_context) / flop_rate
            if t_mem >= t_flop:
                t_flop = 0.0
            else:
                t_mem = 0.0
            host = a * per_seq_s
            dt = t_mem + t_flop + floor_s + host
            busy = True
        if dt > 0:
            cut = span * dt > event - now
            if cut:
                span = max(0.0, (event - now) / dt)
            if busy:
                s_mem += span * t_mem
                s_flop += span * t_flop
                s_floor += span * floor_s
                s_host += span * host
                s_steps += span
                s_batch += span * a
            else:
                s_idle += span * dt
            clock += span
            now = event if cut else now + span * dt
        limit = clock + 1e-9
        freed_now: list[int] = []  # groups whose longest response has ended: released
        while running and running[0][0] <= limit:
            _, began, gid = pop(running)
            start_sum -= began
            own_left[gid] -= 1
            if own_left[gid] == 0:
                if free_at[gid] <= limit:
                    freed_now.append(gid)
                else:
                    push(releases, (free_at[gid], gid))
        while releases and releases[0][0] <= limit:
            freed_now.append(pop(releases)[1])
        for gid in freed_now:
            in_flight -= 1
            step = step_of.pop(gid)
            left[step] -= 1
            if left[step] == 0:
                done_at[step] = now
        if weights_at is not None and weights_at[0] <= now + 1e-12:
            now = max(now, weights_at[0]) + sync_s  # the engine loads the new weights
            version = weights_at[1]
            weights_at = None
    if settled_loop:
        begin = len(starts) - 1 - settled_loop
    else:
        assert warmup is not None
        begin = warmup
    first, last = starts[begin], starts[-1]
    n = len(starts) - 1 - begin
    d = [(b - a) / n for a, b in zip(first[1], last[1], strict=True)]
    # The window between two training starts holds up to k steps' work begun before it or
    # finished after it: the decode terms are scaled to one step's tokens exactly.
    scale = step_tokens / d[5] if d[5] > 0 else 1.0
    per = DecodeTerms(
        memory_s=d[0] * scale, compute_s=d[1] * scale, floor_s=d[2] * scale,
        host_s=d[3] * scale, steps=d[4] * scale, mean_batch=d[5] / d[4] if d[4] else 0.0,
        slots=slots,
    )  # fmt: skip
    return InFlightLoop(per_step=per, period_s=(last[0] - first[0]) / n, idle_s=d[6])
