"""Shared test fixtures.

``ray_session``: one local Ray for the whole test session, with 8 *logical*
GPUs on 4 CPUs, so executor tests run on any laptop or CI box (on a CUDA
machine too: the workers hide the real GPUs and run on CPU tensors). Tests that need
Ray take this fixture; workers have the repository and ``tests/runtime`` on
their import path, so stage functions defined in test modules unpickle there.

Under pytest-xdist (``make unit``: ``-n 2``) the Ray tests spread over both
workers like the others, and each worker starts its own Ray at its first Ray
test: the two halves of the Ray tests, which spend much of their time starting
worker processes and waiting on them, run side by side instead of one after
the other on one worker. (Until now ``xdist_group`` marks added here were meant
to keep them on one worker; with pytest 9.2 and pytest-xdist 3.8 such marks have
no effect, as xdist renames ``item._nodeid``, which pytest 9.2 no longer reads.)
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from checkout_guard import pytest_sessionfinish, pytest_sessionstart
from child_python import python_path
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["pytest_sessionfinish", "pytest_sessionstart"]  # the checkout guard's hooks

# CI runs the property tests with a fixed seed so a red build is reproducible;
# locally they draw new examples on every run (HYPOTHESIS_PROFILE=dev).
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


RAY_START_TRIES = 3
"""Ray gives its raylet a fixed 30 s to register; on a loaded 2-core box it can miss them."""


def _init_ray(ray: Any, **kwargs: Any) -> None:
    """``ray.init(**kwargs)``, tried again when the node did not come up in Ray's 30 s."""
    for attempt in range(1, RAY_START_TRIES + 1):
        try:
            ray.init(**kwargs)
            return
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == RAY_START_TRIES:
                raise
            ray.shutdown()


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """A session-wide local Ray: 4 CPUs, 8 logical GPUs, no dashboard."""
    import ray  # a missing Ray must fail the executor tests, not skip them

    if ray.is_initialized():
        yield ray
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    _init_ray(
        ray,
        # A new Ray of this process's own: never one found on the machine (a
        # ``ray.cluster_utils.Cluster`` of test_two_nodes.py, or another run's, leaves its
        # address in /tmp/ray/ray_current_cluster, where ``ray.init()`` would look).
        address="local",
        num_cpus=4,
        num_gpus=8,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={
            "env_vars": {
                "PYTHONPATH": python_path(str(ROOT), str(ROOT / "tests" / "runtime")),
                # The 8 GPUs are logical: on a CUDA machine, workers must not pick the
                # real GPU 0 for some roles and CPU for the others.
                "RLPLEX_LOGICAL_GPUS": "1",
            },
            "worker_process_setup_hook": "rlplex.runtime.logs.setup_worker_logging",
        },
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def _cuda_devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Tests marked ``slow`` run first; tests marked ``gpu`` skip, with the reason, where CUDA
    is missing (never counted as passed).

    The slow tests (learning runs under Ray, 30-90 s each) first, the way a scheduler gives
    out its longest jobs first: in collection order one of them could start last on one
    xdist worker while the other sat idle for a minute. The order within each group stays
    the collection's (a stable sort), the same on every worker.

    ``@pytest.mark.gpu(min_gpus=2)`` also skips where fewer GPUs exist.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    have = _cuda_devices()
    for item in gpu_items:
        need = int(item.get_closest_marker("gpu").kwargs.get("min_gpus", 1))
        if have < need:
            reason = (
                "no CUDA device (torch.cuda.is_available() is False): GPU check not measured"
                if have == 0
                else f"needs {need} CUDA devices, this machine has {have}: not measured"
            )
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def run_bench() -> Any:
    """Run ``bench/NAME`` with arguments in a fresh Python (CUDA, DeepSpeed and Ray state stay
    out of the test process); returns its JSON result. Fails with the script's output."""
    import json
    import subprocess
    import sys

    def run(name: str, *args: str, timeout_s: float = 900) -> dict[str, Any]:
        env = {**os.environ, "PYTHONPATH": python_path(), "RAY_AUTH_MODE": "disabled"}
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / name), *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=ROOT,
            env=env,
        )
        text = proc.stdout
        start = text.find("\n{") + 1 if not text.startswith("{") else 0
        try:
            return json.loads(text[start:])
        except ValueError:
            command = " ".join([name, *args])
            pytest.fail(f"bench/{command} exited {proc.returncode}:\n{text}\n{proc.stderr[-4000:]}")

    return run


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Any]:
    """A factory of real small file systems: ``small_disk("20m")`` mounts a tmpfs of that size
    (``read_only=True``: mounted read-only after ``files`` are written) and returns its folder.

    A full or read-only disk is then the kernel's, not a patched write. Mounting needs root
    with CAP_SYS_ADMIN (CI's machine); elsewhere the test is skipped with that reason.
    """
    mounted: list[Path] = []

    def mount(size: str, read_only: bool = False, files: dict[str, str] | None = None) -> Path:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs (needs root with CAP_SYS_ADMIN): {proc.stderr}")
        mounted.append(folder)
        for name, text in (files or {}).items():
            (folder / name).write_text(text)
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)
