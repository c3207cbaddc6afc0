"""A Ray rehearsal runs every device's ops in the simulator's order (sync and async)."""

from __future__ import annotations

from itertools import groupby
from typing import Any

import pytest
from plans import colocated_config

from rlplex.config import config_from_dict
from rlplex.plan import make_plan
from rlplex.runtime import execute
from rlplex.sim import simulate
from rlplex.timeline.record import Timeline

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]


def _async_config() -> Any:
    return config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": 2, "gpu_memory_gb": 30},
            "roles": {
                "actor_infer": {"devices": [0], "states": {"weights": 4, "kv_cache": 20}},
                "reference": {"devices": [0], "states": {"weights": 8}},
                "actor_train": {"devices": [1], "states": {"weights": 4, "optimizer": 8}},
            },
            "pipeline": {
                "mode": "async",
                "max_staleness": 1,
                "stages": {
                    "generate": {"role": "actor_infer", "seconds": 2, "memory_gb": 2},
                    "ref": {"role": "reference", "seconds": 1, "after": ["generate"]},
                    "advantage": {"role": "driver", "seconds": 0.2, "after": ["ref"]},
                    "train": {"role": "actor_train", "seconds": 3, "after": ["advantage"]},
                    "weight_sync": {
                        "kind": "weight_sync",
                        "from": "actor_train",
                        "to": "actor_infer",
                        "after": ["train"],
                    },
                },
            },
        }
    )


def _colocated_async_config() -> Any:
    """Generation and training on the same GPUs, one step off (ROLL's partial-GPU mode)."""
    cfg = colocated_config()
    pipeline = cfg.pipeline.model_copy(update={"mode": "async", "max_staleness": 1})
    return cfg.model_copy(update={"pipeline": pipeline})


def _lanes(timeline: Timeline) -> dict[tuple[int, str], list[Any]]:
    lanes: dict[tuple[int, str], list[Any]] = {}
    for e in timeline.events:
        lane = "compute" if e.kind in ("run", "weight_sync") else "transfer"
        for d in e.devices:
            lanes.setdefault((d, lane), []).append(e)
    return {k: sorted(v, key=lambda e: (e.start_s, e.end_s)) for k, v in lanes.items()}


@pytest.mark.parametrize(
    "make_config",
    [colocated_config, _async_config, _colocated_async_config],
    ids=["sync", "async", "async-colocated"],
)
def test_rehearsal_records_the_simulators_device_order(make_config) -> None:
    cfg = make_config()
    plan = make_plan(cfg)
    steps = 4
    simulated = _lanes(simulate(plan, cfg, steps=steps))
    rehearsed = _lanes(execute(plan, cfg, steps=steps, time_scale=0.02))
    assert set(rehearsed) == set(simulated)
    for key, sim_events in simulated.items():
        ran = [e.op for e in rehearsed[key]]
        assert len(ran) == len(sim_events), key
        # Ops the simulator puts at one instant (zero-length) may run in either order.
        at = 0
        for _, group in groupby(sim_events, key=lambda e: (e.start_s, e.end_s)):
            ops = {e.op for e in group}
            assert set(ran[at : at + len(ops)]) == ops, (key, ran, at)
            at += len(ops)
