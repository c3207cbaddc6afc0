"""The file names of views: each kind of file must end in its own suffix.

Checked before anything is computed or written, so ``--gantt x.png`` is refused
like ``--png x.html`` rather than writing HTML into a ``.png`` file.
"""

from __future__ import annotations

from pathlib import Path

from rlplex.errors import ConfigError


def check_suffix(path: str | Path, suffixes: tuple[str, ...], what: str, option: str) -> Path:
    """``path`` as a Path, or a ConfigError naming ``option`` when its suffix is not one of
    ``suffixes`` (any case)."""
    path = Path(path)
    if path.suffix.lower() not in suffixes:
        raise ConfigError(
            f"{what} file name must end in {' or '.join(suffixes)}", field=option, value=str(path)
        )
    return path


def check_png_path(path: str | Path, option: str = "--png") -> Path:
    """A PNG chart's path: it must end in ``.png``."""
    return check_suffix(path, (".png",), "a PNG chart's", option)


def check_html_path(path: str | Path, option: str = "--gantt") -> Path:
    """An HTML page's path: it must end in ``.html`` or ``.htm``."""
    return check_suffix(path, (".html", ".htm"), "an HTML page's", option)


def check_trace_path(path: str | Path, option: str = "--trace") -> Path:
    """A Perfetto/Chrome trace's path: it must end in ``.json``."""
    return check_suffix(path, (".json",), "a Perfetto trace's", option)


def check_view_paths(
    gantt: str | Path | None = None,
    png: str | Path | None = None,
    trace: str | Path | None = None,
) -> None:
    """Check the suffix of each of ``--gantt``, ``--png`` and ``--trace`` that is given."""
    for path, check in ((gantt, check_html_path), (png, check_png_path), (trace, check_trace_path)):
        if path is not None:
            check(path)
