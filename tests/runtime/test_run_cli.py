"""``rlplex run``: a rehearsal end to end, a plan that does not fit (exit 2), real training.

``examples/toy_grpo.yaml`` names its pipeline by Python reference; ``rlplex
run`` takes the roles' setups from the module's ``setups()``, so the stages
really train and the record carries their reward metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from child_python import child_env

from rlplex.timeline.record import Timeline

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """
cluster: {nodes: NODES, gpus_per_node: 2, gpu_memory_gb: 40}
roles:
  actor_train: {devices: DEVICES, states: {weights: 4, optimizer: 8}}
  actor_infer: {devices: DEVICES, states: {weights: 4, kv_cache: 20}}
pipeline:
  stages:
    generate: {role: actor_infer, seconds: 2}
    advantage: {role: driver, seconds: 0.5, after: [generate]}
    train: {role: actor_train, seconds: 2, after: [advantage]}
    weight_sync: {kind: weight_sync, from: actor_train, to: actor_infer, after: [train]}
"""


def rlplex(*args: str, address: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = child_env()
    return subprocess.run(
        [sys.executable, "-m", "rlplex.cli", *args, "--address", address],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture()
def address(ray_session) -> str:
    return ray_session.get_runtime_context().gcs_address


@pytest.mark.slow
def test_run_rehearses_records_and_compares_with_the_prediction(
    tmp_path: Path, address: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG.replace("NODES", "1").replace("DEVICES", '"0-1"'))
    record = tmp_path / "run.jsonl"
    proc = rlplex(
        "run",
        str(config),
        "--steps",
        "3",
        "--record",
        str(record),
        "--time-scale",
        "0.02",
        "--json",
        address=address,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["measured_period_s"] > 0 and result["predicted_period_s"] > 0
    assert abs(result["replayed_period_s"] / result["measured_period_s"] - 1) < 0.5
    timeline = Timeline.read_jsonl(record)
    assert sorted(timeline.metrics) == [0, 1, 2]
    assert (tmp_path / "run.plan.json").exists()
    # Issue 13 defect 10: no JSON log line per step on the terminal.
    assert '"event": "step"' not in proc.stderr and '"event": "plan"' not in proc.stderr
    # Issue 13 defect 3: the planned step time is on the rehearsal's time scale.
    from rlplex.config import load_config
    from rlplex.plan import make_plan

    planned = make_plan(load_config(config)).makespan_s * 0.02
    for metrics in timeline.metrics.values():
        assert metrics["planned_step_s"] == pytest.approx(planned, rel=0.01)


def test_run_refuses_a_plan_that_needs_a_missing_node(tmp_path: Path, address: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG.replace("NODES", "2").replace("DEVICES", "[0, 2]"))
    proc = rlplex("run", str(config), "--record", str(tmp_path / "r.jsonl"), address=address)
    assert proc.returncode == 2
    assert "node" in proc.stderr and "Traceback" not in proc.stderr


ASYNC_STEPS = 60
"""Async one-step-off learns slower than the on-policy layouts: 0.84 over the last 5 at 60."""
ASYNC_SPLIT = [
    "pipeline.mode=async", "pipeline.max_staleness=1", "cluster.gpus_per_node=3",
    "roles.actor_infer.devices=[1]", "roles.reference.devices=[2]",
]  # fmt: skip
"""examples/toy_grpo.yaml one-step-off, each role on a logical GPU of its own."""


@pytest.mark.slow
def test_run_trains_the_toy_grpo_example_async_with_the_modules_setups(
    tmp_path: Path, address: str
) -> None:
    """The async layout's learning check (of tests/pipelines/test_executor_learning.py's bar),
    run through ``rlplex run`` so that one start of the role workers checks both: that the
    CLI calls the module's setups (the stages really train) and that generation one step
    ahead of training learns. The colocated layout's real offloads are the demo's test's."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    record = tmp_path / "run.jsonl"
    sets = [a for kv in ASYNC_SPLIT for a in ("--set", kv)]
    proc = rlplex(
        "run", "examples/toy_grpo.yaml", *sets, "--steps", str(ASYNC_STEPS),
        "--record", str(record), "--json", address=address, timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    timeline = Timeline.read_jsonl(record)
    assert timeline.meta["mode"] == "async"
    assert timeline.meta["weight_sync"] == {"weight_sync": "broadcast"}
    rewards = [timeline.metrics[s]["reward/mean"] for s in range(ASYNC_STEPS)]
    assert sum(rewards[:5]) / 5 <= 0.3
    assert sum(rewards[-5:]) / 5 >= 0.8, rewards
    last = timeline.metrics[ASYNC_STEPS - 1]
    for key in ("kl", "loss/policy", "response_length/mean", "tokens_per_s", "time/generate"):
        assert key in last, key
    # Every role on a GPU of its own: nothing to time-share, nothing moved.
    assert not [e for e in timeline.events if e.kind in ("offload", "reload")]


@pytest.mark.slow
def test_a_disk_that_fills_mid_run_stops_it_and_keeps_the_steps(
    tmp_path: Path, address: str, small_disk
) -> None:
    """A real full disk (a 20 MB tmpfs filled while the run records), not a patched write."""
    import time

    disk = small_disk("20m")
    record = disk / "run.jsonl"
    config = tmp_path / "c.yaml"  # a rehearsal: no model to load, steps of about 0.1 s
    config.write_text(CONFIG.replace("NODES", "1").replace("DEVICES", '"0-1"'))
    env = child_env()
    run = subprocess.Popen(
        [sys.executable, "-m", "rlplex.cli", "run", str(config),
         "--steps", "1000", "--time-scale", "0.02", "--record", str(record),
         "--address", address],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        while '"metrics"' not in (record.read_text() if record.exists() else ""):
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1]
            time.sleep(0.2)
        # Take every byte that is left (unbuffered: nothing left to flush at close).
        with (disk / "filler").open("wb", buffering=0) as filler, pytest.raises(OSError):
            while True:
                filler.write(b"\0" * 2**20)
        _, stderr = run.communicate(timeout=150)
    finally:
        run.kill()
    assert run.returncode == 2, stderr[-3000:]
    assert "Traceback" not in stderr
    error = stderr.strip().splitlines()[-1]
    assert "No space left on device; the record keeps steps 0-" in error, stderr[-3000:]
    kept = int(error.rsplit("-", 1)[1].split()[0].rstrip(".;"))
    (disk / "filler").unlink()  # room to read what was kept
    assert Timeline.read_jsonl(record).steps == tuple(range(kept + 1))
