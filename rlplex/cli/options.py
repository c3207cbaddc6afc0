"""Options shared by several commands, declared once."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from rlplex.config import Config, load_config

F = TypeVar("F", bound=Callable[..., Any])

ConfigArg = Annotated[
    Path, typer.Argument(help="Config file: native, ROLL, RLinf or verl-style YAML.")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config field: KEY=VALUE with a dotted key. Repeatable."),
]
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format", help="Read the file as native, roll, rlinf or verl (default: detected)."
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

GanttOpt = Annotated[
    Path | None, typer.Option("--gantt", help="Write a self-contained HTML Gantt chart here.")
]
PngOpt = Annotated[Path | None, typer.Option("--png", help="Write a PNG Gantt chart here.")]
TraceOpt = Annotated[
    Path | None, typer.Option("--trace", help="Write a Perfetto/Chrome trace (JSON) here.")
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
    Path, typer.Argument(help="A run's log: rlplex record, verl JSONL or console log, ROLL stdout.")
]
RecordConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="The config the recorded run used (its placement).")
]
RecordFormatOpt = Annotated[
    str | None,
    typer.Option("--format", help="Read the record as rlplex, verl or roll (default: detected)."),
]
SkipBadOpt = Annotated[
    bool, typer.Option("--skip-bad-lines", help="Skip malformed log lines with a warning.")
]
ConfigFormatOpt = Annotated[
    str | None,
    typer.Option("--config-format", help="Read the config as native, roll, rlinf or verl."),
]


@dataclass(frozen=True)
class ConfigOptions:
    """How to read the config file: ``--set``, ``--format`` and ``--costs``, as one object."""

    overrides: tuple[str, ...] = ()
    """``--set KEY=VALUE`` items, in order."""
    format: str | None = None
    """``--format``: native, roll, rlinf or verl; None: detected."""
    costs: Path | None = None
    """``--costs FILE``."""

    def load(self, path: Path, *, unless: tuple[str, ...] = ()) -> Config:
        """The checked config at ``path`` with these options applied; its warnings printed
        (but those in ``unless``, which the command makes moot)."""
        from rlplex.cli.app import warn

        config = load_config(path, overrides=self.overrides, format=self.format, costs=self.costs)
        warn(w for w in config.warnings if w not in unless)
        return config


_CONFIG_PARAMS = (
    inspect.Parameter("set_", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=SetOpt),
    inspect.Parameter(
        "format_", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=FormatOpt
    ),
    inspect.Parameter("costs", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=CostsOpt),
)


def config_options(fn: F) -> F:
    """Give a command ``--set``, ``--format`` and ``--costs``, passed as ``options: ConfigOptions``.

    The three options are declared here once instead of in every command's
    signature; the command takes one ``options`` parameter.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    signature = inspect.signature(fn)
    kept = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in signature.parameters.values()
        if p.name != "options"
    ]

    @functools.wraps(fn)
    def wrapper(*args: Any, set_: Any = None, format_: Any = None, costs: Any = None,
                **kwargs: Any) -> Any:  # fmt: skip
        options = ConfigOptions(tuple(set_ or ()), format_, costs)
        return fn(*args, options=options, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*kept, *_CONFIG_PARAMS])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in hints.items() if k != "options"},
        **{p.name: p.annotation for p in _CONFIG_PARAMS},
    }
    return wrapper  # type: ignore[return-value]


NO_OPTIONS = ConfigOptions()
"""The default of a command's ``options`` parameter (the decorator always passes one)."""
