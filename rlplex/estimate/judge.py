"""A generative judge: the seconds of an LLM-as-a-judge reward on its engine.

A judge does not score a sample in one forward pass as a reward model does: it reads each
sample (its prompt and response) inside a template and writes a short answer (ROLL's
``LLMJudgeRewardWorker`` asks for ``YES`` or ``NO``). :func:`estimate_judge` prices that as
generation over the judge prompts on the role's engine: every judge prompt prefilled
(compute-bound, at the efficiency of a prefill chunk of the prompts running together), then
the answers decoded under continuous batching, at most ``rollout.max_num_seqs`` at a time
(ROLL's local judge generates one sample per call: 1), each step at least the engine's
per-step floor (CUDA graphs or eager). The prefill writes an answer's first token, so an
answer of ``judge.response_tokens`` takes one decode step fewer; every answer is as long, so
there is no length tail; the replicas split the samples evenly. A judge that sleeps between
calls (``judge.reload_every``) copies its weights back and out again around each call.

A judge that streams (``judge.streams``: ROLL scores each prompt's samples as soon as they
are generated) works while the rollout runs on other GPUs: :func:`streamed_judge` keeps of
its seconds what the rollout's do not cover, and at least its last call (a queue fed
throughout the generation: the backlog at its end, or the last arrival's own service).
"""

from __future__ import annotations

import math

from rlplex.dag.stage import Stage
from rlplex.estimate import formulas as f
from rlplex.estimate.context import (
    PREFILL_CHUNK_TOKENS,
    Context,
    RoleEstimate,
    StageEstimate,
    combine_terms,
    efficiency_value,
    engine_replicas,
    fp8_speedup,
    stored_precision,
    tokens_factor,
    trajectory_lengths,
)
from rlplex.estimate.decode import simulate_decode
from rlplex.estimate.generation import engine_step_costs
from rlplex.estimate.states import generate_transient_gb
from rlplex.resources.cluster import Role
from rlplex.resources.inputs import Rollout


def estimate_judge(ctx: Context, stage: Stage, role: Role, est: RoleEstimate) -> StageEstimate:
    """Prefill of every judge prompt plus the decode of every answer, on the busiest
    replica (see the module docstring). Terms: compute (prefill, and decode steps bound by
    FLOPs), memory (decode steps bound by reading weights and KV cache), latency (the
    per-step floor over every prefill and decode step), overhead (host time per running
    sequence; waking the engine and copying its weights in and out around each call)."""
    w = ctx.inputs.workload
    judge = stage.judge
    assert w is not None and judge is not None
    spec = ctx.spec(role)
    rollout = role.rollout or Rollout()
    # The judge reads the whole sample: its prompt and everything after it (a trajectory's
    # answers and observations).
    context = judge.template_tokens + w.prompt_tokens.mean + trajectory_lengths(ctx).mean
    replicas = engine_replicas(ctx, role)
    per_replica = math.ceil(w.generated() * stage.share / replicas)
    costs, kv_slots = engine_step_costs(ctx, stage, role, est, context + judge.response_tokens / 2)
    slots = max(1, min(rollout.max_num_seqs, kv_slots, per_replica))
    group = est.tp * est.pp
    # A prefill chunk holds the prompts that start together: one judge prompt at a time
    # runs matmuls of its own tokens only (tokens_factor), as a small micro-batch does.
    chunk = min(PREFILL_CHUNK_TOKENS, slots * context)
    flops = f.forward_flops(spec, context) * per_replica
    matmul = f.token_flops(spec) * context * per_replica
    prefill_s = (flops - matmul * (1 - 1 / fp8_speedup(ctx, role))) / (
        group * costs.flop_rate * tokens_factor(ctx, chunk)
    )
    # The prefill's forward pass writes the answer's first token: the rest are decode steps
    # (a YES and its end-of-sequence token: one). Each prefill is an engine step of its own
    # and pays the step's floor too (scheduling, launches, sampling).
    decoded = judge.response_tokens - 1
    lengths = [float(decoded)] * per_replica if decoded else []
    dec = simulate_decode(lengths, context + 1, slots, costs)
    prefill_steps = math.ceil(per_replica * context / chunk)
    # A judge that sleeps between calls (ROLL's, after each prompt's samples) wakes its
    # engine and copies its weights back before every call, and out again after it.
    reloads = math.ceil(per_replica / judge.reload_every) if judge.reload_every else 0
    weights_gb = role.states.get("weights", est.states.get("weights", 0.0))
    reload_s = reloads * (
        efficiency_value(ctx.inputs.efficiency, "engine_switch_s")
        + 2.0 * weights_gb / ctx.inputs.cluster.host_gb_per_s
    )
    terms = {
        "compute": prefill_s + dec.compute_s,
        "memory": dec.memory_s,
        "latency": dec.floor_s + prefill_steps * costs.floor_s,
        "overhead": dec.host_s + reload_s,
    }
    answers = decoded * per_replica
    # One call: the samples between a wake and a sleep (or one), on one replica.
    call = judge.reload_every or 1
    call_s = sum(terms.values()) * min(call, per_replica) / max(per_replica, 1)
    return combine_terms(
        stage, "judge", terms,
        flops=(flops + answers * costs.flops_per_token * group) * replicas,
        bytes=dec.steps * costs.weight_bytes(dec.mean_batch) * group * replicas,
        memory_gb=generate_transient_gb(spec, stored_precision(role.precision), est.tp, est.pp),
        detail={
            "replicas": replicas, "tp": est.tp, "pp": est.pp,
            "samples_per_replica": per_replica, "judge_prompt_tokens": round(context, 1),
            "answer_tokens": judge.response_tokens, "slots": slots,
            "kv_slots": kv_slots, "decode_steps": dec.steps, "prefill_s": prefill_s,
            "prefill_steps": prefill_steps, "decode_s": dec.total_s,
            "step_floor_s": costs.floor_s, "reloads": reloads, "reload_s": reload_s,
            "call_s": call_s,
            **({"share": stage.share} if stage.share != 1.0 else {}),
        },
    )  # fmt: skip


def streamed_judge(est: StageEstimate, generate_s: float, generate: str) -> StageEstimate:
    """``est`` (a streaming judge's whole work) as the step sees it after a rollout of
    ``generate_s`` seconds on other GPUs (stage ``generate``): the judge's backlog when the
    rollout ends, ``seconds - generate_s``, but never less than its last call
    (``call_s``). Every term is scaled alike; the detail says what was hidden."""
    total = est.seconds or 0.0
    kept = min(total, max(float(est.detail.get("call_s", 0.0)), total - generate_s))
    scale = kept / total if total > 0 else 1.0
    terms = {k: v * scale for k, v in est.terms.items()}
    detail = {
        **est.detail, "streams_beside": generate, "beside_s": generate_s,
        "judge_total_s": total, "hidden_s": total - kept,
    }  # fmt: skip
    return est.model_copy(update={"seconds": kept, "terms": terms, "detail": detail})
