"""What the CLI tests share: running a command in-process and checking a one-line refusal."""

from __future__ import annotations

from typer.testing import CliRunner

from rlplex.cli import app

runner = CliRunner()


def invoke(*args: object):
    """Run ``rlplex ARGS...`` in-process; the arguments are turned into strings."""
    return runner.invoke(app, [str(a) for a in args])


def one_line(result, expected: str) -> None:
    """The command was refused as a user's error should be: exit 2, one line on stderr that
    holds ``expected`` (blanks folded), no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert expected in " ".join(result.stderr.split()), result.stderr
