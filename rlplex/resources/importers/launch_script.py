"""Read a launch script: the verl run (its Hydra config and overrides) or OpenRLHF run it starts.

verl runs are mostly started by a shell script (``examples/grpo_trainer/*.sh``, a
recipe's ``run_*.sh``) that sets a few variables and runs
``python3 -m verl.trainer.main_ppo key=value ...``: the run's config is verl's Hydra
config (``verl/trainer/config/ppo_trainer.yaml``, or the file ``--config-path`` and
``--config-name`` name) with those overrides on top. OpenRLHF runs have no config file:
``python3 -m openrlhf.cli.train_ppo_ray --flag value ...`` is the whole run, its words
kept in :attr:`Launch.arguments` and read by :func:`flag_arguments` (the ``openrlhf``
importer reads the flags). :func:`read_launch` finds that command in the script's text,
the way a POSIX shell reads it as far as a config needs:

- line continuations (inside double quotes too), comments, single and double quotes;
- ``NAME=value`` (and ``export NAME=value``) assignments, in order, expanded where they
  are used: ``$NAME``, ``${NAME}``, ``${NAME:-default}`` (``-``, ``:=``, ``=``, ``:+``),
  integer ``$((...))`` arithmetic, and ``$(pwd)`` or ``$PWD`` as the folder holding the
  module (verl's scripts run from the repository root). The environment is not read: a variable the
  script does not set stays as written (``$MODEL_PATH``) unless the caller gives it
  (``env``: ``--env DEVICE=gpu``), and so does any other command substitution; ``$@`` and
  other positional parameters are empty;
- here-documents: their lines are text, not commands, and ``read -r -d '' NAME <<EOF``
  assigns the text to ``NAME`` (OpenRLHF's SFT/DPO scripts, then ``deepspeed --module
  $NAME``);
- the first command that runs a Python module of ``verl``, ``recipe`` or ``openrlhf``
  (or a verl ``main_*.py`` file) with ``python``/``python3``, ``torchrun`` or
  ``deepspeed --module`` anywhere in it (after ``env``, ``ray job submit ... --``,
  ``nohup`` ...), also inside a ``bash -c "..."`` string (``srun ... bash -c``); verl's
  ``key=value``, ``+key=value`` and ``++key=value`` arguments are the overrides (``~key``
  deletions are skipped), each value read as Hydra's override grammar reads it
  (:func:`hydra_value`): ``false``, ``False`` and ``FALSE`` are false, but ``no``, ``off``
  and ``yes`` are strings (which YAML would read as bools; verl then tests them for truth,
  and rlplex refuses them).

``if`` branches whose test is a plain comparison and ``case`` branches whose word is known
are followed as the shell takes them (:class:`_Blocks`); a variable assigned in any other
block (a test or word not known, a loop) is left as written from there on, and
:attr:`Launch.unknown` says where and why. A script that launches several runs gives its
first.
:func:`find_config` locates the Hydra file: the module is looked for in the folders
above the script (a verl checkout), then among the installed packages, and its
``@hydra.main(config_path=..., config_name=...)`` read from its source.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import operator
import os
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from rlplex.errors import ConfigError
from rlplex.resources.importers.common import refuse_non_rl
from rlplex.resources.yaml_io import YamlLimits, load_yaml_text, read_text_bounded

SCRIPT_SUFFIXES = (".sh", ".bash")
"""File suffixes read as launch scripts."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_OVERRIDE = re.compile(r"^(\+\+|\+)?([A-Za-z_][\w.@/-]*)=(.*)$", re.S)
_MODULE_ROOTS = ("verl.", "recipe.")
OPENRLHF_ROOT = "openrlhf."
"""OpenRLHF's package: ``python3 -m openrlhf.cli.train_ppo_ray --flag value ...``."""
_OPENRLHF_PROGRAM = re.compile(r"(?:^|/)openrlhf/cli/([A-Za-z_][A-Za-z0-9_]*)\.py$")
_LAUNCHERS = ("python", "torchrun", "deepspeed")
"""Programs that run a trainer's module (``deepspeed --module``: OpenRLHF's SFT scripts)."""
_NOT_RL_ENTRIES = {
    "main_generation": "generation",
    "main_generation_server": "generation",
    "main_eval": "evaluation",
    "fsdp_sft_trainer": "SFT",
    "sft_trainer": "SFT",
    "sft_trainer_ray": "SFT",
    "model_merger": "checkpoint merge",
}
"""verl's entry points that train no RL step (verl/trainer/, verl/model_merger), by what
they do: refused whatever config they read (main_generation_server reads ppo_trainer's)."""
_OPERATORS = (";;&", ";;", ";&", ";", "&&", "||", "|", "&")
"""Operators between commands, longest first (``;;``, ``;&`` and ``;;&`` end a ``case`` branch)."""
_REDIRECTION = re.compile(r"(?:(?<![^\s;&|(])\d|&)?(?:>>?|<)\s*(?:&\d+|[^\s;&|()]+)")
"""A redirection (``&>/dev/null``, ``2>&1``, ``> log``): no part of a command's output."""
_DECLARATIONS = ("export", "local", "declare", "readonly")


def is_shell_name(name: str) -> bool:
    """Whether ``name`` is a shell variable's name (``DEVICE``; not ``1X`` or ``A-B``)."""
    return _NAME.fullmatch(name) is not None


def is_launch_script(path: str | Path) -> bool:
    """Whether ``path`` is read as a launch script (its suffix: ``.sh`` or ``.bash``)."""
    return Path(path).suffix.lower() in SCRIPT_SUFFIXES


@dataclass(frozen=True)
class UnknownVariable:
    """A shell variable a launch script assigns where rlplex cannot tell whether the
    assignment runs: left as written (``${NGPUS_PER_NODE}``) from there on."""

    name: str
    """The variable (``NGPUS_PER_NODE``)."""
    reason: str
    """Where it is assigned, in words: "inside a `case` on line 41 whose branch rlplex
    cannot tell (its word ${DEVICE} comes from a command rlplex does not run)"."""
    inputs: tuple[str, ...] = ()
    """The variables that decide that block and are not known, which ``--env NAME=VALUE``
    can give (``DEVICE``)."""


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
    arguments: tuple[str, ...] = ()
    """An OpenRLHF command's words after its module, as the shell passes them (its flags:
    :func:`flag_arguments`); empty for verl's."""
    unknown: tuple[UnknownVariable, ...] = ()
    """The variables the script assigns where rlplex cannot tell whether the assignment
    runs (left as written: ``${NGPUS_PER_NODE}``), with why."""
    env_unread: tuple[str, ...] = ()
    """The ``env`` variables (``--env``) whose value the script never took, up to this
    command: it never looks them up, or assigns them itself first (its own assignment
    wins, as in the shell)."""


Value = str | list[str]
"""A shell variable: a string, or an array's elements."""

_BREAK = "\x00"
"""Where an expansion splits a word in two (never in a script's text)."""

_IFS = re.compile(r"[ \t\n]+")


class _Words:
    """Split one logical line into words the way a POSIX shell does, expanding as it goes:
    an unquoted expansion is split at blanks, ``"${NAME[@]}"`` gives a word per element."""

    def __init__(self, text: str, lookup: Callable[[str], Value | None], root: str | None) -> None:
        self.text, self.lookup, self.root = text, lookup, root
        self.i = 0
        self.depth = 0
        self.operators: list[str] = []
        """The operators :meth:`words` met, in order (one per None it gives)."""

    def words(self) -> list[str | None]:
        """The words; None stands for an operator between commands (``;``, ``&&``, ``|``)."""
        out: list[str | None] = []
        word: list[str] = []
        started = False
        prefix = True  # still in a command's assignments, whose values are never split

        def close() -> None:
            nonlocal word, started, prefix
            if started:
                out.append("".join(word))
                prefix = prefix and (
                    bool(_ASSIGNMENT.match(out[-1] or "")) or out[-1] in _DECLARATIONS
                )
            word, started = [], False

        def add(text: str) -> None:
            nonlocal started
            if prefix and _ASSIGNMENT.match("".join(word)):
                text = text.replace(_BREAK, " ")
            pieces = text.split(_BREAK)
            last = len(pieces) - 1
            for k, piece in enumerate(pieces):
                if k:
                    close()
                # a blank ending an unquoted expansion (X="--a 1 ") ends the word and starts
                # none; an empty element of "${A[@]}" is a word (its caller starts it)
                if piece or 0 < k < last:
                    word.append(piece)
                    started = True

        t = self.text
        while self.i < len(t):
            c = t[self.i]
            if c in " \t\n\r":
                close()
                self.i += 1
            elif c == "#" and not started:
                break
            elif c == "'":
                end = t.find("'", self.i + 1)
                end = len(t) if end < 0 else end
                word.append(t[self.i + 1 : end])
                started, self.i = True, end + 1
            elif c == '"':
                add(self._double_quoted())
                started = True
            elif c == "\\":
                word.append(t[self.i + 1 : self.i + 2])
                started, self.i = True, self.i + 2
            elif c == "$":
                expanded = self._dollar(quoted=False)
                if expanded:
                    add(expanded)
            elif any(t.startswith(op, self.i) for op in _OPERATORS):
                close()
                op = next(op for op in _OPERATORS if t.startswith(op, self.i))
                out.append(None)
                self.operators.append(op)
                prefix = True
                self.i += len(op)
            else:
                word.append(c)
                started, self.i = True, self.i + 1
        close()
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
            elif c == "\\" and t[self.i + 1 : self.i + 2] == "\n":
                self.i += 2  # a line continuation inside the quotes: gone, as the shell does
            elif c == "$":
                parts.append(self._dollar(quoted=True) or "")
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

    def _dollar(self, *, quoted: bool) -> str:
        """Expand the ``$...`` at ``self.i``: its text, :data:`_BREAK` where it splits words."""
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
            output = self._path_output(command)
            if output is None:
                return f"$({command})"
            return output if quoted else _split(output)
        if t.startswith("${", i):
            end = self._closing(i + 2, "{", "}")
            body = t[i + 2 : end]
            self.i = end + 1
            value = self._parameter(body, quoted)
        else:
            name = _NAME.match(t, i + 1)
            if name:
                self.i = name.end()
                found = self.lookup(name.group())
                if found is None:
                    return f"${name.group()}"
                value = found[0] if isinstance(found, list) and found else found
                value = value if isinstance(value, str) else ""
            elif t[i + 1 : i + 2] == "0" and self.lookup("0") is not None:
                self.i = i + 2
                script = self.lookup("0")
                return script if quoted or not isinstance(script, str) else _split(script)
            elif t[i + 1 : i + 2] in ("@", "*", "#", "?", "$", "!") or t[i + 1 : i + 2].isdigit():
                self.i = i + 2
                return ""  # positional and special parameters: the script's caller's
            else:
                self.i = i + 1
                return "$"
        if isinstance(value, list):
            return _BREAK.join(value)
        return value if quoted else _split(value)

    def _path_output(self, command: str) -> str | None:
        """What a command substitution made of path commands prints (``cd DIR && pwd``,
        ``dirname``, ``basename``, ``realpath``, ``readlink -f``, ``pwd``: the idioms that
        find a script's own folder from ``$0`` or ``${BASH_SOURCE[0]}``), worked out on the
        paths (symbolic links followed where the command follows them: ``realpath``,
        ``readlink -f``, ``cd -P``, ``pwd -P``); None for any other command, flag or an
        argument not known."""
        if self.depth > 32:
            return None
        words = _Words(_REDIRECTION.sub(" ", command), self.lookup, self.root)
        words.depth = self.depth + 1
        cwd, output = self.root, None
        for head, *rest in _commands(words.words()):
            args = [a for a in rest if not a.startswith("-")]
            flags = {a for a in rest if a.startswith("-") and a != "--"}
            if any("$" in a for a in args) or not flags <= _PATH_FLAGS.get(head, set()):
                return None
            if head in ("cd", "realpath", "readlink") and len(args) == 1:
                if cwd is None and not args[0].startswith("/"):
                    return None  # relative to a folder not known
                if head == "readlink" and not flags & {"-f", "-e", "-m"}:
                    return None  # plain readlink prints a link's target
                # cd follows links with -P; realpath unless -s (--strip); readlink -f always
                physical = {"cd": "-P" in flags, "realpath": "-s" not in flags}.get(head, True)
                path = _resolved(posixpath.join(cwd or "/", args[0]), physical)
                cwd, output = (path, output) if head == "cd" else (cwd, path)
            elif head == "pwd" and not args and cwd is not None:
                output = _resolved(cwd, "-P" in flags)
            elif head == "dirname" and len(args) == 1:
                path = args[0].rstrip("/") or "/"
                folder = posixpath.dirname(path)
                output = folder.rstrip("/") or ("/" if folder.startswith("/") else ".")
            elif head == "basename" and 1 <= len(args) <= 2:
                name = posixpath.basename(args[0].rstrip("/")) or "/"
                suffix = args[1] if len(args) == 2 else ""
                cut = suffix and name.endswith(suffix) and name != suffix  # as GNU basename
                output = name[: -len(suffix)] if cut else name
            else:
                return None
        return output

    def _parameter(self, body: str, quoted: bool) -> Value:
        """``${NAME}``, ``${NAME:-word}`` and its kin, ``${NAME[@]}``, ``${NAME[i]}``, the
        pattern removals and substitutions; any other form stays as written."""
        literal = "${" + body + "}"
        if self.depth > 32:
            return literal
        name = _NAME.match(body) or re.match(r"\d+|[@*?]", body)
        if not name:
            return literal  # ${#NAME}, ${!NAME}: not followed
        key, rest = name.group(), body[name.end() :]
        named = bool(_NAME.fullmatch(key)) or key == "0"  # $0: the script itself
        if not named and not rest:
            return ""  # ${1}, ${@}: the caller's, as $1 and $@
        # Other positional and special parameters are the caller's: unset here.
        value = self.lookup(key) if named else None
        if key == "0" and value is None and not rest:
            return ""
        index = re.match(r"\[([^\]]*)\]", rest)
        if index:
            rest = rest[index.end() :]
            elements = value if isinstance(value, list) else ([value] if value else [])
            if index.group(1) in ("@", "*") and not rest:
                return elements if index.group(1) == "@" or not quoted else " ".join(elements)
            if index.group(1).isdigit() and not rest:
                k = int(index.group(1))
                return elements[k] if k < len(elements) else ""
            return literal
        text = value[0] if isinstance(value, list) and value else value
        text = text if isinstance(text, str) else None
        if not rest:
            return text if text is not None else literal
        for op in (":-", ":=", ":+", "-", "=", "+"):
            if rest.startswith(op):
                self.depth += 1
                word = _Words(rest[len(op) :], self.lookup, self.root)
                word.depth = self.depth
                expanded = word.joined()
                self.depth -= 1
                unset = text is None or (op.startswith(":") and text == "")
                if op.endswith("+"):
                    return "" if unset else expanded
                return expanded if unset else (text or "")
        if text is None:
            return literal
        return _pattern_operation(text, rest) or literal

    def heredoc(self) -> str:
        """The text expanded as a here-document's body: ``$`` expansions as between double
        quotes (``\\$``, ``\\\\`` and ``\\``` escaped), quotes kept as they are."""
        t, parts = self.text, []
        while self.i < len(t):
            c = t[self.i]
            if c == "\\" and t[self.i + 1 : self.i + 2] in ("$", "\\", "`"):
                parts.append(t[self.i + 1])
                self.i += 2
            elif c == "$":
                parts.append(self._dollar(quoted=True) or "")
            else:
                parts.append(c)
                self.i += 1
        return "".join(parts)

    def joined(self) -> str:
        """The text expanded as one word (the ``word`` of ``${NAME:-word}``)."""
        return " ".join(w for w in self.words() if w is not None)


_PATH_FLAGS = {
    "cd": {"-P", "-L"},
    "pwd": {"-P", "-L"},
    "realpath": {"-e", "-m", "-q", "-s", "-L", "-P"},
    "readlink": {"-f", "-e", "-m", "-n", "-q", "-s", "-v"},
}
"""The flags of each path command whose output is still a path worked out here; any other
(``realpath --relative-to``) leaves the substitution as written."""


def _resolved(path: str, physical: bool) -> str:
    """``path`` normalised, its symbolic links followed when ``physical`` (those that exist
    here: a checkout reached through a link resolves to the real one, as the shell does)."""
    path = posixpath.normpath(path)
    return os.path.realpath(path) if physical else path


def _split(value: str) -> str:
    """An unquoted expansion's fields: blanks split it (:data:`_BREAK` marks where), except
    inside a command substitution left as written (``$(dirname $(dirname "$HERE"))``, whose
    output bash would give as one field)."""
    if not _IFS.search(value):
        return value
    fields, start, depth, i = [], 0, 0, 0
    while i < len(value):
        if value.startswith("$(", i):
            depth, i = depth + 1, i + 2
            continue
        if value[i] == ")" and depth:
            depth -= 1
        elif not depth and _IFS.match(value, i):
            end = _IFS.match(value, i).end()  # type: ignore[union-attr]
            fields.append(value[start:i])
            start = i = end
            continue
        i += 1
    fields.append(value[start:])
    return _BREAK.join(fields)


def _glob(pattern: str) -> str:
    """A shell pattern as a regular expression (``*``, ``?``, the rest literal)."""
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)


def _pattern_operation(text: str, rest: str) -> str | None:
    """``#``, ``##``, ``%``, ``%%``, ``/``, ``//`` and ``:offset:length`` on ``text``; None for
    a form not followed."""
    for op, greedy in (("##", True), ("#", False)):
        if rest.startswith(op):
            pattern = _glob(rest[len(op) :])
            ends = range(len(text), -1, -1) if greedy else range(len(text) + 1)
            for k in ends:
                if re.fullmatch(f"(?s){pattern}", text[:k]):
                    return text[k:]
            return text
    for op, greedy in (("%%", True), ("%", False)):
        if rest.startswith(op):
            pattern = _glob(rest[len(op) :])
            starts = range(len(text) + 1) if greedy else range(len(text), -1, -1)
            for k in starts:
                if re.fullmatch(f"(?s){pattern}", text[k:]):
                    return text[:k]
            return text
    if rest.startswith("/"):
        every = rest.startswith("//")
        pattern, _, replacement = rest[2 if every else 1 :].partition("/")
        if not pattern:
            return text
        return re.sub(f"(?s){_glob(pattern)}", lambda _: replacement, text, count=0 if every else 1)
    substring = re.fullmatch(r":\s*(-?\d+)(?::\s*(\d+))?", rest)
    if substring:
        offset = int(substring.group(1))
        begin = max(0, len(text) + offset) if offset < 0 else offset
        length = substring.group(2)
        return text[begin : begin + int(length)] if length is not None else text[begin:]
    return None


_ARITHMETIC: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,  # the shell's division is an integer one
    ast.Mod: operator.mod,
}


def _arithmetic(expression: str, lookup: Callable[[str], Value | None]) -> int | None:
    """An integer ``$((...))``: names and ``$names`` looked up, + - * / % and brackets only.
    None when anything else is in it."""

    def name(match: re.Match[str]) -> str:
        value = lookup(match.group(1))
        value = value[0] if isinstance(value, list) and value else value
        return value if isinstance(value, str) and value.strip().lstrip("-").isdigit() else "x"

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


_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
"""A here-document's redirection (``<<EOF``, ``<<-EOF``, ``<<'EOF'``; not a ``<<<`` here-string)."""


@dataclass(frozen=True)
class _HereDoc:
    """The body of a logical line's here-document."""

    text: str
    """The lines between the redirection and the delimiter, each ending in a newline."""
    quoted: bool
    """The delimiter was quoted: the body is taken as written, not expanded."""


def _logical_lines(text: str) -> Iterator[tuple[int, str, _HereDoc | None]]:
    """(1-based first line, text, here-document) of each logical line: backslash
    continuations joined, a quoted string or an array ``NAME=(...)`` spanning lines kept
    whole, comments dropped (a backslash ending a comment continues nothing); the lines of
    a here-document (``read -r -d '' NAME <<EOF`` ... ``EOF``) are its body, not commands."""
    text = text.replace("\r\n", "\n")
    out: list[str] = []
    line, start, i = 1, 1, 0
    quote: str | None = None
    parens = 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\" and i + 1 < len(text):
                out.append(c)
                i += 1
                c = text[i]
                line += c == "\n"
            elif c == '"':
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "\\" and text[i + 1 : i + 2] == "\n":
            out.append(" ")
            i, line = i + 2, line + 1
            continue
        elif c == "#" and (not out or out[-1] in " \t\n;(|&"):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif c == "(" and out and (out[-1] in "=$" or "".join(out[-2:]) == "$("):
            parens += 1  # an array, $(...), and the inner parenthesis of $((...))
        elif c == ")" and parens:
            parens -= 1
        elif c == "\n" and not parens:
            logical = "".join(out)
            here = _HEREDOC.search(logical)
            body: _HereDoc | None = None
            i, line = i + 1, line + 1
            if here:
                body, i, line = _heredoc_body(text, i, line, here)
            yield start, logical, body
            out = []
            start = line
            continue
        if c == "\n":
            line += 1
            c = " " if quote is None else c
        out.append(c)
        i += 1
    if out:
        yield start, "".join(out), None


def _heredoc_body(text: str, i: int, line: int, here: re.Match[str]) -> tuple[_HereDoc, int, int]:
    """The here-document starting at ``text[i]`` (line ``line``): its body, and where the
    text goes on after its delimiter (index and line). ``<<-`` strips leading tabs."""
    strip_tabs, quoted, delimiter = here.group(1) == "-", bool(here.group(2)), here.group(3)
    body: list[str] = []
    while i < len(text):
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        raw = text[i:end]
        i, line = end + 1, line + 1
        if (raw.lstrip("\t") if strip_tabs else raw) == delimiter:
            break
        body.append((raw.lstrip("\t") if strip_tabs else raw) + "\n")
    return _HereDoc("".join(body), quoted), i, line


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
    """(module, program, index of its first argument) when ``words`` run verl's or
    OpenRLHF's Python: ``python``/``torchrun`` ``-m MODULE``, ``deepspeed --module MODULE``,
    a verl ``main_*.py`` or an OpenRLHF ``openrlhf/cli/NAME.py`` (as its module)."""
    for i, word in enumerate(words):
        # an interpreter named by a variable whose value is not known ($PYTHON) counts too
        if not (Path(word).name.startswith(_LAUNCHERS) or word.startswith("$")):
            continue
        rest = words[i + 1 :]
        for j, arg in enumerate(rest):
            if arg in ("-m", "--module") and j + 1 < len(rest):
                module = rest[j + 1]
                if module.startswith((*_MODULE_ROOTS, OPENRLHF_ROOT)):
                    return module, None, i + j + 3
                break
            if arg.endswith(".py"):
                if Path(arg).name.startswith("main_"):
                    return None, arg, i + j + 2
                cli = _OPENRLHF_PROGRAM.search(arg)
                if cli:
                    return OPENRLHF_ROOT + "cli." + cli.group(1), None, i + j + 2
                break
    return None


def _subshell(words: list[str]) -> str | None:
    """The script a ``bash -c SCRIPT`` (``sh -c``) command runs, wherever it sits in the
    command (after ``srun ...``, ``docker exec ...``), or None."""
    for i, word in enumerate(words[:-2]):
        if Path(word).name in ("bash", "sh") and words[i + 1] == "-c":
            return words[i + 2]
    return None


_READ_OPERANDS = frozenset("adinNptu")
"""``read``'s options that take an operand (``-d ''``, ``-p PROMPT`` ...)."""


def _read_names(words: list[str]) -> tuple[list[str], bool]:
    """The variables a ``read`` command assigns, and whether it reads to the end of its
    input (``-d ''``) rather than one line."""
    names: list[str] = []
    whole, k = False, 1
    while k < len(words):
        word = words[k]
        if word.startswith("<"):
            break  # the here-document's redirection
        if word.startswith("-") and len(word) > 1 and not names:
            letters = word[1:]
            if letters[-1] in _READ_OPERANDS:
                operand = words[k + 1] if k + 1 < len(words) else None
                whole = whole or (letters[-1] == "d" and operand == "")
                k += 1
        elif _NAME.fullmatch(word):
            names.append(word)
        k += 1
    return names, whole


def _heredoc_read(
    command: list[str], body: _HereDoc, lookup: Callable[[str], Value | None], root: str | None
) -> tuple[str, str] | None:
    """(name, value) of ``read [-r] [-d ''] NAME <<EOF``: the here-document's text (its
    first line unless ``-d ''``), expanded unless the delimiter is quoted (backslash-newline
    pairs removed, ``$`` expansions as between double quotes), blanks at both ends trimmed;
    None for any other command, or a ``read`` of several names (not followed)."""
    if command[0] != "read":
        return None
    names, whole = _read_names(command)
    if len(names) != 1:
        return None
    text = body.text
    if not body.quoted:
        text = _Words(text.replace("\\\n", ""), lookup, root).heredoc()
    if not whole:
        text = text.split("\n", 1)[0]
    return names[0], text.strip(" \t\n")


_OPENERS = ("if", "case", "for", "while", "until", "select")
_CLOSERS = ("fi", "esac", "done")
_KEYWORDS = ("then", "do", "{", "}", "!")
_BRANCH_ENDS = (";;", ";&", ";;&")
"""What ends a ``case`` branch: ``;;``; ``;&`` and ``;;&`` go on to the next (not followed)."""
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def _test(words: list[str]) -> bool | None:
    """``[ ... ]``, ``[[ ... ]]`` or ``test ...`` of one comparison; None when not followed."""
    if words and words[0] == "test":
        words = [*words[1:]]
    elif len(words) >= 2 and words[0] in ("[", "[[") and words[-1] in ("]", "]]"):
        words = words[1:-1]
    else:
        return None
    if len(words) == 2 and words[0] in ("-z", "-n"):
        return (words[1] == "") == (words[0] == "-z")
    if len(words) == 1:
        return words[0] != ""
    if len(words) != 3 or any("$" in w for w in (words[0], words[2])):
        return None
    left, op, right = words
    if op in ("=", "=="):
        return left == right
    if op == "!=":
        return left != right
    numbers = {"-eq": "==", "-ne": "!=", "-lt": "<", "-le": "<=", "-gt": ">", "-ge": ">="}
    if op in numbers and left.lstrip("-").isdigit() and right.lstrip("-").isdigit():
        a, b = int(left), int(right)
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                ">=": a >= b}[numbers[op]]  # fmt: skip
    return None


def _case_match(word: str, patterns: list[str]) -> bool | None:
    """Whether ``case`` ``word`` matches one of a branch's ``patterns`` as bash matches them
    (``*``, ``?``, ``[...]``, ``[!...]`` / ``[^...]``); None when the word, or a pattern that
    could decide it, is not known (holds an expansion left as written)."""
    if "$" in word or "`" in word:
        return None
    unknown = False
    for pattern in patterns:
        if "$" in pattern or "`" in pattern:
            unknown = True  # bash tries it before the next: which one matched is not known
            continue
        if fnmatch.fnmatchcase(word, pattern.replace("[^", "[!")):
            return True
    return None if unknown else False


@dataclass
class _Frame:
    """One open block: whether a command in it runs now (True, False, None: not known)."""

    keyword: str
    """What opened it: ``if``, ``case``, ``for`` ..."""
    line: int
    """Its 1-based line in the script."""
    runs: bool | None
    """Whether a command in it runs now (None: not known)."""
    before: bool | None = False
    """Whether an earlier branch ran (None: not known)."""
    word: str | None = None
    """A ``case``'s word as expanded."""
    reason: str = ""
    """Why its branch is not known, in words."""
    inputs: tuple[str, ...] = ()
    """The variables that decide it and are not known (what ``--env`` can give)."""
    pattern: bool = False
    """A ``case`` that waits for its next pattern (after ``in`` or a ``;;``)."""


def variables_in(text: str) -> list[str]:
    """The shell variables ``text`` reads as written (``$NAME``, ``${NAME}``, ``${NAME:-x}``)."""
    return list(dict.fromkeys(_VARIABLE.findall(text)))


def _raw_clause(line: str, keyword: str) -> str:
    """The text after ``keyword`` in a logical line as written, up to ``then``/``in``/``do``
    or the line's end (``"${DEVICE}"`` of ``case "${DEVICE}" in``)."""
    found = re.search(
        rf"(?:^|[\s;&|]){keyword}\s+(.*?)(?:\s*;\s*then\b|\s+in\b|\s*;\s*do\b|$)", line
    )
    return found.group(1).strip() if found else ""


class _Blocks:
    """Which ``if`` and ``case`` branches run: taken, skipped, or unknown (a test or a word
    not known, a loop)."""

    def __init__(
        self,
        inputs: Callable[[list[str]], tuple[str, ...]] = tuple,
        assigned: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self.frames: list[_Frame] = []
        self.inputs = inputs
        """The environment variables that the named variables' values come from."""
        self.assigned = assigned
        """Whether the script assigns a variable (where rlplex cannot tell, if it is left
        as written)."""

    def open(self, keyword: str, condition: list[str], line: int, text: str) -> None:
        """Enter a block opened by ``keyword`` on ``line`` (``text``: the logical line)."""
        outer = self.runs()
        raw = _raw_clause(text, keyword)
        inputs = self.inputs(_VARIABLE.findall(raw))
        if keyword == "if":
            taken = _test(condition) if outer is not False else False
            before = None if taken is None else taken
            self.frames.append(
                _Frame(keyword, line, taken, before, reason=self._if_reason(raw, line),
                       inputs=inputs)
            )  # fmt: skip
        elif keyword == "case":
            word = condition[0] if condition else ""
            frame = _Frame(keyword, line, False, word=word, pattern=True, inputs=inputs)
            frame.reason = (
                f"inside a `case` on line {line} whose branch rlplex cannot tell (its word"
                f" {raw.strip(chr(34) + chr(39)) or word} {self._why(word, raw)})"
            )
            frame.before = outer is False  # a case skipped whole: no branch runs
            self.frames.append(frame)
        else:
            reason = f"inside a `{keyword}` loop on line {line} (rlplex does not follow loops)"
            self.frames.append(_Frame(keyword, line, None if outer is not False else False,
                                      reason=reason))  # fmt: skip

    @staticmethod
    def _if_reason(raw: str, line: int) -> str:
        return f"inside an `if` on line {line} whose test rlplex cannot follow ({raw})"

    def _why(self, word: str, raw: str) -> str:
        if "$(" in word or "`" in word:
            return "comes from a command rlplex does not run"
        names = list(dict.fromkeys(_VARIABLE.findall(word)))
        inner = [n for n in names if self.assigned(n)]
        if inner:
            return f"holds {', '.join(inner)}, which the script sets where rlplex cannot tell"
        if names:
            return f"reads {', '.join(names)} from the environment, which the script does not set"
        return "is not known" if "$" in word else f"is {word!r}"

    def branch(self, keyword: str, condition: list[str], line: int, text: str) -> None:
        """An ``elif`` (its test in ``condition``) or ``else`` of the innermost ``if``."""
        if not self.frames:
            return
        frame = self.frames[-1]
        if keyword == "elif":
            raw = _raw_clause(text, keyword)
            taken = False if frame.before is True else _test(condition)
            if taken is None:
                frame.reason = self._if_reason(raw, line)
                frame.inputs = (*frame.inputs, *self.inputs(_VARIABLE.findall(raw)))
        else:  # else
            taken = frame.before is not True
        self._take(frame, taken)

    def pattern(self, patterns: list[str]) -> None:
        """The innermost ``case``'s next branch, of ``patterns`` (``gpu | npu)``)."""
        frame = self.frames[-1]
        frame.pattern = False
        if frame.before is True:
            taken: bool | None = False
        else:
            taken = _case_match(frame.word or "", patterns)
        self._take(frame, taken)

    def end_branch(self, operator: str) -> None:
        """A ``case`` branch ends (``;;``; ``;&`` and ``;;&`` run on into what follows,
        which is not followed: the later branches are not known)."""
        frame = self.frames[-1] if self.frames else None
        if frame is None or frame.keyword != "case":
            return
        if operator != ";;" and frame.before is not False:
            frame.before, frame.word = None, "$" + operator
        frame.runs, frame.pattern = False, True

    def _take(self, frame: _Frame, taken: bool | None) -> None:
        if self._outer_runs(frame) is False:
            taken = False
        elif frame.before is None and taken is not False:
            taken = None  # an earlier branch might have run
        frame.runs = taken
        frame.before = True if taken is True else (None if taken is None else frame.before)

    def _outer_runs(self, frame: _Frame) -> bool | None:
        outer = self.frames[: self.frames.index(frame)]
        if any(f.runs is False for f in outer):
            return False
        return None if any(f.runs is None for f in outer) else True

    def wants_pattern(self) -> bool:
        """Whether the next words are a ``case`` pattern (``gpu)``, ``a | b)``)."""
        return bool(self.frames) and self.frames[-1].pattern

    def close(self) -> None:
        if self.frames:
            self.frames.pop()

    def runs(self) -> bool | None:
        """Whether a command here runs: True, False, or None (not known)."""
        if any(f.runs is False for f in self.frames):
            return False
        return None if any(f.runs is None for f in self.frames) else True

    def unknown(self, name: str) -> UnknownVariable:
        """Why ``name``, assigned here, is not known: the outermost block whose branch is not
        known, and the variables of every such block."""
        frames = [f for f in self.frames if f.runs is None]
        inputs = tuple(dict.fromkeys(n for f in frames for n in f.inputs))
        return UnknownVariable(name, frames[0].reason if frames else "", inputs)


def _segments(words: list[str | None], operators: list[str]) -> Iterator[tuple[list[str], str]]:
    """Each command of a line's words (empty ones too) with the operator that ends it (``""``
    at the line's end): a ``case`` needs to tell ``;;`` from ``;`` and ``|`` between
    patterns from a pipe."""
    command: list[str] = []
    ops = iter(operators)
    for word in words:
        if word is None:
            yield command, next(ops, ";")
            command = []
        else:
            command.append(word)
    yield command, ""


def read_launch(
    text: str, *, file: str, root: str | None = None, env: Mapping[str, str] | None = None
) -> Launch:
    """The first verl command of a launch script's ``text``.

    ``root`` is what ``$(pwd)`` stands for (the folder the script runs from); ``env`` the
    variables the script starts with (``--env DEVICE=gpu``: what its ``${DEVICE:-...}``
    reads; the script's own assignments win, as in the shell). A variable assigned where it
    is not known whether the assignment runs (an ``if`` whose test is not a plain
    comparison, a ``case`` whose word is not known, a loop) is left unexpanded from there
    on, so that a run never takes a branch the shell might not; :attr:`Launch.unknown` says
    why.

    Raises:
        ConfigError: the script runs no verl module, naming ``file``.
    """
    variables: dict[str, Value] = {}
    unknown: dict[str, UnknownVariable] = {}
    given = dict(env or {})
    script = posixpath.normpath(str(Path(file).absolute()))
    sources: dict[str, tuple[str, ...]] = {}  # the environment variables each value came from
    looked_up: list[str] = []  # the variables the line being read looks up
    taken: set[str] = set()  # the given variables whose value the script took

    def inputs(names: list[str]) -> tuple[str, ...]:
        """The environment variables ``names``' values come from: what ``--env`` can give."""
        out: dict[str, None] = {}
        for name in names:
            if name in unknown:
                out.update(dict.fromkeys(unknown[name].inputs))
            out.update(dict.fromkeys(sources.get(name, (name,))))
        return tuple(out)

    blocks = _Blocks(inputs, lambda name: name in unknown)

    def lookup(name: str) -> Value | None:
        looked_up.append(name)
        if name in unknown:
            return None
        if name in variables:
            return variables[name]
        if name in given:
            taken.add(name)
            return given[name]
        if name == "PWD":
            return root  # the shell's own: where the script runs
        if name == "0":
            return script
        return [script] if name == "BASH_SOURCE" else None

    def run(command: list[str], number: int, line: str, body: _HereDoc | None) -> Launch | None:
        """Follow one command; the launch when it is the trainer's."""
        while command and command[0] in (*_DECLARATIONS, *_KEYWORDS):
            command = command[1:]
        if not command:
            return None
        head = command[0]
        if head in _OPENERS:
            blocks.open(head, command[1:], number, line)
            return None
        if head == "elif":
            blocks.branch(head, command[1:], number, line)
            return None
        if head == "else":
            blocks.branch(head, [], number, line)
            command = command[1:]
            while command and command[0] in _KEYWORDS:
                command = command[1:]
            if not command:
                return None
        if head in _CLOSERS:
            blocks.close()
            return None
        runs = blocks.runs()
        if runs is False:
            return None
        read = _heredoc_read(command, body, lookup, root) if body else None
        if read is not None:
            variables[read[0]] = read[1]
        if read is not None or _assign(command, variables):
            origin = inputs([n for n in looked_up if _NAME.fullmatch(n)])
            for name in [read[0]] if read else _assigned(command):
                sources[name] = origin  # X=${X:-...}: X (the environment's) included
                if runs is None:
                    unknown[name] = blocks.unknown(name)
                else:
                    unknown.pop(name, None)
            return None
        target = _python_target(command)
        inner = _subshell(command) if target is None else None
        if inner is not None:
            # bash -c "...": the string is a script of its own (srun ... bash -c "ray job
            # submit ... -- python3 -m ..."), its expansions already made by the caller
            for sub in _commands(_Words(inner, lookup, root).words()):
                target = _python_target(sub)
                if target is not None:
                    command = sub
                    break
        if target is None:
            return None
        module, program, first = target
        launch = _launch(module, program, command[first:], number, root)
        unread = tuple(name for name in given if name not in taken)
        return replace(launch, unknown=tuple(unknown.values()), env_unread=unread)

    pattern: list[str] = []  # a case pattern's words so far (``a |`` ... ``b)``)
    for number, line, body in _logical_lines(text):
        looked_up.clear()
        words = _Words(line, lookup, root)
        for command, op in _segments(words.words(), words.operators):
            while command:
                if blocks.wants_pattern():
                    if not pattern and command[0] in ("esac", "in"):
                        if command[0] == "esac":
                            blocks.close()
                        command = command[1:]  # `in` on the line after `case WORD`
                        continue
                    end = next((k for k, w in enumerate(command) if w.endswith(")")), None)
                    pattern += command if end is None else command[: end + 1]
                    if end is None:
                        break  # `a |` ...: the pattern goes on after the pipe
                    first, *others = pattern
                    patterns = [first.removeprefix("("), *others]
                    patterns[-1] = patterns[-1][:-1]
                    blocks.pattern([p for p in patterns if p])
                    pattern, command = [], command[end + 1 :]
                elif command[0] == "case":
                    # `case WORD in` and, on the same line, its first pattern and commands
                    blocks.open("case", command[1:2], number, line)
                    command = command[2 + (command[2:3] == ["in"]) :]
                else:
                    launch = run(command, number, line, body)
                    if launch is not None:
                        return launch
                    break
            if op in _BRANCH_ENDS:
                blocks.end_branch(op)
    raise ConfigError(
        "runs no verl trainer (no 'python3 -m verl.trainer.main_ppo ...' or other verl or"
        " recipe module) and no OpenRLHF one ('python3 -m openrlhf.cli.train_ppo_ray ...'):"
        " give the Hydra config file instead, with --set for its overrides",
        file=file,
    )


def _assigned(command: list[str]) -> list[str]:
    names = []
    for word in command:
        match = _ASSIGNMENT.match(word)
        if match:
            names.append(match.group(1))
    return names


def _assign(command: list[str], variables: dict[str, Value]) -> bool:
    """Record ``command``'s assignments (``A=1 B=2``, ``A=(x y)``) when it is nothing else."""
    pending: list[tuple[str, Value]] = []
    k = 0
    while k < len(command):
        match = _ASSIGNMENT.match(command[k])
        if not match:
            return False
        name, value = match.group(1), match.group(2)
        if value.startswith("("):
            elements = [value[1:]] if value[1:] else []
            while not (elements and elements[-1].endswith(")")) and k + 1 < len(command):
                if value.endswith(")") and value != "(":
                    break
                k += 1
                elements.append(command[k])
            if elements and elements[-1].endswith(")"):
                elements[-1] = elements[-1][:-1]
            elif value.endswith(")"):
                elements = [value[1:-1]] if value[1:-1] else []
            pending.append((name, [e for e in elements if e]))
        else:
            pending.append((name, value))
        k += 1
    variables.update(pending)
    return True


def _launch(
    module: str | None, program: str | None, args: list[str], line: int, root: str | None
) -> Launch:
    if is_openrlhf_module(module):
        return Launch(module, None, None, None, (), line, root, arguments=tuple(args))
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


def launch_config(
    script: Path, env: Mapping[str, str] | None = None
) -> tuple[Path, tuple[str, ...]]:
    """(the Hydra config file, the overrides) a launch script runs verl with; a value YAML
    cannot read (a Hydra interpolation, a stray quote) is kept as its text. ``env``: the
    variables the script starts with (``--env``; :func:`read_launch`).

    Raises:
        ConfigError: the script cannot be read, runs no verl module, or its config is not
            found, naming the script.
    """
    file = str(script)
    text = read_text_bounded(script, YamlLimits.from_env().max_bytes, "launch script")
    first = read_launch(text, file=file, env=env)
    entry = (first.module or "").rsplit(".", 1)[-1] or Path(first.program or "").stem
    if entry in _NOT_RL_ENTRIES:
        refuse_non_rl(
            f"a verl {_NOT_RL_ENTRIES[entry]} run ({first.module or first.program})",
            field=f"line {first.line}", file=file,
        )  # fmt: skip
    root = module_root(first.module, script) if first.module else None
    launch = read_launch(text, file=file, root=root, env=env) if root else first
    return find_config(launch, script), tuple(_yaml_safe(o) for o in launch.overrides)


def launch_root(script: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The folder a launch script runs from, as its ``$(pwd)``: the one holding its module's
    top package (where its relative paths, a model's included, are found); None if unknown.
    ``env``: the variables the script starts with (``--env``).

    Raises:
        ConfigError: the script cannot be read or runs no verl module.
    """
    text = read_text_bounded(script, YamlLimits.from_env().max_bytes, "launch script")
    launch = read_launch(text, file=str(script), env=env)
    return module_root(launch.module, script) if launch.module else None


_HYDRA_BOOL_OR_NULL = re.compile(r"(?i)true|false|null")
_YAML_ONLY_BOOL = re.compile(r"yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF")
"""Words YAML 1.1 reads as bools but Hydra's override grammar as strings (its BOOL token is
``true``/``false`` in any case; hydra/grammar/OverrideLexer.g4)."""


def hydra_value(override: str) -> str:
    """``KEY=VALUE`` with VALUE spelled so that YAML reads it as Hydra does: ``tRuE`` and
    ``NULL`` (a bool and null to Hydra, in any case) lower-cased, ``no`` / ``on`` ... (strings
    to Hydra, bools to YAML) quoted; anything else as it is."""
    key, sep, raw = override.partition("=")
    word = raw.strip()
    if _HYDRA_BOOL_OR_NULL.fullmatch(word):
        return f"{key}{sep}{word.lower()}"
    if _YAML_ONLY_BOOL.fullmatch(word):
        return f"{key}{sep}{_quoted(word)}"
    return override


def _yaml_safe(override: str) -> str:
    override = hydra_value(override)
    key, _, raw = override.partition("=")
    try:
        load_yaml_text(raw, key) if raw.strip() else None
    except ConfigError:
        return f"{key}={_quoted(raw)}"
    return override


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def is_openrlhf_module(module: str | None) -> bool:
    """Whether ``module`` is one of OpenRLHF's (``openrlhf.cli.train_ppo_ray``)."""
    return module is not None and module.startswith(OPENRLHF_ROOT)


def script_launch(script: Path, env: Mapping[str, str] | None = None) -> Launch:
    """The first trainer command of a launch script, read with ``$(pwd)`` as the folder
    holding its module's top package (as :func:`launch_config` reads verl's); ``env``: the
    variables the script starts with (``--env``).

    Raises:
        ConfigError: the script cannot be read or runs no verl or OpenRLHF module.
    """
    file = str(script)
    text = read_text_bounded(script, YamlLimits.from_env().max_bytes, "launch script")
    first = read_launch(text, file=file, env=env)
    root = module_root(first.module, script) if first.module else None
    return read_launch(text, file=file, root=root, env=env) if root else first


_REDIRECTION_WORD = re.compile(r"^(?:\d*|&)(?:>>?|<)(.*)$", re.S)
"""A redirection left among a command's words (``2>``, ``>log``, ``&>>``): no argument."""


def flag_arguments(words: tuple[str, ...] | list[str]) -> dict[str, str | list[str] | bool]:
    """An argparse command line's options as written, by name without the ``--``:
    ``--flag value`` and ``--flag=value`` give the value's word, ``--flag a b`` (an option of
    several values, ``nargs=2``) the list of words, a bare ``--flag`` True. A word that does
    not start with ``--`` belongs to the option before it (``--eval.steps -1`` included),
    except an expansion the script does not define (``$EXTRA_ARGS``) after the option has
    its value: it may stand for more options, none of which rlplex can know. The last of a
    repeated option counts, as argparse takes it; redirections are dropped.
    """
    out: dict[str, str | list[str] | bool] = {}
    key: str | None = None
    skip_target = False
    for word in words:
        if skip_target:
            skip_target = False
            continue
        redirection = _REDIRECTION_WORD.match(word)
        if redirection:
            skip_target = not redirection.group(1)  # `> log`: the next word is its target
            continue
        if word.startswith("--") and len(word) > 2:
            name, eq, value = word[2:].partition("=")
            out[name] = value if eq else True
            key = None if eq else name
        elif key is not None:
            before = out[key]
            if word.startswith("$") and before is not True:
                continue
            if before is True:
                out[key] = word
            elif isinstance(before, list):
                before.append(word)
            else:
                out[key] = [str(before), word]
    return out
