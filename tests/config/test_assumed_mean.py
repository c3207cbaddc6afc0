"""An imported file's mean response length is rlplex's guess, and every command says so."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config, load_native
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


def _sweep_values(note: str) -> list[str]:
    return note.rpartition("--sweep workload.response_tokens.mean=")[2].rstrip(")").split(",")


def test_no_guess_where_the_stage_times_are_rlplexs_defaults() -> None:
    """Without a GPU type the stage times are rlplex's 7B defaults, not estimates: the mean
    moves nothing, and the warning would send the user to a sweep that shows nothing."""
    config = load_config(VERL)
    assert any("rlplex's defaults" in w for w in config.warnings)
    assert _guess(config.warnings) is None


def test_the_suggested_range_loads_for_a_multi_turn_workload() -> None:
    """A multi-turn answer's mean is bounded by the trajectory's budget over its turns, not
    by the response max: every value the warning suggests must load."""
    overrides = ["cluster.gpu=h100", "actor_rollout_ref.rollout.multi_turn.enable=true"]
    note = _guess(load_config(VERL, overrides=overrides).warnings)
    assert note is not None and "per answer" in note
    values = _sweep_values(note)
    assert len(values) >= 2
    for value in values:
        load_config(VERL, overrides=[*overrides, f"workload.response_tokens.mean={value}"])


def test_large_and_tiny_maxima_are_written_whole() -> None:
    # The native form: two million tokens do not fit a GPU, which is not this test's point.
    big = _guess(load_native(VERL, overrides=[
        "cluster.gpu=h100", "data.max_response_length=2000000"]).notes)  # fmt: skip
    assert big is not None and "(2000000 tokens)" in big and "e+06" not in big
    assert "a mean of 1000000," in big
    assert _sweep_values(big) == ["250000", "500000", "1000000"]
    tiny = _guess(load_native(
        VERL, overrides=["cluster.gpu=h100", "data.max_response_length=2"]).notes)  # fmt: skip
    # Two tokens at most leave no range to sweep (a sweep needs two values): only --set.
    assert tiny is not None and "--set workload.response_tokens.mean=N" in tiny
    assert "--sweep" not in tiny


def test_a_sweep_of_another_key_still_says_the_mean_is_a_guess() -> None:
    """Every point of a GPU sweep follows the guessed mean: the sweep says so once (the
    warnings every point shares), as the estimate does."""
    out = CliRunner().invoke(app, ["estimate", str(VERL), "--sweep", "cluster.gpu=h100,h200"])
    assert out.exit_code == 0, out.output
    assert out.output.count("rlplex assumes a mean of") == 1
