"""The ``rlplex`` command: a thin layer that parses, calls the library and renders.

One module per command group; options shared by several commands are declared
once in :mod:`rlplex.cli.options`. Every command that reads a config takes
``--set KEY=VALUE`` (repeatable, dotted keys) and ``--format``. Bad input ends
with one message naming the file, the field and the value, and exit status 2.
"""

from __future__ import annotations

import typer
from rich.markup import escape

from rlplex.cli import (  # noqa: F401  (registers)
    config_cmds,
    estimate,
    plan_cmds,
    records,
    run_cmd,
    size_cmd,
    views,
)
from rlplex.cli.app import app, configure_logging, user_errors

__all__ = ["app", "configure_logging", "main", "user_errors"]


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``rlplex`` script.

    Usage errors (an unknown option, ``--steps 0``) are one line on stderr and
    exit status 2, like every other input error, instead of click's usage box.
    """
    from rlplex.cli.app import click_exceptions, err_console

    try:
        code = app(args=argv, standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx else str(exc))
        code = 2
    except click_exceptions.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        err_console.print(
            f"[bold red]error:[/] {escape(exc.format_message())}{escape(hint)}",
            highlight=False,
            soft_wrap=True,
        )
        code = exc.exit_code
    except click_exceptions.ClickException as exc:
        err_console.print(f"[bold red]error:[/] {escape(exc.format_message())}", highlight=False)
        code = exc.exit_code
    except typer.Abort:
        err_console.print("[yellow]aborted[/]", highlight=False)
        code = 130
    raise SystemExit(code if isinstance(code, int) else 0)
