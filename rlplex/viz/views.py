"""One call that writes every view of a timeline, for the CLI commands that produce one.

``rlplex plan``, ``rlplex simulate`` and ``rlplex viz`` all end the same way:
draw the timeline as HTML and/or PNG, export a Perfetto trace, and print the
per-stage table with the critical path. :func:`write_views` and
:func:`stage_rich_table` are that shared ending.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
) -> list[Path]:
    """Write the HTML Gantt, the PNG and the Perfetto trace that were asked for.

    Returns the paths written, in that order. ``colours`` (role -> colour,
    e.g. :func:`rlplex.dag.export.role_colours` of the config's pipeline)
    keeps the chart's colours equal to the DAG picture's.
    """
    if png is not None:
        from rlplex.viz.png import check_png_path

        check_png_path(png)  # before anything is written
    written: list[Path] = []
    layout: GanttLayout | None = None
    if gantt is not None or png is not None:
        layout = build_layout(
            timeline, title=title, collapse=collapse, colours=colours, gpus_per_node=gpus_per_node
        )
    if gantt is not None and layout is not None:
        from rlplex.viz.html import write_html

        written.append(write_html(layout, gantt))
    if png is not None and layout is not None:
        from rlplex.viz.png import write_png

        written.append(write_png(layout, png))
    if trace is not None:
        from rlplex.timeline.perfetto import write_trace

        written.append(write_trace(timeline, trace, gpus_per_node=gpus_per_node))
    return written


def stage_rows(timeline: Timeline) -> list[StageRow]:
    """The per-stage table of ``timeline`` with its critical path."""
    return stage_table(timeline, critical_path(timeline))


def stage_rich_table(timeline: Timeline, title: str = "time per stage") -> Any:
    """A rich Table: stage, role, seconds per step, share of the step, on the critical path."""
    from rich.table import Table

    table = Table(title=title)
    for column, justify in (("stage", "left"), ("role", "left"), ("s / step", "right"),
                            ("share", "right"), ("critical", "center")):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in stage_rows(timeline):
        if row.seconds <= 0 and row.kind in ("offload", "reload"):
            continue  # free transfers (dropped or clean state) only add noise
        table.add_row(
            row.name,
            row.role,
            f"{row.seconds:.2f}",
            f"{row.share * 100:.1f} %",
            "[bold]yes[/]" if row.critical else "",
        )
    return table


CONFIG_SUFFIXES = (".yaml", ".yml")


def planned_timeline(
    path: str | Path,
    *,
    steps: int = 3,
    overrides: list[str] | None = None,
    fmt: str | None = None,
    costs: Path | None = None,
    baseline: str | None = None,
) -> Timeline:
    """The predicted timeline of a config: its plan, simulated for ``steps`` steps.

    Uses :func:`rlplex.sim.simulate` when the simulator is there, else the
    plan's own ops (one step, or the unrolled async steps).
    """
    from rlplex.config import load_config
    from rlplex.errors import RlplexError

    cfg = load_config(path, overrides=overrides or (), format=fmt, costs=costs)
    try:
        from rlplex.plan import make_plan  # type: ignore[attr-defined]
    except ImportError:
        raise RlplexError(f"{path}: the planner is not available in this build") from None
    plan = make_plan(cfg, baseline=baseline) if baseline else make_plan(cfg)
    try:
        from rlplex.sim import simulate  # type: ignore[attr-defined]
    except ImportError:
        simulate = None
    if simulate is not None:
        timeline = simulate(plan, cfg, steps=steps)
    else:
        from rlplex.timeline.record import timeline_from_plan

        timeline = timeline_from_plan(plan)
    from rlplex.dag.export import role_colours

    meta = {
        "gpus_per_node": cfg.cluster.gpus_per_node,
        "config": str(path),
        # The DAG picture's colours, so chart and DAG agree.
        "role_colours": role_colours(cfg.pipeline),
    }
    return timeline.model_copy(update={"meta": {**meta, **timeline.meta}})


def load_timeline(
    path: str | Path,
    *,
    steps: int = 3,
    overrides: list[str] | None = None,
    fmt: str | None = None,
    costs: Path | None = None,
    skip_bad_lines: bool = False,
) -> Timeline:
    """A timeline from a JSONL record, an rlplex Perfetto trace, or a config (its plan).

    A record's bad lines are errors (file:line), or with ``skip_bad_lines``
    skipped and counted in ``meta["read_warnings"]``.

    Raises:
        ConfigError: the file is missing, is not one of those, or holds no ops.
    """
    from rlplex.errors import ConfigError
    from rlplex.timeline.perfetto import read_timeline

    if Path(path).suffix.lower() in CONFIG_SUFFIXES:
        return planned_timeline(path, steps=steps, overrides=overrides, fmt=fmt, costs=costs)
    try:
        timeline = read_timeline(path, skip_bad_lines=skip_bad_lines)
    except ConfigError as exc:
        if not exc.message.startswith("bad event"):
            raise
        raise ConfigError(
            f"not an rlplex timeline ({exc.field or 'event'}: {exc.message}); a verl or ROLL log is"
            " drawn by `rlplex replay LOG --config FILE --gantt F.html`",
            file=exc.file,
            line=exc.line,
        ) from None
    if not timeline.events:
        raise ConfigError(
            "no ops to draw: expected an rlplex timeline (JSONL, one op a line), a trace"
            " rlplex wrote, or a config (.yaml)",
            file=str(path),
        )
    return timeline
