"""Generation: the seconds of a rollout stage on its engines.

Prefill and decode under continuous batching (:mod:`~rlplex.estimate.decode`):
each decode step costs the larger of the weights' and KV cache's read and the
compute, and never less than the per-step floor (layers, tensor-parallel
all-reduces within or across nodes, CUDA graphs or eager); the step waits for
the slowest replica's longest response. In-flight (streaming) rollouts are
priced per turn of the trainer they run beside; :func:`generate_seconds_at` and
:func:`generate_bound_at` give the planner those seconds for a placement.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlplex.dag.pipeline import Pipeline
from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.context import (
    Context,
    Inputs,
    RoleEstimate,
    StageEstimate,
    combine_terms,
    efficiency_value,
    engine_replicas,
    fp8_speedup,
    kv_precision,
    missing_inputs,
    partial_rollout_inactive,
    spans_nodes,
    stage_factor,
    stored_precision,
    stream_mode,
    streaming_field,
    trajectory_lengths,
    weight_precision,
    width_factor,
)
from rlplex.estimate.decode import (
    IN_FLIGHT_MAX_SEQUENCES,
    PromptGroup,
    StepCosts,
    simulate_decode,
    simulate_in_flight,
    stream_decode,
)
from rlplex.estimate.lengths import LengthDistribution
from rlplex.estimate.specs import ModelSpec
from rlplex.estimate.states import generate_transient_gb, role_states, steps_held
from rlplex.estimate.turns import multi_turn
from rlplex.resources.cluster import Role
from rlplex.resources.inputs import Rollout


def _decode_floor(ctx: Context, spec: ModelSpec, role: Role, tp: int, pp: int) -> float:
    """Fixed seconds of one decode step: scheduling and sampling, every layer's small kernels,
    eager launches, all-reduces, and an engine's messages between hosts when it spans them.

    A pipeline-parallel engine keeps pp micro-batches in flight, each through every stage
    once per step: each device runs its stage's layers pp times a step, so the per-layer
    latencies count every layer, as without pp, plus pp hand-offs."""
    eff = ctx.inputs.efficiency
    rollout = role.rollout or Rollout()
    floor = efficiency_value(eff, "decode_step_s")
    # Every layer's small kernels (norms, rotary, cache writes, activations; MoE routing and
    # sorting) take a few microseconds each even replayed from a CUDA graph; a hybrid's block
    # that is a mixer or an MLP alone runs half a layer's.
    floor += efficiency_value(eff, "decode_layer_s") * spec.layer_units
    if spec.is_moe:
        floor += efficiency_value(eff, "decode_moe_layer_s") * spec.moe_layers
    if not rollout.cuda_graphs:
        # Each layer's kernels issued from Python; MoE and MLA layers issue more of them.
        floor += efficiency_value(eff, "eager_layer_s") * f.eager_layers(spec)
    if role.lora is not None:
        # An engine serving adapters runs vLLM's LoRA kernels (a buffer, a shrink and an
        # expand per wrapped linear layer) beside every layer's own small kernels.
        kernels = f.lora_decode_kernels(rollout.vllm_v0) * spec.layer_units
        floor += efficiency_value(eff, "decode_layer_s") / f.DECODE_LAYER_KERNELS * kernels
        if not rollout.cuda_graphs:
            floor += efficiency_value(eff, "eager_layer_s") / f.EAGER_LAYER_OPERATORS * kernels
    group = tp * pp

    def latency(gpus: int) -> float:
        key = "allreduce_inter_node_s" if spans_nodes(ctx, gpus) else "allreduce_s"
        return efficiency_value(eff, key)

    if tp > 1:  # one per mixer and MLP, within the tp group, whatever the stages span
        floor += spec.sublayers * latency(tp)
    if pp > 1:
        floor += pp * latency(group)
    if group > ctx.inputs.cluster.gpus_per_node:
        floor += efficiency_value(eff, "cross_host_step_s")
    ep = role.parallel.ep if role.parallel else 1
    if spec.is_moe and ep > 1:  # dispatch and combine all-to-all per MoE layer
        # Over the expert-parallel group, which may span more GPUs than one replica's tp x pp.
        floor += 2 * spec.moe_layers * latency(max(group, ep))
    return floor


def _weight_reader(
    spec: ModelSpec,
    precision: str,
    group: int,
    state_bytes: float = 0.0,
    window_bytes: float = 0.0,
) -> Callable[[float], float]:
    """Bytes one device moves per decode step of ``b`` sequences besides their growing KV
    cache (computed once per role): the weights (MoE: the experts the batch touches), each
    sequence's linear-attention state (``state_bytes`` per device), read and written back,
    and its windowed layers' cache (``window_bytes`` per device), read."""
    states = 2.0 * state_bytes + window_bytes
    # An untied embedding is looked up: each sequence's row (decode_weight_bytes).
    row = 0.0 if spec.tied_embeddings else spec.hidden_size * f.BYTES_PER_ELEMENT[precision]
    per_sequence = states + row / group
    if not spec.is_moe:
        dense = (f.decode_weight_bytes(spec, 1, precision) - row) / group
        return lambda b: dense + b * per_sequence
    everything = f.decode_weight_bytes(spec, 1e9, precision) - min(1e9, spec.vocab_size) * row
    one = f.decode_weight_bytes(spec, 1, precision) - row
    touched_one = f.expected_experts_touched(spec, 1)
    per_expert = (everything - one) / max(spec.num_experts - touched_one, 1e-9)
    base = one - touched_one * per_expert

    def read(b: float) -> float:
        touched = f.expected_experts_touched(spec, b) * per_expert
        return (base + touched) / group + b * per_sequence

    return read


def engine_step_costs(
    ctx: Context, stage: Stage, role: Role, est: RoleEstimate, running_context: float
) -> tuple[StepCosts, int]:
    """What one decode step of the role's engine costs (:class:`StepCosts`), and how many
    sequences of ``running_context`` tokens on average its KV cache holds at once."""
    spec = ctx.spec(role)
    eff_in = ctx.inputs.efficiency
    rollout = role.rollout or Rollout()
    factor = stage_factor(eff_in, stage.name)
    eff_prefill = efficiency_value(eff_in, "prefill") * factor * width_factor(ctx, spec)
    eff_decode = efficiency_value(eff_in, "decode") * factor
    tp, pp = est.tp, est.pp
    group = tp * pp
    per_token = f.kv_bytes_per_token(spec, kv_precision(role), tp, pp)
    state = f.linear_state_bytes(spec, stored_precision(role.precision), tp, pp)
    kv_gb = role.states.get("kv_cache", est.states.get("kv_cache", 0.0))
    # A windowed layer's cache and attention stop growing at its window: per running
    # sequence a fixed read (at the mean running context, at most the window), like a
    # linear-attention state.
    window_kv = f.window_kv_bytes(spec, running_context, kv_precision(role), tp, pp)
    window_keys = spec.sliding_window_layers * min(running_context, spec.sliding_window)
    kv_slots = int(kv_gb * f.GB // max(running_context * per_token + state + window_kv, 1.0))
    costs = StepCosts(
        # A pipeline-parallel engine's step passes every stage: each device reads its
        # 1/(tp x pp) of the weights once per micro-batch in flight (pp of them), so a
        # step's weight reads cost W / tp per device, as without pp (KV and FLOPs split).
        weight_bytes=_weight_reader(spec, weight_precision(ctx, role), tp, state, window_kv),
        kv_bytes_per_token=per_token,
        flops_per_token=(f.token_flops(spec) + 2.0 * f.decode_attention_width(spec) * window_keys)
        / group,
        attention_flops_per_context=(
            2.0 * f.decode_attention_width(spec) * spec.full_attention_layers / group
        ),
        bandwidth=ctx.gpu.memory_gb_per_s * 1e9 * eff_decode,
        flop_rate=ctx.gpu.peak_tflops * 1e12 * eff_prefill,
        floor_s=_decode_floor(ctx, spec, role, tp, pp),
        per_sequence_s=efficiency_value(
            eff_in, "decode_sequence_v0_s" if rollout.vllm_v0 else "decode_sequence_s"
        ),
    )
    return costs, kv_slots


def in_flight_turn(
    pipeline: Pipeline, stage: Stage, seconds_of: Callable[[Stage], float | None]
) -> tuple[float, float]:
    """(trainer seconds, sync seconds) of one step as an engine with in-flight weight updates
    sees them: every GPU stage after ``stage`` and before the last weight sync into its role,
    one after another (NeMo RL's trainer runs its log-prob passes and its training in turn;
    its rewards are scored in the collector, beside generation), and that sync. Without a
    sync into the role the engine never receives weights: every later GPU stage, no pause.
    ``seconds_of`` gives a stage's seconds, None for a stage that is not the trainer's
    (a CPU or driver stage): it counts 0."""
    by_name = {s.name: s for s in pipeline.stages}
    later: set[str] = set()
    frontier = [stage.name]
    while frontier:
        name = frontier.pop()
        for s in pipeline.stages:
            if name in s.after and s.name not in later:
                later.add(s.name)
                frontier.append(s.name)
    syncs = [s for s in pipeline.stages if s.is_weight_sync and s.to_role == stage.role]
    syncs = [s for s in syncs if s.name in later]
    if not syncs:
        return sum(seconds_of(by_name[n]) or 0.0 for n in sorted(later)), 0.0
    # The last sync into the role: the one no other sync into it comes after.
    sync = next(s for s in reversed(syncs) if not any(s.name in _before(pipeline, o.name)
                                                      for o in syncs))  # fmt: skip
    between = sorted((later & _before(pipeline, sync.name)) - {stage.name})
    return sum(seconds_of(by_name[n]) or 0.0 for n in between), seconds_of(sync) or 0.0


def _before(pipeline: Pipeline, name: str) -> set[str]:
    """Names of every stage that ``name`` waits for, directly or not."""
    by_name = {s.name: s for s in pipeline.stages}
    before: set[str] = set()
    frontier = [name]
    while frontier:
        for other in by_name[frontier.pop()].after:
            if other not in before:
                before.add(other)
                frontier.append(other)
    return before


@functools.lru_cache(maxsize=256)
def prompt_groups(
    dist: LengthDistribution, prompts: int, samples: int, replicas: int, slots: int
) -> tuple[tuple[PromptGroup, ...], float]:
    """One step's prompt groups as one of ``replicas`` engines sees them, and how many
    sequences each walked one stands for (:func:`decode.simulate_in_flight`).

    NeMo RL sends each response of a group to the next engine in turn, so a replica holds
    ``samples / replicas`` responses of each group (the nearest whole number, at least one:
    with fewer samples than replicas each of its responses stands for a group of its own;
    ``stands_for`` makes up the fraction), and the group frees its place when its longest of
    ``samples`` responses ends. The replica's own responses are the distribution's
    representative lengths, evenly spread; the group's others, elsewhere, a second such set.
    A replica of more than :data:`~decode.IN_FLIGHT_MAX_SEQUENCES` sequences is walked at
    fewer groups, each sequence standing for several (their count rounded so that
    ``slots / stands_for`` comes out near a whole number)."""
    per_replica = math.ceil(prompts * samples / replicas)
    share = samples / replicas
    own = max(1, round(share))
    here = prompts if share >= 1 else per_replica  # groups with a response on this replica
    walked = min(here, max(1, IN_FLIGHT_MAX_SEQUENCES // own))
    if walked < here:
        walked_slots = max(1, round(slots * walked * own / per_replica))
        walked = min(here, max(1, math.ceil(per_replica * walked_slots / (slots * own))))
    mine = dist.lengths(walked * own)
    elsewhere = samples - own
    others = dist.lengths(walked * elsewhere) if elsewhere > 0 else []
    groups = tuple(
        PromptGroup(
            lengths=tuple(mine[i * own : (i + 1) * own]),
            longest=max(
                mine[i * own : (i + 1) * own] + others[i * elsewhere : (i + 1) * elsewhere]
            ),
        )
        for i in range(walked)
    )
    return groups, per_replica / (walked * own)


TURN_STEP = 1.005
"""The trainer's turn and the sync an in-flight loop is simulated with are taken on a
geometric grid of this ratio (within 0.25 %), so that a placement search that meets the same
turn again reuses the loop (:func:`in_flight_grid`)."""


def in_flight_grid(turn: tuple[float, float]) -> tuple[float, float]:
    """``turn`` (trainer seconds, sync seconds) on the :data:`TURN_STEP` grid."""
    return tuple(  # type: ignore[return-value]
        0.0 if v <= 0 else TURN_STEP ** round(math.log(v) / math.log(TURN_STEP)) for v in turn
    )


def streams_in_flight(ctx: Context, role: Role) -> bool:
    """Whether ``role``'s engine keeps decoding through weight syncs here."""
    mode = stream_mode(role.name, ctx.inputs.roles, ctx.inputs.pipeline)
    return mode == "in_flight_weight_updates"


def estimate_generate(
    ctx: Context,
    stage: Stage,
    role: Role,
    est: RoleEstimate,
    turn: tuple[float, float] = (0.0, 0.0),
    *,
    throughput_bound: bool = False,
) -> StageEstimate:
    """Prefill (compute-bound) plus decode under continuous batching (:mod:`decode`).

    The replica that gets the step's longest response decides when the stage
    ends, unless the engine streams across steps: with ``rollout.partial_rollout``
    its slots stay full and each sync's interrupted sequences are prefilled
    again; with ``rollout.in_flight_weight_updates`` the collector's loop is
    simulated with the trainer's ``turn`` (:func:`in_flight_turn`: its seconds
    and the sync's), and the stage is the engine's decoding per step. Terms:
    compute (prefill, and decode steps bound by FLOPs), memory (decode steps
    bound by reading weights and KV cache), latency (the per-step floor over
    every decode step), overhead (host time per running sequence).

    ``throughput_bound``: an in-flight engine is priced at its steady state instead of
    simulated (every step at full slots, each sequence at the token-weighted mean context):
    what its loop averages at best, whatever the trainer's turn (:func:`generate_bound_at`).
    """
    w = ctx.inputs.workload
    assert w is not None
    spec = ctx.spec(role)
    eff_in = ctx.inputs.efficiency
    rollout = role.rollout or Rollout()
    factor = stage_factor(eff_in, stage.name)
    width = width_factor(ctx, spec)
    eff_prefill = efficiency_value(eff_in, "prefill") * factor * width
    eff_decode = efficiency_value(eff_in, "decode") * factor
    tp, pp = est.tp, est.pp
    group = tp * pp
    replicas = engine_replicas(ctx, role)
    n = w.generated()
    generated_prompts = w.generated_prompts()
    per_replica = math.ceil(n / replicas)
    peak = ctx.gpu.peak_tflops * 1e12
    prompt = w.prompt_tokens
    dist = trajectory_lengths(ctx)
    turns = multi_turn(w)
    prefill_flops = (f.forward_flops(spec, prompt.mean) + turns.prefill_flops(spec)) * per_replica
    prefill_matmul = f.token_flops(spec) * (prompt.mean + turns.prefill_tokens)
    prefill_matmul *= per_replica
    prefill_s = (prefill_flops - prefill_matmul * (1 - 1 / fp8_speedup(ctx, role))) / (
        group * peak * eff_prefill
    )
    # The engine decodes a trajectory's answers only: its observations are prefilled.
    decoded = dist.scaled(w.generated_share())
    # An async pipeline whose generation runs k steps ahead feeds the engine k steps'
    # requests at once (NeMo RL's trajectory collector admits prompts_per_step x
    # max_trajectory_age_steps prompt groups), so continuous batching shares one tail among
    # k steps: decode k steps' sequences together and charge a step its 1/k.
    mode = stream_mode(role.name, ctx.inputs.roles, ctx.inputs.pipeline)
    streams = mode == "partial_rollout"
    in_flight = mode == "in_flight_weight_updates"
    depth = 1 if mode is not None else steps_held(ctx, role)
    lengths = decoded.lengths(per_replica * depth)
    # The slowest replica holds the step's longest response.
    longest = decoded.longest_of(n * depth)
    if lengths and longest > max(lengths):
        lengths[lengths.index(max(lengths))] = longest
    running_context = prompt.mean + dist.mean_square() / (2 * max(dist.mean, 1.0))
    # What a decoding sequence holds besides its own answers: its prompt, and a trajectory's
    # observations so far (half of them on average over its turns).
    base_context = prompt.mean + turns.observation_context
    costs, kv_slots = engine_step_costs(ctx, stage, role, est, running_context)
    slots = max(1, min(rollout.max_num_seqs, kv_slots))
    resumed_s = 0.0
    loop_detail: dict[str, Any] = {}
    held = 0.0  # trajectories an engine that streams holds at once (its steady state)
    if streams:
        # A streaming engine: no tail, but the sequences a weight sync interrupts are prefilled
        # again afterwards (their KV cache was computed with the old weights and freed).
        held = per_replica * steps_held(ctx, role)
        slots = max(1, min(slots, held))
        dec = stream_decode(per_replica * decoded.mean, running_context, slots, costs)
        resumed_flops = slots * f.forward_flops(spec, running_context)
        resumed_matmul = f.token_flops(spec) * running_context * slots
        resumed_s = (resumed_flops - resumed_matmul * (1 - 1 / fp8_speedup(ctx, role))) / (
            group * peak * eff_prefill
        )
        prefill_flops += resumed_flops
    elif in_flight and throughput_bound:
        # The loop's own inputs (its walked responses, each standing for ``stands_for``, and
        # its walked slots), so that the bound differs from it by the dynamics alone.
        k = max(1, ctx.inputs.pipeline.staleness)
        held = per_replica * k
        slots = max(1, min(slots, held))
        groups, stands_for = prompt_groups(decoded, generated_prompts,
                                           w.samples_per_prompt, replicas, slots)  # fmt: skip
        walked = [max(1.0, float(x)) for g in groups for x in g.lengths]
        full = max(1, round(slots / stands_for)) * stands_for
        context = base_context + sum(x * x for x in walked) / (2 * sum(walked))
        dec = stream_decode(stands_for * sum(walked), context, full, costs)
    elif in_flight:
        k = max(1, ctx.inputs.pipeline.staleness)
        slots = max(1, min(slots, per_replica * k))
        groups, stands_for = prompt_groups(decoded, generated_prompts,
                                           w.samples_per_prompt, replicas, slots)  # fmt: skip
        loop = simulate_in_flight(
            groups, base_context, slots, k, *in_flight_grid(turn), costs, stands_for
        )
        dec = loop.per_step
        loop_detail = {
            "in_flight_weight_updates": True, "trainer_s": turn[0], "sync_s": turn[1],
            "loop_period_s": loop.period_s, "idle_s": loop.idle_s,
        }  # fmt: skip
    else:
        dec = simulate_decode(lengths, base_context, slots, costs).per_step(depth)
    # Trajectories wait for their environment between turns. A step that waits for its
    # longest trajectory (in-flight updates too: the simulated loop keeps its tail) waits for
    # that one's environment, turn after turn; an engine at its steady state (streaming, or
    # in-flight's throughput bound) hides the waits behind other trajectories' decoding only
    # as far as it holds enough of them (Little's law).
    if held:
        env_wait_s = turns.streamed_wait_s(dec.total_s, per_replica, dec.slots, held)
    else:
        env_wait_s = turns.env_wait_s(longest) / depth
    terms = {
        "compute": prefill_s + resumed_s + dec.compute_s,
        "memory": dec.memory_s,
        "latency": dec.floor_s + env_wait_s,
        "overhead": dec.host_s,
    }
    response_tokens = sum(lengths) / depth
    return combine_terms(
        stage, "generate", terms,
        flops=(prefill_flops + response_tokens * costs.flops_per_token * group) * replicas,
        bytes=dec.steps * costs.weight_bytes(dec.mean_batch) * group * replicas,
        memory_gb=generate_transient_gb(spec, stored_precision(role.precision), tp, pp),
        detail={
            "replicas": replicas, "tp": tp, "pp": pp, "sequences_per_replica": per_replica,
            "slots": dec.slots, "kv_slots": kv_slots, "mean_batch": round(dec.mean_batch, 2),
            "decode_steps": dec.steps, "longest_response": longest,
            "clip_ratio": round(dist.clip_ratio, 6), "prefill_s": prefill_s,
            "partial_rollout": streams, "resumed_prefill_s": resumed_s,
            "steps_in_flight": depth,
            "decode_s": dec.total_s, "step_floor_s": costs.floor_s,
            "eff_prefill": eff_prefill, "eff_decode": eff_decode, **loop_detail,
            **turns.detail(longest, env_wait_s),
            **({"windowed_layers": spec.sliding_window_layers,
                "attention_layers": spec.attention_layers,
                "sliding_window": spec.sliding_window} if spec.sliding_window_layers else {}),
        },
    )  # fmt: skip


def streaming_flips(config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]) -> bool:
    """Whether a partial-rollout engine's generation streams on ``devices`` (role -> devices)
    but not on the config's own placement, or the other way round: a colocated candidate of a
    split config, or a split one of a colocated config, is then priced again
    (:func:`generate_seconds_at`) rather than scaled."""
    role = config.roles.get(stage.role or "")
    if role is None or streaming_field(role) is None:
        return False
    placed = {
        n: r.with_devices(tuple(devices[n])) if n in devices else r for n, r in config.roles.items()
    }
    here = partial_rollout_inactive(role.name, placed, config.pipeline) is None
    return here != (partial_rollout_inactive(role.name, config.roles, config.pipeline) is None)


def trainer_seconds(config: Any, stage: Stage) -> float | None:
    """A stage's seconds as :func:`in_flight_turn` counts them: a GPU stage's or a weight
    sync's, None for a CPU or driver stage."""
    role = config.roles.get(stage.role or "")
    if stage.is_weight_sync or (role is not None and role.is_gpu):
        return stage.seconds
    return None


def in_flight_at(config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]) -> bool:
    """Whether generation ``stage``'s engine decodes through weight syncs (in-flight weight
    updates) with the roles on ``devices`` (role -> devices)."""
    role = config.roles.get(stage.role or "")
    if role is None or streaming_field(role) != "in_flight_weight_updates":
        return False
    placed = {
        n: r.with_devices(tuple(devices[n])) if n in devices else r for n, r in config.roles.items()
    }
    return stream_mode(role.name, placed, config.pipeline) == "in_flight_weight_updates"


def generate_seconds_at(
    config: Any,
    stage: Stage,
    devices: Mapping[str, Sequence[int]],
    turn: tuple[float, float] | None = None,
    *,
    throughput_bound: bool = False,
) -> float | None:
    """A generation stage's estimated seconds with the roles on ``devices`` (role -> devices);
    None when it cannot be estimated. ``turn``: the trainer's turn an engine with in-flight
    weight updates sees (:func:`in_flight_turn`; default: as the config's seconds give it).
    ``throughput_bound``: such an engine's steady state instead of its loop
    (:func:`generate_bound_at`)."""
    roles = {
        n: r.with_devices(tuple(devices[n])) if n in devices else r for n, r in config.roles.items()
    }
    name = stage.role or ""
    if name not in roles:
        return None
    if config.is_estimated(f"roles.{name}.states"):
        roles[name] = roles[name].model_copy(update={"states": {}})
    inputs = Inputs.of_config(config, roles)
    if missing_inputs(inputs):
        return None
    try:
        ctx = Context(inputs)
        est = role_states(ctx, roles[name])
        role = roles[name].model_copy(update={"states": dict(roles[name].states or est.states)})
        if turn is None and not throughput_bound:  # as the config's seconds give it
            turn = in_flight_turn(config.pipeline, stage, lambda s: trainer_seconds(config, s))
        return estimate_generate(
            ctx, stage, role, est, turn or (0.0, 0.0), throughput_bound=throughput_bound
        ).seconds
    except ConfigError:
        return None


def generate_bound_at(
    config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]
) -> float | None:
    """What an in-flight engine's generation costs a step at least, on ``devices``, whatever
    the trainer's turn: its prefill plus one step's tokens decoded at full slots, each running
    sequence at the token-weighted mean context (a sequence of ``L`` tokens holds on average
    its prompt plus ``E[L^2] / 2E[L]`` while it decodes). The loop
    (:func:`decode.simulate_in_flight`) runs fewer sequences while it drains, and a step of
    fewer costs each token more (the weights and the floor are shared by fewer), so it
    averages no less: the bound takes the loop's own walked responses and slots, so the two
    differ by the dynamics and by the loop's measuring window alone, which
    :data:`IN_FLIGHT_BOUND_SLACK` covers. A placement search ranks and prunes candidates
    with it: milliseconds where the loop takes a simulation per trainer turn. None where it
    cannot be estimated."""
    seconds = generate_seconds_at(config, stage, devices, throughput_bound=True)
    return None if seconds is None else seconds * (1.0 - IN_FLIGHT_BOUND_SLACK)


IN_FLIGHT_BOUND_SLACK = 0.01
"""Share :func:`generate_bound_at` takes off the steady state: the loop averages a window of
whole steps, whose tokens may sit a little earlier in their responses (less KV cache) than
the steady state's. A review's scratch scripts (2026-11-25) found the steady state at most
0.062 % above the loop over about 9,000 loops: the published NeMo RL configs' engines at
several sizes and trainer turns, and random workloads with k from 1 to 8."""
