"""The view commands: rlplex viz, rlplex compare, and --gantt/--png/--trace on plan/simulate."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rlplex.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_viz_of_a_record_and_of_its_trace(small, tmp_path):
    record = tmp_path / "run.jsonl"
    small.write_jsonl(record)
    out = runner.invoke(
        app,
        [
            "viz",
            str(record),
            "--gantt",
            str(tmp_path / "g.html"),
            "--png",
            str(tmp_path / "g.png"),
            "--trace",
            str(tmp_path / "t.json"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "time per stage" in out.output and "generate" in out.output
    assert (tmp_path / "g.html").stat().st_size > 10_000
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    # The trace written by rlplex reads back as a timeline.
    again = runner.invoke(app, ["viz", str(tmp_path / "t.json"), "--png", str(tmp_path / "h.png")])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "h.png").stat().st_size > 20_000


def test_viz_missing_file_is_exit_2(tmp_path):
    out = runner.invoke(app, ["viz", str(tmp_path / "nope.jsonl")])
    assert out.exit_code == 2 and "file not found" in out.output


def test_viz_of_what_is_not_a_timeline_is_exit_2(tmp_path):
    """A PNG, a non-JSON or empty file, or a verl log: one message, exit 2, nothing drawn."""
    image = tmp_path / "chart.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (tmp_path / "text.jsonl").write_text("not json\n")
    (tmp_path / "empty.jsonl").write_text("")
    verl = EXAMPLES / "records" / "verl_quickstart.jsonl"
    cases = {
        image: "not a text file",
        tmp_path / "text.jsonl": "no ops to draw",
        tmp_path / "empty.jsonl": "no ops to draw",
        verl: "not an rlplex timeline",
    }
    for path, message in cases.items():
        out = runner.invoke(app, ["viz", str(path), "--png", str(tmp_path / "o.png")])
        assert out.exit_code == 2, out.output
        assert message in " ".join(out.stderr.split()) and "Traceback" not in out.output
    assert not (tmp_path / "o.png").exists()


def test_png_option_needs_a_png_name(small, tmp_path):
    record = tmp_path / "run.jsonl"
    small.write_jsonl(record)
    html = tmp_path / "g.html"
    for args in (["viz", str(record)], ["compare", str(record), str(record)]):
        out = runner.invoke(app, [*args, "--gantt", str(html), "--png", str(tmp_path / "g.html")])
        assert out.exit_code == 2, out.output
        assert "--png: a PNG chart's file name must end in .png" in " ".join(out.stderr.split())
        assert not html.exists()  # refused before anything is written


def test_compare_two_configs(tmp_path):
    out = runner.invoke(
        app,
        [
            "compare",
            str(EXAMPLES / "ppo.yaml"),
            str(EXAMPLES / "async.yaml"),
            "--gantt",
            str(tmp_path / "c.html"),
            "--steps",
            "2",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "period ppo.yaml" in out.output and "async.yaml" in out.output
    assert (tmp_path / "c.html").exists()


def test_compare_with_a_baseline(tmp_path):
    out = runner.invoke(
        app,
        [
            "compare",
            str(EXAMPLES / "ppo.yaml"),
            "--baseline",
            "sequential",
            "--png",
            str(tmp_path / "c.png"),
            "--steps",
            "2",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "(sequential)" in out.output and (tmp_path / "c.png").exists()
    bad = runner.invoke(app, ["compare", str(EXAMPLES / "ppo.yaml")])
    assert bad.exit_code == 2


def test_plan_and_simulate_write_views(tmp_path):
    out = runner.invoke(
        app,
        [
            "plan",
            str(EXAMPLES / "ppo.yaml"),
            "--gantt",
            str(tmp_path / "p.html"),
            "--trace",
            str(tmp_path / "p.json"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert (tmp_path / "p.html").exists() and (tmp_path / "p.json").exists()
    out = runner.invoke(
        app,
        [
            "simulate",
            str(EXAMPLES / "async.yaml"),
            "--steps",
            "3",
            "--png",
            str(tmp_path / "s.png"),
        ],
    )
    assert out.exit_code == 0, out.output
    assert (tmp_path / "s.png").stat().st_size > 20_000
