"""Fixtures of the view tests: small and real-plan timelines, and headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rlplex.reports.records import planned_timeline
from rlplex.timeline.record import Timeline
from rlplex.viz.synthetic import synthetic_timeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


@pytest.fixture(scope="session")
def small() -> Timeline:
    """3 steps on 8 GPUs of one node, with transfers, a weight sync, a CPU role and the driver."""
    return synthetic_timeline(nodes=1, gpus_per_node=8, steps=3)


@pytest.fixture(scope="session")
def colocated_plan() -> Timeline:
    """examples/ppo.yaml squeezed to 48 GB GPUs, so the plan offloads and reloads."""
    return planned_timeline(EXAMPLES / "ppo.yaml", steps=2, overrides=["cluster.gpu_memory_gb=48"])


@pytest.fixture(scope="session")
def async_plan() -> Timeline:
    """examples/async.yaml simulated for 4 steps."""
    return planned_timeline(EXAMPLES / "async.yaml", steps=4)


def chromium_path() -> str:
    """Chromium's executable; fails (never skips) when it is missing, as CI installs it."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed: run `make browser` (apt-get install chromium)")
    return exe


def _run_chromium(
    page: Path, tmp: Path, *, screenshot: Path | None = None, size: str = "1400,900"
) -> tuple[str, list[dict]]:
    """Load ``page`` headless; return the DOM after scripts ran and the URL requests it made.

    Requests are read from Chromium's net log: those whose initiator is the
    page (a file:// page's origin is "null") rather than the browser itself
    ("not an origin": its own update and time checks).
    """
    net_log = tmp / "net.json"
    args = [
        chromium_path(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp / 'profile'}",
        f"--log-net-log={net_log}",
        f"--window-size={size}",
    ]
    args.append(f"--screenshot={screenshot}" if screenshot else "--dump-dom")
    proc = subprocess.run(
        [*args, page.resolve().as_uri()], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = json.loads(net_log.read_text())
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requests = [
        e["params"]
        for e in log["events"]
        if names.get(e["type"]) == "URL_REQUEST_START_JOB"
        and "url" in e.get("params", {})
        and e["params"].get("initiator") != "not an origin"
    ]
    return proc.stdout, requests


@pytest.fixture
def chromium():
    """:func:`_run_chromium`, failing the test when Chromium is missing."""
    chromium_path()
    return _run_chromium
