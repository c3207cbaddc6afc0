"""The order of rlplex's packages (DESIGN.md, "Package layout"): no import runs back up.

Every module's syntax tree is walked, so imports made inside functions count,
relative imports are resolved, and a string module name passed to
``importlib.import_module`` (or ``__import__``) counts as an import too (an
f-string counts by its constant prefix, e.g. ``f"rlplex.resources.importers.{fmt}"``).
The checker is tested on a small synthetic package tree, so that a test that
cannot fail does not pass for one that does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import rlplex

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "bulk"),
    ("dag",),
    ("resources",),
    ("estimate",),
    ("config",),
    ("plan",),
    ("timeline",),
    ("stages",),
    ("sim", "runtime", "viz"),
    ("pipelines",),
    ("reports",),
    ("cli",),
)
"""DESIGN.md's order, lowest first: a package imports only from tiers before its own."""

SAME_TIER: frozenset[tuple[str, str]] = frozenset()
"""Imports allowed between two packages of one tier, as (importer, imported).

DESIGN.md allows none: sim, runtime and viz do not import each other (what
they share lives below them, in plan and timeline), and errors and bulk stand
alone.
"""


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} imports {self.imported} (up the order)"


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_module_call(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("import_module", "__import__")


def _string_prefix(node: ast.expr) -> str | None:
    """A constant string, or the constant start of an f-string (None: not known statically)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return None


def _resolve(name: str, level: int, package: str) -> str:
    if not level:
        return name
    parts = package.split(".")
    anchor = parts[: len(parts) - level + 1]
    return ".".join([*anchor, name] if name else anchor)


def imported_modules(path: Path, module: str) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import in ``path``, at any depth, ``importlib`` included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", node.level, package)
            for alias in node.names:
                # ``from pkg import mod`` names the submodule; the package's tier decides.
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and _import_module_call(node) and node.args:
            name = _string_prefix(node.args[0])
            if name is None:
                continue
            anchor = next((k.value for k in node.keywords if k.arg == "package"), None)
            if name.startswith(".") and anchor is not None:
                anchor_name = _string_prefix(anchor)
                if anchor_name is None:
                    continue
                level = len(name) - len(name.lstrip("."))
                name = _resolve(name.lstrip("."), level, anchor_name)
            yield node.lineno, name


def check_layers(
    root: Path, layers: Sequence[Sequence[str]], same_tier: frozenset[tuple[str, str]] = frozenset()
) -> list[Violation | str]:
    """Every import in the package at ``root`` that runs against ``layers``.

    The root package itself (its ``__init__`` re-exports) sits at the tier of
    the highest package it imports, so ``from rlplex import Config`` inside
    ``rlplex.dag`` counts as the upward import it is. A top-level package or
    module missing from ``layers`` is reported too: a new package must be
    given its place.
    """
    top = root.name
    tier = {name: i for i, names in enumerate(layers) for name in names}
    out: list[Violation | str] = []
    present = {
        path.stem if path.is_file() else path.name
        for path in root.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    out += [
        f"{top}.{name} has no place in the order of packages"
        for name in sorted(present - set(tier))
    ]
    root_imports = {
        name.split(".")[1]
        for _, name in imported_modules(root / "__init__.py", top)
        if name.startswith(top + ".")
    }
    root_tier = max((tier[p] for p in root_imports if p in tier), default=-1)

    def place(dotted: str) -> tuple[str, int] | None:
        parts = dotted.split(".")
        if parts[0] != top:
            return None
        if len(parts) == 1 or parts[1] not in tier:
            return top, root_tier  # the root package, or a name it re-exports
        return parts[1], tier[parts[1]]

    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        if module == top:
            continue
        own = place(module)
        if own is None or own[0] == top:
            continue
        for line, name in imported_modules(path, module):
            target = place(name)
            if target is None or target[0] == own[0]:
                continue
            upward = target[1] > own[1]
            sideways = target[1] == own[1] and (own[0], target[0]) not in same_tier
            if upward or sideways:
                out.append(Violation(str(path.relative_to(root.parent)), line, module, name))
    return out


def test_no_import_runs_up_the_order_of_packages() -> None:
    root = Path(rlplex.__file__).parent
    found = check_layers(root, LAYERS, SAME_TIER)
    assert not found, "\n".join(map(str, found))


USER_CODE_LOADERS = frozenset({"rlplex.config.sandbox", "rlplex.stages.rewards"})
"""Modules that import a module named at run time: the user's code, named in a config."""


def test_only_user_code_is_imported_by_a_name_no_checker_can_read() -> None:
    """An ``import_module(name)`` whose name is not written in the source hides an import
    from the order check; only the loaders of user code may do it (formats, for one, are
    registered with ordinary imports in :mod:`rlplex.config.formats`)."""
    root = Path(rlplex.__file__).parent
    hidden = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            call = isinstance(node, ast.Call) and _import_module_call(node) and node.args
            if call and _string_prefix(node.args[0]) is None:
                hidden.add(_module_name(root, path))
    assert hidden == USER_CODE_LOADERS


def test_the_order_names_every_package_once() -> None:
    names = [name for tier in LAYERS for name in tier]
    assert len(names) == len(set(names))


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "fake"
    for rel, text in {"__init__.py": "from fake.low import x\n", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for package in ("low", "mid_a", "mid_b", "high"):
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").touch()
    return root


FAKE_LAYERS = (("low",), ("mid_a", "mid_b"), ("high",))


def _violations(tmp_path: Path, text: str, same_tier=frozenset()) -> list[str]:
    root = _tree(tmp_path, {"low/mod.py": text, "mid_a/mod.py": "", "high/mod.py": ""})
    return [str(v) for v in check_layers(root, FAKE_LAYERS, same_tier)]


def test_the_checker_accepts_imports_down_the_order(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "high/mod.py": "import fake.low\nfrom fake.mid_a import mod\nfrom ..low import x\n",
            "mid_a/mod.py": "def f():\n    from fake.low.deep import y\n",
            "low/deep.py": "import importlib\nimportlib.import_module('fake.low.mod')\n",
        },
    )
    assert check_layers(root, FAKE_LAYERS) == []


def test_the_checker_finds_an_upward_import_at_module_level(tmp_path: Path) -> None:
    found = _violations(tmp_path, "from fake.high.mod import thing\n")
    assert found == ["fake/low/mod.py:1: fake.low.mod imports fake.high.mod.thing (up the order)"]


def test_the_checker_finds_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    assert _violations(tmp_path, "def f():\n    import fake.high.mod\n")


def test_the_checker_resolves_relative_imports(tmp_path: Path) -> None:
    assert _violations(tmp_path, "from ..high import mod\n")
    assert _violations(tmp_path, "from .. import high\n")
    assert not _violations(tmp_path, "from . import other\n")


def test_the_checker_finds_importlib_with_a_constant_or_an_f_string(tmp_path: Path) -> None:
    assert _violations(tmp_path, "import importlib\nimportlib.import_module('fake.high.mod')\n")
    assert _violations(
        tmp_path, "from importlib import import_module\nimport_module(f'fake.high.{n}')\n"
    )
    assert _violations(
        tmp_path, "import importlib\nimportlib.import_module('.high', package='fake')\n"
    )
    assert _violations(tmp_path, "__import__('fake.high')\n")


def test_the_checker_finds_a_reexport_of_the_root_package(tmp_path: Path) -> None:
    files = {"__init__.py": "from fake.high.mod import x\n", "low/mod.py": "from fake import x\n"}
    found = check_layers(_tree(tmp_path, {**files, "high/mod.py": ""}), FAKE_LAYERS)
    assert [v.importer for v in found if isinstance(v, Violation)] == ["fake.low.mod"]


def test_the_checker_refuses_same_tier_imports_unless_allowed(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"mid_a/mod.py": "def f():\n    from fake.mid_b import y\n"})
    assert check_layers(root, FAKE_LAYERS)
    assert check_layers(root, FAKE_LAYERS, frozenset({("mid_a", "mid_b")})) == []


def test_the_checker_names_a_package_missing_from_the_order(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"extra/__init__.py": ""})
    assert check_layers(root, FAKE_LAYERS) == ["fake.extra has no place in the order of packages"]
