"""Memory strips of a plan as inline SVG, for the HTML Gantt page.

The HTML chart draws its lanes in the browser; the memory over time (GPU
memory per group of GPUs, stacked by role and state, and host memory per kind
of node, see :mod:`rlplex.plan.memory_lanes`) is drawn here once, as static
SVG under the chart on the plan's time axis, with the capacity line and the
peak marked with its op. Hovering a band names the state.
"""

from __future__ import annotations

import colorsys
import html
from collections.abc import Mapping, Sequence
from typing import Any

WIDTH = 1100
LEFT = 150
STRIP = 70


def _shade(colour: str, n: int) -> str:
    """``colour`` lightened for the n-th state of its role."""
    c = colour.lstrip("#")
    if len(c) != 6:
        return colour
    r, g, b = (int(c[i : i + 2], 16) / 255 for i in (0, 2, 4))
    h, light, s = colorsys.rgb_to_hls(r, g, b)
    light = min(0.85, light + 0.12 * n)
    r, g, b = colorsys.hls_to_rgb(h, light, s)
    return "#" + "".join(f"{round(v * 255):02x}" for v in (r, g, b))


def memory_svg(lanes: Sequence[Any], origin: float, xmax: float, colours: Mapping[str, str]) -> str:
    """An ``<svg>`` with one strip per memory lane ('' when there are none)."""
    if not lanes:
        return ""
    xmax = xmax or 1.0
    plot = WIDTH - LEFT - 20
    parts = []
    for i, lane in enumerate(lanes):
        top = i * (STRIP + 24) + 16
        scale = max(lane.capacity_gb, lane.peak_gb) * 1.1 or 1.0

        def x(t: float) -> float:
            return LEFT + plot * min(max((t - origin) / xmax, 0.0), 1.0)

        def y(gb: float, top: float = top, scale: float = scale) -> float:
            return top + STRIP - STRIP * gb / scale

        parts.append(
            f'<text x="{LEFT - 6}" y="{top + STRIP / 2}" text-anchor="end" font-size="11">'
            f"{html.escape(lane.name)}</text>"
        )
        parts.append(
            f'<rect x="{LEFT}" y="{top}" width="{plot}" height="{STRIP}" fill="#fafafa"'
            ' stroke="#ddd"/>'
        )
        base = [0.0] * len(lane.times)
        seen: dict[str, int] = {}
        for key, values in lane.stacks.items():
            role = key.partition(".")[0]
            n = seen.get(role, 0)
            seen[role] = n + 1
            colour = _shade(colours[role], n) if role in colours else "#9e9e9e"
            upper = [b + v for b, v in zip(base, values, strict=True)]
            pts = []
            for j, t in enumerate(lane.times):
                t2 = lane.times[j + 1] if j + 1 < len(lane.times) else t
                pts += [(x(t), y(upper[j])), (x(t2), y(upper[j]))]
            for j in range(len(lane.times) - 1, -1, -1):
                t = lane.times[j]
                t2 = lane.times[j + 1] if j + 1 < len(lane.times) else t
                pts += [(x(t2), y(base[j])), (x(t), y(base[j]))]
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            parts.append(
                f'<polygon points="{path}" fill="{colour}" stroke="none">'
                f"<title>{html.escape(key)}</title></polygon>"
            )
            base = upper
        cap = y(lane.capacity_gb)
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot}" y1="{cap:.1f}" y2="{cap:.1f}" stroke="#c62828"'
            f' stroke-dasharray="4 3"><title>capacity {lane.capacity_gb:g} GB</title></line>'
        )
        px, py = x(lane.peak_at_s), y(lane.peak_gb)
        what = f" during {lane.peak_op}" if lane.peak_op else ""
        label = f"peak {lane.peak_gb:.1f} GB at {lane.peak_at_s:.2f} s{what}"
        parts.append(
            f'<path d="M{px - 5:.1f},{py - 8:.1f} L{px + 5:.1f},{py - 8:.1f} L{px:.1f},{py:.1f} Z"'
            f' fill="#111"><title>{html.escape(label)}</title></path>'
            f'<text x="{px + 7:.1f}" y="{py - 2:.1f}" font-size="10">{html.escape(label)}</text>'
        )
    height = len(lanes) * (STRIP + 24) + 20
    return (
        f'<h2>memory over the step</h2><svg class="memory" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg"'
        ' font-family="sans-serif">' + "".join(parts) + "</svg>"
    )
