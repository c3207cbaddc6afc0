"""Rendering a sweep (``rlplex estimate --sweep``): a table, and a PNG of step and stages."""

from __future__ import annotations

import json
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from rlplex.cli.app import console, print_table
from rlplex.errors import ConfigError
from rlplex.reports.sweep import Sweep, WhatIfSweep


def _value(v: float | str) -> str:
    return escape(v) if isinstance(v, str) else f"{v:g}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def sweep_table(sweep: Sweep) -> Table:
    """The planned step and each stage's seconds at each swept value.

    One row per value, or, when there are fewer values than stages, one row per stage and
    a column per value: a terminal holds the narrower table without cutting numbers (rich
    would print ``121.…`` for 121.11 in a table wider than the screen).
    """
    title = f"{escape(sweep.config)}: planned step vs {escape(sweep.key)}"
    names = sweep.stage_names
    table = Table(title=title)
    if len(sweep.points) <= len(names):
        table.add_column("seconds", no_wrap=True)
        for point in sweep.points:
            table.add_column(_value(point.value), justify="right", no_wrap=True)
        table.add_row(
            "[bold]step (period)[/]",
            *(
                "[red]does not load[/]" if p.period_s is None else f"[bold]{p.period_s:.2f}[/]"
                for p in sweep.points
            ),
        )
        for name in names:
            table.add_row(
                escape(name),
                *(
                    "-" if p.period_s is None else _seconds(p.stages.get(name))
                    for p in sweep.points
                ),
            )
        return table
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("step (period) s", justify="right", style="bold", no_wrap=True)
    for name in names:
        table.add_column(f"{escape(name)} s", justify="right", no_wrap=True)
    for point in sweep.points:
        if point.period_s is None:
            table.add_row(_value(point.value), "[red]does not load[/]", *(["-"] * len(names)))
            continue
        table.add_row(
            _value(point.value),
            f"{point.period_s:.2f}",
            *(_seconds(point.stages.get(n)) for n in names),
        )
    return table


def refuse_if_none_ran(ran: bool, spec: str) -> None:
    """Exit status 2, after the table and each value's reason are printed, when no swept
    value loaded: the sweep measured nothing."""
    if not ran:
        raise ConfigError(
            "no swept value loads (each value's reason is printed above)", field="--sweep",
            value=spec,
        )  # fmt: skip


def print_sweep(sweep: Sweep) -> None:
    """The table, each failing value's reason, and the step's range."""
    print_table(sweep_table(sweep))
    for point in sweep.points:
        if point.error:
            console.print(
                f"[red]{escape(sweep.key)}={_value(point.value)}:[/] {escape(point.error)}",
                highlight=False,
                soft_wrap=True,
            )
    span = sweep.period_range()
    if span is not None:
        low, high = span
        console.print(
            f"step over the range: {low:.2f}-{high:.2f} s ({high / low:.2f}x)", highlight=False
        )


def draw_sweep(sweep: Sweep, path: Path) -> None:
    """A PNG: the step and every stage's seconds against the swept value (matplotlib, Agg).

    Raises:
        ConfigError: no value loads.
        OSError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loaded = [p for p in sweep.points if p.period_s is not None]
    if not loaded:
        raise ConfigError("no swept value loads: nothing to draw", field="--png", value=str(path))
    # Word values (GPU presets, models) sit side by side in the order given.
    words = any(isinstance(p.value, str) for p in loaded)
    xs = list(range(len(loaded))) if words else [float(p.value) for p in loaded]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    try:
        if words:
            ax.set_xticks(xs, [str(p.value) for p in loaded])
        ax.plot(xs, [p.period_s for p in loaded], marker="o", linewidth=2.4, label="step (period)")
        for name in sweep.stage_names:
            ax.plot(xs, [p.stages.get(name, float("nan")) for p in loaded], marker=".", label=name)
        ax.set_xlabel(sweep.key)
        ax.set_ylabel("seconds")
        ax.set_title(f"{Path(sweep.config).name}: planned step vs {sweep.key}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        # An OSError (a directory there) is the CLI's one line naming --png (user_errors).
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    finally:
        plt.close(fig)


def print_whatif_sweep(sweep: WhatIfSweep, json_: bool) -> None:
    """Each alternative's period at each swept value, the best, and whether it stays best."""
    if json_:
        print(json.dumps(sweep.to_json(), indent=2))
        return
    labels: dict[str, None] = {}
    for point in sweep.points:
        labels.update(dict.fromkeys(point.periods))
    table = Table(title=f"what if, over {escape(sweep.key)}: period s of each alternative")
    table.add_column("value", justify="right")
    table.add_column("best")
    for label in labels:
        table.add_column(escape(label), justify="right")
    for point in sweep.points:
        if point.error:
            table.add_row(_value(point.value), "[red]error[/]", *(["-"] * len(labels)))
            continue
        cells = [
            f"{p:.2f}" if (p := point.periods.get(label)) is not None else "-" for label in labels
        ]
        table.add_row(_value(point.value), escape(point.best or "-"), *cells)
    print_table(table)
    for point in sweep.points:
        if point.error:
            where = f"{escape(sweep.key)}={_value(point.value)}"
            console.print(f"[red]{where}:[/] {escape(point.error)}", highlight=False,
                          soft_wrap=True)  # fmt: skip
    if not sweep.bests:
        return  # nothing ran: the caller refuses the sweep
    if sweep.stays_best:
        console.print(
            f"the best alternative, {escape(sweep.bests[0])}, stays best over the swept range",
            highlight=False,
        )
    elif len(sweep.bests) == 1:
        failed = ", ".join(_value(p.value) for p in sweep.points if p.best is None)
        console.print(
            f"the best alternative, {escape(sweep.bests[0])}, is best at every value that ran"
            f" [yellow](not at {escape(failed)}: see above)[/]",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(
            "[yellow]the best alternative changes over the swept range:[/] "
            + ", ".join(f"{_value(p.value)}: {escape(p.best or 'none')}" for p in sweep.points),
            highlight=False,
            soft_wrap=True,
        )
