"""Small configs for the planner tests, built as dicts (no files)."""

from __future__ import annotations

from typing import Any

from rlplex.config import Config, config_from_dict


def make_config(
    roles: dict[str, Any],
    stages: dict[str, Any],
    *,
    gpus: int = 8,
    nodes: int = 1,
    memory: float = 80,
    mode: str = "sync",
    k: int = 0,
    **cluster: Any,
) -> Config:
    data = {
        "cluster": {"nodes": nodes, "gpus_per_node": gpus, "gpu_memory_gb": memory, **cluster},
        "roles": roles,
        "pipeline": {"mode": mode, "max_staleness": k, "stages": stages},
    }
    return config_from_dict(data)
