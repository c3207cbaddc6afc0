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

ConfigArg = Annotated[Path, typer.Argument(help="Config file: native, ROLL, RLinf or verl-style YAML.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config field: KEY=VALUE with a dotted key. Repeatable."),
]
FormatOpt = Annotated[
    str | None,
    typer.Option("--format", help="Read the file as native, roll, rlinf or verl (default: detected)."),
]
CostsOpt = Annotated[
    Path | None,
    typer.Option("--costs", help="YAML with stage costs (stages: {NAME: {seconds: ...}}) for imported configs."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


def user_errors(fn: F) -> F:
    """Turn user-fixable errors into one message on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RlplexError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
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


def device_grid(cfg: Config) -> Table:
    """A table with one row per node and one column per GPU, listing the roles on it."""
    cluster = cfg.cluster
    table = Table(title="device grid: roles on each GPU", show_lines=True)
    table.add_column("node")
    for gpu in range(cluster.gpus_per_node):
        table.add_column(f"gpu {gpu}", overflow="fold")
    for node in range(cluster.nodes):
        cells = []
        for gpu in range(cluster.gpus_per_node):
            rank = node * cluster.gpus_per_node + gpu
            names = [n for n, r in cfg.roles.items() if rank in r.devices]
            cells.append("\n".join(names) or "[dim]idle[/]")
        table.add_row(str(node), *cells)
    return table


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
    for column in ("role", "devices", "GPUs/worker", "world size", "nodes", "states (GB per device)"):
        table.add_column(column)
    for name, role in cfg.roles.items():
        devices = "auto" if role.auto else (format_devices(role.devices) or "cpu")
        states = ", ".join(f"{k} {v:g}" for k, v in role.states.items()) or "-"
        nodes = ",".join(map(str, role.nodes(cfg.cluster))) or "-"
        table.add_row(name, devices, str(role.num_gpus_per_worker), str(role.world_size), nodes, states)
    console.print(table)
    if cfg.cluster.num_gpus <= 64:
        console.print(device_grid(cfg))
    else:
        console.print(f"[dim]device grid omitted: {cfg.cluster.num_gpus} GPUs[/]")


@app.command()
@user_errors
def dag(
    config: ConfigArg,
    format_: Annotated[str, typer.Option("--format", "-f", help="dot or mermaid.")] = "mermaid",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write to this file instead of stdout.")] = None,
    set_: SetOpt = None,
    config_format: Annotated[str | None, typer.Option("--config-format", help="Read the file as native, roll, rlinf or verl.")] = None,
) -> None:
    """Print the step DAG as Graphviz DOT or Mermaid text."""
    from rlplex.dag.export import to_dot, to_mermaid
    from rlplex.errors import ConfigError

    exporters = {"dot": to_dot, "mermaid": to_mermaid}
    if format_ not in exporters:
        raise ConfigError("must be dot or mermaid", field="--format", value=format_)
    cfg = read_config(config, set_, config_format)
    text = exporters[format_](cfg.pipeline)
    if out is None:
        print(text, end="")
    else:
        out.write_text(text, encoding="utf-8")
        console.print(f"wrote {out}")


def main() -> None:
    """Entry point of the ``rlplex`` script."""
    app()


if __name__ == "__main__":
    main()
