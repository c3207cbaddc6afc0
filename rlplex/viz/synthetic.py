"""Synthetic timelines of a PPO-like step, for tests and benchmarks of the views.

The views must stay readable and fast from 8 GPUs to thousands, before any
real run exists at that scale. :func:`synthetic_timeline` builds a plausible
record (generate, CPU reward, reference and old log-probs, driver advantage,
train, weight sync, with offloads and reloads on the copy engine and explicit
``deps``) for any number of nodes and steps, colocated or split across
device groups, optionally with per-step jitter like a measured run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from rlplex.plan.ids import OpKind, OpWork, format_id
from rlplex.resources.cluster import BYTES_PER_GB
from rlplex.timeline.record import Event, Timeline


@dataclass(frozen=True)
class _Op:
    """One op of the step template, relative to the step start."""

    name: str
    """Op id without the ``s{step}/`` prefix."""
    work: OpWork
    """What it does (its devices come from the placement, per timeline)."""
    start: float
    """Start, seconds after the step start."""
    seconds: float
    """Duration."""
    deps: tuple[str, ...] = ()
    """Op names (without prefix) this one waits for."""


def _op(
    name: str,
    kind: str,
    role: str,
    start: float,
    seconds: float,
    deps: tuple[str, ...] = (),
    stage: str | None = None,
    *,
    state: str | None = None,
    gb: float = 0.0,
    from_role: str | None = None,
) -> _Op:
    """A template op."""
    work = OpWork(OpKind(kind), stage=stage, role=role, state=state, from_role=from_role, gb=gb)
    return _Op(name, work, start, seconds, deps)


def _template() -> tuple[list[_Op], float]:
    """The ops of one step and the step length (25 GB/s host copies, 200 GB/s device copy)."""
    ops = [
        _op("generate", "run", "actor_infer", 0.0, 120.0, (), "generate"),
        _op("offload/actor_infer/kv_cache", "offload", "actor_infer", 120.0, 0.0, ("generate",),
            state="kv_cache"),
        _op("reward", "run", "rewards", 120.0, 10.0, ("generate",), "reward"),
        _op("reload/reference/weights", "reload", "reference", 120.0, 0.16, ("generate",),
            state="weights", gb=4.0),
        _op("ref_logprob", "run", "reference", 120.16, 20.0,
            ("generate", "reload/reference/weights"), "ref_logprob"),
        _op("reload/actor_train/weights", "reload", "actor_train", 120.16, 0.16,
            ("reload/reference/weights",), state="weights", gb=4.0),
        _op("offload/reference/weights", "offload", "reference", 140.16, 0.0, ("ref_logprob",),
            state="weights"),
        _op("old_logprob", "run", "actor_train", 140.16, 20.0,
            ("ref_logprob", "reload/actor_train/weights"), "old_logprob"),
        _op("advantage", "run", "driver", 160.16, 1.0, ("reward", "old_logprob"), "advantage"),
        _op("reload/actor_train/optimizer", "reload", "actor_train", 160.16, 0.32,
            ("old_logprob",), state="optimizer", gb=8.0),
        _op("train", "run", "actor_train", 161.16, 80.0,
            ("advantage", "reload/actor_train/optimizer"), "train"),
        _op("offload/actor_train/optimizer", "offload", "actor_train", 241.16, 0.32, ("train",),
            state="optimizer", gb=8.0),
        _op("weight_sync", "weight_sync", "actor_infer", 241.16, 0.02, ("train",), "weight_sync",
            gb=4.0, from_role="actor_train"),
        _op("offload/actor_train/weights", "offload", "actor_train", 241.48, 0.16,
            ("weight_sync", "offload/actor_train/optimizer"), state="weights", gb=4.0),
    ]  # fmt: skip
    return ops, 241.64


def _placement(num_gpus: int, layout: Literal["colocated", "split"]) -> dict[str, tuple[int, ...]]:
    everything = tuple(range(num_gpus))
    if layout == "colocated" or num_gpus < 4:
        return {"actor_infer": everything, "actor_train": everything, "reference": everything}
    half, three_quarters = num_gpus // 2, num_gpus * 7 // 8
    return {
        "actor_infer": tuple(range(half)),
        "actor_train": tuple(range(half, three_quarters)),
        "reference": tuple(range(three_quarters, num_gpus)),
    }


def synthetic_timeline(
    nodes: int = 1,
    gpus_per_node: int = 8,
    steps: int = 3,
    *,
    layout: Literal["colocated", "split"] = "colocated",
    jitter: float = 0.0,
    seed: int = 0,
) -> Timeline:
    """A ``steps``-step record of a PPO-like pipeline on ``nodes * gpus_per_node`` GPUs.

    ``layout="split"`` puts rollout on the first half of the GPUs, training on
    the next three eighths and the reference on the rest (so lanes fall into
    three groups); ``jitter`` scales every duration by a random factor in
    ``[1 - jitter, 1 + jitter]``, as in a measured run.
    """
    rng = random.Random(seed)
    placement = _placement(nodes * gpus_per_node, layout)
    template, length = _template()
    events: list[Event] = []
    metrics: dict[int, dict[str, float]] = {}
    base = 0.0
    for step in range(steps):
        shift = 0.0
        for op in template:
            scale = 1.0 + rng.uniform(-jitter, jitter) if jitter else 1.0
            seconds = op.seconds * scale
            start = base + op.start + shift
            # A longer op pushes everything after it, as it would in a real run.
            shift += seconds - op.seconds
            devices: tuple[int, ...] = ()
            work = op.work
            role = work.role or ""
            if work.kind == OpKind.WEIGHT_SYNC:
                src, dst = placement[work.from_role or ""], placement[role]
                devices = tuple(dict.fromkeys(src + dst))
            elif role in placement:
                devices = placement[role]
            deps = [format_id(step, d) for d in op.deps]
            if step and op.name == "generate":
                deps.append(format_id(step - 1, "weight_sync"))
            extra = {"from_role": work.from_role} if work.from_role else {}
            events.append(
                Event(
                    step=step, op=format_id(step, op.name), kind=work.kind, stage=work.stage,
                    role=role, state=work.state, devices=devices, start_s=start,
                    end_s=start + seconds, bytes=int(work.gb * BYTES_PER_GB), deps=deps, **extra,
                )
            )  # fmt: skip
        step_s = length + shift
        metrics[step] = {"step_s": step_s, "reward/mean": 0.5 + 0.02 * step}
        base += step_s
    meta = {
        "source": "synthetic",
        "mode": "sync",
        "period_s": base / steps if steps else 0.0,
        "lower_bound_s": 235.0,
        "gpus_per_node": gpus_per_node,
        "nodes": nodes,
    }
    return Timeline(events=tuple(events), metrics=metrics, meta=meta)
