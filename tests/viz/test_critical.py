"""The critical path and the per-stage table."""

from __future__ import annotations

from rlplex.timeline.record import Event, Timeline
from rlplex.viz.critical import critical_path, device_groups, stage_table


def test_stage_table_is_computed_once_for_either_order_of_the_path(colocated_plan):
    path = critical_path(colocated_plan)
    assert stage_table(colocated_plan, path) is stage_table(colocated_plan, tuple(sorted(path)))


def _event(op: str, devices: tuple[int, ...], start: float, end: float, **extra) -> Event:
    return Event(step=0, op=op, kind="run", devices=devices, start_s=start, end_s=end, **extra)


def test_devices_that_ran_the_same_ops_form_one_group():
    events = (
        _event("s0/a", (0, 1, 2, 3), 0, 1),
        _event("s0/b", (0, 1), 1, 2),
        _event("s0/c", (2, 3), 1, 3),
        _event("s0/d", (1, 2), 3, 4),
    )
    assert device_groups(events) == {(0, 1): (0,), (0, 1, 3): (1,), (0, 2, 3): (2,), (0, 2): (3,)}


def test_the_path_follows_the_resource_that_released_each_op():
    # b waits for a on GPU 0; c on GPU 1 ends last and was released by b (its dep).
    events = (
        _event("s0/a", (0,), 0, 2),
        _event("s0/x", (1,), 0, 1),
        _event("s0/b", (0,), 2, 3),
        _event("s0/c", (1,), 3, 5, deps=["s0/b"]),
    )
    timeline = Timeline(events=events)
    assert critical_path(timeline) == (0, 2, 3)
