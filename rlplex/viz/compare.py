"""Two or more timelines on one time axis, with the difference in period.

"Colocate or split?", "sync or async?", "predicted or measured?" are
answered by looking at two schedules at once. Both are laid out with one role
colour map, drawn in stacked panels that share the time axis (each from its
own first op), and headed by the two periods and their difference.
``rlplex whatif`` draws every alternative this way (:func:`write_panels`),
under a table of the figures its ``--json`` prints (:func:`alternatives_table`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlplex.timeline.record import Timeline
from rlplex.viz.critical import period_of
from rlplex.viz.layout import GanttLayout, build_layout, role_colour_map


@dataclass(frozen=True)
class Comparison:
    """How B's period differs from A's."""

    name_a: str
    """Label of the first timeline."""
    name_b: str
    """Label of the second timeline."""
    period_a_s: float
    """A's seconds per step."""
    period_b_s: float
    """B's seconds per step."""

    @property
    def diff_s(self) -> float:
        """B minus A: negative when B is faster."""
        return self.period_b_s - self.period_a_s

    @property
    def ratio(self) -> float:
        """B over A (0 when A's period is 0)."""
        return self.period_b_s / self.period_a_s if self.period_a_s > 0 else 0.0

    def text(self) -> str:
        """One line: both periods, the difference and the speed-up."""
        pct = f" ({(self.ratio - 1) * 100:+.1f} %)" if self.period_a_s > 0 else ""
        faster = ""
        if self.period_a_s > 0 and self.period_b_s > 0:
            speed = self.period_a_s / self.period_b_s
            faster = f"; {self.name_b} is {speed:.2f}× as fast as {self.name_a}"
        return (
            f"period {self.name_a} {self.period_a_s:.2f} s, {self.name_b} {self.period_b_s:.2f} s:"
            f" {self.diff_s:+.2f} s{pct}{faster}"
        )


def compare(a: Timeline, b: Timeline, names: tuple[str, str] = ("A", "B")) -> Comparison:
    """The period difference of two timelines."""
    return Comparison(names[0], names[1], period_of(a), period_of(b))


def comparison_layouts(
    a: Timeline,
    b: Timeline,
    names: tuple[str, str] = ("A", "B"),
    collapse: bool | None = None,
) -> tuple[GanttLayout, GanttLayout]:
    """Both layouts with one colour map, so a role has the same colour in both panels."""
    colours = role_colour_map(b, role_colour_map(a))
    return (
        build_layout(a, title=names[0], colours=colours, collapse=collapse),
        build_layout(b, title=names[1], colours=colours, collapse=collapse),
    )


def write_comparison(
    a: Timeline,
    b: Timeline,
    *,
    names: tuple[str, str] = ("A", "B"),
    gantt: str | Path | None = None,
    png: str | Path | None = None,
    collapse: bool | None = None,
) -> Comparison:
    """Write the side-by-side HTML and/or PNG and return the period comparison."""
    from rlplex.viz.paths import check_view_paths

    check_view_paths(gantt, png)  # before anything is written
    result = compare(a, b, names)
    layouts = comparison_layouts(a, b, names, collapse)
    title = f"{names[0]} vs {names[1]}"
    if gantt is not None:
        from rlplex.viz.html import render_html

        intro = f'<div class="diff">{html.escape(result.text())}</div>'
        path = Path(gantt)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            render_html(layouts, title=title, intro=intro, panel_titles=list(names)),
            encoding="utf-8",
        )
    if png is not None:
        from rlplex.viz.png import render_png

        render_png(layouts, png, title=title, panel_titles=list(names), subtitle=result.text())
    return result


def write_panels(
    timelines: Sequence[Timeline],
    *,
    names: Sequence[str],
    gantt: str | Path,
    title: str,
    intro: str = "",
    collapse: bool | None = None,
) -> Path:
    """Write one HTML page of ``timelines`` in stacked panels on one time axis, one colour map.

    ``intro`` is HTML put above the panels (a table of figures, a difference line).
    """
    from rlplex.viz.paths import check_html_path

    check_html_path(gantt)
    colours: dict[str, str] = {}
    for timeline in timelines:
        colours = role_colour_map(timeline, colours)
    layouts = [
        build_layout(timeline, title=name, colours=colours, collapse=collapse)
        for timeline, name in zip(timelines, names, strict=True)
    ]
    from rlplex.viz.html import render_html

    path = Path(gantt)
    path.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(layouts, title=title, intro=intro, panel_titles=list(names))
    path.write_text(page, encoding="utf-8")
    return path


ALTERNATIVES_JSON_ID = "alternatives-json"
"""The id of the page's ``<script type="application/json">`` holding the --json object."""


def _cell(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def alternatives_table(result: Mapping[str, Any]) -> str:
    """HTML of the ``rlplex whatif --json`` object: a table of every alternative, and the object.

    ``result`` is the JSON object itself (``alternatives``: label, mode,
    max_staleness, period_s, speedup, placement, error, warning; best first).
    Each cell formats one of its values as the terminal table does, each row
    carries the unrounded period and speed-up in ``data-`` attributes, and the
    object is embedded whole (id :data:`ALTERNATIVES_JSON_ID`), so the page shows
    the figures --json prints and nothing recomputed.
    """
    rows = []
    for alt in result.get("alternatives", ()):
        mode = "-" if alt.get("error") else str(alt.get("mode", "-"))
        if alt.get("max_staleness") and not alt.get("error"):
            mode += f" k={alt['max_staleness']}"
        placement = ", ".join(f"{role} {devs}" for role, devs in alt.get("placement", {}).items())
        note = alt.get("error") or alt.get("warning") or ""
        period, speedup = alt.get("period_s"), alt.get("speedup")
        rows.append(
            f'<tr data-label="{html.escape(str(alt.get("label", "")))}"'
            f' data-period-s="{"" if period is None else repr(float(period))}"'
            f' data-speedup="{"" if speedup is None else repr(float(speedup))}">'
            f"<td>{html.escape(str(alt.get('label', '')))}</td><td>{html.escape(mode)}</td>"
            f'<td class="num">{_cell(period, ".2f")}{" *" if alt.get("warning") else ""}</td>'
            f'<td class="num">{_cell(speedup, ".2f", "x")}</td>'
            f"<td>{html.escape(placement)}</td><td>{html.escape(str(note))}</td></tr>"
        )
    payload = json.dumps(result, separators=(",", ":")).replace("</", "<\\/")
    return (
        '<table class="stages alternatives"><tr><th>alternative</th><th>mode</th>'
        "<th>period s</th><th>speed-up</th><th>placement</th><th>note</th></tr>"
        + "".join(rows)
        + f'</table><script type="application/json" id="{ALTERNATIVES_JSON_ID}">{payload}</script>'
    )
