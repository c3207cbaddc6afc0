"""Output faults of ``rlplex run``, found before Ray starts or stopping the run cleanly.

No Ray here: the record checks, the lock, a failing write and the hang limit
are plain functions and objects.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from child_python import child_env
from plans import colocated_plan
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.runtime.recorder import Recorder, RecordError, check_record_target, claim_record
from rlplex.runtime.schedule import expand_plan
from rlplex.timeline.record import Timeline, TimelineWriter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_record_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="is a directory"):
        check_record_target(tmp_path)


def test_record_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(RecordError, match="afile is a file, not a folder"):
        check_record_target(tmp_path / "afile" / "sub" / "run.jsonl")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files; checked as non-root")
def test_record_read_only(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    record.write_text("")
    record.chmod(0o444)
    with pytest.raises(RecordError, match="read-only"):
        check_record_target(record)


def test_cli_refuses_bad_record_before_ray(tmp_path: Path, monkeypatch) -> None:
    """One line, exit 2, and Ray never imported (the check comes first)."""
    (tmp_path / "afile").write_text("x")
    result = CliRunner().invoke(
        app, ["run", str(EXAMPLES / "grpo.yaml"), "--record", str(tmp_path / "afile" / "r.jsonl")]
    )
    assert result.exit_code == 2
    assert "afile is a file, not a folder" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_lock_refuses_a_second_run(tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from rlplex.runtime.recorder import claim_record\n"
         f"with claim_record({str(record)!r}):\n print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True, env=child_env(str(Path.cwd())),
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(RecordError, match=rf"in use by another rlplex run \(pid {holder.pid}\)"),
            claim_record(record),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    with claim_record(record):  # released when its holder dies
        assert (tmp_path / "run.jsonl.lock").exists()
    assert not (tmp_path / "run.jsonl.lock").exists()


def test_write_failure_stops_the_run_and_keeps_the_steps_written(
    tmp_path: Path, monkeypatch
) -> None:
    plan = colocated_plan()
    schedule = expand_plan(plan, 2)
    record = tmp_path / "run.jsonl"
    recorder = Recorder(schedule, plan, record)
    original = TimelineWriter.write_step
    calls = {"n": 0}

    def full_disk(self, step, events, metrics=None):  # the second step hits a full disk
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, step, events, metrics)

    monkeypatch.setattr(TimelineWriter, "write_step", full_disk)
    with pytest.raises(RecordError, match="writing step 1 failed: No space left on device;"
                       " the record keeps steps 0-0"):  # fmt: skip
        for op in schedule.ops:
            recorder.add(op, op.planned_start_s, op.planned_end_s, ())
    recorder.close(failure="disk full")
    kept = Timeline.read_jsonl(record)
    assert kept.steps == (0,)


def test_hang_limit_follows_the_plan() -> None:
    from rlplex.runtime.dispatcher import HANG_FACTOR, MIN_HANG_S, Dispatcher

    def limit(planned: float, timeout: float = 600.0, scale: float = 1.0) -> float:
        me = SimpleNamespace(timeout_s=timeout, time_scale=scale)
        op = SimpleNamespace(planned_start_s=5.0, planned_end_s=5.0 + planned)
        return Dispatcher.op_limit_s(me, op)  # type: ignore[arg-type]

    assert limit(2.0) == MIN_HANG_S  # a short op: the floor, not 600 s
    assert limit(30.0) == HANG_FACTOR * 30.0
    assert limit(100.0) == 600.0  # never past --timeout
    assert limit(2.0, timeout=5.0) == 5.0


def test_record_on_a_read_only_disk(small_disk) -> None:
    """Also as root (who writes through a file's mode bits): the file system refuses."""
    disk = small_disk("1m", read_only=True, files={"run.jsonl": ""})
    with pytest.raises(
        RecordError, match=r"run\.jsonl: cannot write the record: the file is read-only"
    ):
        check_record_target(disk / "run.jsonl")
    with pytest.raises(
        RecordError, match=r"new\.jsonl: cannot write the record: its folder is not"
    ):
        check_record_target(disk / "new.jsonl")


def test_record_on_a_full_disk_is_refused_before_the_run(small_disk) -> None:
    disk = small_disk("64k")
    result = CliRunner().invoke(
        app, ["run", str(EXAMPLES / "grpo.yaml"), "--record", str(disk / "r.jsonl")]
    )
    assert result.exit_code == 2
    assert (
        result.stderr.strip() == f"error: {disk / 'r.jsonl'}: the disk is full (under 16 MB free)"
    )


def test_a_record_to_a_device_takes_no_lock_file() -> None:
    """``--record /dev/null`` writes nothing beside the device (it once left /dev/null.lock)."""
    with claim_record("/dev/null") as record:
        assert str(record) == "/dev/null"
        assert not Path("/dev/null.lock").exists()
