"""Options shared by several commands, declared once."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from rlplex.cli.app import WRITTEN
from rlplex.config import Config, load_config
from rlplex.config.loading import check_format, parse_env

F = TypeVar("F", bound=Callable[..., Any])

CONFIG_HELP = (
    "Config file: native, ROLL, RLinf, verl or NeMo RL YAML, or a verl, RLinf or OpenRLHF"
    " launch script (.sh)."
)
ConfigArg = Annotated[Path, typer.Argument(help=CONFIG_HELP)]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config field: KEY=VALUE with a dotted key. Repeatable."),
]
EnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--env",
        help="A variable a launch script starts with: NAME=VALUE (DEVICE=gpu for a script"
        " that picks values in a case on $DEVICE). rlplex reads no environment of its own."
        " Repeatable.",
    ),
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Read the file as native, roll, rlinf, verl, nemo_rl or openrlhf (default: detected).",
    ),
]
CostsOpt = Annotated[
    Path | None,
    typer.Option(
        "--costs",
        help="YAML with stage costs (stages: {NAME: {seconds: ...}}) for imported configs.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
BaselineOpt = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="Plan a baseline instead: sequential or naive-colocate (same cost model).",
    ),
]

GanttOpt = Annotated[
    Path | None,
    typer.Option("--gantt", help="Write a self-contained HTML Gantt chart here."),
    WRITTEN,
]
PngOpt = Annotated[
    Path | None, typer.Option("--png", help="Write a PNG Gantt chart here."), WRITTEN
]
TraceOpt = Annotated[
    Path | None,
    typer.Option("--trace", help="Write a Perfetto/Chrome trace (JSON) here."),
    WRITTEN,
]
ConfigStepsOpt = Annotated[int, typer.Option("--steps", help="Steps to simulate for a config.")]
CollapseOpt = Annotated[
    bool | None,
    typer.Option(
        "--collapse/--no-collapse",
        help="Collapse GPUs that ran identical ops into one band (default: past 32 GPUs).",
    ),
]


RecordArg = Annotated[
    Path,
    typer.Argument(
        help="A run's log: rlplex record, verl JSONL or console log, ROLL stdout or"
        " log_history JSON, a per-step"
        " CSV history (wandb's export of a run); or a summary record of mean seconds and"
        " lengths (YAML, JSON, CSV; docs/record.md)."
    ),
]
RecordConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="The config the recorded run used (its placement).")
]
RecordFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Read the record as rlplex, verl, roll, nemo_rl, openrlhf, summary, history or"
        " tensorboard"
        " (history: a per-step CSV, one column per metric, as wandb exports a run;"
        " tensorboard: an event file or a run's folder of them; default: detected).",
    ),
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad-lines", help="Skip malformed log lines with a warning.")
]
ConfigFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--config-format", help="Read the config as native, roll, rlinf, verl, nemo_rl or openrlhf."
    ),
]


@dataclass(frozen=True)
class ConfigOptions:
    """How to read the config file: ``--set``, ``--format`` and ``--costs``, as one object."""

    overrides: tuple[str, ...] = ()
    """``--set KEY=VALUE`` items, in order."""
    format: str | None = None
    """``--format``: native, roll, rlinf, verl, nemo_rl or openrlhf; None: detected."""
    costs: Path | None = None
    """``--costs FILE``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """``--env NAME=VALUE`` items: the variables a launch script starts with."""

    def load(self, path: Path, *, unless: tuple[str, ...] = (), planned: bool = False) -> Config:
        """The checked config at ``path`` with these options applied; its warnings printed
        (but those in ``unless``, which the command makes moot). ``planned``: the command
        shows the plan's figures, which a role placed by the search has estimated again on
        its chosen devices (:func:`~rlplex.estimate.context.planned_warnings`)."""
        from rlplex.cli.app import warn
        from rlplex.estimate.context import planned_warnings

        config = load_config(
            path, overrides=self.overrides, format=self.format, costs=self.costs, env=self.env
        )
        shown = [w for w in config.warnings if not any(w == u or w.endswith(u) for u in unless)]
        warn(planned_warnings(shown) if planned else shown)
        return config


def one_sweep(specs: list[str] | None) -> str | None:
    """The one ``--sweep KEY=V1,V2,...`` given, or None; a second is refused, not dropped.

    Raises:
        ConfigError: ``--sweep`` was given more than once.
    """
    from rlplex.errors import ConfigError

    if not specs:
        return None
    if len(specs) > 1:
        raise ConfigError(
            "one --sweep at a time, got "
            + " and ".join(repr(s) for s in specs)
            + ": sweep one key, and --set the others",
            field="--sweep",
        )
    return specs[0]


def _keyword(name: str, annotation: Any, default: Any = None) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def grouped_options(
    params: tuple[inspect.Parameter, ...], build: Callable[..., Any], name: str = "options"
) -> Callable[[F], F]:
    """A decorator that adds ``params`` to a command and passes them as one object.

    The command declares ``{name}: T`` (with a default); the decorator removes
    it from what Typer sees, adds ``params`` instead, and calls the command with
    ``{name}=build(**those params)``. Options shared by several commands are
    thus declared once, here.
    """

    def decorate(fn: F) -> F:
        hints = typing.get_type_hints(fn, include_extras=True)
        signature = inspect.signature(fn)
        kept = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values()
            if p.name != name
        ]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {p.name: kwargs.pop(p.name, p.default) for p in params}
            return fn(*args, **{name: build(**given)}, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*kept, *params])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {
            **{k: v for k, v in hints.items() if k != name},
            **{p.name: p.annotation for p in params},
        }
        return wrapper  # type: ignore[return-value]

    return decorate


config_options = grouped_options(
    (
        _keyword("set_", SetOpt),
        _keyword("format_", FormatOpt),
        _keyword("costs", CostsOpt),
        _keyword("env", EnvOpt),
    ),
    lambda set_, format_, costs, env: ConfigOptions(
        tuple(set_ or ()), format_, costs, parse_env(env or ())
    ),
)
"""``--set``, ``--format``, ``--costs`` and ``--env``, passed as ``options: ConfigOptions``."""


@dataclass(frozen=True)
class RecordOptions:
    """How to read a record and the config it ran with (``replay``, ``whatif``, ``calibrate``)."""

    record_format: str | None = None
    """``--format``: rlplex, verl, roll, nemo_rl, openrlhf, summary, history or tensorboard;
    None: detected."""
    skip_bad_lines: bool = False
    """``--skip-bad-lines``: skip malformed log lines (counted) instead of refusing the file."""
    config_format: str | None = None
    """``--config-format``: native, roll, rlinf, verl, nemo_rl or openrlhf; None: detected."""
    costs: Path | None = None
    """``--costs FILE``, merged into every config read."""
    env: Mapping[str, str] = field(default_factory=dict)
    """``--env NAME=VALUE`` items: the variables a launch script starts with."""


record_options = grouped_options(
    (
        _keyword("format_", RecordFormatOpt),
        _keyword("skip_bad_lines", SkipBadOpt, False),
        _keyword("config_format", ConfigFormatOpt),
        _keyword("costs", CostsOpt),
        _keyword("env", EnvOpt),
    ),
    lambda format_, skip_bad_lines, config_format, costs, env: RecordOptions(
        format_,
        skip_bad_lines,
        check_format(config_format, "--config-format"),
        costs,
        parse_env(env or ()),
    ),
)
"""``--format``, ``--skip-bad-lines``, ``--config-format``, ``--costs`` and ``--env`` of a record
command, passed as ``options: RecordOptions``."""


NO_OPTIONS = ConfigOptions()
"""The default of a command's ``options`` parameter (the decorator always passes one)."""
NO_RECORD_OPTIONS = RecordOptions()
"""Likewise for the record commands."""


@dataclass(frozen=True)
class ViewPaths:
    """Where to draw a timeline: ``--gantt`` HTML, ``--png``, ``--trace`` (Perfetto JSON)."""

    gantt: Path | None = None
    """Self-contained HTML Gantt chart."""
    png: Path | None = None
    """PNG Gantt chart."""
    trace: Path | None = None
    """Perfetto / Chrome trace."""

    def __bool__(self) -> bool:
        return any((self.gantt, self.png, self.trace))


view_options = grouped_options(
    (_keyword("gantt", GanttOpt), _keyword("png", PngOpt), _keyword("trace", TraceOpt)),
    ViewPaths,
    name="views",
)
"""``--gantt``, ``--png`` and ``--trace``, passed as ``views: ViewPaths``."""
NO_VIEWS = ViewPaths()
"""The default of a command's ``views`` parameter."""
