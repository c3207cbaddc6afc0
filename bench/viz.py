"""Benchmark of the views: a 1,024-GPU (128 nodes x 8), 20-step timeline.

Targets (issue 4): HTML and PNG each rendered in under 5 s, HTML under 5 MB.
Also times the Perfetto export and, when Chromium is installed, how long the
page takes to load and draw in headless Chromium. Prints a Markdown table.

Run: .venv/bin/python bench/viz.py
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlplex.timeline.perfetto import write_trace
from rlplex.viz.html import write_html
from rlplex.viz.layout import build_layout
from rlplex.viz.png import write_png
from rlplex.viz.synthetic import synthetic_timeline


def _timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def main() -> int:
    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for layout_name, jitter in (("split", 0.0), ("split", 0.05), ("colocated", 0.05)):
            timeline = synthetic_timeline(nodes=128, gpus_per_node=8, steps=20,
                                          layout=layout_name, jitter=jitter)  # fmt: skip
            layout, t_layout = _timed(build_layout, timeline)
            html, t_html = _timed(write_html, layout, out / "g.html")
            t_html += t_layout
            _, t_png = _timed(write_png, layout, out / "g.png")
            t_png += t_layout
            _, t_trace = _timed(write_trace, timeline, out / "t.json")
            size_mb = html.stat().st_size / 1e6
            browser = ""
            exe = shutil.which("chromium")
            if exe:
                start = time.perf_counter()
                subprocess.run(
                    [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                     "--disable-background-networking", f"--user-data-dir={out / 'p'}",
                     "--dump-dom", html.resolve().as_uri()],
                    capture_output=True, timeout=120, check=True,
                )  # fmt: skip
                browser = f"{time.perf_counter() - start:.2f}"
            ok &= t_html < 5 and t_png < 5 and size_mb < 5
            rows.append(
                f"| {layout_name}, jitter {jitter:g} | {len(timeline.events)} | {len(layout.lanes)}"
                f" | {len(layout.bars)} | {t_html:.2f} | {size_mb:.3f} | {t_png:.2f}"
                f" | {browser or 'n/a'} | {t_trace:.2f} |"
            )
    print(f"1,024 GPUs (128 nodes x 8), 20 steps; {platform.processor() or platform.machine()},"
          f" Python {platform.python_version()}\n")  # fmt: skip
    print("| timeline | ops | lanes | bars | HTML s | HTML MB | PNG s | Chromium load s"
          " | Perfetto export s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\ntargets (HTML < 5 s, PNG < 5 s, HTML < 5 MB): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
