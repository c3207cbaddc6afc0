"""PNG charts: written, of a sensible size, and not blank."""

from __future__ import annotations

import numpy as np
from matplotlib.image import imread

from rlplex.viz.layout import build_layout
from rlplex.viz.png import write_png
from rlplex.viz.synthetic import synthetic_timeline


def _check(path, min_w=1000, min_h=400):
    image = imread(path)
    height, width = image.shape[:2]
    assert width >= min_w and height >= min_h
    assert path.stat().st_size > 20_000
    assert float(np.std(image[..., :3])) > 0.05
    return image


def test_png_of_a_colocated_plan(colocated_plan, tmp_path):
    layout = build_layout(colocated_plan, title="colocated")
    image = _check(write_png(layout, tmp_path / "plan.png"))
    # The actor_infer colour (generate, the longest stage) fills a good part.
    colour = layout.colours["actor_infer"]
    rgb = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    assert (np.abs(image[..., :3] - rgb).max(axis=-1) < 0.02).sum() > 20_000


def test_png_of_an_async_plan(async_plan, tmp_path):
    _check(write_png(build_layout(async_plan, title="async"), tmp_path / "async.png"))


def test_png_collapsed_at_1024_gpus(tmp_path):
    big = synthetic_timeline(nodes=128, gpus_per_node=8, steps=20, layout="split")
    image = _check(write_png(build_layout(big, title="1024"), tmp_path / "big.png"))
    # Collapsed: a few bands, so the picture stays short.
    assert image.shape[0] < 1200


def test_png_does_not_touch_pyplot_state(small, tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    write_png(build_layout(small), tmp_path / "x.png")
    assert plt.get_fignums() == before
