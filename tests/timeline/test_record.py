"""The timeline record on disk: written step by step, whole steps only."""

from __future__ import annotations

import errno

import pytest

from rlplex.timeline.record import Event, Timeline, TimelineWriter


def _events(step: int, pad: str) -> list[Event]:
    return [
        Event(step=step, op=f"s{step}/op{i}", kind="run", start_s=step, end_s=step + 1, pad=pad)
        for i in range(5)
    ]


def test_steps_are_written_and_read_back(tmp_path) -> None:
    with TimelineWriter(tmp_path / "run.jsonl", meta={"source": "test"}) as writer:
        for step in range(3):
            writer.write_step(step, _events(step, "é"), {"step_s": 1.0})
    record = Timeline.read_jsonl(tmp_path / "run.jsonl")
    assert record.steps == (0, 1, 2)
    assert record.meta == {"source": "test"}
    assert record.step_events(2)[0].model_extra == {"pad": "é"}


def test_a_step_that_does_not_fit_on_the_disk_leaves_no_half_step(small_disk) -> None:
    """A real full disk (a tmpfs): the failing step is truncated away, earlier steps stay whole."""
    disk = small_disk("64k")
    pad = "x" * 2000  # big events fill 64 KB in a few steps
    written = 0
    with (
        TimelineWriter(disk / "run.jsonl", meta={"source": "test"}) as writer,
        pytest.raises(OSError) as failure,
    ):
        for step in range(1000):
            writer.write_step(step, _events(step, pad), {"step_s": 1.0})
            written += 1
    assert failure.value.errno == errno.ENOSPC
    assert written > 0
    record = Timeline.read_jsonl(disk / "run.jsonl")
    assert record.steps == tuple(range(written))
    assert "read_warnings" not in record.meta  # no truncated last line: nothing half-written
    assert all(len(record.step_events(s)) == 5 for s in record.steps)
