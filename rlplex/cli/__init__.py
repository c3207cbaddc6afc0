"""The ``rlplex`` command: a thin layer that parses, calls the library and renders.

One module per command group; options shared by several commands are declared
once in :mod:`rlplex.cli.options`. Every command that reads a config takes
``--set KEY=VALUE`` (repeatable, dotted keys) and ``--format``. Bad input ends
with one message naming the file, the field and the value, and exit status 2.
"""

from __future__ import annotations

from rlplex.cli import (  # noqa: F401  (registers)
    config_cmds,
    estimate,
    plan_cmds,
    records,
    run_cmd,
    views,
)
from rlplex.cli.app import app, configure_logging, user_errors

__all__ = ["app", "configure_logging", "main", "user_errors"]


def main() -> None:
    """Entry point of the ``rlplex`` script."""
    app()
