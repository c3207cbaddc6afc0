"""An imported file's mean response length is rlplex's guess, and every command says so."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.config.loading import ASSUMED_MEAN

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "importers"
VERL = FIXTURES / "verl" / "grpo.yaml"
ROOT = Path(__file__).resolve().parents[2]


def _guess(warnings: tuple[str, ...]) -> str | None:
    return next((w for w in warnings if w.startswith(ASSUMED_MEAN + ":")), None)


def test_an_imported_files_mean_is_named_as_a_guess() -> None:
    config = load_config(VERL, overrides=["cluster.gpu=h100"])
    w = config.workload
    assert w is not None
    note = _guess(config.warnings)
    assert note is not None
    assert f"the verl file sets only the maximum ({w.response_tokens.max} tokens)" in note
    assert f"rlplex assumes a mean of {w.response_tokens.mean:g}," in note
    assert "--set workload.response_tokens.mean=N" in note
    assert "--sweep workload.response_tokens.mean=" in note


def test_no_guess_where_the_user_gives_the_mean_or_writes_a_native_file() -> None:
    given = load_config(VERL, overrides=["cluster.gpu=h100", "workload.response_tokens.mean=300"])
    assert _guess(given.warnings) is None
    whole = load_config(
        VERL,
        overrides=["cluster.gpu=h100", "workload.response_tokens={mean: 300, max: 1024}"],
    )
    assert _guess(whole.warnings) is None
    native = load_config(ROOT / "examples" / "estimate_7b.yaml")
    assert _guess(native.warnings) is None


def test_estimate_prints_it_once_and_a_sweep_of_the_mean_does_not() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["estimate", str(VERL), "--set", "cluster.gpu=h100"])
    assert out.exit_code == 0, out.output
    assert out.output.count("rlplex assumes a mean of") == 1
    swept = runner.invoke(
        app,
        ["estimate", str(VERL), "--set", "cluster.gpu=h100",
         "--sweep", "workload.response_tokens.mean=100,200"],
    )  # fmt: skip
    assert swept.exit_code == 0, swept.output
    assert "rlplex assumes a mean of" not in swept.output
