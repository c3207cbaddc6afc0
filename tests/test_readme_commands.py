"""Every ``$ rlplex`` command README.md and docs/record.md show runs, and fails where they
show an error.

The commands run as a user would paste them (bash, from the repository root, shell variables
the document sets included), with ``rlplex`` the project's own entry point. ``rlplex run`` (a
Ray job, covered by tests/cli) and the lines that abbreviate a command with ``...`` are
skipped; ``--png`` writes into a temporary folder, and so does ``--out FILE``: a later
command that reads ``FILE`` (``--costs FILE``) runs after the one that writes it.
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


DOCUMENTS = ("README.md", "docs/record.md")
"""The documents whose commands are run, from the repository root."""


def _commands(document: str = "README.md") -> list[tuple[str, str, bool]]:
    """(setup lines, command, expects an error) for each ``$ rlplex`` line of ``document``.

    A command reading a file that an earlier one writes with ``--out`` has that command
    among its setup lines."""
    out: list[tuple[str, str, bool]] = []
    written: dict[str, str] = {}  # file -> the command that writes it
    for lines in _blocks((ROOT / document).read_text()):
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
            reads = [written[f] for f in re.findall(r"--costs (\S+)", command) if f in written]
            out.append(("\n".join([*setup, *reads]), command, error))
            for name in re.findall(r"--out (\S+)", command):
                written[name] = command
    return out


COMMANDS = [
    c
    for document in DOCUMENTS
    for c in _commands(document)
    if "..." not in c[1] and not c[1].startswith("rlplex run ")
]


def test_the_readme_shows_commands() -> None:
    assert len(COMMANDS) >= 10
    assert any(error for _, _, error in COMMANDS)
    # A file one command writes and the next reads: the reader runs the writer first.
    whatif = next(c for c in COMMANDS if "--costs costs.yaml" in c[1])
    assert "--out costs.yaml" in whatif[0]


@pytest.mark.slow
@pytest.mark.parametrize(("setup", "command", "error"), COMMANDS, ids=[c[1] for c in COMMANDS])
def test_a_readme_command_runs(setup: str, command: str, error: bool, tmp_path: Path) -> None:
    script = f'rlplex() {{ "{sys.executable}" -m rlplex.cli "$@"; }}\n{setup}\n{command}\n'
    script = script.replace("--png sweep.png", f"--png {tmp_path / 'sweep.png'}")
    for name in set(re.findall(r"--(?:out|costs) (\S+)", script)):  # written here, not there
        script = re.sub(rf"(--(?:out|costs)) {re.escape(name)}\b", rf"\1 {tmp_path / name}", script)
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == (2 if error else 0), result.stdout + result.stderr
    if error:
        assert result.stderr.startswith("error:") or "error:" in result.stdout
        assert "Traceback" not in result.stderr
