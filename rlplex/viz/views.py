"""One call that writes every view of a timeline, for the CLI commands that produce one.

``rlplex plan``, ``rlplex simulate`` and ``rlplex viz`` all end the same way:
draw the timeline as HTML and/or PNG, export a Perfetto trace, and print the
per-stage table with the critical path. :func:`write_views` and
:func:`stage_rows` are that shared ending (the CLI renders the rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlplex.bulk import gc_paused
from rlplex.timeline.record import Timeline
from rlplex.viz.critical import StageRow, critical_path, stage_table
from rlplex.viz.layout import GanttLayout, build_layout


def write_views(
    timeline: Timeline,
    *,
    gantt: str | Path | None = None,
    png: str | Path | None = None,
    trace: str | Path | None = None,
    title: str = "",
    collapse: bool | None = None,
    colours: dict[str, str] | None = None,
    gpus_per_node: int | None = None,
    memory: Any = (),
) -> list[Path]:
    """Write the HTML Gantt, the PNG and the Perfetto trace that were asked for.

    ``memory``: memory strips of a plan (:func:`rlplex.plan.memory_lanes.memory_lanes`)
    drawn under the Gantt, on the same time axis as the timeline.

    Returns the paths written, in that order. ``colours`` (role -> colour,
    e.g. :func:`rlplex.dag.export.role_colours` of the config's pipeline)
    keeps the chart's colours equal to the DAG picture's.
    """
    from rlplex.viz.paths import check_view_paths

    check_view_paths(gantt, png, trace)  # before anything is written
    with gc_paused():
        return _write_views(
            timeline, gantt, png, trace, title, collapse, colours, gpus_per_node, memory
        )


def _write_views(
    timeline: Timeline,
    gantt: str | Path | None,
    png: str | Path | None,
    trace: str | Path | None,
    title: str,
    collapse: bool | None,
    colours: dict[str, str] | None,
    gpus_per_node: int | None,
    memory: Any = (),
) -> list[Path]:
    written: list[Path] = []
    layout: GanttLayout | None = None
    if gantt is not None or png is not None:
        layout = build_layout(
            timeline, title=title, collapse=collapse, colours=colours, gpus_per_node=gpus_per_node
        )
    if gantt is not None and layout is not None:
        from rlplex.viz.html import write_html

        written.append(write_html(layout, gantt, memory=memory))
    if png is not None and layout is not None:
        from rlplex.viz.png import write_png

        written.append(write_png(layout, png, memory=memory))
    if trace is not None:
        from rlplex.timeline.perfetto import write_trace

        written.append(write_trace(timeline, trace, gpus_per_node=gpus_per_node))
    return written


def stage_rows(timeline: Timeline) -> list[StageRow]:
    """The per-stage table of ``timeline`` with its critical path."""
    with gc_paused():
        return stage_table(timeline, critical_path(timeline))
