"""Every ``$ rlplex`` command README.md shows runs, and fails where the README shows an error.

The commands run as a user would paste them (bash, from the repository root, shell variables
the README sets included), with ``rlplex`` the project's own entry point. ``rlplex run`` (a
Ray job, covered by tests/cli) and the lines that abbreviate a command with ``...`` are
skipped; ``--png`` writes into a temporary folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str) -> list[list[str]]:
    """The lines of each fenced code block."""
    blocks: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    return blocks


def _commands() -> list[tuple[str, str, bool]]:
    """(setup lines, command, expects an error) for each ``$ rlplex`` line of README.md."""
    out: list[tuple[str, str, bool]] = []
    for lines in _blocks((ROOT / "README.md").read_text()):
        setup: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.startswith("$ "):
                i += 1
                continue
            command = line[2:]
            while command.rstrip().endswith("\\") or command.count('"') % 2:
                i += 1
                command = command.rstrip().removesuffix("\\") + " " + lines[i].strip()
            i += 1
            command = re.split(r"\s{2,}#", command)[0].strip()
            if not command.startswith("rlplex "):
                setup.append(command)  # a shell variable the next commands use
                continue
            error = i < len(lines) and lines[i].startswith("error:")
            out.append(("\n".join(setup), command, error))
    return out


COMMANDS = [c for c in _commands() if "..." not in c[1] and not c[1].startswith("rlplex run ")]


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) >= 10
    assert any(error for _, _, error in COMMANDS)


@pytest.mark.slow
@pytest.mark.parametrize(("setup", "command", "error"), COMMANDS, ids=[c[1] for c in COMMANDS])
def test_a_readme_command_runs(setup: str, command: str, error: bool, tmp_path: Path) -> None:
    command = command.replace("--png sweep.png", f"--png {tmp_path / 'sweep.png'}")
    script = f'rlplex() {{ "{sys.executable}" -m rlplex.cli "$@"; }}\n{setup}\n{command}\n'
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == (2 if error else 0), result.stdout + result.stderr
    if error:
        assert result.stderr.startswith("error:") or "error:" in result.stdout
        assert "Traceback" not in result.stderr
