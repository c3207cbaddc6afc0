"""Lanes, bars, header figures and the critical path of a timeline."""

from __future__ import annotations

import pytest

from rlplex.timeline.record import Event, Timeline
from rlplex.viz.critical import critical_path, stage_table
from rlplex.viz.layout import build_layout
from rlplex.viz.synthetic import synthetic_timeline


def test_one_lane_per_gpu_plus_cpu_and_driver(small):
    layout = build_layout(small)
    assert [lane.label for lane in layout.lanes] == [
        *(f"gpu {i}" for i in range(8)),
        "rewards (cpu)",
        "driver",
    ]
    assert {lane.group for lane in layout.lanes[:8]} == {"node 0"}
    assert not layout.collapsed
    # Transfers go to the copy sub-lane (row -1), compute to row 0.
    for bar in layout.bars:
        event = small.events[bar.event]
        assert (bar.row < 0) == (event.kind in ("offload", "reload"))
    # Zero-length ops (free offloads) are not drawn.
    assert all(small.events[b.event].duration_s > 0 for b in layout.bars)
    assert [s for s, _ in layout.step_starts] == [0, 1, 2]


def test_weight_sync_spans_the_lanes_it_joins():
    split = synthetic_timeline(steps=1, layout="split")
    layout = build_layout(split)
    ((index, lo, hi),) = layout.syncs
    assert split.events[index].kind == "weight_sync"
    # actor_train on GPUs 4-6 sends to actor_infer on GPUs 0-3.
    assert layout.lanes[lo].label == "gpu 0" and layout.lanes[hi].label == "gpu 6"


def test_summary_figures(small):
    summary = build_layout(small).summary
    assert summary.period_s == pytest.approx(241.64)
    assert summary.lower_bound_s == 235.0
    assert summary.gap == pytest.approx(241.64 / 235 - 1)
    assert summary.offload_s == pytest.approx(3 * (0.32 + 0.16))
    assert summary.reload_s == pytest.approx(3 * (0.16 + 0.16 + 0.32))
    assert summary.gpus == 8 and summary.steps == 3
    assert 0.9 < summary.utilisation_mean <= 1.0


def test_collapse_at_1024_gpus():
    big = synthetic_timeline(nodes=128, gpus_per_node=8, steps=2, layout="split")
    layout = build_layout(big)
    assert layout.collapsed
    gpu_lanes = [lane for lane in layout.lanes if lane.kind == "gpu"]
    assert [lane.label for lane in gpu_lanes] == [
        "gpu 0-511 ×512", "gpu 512-895 ×384", "gpu 896-1023 ×128",
    ]  # fmt: skip
    assert gpu_lanes[0].group == "nodes 0-63"
    assert sum(lane.count for lane in gpu_lanes) == 1024
    assert build_layout(big, collapse=False).lanes[1023].label == "gpu 1023"


def test_jittered_lanes_fall_back_to_role_bands():
    # Per-node events with different times: no two nodes identical.
    events = []
    for node in range(64):
        devices = tuple(range(node * 8, node * 8 + 8))
        role = "actor_infer" if node < 32 else "actor_train"
        events.append(Event(step=0, op=f"s0/gen{node}", kind="run", stage="generate",
                            role=role, devices=devices, start_s=0, end_s=10 + node))  # fmt: skip
    layout = build_layout(Timeline(events=tuple(events)))
    assert [lane.label for lane in layout.lanes] == ["gpu 0-255 ×256", "gpu 256-511 ×256"]
    assert len(layout.bars) == 64


def test_critical_path_follows_deps_and_devices(small):
    path = [small.events[i].op for i in critical_path(small)]
    assert path[0] == "s0/generate" and path[-1] == "s2/offload/actor_train/weights"
    # The driver's advantage waits for old_logprob, and train for advantage.
    assert path.index("s1/advantage") == path.index("s1/old_logprob") + 1
    assert path.index("s1/train") == path.index("s1/advantage") + 1
    # The CPU reward (10 s, off the chain) and the overlapped prefetch are not on it.
    assert "s1/reward" not in path and "s1/reload/actor_train/optimizer" not in path


def test_critical_path_without_deps():
    # A measured record has no deps: the device chain and the op that ended
    # just before stand in.
    events = (
        Event(step=0, op="a", kind="run", stage="a", role="r", devices=(0,), start_s=0, end_s=5),
        Event(step=0, op="b", kind="run", stage="b", role="cpu", start_s=5, end_s=7),
        Event(step=0, op="c", kind="run", stage="c", role="r", devices=(1,), start_s=0, end_s=2),
        Event(step=0, op="d", kind="run", stage="d", role="r", devices=(0,), start_s=7, end_s=9),
    )
    path = [events[i].op for i in critical_path(Timeline(events=events))]
    assert path == ["a", "b", "d"]


def test_stage_table_of_a_real_plan(colocated_plan):
    rows = {row.name: row for row in stage_table(colocated_plan)}
    assert rows["generate"].seconds == pytest.approx(120.0)
    work = sum(row.seconds for row in rows.values())
    assert rows["generate"].share == pytest.approx(120.0 / work)
    assert sum(row.share for row in rows.values()) == pytest.approx(1.0)
    assert rows["generate"].critical and rows["train"].critical
    assert not rows["reward"].critical  # 10 s on CPUs beside 20 s log-prob stages
    assert any(name.startswith("offload ") for name in rows)
    assert any(name.startswith("reload ") for name in rows)


def test_importing_the_views_loads_no_heavy_module():
    import subprocess
    import sys

    code = (
        "import sys, rlplex.viz, rlplex.viz.html, rlplex.timeline.perfetto; "
        "print([m for m in ('matplotlib', 'torch', 'ray') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_stage_shares_add_up_to_one_in_async_runs():
    """Issue 13 defect 8: shares of an async run added up to about 200 %."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan
    from rlplex.sim import simulate

    cfg = load_config("examples/async.yaml")
    rows = stage_table(simulate(make_plan(cfg), cfg, steps=6))
    assert sum(row.share for row in rows) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(241.017, "241.02 s"), (0.5, "0.50 s"), (0.0123, "12.3 ms"), (4e-5, "40 µs"), (0.0, "0 s")],
)
def test_millisecond_ops_are_not_shown_as_zero(seconds, text):
    """Issue 13 defect 8: millisecond ops showed as 0.00 s."""
    from rlplex.viz.critical import format_seconds

    assert format_seconds(seconds) == text
