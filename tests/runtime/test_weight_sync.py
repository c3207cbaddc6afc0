"""Weight sync between roles: shared buckets when colocated, a bucketed gloo broadcast across GPUs.

On CPU the colocated (``ipc``) path shares buckets through shared memory, the
same protocol as CUDA IPC handles on a GPU; ``store`` is the object store.
"""

from __future__ import annotations

from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.plan import make_plan
from rlplex.runtime import execute

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_session")]


class Model:
    """A tiny torch model whose weights a weight sync can read and overwrite."""

    def __init__(self, info: Any) -> None:
        import torch

        self.layer = torch.nn.Linear(4, 3)
        torch.nn.init.zeros_(self.layer.weight)
        torch.nn.init.zeros_(self.layer.bias)

    def named_weights(self) -> dict[str, Any]:
        return dict(self.layer.named_parameters())


def generate(ctx):
    ctx.log(infer_sum=float(sum(p.sum() for p in ctx.state.named_weights().values())))


def train(ctx):
    import torch

    with torch.no_grad():
        for p in ctx.state.named_weights().values():
            p.fill_(ctx.step + 1)


def sync_config(infer_devices: list[int]) -> Any:
    return config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": 2, "gpu_memory_gb": 80},
            "roles": {
                "actor_train": {"devices": [0], "states": {"weights": 1}},
                "actor_infer": {"devices": infer_devices, "states": {"weights": 1}},
            },
            "pipeline": {
                "stages": {
                    "generate": {"role": "actor_infer", "seconds": 1},
                    "train": {"role": "actor_train", "seconds": 1, "after": ["generate"]},
                    "weight_sync": {
                        "kind": "weight_sync",
                        "from": "actor_train",
                        "to": "actor_infer",
                        "after": ["train"],
                    },
                }
            },
        }
    )


@pytest.mark.parametrize(
    ("infer_devices", "method", "used", "bucket_bytes"),
    [
        ([0], "auto", "ipc", None),
        ([0], "ipc", "ipc", 32),  # one bucket per tensor: chained exports and imports
        ([0], "store", "store", None),
        ([1], "auto", "broadcast", 32),
    ],
)
def test_trained_weights_reach_the_inference_role(
    infer_devices: list[int], method: str, used: str, bucket_bytes: int | None
) -> None:
    cfg = sync_config(infer_devices)
    timeline = execute(
        make_plan(cfg),
        cfg,
        steps=3,
        time_scale=0.01,
        implementations={"generate": generate, "train": train},
        setups={"actor_train": Model, "actor_infer": Model},
        weight_sync=method,
        weight_sync_bucket_bytes=bucket_bytes,
    )
    assert timeline.meta["weight_sync"]["weight_sync"] == used
    numel = 4 * 3 + 3
    assert [timeline.metrics[s]["infer_sum"] for s in range(3)] == [0.0, numel * 1.0, numel * 2.0]
    sync = next(e for e in timeline.events if e.op == "s0/weight_sync")
    assert sync.bytes == numel * 4
