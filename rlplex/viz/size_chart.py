"""The sizing picture: step time against GPU count, one point per candidate plan.

``rlplex size`` plans many candidates per GPU count; the picture shows them
all at once (coloured by mode, one marker per GPU type) with the Pareto front
joined, so a user sees where adding GPUs stops paying. It takes plain points
(no report objects) and writes a PNG, or an HTML page with the PNG inline
and the front as a table.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MARKERS = ("o", "s", "^", "D", "v", "P")


@dataclass(frozen=True)
class SizePoint:
    """One planned candidate that fits."""

    gpus: int
    """GPUs of the candidate, in all (the chart's x axis)."""
    period_s: float
    """Its planned steady-state step, seconds (the y axis)."""
    mode: str
    """``sync``, ``async k=1`` ..."""
    gpu: str
    """GPU preset."""
    label: str = ""
    """What the candidate is (placement, tp, sharding, mode)."""


def _figure(points: Sequence[SizePoint], front: Sequence[SizePoint], title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    modes = sorted({p.mode for p in points})
    gpus = sorted({p.gpu for p in points})
    colours = plt.get_cmap("tab10")
    for i, mode in enumerate(modes):
        for j, gpu in enumerate(gpus):
            sel = [p for p in points if p.mode == mode and p.gpu == gpu]
            if sel:
                ax.scatter(
                    [p.gpus for p in sel],
                    [p.period_s for p in sel],
                    color=colours(i % 10),
                    marker=MARKERS[j % len(MARKERS)],
                    alpha=0.6,
                    s=28,
                    label=f"{mode}, {gpu}",
                )
    if front:
        ordered = sorted(front, key=lambda p: p.gpus)
        ax.plot(
            [p.gpus for p in ordered],
            [p.period_s for p in ordered],
            color="black",
            linewidth=1.5,
            marker="*",
            markersize=11,
            label="Pareto front",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted({p.gpus for p in points})
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("step time (s)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig, plt


def write_size_png(
    points: Sequence[SizePoint], front: Sequence[SizePoint], path: str | Path, title: str
) -> Path:
    """Draw the candidates and the front to ``path`` (PNG), its folder made if need be."""
    fig, plt = _figure(points, front, title)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
    return Path(path)


def write_size_html(
    points: Sequence[SizePoint],
    front: Sequence[SizePoint],
    path: str | Path,
    title: str,
    rows: Sequence[Sequence[str]] = (),
    header: Sequence[str] = (),
) -> Path:
    """A self-contained HTML page: the picture inline, then the table ``rows``; its folder
    made if need be, as every other writer's."""
    fig, plt = _figure(points, front, title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    image = base64.b64encode(buf.getvalue()).decode("ascii")
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif}}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
        "text-align:right}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><img alt='step time against GPUs'"
        f" src='data:image/png;base64,{image}'><table><tr>{head}</tr>{body}</table>"
        "</body></html>"
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(page, encoding="utf-8")
    return Path(path)
