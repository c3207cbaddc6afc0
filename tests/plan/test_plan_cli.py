"""``rlplex plan`` and ``rlplex simulate``: exit codes, summary and JSON shape."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.timeline.record import Timeline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def test_plan_json_has_the_design_shape():
    result = runner.invoke(app, ["plan", str(EXAMPLES / "ppo.yaml"), "--json", "--verify"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["mode"] == "sync" and data["period_s"] >= data["lower_bound_s"]
    assert data["placement"]["actor_train"] == list(range(8))
    ids = {op["id"] for op in data["ops"]}
    assert "s0/train" in ids and "s0/weight_sync" in ids
    assert all(set(op["deps"]) <= ids for op in data["ops"])


def test_plan_summary_and_baseline():
    result = runner.invoke(app, ["plan", str(EXAMPLES / "grpo.yaml"), "--verify"])
    assert result.exit_code == 0, result.output
    for text in ("period", "lower bound", "gap", "offloads", "speed-up", "verified"):
        assert text in result.stdout
    seq = runner.invoke(
        app, ["plan", str(EXAMPLES / "grpo.yaml"), "--baseline", "sequential", "--json"]
    )
    assert json.loads(seq.stdout)["baseline"] == "sequential"
    bad = runner.invoke(app, ["plan", str(EXAMPLES / "grpo.yaml"), "--baseline", "nope"])
    assert bad.exit_code == 2 and "--baseline" in bad.output


def test_plan_auto_places_roles():
    result = runner.invoke(app, ["plan", str(EXAMPLES / "grpo.yaml"), "--auto", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["placement"]) == {"actor_train", "actor_infer", "reference"}


def test_infeasible_config_exits_2_naming_stage_role_and_gb():
    result = runner.invoke(
        app, ["plan", str(EXAMPLES / "grpo.yaml"), "--set", "pipeline.stages.train.memory_gb=70"]
    )
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    assert "'train'" in out and "'actor_train'" in out and "86 GB" in out and "80 GB" in out
    assert "Traceback" not in result.output


def test_simulate_prints_steps_and_writes_jsonl(tmp_path):
    out = tmp_path / "t.jsonl"
    result = runner.invoke(
        app, ["simulate", str(EXAMPLES / "async.yaml"), "--steps", "5", "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["step_s"]) == 5 and data["period_s"] > 0
    timeline = Timeline.read_jsonl(out)
    assert timeline.steps == (0, 1, 2, 3, 4)
    text = runner.invoke(app, ["simulate", str(EXAMPLES / "grpo.yaml"), "--steps", "3"])
    assert text.exit_code == 0 and "period_s" in text.stdout


def test_simulate_title_is_not_wrapped_into_pieces(monkeypatch):
    """The narrow step table used to break its title mid-word ("async.ya" / "ml")."""
    monkeypatch.chdir(EXAMPLES)
    text = runner.invoke(app, ["simulate", "async.yaml", "--steps", "2"])
    assert text.exit_code == 0, text.output
    assert "simulation of async.yaml: 2 steps" in text.stdout


def test_plan_auto_reports_the_placements_it_searched():
    result = runner.invoke(
        app,
        ["plan", str(EXAMPLES / "ppo.yaml"), "--auto", "--set", "cluster.nodes=2"],
        env={"COLUMNS": "160"},
    )
    assert result.exit_code == 0, result.output
    assert "placements searched" in result.stdout
    lines = [line for line in result.stdout.splitlines() if line.startswith("│ 1 ")]
    assert lines and "actor_train" in lines[0] and "161.02 s" in lines[0]
