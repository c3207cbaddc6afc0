"""Compose a Hydra config file the way Hydra does, then resolve its interpolations.

verl, ROLL and RLinf all launch through Hydra: a file may start with a
``defaults:`` list that pulls other files in (``ppo_trainer.yaml`` composes
``rollout/rollout.yaml``, where the rollout's tensor-parallel size lives), and
values may be interpolations (``${data.max_prompt_length}``,
``${oc.select:data.max_prompt_length,512}``). Reading only the file's own keys
misreads it, so the importers compose first. Interpolations are resolved by
OmegaConf, Hydra's own config library (with the arithmetic resolvers RLinf
registers: ``multiply``, ``int_div``, ``subtract``, ``not``); only the defaults-list walk is written
here, following Hydra's rules (hydra/_internal/defaults_list.py and the
"Defaults List" page of Hydra's documentation):

- An entry is ``_self_`` (where the file's own keys go; appended last when not
  listed, as in Hydra >= 1.1), a config name (``ppo_trainer``,
  ``../config/traj_envs@_here_``), or ``GROUP[@PACKAGE]: OPTION`` (``OPTION``
  may be a list, or null to skip). ``optional`` entries may be absent;
  ``override GROUP: OPTION`` replaces the option of that group wherever it is
  listed (below); ``hydra/...`` groups (logging, launchers) are
  skipped, they hold nothing rlplex reads.
- A group's file is ``GROUP/OPTION.yaml``, looked up relative to the file that
  lists it, then in the search path: the primary file's folder, the working
  directory, and each ``hydra.searchpath`` entry (``file://PATH``; a relative
  PATH is tried against the working directory, as Hydra does, and against the
  primary file's folder and its parents, so a file read from outside the
  project's root still finds ``file://verl/trainer/config``; a ``pkg://a.b``
  entry is the folder ``a/b`` looked for the same way).
- The package (where the composed keys land) is ``@PACKAGE`` relative to the
  listing file's package (``_here_``: that package; ``_global_``: the root);
  without ``@``, a group's package is the group path (``data`` -> ``data``),
  and a plain config name merges at the listing file's package.

- An option may interpolate the choice of another group: verl's ppo_trainer.yaml
  lists ``model_engine: dp`` then ``actor@actor_rollout_ref.actor:
  ${model_engine}_actor`` (Hydra's "Defaults List" page, "Interpolation in the
  Defaults List": only config group choices can be interpolated there). As in
  Hydra (``_create_defaults_tree_impl``), a file's plain entries are expanded
  first, each group's choice being known from then on anywhere in the tree (so
  verl's one-step-off and fully-async configs, which list ``ppo_trainer`` as a
  plain config, resolve its ``${model_engine}``); its ``${GROUP}`` entries are
  resolved after them and merged in their place in the list.
- A group's choice is, first, a top-level key of the primary file named as the
  group whose value is a string: that is where a command-line
  ``model_engine=megatron`` (a launch script's, or ``--set``'s) lands, and like
  Hydra rlplex refuses one that names no file of the group; then an
  ``override GROUP: OPTION`` entry of any file in the tree (the first one met,
  parents before the files they list, as Hydra registers them), and the
  option as listed.
- A file's ``# @package PACKAGE`` header is where it merges when the entry that
  lists it gives no ``@PACKAGE`` (an entry's package wins); the header is
  absolute, ``_global_`` being the root.

Interpolations that cannot be resolved (an unset ``${oc.env:...}``, a key that
no file defines) are left as written, and defaults that could not be found are
reported in :attr:`Composed.missing_defaults`, so that an importer can say a
missing key "may live in a defaults file rlplex could not find".
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError
from rlplex.resources.yaml_io import load_yaml_file

_MAX_DEPTH = 32
_CHOICE = re.compile(r"\$\{\s*([A-Za-z_][\w/.-]*)\s*\}")
"""``${GROUP}`` in a defaults option: the choice of config group GROUP."""
_PACKAGE_HEADER = re.compile(r"^\s*#\s*@package\s+(\S+)")


@dataclass(frozen=True)
class Composed:
    """A composed, resolved config and what could not be composed."""

    data: dict[str, Any]
    """The composed config with interpolations resolved where possible."""
    missing_defaults: tuple[str, ...] = ()
    """Defaults entries (as written) whose file was not found."""
    used_files: tuple[str, ...] = field(default=())
    """Every file merged, in merge order (the primary one included)."""


def _place(data: Any, package: str) -> Any:
    """Nest ``data`` under the dotted ``package`` ('' is the root)."""
    for part in reversed([p for p in package.split(".") if p]):
        data = {part: data}
    return data


def _join(parent: str, child: str) -> str:
    return ".".join(p for p in (parent, child) if p)


def _search_roots(primary: Path, raw: Mapping[str, Any]) -> list[Path]:
    """The search path: the primary's folder, the cwd, then ``hydra.searchpath``.

    A ``pkg://a.b.c`` entry names a Python package: its folder ``a/b/c`` is looked for as a
    relative ``file://`` one is, so that a file read inside the package's repository (verl's
    fully_async_ppo_trainer.yaml lists ``pkg://verl.trainer.config``) finds it without
    importing the package."""
    roots = [primary.parent, Path.cwd()]
    hydra = raw.get("hydra")
    entries = hydra.get("searchpath") if isinstance(hydra, Mapping) else None
    if not isinstance(entries, list):
        return roots
    resolved = _resolve_tolerant({"s": entries}).get("s") or []
    for entry in resolved:
        if not isinstance(entry, str) or "${" in entry:
            continue
        if entry.startswith("pkg://"):
            path = Path(*entry[len("pkg://") :].strip("/").split("."))
        elif entry.startswith("file://"):
            path = Path(os.path.expanduser(entry[len("file://") :]))
        else:
            continue
        if path.is_absolute():
            roots.append(path)
            continue
        roots.append(Path.cwd() / path)
        for folder in (primary.parent, *primary.parent.parents):
            roots.append(folder / path)
    return roots


class _Composer:
    def __init__(self, primary: Path, raw: Mapping[str, Any]) -> None:
        self.roots = _search_roots(primary, raw)
        self.primary, self.raw = primary, raw
        self.missing: list[str] = []
        self.overrides: dict[str, Any] = {}
        """Each group's ``override`` option, the first one met in the tree."""
        self.choices: dict[str, str] = {}
        """Each config group's chosen option, for ``${GROUP}`` in a defaults option."""

    def choose(self, option: str) -> str:
        """``option`` with each ``${GROUP}`` replaced by that group's choice (kept as written
        when the group has none, so the file is reported missing as written)."""
        return _CHOICE.sub(lambda m: self.choices.get(m.group(1), m.group(0)), option)

    def option(self, group: str, listed: str, here: Path) -> str:
        """The option group ``group`` takes where a file lists it with ``listed``: the
        command line's (a top-level key of the primary file), an ``override`` entry's, or
        ``listed`` (its ``${GROUP}`` resolved).

        Raises:
            ConfigError: the command line names an option the group has no file for
                (Hydra: "Could not find 'GROUP/OPTION'").
        """
        given = self.raw.get(group) if "/" not in group else None
        if isinstance(given, str) and "${" not in given:
            if self.find(here, f"{group}/{given}") is None:
                raise ConfigError(
                    f"names no option of config group {group!r}: no {group}/{given}.yaml"
                    f" beside {here} or on the search path",
                    field=group, value=given, file=str(self.primary),
                )  # fmt: skip
            return given
        if group in self.overrides and isinstance(self.overrides[group], str):
            return str(self.overrides[group])
        return self.choose(listed)

    def find(self, here: Path, rel: str) -> Path | None:
        for root in (here, *self.roots):
            for suffix in (".yaml", ".yml", ""):
                candidate = root / f"{rel}{suffix}"
                if candidate.is_file():
                    return candidate.resolve()
        return None

    def entries(self, defaults: Any, file: str) -> list[tuple[str, str, str | None, bool]]:
        """(kind, path-or-group, package as written or None, optional) of each defaults
        entry; ``override`` entries are not among them (:meth:`register_overrides`)."""
        if not isinstance(defaults, list):
            raise ConfigError(
                "must be a list of defaults entries", field="defaults", value=defaults, file=file
            )
        out: list[tuple[str, str, str | None, bool]] = []
        for item in defaults:
            if isinstance(item, str):
                name, _, package = item.partition("@")
                out.append(("self" if name == "_self_" else "config", name, package or None, False))
            elif isinstance(item, Mapping):
                for key, option in item.items():
                    key = str(key).strip()
                    optional = key.startswith("optional ")
                    key = key.removeprefix("optional ").strip()
                    if key.startswith("override "):
                        continue  # registered by register_overrides
                    group, _, package = key.partition("@")
                    options = option if isinstance(option, list) else [option]
                    for opt in options:
                        if opt is None:
                            continue
                        out.append(("group", f"{group}/{opt}", package or None, optional))
            else:
                raise ConfigError(
                    "a defaults entry must be a name or a GROUP: OPTION mapping",
                    field="defaults",
                    value=item,
                    file=file,
                )
        return out

    def register_overrides(self, defaults: Any) -> None:
        """Note a file's ``override GROUP: OPTION`` entries; a group overridden already (by
        the command line, or a file met before) keeps that option, as in Hydra."""
        if not isinstance(defaults, list):
            return
        for item in defaults:
            if isinstance(item, Mapping):
                for key, option in item.items():
                    key = str(key).strip()
                    if key.startswith("override "):
                        group = key.removeprefix("override ").partition("@")[0].strip()
                        self.overrides.setdefault(group, option)

    def compose(
        self, data: Mapping[str, Any], path: Path, package: str, depth: int
    ) -> tuple[list[Any], list[str]]:
        """The (already placed) dicts to merge, in order, for one file, and the files they
        came from in merge order."""
        if depth > _MAX_DEPTH:
            raise ConfigError(
                "defaults nest too deeply (a cycle?)", field="defaults", file=str(path)
            )
        own = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
        defaults = data.get("defaults", [])
        entries = self.entries(defaults, str(path))
        self.register_overrides(defaults)
        slots: list[tuple[list[Any], list[str]] | None] = []
        deferred: list[int] = []
        self_done = False
        # Hydra expands a list's plain entries first (their choices then known everywhere)
        # and its ${GROUP} ones after; each still merges at its place in the list.
        for kind, target, pkg, optional in entries:
            if kind == "self":
                slots.append(([_place(own, package)], []))
                self_done = True
                continue
            group, _, listed = target.rpartition("/")
            if kind == "group" and group.split("/")[0] == "hydra":
                slots.append(([], []))
                continue
            if kind == "group":
                if "${" in listed:
                    deferred.append(len(slots))
                    slots.append(None)
                    continue
                listed = self.option(group, listed, path.parent)
                self.choices.setdefault(group, listed)
                target = f"{group}/{listed}"
            slots.append(self.expand(kind, target, pkg, optional, path, package, depth))
        for index in deferred:
            kind, target, pkg, optional = entries[index]  # one slot per entry
            group, _, listed = target.rpartition("/")
            listed = self.option(group, listed, path.parent)
            self.choices.setdefault(group, listed)
            target = f"{group}/{listed}"
            slots[index] = self.expand(kind, target, pkg, optional, path, package, depth)
        parts: list[Any] = []
        used: list[str] = []
        for slot in slots:
            assert slot is not None
            parts.extend(slot[0])
            used.extend(slot[1])
        if not self_done:
            parts.append(_place(own, package))
        return parts, used

    def expand(
        self,
        kind: str,
        target: str,
        pkg: str | None,
        optional: bool,
        path: Path,
        package: str,
        depth: int,
    ) -> tuple[list[Any], list[str]]:
        """One entry's placed dicts and files (none when its file is missing)."""
        found = self.find(path.parent, target)
        if found is None:
            if not optional:
                self.missing.append(target)
            return [], []
        try:
            child = load_yaml_file(found)
        except ConfigError as exc:
            if "the file is empty" not in str(exc):
                raise
            child = {}  # Hydra composes an empty file as an empty config
        if not isinstance(child, Mapping):
            return [], []
        header = _package_header(found)
        if pkg is None and header is not None and header not in ("_group_", "_name_"):
            # a header is absolute (Hydra's set_package_header); an entry's package wins
            child_package = _final_package("", header)
        elif pkg == "_here_":
            child_package = package
        elif pkg is None:
            # a group's package is the group path; a plain config merges where it is listed
            group = target.rsplit("/", 1)[0] if kind == "group" else ""
            child_package = _final_package(package, _relative(group))
        else:
            child_package = _final_package(package, _relative(pkg))
        parts, used = self.compose(child, found, child_package, depth + 1)
        return parts, [str(found), *used]


def _relative(package: str) -> str:
    """A package as written (``../engine``, ``actor_rollout_ref.actor``) as dotted keys."""
    return ".".join(p for p in package.replace("/", ".").split(".") if p and p != "..")


def _final_package(parent: str, package: str) -> str:
    """``package`` under ``parent``; everything up to a ``_global_`` in it is dropped, as in
    Hydra's ``_get_final_package`` (``_global_`` is the root)."""
    joined = _join(parent, package)
    cut = joined.rfind("_global_")
    return joined if cut == -1 else joined[cut + len("_global_") + 1 :]


def _package_header(path: Path) -> str | None:
    """The ``# @package PACKAGE`` a Hydra file declares in its header comments, if any."""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                if not line.lstrip().startswith("#"):
                    return None
                match = _PACKAGE_HEADER.match(line)
                if match:
                    return match.group(1)
    except (OSError, UnicodeDecodeError):
        return None
    return None


_FRAMEWORK_RESOLVERS: dict[str, Any] = {
    # RLinf (rlinf/utils/omega_resolver.py)
    "multiply": lambda x, y: x * y,
    "int_div": lambda x, y: x // y,
    "subtract": lambda x, y: x - y,
    "not": lambda x: not bool(x),
    "torch.dtype": lambda name: str(name),  # the dtype's name; rlplex imports no torch here
    # NeMo RL (nemo_rl/utils/config.py, register_omegaconf_resolvers)
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": lambda a, b: max(a, b),
}
"""The resolvers RLinf and NeMo RL register, so their files resolve."""


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    # OmegaConf 2.4 renamed register_new_resolver to register_resolver (which gained
    # ``replace``); 2.3's register_resolver is the old string-only API. RLinf checks the same.
    modern = "replace" in inspect.signature(OmegaConf.register_resolver).parameters
    for name, resolver in _FRAMEWORK_RESOLVERS.items():
        if OmegaConf.has_resolver(name):
            continue
        if modern:
            OmegaConf.register_resolver(name, resolver)
        else:
            OmegaConf.register_new_resolver(name, resolver)


def _resolve_node(node: Any) -> Any:
    from omegaconf import DictConfig, ListConfig

    if isinstance(node, DictConfig):
        out: dict[Any, Any] = {}
        for key in list(node.keys()):
            try:
                value = node[key]
            except Exception:  # unresolvable interpolation or ???: keep as written
                value = node._get_node(key)._value()  # type: ignore[union-attr]
            out[key] = _resolve_node(value)
        return out
    if isinstance(node, ListConfig):
        items = []
        for index in range(len(node)):
            try:
                value = node[index]
            except Exception:
                value = node._get_node(index)._value()  # type: ignore[union-attr]
            items.append(_resolve_node(value))
        return items
    return node


def _resolve_tolerant(data: Mapping[str, Any]) -> dict[str, Any]:
    """Resolve ``${...}`` with OmegaConf; values it cannot resolve stay as written."""
    from omegaconf import OmegaConf

    _register_resolvers()
    try:
        cfg = OmegaConf.create(dict(data))
    except Exception:  # keys or values OmegaConf refuses: keep the plain data
        return dict(data)
    resolved = _resolve_node(cfg)
    return resolved if isinstance(resolved, dict) else dict(data)


def compose(data: Mapping[str, Any], file: str) -> Composed:
    """Compose ``data`` (the parsed primary file at ``file``) and resolve interpolations.

    Raises:
        ConfigError: a malformed ``defaults`` list, or an included file that
            is not valid YAML (naming that file).
    """
    from omegaconf import OmegaConf

    if "defaults" not in data:
        return Composed(_resolve_tolerant(data), (), (file,))
    path = Path(file)
    composer = _Composer(path, data)
    defaults = data.get("defaults") or []
    if not isinstance(defaults, list):
        raise ConfigError(
            "must be a list of defaults entries", field="defaults", value=defaults, file=file
        )
    parts, used = composer.compose(data, path, "", 0)
    try:
        merged = OmegaConf.to_container(
            OmegaConf.merge(*[OmegaConf.create(p) for p in parts]), resolve=False
        )
    except Exception as exc:  # parts that cannot merge (a dict over a list ...)
        raise ConfigError(
            f"cannot compose the defaults list: {type(exc).__name__}: {exc}".splitlines()[0],
            field="defaults",
            file=file,
        ) from None
    assert isinstance(merged, dict)
    return Composed(_resolve_tolerant(merged), tuple(composer.missing), (file, *used))


def inherit(data: Mapping[str, Any], file: str) -> Composed:
    """NeMo RL's inheritance (nemo_rl/utils/config.py, ``load_config_with_inheritance``):
    ``defaults:`` is a path (or a list of paths) to parent files, relative to the file that
    names it; the parents merge in order, each composed the same way first, and the file's own
    keys merge over them. A section marked ``_override_: true`` replaces the parents' section
    instead of merging into it. Interpolations are then resolved (NeMo RL's ``mul``, ``add``,
    ``div`` and ``max`` resolvers included).

    Raises:
        ConfigError: a ``defaults`` entry that is not a path, a parent that cannot be read
            or merged, or an inheritance cycle (naming the file).
    """
    from omegaconf import OmegaConf

    missing: list[str] = []
    used: list[str] = [file]

    def load(own: Mapping[str, Any], path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
        own = dict(own)
        parents = own.pop("defaults", None)
        if parents is None:
            return own
        entries = [parents] if isinstance(parents, str) else parents
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise ConfigError(
                "must be a path or a list of paths to parent config files",
                field="defaults", value=parents, file=str(path),
            )  # fmt: skip
        merged: dict[str, Any] = {}
        for entry in entries:
            parent = Path(entry) if entry.startswith("/") else path.parent / entry
            if parent.resolve() in chain:
                raise ConfigError(
                    "inherits from itself", field="defaults", value=entry, file=str(path)
                )
            if not parent.is_file():
                missing.append(entry)
                continue
            used.append(str(parent))
            body = load_yaml_file(parent)
            if not isinstance(body, Mapping):
                raise ConfigError("a parent config must be a mapping", file=str(parent))
            merged = _merge_over(merged, load(body, parent, (*chain, parent.resolve())))
        return _merge_over(merged, own)

    def _merge_over(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
        base = dict(base)
        over = dict(over)
        for key, value in list(over.items()):
            if isinstance(value, Mapping) and value.get("_override_"):
                over[key] = {k: v for k, v in value.items() if k != "_override_"}
                base.pop(key, None)
        try:
            out = OmegaConf.to_container(
                OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(over)), resolve=False
            )
        except Exception as exc:  # a section that cannot merge (a mapping over a list ...)
            raise ConfigError(
                f"cannot merge the parent configs: {type(exc).__name__}: {exc}".splitlines()[0],
                field="defaults", file=file,
            ) from None  # fmt: skip
        assert isinstance(out, dict)
        return out

    path = Path(file)
    merged = load(data, path, (path.resolve(),))
    return Composed(_resolve_tolerant(merged), tuple(missing), tuple(used))
