"""Commands that read recorded runs: replay, whatif."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rlplex.cli.app import app, console, err_console, user_errors
from rlplex.cli.options import (
    ConfigFormatOpt,
    CostsOpt,
    GanttOpt,
    JsonOpt,
    RecordArg,
    RecordConfigOpt,
    RecordFormatOpt,
    SetOpt,
    SkipBadOpt,
)


@app.command()
@user_errors
def replay(
    record: RecordArg,
    config: RecordConfigOpt,
    json_: JsonOpt = False,
    gantt: GanttOpt = None,
    set_: SetOpt = None,
    format_: RecordFormatOpt = None,
    skip_bad_lines: SkipBadOpt = False,
    config_format: ConfigFormatOpt = None,
    costs: CostsOpt = None,
) -> None:
    """Replay recorded stage timings through the config's plan: recorded vs predicted per step.

    Unattributed time is the recorded step time that the recorded stages do not
    explain (driver overhead, data loading, logging). --set overrides the config.
    """
    from rlplex.sim.cli_replay import run_replay

    run_replay(record, config, record_format=format_, skip_bad_lines=skip_bad_lines,
               overrides=set_ or (), config_format=config_format, costs=costs, gantt=gantt,
               as_json=json_, console=console, err_console=err_console)  # fmt: skip


@app.command()
@user_errors
def whatif(
    record: RecordArg,
    config: RecordConfigOpt,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="One alternative: override KEY=VALUE of --config. Repeatable."),
    ] = None,
    alt: Annotated[
        list[str] | None,
        typer.Option(
            "--alt",
            help="An alternative 'LABEL: KEY=VALUE KEY=VALUE' (overrides of"
            " --config, no spaces in values). Repeatable.",
        ),
    ] = None,
    alt_config: Annotated[
        list[Path] | None,
        typer.Option(
            "--alt-config", help="An alternative given as a whole config file. Repeatable."
        ),
    ] = None,
    auto: Annotated[
        bool,
        typer.Option(
            "--auto",
            help="Search the placement of every GPU role (on the cluster and"
            " mode --set gives) for the recorded work; report the best 3.",
        ),
    ] = False,
    scaling: Annotated[
        list[str] | None,
        typer.Option(
            "--scaling",
            help="STAGE=S: the stage takes t*(d0/d)**S on d instead of d0"
            " GPUs (wins over fitted and config exponents). Repeatable.",
        ),
    ] = None,
    fit_from: Annotated[
        list[str] | None,
        typer.Option(
            "--fit-from",
            help="RECORD=CONFIG: the same work recorded on other GPU"
            " counts; fits each such stage's exponent. Repeatable.",
        ),
    ] = None,
    json_: JsonOpt = False,
    gantt: GanttOpt = None,
    format_: RecordFormatOpt = None,
    skip_bad_lines: SkipBadOpt = False,
    config_format: ConfigFormatOpt = None,
    costs: CostsOpt = None,
) -> None:
    """Replay the recorded work under other placements, modes or GPU counts; best first.

    Each recorded stage's seconds scale from the GPUs its role had in --config (d0)
    to those it has in the alternative (d) as seconds * (d0/d)**S. Alternatives:
    --set (one), --alt (repeatable), --alt-config (repeatable), --auto.

    Example: --alt "4/12 async: roles.actor_infer.devices=0-3 roles.actor_train.devices=4-15
    pipeline.mode=async pipeline.max_staleness=1"
    """
    from rlplex.sim.cli_replay import run_whatif

    run_whatif(record, config, overrides=set_ or (), alts=alt or (), alt_configs=alt_config or (),
               auto=auto, scaling=scaling or (), fit_from=fit_from or (), record_format=format_,
               skip_bad_lines=skip_bad_lines, config_format=config_format, costs=costs,
               gantt=gantt, as_json=json_, console=console, err_console=err_console)  # fmt: skip
