"""Rendering ``rlplex estimate`` of a config that does not fit: every figure, the shortfalls."""

from __future__ import annotations

import json

from rich.markup import escape
from rich.table import Table

from rlplex.cli.app import console, err_console, print_table
from rlplex.cli.stage_lines import print_stage_lines
from rlplex.reports.misfit import MisfitReport


def print_misfit(report: MisfitReport, json_: bool) -> None:
    """Stage seconds, GB per GPU of every role (over-GPU figures in red), then each shortfall."""
    if json_:
        print(json.dumps(report.to_json(), indent=2))
        return
    est = report.estimate
    cap = report.gpu_memory_gb
    stages = Table(title=f"estimated stages of {escape(report.config)} (does NOT fit)")
    for column in ("stage", "kind", "seconds", "bound", "memory GB"):
        stages.add_column(
            column, justify="left" if column in ("stage", "kind", "bound") else "right"
        )
    bad = {s.stage for s in report.shortfalls if s.stage}
    for name, s in est.stages.items():
        mem = f"{s.memory_gb:.2f}" if s.memory_gb else "-"
        stages.add_row(
            f"[red]{escape(name)}[/]" if name in bad else escape(name), s.kind,
            f"{s.seconds:.2f} s" if s.seconds is not None and s.bound != "given" else "-",
            s.bound, mem,
        )  # fmt: skip
    print_table(stages)
    print_stage_lines(est, kv_room=False)
    roles = Table(title=f"estimated memory per GPU (GB; a GPU has {cap:g})")
    kinds = ("weights", "optimizer", "grads", "kv_cache")
    for column in ("role", "tp/pp/dp", "weights", "optim", "grads", "kv", "act", "peak"):
        roles.add_column(column, justify="left" if column == "role" else "right", no_wrap=True)
    for name, r in est.roles.items():
        states = {**r.states, **({"kv_cache": report.kv_cache_gb[name]}
                                 if name in report.kv_cache_gb else {})}  # fmt: skip
        cells = []
        for k in kinds:
            if k not in states:
                host = r.host_states.get(k)
                cells.append(f"{host:.2f} host" if host is not None else "-")
                continue
            over = k != "kv_cache" and states[k] > cap
            cells.append(f"[red]{states[k]:.2f}[/]" if over else f"{states[k]:.2f}")
        peak = sum(states.values()) + r.activations_gb
        shown = f"{peak:.2f}" + (f" [red](+{peak - cap:.2f})[/]" if peak > cap else "")
        roles.add_row(escape(name), f"{r.tp}/{r.pp}/{r.dp}", *cells,
                      f"{r.activations_gb:.2f}", shown)  # fmt: skip
    print_table(roles)
    console.print(
        "kv = the KV cache the GPU leaves; the seconds are estimated with the GPU memory"
        " raised (generation: the decode batch the workload wants).",
        highlight=False,
        soft_wrap=True,
    )
    err_console.print("[bold red]does not fit:[/]", highlight=False)
    for s in report.shortfalls:
        where = f"stage {s.stage} on {s.role}" if s.stage else f"{s.role} {s.what}"
        err_console.print(
            f"  {escape(where)}: needs {s.need_gb:.2f} GB of {s.cap_gb:.2f}"
            f" (over by {s.over_gb:.2f} GB, {s.need_gb / s.cap_gb:.2f}x); {escape(s.remedy)}",
            highlight=False,
            soft_wrap=True,
        )
    err_console.print(f"  ({escape(report.error)})", highlight=False, soft_wrap=True)
