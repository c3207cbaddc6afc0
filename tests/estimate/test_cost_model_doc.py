"""docs/cost-model.md keeps every default the estimator reads in step with the code.

Issue 18: the page lists every term and default with its source. These tests hold its
tables against what the estimator actually reads: every field of
:class:`~rlplex.resources.inputs.Efficiency` has a row in "Efficiency defaults" whose
default is ``efficiency.yaml``'s value; every numeric constant defined at module level in
``rlplex/estimate`` has a row naming it with its value; every GPU preset has a row in "GPU
presets" with its figures; a **measured** figure names its bench script or whoever measured
it, a **fitted** one says what it was fitted on. The table parser is checked on a small
synthetic page, so that a parser that finds nothing cannot pass.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import rlplex
from rlplex.estimate.specs import efficiency_defaults, gpu_presets
from rlplex.resources.inputs import Efficiency

ROOT = Path(rlplex.__file__).resolve().parent
DOC = ROOT.parent / "docs" / "cost-model.md"

CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")
"""A public module-level constant's name."""

NOT_DEFAULTS = frozenset({"stages"})
"""Efficiency fields that are no default: ``stages`` (a user's per-stage factor, empty)."""


def _rows(text: str, heading: str) -> list[list[str]]:
    """The cells of every row of the first table under ``heading`` (a Markdown heading line's
    text), the header and the rule left out."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("#").strip() == heading)
    rows: list[list[str]] = []
    seen = False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            seen = True
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif seen or line.startswith("#"):
            break
    return rows[2:]


def _number(cell: str) -> float:
    """The first number of a cell (``7.1e-5``, ``2,048``, ``989.5 (dense)``)."""
    found = re.search(r"-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?", cell)
    assert found, f"no number in {cell!r}"
    return float(found.group().replace(",", ""))


def _efficiency_rows(text: str) -> dict[str, list[str]]:
    """Rows of "Efficiency defaults" by key (a bare key in the first cell)."""
    return {
        row[0]: row
        for row in _rows(text, "Efficiency defaults (`rlplex/estimate/data/efficiency.yaml`)")
    }


def _constant_rows(text: str) -> dict[str, str]:
    """Every ``NAME`` in backticks in a table row's first cell, with its value: the second
    cell's values in order (``10, 4, 6`` for three names), or ``key value`` pairs for a
    mapping (``hidden 60, attn 16``)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        names = re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        if not names:
            continue
        parts = [p.strip() for p in cells[1].split(",")] if len(names) > 1 else [cells[1]]
        assert len(parts) == len(names), f"{names}: {len(parts)} values in {cells[1]!r}"
        values.update(zip(names, parts, strict=True))
    return values


def _module_constants() -> dict[str, object]:
    """Public UPPER_CASE constants assigned at module level in ``rlplex/estimate``, with their
    values: numbers, and mappings of names to numbers."""
    found: dict[str, object] = {}
    for path in sorted((ROOT / "estimate").glob("*.py")):
        module = importlib.import_module(f"rlplex.estimate.{path.stem}")
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                if not isinstance(target, ast.Name) or not CONSTANT.fullmatch(target.id):
                    continue
                value = getattr(module, target.id)
                numeric = isinstance(value, int | float) and not isinstance(value, bool)
                mapping = isinstance(value, dict) and all(
                    isinstance(v, int | float) for v in value.values()
                )
                if numeric or (mapping and value):
                    found[target.id] = value
    return found


def _matches(value: object, cell: str) -> bool:
    if isinstance(value, dict):
        pairs = dict(re.findall(r"(\w+) (-?[\d.e-]+)", cell))
        return {k: float(v) for k, v in pairs.items()} == {k: float(v) for k, v in value.items()}
    return _number(cell) == pytest.approx(float(value))  # type: ignore[arg-type]


def test_every_efficiency_field_has_a_row_with_the_data_files_default() -> None:
    rows = _efficiency_rows(DOC.read_text())
    defaults = efficiency_defaults()
    fields = set(Efficiency.model_fields) - NOT_DEFAULTS
    assert set(defaults) == fields, "efficiency.yaml and Efficiency name other parameters"
    assert fields <= set(rows), f"not in docs/cost-model.md: {sorted(fields - set(rows))}"
    for key in sorted(fields):
        assert _number(rows[key][1]) == pytest.approx(float(defaults[key]["value"])), key
        assert len(rows[key]) == 4 and rows[key][3], f"{key}: no source"


def test_every_estimator_constant_has_a_row_with_its_value() -> None:
    rows = _constant_rows(DOC.read_text())
    constants = _module_constants()
    assert len(constants) > 20  # the walk finds them (a broken walk finds none)
    missing = sorted(set(constants) - set(rows))
    assert not missing, f"not in a table of docs/cost-model.md: {missing}"
    wrong = {n: (v, rows[n]) for n, v in constants.items() if not _matches(v, rows[n])}
    assert not wrong, f"docs/cost-model.md says another value: {wrong}"


def test_every_gpu_preset_has_a_row_with_its_figures() -> None:
    rows = {
        row[0].split()[0]: row
        for row in _rows(DOC.read_text(), "GPU presets (`rlplex/estimate/data/gpus.yaml`)")
    }
    for name, gpu in gpu_presets().items():
        assert name in rows, f"GPU preset {name} not in docs/cost-model.md"
        figures = [
            gpu.peak_tflops, gpu.memory_gb, gpu.memory_gb_per_s, gpu.host_gb_per_s,
            gpu.intra_node_gb_per_s, gpu.inter_node_gb_per_s, gpu.node_host_memory_gb,
        ]  # fmt: skip
        said = [_number(c) for c in rows[name][1:8]]
        assert said == pytest.approx(figures), name
        assert _number(rows[name][8]) == gpu.node_gpus, name


def test_measured_and_fitted_defaults_say_how() -> None:
    """A **measured** row names its bench script or who measured it ("by" a source); a
    **fitted** row says what it was fitted on."""
    text = DOC.read_text()
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        for match in re.finditer(r"\*\*(measured|fitted)\*\*", line, re.IGNORECASE):
            after = line[match.end() : match.end() + 30]
            if match.group(1).lower() == "fitted":
                assert after.startswith((" on ", " to ")), f"fitted on what? {line[:80]}"
            else:
                assert "bench/" in line or after.startswith((" by ", " on ")), line[:80]


SYNTHETIC = """
## Efficiency defaults (`rlplex/estimate/data/efficiency.yaml`)

| key | default | what | source |
|---|---|---|---|
| train | 0.6 | MFU | a paper |

| constant | value | what | source |
|---|---|---|---|
| `A_B`, `C` (formulas) | 10, 4 | x | **measured** by `bench/x.py` |
| `MAP` | hidden 60, attn 16 | y | **fitted** on rows |
"""


def test_the_parsers_read_a_synthetic_page() -> None:
    """The checks above cannot pass on a parser that finds nothing."""
    assert _efficiency_rows(SYNTHETIC)["train"][1] == "0.6"
    rows = _constant_rows(SYNTHETIC)
    assert rows == {"A_B": "10", "C": "4", "MAP": "hidden 60, attn 16"}
    assert _matches({"hidden": 60.0, "attn": 16}, rows["MAP"])
    assert not _matches({"hidden": 61.0, "attn": 16}, rows["MAP"])
    assert _matches(4, rows["C"]) and not _matches(5, rows["C"])
    assert _number("7.1e-5 s") == pytest.approx(7.1e-5) and _number("2,048 (8)") == 2048
