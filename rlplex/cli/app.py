"""The Typer application, its consoles, logging set-up and the error boundary.

structlog is configured here (and in Ray's worker setup hook), nowhere else.
Every command is wrapped by :func:`user_errors`: a user-fixable error becomes
one line on stderr and exit status 2, never a traceback. ``rlplex --debug CMD``
adds the traceback of what caused it (a ``pipeline.python`` function's own
exception, or the stack of a crashed pipeline probe).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog
import typer
from rich.console import Console
from rich.markup import escape

from rlplex.config import Config, load_config
from rlplex.errors import RlplexError

try:  # Typer >= 0.20 vendors click; its exceptions are the ones it raises
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older Typer on top of click
    from click import exceptions as click_exceptions  # noqa: F401

app = typer.Typer(
    name="rlplex",
    help="Plan, run and replay RL post-training steps as DAGs of stages on shared GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

_debug = {"on": False}
"""Set by ``rlplex --debug``: print the cause's traceback under a user error."""


def _stderr_logger(*_args: Any) -> structlog.PrintLogger:
    return structlog.PrintLogger(file=sys.stderr)


def log_level() -> int:
    """The log level: ``RLPLEX_LOG`` (debug, info, warning, error), INFO by default."""
    name = os.environ.get("RLPLEX_LOG", "info").upper()
    level = getattr(logging, name, None)
    return level if isinstance(level, int) else logging.INFO


def configure_logging(json_logs: bool | None = None) -> None:
    """structlog to stderr: coloured for a terminal, JSON lines otherwise."""
    if json_logs is None:
        json_logs = not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(log_level()),
        # Resolve sys.stderr per logger, not once: a test runner (or a caller) may swap
        # and close the stream the CLI first saw.
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def user_errors(fn: F) -> F:
    """Turn user-fixable errors into one message on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RlplexError as exc:
            # escape: messages quote values like [0, 1] or "[key]" that rich would eat as markup
            message = escape(str(exc))
            err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
            if _debug["on"]:
                print_cause(exc)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def print_cause(exc: BaseException) -> None:
    """The traceback behind a user error (``--debug``): its cause, or a crash's stack."""
    detail = getattr(exc, "debug_detail", None)
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        text = "".join(traceback.format_exception(cause))
    elif detail:
        text = detail
    else:
        text = "".join(traceback.format_exception(exc))
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def read_config(
    path: Path, overrides: list[str] | None, fmt: str | None, costs: Path | None = None
) -> Config:
    """The checked config; its warnings (async with staleness 0, a model matched to a
    preset ...) printed on stderr."""
    config = load_config(path, overrides=overrides or (), format=fmt, costs=costs)
    warn(config.warnings)
    return config


@app.callback()
def _main(
    debug: bool = typer.Option(
        False, "--debug", help="On an error, also print the traceback of its cause."
    ),
) -> None:
    _debug["on"] = debug
    configure_logging()


def warn(lines: Any) -> None:
    """Print each warning on stderr, one line each."""
    for line in lines:
        err_console.print(f"[yellow]warning:[/] {escape(str(line))}", highlight=False,
                          soft_wrap=True)  # fmt: skip
