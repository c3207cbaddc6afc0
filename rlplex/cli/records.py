"""Commands that read recorded runs: replay, whatif."""

from __future__ import annotations

import json
from html import escape as escape_html
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from rlplex.cli.app import app, console, print_table, user_errors, warn
from rlplex.cli.options import (
    NO_RECORD_OPTIONS,
    GanttOpt,
    JsonOpt,
    RecordArg,
    RecordConfigOpt,
    RecordOptions,
    SetOpt,
    one_sweep,
    record_options,
)
from rlplex.cli.render import reading_record, write_timeline_views


@app.command()
@user_errors
@record_options
def replay(
    record: RecordArg,
    config: RecordConfigOpt,
    json_: JsonOpt = False,
    gantt: GanttOpt = None,
    set_: SetOpt = None,
    options: RecordOptions = NO_RECORD_OPTIONS,
) -> None:
    """Replay recorded stage timings through the config's plan: recorded vs predicted per step.

    Unattributed time is the recorded step time that the recorded stages do not
    explain (driver overhead, data loading, logging). --set overrides the config.

    Recorded seconds stay as measured, whatever devices --set gives the roles:
    whatif rescales them to other placements.
    """
    from rlplex.reports.records import GANTT_STEPS, RecordSource, replay_report
    from rlplex.viz.paths import check_view_paths

    check_view_paths(gantt=gantt)  # before the replay is computed, not after
    source = RecordSource(record, config, options.record_format, options.skip_bad_lines,
                          options.config_format, options.costs, env=options.env)  # fmt: skip
    with reading_record(record, "replaying"):
        report = replay_report(source, set_ or ())
    warn(report.warnings)
    if gantt is not None:
        write_timeline_views(
            report.timeline(), report.config, gantt=gantt,
            title=f"replay of {record.name} on {config.name}",
        )  # fmt: skip
    if json_:
        print(json.dumps(report.to_dict(), indent=2))
        return
    title = f"replay of {record} ({report.run.format}) through the plan of {config}"
    print_table(replay_table(report.result, escape(f"{title} ({report.plan.mode})")))
    console.print(
        "unattributed: recorded step time that the recorded stages do not explain"
        " (driver, data loading, logging); error: predicted vs recorded",
        style="dim",
        highlight=False,
    )
    if report.memory is not None:
        print_table(memory_table(report.memory))
        for line in memory_lines(report.memory):
            console.print(line, highlight=False)
    if gantt is not None:
        console.print(f"wrote {escape(str(gantt))} (first {GANTT_STEPS} steps)", highlight=False)


@app.command()
@user_errors
@record_options
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
    config_set: Annotated[
        list[str] | None,
        typer.Option(
            "--config-set",
            help="Override KEY=VALUE of --config itself, and so of every alternative derived"
            " from it (e.g. cluster.gpu=h100 for a launch script, which names no GPU)."
            " Repeatable.",
        ),
    ] = None,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            metavar="<str>",  # as a one-value option shows; it is not repeatable
            help="KEY=V1,V2,...: run the what-if at each value of a --config key (set on the"
            " recorded config and every alternative) and say whether the best stays best.",
        ),
    ] = None,
    options: RecordOptions = NO_RECORD_OPTIONS,
) -> None:
    """Replay the recorded work under other placements, modes or GPU counts; best first.

    Each recorded stage's seconds scale from the GPUs its role had in --config (d0)
    to those it has in the alternative (d) as seconds * (d0/d)**S. Alternatives:
    --set (one), --alt (repeatable), --alt-config (repeatable), --auto. Unlike
    replay's and calibrate's, --set here is an alternative: --config-set changes the
    recorded config (and every alternative but --alt-config files).

    Example: --alt "4/12 async: roles.actor_infer.devices=0-3 roles.actor_train.devices=4-15
    pipeline.mode=async pipeline.max_staleness=1"
    """
    from rlplex.reports.records import RecordSource, whatif_report
    from rlplex.viz.paths import check_view_paths

    check_view_paths(gantt=gantt)  # before the alternatives are planned, not after
    source = RecordSource(record, config, options.record_format, options.skip_bad_lines,
                          options.config_format, options.costs,
                          tuple(config_set or ()), env=options.env)  # fmt: skip
    spec = one_sweep(sweep)
    if spec is not None:
        from rlplex.cli.sweep import print_whatif_sweep, refuse_if_none_ran
        from rlplex.reports.sweep import parse_sweep, whatif_sweep

        key, values = parse_sweep(spec)
        with reading_record(record, "replaying"):
            swept = whatif_sweep(source, key, values, overrides=set_ or (), alts=alt or (),
                                 alt_configs=alt_config or (), auto=auto,
                                 scaling=scaling or (), fit_from=fit_from or ())  # fmt: skip
        warn(swept.warnings)
        print_whatif_sweep(swept, json_)
        refuse_if_none_ran(bool(swept.bests), spec)
        return
    with reading_record(record, "replaying"):
        report = whatif_report(source, overrides=set_ or (), alts=alt or (),
                               alt_configs=alt_config or (), auto=auto, scaling=scaling or (),
                               fit_from=fit_from or ())  # fmt: skip
    warn(report.warnings)
    if gantt is not None:
        _whatif_views(report, gantt)
    if json_:
        print(json.dumps(report.to_dict(), indent=2))
        return
    run = report.run
    title = f"what if: {record} ({run.format}, {len(run.steps)} steps) recorded with {config}"
    print_table(whatif_table(report.result, escape(title)))
    for note in report.notes:
        console.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    if gantt is not None:
        console.print(f"wrote {escape(str(gantt))} (every alternative, best first)",
                      highlight=False)  # fmt: skip


def _fmt(value: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def replay_table(result: Any, title: str) -> Table:
    """Per-step recorded, predicted, error and unattributed time (first 10 and last 5 steps)."""
    table = Table(title=title)
    for name in ("step", "recorded s", "predicted s", "error", "unattributed s"):
        table.add_column(name, justify="right")
    steps = result.steps
    shown = steps if len(steps) <= 20 else (*steps[:10], *steps[-5:])
    for i, s in enumerate(shown):
        if len(steps) > 20 and i == 10:
            table.add_row("...", "", "", "", "")
        table.add_row(str(s.step), _fmt(s.recorded_s), _fmt(s.predicted_s),
                      _fmt(s.error_pct, "+.1f", " %"), _fmt(s.unattributed_s))  # fmt: skip
    table.add_section()
    table.add_row("mean", _fmt(result.mean_recorded_s), _fmt(result.mean_predicted_s),
                  _fmt(result.mean_abs_error_pct, ".1f", " % abs"),
                  _fmt(result.mean_unattributed_s))  # fmt: skip
    return table


def memory_table(check: Any) -> Table:
    """Per op: the plan's GB for the measured process against the op's recorded peak."""
    first, last = check.steps[0], check.steps[-1]
    table = Table(title=f"memory per op, GB per device (median of steps {first}-{last})")
    table.add_column("op")
    table.add_column("process of")
    for name in ("planned GB", "measured peak GB", "error"):
        table.add_column(name, justify="right")
    for o in check.ops:
        table.add_row(o.op, o.role, f"{o.predicted_gb:.3f}", f"{o.measured_gb:.3f}",
                      _fmt(o.error_pct, "+.1f", " %"))  # fmt: skip
    return table


def memory_lines(check: Any) -> list[str]:
    """One line per device: the plan's peak against the largest measured total."""
    lines = []
    for d in check.devices:
        used = f"; NVML, contexts and caches included: {d.used_gb:.3f} GB" if d.used_gb else ""
        verdict = "UNDER-PREDICTED" if d.under_predicted else "covered"
        lines.append(
            f"GPU {d.device}: planned peak {d.predicted_gb:.3f} GB, measured"
            f" {d.measured_gb:.3f} GB allocated (during {d.during}){used}: {verdict}"
        )
    return lines


def whatif_table(result: Any, title: str) -> Table:
    """Each alternative's predicted period and speed-up, best first."""
    table = Table(title=title)
    table.add_column("alternative")
    table.add_column("mode")
    table.add_column("period s", justify="right")
    table.add_column("speed-up", justify="right")
    for o in result.alternatives:
        mode = o.mode + (f" k={o.staleness}" if o.staleness else "")
        if o.error:
            table.add_row(escape(o.label), "-", "-", f"[red]{escape(o.error)}[/]")
            continue
        label = f"[bold]{escape(o.label)}[/]" if o is result.baseline else escape(o.label)
        period = _fmt(o.period_s) + (" *" if o.warning else "")
        table.add_row(label, mode, period, _fmt(o.speedup, ".2f", "x"))
    return table


def _whatif_views(report: Any, gantt: Path) -> None:
    """Every alternative that runs, replayed in stacked panels best first, under the table.

    The table is drawn from ``report.to_dict()``, the object ``--json`` prints,
    and each panel's timeline is headed by its outcome's period, so the page
    shows the figures of the table and of --json, none recomputed.
    """
    from rlplex.viz.compare import Comparison, alternatives_table, write_panels

    result = report.result
    drawn = [o for o in result.alternatives if o.plan is not None and o.period_s is not None]
    intro = ""
    base, best = result.baseline, report.best
    if best is not None and base.period_s is not None:
        diff = Comparison(base.label, best.label, base.period_s, best.period_s or 0.0).text()
        intro = f'<div class="diff">{escape_html(diff)}</div>'
    intro += alternatives_table(report.to_dict())
    title = f"what if: {report.source.record.name}, {len(result.alternatives)} alternatives"
    write_panels([report.timeline(o) for o in drawn], names=[o.label for o in drawn],
                 gantt=gantt, title=title, intro=intro)  # fmt: skip
