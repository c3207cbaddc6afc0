"""``rlplex size``: how many GPUs of which type, rendered (table, JSON, PNG, HTML, config)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rlplex.cli.app import (
    WRITTEN,
    app,
    console,
    declare_output,
    err_console,
    print_table,
    user_errors,
    warn,
)
from rlplex.cli.options import ConfigArg, CostsOpt, EnvOpt, FormatOpt, JsonOpt, SetOpt
from rlplex.cli.render import print_wrote


@app.command()
@user_errors
def size(
    config: ConfigArg,
    gpus: Annotated[
        str | None,
        typer.Option("--gpus", help="GPU counts to try, e.g. 8,16,32,64 (whole nodes)."),
    ] = None,
    max_gpus: Annotated[
        int | None,
        typer.Option("--max-gpus", help="Try one node, then doubling, up to this many GPUs."),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="GPU presets to try, e.g. h100,h20 (default: cluster.gpu)."),
    ] = None,
    price: Annotated[
        str | None,
        typer.Option("--price-per-gpu-hour", help="Price of one GPU-hour, for cost per 1k steps."),
    ] = None,
    set_: SetOpt = None,
    format_: FormatOpt = None,
    costs: CostsOpt = None,
    env: EnvOpt = None,
    json_: JsonOpt = False,
    png: Annotated[
        Path | None,
        typer.Option("--png", help="Draw step time against GPUs (PNG) here."),
        WRITTEN,
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write the picture and the front (HTML) here."),
        WRITTEN,
    ] = None,
    out_config: Annotated[
        int | None,
        typer.Option("--out-config", help="Write the plan of row N as a native config."),
    ] = None,
    out_file: Annotated[
        Path | None,
        typer.Option("--out-file", help="Where --out-config writes (default: FILE.sizeN.yaml)."),
        WRITTEN,
    ] = None,
) -> None:
    """Size a run: the fastest plan that fits on each GPU count and type, and the front.

    Reads any config ``plan`` reads (native, ROLL, RLinf, verl, NeMo RL, a launch script),
    with ``--set``.
    """
    from rlplex.config.loading import parse_env
    from rlplex.errors import ConfigError
    from rlplex.reports.size import (
        counts_up_to,
        parse_gpu_counts,
        parse_gpu_types,
        parse_price,
        read_base,
        size_report,
        write_config,
    )

    if gpus is not None and max_gpus is not None:
        raise ConfigError("give --gpus or --max-gpus, not both", field="--max-gpus", value=max_gpus)
    price_value = parse_price(price)
    counts = parse_gpu_counts(gpus) if gpus is not None else None
    overrides = tuple(set_ or ())
    given_env = parse_env(env or ())
    _, base = read_base(config, overrides=overrides, format=format_, costs=costs, env=given_env)
    types = parse_gpu_types(gpu, base.cluster.gpu)
    if counts is None:
        per_node = base.cluster.gpus_per_node
        counts = counts_up_to(max_gpus if max_gpus is not None else 8 * per_node, per_node)
    if out_config is not None and out_config < 1:
        raise ConfigError("must be a row number >= 1", field="--out-config", value=out_config)
    from rlplex.viz.paths import check_html_path, check_png_path

    if png is not None:
        check_png_path(png)
    if html is not None:
        check_html_path(html, "--html")
    if json_:
        report = size_report(
            config,
            counts,
            types,
            price_per_gpu_hour=price_value,
            costs=costs,
            overrides=overrides,
            format=format_,
            progress=None,
            env=given_env,
        )
    else:
        bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        )
        with bar:
            task = bar.add_task("sizing", total=None)

            def progress(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, description=escape(label[:60]))

            report = size_report(
                config,
                counts,
                types,
                price_per_gpu_hour=price_value,
                costs=costs,
                overrides=overrides,
                format=format_,
                progress=progress,
                env=given_env,
            )
    warn(report.warnings)
    written: list[Path] = []
    if out_config is not None:
        target = out_file or Path(f"{config.stem}.size{out_config}.yaml")
        if out_file is None:
            declare_output(target, "--out-config")
        write_config(report, out_config, target)
        written.append(target)
    title = f"rlplex size {config.name}"
    points, front = _points(report)
    header, rows = _front_rows(report)
    if png is not None:
        from rlplex.viz.size_chart import write_size_png

        written.append(write_size_png(points, front, png, title))
    if html is not None:
        from rlplex.viz.size_chart import write_size_html

        written.append(write_size_html(points, front, html, title, rows, header))
    if json_:
        print(json.dumps(report.to_dict(), indent=2))
        return
    front = len(report.front)
    titles = (
        f"{escape(config.name)}: Pareto front of step time vs GPU-hours",
        "other GPU counts: the fastest plan of each",
    )
    for title_text, part in zip(titles, (rows[:front], rows[front:]), strict=True):
        if not part:
            continue
        table = Table(title=title_text)
        for column in header:
            left = column in ("GPU", "placement", "mode")
            table.add_column(column, justify="left" if left else "right")
        for row in part:
            table.add_row(*row)
        print_table(table)
    for gpu_type, n in report.smallest.items():
        console.print(f"smallest that fits on {gpu_type}: {n} GPUs", highlight=False)
    for r in report.rows:
        if r.best is None:
            console.print(
                f"{r.gpus} x {r.gpu} does not fit: {escape(r.reason or '')}",
                highlight=False,
                soft_wrap=True,
            )
    print_wrote(*written)


def _points(report):
    from rlplex.viz.size_chart import SizePoint

    def point(s):
        return SizePoint(s.knobs.gpus, s.period_s, s.knobs.mode, s.knobs.gpu, s.knobs.label())

    return [point(s) for s in report.candidates if s.fits], [point(s) for s in report.front]


def _front_rows(report) -> tuple[list[str], list[list[str]]]:
    header = ["#", "GPUs", "GPU", "placement", "tp", "shard", "mode", "step s"]
    header += ["tok/s/GPU", "GPU-h/1k"]
    if report.price_per_gpu_hour is not None:
        header.append("cost/1k")
    header += ["GPU GB", "host GB"]
    rows = []
    for i, s in enumerate(report.numbered, 1):  # GPU/host GB: peaks over the step
        k = s.knobs
        row = [str(i), str(k.gpus), k.gpu, k.placement, str(k.rollout_tp), k.sharding, k.mode]
        row += [
            f"{s.period_s:.2f}",
            f"{s.tokens_per_s_per_gpu:.0f}" if s.tokens_per_s_per_gpu else "-",
            f"{s.gpu_hours_per_1000:.1f}",
        ]
        if report.price_per_gpu_hour is not None:
            row.append(f"{s.cost_per_1000:.2f}")
        row += [f"{s.peak_gpu_gb:.1f}", f"{s.peak_host_gb:.1f}"]
        rows.append(row)
    return header, rows
