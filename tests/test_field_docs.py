"""Every field of rlplex's config and result classes has a docstring under it.

House rule: small components, one class each, a docstring under every field that says
what it is, its unit, and what its default (or None) means: a string literal on the line
after the field, which readers of the source, Sphinx and pydantic (with
``use_attribute_docstrings``) take as the field's description. The classes checked are
pydantic models (a ``BaseModel`` subclass, directly or through another model of the
package) and dataclasses (``@dataclass``, with or without arguments), nested ones
included; a field is an annotated name in the class body, other than ``model_config`` and
a ``ClassVar``. Private fields and private classes count too. Every module's syntax tree
is walked, nothing is imported. The checker is tested on a small synthetic package, so
that a test that cannot fail does not pass for one that does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import rlplex

NOT_FIELDS = frozenset({"model_config"})
"""Annotated names in a model's body that configure the class and are not fields."""


def _last_name(node: ast.expr) -> str:
    """``BaseModel`` of ``BaseModel``, ``pydantic.BaseModel`` or ``dataclass(frozen=True)``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):  # Generic[T], SomeModel[int]
        return _last_name(node.value)
    return ""


def _classes(root: Path) -> Iterator[tuple[Path, ast.ClassDef]]:
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                yield path, node


def _model_names(classes: list[tuple[Path, ast.ClassDef]]) -> set[str]:
    """Names of the package's models and dataclasses, subclasses of its models included."""
    names = {
        node.name
        for _, node in classes
        if any(_last_name(d) == "dataclass" for d in node.decorator_list)
        or any(_last_name(b) == "BaseModel" for b in node.bases)
    }
    while True:
        more = {
            node.name
            for _, node in classes
            if node.name not in names and any(_last_name(b) in names for b in node.bases)
        }
        if not more:
            return names
        names |= more


def _is_docstring(node: ast.stmt | None) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def undocumented_fields(root: Path) -> list[str]:
    """``file:Class.field`` of every field in the package at ``root`` without a docstring."""
    classes = list(_classes(root))
    models = _model_names(classes)
    out = []
    for path, node in classes:
        if node.name not in models:
            continue
        body = node.body
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            if stmt.target.id in NOT_FIELDS or _last_name(stmt.annotation) == "ClassVar":
                continue
            if not _is_docstring(body[i + 1] if i + 1 < len(body) else None):
                rel = path.relative_to(root.parent).as_posix()
                out.append(f"{rel}:{node.name}.{stmt.target.id}")
    return out


def test_every_field_of_a_model_or_dataclass_has_a_docstring() -> None:
    missing = undocumented_fields(Path(rlplex.__file__).parent)
    assert not missing, f"{len(missing)} fields without a docstring under them:\n" + "\n".join(
        missing
    )


def _package(tmp_path: Path, source: str) -> list[str]:
    root = tmp_path / "fake"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "mod.py").write_text(source)
    return undocumented_fields(root)


def test_the_checker_finds_an_undocumented_field_of_a_pydantic_model(tmp_path: Path) -> None:
    source = (
        "from pydantic import BaseModel, ConfigDict\n"
        "class A(BaseModel):\n"
        "    model_config = ConfigDict(frozen=True)\n"
        "    x: int\n"
        '    """Documented."""\n'
        "    y: int = 1\n"
        "    z: str = ''\n"
        '    """Documented."""\n'
    )
    assert _package(tmp_path, source) == ["fake/mod.py:A.y"]


def test_the_checker_finds_fields_of_every_kind_of_dataclass(tmp_path: Path) -> None:
    source = (
        "import dataclasses\n"
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class A:\n"
        "    a: int\n"
        "@dataclass(frozen=True, slots=True)\n"
        "class B:\n"
        "    _b: int\n"
        "    def f(self): ...\n"
        "@dataclasses.dataclass\n"
        "class C:\n"
        "    c: int\n"
    )
    assert _package(tmp_path, source) == ["fake/mod.py:A.a", "fake/mod.py:B._b", "fake/mod.py:C.c"]


def test_the_checker_follows_subclasses_and_nested_classes(tmp_path: Path) -> None:
    source = (
        "import pydantic\n"
        "class Base(pydantic.BaseModel):\n"
        "    pass\n"
        "class Child(Base):\n"
        "    x: int\n"
        "def f():\n"
        "    class Inner(Child):\n"
        "        y: int\n"
    )
    assert _package(tmp_path, source) == ["fake/mod.py:Child.x", "fake/mod.py:Inner.y"]


def test_the_checker_leaves_other_classes_and_class_variables_alone(tmp_path: Path) -> None:
    source = (
        "from typing import ClassVar, NamedTuple, Protocol\n"
        "from dataclasses import dataclass\n"
        "class Plain:\n"
        "    x: int\n"
        "class P(Protocol):\n"
        "    y: int\n"
        "class T(NamedTuple):\n"
        "    z: int\n"
        "@dataclass\n"
        "class D:\n"
        "    limit: ClassVar[int] = 3\n"
        "    count: int = 0\n"
        "    # a comment is not a docstring, but it does not hide the one after it\n"
        '    """Documented."""\n'
    )
    assert _package(tmp_path, source) == []


def test_the_checker_wants_a_string_literal_right_after_the_field(tmp_path: Path) -> None:
    source = (
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class D:\n"
        "    a: int\n"
        "    b: int\n"
        '    """Documents b only."""\n'
        "    c: str = 'x'\n"
        "    f'{c} is not a docstring'\n"
        "    d: int = 0\n"
    )
    assert _package(tmp_path, source) == ["fake/mod.py:D.a", "fake/mod.py:D.c", "fake/mod.py:D.d"]
