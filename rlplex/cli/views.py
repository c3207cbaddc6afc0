"""Commands that draw timelines: viz, compare."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlplex.cli.app import app, console, err_console, print_table, user_errors
from rlplex.cli.options import (
    CollapseOpt,
    ConfigStepsOpt,
    EnvOpt,
    FormatOpt,
    GanttOpt,
    PngOpt,
    SetOpt,
    SkipBadOpt,
    TraceOpt,
)
from rlplex.cli.render import print_wrote, stage_rich_table


@app.command()
@user_errors
def viz(
    timeline: Annotated[
        Path,
        typer.Argument(help="Timeline JSONL, a Perfetto trace written by rlplex, or a config."),
    ],
    gantt: GanttOpt = None,
    png: PngOpt = None,
    trace: TraceOpt = None,
    steps: ConfigStepsOpt = 3,
    collapse: CollapseOpt = None,
    title: Annotated[str | None, typer.Option("--title", help="Chart title.")] = None,
    set_: SetOpt = None,
    format_: FormatOpt = None,
    skip_bad_lines: SkipBadOpt = False,
    env: EnvOpt = None,
) -> None:
    """Draw a timeline (Gantt HTML/PNG, Perfetto trace) and print time per stage."""
    from rlplex.config.loading import parse_env
    from rlplex.reports.records import load_timeline
    from rlplex.viz.views import write_views

    record = load_timeline(
        timeline, steps=steps, overrides=set_, fmt=format_, skip_bad_lines=skip_bad_lines,
        env=parse_env(env or ()),
    )  # fmt: skip
    for warning in record.meta.get("read_warnings", ()):
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    written = write_views(
        record, gantt=gantt, png=png, trace=trace, title=title or timeline.name, collapse=collapse
    )
    print_table(stage_rich_table(record, title=f"time per stage: {escape(timeline.name)}"))
    print_wrote(*written)


@app.command()
@user_errors
def compare(
    a: Annotated[Path, typer.Argument(help="First timeline (JSONL, rlplex trace) or config.")],
    b: Annotated[
        Path | None,
        typer.Argument(help="Second timeline or config; omit it with --baseline."),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Compare config A's plan with this baseline of it."),
    ] = None,
    gantt: GanttOpt = None,
    png: PngOpt = None,
    steps: ConfigStepsOpt = 3,
    collapse: CollapseOpt = None,
    set_: SetOpt = None,
    format_: FormatOpt = None,
    env: EnvOpt = None,
) -> None:
    """Two timelines side by side on one time axis, with the difference in period."""
    from rlplex.config.loading import check_env_any, env_for, parse_env
    from rlplex.errors import ConfigError
    from rlplex.reports.records import load_timeline, planned_timeline
    from rlplex.viz.compare import write_comparison

    if b is not None and baseline is not None:
        raise ConfigError(
            "give a second timeline B or --baseline, not both", field="--baseline", value=baseline
        )
    if b is None and baseline is None:
        raise ConfigError("give either a second timeline B or --baseline NAME", field="B")
    given = parse_env(env or ())
    if baseline is not None:
        first = planned_timeline(
            a, steps=steps, overrides=set_, fmt=format_, baseline=baseline, env=given
        )
        second = planned_timeline(a, steps=steps, overrides=set_, fmt=format_, env=given)
        names = (f"{a.name} ({baseline})", f"{a.name} (planned)")
    else:
        assert b is not None
        # --env goes to whichever of the two is a launch script (the other may be a record)
        check_env_any([a, b], given)
        first = load_timeline(a, steps=steps, overrides=set_, fmt=format_, env=env_for(a, given))
        second = load_timeline(b, steps=steps, overrides=set_, fmt=format_, env=env_for(b, given))
        names = (a.name, b.name) if a.name != b.name else (str(a), str(b))
    result = write_comparison(first, second, names=names, gantt=gantt, png=png, collapse=collapse)
    console.print(escape(result.text()), highlight=False)
    for name, timeline in zip(names, (first, second), strict=True):
        scale = timeline.meta.get("time_scale_undone")
        if scale:
            console.print(
                f"note: {escape(name)} is a rehearsal at --time-scale {scale:g}; its times are"
                f" divided by {scale:g} to compare on the plan's time scale",
                highlight=False,
                soft_wrap=True,
            )
    print_wrote(gantt, png)
