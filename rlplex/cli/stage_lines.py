"""One line per estimated stage saying how it runs: where a generate, judge, train or
log-prob stage's time goes (its replicas and decode steps, its micro-batches and the terms beyond
compute), shared by ``rlplex estimate`` and its view of a config that does not fit."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from rlplex.cli.app import console


def print_stage_lines(result: Any, *, kv_room: bool = True) -> None:
    """One line per estimated generate, train or log-prob stage of ``result`` (an
    :class:`rlplex.estimate.estimator.Estimate`): how it runs, where its time goes.
    ``kv_room=False`` leaves out the KV cache's room (a config that does not fit is
    estimated with the cache its sequences need, not the one the GPU leaves)."""
    for name, est in result.stages.items():
        if est.bound == "given":
            continue
        line = None
        if est.kind == "generate" and "replicas" in est.detail:
            line = generation_line(est.detail, kv_room=kv_room)
        elif est.kind in ("train", "forward") and "micro_batches_per_rank" in est.detail:
            line = pass_line(est.detail)
        elif est.kind == "judge" and "samples_per_replica" in est.detail:
            line = judge_line(est.detail)
        if line:
            console.print(f"{escape(name)}: {line}", highlight=False, soft_wrap=True)


def generation_line(d: dict[str, Any], *, kv_room: bool = True) -> str:
    """How one generate stage runs, from its estimate's detail: where its time goes (a
    throughput-bound body or a latency-bound tail)."""
    k = max(1, int(d.get("steps_in_flight", 1)))
    text = (
        f"{d['replicas']} replica(s) of tp {d['tp']} x pp {d['pp']}; "
        f"{d['sequences_per_replica']:,} sequences each per step"
    )
    if d.get("partial_rollout"):
        text += f", streamed {d['slots']:,} at a time across steps"
    else:
        text += f", at most {d['slots']:,} running"
        if kv_room and d.get("kv_slots") is not None:
            text += f" (KV cache room for {d['kv_slots']:,})"
        text += f", {d['mean_batch']:,.0f} on average"
    steps = f"{d['decode_steps'] * k:,.0f} decode steps"
    if k > 1:
        steps += f" for {k} steps' requests decoded together, {d['decode_steps']:,.0f} per step"
    if "turns" in d:
        text = text.replace(" sequences each", " trajectories each")
        text += (
            f"; {steps} (the longest trajectory decodes {d['longest_response']:,.0f} tokens"
            f" over {d['longest_turns']:g} turns"
        )
        if d.get("clip_ratio"):
            text += f"; {d['clip_ratio']:.1%} of trajectories reach their max"
        text += f"); {d['turns']:g} turns on average"
        if d.get("turn_prefill_tokens"):
            text += f", {d['turn_prefill_tokens']:,.0f} tokens prefilled after the first"
        if d.get("env_wait_s"):
            text += f"; the longest waits {d['env_wait_s']:,.1f} s for its environment"
    else:
        text += f"; {steps} (longest response {d['longest_response']:,.0f} tokens"
        if d.get("clip_ratio"):
            text += f", {d['clip_ratio']:.1%} cut at the max"
        text += ")"
    text += f"; floor {d['step_floor_s'] * 1000:.1f} ms per decode step"
    if d.get("windowed_layers"):
        text += (
            f"; {d['windowed_layers']} of {d['attention_layers']} attention layers windowed:"
            f" their cache and attention stop at {d['sliding_window']:,} tokens a sequence"
        )
    if d.get("in_flight_weight_updates"):
        text += (
            f"; in-flight weight updates: decodes on through the trainer's"
            f" {d['trainer_s']:,.1f} s and each {d['sync_s']:,.1f} s weight load, a step every"
            f" {d['loop_period_s']:,.1f} s, idle {d['idle_s']:,.1f} s of it"
        )
    return text


def judge_line(d: dict[str, Any]) -> str:
    """How one judge stage runs, from its estimate's detail: its prompts and answers."""
    text = (
        f"{d['replicas']} replica(s) of tp {d['tp']} x pp {d['pp']}; "
        f"{d['samples_per_replica']:,} samples each per step"
    )
    if d.get("share"):
        text += f" ({d['share']:.0%} of the step's)"
    return (
        text
        + (
            f", judged {d['slots']:,} at a time; prompts of {d['judge_prompt_tokens']:,.0f} tokens"
            f" (prefill {d['prefill_s']:,.1f} s), answers of {d['answer_tokens']:,} tokens"
            f" ({d['decode_steps']:,.0f} decode steps, {d['decode_s']:,.1f} s; floor"
            f" {d['step_floor_s'] * 1000:.1f} ms per step)"
        )
        + (
            f"; woken and put back to sleep {d['reloads']:,} times ({d['reload_s']:,.1f} s)"
            if d.get("reloads")
            else ""
        )
        + (
            f"; scores each prompt's samples as {d['streams_beside']} produces them:"
            f" {d['hidden_s']:,.1f} s of its {d['judge_total_s']:,.1f} s hidden behind"
            f" {d['streams_beside']}'s {d['beside_s']:,.1f} s"
            if "streams_beside" in d
            else ""
        )
    )


_PASS_PARTS = (
    ("comm_s", "data-parallel communication {:.1f} s"),
    ("comm_exposed_s", "{:.1f} s of it beyond compute"),
    ("pipeline_bubble_s", "pipeline bubble {:.1f} s"),
    ("expert_all_to_all_s", "expert all-to-all {:.1f} s"),
    ("tp_activation_s", "tensor-parallel activations {:.1f} s"),
    ("eager_traffic_s", "eager kernels' traffic {:.1f} s"),
    ("launch_overhead_s", "launches {:.1f} s"),
    ("host_s", "host {:.1f} s"),
    ("param_offload_s", "offload {:.1f} s"),
    ("cpu_optimizer_s", "CPU optimizer {:.1f} s"),
    ("optimizer_s", "optimizer step {:.1f} s"),
)


def pass_line(d: dict[str, Any]) -> str:
    """How one forward or train stage runs, from its estimate's detail."""
    text = (
        f"{d['tokens']:,.0f} tokens on {d['devices']} GPU(s), {d['micro_batches_per_rank']:,}"
        f" micro-batches of {d['micro_batch_tokens']:,.0f} tokens per rank, {d['passes']:g}"
        f" pass(es) at efficiency {d['efficiency']:.2f}"
    )
    own = []
    if d.get("own_micro_batch_size") is not None:
        own.append(f"{d['own_micro_batch_size']} sequences")
    if d.get("own_micro_batch_tokens") is not None:
        budget = d["own_micro_batch_tokens"]
        own.append(f"{budget:,} tokens" if budget else "no token budget")
    if own:
        text += f" (its own micro-batch: {', '.join(own)})"
    if d.get("share"):
        text = f"{d['share']:.0%} of the step's samples, " + text
    if d.get("optimizer_steps"):
        text += f", {d['optimizer_steps']} optimizer step(s)"
    parts = [fmt.format(d[key]) for key, fmt in _PASS_PARTS if d.get(key, 0.0) >= 0.05]
    if d.get("straggler", 1.0) > 1.005:
        parts.append(f"busiest data-parallel rank x{d['straggler']:.2f}")
    if d.get("controller_s", 0.0) >= 0.05:
        parts.append(
            f"controller {d['controller_gb']:,.1f} GB both ways"
            f" ({d['controller_padded_tokens']:,.0f} tokens a sequence) {d['controller_s']:.1f} s"
        )
    return text + (f"; {', '.join(parts)}" if parts else "")
