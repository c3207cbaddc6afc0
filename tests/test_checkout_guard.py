"""The suite fails when it leaves files in the checkout (tests/checkout_guard.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_guard import checkout_status, left_behind

TESTS = Path(__file__).resolve().parent


def _git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / ".gitignore").write_text("__pycache__/\n")
    return path


def test_status_names_a_new_file_and_nothing_else(tmp_path: Path) -> None:
    repo = _git_repo(tmp_path / "repo")
    (repo / "old.txt").write_text("there before")
    before = checkout_status(repo)
    assert before is not None
    (repo / "sub").mkdir()
    (repo / "sub" / "new.jsonl").write_text("{}")
    assert left_behind(before, checkout_status(repo) or set()) == ["?? sub/new.jsonl"]


def test_outside_a_checkout_the_check_is_skipped(tmp_path: Path) -> None:
    if subprocess.run(["git", "rev-parse"], cwd=tmp_path, capture_output=True).returncode == 0:
        pytest.skip("tmp_path lies inside a git checkout here")
    assert checkout_status(tmp_path) is None


@pytest.mark.parametrize("writes", [True, False])
def test_a_suite_that_writes_into_the_checkout_fails(tmp_path: Path, writes: bool) -> None:
    repo = _git_repo(tmp_path / "repo")
    (repo / "conftest.py").write_text(
        "from checkout_guard import pytest_sessionfinish, pytest_sessionstart  # noqa: F401\n"
    )
    target = "repo_root_record.jsonl" if writes else "unused"
    (repo / "test_writes.py").write_text(
        "from pathlib import Path\n\n\n"
        "def test_it(tmp_path):\n"
        f"    Path({str(repo / target)!r} if {writes} else tmp_path / 'x').write_text('x')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if writes:
        assert proc.returncode == 1, proc.stdout
        assert "left files in the checkout" in proc.stdout and target in proc.stdout
    else:
        assert proc.returncode == 0, proc.stdout
