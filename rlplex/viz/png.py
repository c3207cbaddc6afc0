"""PNG Gantt charts (matplotlib, Agg) for reports and READMEs.

Draws the same :class:`~rlplex.viz.layout.GanttLayout` as the HTML page:
lanes per GPU (or collapsed bands), a hatched copy-engine sub-lane for
offloads and reloads, CPU and driver lanes, step boundaries, weight syncs
across the lanes they join, the critical path outlined, and the header
figures in the title. matplotlib is imported inside the functions so that
``import rlplex`` stays light; one ``broken_barh`` call per lane and colour
keeps 1,024-GPU charts fast.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlplex.plan.ids import op_name
from rlplex.viz.layout import TRANSFER_KINDS, GanttLayout
from rlplex.viz.paths import check_png_path

ROW = 1.0
COPY = 0.42
GAP = 0.3
HATCH = {"offload": "////", "reload": "\\\\\\\\"}


def _lane_geometry(layout: GanttLayout) -> tuple[list[float], list[float], float]:
    """Top y of each lane, its height, and the total height (y grows downwards)."""
    tops, heights, y = [], [], 0.0
    for lane in layout.lanes:
        h = lane.rows * ROW + (COPY if lane.has_copy_lane else 0.0)
        tops.append(y)
        heights.append(h)
        y += h + GAP
    return tops, heights, y


def bar_label(name: str, seconds: float, seconds_per_char: float) -> str | None:
    """The longest of the stage's name, its first word, or its first three letters that fits.

    ``ref_logprob`` on a short bar becomes ``ref``; None when not even that fits
    (the legend and the HTML's hover still name it).
    """
    for text in (name, name.split("_")[0], name[:3]):
        if seconds >= seconds_per_char * (len(text) + 1):
            return text
    return None


def _draw_panel(ax: Any, layout: GanttLayout, origin: float, xmax: float, title: str) -> None:
    """One timeline on ``ax``, times shifted so that ``origin`` is 0."""
    import matplotlib.patches as mpatches

    events = layout.timeline.events
    tops, heights, total = _lane_geometry(layout)
    # Batch the bars: (lane, row, fill, hatch, critical) -> [(x, w)].
    batches: dict[tuple[int, int, str, str | None, bool], list[tuple[float, float]]] = defaultdict(
        list
    )
    for bar in layout.bars:
        event = events[bar.event]
        hatch = HATCH.get(event.kind) if event.kind in TRANSFER_KINDS else None
        key = (bar.lane, bar.row, layout.colour(event), hatch, bar.event in layout.critical)
        # Transfers get a visible minimum width: a 0.2 s offload in a 300 s step is still a fact.
        least = xmax / 250 if hatch else xmax * 1e-4
        batches[key].append((event.start_s - origin, max(event.duration_s, least)))
    for (lane, row, colour, hatch, critical), spans in batches.items():
        if row < 0:
            y, h = tops[lane] + layout.lanes[lane].rows * ROW + 0.04, COPY - 0.08
        else:
            y, h = tops[lane] + row * ROW + 0.08, ROW - 0.16
        ax.broken_barh(
            spans,
            (y, h),
            facecolors=colour,
            hatch=hatch,
            edgecolor="#111111" if critical else ("#333333" if hatch else "none"),
            linewidth=1.2 if critical else (0.4 if hatch else 0.0),
        )
    # Stage labels on bars wide enough to hold them (about 4 pt per character).
    axes_pt = ax.get_position().width * ax.figure.get_figwidth() * 72
    seconds_per_char = 4.2 * xmax / max(axes_pt, 1.0)
    for bar in layout.bars:
        event = events[bar.event]
        label = bar_label(event.stage or op_name(event.op), event.duration_s,
                          seconds_per_char)  # fmt: skip
        if bar.row < 0 or label is None:
            continue
        ax.text(
            event.start_s - origin + xmax / 400,
            tops[bar.lane] + bar.row * ROW + ROW / 2,
            label,
            va="center",
            ha="left",
            fontsize=6.5,
            color="white",
            clip_on=True,
        )
    for index, lo, hi in layout.syncs:
        event = events[index]
        colour = layout.colour(event)
        ax.add_patch(
            mpatches.Rectangle(
                (event.start_s - origin, tops[lo]),
                max(event.duration_s, xmax / 500),
                tops[hi] + heights[hi] - tops[lo],
                facecolor=colour,
                alpha=0.35,
                edgecolor=colour,
                linestyle="--",
            )
        )
    free_from = -math.inf  # step labels never overlap: one is skipped when it would
    for step, start in layout.step_starts:
        x = start - origin
        ax.axvline(x, color="#555555", linestyle="--", linewidth=0.7)
        text = f" step {step}" if x >= free_from else None
        if text is None and x >= free_from - seconds_per_char * 3:
            text = f" {step}"
        if text is not None and x >= free_from - seconds_per_char * 3:
            ax.text(x, -0.15, text, fontsize=7, va="bottom", color="#333333")
            free_from = x + seconds_per_char * (len(text) + 2)
    ax.set_ylim(total, -0.9)
    ax.set_xlim(0, xmax)
    ax.set_yticks([t + (h - (COPY if ln.has_copy_lane else 0)) / 2 for t, h, ln in
                   zip(tops, heights, layout.lanes, strict=True)])  # fmt: skip
    ax.set_yticklabels(
        [f"{lane.label}  {lane.utilisation * 100:.0f}%" for lane in layout.lanes], fontsize=7
    )
    ax.tick_params(axis="y", length=0)
    for t, h, lane in zip(tops, heights, layout.lanes, strict=True):
        if lane.has_copy_lane:
            ax.axhspan(t + lane.rows * ROW, t + h, color="#e4e4ea", zorder=0, linewidth=0)
    # Node/cpu group headings on the right edge of the label column.
    seen: set[str] = set()
    for t, lane in zip(tops, layout.lanes, strict=True):
        if lane.group not in seen:
            seen.add(lane.group)
            ax.axhline(t - GAP / 2, color="#999999", linewidth=0.5)
            ax.text(1.002, t, lane.group, transform=ax.get_yaxis_transform(), fontsize=6.5,
                    va="top", color="#555555")  # fmt: skip
    ax.set_title(title, fontsize=8.5, loc="left")
    ax.set_xlabel("seconds", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)


MEMORY_STRIP_IN = 0.9
"""Height of one memory strip, inches."""
MEMORY_GAP_IN = 0.32


def _memory_colours(keys: Sequence[str], layouts: Sequence[GanttLayout]) -> list[str]:
    """A role's states in its Gantt colour, lighter per state; transient memory grey."""
    from matplotlib.colors import to_rgb

    roles: dict[str, str] = {}
    for layout in layouts:
        roles.update(layout.colours)
    seen: dict[str, int] = {}
    out = []
    for key in keys:
        role = key.partition(".")[0]
        if role not in roles:
            out.append("#9e9e9e")
            continue
        n = seen.get(role, 0)
        seen[role] = n + 1
        r, g, b = to_rgb(roles[role])
        mix = min(0.6, 0.22 * n)
        out.append((r + (1 - r) * mix, g + (1 - g) * mix, b + (1 - b) * mix))
    return out


def _draw_memory(
    ax: Any, lane: Any, origin: float, xmax: float, layouts: Sequence[GanttLayout]
) -> None:
    """One memory strip: stacked GB by role.state, the capacity, the peak and its op."""
    keys = list(lane.stacks)
    xs = [t - origin for t in lane.times]
    colours = _memory_colours(keys, layouts)
    if keys and len(xs) > 1:
        ax.stackplot(xs, *[lane.stacks[k] for k in keys], colors=colours, labels=keys,
                     step="post", linewidth=0)  # fmt: skip
    ax.axhline(lane.capacity_gb, color="#c62828", linewidth=0.9, linestyle="--")
    top = max(lane.capacity_gb, lane.peak_gb) * 1.12 or 1.0
    ax.set_ylim(0, top)
    ax.set_xlim(0, xmax)
    label = f"peak {lane.peak_gb:.1f} GB" + (f" ({op_name(lane.peak_op)})" if lane.peak_op else "")
    ax.plot([lane.peak_at_s - origin], [lane.peak_gb], marker="v", color="#111111", markersize=5)
    ax.text(lane.peak_at_s - origin, lane.peak_gb, " " + label, fontsize=6.5, va="bottom")
    ax.text(xmax, lane.capacity_gb, f"{lane.capacity_gb:g} GB ", fontsize=6, va="bottom",
            ha="right", color="#c62828")  # fmt: skip
    ax.set_ylabel(f"{lane.name}\nGB" + (" / GPU" if lane.kind == "gpu" else ""), fontsize=6.5,
                  rotation=0, ha="right", va="center")  # fmt: skip
    ax.tick_params(labelsize=6)
    if keys:
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 0.98), fontsize=5.5,
                  ncol=min(len(keys), 7), frameon=False, borderaxespad=0.0)  # fmt: skip
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)


def header_text(layout: GanttLayout) -> str:
    """The header figures on one line."""
    return "   ".join(f"{k} {v}" for k, v in layout.summary.items())


def _legend(fig: Any, layouts: Sequence[GanttLayout]) -> None:
    import matplotlib.patches as mpatches

    colours: dict[str, str] = {}
    for layout in layouts:
        for role, colour in layout.colours.items():
            colours.setdefault(role, colour)
    handles = [mpatches.Patch(facecolor=c, label=r) for r, c in colours.items()]
    handles += [
        mpatches.Patch(facecolor="#888888", hatch=HATCH["offload"], edgecolor="white",
                       label="offload"),
        mpatches.Patch(facecolor="#888888", hatch=HATCH["reload"], edgecolor="white",
                       label="reload"),
        mpatches.Patch(facecolor="#cccccc", edgecolor="#111111", linewidth=1.2,
                       label="critical path"),
    ]  # fmt: skip
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 8), fontsize=7,
               frameon=False)  # fmt: skip


def render_png(
    layouts: Sequence[GanttLayout],
    path: str | Path,
    *,
    title: str,
    panel_titles: Sequence[str] | None = None,
    subtitle: str = "",
    width_in: float = 13.0,
    dpi: int = 110,
    memory: Sequence[Any] = (),
) -> Path:
    """Draw one or more timelines, stacked on one time axis, into a PNG file.

    ``memory``: :class:`rlplex.plan.memory_lanes.MemoryLane` strips drawn under
    the last panel on its time axis (GPU memory per group of GPUs, host memory
    per kind of node), each with its capacity line and its peak marked.

    Raises:
        ConfigError: ``path`` does not end in ``.png``.
    """
    # A bare Figure renders with Agg and leaves pyplot's global state alone.
    from matplotlib.figure import Figure

    path = check_png_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    titles = list(panel_titles) if panel_titles else [""] * len(layouts)
    xmax = max((lay.t1 - lay.t0 for lay in layouts), default=1.0) or 1.0
    # Heights in inches: lanes at 0.3 in per unit, fixed room for titles and axes.
    axes_in = [0.3 * (_lane_geometry(lay)[2] + 0.9) for lay in layouts]
    title_in = 0.35 + (0.2 if subtitle else 0.0)
    panel_title_in = [0.42 if t else 0.25 for t in titles]
    gap_in = 0.45
    bottom_in = 0.85
    strip_in = [MEMORY_STRIP_IN] * len(memory)
    fig_h = title_in + sum(axes_in) + sum(panel_title_in) + gap_in * (len(layouts) - 1) + bottom_in
    fig_h += sum(strip_in) + MEMORY_GAP_IN * len(memory)
    fig = Figure(figsize=(width_in, fig_h))
    axes = []
    y = fig_h - title_in
    for height, head in zip(axes_in, panel_title_in, strict=True):
        y -= head + height
        axes.append(fig.add_axes((0.13, y / fig_h, 0.82, height / fig_h)))
        y -= gap_in
    for ax, layout, panel_title in zip(axes, layouts, titles, strict=True):
        text = (panel_title + "\n" if panel_title else "") + header_text(layout)
        _draw_panel(ax, layout, layout.t0, xmax, text)
    y += gap_in - 0.2
    for lane, height in zip(memory, strip_in, strict=True):
        y -= height + MEMORY_GAP_IN
        strip = fig.add_axes((0.13, y / fig_h, 0.82, height / fig_h))
        _draw_memory(strip, lane, layouts[-1].t0 if layouts else 0.0, xmax, layouts)
    fig.suptitle(title + (f"\n{subtitle}" if subtitle else ""), fontsize=10.5, x=0.01,
                 y=1 - 0.06 / fig_h, ha="left", va="top")  # fmt: skip
    _legend(fig, layouts)
    fig.savefig(path, dpi=dpi)
    return path


def write_png(layout: GanttLayout, path: str | Path, memory: Sequence[Any] = ()) -> Path:
    """The PNG of one timeline (with memory strips under it when given)."""
    return render_png([layout], path, title=layout.title, memory=memory)
