"""What an estimate assumed, said out loud, and what would make a role fit.

:func:`assumptions` lists every figure an estimate took from a default rather
than the config (lengths, kernels, precisions, sharding, the sync's mechanism)
so that ``rlplex estimate`` prints it; :func:`state_remedy` and
:func:`activation_remedy` name the knob that would shrink a state that does not
fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlplex.dag.stage import Stage
from rlplex.estimate import formulas as f
from rlplex.estimate.context import (
    PREFILL_CHUNK_TOKENS,
    Context,
    RoleEstimate,
    StageEstimate,
    efficiency_value,
    layer_kernels,
    lora_params,
    optimizer_kernel,
    stored_precision,
    stream_mode,
    trajectory_lengths,
    uses_cpu_optimizer,
)
from rlplex.estimate.specs import efficiency_defaults
from rlplex.resources.cluster import Role
from rlplex.resources.inputs import Rollout

ACTIVATION_KNOBS = (
    "parallel.recompute, workload.micro_batch_size or its token budget workload.micro_batch_tokens"
)
"""What lowers a pass's activations, for the remedies that name them."""


def activation_remedy(role: Role, stage: Stage | None = None) -> str:
    """What would make a stage's activations fit on its role's GPUs (recomputation only
    where it is off; the micro-batch that sets them: ``stage``'s own where it gives one, a
    forward pass's log-prob settings, else the workload's). A micro-batch holds at least its
    longest sequence, so a budget alone cannot shrink a long one: splitting each sequence
    (``sp``) or the model (``tp``) can."""
    recompute = role.parallel is not None and role.parallel.recompute
    first = "" if recompute else f"turn on roles.{role.name}.parallel.recompute, "
    if stage is not None and (
        stage.micro_batch_size is not None or stage.micro_batch_tokens is not None
    ):
        own = f"pipeline.stages.{stage.name}"
        knob = f"{own}.micro_batch_size (or its token budget, {own}.micro_batch_tokens)"
    elif stage is not None and stage.kind != "train":
        knob = (
            "workload.logprob_micro_batch_size (or its token budget,"
            " workload.logprob_micro_batch_tokens; unset, the training ones)"
        )
    else:
        knob = "workload.micro_batch_size (or its token budget, workload.micro_batch_tokens)"
    return (
        f"{first}lower {knob}, split each sequence over sequence-parallel ranks"
        f" (roles.{role.name}.parallel.sp), or split the model (tp)"
    )


def _data_parallel(role: Role) -> int | None:
    """A trained role's data-parallel ranks as its devices and parallel sizes give them
    (``parallel.dp``, else devices / (tp x pp)); None without devices."""
    par = role.parallel
    if par is not None and par.dp:
        return par.dp
    if not role.devices:
        return None
    split = ((par.tp or 1) * par.pp) if par is not None else 1
    return max(1, len(role.devices) // split)


def group_remedy(role: Role, factor: float | None = None) -> str:
    """What would shrink a hybrid-sharded role's (``parallel.shard_group``) sharded states:
    a larger group that divides its data-parallel ranks (the smallest one at least
    ``factor`` times the group, when that is known), or, when even every rank is too few,
    sharding over all of them on more GPUs. More GPUs alone do not help: the states split
    over the group whatever the role's size."""
    par = role.parallel
    assert par is not None and par.shard_group is not None
    group, dp = par.shard_group, _data_parallel(role)
    field = f"roles.{role.name}.parallel.shard_group"
    if dp is None:
        return f"raise {field} above {group} (the states split over that many ranks only)"
    need = group * (factor if factor is not None else 1.0)
    larger = [g for g in range(group + 1, dp + 1) if dp % g == 0 and g >= need - 1e-9]
    if larger:
        return (
            f"raise {field} from {group} to {larger[0]} (the states split over that many"
            f" of its {dp} data-parallel ranks; more GPUs alone do not shrink them)"
        )
    return (
        f"shard over all {dp} data-parallel ranks (drop {field}: {group}) and give"
        f" roles.{role.name} {need / dp:.1f}x the GPUs"
    )


def group_factor(
    role: Role, states: Mapping[str, float], transient_gb: float, cap: float
) -> float | None:
    """How many times larger a hybrid-sharded role's group must be for ``states`` (GB per
    device) and ``transient_gb`` to fit in ``cap``: only the states its sharding splits
    over the group shrink (FSDP / ZeRO-3 all three, ZeRO-2 grads and optimizer, ZeRO-1 the
    optimizer). None when the rest alone does not fit (no group helps)."""
    par = role.parallel
    zero = 3 if par is not None and par.fsdp else (par.zero if par is not None else 0)
    levels = {"weights": 3, "grads": 2, "optimizer": 1}
    split = sum(gb for k, gb in states.items() if zero >= levels.get(k, 4))
    rest = sum(states.values()) - split + transient_gb
    if split <= 0 or rest >= cap:
        return None
    return split / (cap - rest)


def state_remedy(role: Role, state: str, factor: float | None = None) -> str:
    """What would make a role's ``state`` fit on its GPUs: sharding it where it is not, else
    more GPUs; LoRA for a trained role's gradients or optimizer state. ``factor``: how many
    times too large it is, when known (said as how much further to split)."""
    par = role.parallel
    sharded = {"weights": 3, "grads": 2, "optimizer": 1}.get(state)
    by = f" {factor:.1f}x further" if factor is not None else ""
    grouped = sharded is not None and par is not None and par.shard_group is not None
    if sharded is not None and not (par and (par.fsdp or par.zero >= sharded)):
        text = (
            f"shard it over data-parallel ranks (roles.{role.name}.parallel: zero: {sharded}"
            f" or fsdp: true), or split the model (tp, pp){by}"
        )
    elif grouped:
        # Hybrid sharding splits it over a group, not over every GPU: a larger group first.
        text = group_remedy(role, factor) + ", or split the model further (parallel: tp, pp)"
    elif factor is not None:
        text = (
            f"spread it over {factor:.1f}x the GPUs (roles.{role.name}.devices), or split the"
            " model further (parallel: tp, pp)"
        )
    else:
        text = (
            f"give roles.{role.name} more GPUs (its {state} is split over all of them),"
            " or split the model further (parallel: tp, pp)"
        )
    if state in ("grads", "optimizer") and role.lora is None:
        text += (
            f", or train LoRA adapters instead (roles.{role.name}.lora: {{rank: 32}}: {state}"
            " for the adapters only)"
        )
    return text


def assumptions(
    ctx: Context,
    roles: Mapping[str, RoleEstimate],
    stages: Mapping[str, StageEstimate] | None = None,
) -> dict[str, Any]:
    """Every input and default the estimate used, for ``rlplex estimate`` to print."""
    inputs = ctx.inputs
    w = inputs.workload
    eff = {key: efficiency_value(inputs.efficiency, key) for key in efficiency_defaults()}
    if inputs.efficiency is not None and inputs.efficiency.stages:
        eff["stages"] = dict(inputs.efficiency.stages)
    return {
        "gpu": {
            "preset": ctx.gpu.key,
            "name": ctx.gpu.name,
            "peak_tflops": ctx.gpu.peak_tflops,
            "memory_gb": inputs.cluster.gpu_memory_gb,
            "memory_gb_per_s": ctx.gpu.memory_gb_per_s,
        },
        "workload": w.model_dump() if w is not None else None,
        "models": {
            name: {
                "model": est.model,
                "params_b": round(est.params / 1e9, 4),
                "tp": est.tp,
                "pp": est.pp,
                "dp": est.dp,
                "precision": inputs.roles[name].precision,
                "optimizer": inputs.roles[name].optimizer
                if "optimizer" in {**est.states, **est.host_states}
                else None,
                "optimizer_step": optimizer_kernel(inputs.roles[name])
                if "optimizer" in est.states and not uses_cpu_optimizer(inputs.roles[name])
                else None,
                "sharding": _sharding(inputs.roles[name]),
                "recompute": bool(
                    inputs.roles[name].parallel and inputs.roles[name].parallel.recompute
                ),
                "parallel": (
                    inputs.roles[name].parallel.model_dump()
                    if inputs.roles[name].parallel
                    else None
                ),
                "lora": _lora_assumption(ctx, inputs.roles[name], est),
                "linear_attention": _linear_assumption(ctx, inputs.roles[name], est),
                "attention_scores": _scores_assumption(ctx, name, stages),
            }
            for name, est in roles.items()
        },
        "efficiency": eff,
        "dispatch_s": inputs.cluster.dispatch_s,
        "prefill_chunk_tokens": PREFILL_CHUNK_TOKENS,
        "rollout": {
            name: {
                **(inputs.roles[name].rollout or Rollout()).model_dump(),
                # what the estimate used: ignored where the engine cannot stream
                "partial_rollout": stream_mode(name, inputs.roles, inputs.pipeline)
                == "partial_rollout",
                "in_flight_weight_updates": stream_mode(name, inputs.roles, inputs.pipeline)
                == "in_flight_weight_updates",
                # an eager step's host work, the model's layers counted in dense layers
                "layers": ctx.spec(inputs.roles[name]).num_layers,
                "eager_layers": f.eager_layers(ctx.spec(inputs.roles[name])),
                # vLLM's LoRA kernels per layer and decode step, when it serves adapters
                "lora_kernels_per_layer": (
                    f.lora_decode_kernels((inputs.roles[name].rollout or Rollout()).vllm_v0)
                    if inputs.roles[name].lora is not None
                    else 0
                ),
            }
            for name, est in roles.items()
            if "kv_cache" in est.states
        },
        "response_length": _length_assumption(ctx) if w is not None else None,
        "weight_syncs": {
            name: _sync_assumption(ctx.inputs.pipeline.stage(name), est)
            for name, est in (stages or {}).items()
            if est.kind == "weight_sync" and est.terms and "given" not in est.terms
        },
        "stragglers": {
            name: round(est.detail["straggler"], 4)
            for name, est in (stages or {}).items()
            if est.detail.get("straggler", 1.0) > 1.005
        },
    }


def _scores_assumption(
    ctx: Context, name: str, stages: Mapping[str, StageEstimate] | None
) -> dict[str, Any] | None:
    """Score matrices a role's passes keep (fp32 attention without a flash kernel): GB per
    device of one layer's for its largest micro-batch; None where a flash kernel runs."""
    per_layer = [
        est.detail["scores_gb_per_layer"]
        for stage, est in (stages or {}).items()
        if "scores_gb_per_layer" in est.detail and ctx.inputs.pipeline.stage(stage).role == name
    ]
    if not per_layer:
        return None
    role = ctx.inputs.roles[name]
    return {
        "why": "fp32, no flash kernel: "
        + (
            "grouped KV heads and no mask, PyTorch's math path"
            if layer_kernels(role) == "eager"
            else "Transformer Engine's unfused attention"
        ),
        "gb_per_layer": round(max(per_layer), 4),
        "layers": ctx.spec(role).attention_layers,
    }


def _linear_assumption(ctx: Context, role: Role, est: RoleEstimate) -> dict[str, Any] | None:
    """A hybrid model's linear-attention layers and, on an engine, each sequence's state per
    device (what takes the place of their KV cache); None for a plain transformer."""
    spec = ctx.spec(role)
    if not spec.linear_attention_layers:
        return None
    return {
        "layers": spec.linear_attention_layers,
        "of": spec.num_layers,
        "mixer": "Mamba-2" if spec.linear_mixer == "mamba2" else "linear attention",
        # A hybrid whose layers are single blocks (Nemotron-H): what the others are.
        **(
            {"blocks": {"attention": spec.attention_layers,
                        "moe" if spec.is_moe else "mlp": spec.mlp_layers}}
            if spec.mixer_only_layers or spec.mlp_only_layers
            else {}
        ),
        "state_mb_per_sequence": (
            round(f.linear_state_bytes(spec, stored_precision(role.precision), est.tp, est.pp)
                  / 1e6, 3)
            if "kv_cache" in est.states
            else None
        ),
    }  # fmt: skip


def _lora_assumption(ctx: Context, role: Role, est: RoleEstimate) -> dict[str, Any] | None:
    """A LoRA role's adapters: rank, projections, and their weights against the model's."""
    if role.lora is None:
        return None
    adapters = lora_params(ctx, role)
    return {
        "rank": role.lora.rank,
        "targets": list(role.lora.targets),
        "adapter_params": adapters,
        "share": adapters / est.params,
    }


def _sync_assumption(stage: Stage, est: StageEstimate) -> dict[str, Any]:
    """How a weight sync was priced: its path, the GB each move carries, the tensors."""
    d = est.detail
    keys = ("path", "colocated", "method", "full_model_gb", "gather_gb", "gather_s",
            "gb_per_device", "gb_per_s", "tensors", "load_s", "sleep_level", "sleep_copy_s",
            "adapters_only", "resharded", "loaded_gb", "whole_model")  # fmt: skip
    return {"from": stage.from_role, "to": stage.to_role, **{k: d[k] for k in keys if k in d}}


def _length_assumption(ctx: Context) -> dict[str, Any]:
    dist = trajectory_lengths(ctx)
    w = ctx.inputs.workload
    turns = w.turns.model_dump() if w is not None and w.turns is not None else None
    return {
        "mean": dist.mean,
        "max": dist.cap,
        "clip_ratio": round(dist.clip_ratio, 6),
        "clip_ratio_given": dist.given_clip,
        "shape": "gamma(2) body, truncated at max (docs/cost-model.md)",
        **({"turns": turns} if turns else {}),
    }


def _sharding(role: Role) -> str:
    par = role.parallel
    if par is None:
        return "none (every data-parallel rank holds full states)"
    group = (
        f", within groups of {par.shard_group} data-parallel ranks (hybrid sharding)"
        if par.shard_group is not None
        else ""
    )
    if par.fsdp:
        return f"fsdp (weights, grads, optimizer over dp{group})"
    return {0: "none", 1: "zero-1 (optimizer)", 2: "zero-2 (optimizer, grads)",
            3: "zero-3 (weights, grads, optimizer)"}[par.zero] + group  # fmt: skip
