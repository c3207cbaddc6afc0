"""The HTML Gantt chart, checked as a person sees it: in headless Chromium."""

from __future__ import annotations

import re

import numpy as np
from matplotlib.image import imread

from rlplex.plan.ids import op_name
from rlplex.resources.cluster import BYTES_PER_GB
from rlplex.resources.devices import format_devices
from rlplex.viz.html import gantt_html, panel_data, write_html
from rlplex.viz.layout import build_layout, colour_role


def test_html_is_self_contained(colocated_plan):
    page = gantt_html(build_layout(colocated_plan, title="ppo"))
    # No external resource of any kind: no src/href attributes, no CSS url()
    # or @import, no script-driven requests.
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "url(http" not in page and "@import" not in page
    for api in ("fetch(", "XMLHttpRequest", "WebSocket", "sendBeacon", "EventSource"):
        assert api not in page
    # The only absolute URL is the SVG namespace (a name, never requested).
    assert set(re.findall(r"https?://[\w./-]+", page)) == {"http://www.w3.org/2000/svg"}


def test_html_header_shows_the_figures(colocated_plan):
    layout = build_layout(colocated_plan, title="ppo")
    page = gantt_html(layout)
    for label in ("period", "lower bound", "gap", "offload", "reload", "GPU utilisation"):
        assert f"<div>{label} <b>" in page
    assert f"{layout.summary.period_s:.2f} s" in page
    assert "time per stage" in page and "critical" in page


def test_html_renders_bars_in_chromium_without_network(colocated_plan, tmp_path, chromium):
    layout = build_layout(colocated_plan, title="colocated ppo")
    page = write_html(layout, tmp_path / "gantt.html")
    dom, requests = chromium(page, tmp_path)
    assert requests == []
    # The script ran and drew one rect per bar of the layout.
    assert 'data-ready="1"' in dom
    drawn = int(re.search(r'data-bars="(\d+)"', dom).group(1))
    assert drawn == len(layout.bars) > 0
    assert len(re.findall(r'<rect [^>]*class="bar', dom)) == drawn
    # Offloads/reloads are on the copy-engine sub-lane, with hatched fills.
    assert len(re.findall(r'class="bar copy', dom)) == sum(1 for b in layout.bars if b.row < 0) > 0
    assert 'fill="url(#h' in dom
    # Lanes: 8 GPUs, the rewards CPU role, the driver.
    for label in ("gpu 0", "gpu 7", "rewards (cpu)", "driver"):
        assert f">{label}<" in dom
    # Bar labels come from the expanded events (op described once, events refer to it).
    for stage in ("generate", "train"):
        assert re.search(rf'class="bar-label"[^>]*>{stage}<', dom)
    # The critical path's bars, read from each event's own flag.
    crit = sum(1 for b in layout.bars if b.event in layout.critical)
    assert len(re.findall(r'class="bar[^"]* crit"', dom)) == crit > 0


def test_panel_events_describe_each_op_once(colocated_plan):
    layout = build_layout(colocated_plan, title="ppo")
    data = panel_data(layout)
    events = layout.timeline.events
    used = sorted({b.event for b in layout.bars} | {s[0] for s in layout.syncs})
    assert len(data["events"]) == len(used)
    # One description per op of a step, not one per event: a longer record adds no ops.
    assert len(data["ops"]) == len({(op_name(events[i].op), events[i].devices) for i in used})
    assert len(data["ops"]) < len(data["events"])
    for index, (op, step, start, end, critical) in zip(used, data["events"], strict=True):
        event = events[index]
        expected = [
            op_name(event.op),
            event.stage or op_name(event.op),
            event.kind,
            event.role or "",
            event.state or "",
            format_devices(event.devices),
            round(event.bytes / BYTES_PER_GB, 4),
            colour_role(event),
        ]
        assert data["ops"][op] == expected
        assert (step, start, end) == (event.step, round(event.start_s, 6), round(event.end_s, 6))
        assert critical == (index in layout.critical)


def test_html_screenshot_is_not_blank(colocated_plan, tmp_path, chromium):
    page = write_html(build_layout(colocated_plan, title="colocated ppo"), tmp_path / "g.html")
    shot = tmp_path / "shot.png"
    chromium(page, tmp_path, screenshot=shot, size="1200,700")
    image = imread(shot)
    assert image.shape[0] == 700 and image.shape[1] == 1200
    assert float(np.std(image[..., :3])) > 0.05
    # The role colour of generate (actor_infer) is on screen.
    colour = build_layout(colocated_plan).colours["actor_infer"]
    rgb = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    close = np.abs(image[..., :3] - rgb).max(axis=-1) < 0.02
    assert close.sum() > 5000


def test_the_network_check_catches_a_request(tmp_path, chromium):
    # The same check on a page that does load something must see it.
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="http://example.com/x.png"></body></html>')
    _, requests = chromium(page, tmp_path)
    assert [r["url"] for r in requests] == ["http://example.com/x.png"]


def test_html_of_1024_gpus_collapses_lanes():
    from rlplex.viz.synthetic import synthetic_timeline

    big = synthetic_timeline(nodes=128, gpus_per_node=8, steps=20, layout="split")
    layout = build_layout(big, title="1024")
    data = panel_data(layout)
    labels = [lane[0] for lane in data["lanes"]]
    assert labels[:3] == ["gpu 0-511 ×512", "gpu 512-895 ×384", "gpu 896-1023 ×128"]
    assert len(gantt_html(layout).encode()) < 5_000_000


def test_html_in_chromium_at_1024_gpus(tmp_path, chromium):
    from rlplex.viz.synthetic import synthetic_timeline

    big = synthetic_timeline(nodes=128, gpus_per_node=8, steps=20, layout="split", jitter=0.05)
    layout = build_layout(big, title="1024")
    dom, requests = chromium(write_html(layout, tmp_path / "big.html"), tmp_path)
    assert requests == []
    assert int(re.search(r'data-bars="(\d+)"', dom).group(1)) == len(layout.bars)
    assert ">gpu 0-511 ×512<" in dom
