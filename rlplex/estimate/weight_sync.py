"""Weight sync: the seconds of handing the trained weights to the rollout engines.

Colocated: the trainer's shards gathered and resharded into the engine's layout,
the engine's wake-up and sleep copies; split: the model over the network or
NVLink, per bucket and per tensor, whole-model broadcasts or NeMo RL's
shard-to-shard transfer (:func:`_resharded`); LoRA syncs only the adapter.
:func:`weight_sync_seconds_at` gives the planner the seconds for a placement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.estimate import formulas as f
from rlplex.estimate.context import (
    Context,
    Inputs,
    StageEstimate,
    efficiency_value,
    lora_params,
    missing_inputs,
    shard_groups,
    spans_nodes,
    stored_precision,
    weight_bytes_per_param,
)
from rlplex.estimate.states import role_states
from rlplex.resources.cluster import Role
from rlplex.resources.inputs import Rollout


def _full_model_gb(ctx: Context, role: Role) -> float:
    """GB of the whole model as the trainer holds and exports it (bf16 for an fp8 trainer:
    :func:`stored_precision`)."""
    precision = stored_precision(role.precision)
    return f.total_params(ctx.spec(role)) * f.BYTES_PER_ELEMENT[precision] / f.GB


def nodes_network_gb_per_s(cluster: Any, devices: Sequence[int]) -> float:
    """GB/s per device of a collective across nodes over a communicator that holds
    ``devices``: NCCL runs a ring through the NIC of each member GPU of a node, so the bytes
    cross into a node once over its members' NICs and reach them over NVLink; the node with
    the fewest members bounds it, and no GPU receives faster than NVLink (NVIDIA-NeMo/.github
    ``discussions/posts/nemo-rl-async-refit-performance``: 8 x 50 GB/s on a DGX H100)."""
    members = Counter(cluster.node_of(d) for d in devices)
    fewest = min(members.values()) if members else 1
    return min(cluster.device_copy_gb_per_s, fewest * cluster.network_gb_per_s)


def _gather_s(
    ctx: Context,
    role: Role,
    *,
    every_nic: bool = True,
    share: float = 1.0,
    dense_only: bool = False,
) -> tuple[float, float]:
    """(GB, seconds) for one trainer device to gather the whole model from its shards.

    What the device lacks arrives over NVLink while the ranks that hold distinct
    shards (tensor x pipeline x expert parallel, and data parallel under
    ZeRO-3/FSDP, laid out on consecutive devices) share an NVLink fabric. Across
    nodes the gather's collectives hold every trainer rank, so the node's NICs
    share the bytes (:func:`nodes_network_gb_per_s`) and the export reaches
    ``refit_gather`` of that (measured on NeMo RL's refit); ``every_nic`` false
    (verl's syncs to a rollout on other GPUs) keeps the one NIC per device their
    published times were fitted with. ``share``: the part of the model that moves (a LoRA
    trainer's adapters). ``dense_only``: ``share`` of the model is weights outside the routed
    experts (a resharded sync's rest), split over tensor x pipeline ranks (and data parallel
    under ZeRO-3/FSDP), never over expert parallel ones.
    """
    tp, pp, _ = ctx.layout(role)
    # Under hybrid sharding the shards of one whole copy lie within a shard group.
    dp = shard_groups(ctx, role)[0]
    par = role.parallel
    zero = 3 if par is not None and par.fsdp else (par.zero if par is not None else 0)
    if dense_only:
        shards = tp * pp * (dp if zero >= 3 else 1)
        missing_gb = _full_model_gb(ctx, role) * share * (1.0 - 1.0 / shards)
    else:
        own_gb = role.states.get("weights", 0.0) * (
            f.BYTES_PER_ELEMENT[stored_precision(role.precision)]
            / weight_bytes_per_param(ctx, role)
        )
        missing_gb = max(0.0, _full_model_gb(ctx, role) - own_gb) * share
    # Expert-parallel ranks are carved out of the data-parallel ones (expert_layout).
    ep = par.ep if par is not None else 1
    group = min(tp * pp * (dp if zero >= 3 else ep), ctx.devices(role))
    c = ctx.inputs.cluster
    if not spans_nodes(ctx, group):
        speed = c.device_copy_gb_per_s
    elif every_nic:
        devices = role.devices or tuple(range(ctx.devices(role)))
        light = nodes_network_gb_per_s(c, devices)
        speed = light * efficiency_value(ctx.inputs.efficiency, "refit_gather")
    else:
        speed = c.network_gb_per_s
    return missing_gb, missing_gb / speed


def estimate_weight_sync(ctx: Context, stage: Stage, roles: Mapping[str, Role]) -> StageEstimate:
    """Move the trained weights into the inference engine.

    verl and NeMo RL hand the engine full Hugging Face tensors: the trainer
    gathers each one from its shards, every engine rank receives it whole and
    keeps its slice. So the trainer side gathers the whole model (``gather``,
    :func:`_gather_s`) whatever the engine's layout.

    Shared devices (colocated): every device gathers the whole model and hands it
    to the engine beside it; the engine loads its weights at ``reshard_gb_s`` (the whole
    model on a ``server_loaded`` one, verl's, whose every engine rank walks every full
    tensor), and
    ``load_tensor_s`` for each checkpoint tensor (:func:`formulas.param_tensors`), and
    is woken and put back to sleep (``engine_switch_s``) every step, a level-1 sleep
    also copying its weights to host memory and back (:func:`_sleep_copy_s`).

    Disjoint devices: every engine device receives the whole model (a broadcast,
    over the network when the two roles span NVLink fabrics). An
    ``overlapped`` sync (NeMo RL's refit) gathers one bucket while broadcasting
    the last (the slower move bounds it), both over the NICs of the nodes' member
    GPUs (:func:`nodes_network_gb_per_s`; the gather at ``refit_gather`` of it); a
    ``bucketed`` one (verl's checkpoint engine) does both in turn at one NIC per
    device, a ``bucketed_overlapped`` one overlaps them. The engine loads each checkpoint
    tensor (``load_tensor_s``: name mapping, its weight loader's copy into the fused
    layout): after its bucket arrives on a ``bucketed`` sync, beside the next bucket's
    moves on an overlapped one (the slowest of the three bounds it). A ``per_tensor`` one
    pays ``sync_tensor_s`` for each tensor instead (its collectives' latency and the load).
    A ``server_loaded`` one (verl's checkpoint engine since 2026-02) moves buckets as a
    ``bucketed_overlapped`` one does, while each engine device hands every full tensor to
    its engine through the weight-update API a colocated sync uses: the whole model at
    ``reshard_gb_s`` and ``load_tensor_s`` per tensor, the slower of the moves and the loads
    bounding it, and ``engine_switch_s`` once for the engines' KV cache, released before
    the sync and resumed after (verl/checkpoint_engine/base.py, ``update_weights``).
    A ``resharded`` one (NeMo RL's ``nccl_reshard``) moves the MLP and expert projections
    shard to shard first (:func:`_resharded`), then the rest as an overlapped one.
    """
    inputs = ctx.inputs
    src, dst = roles.get(stage.from_role or ""), roles.get(stage.to_role or "")
    src = ctx.placed(src) if src is not None else None
    dst = ctx.placed(dst) if dst is not None else None
    held_gb = dst.states.get("weights", 0.0) if dst is not None else 0.0
    same = src is not None and dst is not None and sorted(src.devices) == sorted(dst.devices)
    shared = src is not None and dst is not None and bool(set(src.devices) & set(dst.devices))
    share = adapter_share(ctx, src, dst, shared)
    # The engine holds the base weights and the adapters: of them, the adapters move.
    gb = held_gb * share / (1.0 + share) if share < 1.0 else held_gb
    speed = inputs.cluster.device_copy_gb_per_s if same else inputs.cluster.network_gb_per_s
    terms = {"communication": gb / speed}
    detail: dict[str, Any] = {"gb_per_device": gb, "gb_per_s": speed}
    eff = inputs.efficiency
    estimable = bool(src is not None and dst is not None and src.devices and dst.devices)
    if shared:  # the engine sleeps while the trainer runs on its GPUs
        assert dst is not None and src is not None
        sleep_copy_s = _sleep_copy_s(ctx, dst, held_gb)
        tensors = _sync_tensors(ctx, src, share) if estimable else 0
        load_s = tensors * efficiency_value(eff, "load_tensor_s")
        # verl hands each engine rank every full tensor through the engine's weight-update
        # API (server_loaded): its rank walks the whole model, not its own slice.
        whole = (dst.rollout or Rollout()).weight_sync == "server_loaded" and estimable
        loaded_gb = _full_model_gb(ctx, src) * share if whole else gb
        terms["overhead"] = (
            loaded_gb / efficiency_value(eff, "reshard_gb_s")
            + load_s
            + efficiency_value(eff, "engine_switch_s")
            + sleep_copy_s
        )
        detail["path"] = "device copy" if same else "network"
        detail["colocated"] = True
        detail["sleep_level"] = (dst.rollout or Rollout()).sleep_level
        detail["sleep_copy_s"] = sleep_copy_s
        detail.update({"tensors": tensors, "load_s": load_s, "loaded_gb": loaded_gb,
                       "whole_model": whole})  # fmt: skip
        if estimable:
            gather_gb, gather_s = _gather_s(ctx, src, share=share)
            terms["communication"] += gather_s
            detail.update({"gather_gb": gather_gb, "gather_s": gather_s})
    elif estimable:
        full_gb = _full_model_gb(ctx, src) * share
        c = inputs.cluster
        fabrics = {c.fabric_of(d) for d in (*src.devices, *dst.devices)}
        method = (dst.rollout or Rollout()).weight_sync
        # NeMo RL's packed refit broadcasts over a communicator of every trainer and engine
        # rank (so every member GPU's NIC carries it); verl's syncs keep the one NIC per
        # device their published times were fitted with.
        every_nic = method in ("overlapped", "resharded")
        members = (*src.devices, *dst.devices)
        network = nodes_network_gb_per_s(c, members) if every_nic else c.network_gb_per_s
        broadcast_speed = network if len(fabrics) > 1 else c.device_copy_gb_per_s
        resharded = _resharded(ctx, src, dst, share, full_gb) if method == "resharded" else None
        # What goes as whole tensors: everything, or what a shard-to-shard refit leaves.
        whole = 1.0 - (resharded["share"] if resharded else 0.0)
        broadcast_s = full_gb * whole / broadcast_speed
        gather_gb, gather_s = _gather_s(
            ctx, src, every_nic=every_nic, share=share * whole, dense_only=bool(resharded)
        )
        tensors = _sync_tensors(ctx, src, share)
        if resharded:
            tensors -= f.projection_checkpoint_tensors(ctx.spec(src))
        load_s = tensors * efficiency_value(eff, "load_tensor_s")
        if method in ("overlapped", "bucketed_overlapped", "resharded"):
            moves_s = max(broadcast_s, gather_s)
            terms = {"communication": moves_s}
            if load_s > moves_s:  # the engine's loads outlast the moves they overlap
                terms["overhead"] = load_s - moves_s
                detail["load_bound"] = True
            if resharded:  # the slices go first, then the rest (nccl_reshard_refit.md)
                terms["communication"] += resharded["seconds"]
                terms["overhead"] = terms.get("overhead", 0.0) + resharded["transfers_s"]
                detail["resharded"] = resharded
                # The loads bound only the rest's moves; the sync is bound by its largest term.
                detail.pop("load_bound", None)
        elif method == "server_loaded":
            moves_s = max(broadcast_s, gather_s)
            load_s += full_gb / efficiency_value(eff, "reshard_gb_s")
            terms = {"communication": moves_s, "overhead": efficiency_value(eff, "engine_switch_s")}
            if load_s > moves_s:
                terms["overhead"] += load_s - moves_s
                detail["load_bound"] = True
        elif method == "per_tensor":
            load_s = tensors * efficiency_value(eff, "sync_tensor_s")
            terms = {"communication": broadcast_s + gather_s, "overhead": load_s}
        else:
            terms = {"communication": broadcast_s + gather_s, "overhead": load_s}
        detail.update({
            "path": "broadcast", "method": method, "full_model_gb": full_gb, "tensors": tensors,
            "broadcast_s": broadcast_s, "gather_gb": gather_gb, "gather_s": gather_s,
            "gb_per_s": broadcast_speed, "load_s": load_s,
        })  # fmt: skip
    else:
        detail["path"] = "device copy" if same else "network"
    if share < 1.0:
        detail["adapters_only"] = True
    if stage.seconds is not None:
        return StageEstimate(
            stage=stage.name, kind="weight_sync", seconds=float(stage.seconds), bytes=gb * f.GB,
            bound="given", terms={"given": float(stage.seconds)}, detail=detail,
        )  # fmt: skip
    # Bytes one engine device receives: the whole model on a broadcast (a resharded one: its
    # slice of the projections and the rest whole), its share otherwise.
    received = detail.get("full_model_gb", gb) * f.GB
    if "resharded" in detail:
        r = detail["resharded"]
        received = (detail["full_model_gb"] - r["gb"] + r["received_gb"]) * f.GB
    return StageEstimate(
        stage=stage.name, kind="weight_sync", seconds=sum(terms.values()), bytes=received,
        bound="overhead" if detail.get("load_bound") else max(terms, key=terms.__getitem__),
        terms=terms, detail=detail,
    )  # fmt: skip


def _resharded(
    ctx: Context, src: Role, dst: Role, share: float, full_gb: float
) -> dict[str, Any] | None:
    """The shard-to-shard part of a ``resharded`` sync (NeMo RL's ``nccl_reshard`` refit):
    the dense MLPs' and routed experts' projections (:func:`formulas.projection_params`).

    NeMo RL's transfer (``nemo_rl/weight_sync/xferdtensor_python.py``, what runs without
    nccl4py's M2N reshard) moves each engine slice once: its stripes into the members of the
    replica group that holds it (the engine replicas' same-rank devices), then an all-gather
    among them. So an engine device's slice, the projections over the engine's tensor x
    pipeline ranks (vLLM splits experts over them too), arrives in two phases: its stripe,
    while the trainer's sending devices (at most :data:`formulas.RESHARD_STREAMS` pipeline
    stages' at a time) share out the projections once, the slower of the two bounding it;
    then the other replicas' stripes. Each moves over one NIC per device across NVLink
    fabrics, else over NVLink; each projection is one transfer (``sync_tensor_s``). None
    for adapters only (LoRA), which go whole.
    """
    if share < 1.0:
        return None
    spec = ctx.spec(src)
    projection = f.projection_params(spec) / f.total_params(spec)
    gb = full_gb * projection
    tp, pp, replicas = ctx.layout(dst)
    slice_gb = gb / (tp * pp)
    _, src_pp, _ = ctx.layout(src)
    senders = len(src.devices) * min(1.0, f.RESHARD_STREAMS / src_pp)
    sent_gb = gb / max(1.0, senders)
    c = ctx.inputs.cluster
    fabrics = {c.fabric_of(d) for d in (*src.devices, *dst.devices)}
    speed = c.network_gb_per_s if len(fabrics) > 1 else c.device_copy_gb_per_s
    receive_s = max(slice_gb / replicas, sent_gb) / speed
    across = len({c.fabric_of(d) for d in dst.devices}) > 1
    gather_speed = c.network_gb_per_s if across else c.device_copy_gb_per_s
    gather_s = slice_gb * (replicas - 1) / replicas / gather_speed
    transfers = f.projection_tensors(spec)
    return {
        "share": projection, "gb": gb, "received_gb": slice_gb, "sent_gb": sent_gb,
        "senders": senders, "replicas": replicas, "gb_per_s": speed,
        "receive_s": receive_s, "replica_gather_s": gather_s, "seconds": receive_s + gather_s,
        "transfers": transfers,
        "transfers_s": transfers * efficiency_value(ctx.inputs.efficiency, "sync_tensor_s"),
    }  # fmt: skip


def _sync_tensors(ctx: Context, src: Role, share: float) -> int:
    """Checkpoint tensors a weight sync hands the engine: the LoRA adapters' when only they
    move (``share`` < 1), else every tensor of the trainer's checkpoint."""
    spec = ctx.spec(src)
    if share < 1.0 and src.lora is not None:
        return f.lora_tensors(spec, src.lora.targets)
    return f.param_tensors(spec)


def adapter_share(ctx: Context, src: Role | None, dst: Role | None, shared: bool) -> float:
    """What a weight sync moves, as a share of the trainer's checkpoint: its LoRA adapters'
    weights over the model's when the trainer trains adapters and the engine applies them at
    run time (verl's FSDP LoRA and ROLL's LoRA roles), else 1: all of it (merged weights). A
    colocated engine that drops its weights while it sleeps (sleep level 2) needs its base
    weights back every step: all of it (verl forces sleep level 1 for adapter-only syncs for
    that reason). A ``server_loaded`` sync (verl's checkpoint engine) sends every weight
    whatever the trainer trains: the actor's ``update_weights`` hands the engine
    ``get_per_tensor_param()`` with ``base_sync_done`` left false, which exports the whole
    model for a LoRA trainer of either engine (verl/workers/engine_workers.py, the FSDP and
    Megatron engines' ``get_per_tensor_param`` @ 1dda039b9)."""
    if src is None or dst is None or src.lora is None or dst.lora is None:
        return 1.0
    rollout = dst.rollout or Rollout()
    if shared and rollout.sleep_level == 2:
        return 1.0
    if not shared and rollout.weight_sync == "server_loaded":
        return 1.0
    return lora_params(ctx, src) / f.total_params(ctx.spec(src))


def _sleep_copy_s(ctx: Context, engine: Role, gb: float) -> float:
    """Seconds a level-1 sleep adds each step: the engine's ``gb`` of weights per device
    copied to host memory when it sleeps and back when it wakes (vLLM sleep mode level 1),
    each way over the host link (``cluster.host_gb_per_s``, which ``host_copy`` fills). Level 2
    drops them: nothing to copy."""
    if (engine.rollout or Rollout()).sleep_level != 1:
        return 0.0
    return 2.0 * gb / ctx.inputs.cluster.host_gb_per_s


def weight_sync_seconds_at(
    config: Any, stage: Stage, devices: Mapping[str, Sequence[int]]
) -> float | None:
    """A weight sync's estimated seconds with its two roles on ``devices`` (role -> devices).

    The loader fills an estimable sync's ``seconds`` for the config's own
    placement; a plan on other devices (``plan --auto``, a what-if alternative)
    prices the sync again here: colocated or split, over NVLink or the network,
    with the trainer sharded over its new device count. Only the two roles'
    states are estimated, so this is cheap. None when it cannot be estimated.
    """
    names = [n for n in (stage.from_role, stage.to_role) if n]
    roles = dict(config.roles)
    for name in names:
        if name not in roles or name not in devices:
            return None
        role = roles[name]
        if config.is_estimated(f"roles.{name}.states"):
            role = role.model_copy(update={"states": {}})
        roles[name] = role.with_devices(tuple(devices[name]))
    inputs = Inputs.of_config(config, roles)
    if missing_inputs(inputs):
        return None
    try:
        ctx = Context(inputs)
        effective = dict(roles)
        for name in names:
            role = roles[name]
            if role.is_gpu and name in ctx.stages_of:
                states = role.states or role_states(ctx, role).states
                effective[name] = role.model_copy(update={"states": dict(states)})
        return estimate_weight_sync(
            ctx, stage.model_copy(update={"seconds": None}), effective
        ).seconds
    except ConfigError:
        return None
