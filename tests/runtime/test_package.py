"""``from rlplex.runtime import execute`` is the function, whatever was imported before."""

from __future__ import annotations

import subprocess
import sys


def test_execute_stays_the_function_after_every_submodule_is_imported() -> None:
    # A fresh interpreter: the test session may have imported the submodules already.
    code = """
import inspect, pkgutil, importlib, sys
import rlplex.runtime
assert "ray" not in sys.modules and "torch" not in sys.modules, "import rlplex.runtime is heavy"
for mod in pkgutil.iter_modules(rlplex.runtime.__path__):
    importlib.import_module(f"rlplex.runtime.{mod.name}")
from rlplex.runtime import execute
assert inspect.isfunction(execute), execute
from rlplex.runtime import execute
assert inspect.isfunction(execute), execute
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
