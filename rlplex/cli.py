"""The ``rlplex`` command.

Every command that reads a config takes ``--set KEY=VALUE`` (repeatable,
dotted keys) and ``--format``. Bad input ends with one message naming the file,
the field and the value, and exit status 2; no traceback. structlog is
configured here (and in Ray's worker setup hook), nowhere else.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import structlog
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlplex.config import Config, load_config
from rlplex.errors import RlplexError

app = typer.Typer(
    name="rlplex",
    help="Plan, run and replay RL post-training steps as DAGs of stages on shared GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

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


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    return structlog.PrintLogger(file=sys.stderr)


def configure_logging(json_logs: bool | None = None) -> None:
    """structlog to stderr: coloured for a terminal, JSON lines otherwise."""
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        # Resolve sys.stderr per logger, not once: a test runner (or a caller) may swap
        # and close the stream the CLI first saw.
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def user_errors(fn: F) -> F:
    """Turn user-fixable errors into one message on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RlplexError as exc:
            # escape: messages quote values like [0, 1] or "[key]" that rich would eat as markup
            message = escape(str(exc))
            err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def read_config(
    path: Path, overrides: list[str] | None, fmt: str | None, costs: Path | None = None
) -> Config:
    return load_config(path, overrides=overrides or (), format=fmt, costs=costs)


@app.callback()
def _main() -> None:
    configure_logging()


@app.command()
@user_errors
def validate(
    config: ConfigArg, set_: SetOpt = None, format_: FormatOpt = None, costs: CostsOpt = None
) -> None:
    """Check a config file; exit 2 with the field at fault if it is wrong."""
    cfg = read_config(config, set_, format_, costs)
    console.print(
        f"[green]ok[/] {config}: {cfg.format} config, {len(cfg.roles)} roles,"
        f" {len(cfg.pipeline.stages)} stages, {cfg.cluster.num_gpus} GPUs,"
        f" {cfg.pipeline.mode} mode",
        highlight=False,
        soft_wrap=True,
    )


def roles_json(cfg: Config) -> dict[str, Any]:
    return {
        "cluster": cfg.cluster.model_dump(),
        "roles": {
            name: {
                "devices": list(role.devices) if not role.auto else "auto",
                "num_gpus_per_worker": role.num_gpus_per_worker,
                "world_size": role.world_size,
                "nodes": list(role.nodes(cfg.cluster)),
                "states": role.states,
            }
            for name, role in cfg.roles.items()
        },
        "pipeline": {
            "mode": cfg.pipeline.mode,
            "max_staleness": cfg.pipeline.max_staleness,
            "stages": list(cfg.pipeline.names),
        },
    }


GRID_STYLES = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
"""Colours of role letters in the device grid, in role order."""


def role_letters(cfg: Config) -> dict[str, str]:
    """A short label per GPU role for the device grid: A, B, C ... in file order."""
    labels: dict[str, str] = {}
    for i, name in enumerate(n for n, r in cfg.roles.items() if r.devices):
        labels[name] = chr(ord("A") + i) if i < 26 else f"R{i}"
    return labels


def device_grid(cfg: Config) -> tuple[Table, str]:
    """The grid (one row per node, one column per GPU, role letters in cells) and its legend."""
    cluster = cfg.cluster
    letters = role_letters(cfg)
    styles = {name: GRID_STYLES[i % len(GRID_STYLES)] for i, name in enumerate(letters)}
    table = Table(title="device grid: roles on each GPU", show_lines=True)
    table.add_column("node", justify="right", no_wrap=True, min_width=4)
    for gpu in range(cluster.gpus_per_node):
        table.add_column(str(gpu), justify="left", no_wrap=True)
    for node in range(cluster.nodes):
        cells = []
        for gpu in range(cluster.gpus_per_node):
            rank = node * cluster.gpus_per_node + gpu
            here = [n for n in letters if rank in cfg.roles[n].devices]
            # Each role keeps its own slot, so a role's letters line up down a column.
            slots = [f"[bold {styles[n]}]{letters[n]}[/]" if n in here else " " for n in letters]
            cells.append("".join(slots) if here else "[dim]·[/]")
        table.add_row(str(node), *cells)
    legend = "  ".join(
        f"[bold {styles[n]}]{letter}[/] {escape(n)} ({len(cfg.roles[n].devices)} GPUs)"
        for n, letter in letters.items()
    )
    return table, legend or "[dim]no GPU roles[/]"


def print_device_grid(cfg: Config) -> bool:
    """Print the device grid and its legend; False (nothing printed) past 256 GPUs."""
    if cfg.cluster.num_gpus > 256:
        return False
    grid, legend = device_grid(cfg)
    console.print(grid)
    console.print(legend, highlight=False)
    return True


def print_wrote(*paths: Path | None) -> None:
    """Say which files were written (None: not asked for, skipped)."""
    for path in paths:
        if path is not None:
            console.print(f"wrote {escape(str(path))}", highlight=False)


@app.command()
@user_errors
def show(
    config: ConfigArg,
    json_: JsonOpt = False,
    set_: SetOpt = None,
    format_: FormatOpt = None,
    costs: CostsOpt = None,
) -> None:
    """Show roles (devices, workers, nodes, states) and which role sits on which GPU."""
    cfg = read_config(config, set_, format_, costs)
    if json_:
        print(json.dumps(roles_json(cfg), indent=2))
        return
    from rlplex.resources.devices import format_devices

    table = Table(title=f"roles of {config} ({cfg.format})")
    for column in (
        "role",
        "devices",
        "GPUs/worker",
        "world size",
        "nodes",
        "states (GB per device)",
    ):
        table.add_column(column)
    for name, role in cfg.roles.items():
        devices = "auto" if role.auto else (format_devices(role.devices) or "cpu")
        states = ", ".join(f"{k} {v:g}" for k, v in role.states.items()) or "-"
        nodes = ",".join(map(str, role.nodes(cfg.cluster))) or "-"
        table.add_row(
            name, devices, str(role.num_gpus_per_worker), str(role.world_size), nodes, states
        )
    console.print(table)
    if not print_device_grid(cfg):
        console.print(f"[dim]device grid omitted: {cfg.cluster.num_gpus} GPUs[/]")


@app.command()
@user_errors
def dag(
    config: ConfigArg,
    format_: Annotated[str, typer.Option("--format", "-f", help="dot or mermaid.")] = "mermaid",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Write to this file instead of stdout (.svg/.png: drawn by dot)."
        ),
    ] = None,
    set_: SetOpt = None,
    config_format: Annotated[
        str | None,
        typer.Option("--config-format", help="Read the file as native, roll, rlinf or verl."),
    ] = None,
    costs: CostsOpt = None,
) -> None:
    """Print the step DAG as Graphviz DOT or Mermaid text.

    With ``--out F.svg`` or ``--out F.png`` the DOT text is rendered by Graphviz's
    ``dot`` (an error says how to install it when it is missing).
    """
    from rlplex.dag.export import to_dot, to_mermaid
    from rlplex.errors import ConfigError

    exporters = {"dot": to_dot, "mermaid": to_mermaid}
    if format_ not in exporters:
        raise ConfigError("must be dot or mermaid", field="--format", value=format_)
    cfg = read_config(config, set_, config_format, costs)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)  # as --gantt/--png/--out elsewhere
    if out is not None and out.suffix.lower() in (".svg", ".png"):
        from rlplex.viz.dag import render_dot

        out.write_bytes(render_dot(to_dot(cfg.pipeline), out.suffix.lower()[1:]))
        console.print(f"wrote {escape(str(out))}", highlight=False)
        return
    text = exporters[format_](cfg.pipeline)
    if out is None:
        print(text, end="")
    else:
        out.write_text(text, encoding="utf-8")
        console.print(f"wrote {out}")


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


def _write_views(
    timeline: Any,
    cfg: Config,
    config: Path,
    gantt: Path | None,
    png: Path | None,
    trace: Path | None,
    *,
    quiet: bool = False,
) -> None:
    """The views of a planned or simulated timeline, in the config's DAG colours."""
    from rlplex.dag.export import role_colours
    from rlplex.viz.views import write_views

    written = write_views(
        timeline, gantt=gantt, png=png, trace=trace, title=config.name,
        colours=role_colours(cfg.pipeline), gpus_per_node=cfg.cluster.gpus_per_node,
    )  # fmt: skip
    if not quiet:
        print_wrote(*written)


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
) -> None:
    """Draw a timeline (Gantt HTML/PNG, Perfetto trace) and print time per stage."""
    from rlplex.viz.views import load_timeline, stage_rich_table, write_views

    record = load_timeline(timeline, steps=steps, overrides=set_, fmt=format_)
    written = write_views(
        record, gantt=gantt, png=png, trace=trace, title=title or timeline.name, collapse=collapse
    )
    console.print(stage_rich_table(record, title=f"time per stage: {escape(timeline.name)}"))
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
) -> None:
    """Two timelines side by side on one time axis, with the difference in period."""
    from rlplex.errors import ConfigError
    from rlplex.viz.compare import write_comparison
    from rlplex.viz.views import load_timeline, planned_timeline

    if (b is None) == (baseline is None):
        raise ConfigError("give either a second timeline B or --baseline NAME", field="B")
    if baseline is not None:
        first = planned_timeline(a, steps=steps, overrides=set_, fmt=format_, baseline=baseline)
        second = planned_timeline(a, steps=steps, overrides=set_, fmt=format_)
        names = (f"{a.name} ({baseline})", f"{a.name} (planned)")
    else:
        assert b is not None
        first = load_timeline(a, steps=steps, overrides=set_, fmt=format_)
        second = load_timeline(b, steps=steps, overrides=set_, fmt=format_)
        names = (a.name, b.name) if a.name != b.name else (str(a), str(b))
    result = write_comparison(first, second, names=names, gantt=gantt, png=png, collapse=collapse)
    console.print(escape(result.text()), highlight=False)
    print_wrote(gantt, png)


def placement_table(candidates: list[Any]) -> Table:
    """The placements the search scored, best first (the first is the one planned)."""
    from rlplex.resources.devices import format_devices

    table = Table(title="placements searched (best first; the first is planned)")
    for column in ("#", "colocated groups: GPUs", "period", "lower bound"):
        table.add_column(column, justify="right" if column in ("#", "period") else "left")
    for rank, cand in enumerate(candidates, start=1):
        groups = "  |  ".join(
            f"{'+'.join(group)}: {format_devices(cand.placement[group[0]])}"
            for group in cand.groups
        )
        table.add_row(str(rank), groups, f"{cand.period_s:.2f} s", f"{cand.lower_bound_s:.2f} s")
    return table


@app.command()
@user_errors
def plan(
    config: ConfigArg,
    auto: Annotated[
        bool, typer.Option("--auto", help="Search the placement of every GPU role.")
    ] = False,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Print a baseline: sequential or naive-colocate."),
    ] = None,
    verify: Annotated[
        bool, typer.Option("--verify", help="Check every validity rule of the plan.")
    ] = False,
    gantt: GanttOpt = None,
    png: PngOpt = None,
    trace: TraceOpt = None,
    json_: JsonOpt = False,
    set_: SetOpt = None,
    format_: FormatOpt = None,
    costs: CostsOpt = None,
) -> None:
    """Plan a step: placement, parallel stages, offload/reload ops, period and bound."""
    from rlplex.plan import make_plan, verify_plan
    from rlplex.plan.report import placed_config, summarize

    cfg = read_config(config, set_, format_, costs)
    if auto:
        roles = {
            n: r.model_copy(update={"auto": True}) if r.is_gpu else r for n, r in cfg.roles.items()
        }
        cfg = cfg.model_copy(update={"roles": roles})
    candidates = []
    if any(r.auto for r in cfg.roles.values()):
        from rlplex.plan import plan_for_placement, search_placements

        candidates = search_placements(cfg, top=5)
        result = plan_for_placement(cfg, candidates[0].placement, baseline=baseline)
    else:
        result = make_plan(cfg, baseline=baseline)
    if verify:
        verify_plan(result, cfg)
    if gantt or png or trace:
        from rlplex.timeline.record import timeline_from_plan

        _write_views(timeline_from_plan(result), cfg, config, gantt, png, trace, quiet=json_)
    if json_:
        print(result.to_json())
        return
    placed = placed_config(cfg, result)
    sequential = result if baseline == "sequential" else make_plan(placed, baseline="sequential")
    summary = summarize(result, sequential.period_s)
    print_device_grid(placed)
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
        ("sequential baseline", f"{sequential.period_s:.2f} s"),
        ("speed-up vs sequential", f"{summary.speedup or 0:.2f}x"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if candidates:
        console.print(placement_table(candidates))
    if verify:
        console.print("[green]verified[/]: every validity rule holds", highlight=False)


@app.command()
@user_errors
def simulate(
    config: ConfigArg,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps to simulate.")] = 10,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the timeline JSONL here.")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Simulate a baseline: sequential or naive-colocate."),
    ] = None,
    jitter: Annotated[
        float, typer.Option("--jitter", min=0.0, help="Relative jitter of stage times.")
    ] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the jitter.")] = 0,
    gantt: GanttOpt = None,
    png: PngOpt = None,
    trace: TraceOpt = None,
    json_: JsonOpt = False,
    set_: SetOpt = None,
    format_: FormatOpt = None,
    costs: CostsOpt = None,
) -> None:
    """Simulate N steps of the plan: per-step times and the steady-state period."""
    from rlplex.plan import make_plan
    from rlplex.sim import simulate as run_simulation

    cfg = read_config(config, set_, format_, costs)
    result = make_plan(cfg, baseline=baseline)
    timeline = run_simulation(result, cfg, steps=steps, jitter=jitter, seed=seed)
    if out is not None:
        timeline.write_jsonl(out)
    if gantt or png or trace:
        _write_views(timeline, cfg, config, gantt, png, trace, quiet=json_)
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
    console.print(table)
    console.print(
        f"steady-state period_s: {timeline.meta['period_s']:.2f} s (plan: {result.period_s:.2f} s)",
        highlight=False,
    )
    print_wrote(out)


@app.command()
@user_errors
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
    set_: SetOpt = None,
    format_: FormatOpt = None,
    costs: CostsOpt = None,
) -> None:
    """Run the plan on Ray (stages without code are rehearsed) and record what happened.

    With ``pipeline: {python: "module:function"}``, if the module also has a
    ``setups()`` function (role name -> ``setup(info) -> state``, as
    ``rlplex.pipelines.grpo`` and ``rlplex.pipelines.ppo`` have), it is called
    and its setups build the roles' state on the workers.
    """
    from rlplex.runtime import RunInterrupted
    from rlplex.runtime.cli_run import python_setups, run_plan

    cfg = read_config(config, set_, format_, costs)
    try:
        result = run_plan(
            cfg,
            setups=python_setups(config),
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


def main() -> None:
    """Entry point of the ``rlplex`` script."""
    app()


if __name__ == "__main__":
    main()
