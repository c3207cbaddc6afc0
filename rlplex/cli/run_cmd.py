"""The run command: execute a plan on Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlplex.cli.app import app, console, err_console, user_errors
from rlplex.cli.options import (
    NO_OPTIONS,
    ConfigArg,
    ConfigOptions,
    JsonOpt,
    config_options,
)
from rlplex.cli.render import print_wrote


@app.command()
@user_errors
@config_options
def run(
    config: ConfigArg,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps to run.")] = 1,
    record: Annotated[
        Path, typer.Option("--record", help="Write the run's timeline JSONL here.")
    ] = Path("run.jsonl"),
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale", min=0.0, help="Rehearsed stages sleep planned seconds times X."
        ),
    ] = 1.0,
    address: Annotated[
        str | None,
        typer.Option(
            "--address", help="Ray cluster to join (default: RAY_ADDRESS or a local Ray)."
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Longest one op may run, seconds.")
    ] = 600.0,
    json_: JsonOpt = False,
    options: ConfigOptions = NO_OPTIONS,
) -> None:
    """Run the plan on Ray (stages without code are rehearsed) and record what happened.

    With ``pipeline: {python: "module:function"}``, if the module also has a
    ``setups()`` function (role name -> ``setup(info) -> state``, as
    ``rlplex.pipelines.grpo`` and ``rlplex.pipelines.ppo`` have), it is called
    and its setups build the roles' state on the workers.
    """
    from rlplex.runtime import RunInterrupted
    from rlplex.runtime.cli_run import python_setups, run_plan

    cfg = options.load(config)
    try:
        result = run_plan(
            cfg,
            setups=python_setups(cfg),
            steps=steps,
            record=record,
            time_scale=time_scale,
            address=address,
            timeout_s=timeout,
            console=err_console,
        )
    except RunInterrupted as exc:
        err_console.print(
            f"[yellow]stopped:[/] {exc}; record flushed to {escape(str(record))}", highlight=False
        )
        raise typer.Exit(130) from None
    if json_:
        print(json.dumps(result, indent=2))
        return
    predicted = result["predicted_period_s"]
    replayed = result["replayed_period_s"]
    console.print(
        f"measured period {result['measured_period_s']:.3f} s"
        + (f" vs predicted {predicted:.3f} s" if predicted is not None else "")
        + (
            f" (replay with measured stage times: {replayed:.3f} s)" if replayed is not None else ""
        ),
        highlight=False,
    )
    print_wrote(record)
