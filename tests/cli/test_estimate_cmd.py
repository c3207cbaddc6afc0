"""``rlplex estimate`` and ``whatif``: options that contradict or repeat are refused, not
silently dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RECORDS = EXAMPLES / "records"
runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_line(result, expected: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert expected in " ".join(result.stderr.split()), result.stderr


A, B = "workload.response_tokens.mean=256,512", "cluster.gpu=h100,h20"


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", EXAMPLES / "estimate_7b.yaml"),
        ("whatif", RECORDS / "verl_quickstart.jsonl", "-c", RECORDS / "verl_quickstart.yaml"),
    ],
    ids=["estimate", "whatif"],
)
def test_a_second_sweep_is_refused_naming_both(args) -> None:
    result = invoke(*args, "--sweep", A, "--sweep", B)
    one_line(result, f"error: --sweep: one --sweep at a time, got '{A}' and '{B}'")


def test_one_sweep_still_sweeps() -> None:
    result = invoke("estimate", EXAMPLES / "estimate_7b.yaml", "--sweep", B)
    assert result.exit_code == 0, result.output
    assert "planned step vs cluster.gpu" in result.stdout


def test_list_presets_refuses_a_config_it_would_ignore() -> None:
    result = invoke("estimate", "--list-presets", EXAMPLES / "ppo.yaml")
    one_line(result, "error: --list-presets: lists the presets and reads no config")
    assert invoke("estimate", "--list-presets").exit_code == 0
    # nor the options it would ignore
    for extra in (("--set", "model=x"), ("--sweep", B), ("--json",)):
        result = invoke("estimate", "--list-presets", *extra)
        one_line(result, f"error: --list-presets: lists the presets and reads no config: drop"
                         f" {extra[0]} or --list-presets")  # fmt: skip


def test_sweep_png_needs_a_png_name(tmp_path: Path) -> None:
    page = tmp_path / "sweep.html"
    result = invoke("estimate", EXAMPLES / "estimate_7b.yaml", "--sweep", B, "--png", page)
    one_line(result, "error: --png: a PNG chart's file name must end in .png")
    assert not page.exists()
