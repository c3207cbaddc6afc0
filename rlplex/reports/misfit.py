"""Every figure of an estimate that does not fit, with what does not fit and by how much.

Loading a config refuses an estimated state or stage that cannot fit on a GPU
(:func:`rlplex.estimate.fill.check_stages_fit`, the estimator's checks): one
line naming the field. ``rlplex estimate`` then needs the numbers behind it:
each stage's seconds and each role's GB per device, to see how far off the
config is. :func:`misfit_report` re-loads the config with the GPU memory
raised out of the way (``cluster.gpu_memory_gb``, so nothing is refused),
estimates it, and compares every figure with the real GPU: a state larger than
a GPU, a KV cache with no room left after the weights and activations, a stage
whose states and activations exceed a GPU with every other role offloaded.
Each shortfall names the role (and stage), the GB needed and available, the
excess, and what would make it fit.

With the memory raised, the KV cache is what the batch needs at the longest
lengths (the real engine gets what the GPU leaves), so generation's seconds
are those of an unconstrained decode batch; the report says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from rlplex.config import load_config, raw_file
from rlplex.errors import ConfigError
from rlplex.estimate.assumptions import (
    activation_remedy,
    group_factor,
    group_remedy,
    state_remedy,
)
from rlplex.estimate.estimator import Estimate, estimate_config
from rlplex.resources.cluster import Role
from rlplex.resources.inputs import Rollout

RELAXED_GPU_GB = 1e6
"""GPU memory the config is re-loaded with, so that no estimated figure is refused."""

_FIT_FIELD = re.compile(r"^(roles\.[^.]+\.states(\.[^.]+)?|pipeline\.stages\.[^.]+\.memory_gb)$")


def is_fit_error(exc: ConfigError) -> bool:
    """Whether ``exc`` is the loader refusing an estimated figure that does not fit a GPU."""
    return bool(exc.field and _FIT_FIELD.match(exc.field))


class Shortfall(BaseModel):
    """One thing that does not fit on a GPU."""

    model_config = ConfigDict(frozen=True)

    role: str
    """The role whose state or stage does not fit."""
    stage: str | None
    """The stage that needs it (None: a state alone)."""
    what: str
    """``weights``, ``optimizer``, ... alone; ``kv_cache`` (no room); or ``stage``."""
    need_gb: float
    """GB per GPU needed."""
    cap_gb: float
    """GB per GPU available for it."""
    remedy: str
    """What would make it fit (shard the state, more GPUs, tensor parallel, recomputation
    ...), one line naming the fields to change."""

    @property
    def over_gb(self) -> float:
        return self.need_gb - self.cap_gb


class MisfitReport(BaseModel):
    """The estimate of a config that does not fit, and its shortfalls."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: str
    """The config file, as given."""
    error: str
    """The loader's refusal (it names the first field that does not fit)."""
    gpu_memory_gb: float
    """The real GPU's memory the figures are compared with, GB: the config's (file or
    ``--set``), else its GPU preset's."""
    estimate: Estimate
    """Computed with the GPU memory raised (see the module docstring)."""
    kv_cache_gb: dict[str, float]
    """Each generating role's KV cache within the real GPU (0: no room)."""
    shortfalls: tuple[Shortfall, ...]
    """Everything that does not fit: states alone first, then KV caches with no room, then
    stages (their states and activations with every other role offloaded)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "fits": False,
            "error": self.error,
            "gpu_memory_gb": self.gpu_memory_gb,
            "estimate": self.estimate.to_json(),
            "kv_cache_gb": self.kv_cache_gb,
            "shortfalls": [
                {**s.model_dump(), "over_gb": round(s.over_gb, 4)} for s in self.shortfalls
            ],
        }


def _real_gpu_gb(
    path: str | Path,
    overrides: Sequence[str],
    preset_gb: float | None,
    env: Mapping[str, str] | None = None,
) -> float:
    """The GPU memory the config gives (file or --set), else its GPU preset's."""
    try:
        raw = raw_file(path, overrides, env)
    except (ConfigError, TypeError):  # TypeError: --set into a file that is not a mapping
        raw = {}
    cluster = raw.get("cluster") if isinstance(raw, dict) else None
    given = cluster.get("gpu_memory_gb") if isinstance(cluster, dict) else None
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        return float(given)
    if preset_gb is None:
        raise ConfigError("the GPU memory is not known", field="cluster.gpu_memory_gb")
    return preset_gb


def shortfalls(
    estimate: Estimate, roles: dict[str, Role], stages: Sequence[Any], cap: float
) -> tuple[tuple[Shortfall, ...], dict[str, float]]:
    """What does not fit on a ``cap`` GB GPU, and each generating role's real KV cache."""
    out: list[Shortfall] = []
    kv: dict[str, float] = {}
    for name, r in estimate.roles.items():
        role = roles[name]
        for state, gb in r.states.items():
            if state != "kv_cache" and gb > cap:
                remedy = state_remedy(role, state, gb / cap)
                out.append(Shortfall(role=name, stage=None, what=state, need_gb=gb,
                                     cap_gb=cap, remedy=remedy))  # fmt: skip
        if "kv_cache" in r.states:
            fixed = sum(v for k, v in r.states.items() if k != "kv_cache") + r.activations_gb
            share = (role.rollout or Rollout()).gpu_memory_utilization
            room = share * cap - fixed
            kv[name] = max(0.0, min(r.states["kv_cache"], room))
            if room <= 0:
                out.append(Shortfall(
                    role=name, stage=None, what="kv_cache", need_gb=fixed,
                    cap_gb=share * cap,
                    remedy=f"no room for a KV cache: raise roles.{name}.num_gpus_per_worker"
                    " (tensor parallel) or use a GPU with more memory",
                ))  # fmt: skip
    for stage in stages:
        r = estimate.roles.get(stage.role or "")
        est = estimate.stages.get(stage.name)
        if r is None or est is None or stage.is_weight_sync:
            continue
        states = {**r.states, **({"kv_cache": kv[r.role]} if r.role in kv else {})}
        needs = stage.needs if stage.needs is not None else tuple(states)
        total = sum(v for k, v in states.items() if k in needs) + est.memory_gb
        if total <= cap + 1e-9:
            continue
        if est.memory_gb >= max((states[k] for k in needs if k in states), default=0.0):
            remedy = activation_remedy(roles[r.role], stage)
        elif (par := roles[r.role].parallel) is not None and par.shard_group is not None:
            # Hybrid sharding: more GPUs add replicas, not shards; a larger group shrinks it.
            held = {k: v for k, v in states.items() if k in needs}
            factor = group_factor(roles[r.role], held, est.memory_gb, cap)
            remedy = group_remedy(roles[r.role], factor) + ", or split the model (tp, pp)"
        else:
            remedy = (
                f"give roles.{r.role} {total / cap:.1f}x the GPUs if its states are sharded,"
                " shard them (fsdp / zero), or split the model (tp, pp)"
            )
        out.append(Shortfall(role=r.role, stage=stage.name, what="stage", need_gb=total,
                             cap_gb=cap, remedy=remedy))  # fmt: skip
    return tuple(out), kv


def misfit_report(
    path: str | Path,
    error: ConfigError,
    *,
    overrides: Sequence[str] = (),
    format: str | None = None,
    costs: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> MisfitReport:
    """The estimate of ``path`` (which the loader refused with ``error``) and what does not fit;
    ``env``: the variables a launch script starts with (``--env``).

    Raises:
        ConfigError: ``error`` itself when the config does not load even with
            the GPU memory raised (the refusal was not about memory after all).
    """
    try:
        cfg = load_config(
            path,
            overrides=(*overrides, f"cluster.gpu_memory_gb={RELAXED_GPU_GB:.1f}"),
            format=format,
            costs=costs,
            env=env,
        )
        relaxed = estimate_config(cfg)
    except ConfigError:
        raise error from None
    preset = None
    if cfg.cluster.gpu:
        from rlplex.estimate.specs import gpu_spec

        preset = gpu_spec(cfg.cluster.gpu).memory_gb
    cap = _real_gpu_gb(path, overrides, preset, env)
    found, kv = shortfalls(relaxed, dict(cfg.roles), cfg.pipeline.stages, cap)
    return MisfitReport(
        config=str(path), error=str(error), gpu_memory_gb=cap, estimate=relaxed,
        kv_cache_gb=kv, shortfalls=found,
    )  # fmt: skip
