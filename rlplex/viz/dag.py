"""Pictures of the step DAG: SVG/PNG through Graphviz when present, Mermaid text always.

:func:`rlplex.dag.export.to_dot` already colours stages by role and dashes
cross-step edges; this module only turns that text into a picture, using
Graphviz's ``dot`` program when it is on PATH (it is an optional system
package, not a Python dependency), and says how to get it when it is not.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from rlplex.dag.export import to_dot, to_mermaid
from rlplex.dag.pipeline import Pipeline
from rlplex.errors import RlplexError

IMAGE_FORMATS = ("svg", "png")
TEXT_FORMATS = {"dot": to_dot, "gv": to_dot, "mmd": to_mermaid, "mermaid": to_mermaid}


class GraphvizMissingError(RlplexError):
    """An SVG or PNG was asked for but Graphviz's ``dot`` is not on PATH."""


def have_graphviz() -> bool:
    """Whether ``dot`` is on PATH."""
    return shutil.which("dot") is not None


def render_dot(dot_text: str, fmt: str = "svg") -> bytes:
    """Run ``dot -T{fmt}`` on ``dot_text``.

    Raises:
        GraphvizMissingError: ``dot`` is not on PATH.
        RlplexError: ``dot`` failed (its message is included).
    """
    if fmt not in IMAGE_FORMATS:
        raise RlplexError(f"unknown image format {fmt!r}: use one of {', '.join(IMAGE_FORMATS)}")
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissingError(
            "Graphviz's `dot` is not installed (apt-get install graphviz, brew install graphviz);"
            " write .dot or .mmd text instead"
        )
    proc = subprocess.run(
        [exe, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        raise RlplexError(f"dot failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def suffix_format(path: str | Path) -> str | None:
    """The text a DAG file of this name holds, by its suffix: ``dot`` (.dot, .gv, and the
    .svg/.png drawn from DOT) or ``mermaid`` (.mmd); None when the suffix does not say."""
    suffix = Path(path).suffix.lstrip(".").lower()
    if suffix in IMAGE_FORMATS:
        return "dot"
    exporter = TEXT_FORMATS.get(suffix)
    return None if exporter is None else "dot" if exporter is to_dot else "mermaid"


def write_dag(pipeline: Pipeline, path: str | Path) -> Path:
    """Write the DAG as ``.svg``/``.png`` (Graphviz) or ``.dot``/``.mmd`` text, by suffix."""
    path = Path(path)
    suffix = path.suffix.lstrip(".").lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix in TEXT_FORMATS:
        path.write_text(TEXT_FORMATS[suffix](pipeline), encoding="utf-8")
    elif suffix in IMAGE_FORMATS:
        path.write_bytes(render_dot(to_dot(pipeline), suffix))
    else:
        raise RlplexError(
            f"{path}: unknown DAG picture type {path.suffix!r}: use .svg, .png, .dot or .mmd"
        )
    return path
