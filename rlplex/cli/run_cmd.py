"""The run command: execute a plan on Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlplex.cli.app import WRITTEN, app, console, err_console, user_errors
from rlplex.cli.options import (
    NO_OPTIONS,
    ConfigArg,
    ConfigOptions,
    JsonOpt,
    config_options,
)
from rlplex.cli.render import print_wrote
from rlplex.plan.ids import op_name


@app.command()
@user_errors
@config_options
def run(
    config: ConfigArg,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps to run.")] = 1,
    record: Annotated[
        Path, typer.Option("--record", help="Write the run's timeline JSONL here."), WRITTEN
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
    from rlplex.reports.run import RunOptions, python_setups, run_plan
    from rlplex.runtime import RunInterrupted

    cfg = options.load(config, planned=True)
    settings = RunOptions(steps, record, time_scale, address, timeout)
    progress = Progress(
        TextColumn("[bold]step"), MofNCompleteColumn(), BarColumn(), TimeElapsedColumn(),
        TextColumn("{task.description}"), console=err_console, transient=False,
    )  # fmt: skip
    task = progress.add_task("planning", total=steps, start=True)

    def on_step(step: int, metrics: dict[str, Any]) -> None:
        # One figure per step on the bar, both on the run's time scale; the full
        # metrics go to the record and, with RLPLEX_LOG=debug, to the log.
        progress.advance(task)
        measured, planned = metrics.get("step_s"), metrics.get("planned_step_s")
        if isinstance(measured, float) and isinstance(planned, float):
            progress.update(task, description=f"last step {measured:.3g} s (plan {planned:.3g} s)")

    def on_ops(running: list[str]) -> None:
        stages = sorted({op_name(op) for op in running})
        more = " ..." if len(stages) > 4 else ""
        progress.update(task, description=", ".join(stages[:4]) + more)

    def on_start(_plan: Any) -> None:
        # The bar appears once the record is claimed: a refused record stays one line.
        progress.start()
        progress.update(task, description="starting workers")

    try:
        report = run_plan(cfg, settings, setups=python_setups(cfg), on_start=on_start,
                          on_step=on_step, on_ops=on_ops)  # fmt: skip
    except RunInterrupted as exc:
        progress.stop()
        err_console.print(
            f"[yellow]stopped:[/] {exc}; record flushed to {escape(str(record))}", highlight=False
        )
        raise typer.Exit(130) from None
    finally:
        progress.stop()
    if json_:
        print(json.dumps(report.to_dict(), indent=2))
        return
    predicted, replayed = report.predicted_period_s, report.replayed_period_s
    console.print(
        f"measured period {report.measured_period_s or 0:.3f} s"
        + (f" vs predicted {predicted:.3f} s" if predicted is not None else "")
        + (
            f" (replay with measured stage times: {replayed:.3f} s)" if replayed is not None else ""
        ),
        highlight=False,
    )
    print_wrote(record)
