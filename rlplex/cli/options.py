"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigArg = Annotated[
    Path, typer.Argument(help="Config file: native, ROLL, RLinf or verl-style YAML.")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config field: KEY=VALUE with a dotted key. Repeatable."),
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format", help="Read the file as native, roll, rlinf or verl (default: detected)."
    ),
]
CostsOpt = Annotated[
    Path | None,
    typer.Option(
        "--costs",
        help="YAML with stage costs (stages: {NAME: {seconds: ...}}) for imported configs.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

GanttOpt = Annotated[
    Path | None, typer.Option("--gantt", help="Write a self-contained HTML Gantt chart here.")
]
PngOpt = Annotated[Path | None, typer.Option("--png", help="Write a PNG Gantt chart here.")]
TraceOpt = Annotated[
    Path | None, typer.Option("--trace", help="Write a Perfetto/Chrome trace (JSON) here.")
]
ConfigStepsOpt = Annotated[int, typer.Option("--steps", help="Steps to simulate for a config.")]
CollapseOpt = Annotated[
    bool | None,
    typer.Option(
        "--collapse/--no-collapse",
        help="Collapse GPUs that ran identical ops into one band (default: past 32 GPUs).",
    ),
]


RecordArg = Annotated[
    Path, typer.Argument(help="A run's log: rlplex record, verl JSONL or console log, ROLL stdout.")
]
RecordConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="The config the recorded run used (its placement).")
]
RecordFormatOpt = Annotated[
    str | None,
    typer.Option("--format", help="Read the record as rlplex, verl or roll (default: detected)."),
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad-lines", help="Skip malformed log lines with a warning.")
]
ConfigFormatOpt = Annotated[
    str | None,
    typer.Option("--config-format", help="Read the config as native, roll, rlinf or verl."),
]
