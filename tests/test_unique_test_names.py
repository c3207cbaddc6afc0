"""Test modules have distinct file names: the folders are not packages, so pytest imports each
module under its bare name and refuses a second file of the same name (a session broke on
``tests/bench/test_gpu_grpo.py`` beside ``tests/pipelines/test_gpu_grpo.py``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_modules_share_a_name() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [name for name, count in names.items() if count > 1]
