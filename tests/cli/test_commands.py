"""The rlplex command: validate, show (table, grid, --json), dag, --set, --format, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_validate_ok() -> None:
    result = run("validate", EXAMPLES / "ppo.yaml")
    assert result.exit_code == 0
    assert "ok" in result.stdout and "5 roles, 9 stages, 8 GPUs, sync mode" in result.stdout


def test_show_json_shape() -> None:
    result = run("show", EXAMPLES / "grpo.yaml", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    infer = data["roles"]["actor_infer"]
    assert infer["devices"] == list(range(8))
    assert infer["num_gpus_per_worker"] == 2
    assert infer["world_size"] == 4
    assert data["roles"]["rewards"] == {
        "devices": [],
        "num_gpus_per_worker": 1,
        "world_size": 8,
        "nodes": [],
        "states": {},
        "host_states": {},
    }


def test_show_grid_has_letters_and_legend() -> None:
    result = run("show", EXAMPLES / "disaggregated.yaml")
    assert result.exit_code == 0
    assert "device grid" in result.stdout
    assert "A actor_infer (8 GPUs)" in result.stdout
    assert "B actor_train (8 GPUs)" in result.stdout
    assert " BC " in result.stdout  # train and reference share node 1's GPUs


def test_set_and_format_apply() -> None:
    result = run(
        "show", EXAMPLES / "roll.yaml", "--json", "--format", "roll",
        "--set", "actor_infer.device_mapping=list(range(0,8))",
    )  # fmt: skip
    assert result.exit_code == 0
    assert json.loads(result.stdout)["roles"]["actor_infer"]["devices"] == list(range(8))


def test_costs_option(tmp_path: Path) -> None:
    costs = tmp_path / "costs.yaml"
    costs.write_text("stages: {generate: {seconds: 33}}\n")
    result = run("dag", EXAMPLES / "verl.yaml", "--format", "dot", "--costs", costs)
    assert result.exit_code == 0
    assert 'label="generate\\nactor_infer, 33s"' in result.stdout


@pytest.mark.parametrize("fmt", ["dot", "mermaid"])
def test_dag_formats(fmt: str, tmp_path: Path) -> None:
    result = run("dag", EXAMPLES / "ppo.yaml", "--format", fmt)
    assert result.exit_code == 0
    head = "digraph pipeline {" if fmt == "dot" else "flowchart LR"
    assert result.stdout.startswith(head)
    out = tmp_path / "new" / f"dag.{fmt}"  # a missing folder is created, as for --gantt
    assert run("dag", EXAMPLES / "ppo.yaml", "--format", fmt, "--out", out).exit_code == 0
    assert out.read_text().startswith(head)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz not installed")
def test_dag_out_svg_and_png_are_pictures(tmp_path: Path) -> None:
    """`--out F.svg|F.png` draws the DAG with Graphviz instead of writing DOT text there."""
    svg, png = tmp_path / "dag.svg", tmp_path / "dag.png"
    assert run("dag", EXAMPLES / "async.yaml", "--out", svg).exit_code == 0
    assert "<svg" in svg.read_text() and "stroke-dasharray" in svg.read_text()
    assert run("dag", EXAMPLES / "async.yaml", "--out", png).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dag_picture_without_graphviz_exits_2(tmp_path: Path, monkeypatch) -> None:
    from rlplex.viz import dag as dag_view

    monkeypatch.setattr(dag_view.shutil, "which", lambda name: None)
    result = run("dag", EXAMPLES / "ppo.yaml", "--out", tmp_path / "dag.svg")
    assert result.exit_code == 2 and "apt-get install graphviz" in result.stderr
    assert not (tmp_path / "dag.svg").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["validate", "nope.yaml"], "nope.yaml: file not found"),
        (
            ["validate", "{ex}/ppo.yaml", "--set", "roles.actor_train.devices=0-9"],
            "roles.actor_train.devices: device 8 is outside the cluster",
        ),
        (
            ["validate", "{ex}/ppo.yaml", "--set", "roles.actor_train.states={foo: 1}"],
            "roles.actor_train.states.foo: must be 'weights'",
        ),
        (["validate", "{ex}/ppo.yaml", "--format", "toml"], "--format: unknown format"),
        (
            [
                "show",
                "{ex}/ppo.yaml",
                "--set",
                "roles.actor_train.devices=__import__('os').system('touch pwned')",
            ],
            "cannot parse device item",
        ),
        (
            ["dag", "{ex}/ppo.yaml", "--format", "png"],
            "--format: must be dot or mermaid (got 'png')",
        ),
        (
            ["validate", "{ex}/roll.yaml", "--set", "actor_infer.device_mapping=list(range(0,7))"],
            "actor_infer.device_mapping: has 7 GPUs",
        ),
    ],
)
def test_bad_input_exits_2_without_traceback(
    args: list[str], message: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run(*[a.replace("{ex}", str(EXAMPLES)) for a in args])
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    assert not (tmp_path / "pwned").exists()


def test_empty_and_broken_yaml(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    result = run("validate", empty)
    assert result.exit_code == 2 and "the file is empty" in result.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("cluster:\n  nodes: [1\n")
    result = run("validate", broken)
    assert result.exit_code == 2 and f"{broken}:3: YAML syntax error" in " ".join(
        result.stderr.split()
    )
