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


def test_a_plans_gb_are_the_records_bytes_over_ten_to_the_ninth() -> None:
    """A plan's GB (the config's, 10^9 bytes) become a predicted record's bytes through one
    constant, so that a predicted transfer and a measured one of the same state show the
    same bytes (they used 2^30 here, and the executor real bytes: 7.4 % apart)."""
    from rlplex.config import config_from_dict
    from rlplex.plan import make_plan
    from rlplex.resources.cluster import BYTES_PER_GB
    from rlplex.timeline.record import timeline_from_plan
    from rlplex.viz.layout import build_layout

    config = config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory_gb": 10,
                        "host_gb_per_s": 10},
            "roles": {
                "actor_infer": {"devices": [0], "states": {"weights": 4.0}},
                "actor_train": {"devices": [0], "states": {"weights": 4.0, "optimizer": 4.0}},
            },
            "pipeline": {"stages": {
                "generate": {"role": "actor_infer", "seconds": 1.0},
                "train": {"role": "actor_train", "seconds": 1.0, "after": ["generate"]},
            }},
        },
        file="units.yaml",
    )  # fmt: skip
    plan = make_plan(config)
    predicted = timeline_from_plan(plan)
    moved = [e for e in predicted.events if e.kind in ("offload", "reload") and e.bytes]
    assert moved, "the 10 GB GPU cannot hold 12 GB of states: something must move"
    for event in moved:
        op = next(o for o in plan.ops if o.id == event.op)
        assert event.bytes == round(op.gb * BYTES_PER_GB) == round(op.gb * 1e9)
    layout = build_layout(predicted)
    assert layout.summary.moved_gb == pytest.approx(sum(o.gb for o in plan.ops), rel=1e-9)


@pytest.mark.parametrize(("field", "value"), [("step", -1), ("devices", [-3])])
def test_a_negative_step_or_device_is_no_event(field: str, value: object) -> None:
    """Found in review (2026-11-29): ``viz`` drew such events without a word."""
    from pydantic import ValidationError

    body = {"step": 0, "op": "s0/train", "kind": "run", "devices": [0], "start_s": 0.0,
            "end_s": 1.0, field: value}  # fmt: skip
    with pytest.raises(ValidationError):
        Event.model_validate(body)
