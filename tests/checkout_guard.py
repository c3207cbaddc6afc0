"""The suite must leave the checkout as it found it: no stray records, plans or pictures.

A test that writes into the repository instead of ``tmp_path`` leaves files
that end up committed (``same.jsonl`` and ``same.plan.json`` once sat at the
root, with a machine's path inside). ``git status --porcelain`` is taken when
the session starts and again when it ends; anything new fails the run, naming
the paths. Outside a git checkout (an sdist, no git) the check is skipped.
The hooks are re-exported by ``tests/conftest.py``; under pytest-xdist only the
controller checks (its workers share its checkout).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def checkout_status(root: Path) -> set[str] | None:
    """``git status --porcelain`` lines of ``root`` (every untracked file), None outside git."""
    try:
        proc = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return set(proc.stdout.splitlines())


def left_behind(before: set[str], after: set[str]) -> list[str]:
    """Status lines present at the end and not at the start, sorted."""
    return sorted(after - before)


_KEY = pytest.StashKey[set[str] | None]()


def _is_worker(config: Any) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_worker(session.config):
        session.config.stash[_KEY] = checkout_status(Path(session.config.rootpath))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_KEY, None)
    if before is None or _is_worker(session.config):
        return
    after = checkout_status(Path(session.config.rootpath))
    new = left_behind(before, after or set())
    if not new:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = (
        "the test suite left files in the checkout (write them under tmp_path):\n  "
        + "\n  ".join(new)
    )
    if reporter is not None:
        reporter.write_line("\n" + message, red=True, bold=True)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
