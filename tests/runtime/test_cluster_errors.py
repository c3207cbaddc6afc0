"""Connecting and reserving fail with one clear message, never a Ray traceback or a hang.

``--address`` to a cluster that is not there must fail in seconds (Ray itself
retries an unreachable GCS for minutes), and a start that Ray cannot finish in
time (a huge config on a local Ray) must raise an :class:`ExecutionError`.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_python import child_env

from rlplex.runtime import cluster as rc
from rlplex.runtime.errors import ExecutionError, OpTimeoutError

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A local TCP port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_address_is_refused_at_once() -> None:
    port = closed_port()
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(ExecutionError, match="cannot reach the Ray cluster"):
            rc.check_reachable(address)
    rc.check_reachable("auto")  # left to Ray


@contextlib.contextmanager
def listener(reply: bytes | None) -> Iterator[int]:
    """A local TCP server that is not Ray: it answers ``reply`` to anything, or stays silent."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(1024)
                if reply is not None:
                    conn.sendall(reply)
                stop.wait(10)  # keep it open, silent

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.mark.parametrize(
    ("reply", "heard"),
    [(None, "no answer within 1 s"), (b"HTTP/1.1 400 Bad Request\r\n\r\n", "it answered b'HTTP")],
)
def test_a_port_where_something_else_listens_is_refused_quickly(
    reply: bytes | None, heard: str
) -> None:
    """Issue 13 defect 10: such an address gave Ray's GCS warnings for minutes."""
    with listener(reply) as port:
        t0 = time.monotonic()
        with pytest.raises(ExecutionError, match="but it is not a Ray cluster") as error:
            rc.check_reachable(f"127.0.0.1:{port}", answer_s=1.0)
        assert heard in str(error.value)
        assert time.monotonic() - t0 < 5


def run_at(address: str, record: Path) -> subprocess.CompletedProcess[str]:
    """``rlplex run examples/grpo.yaml --address ADDRESS`` in a fresh process.

    The record is the test's own: with ``/dev/null`` two such runs at once (pytest-xdist,
    or another checkout's suite) met on the machine-wide lock ``/dev/null.lock``.
    """
    env = child_env()
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-m", "rlplex.cli", "run", "examples/grpo.yaml", "--steps", "1",
         "--record", str(record), "--address", address],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )  # fmt: skip


def test_run_at_a_port_that_is_not_ray_exits_2_with_one_message(tmp_path: Path) -> None:
    with listener(None) as port:
        t0 = time.monotonic()
        proc = run_at(f"127.0.0.1:{port}", tmp_path / "r.jsonl")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "gcs_client" not in proc.stderr  # no Ray noise
    assert proc.stderr.strip().splitlines()[-1:] == [
        f"error: something listens at '127.0.0.1:{port}' but it is not a Ray cluster (no answer"
        " within 5 s): give the GCS address that `ray start --head` prints (port 6379 by"
        " default), or ray://HOST:10001 for Ray Client"
    ]
    assert time.monotonic() - t0 < 30


def test_a_real_ray_cluster_answers(ray_session) -> None:
    rc.check_reachable(ray_session.get_runtime_context().gcs_address)


def test_run_with_an_unreachable_address_exits_2_with_one_message(tmp_path: Path) -> None:
    t0 = time.monotonic()
    proc = run_at(f"127.0.0.1:{closed_port()}", tmp_path / "r.jsonl")
    assert proc.returncode == 2, proc.stderr
    assert "cannot reach the Ray cluster" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 60


@pytest.mark.usefixtures("ray_session")
def test_a_gpu_probe_that_times_out_is_an_execution_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    node = rc.alive_gpu_nodes()[0]
    reservation = rc.reserve({0: 1}, {0: node.node_id}, timeout_s=60)
    try:

        def late(*_args: object, **_kwargs: object) -> None:
            raise ray.exceptions.GetTimeoutError("not ready")

        monkeypatch.setattr(ray, "get", late)
        with pytest.raises(OpTimeoutError, match="1 reserved GPU bundles"):
            rc.probe_gpu_ids(reservation, 8, timeout_s=0.1)
    finally:
        monkeypatch.undo()
        rc.release(reservation)
