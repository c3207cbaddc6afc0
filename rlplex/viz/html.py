"""Self-contained HTML Gantt charts of timelines.

A chart must open anywhere, offline, and stay small at 1,024 GPUs: the page
carries its own script and styles inline (``gantt.js``, ``gantt.css``, no
CDN, no request of any kind), and the bars travel as compact JSON that the
script turns into SVG, so file size grows with the number of drawn bars, not
with GPUs times ops. The header (period, lower bound, gap, offload/reload
seconds, utilisation), the legend and the per-stage table are plain HTML,
readable without the script.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from rlplex.plan.ids import op_name
from rlplex.resources.cluster import BYTES_PER_GB
from rlplex.resources.devices import format_devices
from rlplex.viz.critical import StageRow, format_seconds, stage_table
from rlplex.viz.layout import GanttLayout, colour_role


@cache
def _asset(name: str) -> str:
    return resources.files("rlplex.viz").joinpath(name).read_text(encoding="utf-8")


def _events_json(layout: GanttLayout, used: list[int]) -> tuple[list[list[Any]], list[list[Any]]]:
    """The events the chart references, as ``(ops, events)``.

    What an op is (its name without the step, label, kind, role, state,
    devices, GB, colour role) repeats every step, so it is written once in
    ``ops``; each event is then ``[op, step, start, end, critical]``.
    ``gantt.js`` expands them back into one row per event (see ``fillOf`` and
    the tooltip), and the page stays a few bytes per event on records of
    300,000 ops.
    """
    events = layout.timeline.events
    critical = layout.critical
    ops: list[list[Any]] = []
    op_number: dict[tuple[Any, ...], int] = {}
    rows: list[list[Any]] = []
    for index in used:
        e = events[index]
        colour = colour_role(e)
        # A stage names its op; a transfer is named by its id (without the step).
        stage = e.stage or op_name(e.op)
        key = (stage, e.kind, e.role, e.state, e.devices, e.bytes, colour)
        number = op_number.get(key)
        if number is None:
            number = op_number[key] = len(ops)
            ops.append(
                [
                    op_name(e.op),
                    stage,
                    e.kind,
                    e.role or "",
                    e.state or "",
                    format_devices(e.devices),
                    round(e.bytes / BYTES_PER_GB, 4),
                    colour,
                ]
            )
        rows.append(
            [number, e.step, round(e.start_s, 6), round(e.end_s, 6), 1 if index in critical else 0]
        )
    return ops, rows


def panel_data(layout: GanttLayout, title: str | None = None) -> dict[str, Any]:
    """The JSON of one panel: lanes, bars, the events they reference, steps and syncs."""
    used = sorted({event for _, _, event in layout.bars} | {s[0] for s in layout.syncs})
    local = {index: n for n, index in enumerate(used)}
    ops, events = _events_json(layout, used)
    return {
        "title": layout.title if title is None else title,
        "t0": layout.t0,
        "t1": layout.t1,
        "lanes": [
            [lane.label, lane.group, lane.kind, lane.rows, round(lane.utilisation, 4), lane.count]
            for lane in layout.lanes
        ],
        "ops": ops,
        "events": events,
        "bars": [[lane, row, local[event]] for lane, row, event in layout.bars],
        "syncs": [[local[e], lo, hi] for e, lo, hi in layout.syncs],
        "steps": [[step, round(start, 6)] for step, start in layout.step_starts],
    }


def _header(layout: GanttLayout) -> str:
    cells = "".join(
        f"<div>{html.escape(k)} <b>{html.escape(v)}</b></div>" for k, v in layout.summary.items()
    )
    return f'<div class="header">{cells}</div>'


def _legend(colours: dict[str, str]) -> str:
    parts = []
    for role, colour in colours.items():
        parts.append(
            f'<span><svg width="14" height="12"><rect width="14" height="12" fill="{colour}"/>'
            f"</svg>{html.escape(role)}</span>"
        )
    hatch = (
        '<svg width="22" height="8"><rect width="22" height="8" fill="#888"/>'
        '<path d="{d}" stroke="#fff" stroke-width="1.6"/></svg>'
    )
    parts.append(f"<span>{hatch.format(d='M0,8 l8,-8 M6,8 l8,-8 M12,8 l8,-8')}offload</span>")
    parts.append(f"<span>{hatch.format(d='M0,0 l8,8 M6,0 l8,8 M12,0 l8,8')}reload</span>")
    parts.append(
        '<span><svg width="22" height="12"><rect x="1" y="1" width="20" height="10" fill="#bbb"'
        ' stroke="#111" stroke-width="1.6"/></svg>critical path</span>'
    )
    return '<div class="legend">' + "".join(parts) + "</div>"


def _stage_table(rows: Sequence[StageRow]) -> str:
    body = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.role)}</td>"
        f'<td class="num">{format_seconds(r.seconds)}</td>'
        f'<td class="num">{r.share * 100:.1f} %</td>'
        f"<td>{'yes' if r.critical else ''}</td></tr>"
        for r in rows
    )
    return (
        '<table class="stages"><tr><th>stage</th><th>role</th><th>time / step</th>'
        f"<th>share of work</th><th>critical</th></tr>{body}</table>"
    )


def render_html(
    layouts: Sequence[GanttLayout],
    *,
    title: str,
    intro: str = "",
    panel_titles: Sequence[str] | None = None,
) -> str:
    """The page for one or more timelines on one time axis (the comparison passes two)."""
    colours: dict[str, str] = {}
    for layout in layouts:
        for role, colour in layout.colours.items():
            colours.setdefault(role, colour)
    titles = list(panel_titles) if panel_titles else [lay.title for lay in layouts]
    data = {
        "title": title,
        "colours": colours,
        "panels": [panel_data(lay, t) for lay, t in zip(layouts, titles, strict=True)],
    }
    # "</" would end the script element early; JSON allows the escaped form.
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    headers = []
    for layout, panel_title in zip(layouts, titles, strict=True):
        heading = f"<h2>{html.escape(panel_title)}</h2>" if len(layouts) > 1 else ""
        table = _stage_table(stage_table(layout.timeline, tuple(sorted(layout.critical))))
        headers.append(
            f"{heading}{_header(layout)}<details><summary>time per stage</summary>{table}</details>"
        )
    collapsed = any(lay.collapsed for lay in layouts)
    note = " GPUs that ran identical ops are collapsed into one band (×count)." if collapsed else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_asset("gantt.css")}</style></head>
<body>
<h1>{html.escape(title)}</h1>
{intro}
{"".join(headers)}
{_legend(colours)}
<div class="controls"><button id="zoom-in">zoom in</button><button id="zoom-out">zoom out</button>
<button id="zoom-reset">reset</button><label><input type="checkbox" id="show-crit" checked>
critical path</label><span class="hint">wheel: zoom · drag or shift+wheel: scroll ·
double-click: reset · hover a bar for details.{note}</span></div>
<div id="gantt"><div id="tip"></div></div>
<script id="rlplex-data" type="application/json">{payload}</script>
<script>{_asset("gantt.js")}</script>
</body></html>
"""


def gantt_html(layout: GanttLayout) -> str:
    """The page of one timeline."""
    return render_html([layout], title=layout.title, panel_titles=[""])


def write_html(layout: GanttLayout, path: str | Path, memory: Sequence[Any] = ()) -> Path:
    """Write :func:`gantt_html` to ``path`` and return it.

    ``memory``: a plan's memory strips (GPU groups and hosts), drawn as SVG under
    the chart (see :mod:`rlplex.viz.memory_svg`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page = gantt_html(layout)
    if memory:
        from rlplex.viz.memory_svg import memory_svg

        svg = memory_svg(memory, layout.t0, layout.t1 - layout.t0, layout.colours)
        page = page.replace("</body></html>", svg + "\n</body></html>", 1)
    path.write_text(page, encoding="utf-8")
    return path
