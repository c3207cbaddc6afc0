"""Predicted against measured memory per op and per device (``rlplex replay`` on a GPU record).

One GPU, two roles that never leave it (capacity 10 GB): actor_infer holds
weights 1 + KV cache 1 and generates with 0.5 GB of transient memory;
actor_train holds weights 1 + optimizer 2 and trains with 1.5. By hand, the
plan gives generate 2.5 GB, train 4.5, the weight sync's source (actor_train)
3.0, and the GPU a peak of 5 GB of states + 1.5 GB of training = 6.5 GB.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import config_from_dict
from rlplex.plan import make_plan
from rlplex.reports.memory import memory_check
from rlplex.timeline.record import Event, Timeline

CONFIG = {
    "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory_gb": 10},
    "roles": {
        "actor_infer": {"devices": [0], "states": {"weights": 1.0, "kv_cache": 1.0}},
        "actor_train": {"devices": [0], "states": {"weights": 1.0, "optimizer": 2.0}},
    },
    "pipeline": {
        "mode": "sync",
        "stages": {
            "generate": {"role": "actor_infer", "seconds": 1.0, "memory_gb": 0.5},
            "train": {"role": "actor_train", "seconds": 2.0, "memory_gb": 1.5,
                      "after": ["generate"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        },
    },
}  # fmt: skip

GEN_PEAKS = (2.0, 2.4, 2.6)
"""GB per step; steps 1-2 compared (step 0 is warm-up): median 2.5."""
TRAIN_PEAKS = (4.0, 5.0, 4.0)
"""Median of steps 1-2: 4.5; step 1's 5.0 plus actor_infer's 2.0 held makes 7.0 on the GPU."""
SYNC_PEAKS = (4.5, 4.5, 4.5)
"""The source's peak while it packs a bucket. Its record names the destination as ``role``:
counted as actor_infer's, actor_train's 3.0 held would be added to its own 4.5 (7.5 GB)."""


def _event(step: int, name: str, kind: str, start: float, role: str, **memory: float) -> Event:
    extra = {k: int(v * 1e9) for k, v in memory.items()}
    return Event(step=step, op=f"s{step}/{name}", kind=kind, devices=(0,), start_s=start,
                 end_s=start + 1.0, role=role, **extra)  # fmt: skip


def _record() -> Timeline:
    events = []
    for step in range(3):
        t = 10.0 * step
        events += [
            _event(step, "generate", "run", t, "actor_infer",
                   peak_allocated_bytes=GEN_PEAKS[step], allocated_bytes=2.0),
            _event(step, "train", "run", t + 1, "actor_train",
                   peak_allocated_bytes=TRAIN_PEAKS[step], allocated_bytes=3.0),
            _event(step, "weight_sync", "weight_sync", t + 2, "actor_infer",
                   peak_allocated_bytes=SYNC_PEAKS[step], allocated_bytes=3.0),
        ]  # fmt: skip
        events[-1] = events[-1].model_copy(update={"from_role": "actor_train"})
    return Timeline(events=tuple(events))


def _plan():
    return make_plan(config_from_dict(CONFIG, file="memory.yaml"))


def test_each_op_against_its_hand_computed_prediction() -> None:
    check = memory_check(_plan(), _record())
    assert check is not None and check.steps == (1, 2)
    rows = {o.op: o for o in check.ops}
    assert set(rows) == {"generate", "train", "weight_sync"}
    assert rows["generate"].predicted_gb == pytest.approx(2.5)
    assert rows["generate"].measured_gb == pytest.approx(2.5)
    assert rows["generate"].error_pct == pytest.approx(0.0, abs=1e-9)
    assert rows["train"].predicted_gb == pytest.approx(4.5)
    assert rows["train"].measured_gb == pytest.approx(4.5)
    # The sync's window is the source's (it packs the buckets): actor_train's 3 GB.
    assert rows["weight_sync"].role == "actor_train"
    assert rows["weight_sync"].predicted_gb == pytest.approx(3.0)
    assert rows["weight_sync"].error_pct == pytest.approx(-100 * 1.5 / 4.5)
    assert check.within(10) == 2


def test_the_device_total_adds_what_the_other_processes_hold() -> None:
    (gpu,) = memory_check(_plan(), _record()).devices
    assert gpu.predicted_gb == pytest.approx(6.5)
    # Step 1's train: its own 5.0 GB peak + actor_infer's 2.0 GB held after its generate
    # (the sync: the source's 4.5 + actor_infer's 2.0, its own held bytes not twice).
    assert gpu.measured_gb == pytest.approx(7.0)
    assert gpu.during == "s1/train"
    assert gpu.under_predicted
    assert gpu.used_gb is None  # no NVML figures in this record


def test_a_record_without_memory_gives_no_check() -> None:
    bare = Timeline(
        events=tuple(e.model_copy(update={"peak_allocated_bytes": None}) for e in _record().events)
    )
    stripped = Timeline(
        events=tuple(
            Event(**{k: v for k, v in e.model_dump().items() if not k.endswith("_bytes")})
            for e in _record().events
        )
    )
    assert memory_check(_plan(), stripped) is None
    assert memory_check(_plan(), bare) is None


def test_replay_prints_and_writes_the_memory_check(tmp_path: Path) -> None:
    config = tmp_path / "memory.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    record = tmp_path / "record.jsonl"
    with record.open("w") as fh:
        for event in _record().events:
            fh.write(json.dumps(event.model_dump(exclude_none=True)) + "\n")
    runner = CliRunner()
    text = runner.invoke(app, ["replay", str(record), "--config", str(config)])
    assert text.exit_code == 0, text.output
    assert "memory per op" in text.stdout
    assert "GPU 0: planned peak 6.500 GB, measured 7.000 GB" in " ".join(text.stdout.split())
    assert "UNDER-PREDICTED" in text.stdout
    out = runner.invoke(app, ["replay", str(record), "--config", str(config), "--json"])
    memory = json.loads(out.stdout)["memory"]
    assert memory["devices"][0]["under_predicted"] is True
    assert {o["op"] for o in memory["ops"]} == {"generate", "train", "weight_sync"}
