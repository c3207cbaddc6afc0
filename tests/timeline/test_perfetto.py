"""Perfetto / Chrome trace export and import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.reports.records import planned_timeline
from rlplex.timeline.perfetto import (
    CPU_PID,
    read_timeline,
    read_trace,
    to_trace,
    write_trace,
)
from rlplex.viz.synthetic import synthetic_timeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def async_plan_timeline():
    """examples/async.yaml simulated for 3 steps."""
    return planned_timeline(EXAMPLES / "async.yaml", steps=3)


@pytest.fixture(scope="module")
def timeline():
    return synthetic_timeline(nodes=2, gpus_per_node=4, steps=2, layout="split", jitter=0.1)


def test_round_trip_same_ops(timeline, tmp_path):
    back = read_trace(write_trace(timeline, tmp_path / "t.json"))
    assert len(back.events) == len(timeline.events)
    for a, b in zip(timeline.events, back.events, strict=True):
        assert (a.op, a.step, a.kind, a.stage, a.role, a.state) == (
            b.op, b.step, b.kind, b.stage, b.role, b.state,
        )  # fmt: skip
        assert a.devices == b.devices and a.bytes == b.bytes
        assert abs(a.start_s - b.start_s) < 1e-6 and abs(a.end_s - b.end_s) < 1e-6
    assert back.metrics == timeline.metrics and back.meta == timeline.meta


def test_round_trip_of_a_real_plan(async_plan_timeline, tmp_path):
    back = read_timeline(write_trace(async_plan_timeline, tmp_path / "t.json"))
    assert [e.op for e in back.events] == [e.op for e in async_plan_timeline.events]
    assert [e.devices for e in back.events] == [e.devices for e in async_plan_timeline.events]


def test_trace_layout(timeline):
    trace = to_trace(timeline)
    events = trace["traceEvents"]
    names = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"
    }
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert processes == {1: "node 0", 2: "node 1", CPU_PID: "cpu"}
    # GPU 5 = node 1, local GPU 1: compute thread 3, copy engine thread 4.
    assert names[(2, 3)] == "gpu 5" and names[(2, 4)] == "gpu 5 copy engine"
    assert {"rewards", "driver"} <= {names[k] for k in names if k[0] == CPU_PID}
    slices = [e for e in events if e["ph"] == "X"]
    train = [e for e in slices if e["args"]["op"] == "s0/train"]
    assert sorted(e["args"]["device"] for e in train) == [4, 5, 6]
    assert all(e["tid"] % 2 == 1 for e in train)  # compute threads
    assert all(e["tid"] % 2 == 0 for e in slices if e["cat"] in ("offload", "reload"))
    # Flow arrows for deps: a start and a finish per edge.
    starts = [e for e in events if e["ph"] == "s"]
    finishes = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(finishes) > 10
    json.dumps(trace)  # serialisable as is


def test_not_an_rlplex_trace(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "x", "ts": 0, "dur": 1}]}))
    with pytest.raises(ConfigError, match="no rlplex slices"):
        read_trace(path)
    path.write_text("[1, 2")
    with pytest.raises(ConfigError, match="not JSON"):
        read_trace(path)


def test_import_does_not_depend_on_slice_order(timeline):
    import random

    trace = to_trace(timeline)
    random.Random(1).shuffle(trace["traceEvents"])
    from rlplex.timeline.perfetto import from_trace

    back = from_trace(trace)
    by_op = {e.op: e for e in back.events}
    for event in timeline.events:
        other = by_op[event.op]
        assert (other.stage, other.role, other.state) == (event.stage, event.role, event.state)
        assert sorted(other.devices) == sorted(event.devices)
        assert abs(other.start_s - event.start_s) < 1e-6
