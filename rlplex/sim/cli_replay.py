"""The bodies of ``rlplex replay`` and ``rlplex whatif``: read, replay, print, draw.

Kept out of :mod:`rlplex.cli` so that the CLI module stays a thin list of
commands and options. Each function returns the JSON object and prints the
human form unless asked for JSON.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.sim.replay import ReplayResult, replay, replay_timeline, stage_warnings
from rlplex.sim.whatif import (
    Alternative,
    WhatIfResult,
    parse_alt,
    parse_scaling,
    whatif,
)
from rlplex.timeline.importers import RecordedRun, import_record

GANTT_STEPS = 8
"""Recorded steps drawn by ``--gantt`` (the table and JSON cover every step)."""

AUTO_TOP = 3
"""Placements ``--auto`` reports."""


def _fmt(value: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def _warn(console: Console, lines: Sequence[str]) -> None:
    for line in lines:
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _views(timeline: Any, cfg: Any, gantt: Path, title: str) -> None:
    from rlplex.dag.export import role_colours
    from rlplex.viz import write_views

    write_views(timeline, gantt=gantt, title=title, colours=role_colours(cfg.pipeline),
                gpus_per_node=cfg.cluster.gpus_per_node)  # fmt: skip


def replay_table(result: ReplayResult, title: str) -> Table:
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


def run_replay(
    record: Path,
    config: Path,
    *,
    record_format: str | None,
    skip_bad_lines: bool,
    overrides: Sequence[str],
    config_format: str | None,
    costs: Path | None,
    gantt: Path | None,
    as_json: bool,
    console: Console,
    err_console: Console,
) -> dict[str, Any]:
    """``rlplex replay``: replay a record through its config's plan."""
    from rlplex.plan import make_plan

    run = import_record(record, format=record_format, skip_bad_lines=skip_bad_lines)
    cfg = load_config(config, overrides=overrides, format=config_format, costs=costs)
    plan = make_plan(cfg)
    result = replay(run, cfg, plan)
    _warn(err_console, [*run.warnings, *result.warnings])
    if gantt is not None:
        timeline = replay_timeline(run, cfg, plan, steps=GANTT_STEPS)
        _views(timeline, cfg, gantt, f"replay of {record.name} on {config.name}")
    out = result.to_dict()
    if as_json:
        print(json.dumps(out, indent=2))
        return out
    title = f"replay of {record} ({run.format}) through the plan of {config} ({plan.mode})"
    console.print(replay_table(result, escape(title)))
    console.print(
        "unattributed: recorded step time that the recorded stages do not explain"
        " (driver, data loading, logging); error: predicted vs recorded",
        style="dim",
        highlight=False,
    )
    if gantt is not None:
        console.print(f"wrote {escape(str(gantt))} (first {GANTT_STEPS} steps)", highlight=False)
    return out


def whatif_table(result: WhatIfResult, title: str) -> Table:
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


def _fit_pairs(items: Sequence[str], config_format: str | None) -> list[tuple[RecordedRun, Any]]:
    pairs = []
    for item in items:
        rec, sep, cfg = item.partition("=")
        if not sep or not rec or not cfg:
            raise ConfigError("must be RECORD=CONFIG", field="--fit-from", value=item)
        pairs.append((import_record(rec), load_config(cfg, format=config_format)))
    return pairs


def run_whatif(
    record: Path,
    config: Path,
    *,
    overrides: Sequence[str],
    alts: Sequence[str],
    alt_configs: Sequence[Path],
    auto: bool,
    scaling: Sequence[str],
    fit_from: Sequence[str],
    record_format: str | None,
    skip_bad_lines: bool,
    config_format: str | None,
    costs: Path | None,
    gantt: Path | None,
    as_json: bool,
    console: Console,
    err_console: Console,
) -> dict[str, Any]:
    """``rlplex whatif``: the recorded work under each alternative, best first."""
    run = import_record(record, format=record_format, skip_bad_lines=skip_bad_lines)
    base = load_config(config, format=config_format, costs=costs)

    def load(extra: Sequence[str]) -> Any:
        return load_config(config, overrides=extra, format=config_format, costs=costs)

    alternatives = []
    if overrides and not auto:
        alternatives.append(Alternative(" ".join(overrides), load(overrides)))
    for text in alts:
        label, extra = parse_alt(text)
        alternatives.append(Alternative(label, load(extra)))
    for path in alt_configs:
        alternatives.append(Alternative(path.name, load_config(path, costs=costs)))
    if auto:
        # Every GPU role placed by the search, on the cluster and mode the --set gives.
        placed = [f"roles.{name}.devices=auto" for name in base.gpu_roles]
        alternatives.append(Alternative("auto", load([*overrides, *placed]), search=AUTO_TOP))
    if not alternatives:
        raise ConfigError(
            "give at least one alternative: --set KEY=VALUE, --alt 'LABEL: KEY=VALUE ...',"
            " --alt-config FILE or --auto",
            field="whatif",
        )
    result = whatif(run, base, alternatives, scaling=parse_scaling(scaling, base),
                    fit_from=_fit_pairs(fit_from, config_format))  # fmt: skip
    _warn(err_console, [*run.warnings, *_stage_warnings(run, base)])
    if gantt is not None:
        best = next((o for o in result.alternatives if o is not result.baseline and o.plan), None)
        _compare(run, result, best, gantt)
    out = result.to_dict()
    if as_json:
        print(json.dumps(out, indent=2))
        return out
    title = f"what if: {record} ({run.format}, {len(run.steps)} steps) recorded with {config}"
    console.print(whatif_table(result, escape(title)))
    if auto and overrides:
        console.print(f"note: auto searched with {escape(' '.join(overrides))}", highlight=False,
                      soft_wrap=True)  # fmt: skip
    flagged = next((o.warning for o in result.alternatives if o.warning), None)
    if flagged:
        console.print(f"note: * {escape(flagged)}", highlight=False, soft_wrap=True)
    for note in result.notes:
        console.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    if gantt is not None:
        console.print(f"wrote {escape(str(gantt))} (as recorded vs the best alternative)",
                      highlight=False)  # fmt: skip
    return out


def _stage_warnings(run: RecordedRun, cfg: Any) -> list[str]:
    from rlplex.plan.costs import stage_seconds
    from rlplex.sim.whatif import placement_of

    placement = placement_of(cfg)
    seconds = {s.name: stage_seconds(cfg, s, placement) for s in cfg.pipeline.stages}
    return stage_warnings(run, cfg, seconds)


def _compare(run: RecordedRun, result: WhatIfResult, best: Any, gantt: Path) -> None:
    """The recorded config's replay and the best alternative's, side by side."""
    from rlplex.viz import write_comparison

    base = result.baseline
    assert base.config is not None and base.plan is not None
    first = replay_timeline(run, base.config, base.plan, steps=GANTT_STEPS, factors=base.factors,
                            modelled=base.modelled)  # fmt: skip
    if best is None:
        from rlplex.viz import write_views

        write_views(first, gantt=gantt, title=base.label)
        return
    second = replay_timeline(run, best.config, best.plan, steps=GANTT_STEPS, factors=best.factors,
                             modelled=best.modelled)  # fmt: skip
    write_comparison(first, second, names=(base.label, best.label), gantt=gantt)
