"""Rendering helpers shared by commands: the device grid, role tables, "wrote" lines, bars."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from rlplex.cli.app import console
from rlplex.config import Config

if TYPE_CHECKING:
    from rlplex.timeline.record import Timeline


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
                "host_states": role.host_states,
            }
            for name, role in cfg.roles.items()
        },
        "pipeline": {
            "mode": cfg.pipeline.mode,
            "max_staleness": cfg.pipeline.max_staleness,
            "stages": list(cfg.pipeline.names),
        },
        "estimated": sorted(cfg.estimated),
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


def write_timeline_views(
    timeline: Any,
    cfg: Config,
    *,
    gantt: Path | None = None,
    png: Path | None = None,
    trace: Path | None = None,
    title: str = "",
    memory: Any = (),
) -> list[Path]:
    """Write the asked-for views of a timeline of ``cfg``; return the paths written.

    ``memory``: a plan's memory strips, drawn under the Gantt (plan times only).
    """
    from rlplex.viz.views import write_views

    return write_views(timeline, gantt=gantt, png=png, trace=trace, title=title,
                       gpus_per_node=cfg.cluster.gpus_per_node, memory=memory)  # fmt: skip


def placement_table(candidates: list[Any]) -> Table:
    """The placements the search scored, best first (the first is the one planned)."""
    from rlplex.resources.devices import format_devices

    table = Table(title="placements searched (best first; the first is planned)")
    async_search = any(getattr(c, "staleness", 0) for c in candidates)
    columns = ["#", "colocated groups: GPUs", *(["k"] if async_search else []), "period",
               "lower bound"]  # fmt: skip
    for column in columns:
        table.add_column(column, justify="right" if column in ("#", "k", "period") else "left")
    for rank, cand in enumerate(candidates, start=1):
        groups = "  |  ".join(
            f"{'+'.join(group)}: {format_devices(cand.placement[group[0]])}"
            for group in cand.groups
        )
        k = [str(cand.staleness)] if async_search else []
        table.add_row(str(rank), groups, *k, f"{cand.period_s:.2f} s",
                      f"{cand.lower_bound_s:.2f} s")  # fmt: skip
    return table


@contextmanager
def search_progress(show: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A transient progress bar on stderr fed by the placement search's ``progress(done, total)``.

    Yields the callback (None when ``show`` is false). The bar appears once a
    search has at least two candidates to score; a later search (the next
    staleness of an async search) restarts it with its own total.
    """
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = None

        def advance(done: int, total: int) -> None:
            nonlocal task
            if total < 2:
                return
            if task is None:
                task = bar.add_task("placement search", total=total)
            bar.update(task, completed=done, total=total)

        yield advance


SPINNER_BYTES = 16 * 2**20
"""A record this large (a file, or a TensorBoard folder's event files) takes seconds to
read: 100,000 steps of verl's console log are about 25 MB and 3 s here."""


def record_bytes(path: Path) -> int:
    """The bytes a record's import reads: the file's, or a folder's event files' (0 when it
    cannot be read: the import says why)."""
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*tfevents*") if p.is_file())
        return path.stat().st_size
    except OSError:
        return 0


@contextmanager
def reading_record(path: Path, what: str = "reading") -> Iterator[None]:
    """A transient spinner on stderr while a large record is read and replayed (none for a
    small one, or when stderr is not a terminal)."""
    from rich.console import Console

    err = Console(stderr=True)
    size = record_bytes(path)
    if size < SPINNER_BYTES or not err.is_terminal:
        yield
        return
    with err.status(f"{what} {escape(str(path))} ({size / 2**20:,.0f} MB) ...", spinner="dots"):
        yield


def stage_rich_table(timeline: Timeline, title: str = "time per stage") -> Table:
    """A rich Table: stage, role, seconds per step, share of the step, on the critical path."""
    from rlplex.viz.critical import format_seconds
    from rlplex.viz.views import stage_rows  # lazy: the other commands need no viz

    table = Table(title=title)
    for column, justify in (("stage", "left"), ("role", "left"), ("time / step", "right"),
                            ("share of work", "right"), ("critical", "center")):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in stage_rows(timeline):
        if row.seconds <= 0 and row.kind in ("offload", "reload"):
            continue  # free transfers (dropped or clean state) only add noise
        table.add_row(
            row.name,
            row.role,
            format_seconds(row.seconds),
            f"{row.share * 100:.1f} %",
            "[bold]yes[/]" if row.critical else "",
        )
    return table
