"""DAG pictures: Graphviz SVG/PNG and Mermaid text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import RlplexError
from rlplex.viz import dag as dag_view

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def pipeline():
    return load_config(EXAMPLES / "async.yaml").pipeline


def test_mermaid_and_dot_text(pipeline, tmp_path):
    text = dag_view.write_dag(pipeline, tmp_path / "d.mmd").read_text()
    assert text.startswith("flowchart LR") and "-. step +" in text
    assert "style=dashed" in dag_view.write_dag(pipeline, tmp_path / "d.dot").read_text()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz not installed")
def test_svg_and_png_with_graphviz(pipeline, tmp_path):
    svg = dag_view.write_dag(pipeline, tmp_path / "d.svg").read_text()
    assert "<svg" in svg and "generate" in svg and "stroke-dasharray" in svg
    png = dag_view.write_dag(pipeline, tmp_path / "d.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5_000


def test_missing_graphviz_is_a_user_error(pipeline, tmp_path, monkeypatch):
    monkeypatch.setattr(dag_view.shutil, "which", lambda name: None)
    with pytest.raises(dag_view.GraphvizMissingError, match="apt-get install graphviz"):
        dag_view.write_dag(pipeline, tmp_path / "d.svg")
    with pytest.raises(RlplexError, match="unknown DAG picture type"):
        dag_view.write_dag(pipeline, tmp_path / "d.jpg")
