"""The Typer application, its consoles, logging set-up and the error boundary.

structlog is configured here (and in Ray's worker setup hook), nowhere else.
Every command is wrapped by :func:`user_errors`: a user-fixable error becomes
one line on stderr and exit status 2, never a traceback. ``rlplex --debug CMD``
adds the traceback of what caused it (a ``pipeline.python`` function's own
exception, or the stack of a crashed pipeline probe).
"""

from __future__ import annotations

import contextvars
import functools
import io
import logging
import os
import sys
import traceback
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import structlog
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlplex.config import Config, load_config
from rlplex.errors import ConfigError, RlplexError

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


def _ellipses(table: Table, width: int) -> int:
    """How many ``…`` rich writes when it lays ``table`` out ``width`` columns wide."""
    probe = Console(width=width, file=io.StringIO(), color_system=None, highlight=False)
    probe.print(table)
    return probe.file.getvalue().count("…")


def print_table(table: Table) -> None:
    """Print ``table`` whole: as narrow as the console when rich can wrap its text there,
    else at the narrowest width where nothing is cut, even past the terminal's.

    A table wider than the console is shrunk by rich, which wraps text at spaces but cuts
    what cannot wrap: a number (``121.…`` for 121.11) or a stage name (``ref_logpr…``). A
    figure rlplex prints is never cut; a line too long for a terminal wraps there."""
    width = console.width
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
    if natural > width:
        whole = _ellipses(table, natural)  # any the cells hold themselves
        if _ellipses(table, width) > whole:
            low, high = width, natural  # cut at low, whole at high
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if _ellipses(table, middle) > whole else (low, middle)
            # Console.print cannot render wider than the console itself. Give back the
            # width as it was set (None: read from the terminal, COLUMNS, at each print),
            # not the one read now, which would pin every later print to it.
            given = console._width
            console.width = high
            try:
                console.print(table)
            finally:
                console._width = given
            return
    console.print(table)


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


class Written:
    """Marks an option whose file the command writes (``--gantt``, ``--out`` ...).

    Put in the option's ``Annotated[...]``; :func:`user_errors` then turns an OSError
    on that path (a directory there, a file where a folder should be, no permission)
    into one line naming the option, the path and the reason.
    """

    def __repr__(self) -> str:
        return "WRITTEN"


WRITTEN = Written()
"""The marker itself: ``Annotated[Path | None, typer.Option("--out"), WRITTEN]``."""

_outputs: contextvars.ContextVar[tuple[tuple[Path, str], ...]] = contextvars.ContextVar(
    "rlplex_outputs", default=()
)
"""The running command's written paths, each with the option that named it."""


def declare_output(path: Path, option: str) -> None:
    """Say that the running command writes ``path`` for ``option``, when it chose the path
    itself (``size --out-config N`` writes FILE.sizeN.yaml): its OSError then reads as
    one line too."""
    _outputs.set((*_outputs.get(), (Path(path), option)))


def _written_options(fn: Callable[..., Any]) -> dict[str, str]:
    """Parameter name -> option (``--gantt``) of ``fn``'s parameters marked :data:`WRITTEN`."""
    from typer.models import ParameterInfo

    options: dict[str, str] = {}
    for name, hint in typing.get_type_hints(fn, include_extras=True).items():
        if typing.get_origin(hint) is not Annotated or not any(
            m is WRITTEN for m in hint.__metadata__
        ):
            continue
        decls = [
            d
            for info in hint.__metadata__
            if isinstance(info, ParameterInfo)
            for d in (*(info.param_decls or ()), info.default)
            if isinstance(d, str) and d.startswith("--")
        ]
        options[name] = decls[0] if decls else "--" + name.rstrip("_").replace("_", "-")
    return options


def _absolute(path: str | Path) -> Path:
    return Path(os.path.abspath(path))


def write_error(exc: OSError, outputs: tuple[tuple[Path, str], ...]) -> ConfigError | None:
    """``exc`` as one line naming the option and the path it failed to write, when it is
    about one of ``outputs`` (the path itself or a folder on its way); else None."""
    failed = {
        _absolute(os.fsdecode(f)): os.fsdecode(f)
        for f in (exc.filename, exc.filename2)
        if isinstance(f, str | bytes | os.PathLike)
    }
    for path, option in outputs:
        target = _absolute(path)
        hit = next((f for f in failed if f == target or f in target.parents), None)
        if hit is None:
            continue
        # A file where a folder should be: mkdir says "File exists", open "Not a directory".
        blocker = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            reason = f"{blocker} is a file, not a folder"
        elif hit == target:
            reason = exc.strerror or str(exc)
        else:
            reason = f"{failed[hit]}: {exc.strerror or exc}"
        return ConfigError(f"cannot write {path}: {reason}", field=option)
    return None


def _fail(exc: RlplexError) -> typing.NoReturn:
    # escape: messages quote values like [0, 1] or "[key]" that rich would eat as markup
    message = escape(str(exc))
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    if _debug["on"]:
        print_cause(exc)
    raise typer.Exit(2) from None


def user_errors(fn: F) -> F:
    """Turn user-fixable errors into one message on stderr and exit status 2.

    So is an OSError writing a file the user named (an option marked :data:`WRITTEN`, or
    a path the command passed to :func:`declare_output`): "--gantt: cannot write PATH:
    REASON".
    """
    written = _written_options(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        named = tuple(
            (Path(kwargs[name]), option)
            for name, option in written.items()
            if isinstance(kwargs.get(name), str | os.PathLike)
        )
        token = _outputs.set(named)
        try:
            return fn(*args, **kwargs)
        except RlplexError as exc:
            _fail(exc)
        except OSError as exc:
            error = write_error(exc, _outputs.get())
            if error is None:
                raise
            error.__cause__ = exc  # for --debug
            _fail(error)
        finally:
            _outputs.reset(token)

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
    path: Path,
    overrides: list[str] | None,
    fmt: str | None,
    costs: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """The checked config; its warnings (async with staleness 0, a model matched to a
    preset ...) printed on stderr. ``env``: ``--env``, the variables a launch script starts
    with."""
    config = load_config(path, overrides=overrides or (), format=fmt, costs=costs, env=env)
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
