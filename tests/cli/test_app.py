"""The error boundary (``user_errors``): a file the user named that cannot be written is one
line naming the option, the path and the reason, exit 2, never a traceback."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RECORD = ("replay", EXAMPLES / "records" / "verl_quickstart.jsonl", "-c",
          EXAMPLES / "records" / "verl_quickstart.yaml")  # fmt: skip
runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_line(result, expected: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert expected in " ".join(result.stderr.split()), result.stderr


PPO = EXAMPLES / "ppo.yaml"
SEVEN_B = EXAMPLES / "estimate_7b.yaml"
OUTPUTS = [
    (("plan", PPO), "--gantt", "d.html"),
    (("plan", PPO), "--png", "d.png"),
    (("plan", PPO), "--trace", "d.json"),
    (("simulate", PPO, "--steps", "2"), "--out", "d.jsonl"),
    (("simulate", PPO, "--steps", "2"), "--gantt", "d.html"),
    (("dag", PPO), "--out", "d.dot"),
    (("dag", PPO), "--out", "d.txt"),
    (("viz", PPO), "--gantt", "d.html"),
    (("viz", PPO), "--png", "d.png"),
    (("viz", PPO), "--trace", "d.json"),
    (("compare", PPO, "--baseline", "sequential"), "--gantt", "d.html"),
    (("compare", PPO, "--baseline", "sequential"), "--png", "d.png"),
    ((*RECORD,), "--gantt", "d.html"),
    (("whatif", *RECORD[1:], "--set", "pipeline.mode=async"), "--gantt", "d.html"),
    (("calibrate", *RECORD[1:]), "--out", "d.yaml"),
    (("size", SEVEN_B, "--gpus", "8", "--gpu", "h100"), "--png", "d.png"),
    (("size", SEVEN_B, "--gpus", "8", "--gpu", "h100"), "--html", "d.html"),
    (("size", SEVEN_B, "--gpus", "8", "--gpu", "h100", "--out-config", "1"), "--out-file",
     "d.yaml"),
    (("estimate", SEVEN_B, "--sweep", "workload.response_tokens.mean=256,512"), "--png", "d.png"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "option", "name"), OUTPUTS, ids=lambda v: str(v)[-20:])
def test_an_output_that_is_a_directory_is_one_line(args, option, name, tmp_path: Path) -> None:
    target = tmp_path / name
    target.mkdir()
    one_line(
        invoke(*args, option, target), f"error: {option}: cannot write {target}: Is a directory"
    )


@pytest.mark.parametrize(
    ("args", "option", "name"),
    [OUTPUTS[0], OUTPUTS[3], OUTPUTS[5], OUTPUTS[9], OUTPUTS[14], OUTPUTS[16]],
    ids=lambda v: str(v)[-20:],
)
def test_an_output_under_a_file_is_one_line(args, option, name, tmp_path: Path) -> None:
    blocker = tmp_path / "a.yaml"
    blocker.write_text("x: 1\n")
    for target in (blocker / name, blocker / "sub" / name):
        one_line(
            invoke(*args, option, target),
            f"error: {option}: cannot write {target}: {blocker} is a file, not a folder",
        )
    assert blocker.read_text() == "x: 1\n"


def test_size_out_config_names_the_option_of_its_default_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "estimate_7b.size1.yaml").mkdir()
    result = invoke("size", SEVEN_B, "--gpus", "8", "--gpu", "h100", "--out-config", "1")
    one_line(result, "error: --out-config: cannot write estimate_7b.size1.yaml: Is a directory")


def test_other_os_errors_are_not_taken_for_a_write() -> None:
    """Only an OSError on a path the user asked to be written becomes that line."""
    from rlplex.cli.app import write_error

    outputs = ((Path("out/g.html"), "--gantt"),)
    assert write_error(OSError(errno.EACCES, "Permission denied", "elsewhere.txt"), outputs) is None
    assert write_error(OSError(errno.ENOSPC, "No space left on device"), outputs) is None
    error = write_error(OSError(errno.EACCES, "Permission denied", "out"), outputs)
    assert error is not None
    assert str(error) == "--gantt: cannot write out/g.html: out: Permission denied"


def test_a_table_wider_than_the_console_is_printed_whole() -> None:
    import importlib

    from rich.console import Console
    from rich.table import Table

    cli_app = importlib.import_module("rlplex.cli.app")  # rlplex.cli.app is also the Typer app

    table = Table()
    for i in range(12):
        table.add_column(f"stage_{i}_seconds")
    table.add_row(*(f"{100 + i}.{i:02d}" for i in range(12)))
    narrow = Console(width=80, record=True)
    was = cli_app.console
    cli_app.console = narrow
    try:
        cli_app.print_table(table)
    finally:
        cli_app.console = was
    text = narrow.export_text()
    assert all(f"{100 + i}.{i:02d}" in text for i in range(12)), text
    assert "…" not in text and narrow.width == 80  # the console's width is given back


def test_a_wide_table_does_not_pin_the_console_to_the_width_it_had(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The CLI's console reads the terminal's width (COLUMNS) at each print; a wide table
    # must not pin it to the width it had then (a later run in the process, as CliRunner's,
    # would wrap at the old width).
    import importlib

    from rich.console import Console
    from rich.table import Table

    cli_app = importlib.import_module("rlplex.cli.app")
    monkeypatch.delenv("COLUMNS", raising=False)
    following = Console(record=True)  # as the CLI's: no width given, COLUMNS read at each print
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setattr(cli_app, "console", following)
    table = Table()
    for i in range(12):
        table.add_column(f"stage_{i}_seconds")
    cli_app.print_table(table)
    monkeypatch.setenv("COLUMNS", "300")
    assert following.width == 300


def test_a_table_whose_text_can_wrap_stays_within_the_console() -> None:
    # Widening every wide table to its natural width put a memory table's long list of
    # states on one 144-column line; rich wraps text at spaces without cutting anything.
    import importlib

    from rich.console import Console
    from rich.table import Table

    cli_app = importlib.import_module("rlplex.cli.app")
    table = Table()
    table.add_column("GPUs")
    table.add_column("peak")
    table.add_column("resident at the peak")
    table.add_row("0-31", "81.51", " + ".join(f"role_{i}.weights {i}.25" for i in range(12)))
    narrow = Console(width=80, record=True)
    was = cli_app.console
    cli_app.console = narrow
    try:
        cli_app.print_table(table)
    finally:
        cli_app.console = was
    lines = narrow.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    text = " ".join(" ".join(lines).split())
    assert "…" not in text and "81.51" in text and "role_11.weights" in text
