"""Placement on a two-node Ray cluster (``ray.cluster_utils.Cluster``, 2 x 4 logical GPUs).

The cluster needs its own Ray, so the run happens in a subprocess; the session
Ray of the other tests is left alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from child_python import child_env

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import json, os
    os.environ["RAY_AUTH_MODE"] = "disabled"
    import ray
    from ray.cluster_utils import Cluster
    from rlplex.config import config_from_dict
    from rlplex.plan import make_plan
    from rlplex.runtime import execute

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 4})
    cluster.add_node(num_cpus=2, num_gpus=4)
    ray.init(address=cluster.address, log_to_driver=False)
    cfg = config_from_dict({
        "cluster": {"nodes": 2, "gpus_per_node": 4, "gpu_memory_gb": 80},
        "roles": {
            "actor_train": {"devices": [1, 6], "states": {"weights": 1}},
            "actor_infer": {"devices": [1, 6], "states": {"weights": 1}},
            "reference": {"devices": [2, 3], "num_gpus_per_worker": 2, "states": {"weights": 1}},
        },
        "pipeline": {"stages": {
            "generate": {"role": "actor_infer", "seconds": 1},
            "ref_logprob": {"role": "reference", "seconds": 1, "after": ["generate"]},
            "train": {"role": "actor_train", "seconds": 1, "after": ["ref_logprob"]},
        }},
    })
    timeline = execute(make_plan(cfg), cfg, steps=1, time_scale=0.01)
    table = ray.util.placement_group_table()
    print("RESULT " + json.dumps({"meta": timeline.meta,
                                  "pg_states": [g["state"] for g in table.values()]}))
    ray.shutdown()
    cluster.shutdown()
    """
)


@pytest.mark.slow
def test_workers_land_on_their_planned_node_and_gpu() -> None:
    env = child_env()
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd=ROOT,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads(lines[0][len("RESULT ") :])
    meta = result["meta"]
    nodes = meta["ray_nodes"]
    assert nodes["0"] != nodes["1"], "planned nodes 0 and 1 must be different Ray nodes"
    gpu = meta["gpu_ids"]
    for role, devices in (("actor_train", [1, 6]), ("actor_infer", [1, 6])):
        for rank, device in enumerate(devices):
            worker = meta["workers"][role][rank]
            assert worker["node_id"] == nodes[str(device // 4)]
            assert worker["ray_gpu_ids"] == [gpu[str(device)]]
    # colocated workers share their GPU; different planned GPUs are different devices
    assert gpu["1"] != gpu["2"] != gpu["3"]
    reference = meta["workers"]["reference"][0]
    assert reference["node_id"] == nodes["0"]
    assert reference["cuda_visible_devices"].split(",") == [gpu["2"], gpu["3"]]
    assert all(state == "REMOVED" for state in result["pg_states"])
