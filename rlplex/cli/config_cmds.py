"""Commands that read a config: validate, show, dag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from rlplex.cli.app import WRITTEN, app, console, print_table, read_config, user_errors
from rlplex.cli.options import (
    NO_OPTIONS,
    ConfigArg,
    ConfigOptions,
    CostsOpt,
    EnvOpt,
    JsonOpt,
    SetOpt,
    config_options,
)
from rlplex.cli.render import print_device_grid, print_wrote, roles_json


@app.command()
@user_errors
@config_options
def validate(config: ConfigArg, options: ConfigOptions = NO_OPTIONS) -> None:
    """Check a config file; exit 2 with the field at fault if it is wrong."""
    cfg = options.load(config)
    console.print(
        f"[green]ok[/] {config}: {cfg.format} config, {len(cfg.roles)} roles,"
        f" {len(cfg.pipeline.stages)} stages, {cfg.cluster.num_gpus} GPUs,"
        f" {cfg.pipeline.mode} mode",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
@user_errors
@config_options
def show(
    config: ConfigArg,
    json_: JsonOpt = False,
    options: ConfigOptions = NO_OPTIONS,
) -> None:
    """Show roles (devices, workers, nodes, states) and which role sits on which GPU."""
    cfg = options.load(config)
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
        mark = "*" if cfg.is_estimated(f"roles.{name}.states") else ""
        states = ", ".join(f"{k} {v:g}{mark}" for k, v in role.states.items()) or "-"
        if role.host_states:
            states += "; host " + ", ".join(
                f"{k} {v:g}" + ("*" if cfg.is_estimated(f"roles.{name}.host_states.{k}") else "")
                for k, v in role.host_states.items()
            )
        nodes = ",".join(map(str, role.nodes(cfg.cluster))) or "-"
        table.add_row(
            name, devices, str(role.num_gpus_per_worker), str(role.world_size), nodes, states
        )
    print_table(table)
    if cfg.estimated:
        console.print(
            "* estimated from the model, workload and GPU (rlplex estimate shows how): "
            + ", ".join(sorted(cfg.estimated)),
            highlight=False,
            soft_wrap=True,
        )
    if not print_device_grid(cfg):
        console.print(f"[dim]device grid omitted: {cfg.cluster.num_gpus} GPUs[/]")


@app.command()
@user_errors
def dag(
    config: ConfigArg,
    format_: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", help="dot or mermaid (default: mermaid, or --out's suffix)."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write here: .svg/.png drawn by dot; .dot/.gv/.mmd/.txt text.",
        ),
        WRITTEN,
    ] = None,
    set_: SetOpt = None,
    config_format: Annotated[
        str | None,
        typer.Option(
            "--config-format",
            help="Read the file as native, roll, rlinf, verl, nemo_rl or openrlhf.",
        ),
    ] = None,
    costs: CostsOpt = None,
    env: EnvOpt = None,
) -> None:
    """Print the step DAG as Graphviz DOT or Mermaid text.

    With ``--out F.svg`` or ``--out F.png`` the DOT text is rendered by Graphviz's
    ``dot`` (an error says how to install it when it is missing).
    """
    from rlplex.config.loading import check_format, parse_env
    from rlplex.dag.export import to_dot, to_mermaid
    from rlplex.errors import ConfigError
    from rlplex.viz.dag import suffix_format

    exporters = {"dot": to_dot, "mermaid": to_mermaid}
    if format_ is not None and format_ not in exporters:
        raise ConfigError("must be dot or mermaid", field="--format", value=format_)
    # The suffix says what the file is (.svg/.png drawn from DOT, .dot/.gv/.mmd text); a
    # --format that says otherwise is refused rather than ignored.
    implied = suffix_format(out) if out is not None else None
    if out is not None and format_ is not None and implied not in (None, format_):
        text = {"dot": "DOT", "mermaid": "Mermaid"}[implied]
        what = "drawn from DOT" if out.suffix.lower() in (".svg", ".png") else f"{text} text"
        raise ConfigError(
            f"does not match --out {out}: a {out.suffix} file is {what}"
            f" (give --format {implied}, or no --format)",
            field="--format",
            value=format_,
        )
    cfg = read_config(
        config, set_, check_format(config_format, "--config-format"), costs, parse_env(env or ())
    )
    if out is None:
        print(exporters[format_ or "mermaid"](cfg.pipeline), end="")
        return
    from rlplex.viz.dag import write_dag

    # A .txt takes --format; anything else (.gif, .jpg) is refused rather than mislabelled.
    if out.suffix.lower() == ".txt":
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(exporters[format_ or "mermaid"](cfg.pipeline), encoding="utf-8")
    else:
        write_dag(cfg.pipeline, out)
    print_wrote(out)
