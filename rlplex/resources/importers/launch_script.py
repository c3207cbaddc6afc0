"""Read a verl launch script: the Hydra config it starts and the overrides it passes.

verl runs are mostly started by a shell script (``examples/grpo_trainer/*.sh``, a
recipe's ``run_*.sh``) that sets a few variables and runs
``python3 -m verl.trainer.main_ppo key=value ...``: the run's config is verl's Hydra
config (``verl/trainer/config/ppo_trainer.yaml``, or the file ``--config-path`` and
``--config-name`` name) with those overrides on top. :func:`read_launch` finds that
command in the script's text, the way a POSIX shell reads it as far as a config needs:

- line continuations, comments, single and double quotes;
- ``NAME=value`` (and ``export NAME=value``) assignments, in order, expanded where they
  are used: ``$NAME``, ``${NAME}``, ``${NAME:-default}`` (``-``, ``:=``, ``=``, ``:+``),
  integer ``$((...))`` arithmetic, and ``$(pwd)`` or ``$PWD`` as the folder holding the
  module (verl's scripts run from the repository root). The environment is not read: a variable the
  script does not set stays as written (``$MODEL_PATH``), and so does any other command
  substitution; ``$@`` and other positional parameters are empty;
- the first command that runs a Python module of ``verl`` or ``recipe`` (or a
  ``main_*.py`` file) with ``python``/``python3`` or ``torchrun`` anywhere in it (after
  ``env``, ``ray job submit ... --``, ``nohup`` ...); its ``key=value``, ``+key=value`` and
  ``++key=value`` arguments are the overrides (``~key`` deletions are skipped).

Control flow is not followed: assignments inside ``if`` or ``for`` bodies count in the
order they are written, and a script that launches several runs gives its first.
:func:`find_config` locates the Hydra file: the module is looked for in the folders
above the script (a verl checkout), then among the installed packages, and its
``@hydra.main(config_path=..., config_name=...)`` read from its source.
"""

from __future__ import annotations

import ast
import importlib.util
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rlplex.errors import ConfigError
from rlplex.resources.yaml_io import load_yaml_text

SCRIPT_SUFFIXES = (".sh", ".bash")
"""File suffixes read as launch scripts."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_OVERRIDE = re.compile(r"^(\+\+|\+)?([A-Za-z_][\w.@/-]*)=(.*)$", re.S)
_MODULE_ROOTS = ("verl.", "recipe.")
_OPERATORS = (";", "&&", "||", "|", "&")
_DECLARATIONS = ("export", "local", "declare", "readonly")


def is_launch_script(path: str | Path) -> bool:
    """Whether ``path`` is read as a launch script (its suffix: ``.sh`` or ``.bash``)."""
    return Path(path).suffix.lower() in SCRIPT_SUFFIXES


@dataclass(frozen=True)
class Launch:
    """The command a launch script runs, as far as its config goes."""

    module: str | None
    """The Python module run with ``-m`` (``verl.trainer.main_ppo``), or None."""
    program: str | None
    """The Python file run instead (``verl/trainer/main_ppo.py``), or None."""
    config_path: str | None
    """``--config-path`` (Hydra: relative to the module's folder), if given."""
    config_name: str | None
    """``--config-name``, if given."""
    overrides: tuple[str, ...]
    """The ``key=value`` overrides, leading ``+``/``++`` dropped, in order."""
    line: int
    """1-based line of the script where the command starts."""
    root: str | None = None
    """The folder ``$(pwd)`` stood for (the module's root), if one was given."""


class _Words:
    """Split one logical line into words the way a POSIX shell does, expanding as it goes."""

    def __init__(self, text: str, lookup: Callable[[str], str | None], root: str | None) -> None:
        self.text, self.lookup, self.root = text, lookup, root
        self.i = 0

    def words(self) -> list[str | None]:
        """The words; None stands for an operator between commands (``;``, ``&&``, ``|``)."""
        out: list[str | None] = []
        word: list[str] = []
        started = False
        t = self.text
        while self.i < len(t):
            c = t[self.i]
            if c in " \t\n":
                if started:
                    out.append("".join(word))
                    word, started = [], False
                self.i += 1
            elif c == "#" and not started:
                break
            elif c == "'":
                end = t.find("'", self.i + 1)
                end = len(t) if end < 0 else end
                word.append(t[self.i + 1 : end])
                started, self.i = True, end + 1
            elif c == '"':
                word.append(self._double_quoted())
                started = True
            elif c == "\\":
                word.append(t[self.i + 1 : self.i + 2])
                started, self.i = True, self.i + 2
            elif c == "$":
                expanded = self._dollar()
                if expanded is not None:
                    word.append(expanded)
                    started = started or bool(expanded)
            elif any(t.startswith(op, self.i) for op in _OPERATORS):
                if started:
                    out.append("".join(word))
                    word, started = [], False
                op = next(op for op in _OPERATORS if t.startswith(op, self.i))
                out.append(None)
                self.i += len(op)
            else:
                word.append(c)
                started, self.i = True, self.i + 1
        if started:
            out.append("".join(word))
        return out

    def _double_quoted(self) -> str:
        t = self.text
        self.i += 1
        parts: list[str] = []
        while self.i < len(t) and t[self.i] != '"':
            c = t[self.i]
            if c == "\\" and t[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`"):
                parts.append(t[self.i + 1])
                self.i += 2
            elif c == "$":
                parts.append(self._dollar() or "")
            else:
                parts.append(c)
                self.i += 1
        self.i += 1
        return "".join(parts)

    def _closing(self, start: int, opening: str, closing: str) -> int:
        """Index of the bracket closing the one before ``start`` (nesting counted)."""
        depth, j, t = 1, start, self.text
        while j < len(t):
            if t.startswith(opening, j):
                depth += 1
            elif t.startswith(closing, j):
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        return len(t)

    def _dollar(self) -> str | None:
        """Expand the ``$...`` at ``self.i`` (None: it expands to no word at all)."""
        t, i = self.text, self.i
        if t.startswith("$((", i):
            end = self._closing(i + 3, "(", ")")
            expression = t[i + 3 : end]
            self.i = end + 2
            value = _arithmetic(expression, self.lookup)
            return str(value) if value is not None else f"$(({expression}))"
        if t.startswith("$(", i):
            end = self._closing(i + 2, "(", ")")
            command = t[i + 2 : end]
            self.i = end + 1
            if command.strip() == "pwd" and self.root is not None:
                return self.root
            return f"$({command})"
        if t.startswith("${", i):
            end = self._closing(i + 2, "{", "}")
            body = t[i + 2 : end]
            self.i = end + 1
            return self._parameter(body)
        name = _NAME.match(t, i + 1)
        if name:
            self.i = name.end()
            value = self.lookup(name.group())
            return value if value is not None else f"${name.group()}"
        if t[i + 1 : i + 2] in ("@", "*", "#", "?", "$", "!") or t[i + 1 : i + 2].isdigit():
            self.i = i + 2
            return None  # positional and special parameters: the script's caller's
        self.i = i + 1
        return "$"

    def _parameter(self, body: str) -> str:
        """``${NAME}``, ``${NAME:-word}`` and its kin."""
        name = _NAME.match(body) or re.match(r"\d+|[@*#?]", body)
        if not name or (body.startswith("#") and len(body) > 1):
            return ""  # ${#NAME}: a length, not a value
        rest = body[name.end() :]
        # Positional and special parameters are the caller's: unset here.
        value = self.lookup(name.group()) if _NAME.fullmatch(name.group()) else None
        for op in (":-", ":=", ":+", "-", "="):
            if rest.startswith(op):
                word = _Words(rest[len(op) :], self.lookup, self.root).joined()
                unset = value is None or (op.startswith(":") and value == "")
                if op.endswith("+"):
                    return "" if unset else word
                return word if unset else (value or "")
        return value if value is not None else f"${{{body}}}"

    def joined(self) -> str:
        """The text expanded as one word (the ``word`` of ``${NAME:-word}``)."""
        parts = [w for w in self.words() if w is not None]
        return " ".join(parts)


_ARITHMETIC: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,  # the shell's division is an integer one
    ast.Mod: operator.mod,
}


def _arithmetic(expression: str, lookup: Callable[[str], str | None]) -> int | None:
    """An integer ``$((...))``: names and ``$names`` looked up, + - * / % and brackets only.
    None when anything else is in it."""

    def name(match: re.Match[str]) -> str:
        value = lookup(match.group(1))
        return value if value is not None and value.strip().lstrip("-").isdigit() else "x"

    text = re.sub(r"\$?\{?([A-Za-z_][A-Za-z0-9_]*)\}?", name, expression)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            right = value(node.right)
            if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
                raise ValueError("division by zero")
            return _ARITHMETIC[type(node.op)](value(node.left), right)
        raise ValueError("not integer arithmetic")

    try:
        return value(tree.body)
    except (ValueError, RecursionError):
        return None


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based first line, text) of each logical line: continuations joined."""
    start, parts = 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        if not parts:
            start = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield start, " ".join(parts)
        parts = []
    if parts:
        yield start, " ".join(parts)


def _commands(words: list[str | None]) -> Iterator[list[str]]:
    """The commands of a line's words, split at operators."""
    command: list[str] = []
    for word in words:
        if word is None:
            if command:
                yield command
            command = []
        else:
            command.append(word)
    if command:
        yield command


def _python_target(words: list[str]) -> tuple[str | None, str | None, int] | None:
    """(module, program, index of its first argument) when ``words`` run verl's Python."""
    for i, word in enumerate(words):
        if not Path(word).name.startswith(("python", "torchrun")):
            continue
        rest = words[i + 1 :]
        for j, arg in enumerate(rest):
            if arg == "-m" and j + 1 < len(rest):
                module = rest[j + 1]
                if module.startswith(_MODULE_ROOTS):
                    return module, None, i + j + 3
                break
            if arg.endswith(".py"):
                if Path(arg).name.startswith("main_"):
                    return None, arg, i + j + 2
                break
    return None


def read_launch(text: str, *, file: str, root: str | None = None) -> Launch:
    """The first verl command of a launch script's ``text``.

    ``root`` is what ``$(pwd)`` stands for (the folder the script runs from).

    Raises:
        ConfigError: the script runs no verl module, naming ``file``.
    """
    variables: dict[str, str] = {}

    def lookup(name: str) -> str | None:
        if name in variables:
            return variables[name]
        return root if name == "PWD" else None  # the shell's own: where the script runs

    for number, line in _logical_lines(text):
        for command in _commands(_Words(line, lookup, root).words()):
            while command and command[0] in _DECLARATIONS:
                command = command[1:]
            assignments = [_ASSIGNMENT.match(w) for w in command]
            if command and all(assignments):
                for match in assignments:
                    assert match is not None
                    variables[match.group(1)] = match.group(2)
                continue
            target = _python_target(command)
            if target is None:
                continue
            module, program, first = target
            return _launch(module, program, command[first:], number, root)
    raise ConfigError(
        "runs no verl trainer (no 'python3 -m verl.trainer.main_ppo ...' or other verl or"
        " recipe module): give the Hydra config file instead, with --set for its overrides",
        file=file,
    )


def _launch(
    module: str | None, program: str | None, args: list[str], line: int, root: str | None
) -> Launch:
    config_path = config_name = None
    overrides: list[str] = []
    k = 0
    while k < len(args):
        arg = args[k]
        for flag, short in (("--config-path", "-cp"), ("--config-name", "-cn")):
            if arg in (flag, short) and k + 1 < len(args):
                value, k = args[k + 1], k + 1
            elif arg.startswith(flag + "="):
                value = arg.partition("=")[2]
            else:
                continue
            if flag == "--config-path":
                config_path = value
            else:
                config_name = value
            break
        else:
            match = _OVERRIDE.match(arg)
            if match:
                overrides.append(f"{match.group(2)}={match.group(3)}")
        k += 1
    return Launch(module, program, config_path, config_name, tuple(overrides), line, root)


_HYDRA_MAIN = re.compile(r"@hydra\.main\((?P<args>[^)]*)\)")


def _hydra_argument(source: str, name: str) -> str | None:
    """``config_path`` or ``config_name`` of a module's ``@hydra.main(...)``."""
    decorator = _HYDRA_MAIN.search(source)
    if decorator is None:
        return None
    found = re.search(rf"{name}\s*=\s*[\"']([^\"']*)[\"']", decorator.group("args"))
    return found.group(1) if found else None


def module_file(module: str, script: Path) -> Path | None:
    """The source of ``module``: in a folder above ``script`` (a checkout), else installed."""
    relative = Path(*module.split("."))
    for folder in (script.resolve().parent, *script.resolve().parents):
        for candidate in (folder / relative.with_suffix(".py"), folder / relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    top = module.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)  # a top-level lookup imports nothing
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location).parent / relative.with_suffix(".py")
        if candidate.is_file():
            return candidate
    return None


def module_root(module: str, script: Path) -> str | None:
    """The folder holding ``module``'s top package (what ``$(pwd)`` is in verl's scripts)."""
    source = module_file(module, script)
    if source is None:
        return None
    # a.b.c is ROOT/a/b/c.py (parents[2] is ROOT) or ROOT/a/b/c/__init__.py (parents[3])
    parts = len(module.split("."))
    return str(source.parents[parts - 1 if source.name != "__init__.py" else parts])


def find_config(launch: Launch, script: Path) -> Path:
    """The Hydra config file ``launch`` starts from.

    Raises:
        ConfigError: the module, its ``@hydra.main`` or the config file is not found,
            naming the script and saying what to do.
    """
    file = str(script)
    if launch.module is not None:
        source = module_file(launch.module, script)
        what = launch.module
    else:
        assert launch.program is not None
        source = _program_file(launch.program, script, launch.root)
        what = launch.program
    if source is None:
        raise ConfigError(
            f"runs {what}, which is neither in a folder above the script (a verl checkout)"
            " nor installed here: run rlplex where verl is, or give its Hydra config file"
            " (verl/trainer/config/ppo_trainer.yaml) with --set for the script's overrides",
            field="line " + str(launch.line), value=what, file=file,
        )  # fmt: skip
    text = source.read_text(encoding="utf-8", errors="replace")
    config_path = launch.config_path or _hydra_argument(text, "config_path")
    config_name = launch.config_name or _hydra_argument(text, "config_name")
    if config_path is None or config_name is None:
        raise ConfigError(
            f"{source} has no @hydra.main(config_path=..., config_name=...) and the script"
            " gives no --config-path and --config-name",
            field="line " + str(launch.line), value=what, file=file,
        )  # fmt: skip
    folder = Path(config_path)
    if not folder.is_absolute():
        folder = source.parent / folder
    name = config_name if config_name.endswith((".yaml", ".yml")) else config_name + ".yaml"
    config = folder / name
    if not config.is_file():
        raise ConfigError(
            f"its Hydra config {config} does not exist (--config-path {config_path},"
            f" --config-name {config_name})",
            field="line " + str(launch.line), value=what, file=file,
        )  # fmt: skip
    return config


def _program_file(program: str, script: Path, root: str | None) -> Path | None:
    path = Path(program)
    if path.is_absolute():
        return path if path.is_file() else None
    roots = (Path(root),) if root else ()
    for folder in (*roots, script.resolve().parent, *script.resolve().parents):
        if (folder / path).is_file():
            return folder / path
    return None


def launch_config(script: Path) -> tuple[Path, tuple[str, ...]]:
    """(the Hydra config file, the overrides) a launch script runs verl with; a value YAML
    cannot read (a Hydra interpolation, a stray quote) is kept as its text.

    Raises:
        ConfigError: the script cannot be read, runs no verl module, or its config is not
            found, naming the script.
    """
    file = str(script)
    try:
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the script: {exc}", file=file) from None
    first = read_launch(text, file=file)
    root = module_root(first.module, script) if first.module else None
    launch = read_launch(text, file=file, root=root) if root else first
    return find_config(launch, script), tuple(_yaml_safe(o) for o in launch.overrides)


def _yaml_safe(override: str) -> str:
    key, _, raw = override.partition("=")
    try:
        load_yaml_text(raw, key) if raw.strip() else None
    except ConfigError:
        return f"{key}={_quoted(raw)}"
    return override


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
