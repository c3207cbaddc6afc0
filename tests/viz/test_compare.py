"""Two timelines side by side, with the difference in period."""

from __future__ import annotations

import re

import pytest

from rlplex.viz.compare import compare, write_comparison
from rlplex.viz.synthetic import synthetic_timeline


def test_period_difference(small):
    slower = synthetic_timeline(steps=3, layout="split", jitter=0.1)
    result = compare(small, slower, ("colocated", "split"))
    assert result.diff_s == pytest.approx(result.period_b_s - result.period_a_s)
    assert result.period_a_s == pytest.approx(241.64)
    assert "colocated 241.64 s" in result.text()
    assert f"{result.diff_s:+.2f} s" in result.text()


def test_comparison_html_and_png(colocated_plan, async_plan, tmp_path):
    result = write_comparison(
        colocated_plan, async_plan, names=("sync", "async"),
        gantt=tmp_path / "c.html", png=tmp_path / "c.png",
    )  # fmt: skip
    page = (tmp_path / "c.html").read_text()
    assert result.text().split(":")[0] in page
    # Two panels in the data, one shared colour map.
    data = re.search(r'<script id="rlplex-data" type="application/json">(.*?)</script>', page)
    assert data and data.group(1).count('"lanes"') == 2
    assert (tmp_path / "c.png").stat().st_size > 20_000
