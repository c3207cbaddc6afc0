"""The environment of a child Python that imports rlplex, for tests that start one.

Tests run the CLI, a record's lock holder or a Ray cluster in a fresh process.
That process must find the checkout first and then whatever this process found:
on a lent GPU machine the project's dependencies are not installed into the
interpreter but put on ``PYTHONPATH`` (a packed site folder), and a child given
only the checkout cannot import pydantic or Ray there.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def python_path(*first: str) -> str:
    """``first`` (the checkout when none is given), then this process's own ``PYTHONPATH``."""
    paths = [*(first or (str(ROOT),)), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(dict.fromkeys(p for p in paths if p))


def child_env(*paths: str, inherit: bool = True, **variables: str) -> dict[str, str]:
    """This environment (or none, ``inherit=False``) with :func:`python_path` of ``paths``,
    Ray's token check off, and ``variables``."""
    base = dict(os.environ) if inherit else {}
    return {**base, "PYTHONPATH": python_path(*paths), "RAY_AUTH_MODE": "disabled", **variables}
