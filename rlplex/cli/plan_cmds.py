"""Commands that plan: plan, simulate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from rlplex.cli.app import WRITTEN, app, console, print_table, user_errors
from rlplex.cli.options import (
    NO_OPTIONS,
    NO_VIEWS,
    BaselineOpt,
    ConfigArg,
    ConfigOptions,
    JsonOpt,
    ViewPaths,
    config_options,
    view_options,
)
from rlplex.cli.render import (
    placement_table,
    print_device_grid,
    print_wrote,
    search_progress,
    write_timeline_views,
)


@app.command()
@user_errors
@config_options
@view_options
def plan(
    config: ConfigArg,
    auto: Annotated[
        bool, typer.Option("--auto", help="Search the placement of every GPU role.")
    ] = False,
    baseline: BaselineOpt = None,
    verify: Annotated[
        bool, typer.Option("--verify", help="Check every validity rule of the plan.")
    ] = False,
    json_: JsonOpt = False,
    views: ViewPaths = NO_VIEWS,
    options: ConfigOptions = NO_OPTIONS,
) -> None:
    """Plan a step: placement, parallel stages, offload/reload ops, period and bound."""
    from rlplex.config import ASYNC_STALENESS_0
    from rlplex.estimate.context import NOT_ASYNC_FOR_PARTIAL
    from rlplex.reports.plan import plan_report

    # --auto searches the staleness too (k >= 1), so "staleness 0 runs like sync" does not
    # apply, nor that a partial-rollout engine cannot stream for want of staleness.
    cfg = options.load(
        config, unless=(ASYNC_STALENESS_0, NOT_ASYNC_FOR_PARTIAL) if auto else (), planned=True
    )
    with search_progress(show=not json_) as progress:
        report = plan_report(cfg, auto=auto, baseline=baseline, verify=verify, progress=progress)
    result, summary = report.plan, report.summary
    if views:
        from rlplex.plan.memory_lanes import memory_lanes

        written = write_timeline_views(
            report.timeline(),
            report.config,
            gantt=views.gantt,
            png=views.png,
            trace=views.trace,
            title=config.name,
            memory=memory_lanes(report.plan, report.config),
        )
        if not json_:
            print_wrote(*written)
    if json_:
        print(result.to_json())
        return
    print_device_grid(report.config)
    table = Table(title=f"plan of {escape(str(config))}" + (f" ({baseline})" if baseline else ""))
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("mode", f"{result.mode}" + (f", k={result.staleness}" if result.staleness else "")),
        ("period", f"{summary.period_s:.2f} s"),
        ("lower bound", f"{summary.lower_bound_s:.2f} s"),
        ("gap", f"{summary.gap * 100:.2f} %"),
        ("offloads per step", f"{summary.offloads} ({summary.offload_s:.2f} s)"),
        ("reloads per step", f"{summary.reloads} ({summary.reload_s:.2f} s)"),
        ("sequential baseline", f"{summary.sequential_s or 0:.2f} s"),
        ("speed-up vs sequential", f"{summary.speedup or 0:.2f}x"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    print_table(table)
    from rlplex.cli.estimate import print_plan_memory

    print_plan_memory(report.memory, report.config)
    print_host_peaks(report.plan, report.config)
    if report.candidates:
        print_table(placement_table(list(report.candidates)))
    for note in report.notes:
        console.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    if verify:
        console.print("[green]verified[/]: every validity rule holds", highlight=False)


def print_host_peaks(plan, config) -> None:
    """Each node's host-memory peak: the host copies it holds, next to the GPU peaks."""
    from rlplex.plan.host import host_peaks
    from rlplex.resources.devices import format_devices

    peaks = host_peaks(plan, config)
    rows: dict[tuple, list[int]] = {}
    for node, p in peaks.items():
        rows.setdefault((round(p.peak_gb, 3), tuple(sorted(p.held.items()))), []).append(node)
    table = Table(title="host memory per node at its peak (GB)")
    for column in ("nodes", "peak", "headroom", "at", "host copies at the peak"):
        table.add_column(
            column, justify="right" if column in ("peak", "headroom", "at") else "left"
        )
    for (_, held), nodes in rows.items():
        p = peaks[nodes[0]]
        table.add_row(
            format_devices(tuple(nodes)),
            f"{p.peak_gb:.2f}",
            f"{p.capacity_gb - p.peak_gb:.2f}",
            f"{p.at_s:.2f} s",
            " + ".join(f"{k} {gb:.2f}" for k, gb in held) or "-",
        )
    print_table(table)


@app.command()
@user_errors
@config_options
@view_options
def simulate(
    config: ConfigArg,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps to simulate.")] = 10,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the timeline JSONL here."), WRITTEN
    ] = None,
    baseline: BaselineOpt = None,
    jitter: Annotated[
        float, typer.Option("--jitter", min=0.0, help="Relative jitter of stage times.")
    ] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the jitter.")] = 0,
    json_: JsonOpt = False,
    views: ViewPaths = NO_VIEWS,
    options: ConfigOptions = NO_OPTIONS,
) -> None:
    """Simulate N steps of the plan: per-step times and the steady-state period."""
    from rlplex.plan import plan_with_config
    from rlplex.sim import simulate as run_simulation

    # The config the plan was made from: a placement the search chose is estimated there.
    cfg, result = plan_with_config(options.load(config, planned=True), baseline=baseline)
    timeline = run_simulation(result, cfg, steps=steps, jitter=jitter, seed=seed)
    if out is not None:
        timeline.write_jsonl(out)
    if views:
        written = write_timeline_views(
            timeline, cfg, gantt=views.gantt, png=views.png, trace=views.trace, title=config.name
        )
        if not json_:
            print_wrote(*written)
    step_s = [timeline.metrics[n]["step_s"] for n in range(steps)]
    if json_:
        summary = {
            "steps": steps,
            "step_s": step_s,
            "period_s": timeline.meta["period_s"],
            "plan_period_s": result.period_s,
            "out": str(out) if out else None,
        }
        print(json.dumps(summary, indent=2))
        return
    title = f"simulation of {config}: {steps} steps"
    # min_width: rich wraps a title to its table's width, and this table is narrow.
    table = Table(title=escape(title), min_width=min(len(title), console.width))
    table.add_column("step", justify="right")
    table.add_column("step_s", justify="right")
    shown = list(range(steps)) if steps <= 20 else [*range(10), *range(steps - 5, steps)]
    for n in shown:
        table.add_row(str(n), f"{step_s[n]:.2f}")
    print_table(table)
    console.print(
        f"steady-state period_s: {timeline.meta['period_s']:.2f} s (plan: {result.period_s:.2f} s)",
        highlight=False,
    )
    print_wrote(out)
