"""Run a pipeline's stage callables in this process, in DAG order, without Ray.

For unit tests of the pipelines and for debugging a stage: every role has one
worker, built by its setup function here (with the executor's
:class:`~rlplex.runtime.context.WorkerInfo` and ``ctx``, so a stage sees the same
thing under both), and stages run one at a time in
topological order, with the weight sync copying the trainer's weights into
the rollout engine (``named_weights``). Placement and offloading are the
executor's business and are ignored here.

Async one-step-off (``max_staleness = k``) is emulated by order: the
generation of step t runs right after the weight sync of step t - k - 1, so
its weights are k steps stale, exactly as the plan allows; the rest of step t
runs after.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from rlplex.dag.pipeline import Pipeline
from rlplex.resources.cluster import DRIVER
from rlplex.runtime.context import StageContext, WorkerInfo, call_stage


def _sync_weights(src: Any, dst: Any) -> None:
    import torch

    weights = src.named_weights()
    with torch.no_grad():
        for name, tensor in dst.named_weights().items():
            tensor.copy_(weights[name])


def run_local(
    pipeline: Pipeline,
    setups: Mapping[str, Callable[[Any], Any]],
    steps: int,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[int, dict[str, Any]]:
    """Run ``steps`` steps; returns each step's metrics (plus ``step_s``).

    Raises:
        KeyError: a role of the pipeline has no setup function.
    """
    states: dict[str, Any] = {}
    for role in [*pipeline.roles_used(), DRIVER]:
        if role in setups and role not in states:
            states[role] = setups[role](WorkerInfo(role=role))
    order = [pipeline.stage(n) for n in pipeline.topological_order()]
    readers = {
        r for s in pipeline.stages if s.is_weight_sync for r in pipeline.weight_readers(s, {})
    }
    # Stages of the generation "front" of a step: the weight readers and what feeds them.
    front = [s for s in order if s.name in readers]
    rest = [s for s in order if s.name not in readers]
    lag = pipeline.staleness
    results: dict[int, dict[str, Any]] = {}
    metrics: dict[int, dict[str, Any]] = {}
    started: dict[int, float] = {}

    def run_stage(stage: Any, step: int) -> None:
        t0 = time.perf_counter()
        step_results = results.setdefault(step, {})
        if stage.is_weight_sync:
            if stage.fn is not None:
                ctx = StageContext(
                    step, stage.name, WorkerInfo(stage.to_role), states[stage.to_role]
                )
                call_stage(stage.fn, ctx, {d: step_results.get(d) for d in stage.after})
            else:
                _sync_weights(states[stage.from_role], states[stage.to_role])
            step_results[stage.name] = None
        else:
            role = stage.role
            if role not in states:
                raise KeyError(f"no setup function for role {role!r} (stage {stage.name!r})")
            ctx = StageContext(step, stage.name, WorkerInfo(role), states[role])
            upstream = {d: step_results[d] for d in stage.after}
            step_results[stage.name] = call_stage(stage.fn, ctx, upstream) if stage.fn else None
            for k, v in ctx.metrics.items():
                metrics.setdefault(step, {}).setdefault(k, v)
        metrics.setdefault(step, {}).setdefault(f"time/{stage.name}", time.perf_counter() - t0)

    def run_front(step: int) -> None:
        started[step] = time.perf_counter()
        for stage in front:
            run_stage(stage, step)

    for step in range(min(lag, steps)):
        run_front(step)
    for step in range(steps):
        if step + lag < steps:
            run_front(step + lag)
        for stage in rest:
            run_stage(stage, step)
        metrics[step]["step_s"] = time.perf_counter() - started[step]
        results.pop(step, None)
        if on_step is not None:
            on_step(step, metrics[step])
    return metrics
