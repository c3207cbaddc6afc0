"""Reading YAML config files with errors a user can act on, within limits.

PyYAML silently keeps the last of two equal keys; a config with two stages of
the same name would lose one without a word. The loader here refuses
duplicate keys (a key brought in by a merge key, ``<<: *defaults``, may be
overridden, as YAML 1.1 merges mean), and every syntax error becomes a :class:`ConfigError` with the
file and line.

A config may come from anywhere, so reading one is bounded *before* anything
is built from it (:class:`YamlLimits`): the file's size is checked before it is
read; one streaming pass over the parser's events (libyaml when present)
checks nesting depth, the number of items of any one list or mapping and the
number of nodes; after composing, the node count *with aliases expanded* is
computed on the node graph (memoised, so a "billion laughs" bomb is measured
without being expanded) before any Python object is constructed, and an alias
inside the very collection it names (a cycle, ``x: &r [*r]``) is refused there.
Each refusal names the file, the line and the limit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlplex.errors import ConfigError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class YamlLimits:
    """What a YAML file may hold; beyond any of these it is refused unread or unbuilt."""

    max_bytes: int = 10 * 2**20
    """File size; ``RLPLEX_MAX_FILE_MB`` in the environment overrides the 10 MB default."""
    max_depth: int = 64
    """Nesting of lists and mappings (a config needs about 6)."""
    max_items: int = 20_000
    """Items of one list or mapping (stages, roles, ``after``, a device list)."""
    max_nodes: int = 200_000
    """Nodes of the whole document, aliases expanded (an alias bomb is refused)."""

    @classmethod
    def from_env(cls) -> YamlLimits:
        """The defaults, with ``RLPLEX_MAX_FILE_MB`` applied when set."""
        raw = os.environ.get("RLPLEX_MAX_FILE_MB")
        if not raw:
            return cls()
        try:
            megabytes = float(raw)
        except ValueError:
            raise ConfigError(
                "must be a number of MB", field="RLPLEX_MAX_FILE_MB", value=raw
            ) from None
        if not 0 < megabytes < 1e6:
            raise ConfigError("must be > 0 MB", field="RLPLEX_MAX_FILE_MB", value=raw)
        return cls(max_bytes=int(megabytes * 2**20))


class _StrictLoader(_Loader):  # type: ignore[misc,valid-type]
    """SafeLoader (libyaml's when available) that refuses duplicate and unhashable keys."""


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> dict:
    # A merge key (``<<: *defaults``) brings in keys the mapping's own keys may override, as
    # YAML 1.1 says: flatten_mapping puts the merged pairs first, so only the own pairs that
    # follow them are checked for repeats.
    own_pairs = sum(1 for key_node, _ in node.value if key_node.tag != _MERGE_TAG)
    loader.flatten_mapping(node)
    merged_pairs = len(node.value) - own_pairs
    mapping: dict[Any, Any] = {}
    own_keys: set[Any] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, (list, dict, set)):
            raise ConfigError(
                f"a mapping key must be a name or a number, not a {type(key).__name__}",
                line=key_node.start_mark.line + 1,
            )
        if index < merged_pairs:
            mapping[key] = loader.construct_object(value_node, deep=deep)
            continue
        if key in own_keys:
            raise ConfigError(
                f"key {key!r} appears twice in the same mapping",
                line=key_node.start_mark.line + 1,
            )
        own_keys.add(key)
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

# PyYAML reads YAML 1.1, whose floats need a dot and a signed exponent: ``1e-6``, ``1e3``
# and ``2.0e1`` would load as strings. Every framework whose files rlplex reads loads them
# with OmegaConf, which reads them as floats (as YAML 1.2 does), and so must rlplex: a
# native ``seconds: 1e3`` is a number.
_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789")
)


def _check_events(text: str, limits: YamlLimits) -> None:
    """One streaming pass over the parser's events: depth, items per collection, nodes."""
    items: list[int] = []  # nodes so far in each open collection
    per_item: list[int] = []  # nodes per item: 2 in a mapping (key and value), 1 in a list
    nodes = 0
    for event in yaml.parse(text, Loader=_Loader):
        if not isinstance(event, yaml.NodeEvent):
            if isinstance(event, yaml.CollectionEndEvent) and items:
                items.pop()
                per_item.pop()
            continue
        nodes += 1
        line = event.start_mark.line + 1 if event.start_mark else None
        if nodes > limits.max_nodes:
            raise ConfigError(f"more than {limits.max_nodes:,} YAML nodes", line=line)
        if items:
            items[-1] += 1
            if items[-1] > per_item[-1] * limits.max_items:
                raise ConfigError(
                    f"a list or mapping with more than {limits.max_items:,} items", line=line
                )
        if isinstance(event, yaml.CollectionStartEvent):
            items.append(0)
            per_item.append(2 if isinstance(event, yaml.MappingStartEvent) else 1)
            if len(items) > limits.max_depth:
                raise ConfigError(f"nested more than {limits.max_depth} levels deep", line=line)


def _expanded_size(root: yaml.Node, limits: YamlLimits) -> None:
    """Refuse a node graph whose size with aliases expanded passes ``max_nodes``, or a cycle.

    Aliases make the graph a DAG whose expansion may be exponential in its size;
    memoising each node's expanded size measures it in linear time. An alias
    inside the collection it names (``x: &r [*r]``) makes a cycle, whose
    expansion never ends: it is refused at the line of the collection holding
    the alias. A node popped while its own children are still open can only
    have been pushed by one of its descendants, hence a cycle.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool, yaml.Node | None]] = [(root, False, None)]
    while stack:
        node, children_done, parent = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[id(node)] = 1
            continue
        children: list[yaml.Node] = (
            [n for pair in node.value for n in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if not children_done:
            if id(node) in open_nodes:
                line = (parent if parent is not None else node).start_mark.line + 1
                start = node.start_mark.line + 1
                raise ConfigError(
                    "a recursive YAML alias: it names a list or mapping that contains it"
                    + (f" (the one starting on line {start})" if start != line else ""),
                    line=line,
                )
            open_nodes.add(id(node))
            stack.append((node, True, parent))
            stack.extend((c, False, node) for c in children if id(c) not in sizes)
            continue
        open_nodes.discard(id(node))
        total = 1 + sum(sizes.get(id(c), 1) for c in children)
        if total > limits.max_nodes:
            raise ConfigError(
                f"YAML aliases expand to more than {limits.max_nodes:,} nodes (an alias bomb?)",
                line=node.start_mark.line + 1,
            )
        sizes[id(node)] = total


_LIBYAML_MAX_DEPTH = 999
"""Deepest nesting libyaml parses (measured on PyYAML 6.0.4's bundled libyaml)."""


def load_yaml_text(text: str, file: str = "<string>", limits: YamlLimits | None = None) -> Any:
    """Parse YAML text strictly and within ``limits``; errors name ``file`` and the line."""
    limits = limits or YamlLimits.from_env()
    try:
        _check_events(text, limits)
        loader = _StrictLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _expanded_size(node, limits)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except ConfigError as exc:
        raise exc.with_file(file) from None
    except yaml.YAMLError as exc:
        exc = _python_parser_error(text) or exc
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        problem = str(problem).strip().splitlines()[0]  # the "in <unicode string>" lines go
        if "nesting depth" in problem or "flow level" in problem:
            # libyaml (PyYAML 6.0.4's) stops at about 1,000 levels, before our event check
            # sees them; below that limit ours is the one the file broke.
            message = (
                f"nested more than {limits.max_depth} levels deep"
                if limits.max_depth < _LIBYAML_MAX_DEPTH
                else f"nested deeper than the YAML parser allows ({problem})"
            )
            raise ConfigError(message, file=file, line=line) from None
        raise ConfigError(f"YAML syntax error: {problem}", file=file, line=line) from None
    except RecursionError:
        raise ConfigError("nested too deeply", file=file) from None


def _python_parser_error(text: str) -> yaml.YAMLError | None:
    """PyYAML's own message for a syntax error libyaml found (it says what it expected).

    Only for files under 1 MB: the pure-Python parser is about 20 times slower.
    """
    if _Loader is yaml.SafeLoader or len(text) > 2**20:
        return None
    try:
        for _ in yaml.parse(text, Loader=yaml.SafeLoader):
            pass
    except yaml.YAMLError as exc:
        return exc
    return None


def read_text_bounded(path: str | Path, max_bytes: int, what: str = "file") -> str:
    """The UTF-8 text of ``path``, refused (unread) beyond ``max_bytes``.

    Raises:
        ConfigError: missing, a directory, unreadable, too large or not UTF-8.
    """
    path = Path(path)
    try:
        if path.is_dir():
            raise ConfigError(f"is a directory, not a {what}", file=str(path))
        size = path.stat().st_size
        if size > max_bytes:
            raise ConfigError(
                f"the {what} is {size / 2**20:.1f} MB, over the limit of"
                f" {max_bytes / 2**20:g} MB (RLPLEX_MAX_FILE_MB raises it)",
                file=str(path),
            )
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)  # a file growing meanwhile stays bounded
        if len(data) > max_bytes:
            raise ConfigError(f"the {what} grew past {max_bytes / 2**20:g} MB", file=str(path))
        return data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError(f"not a UTF-8 text {what}", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=str(path)) from None


def load_yaml_file(path: str | Path, limits: YamlLimits | None = None) -> Any:
    """Read and strictly parse a YAML file; a missing, empty or too large file is a ConfigError."""
    limits = limits or YamlLimits.from_env()
    text = read_text_bounded(path, limits.max_bytes, "config file")
    data = load_yaml_text(text, str(path), limits)
    if data is None:
        raise ConfigError("the file is empty", file=str(path))
    return data


def overrides_set(key: str, overrides: Sequence[str]) -> bool:
    """Whether one of the ``KEY=VALUE`` ``overrides`` sets the dotted ``key``, or a mapping
    above it (``workload.response_tokens={mean: 300, max: 1024}`` sets
    ``workload.response_tokens.mean``)."""
    for item in overrides:
        target = item.partition("=")[0].strip()
        if key == target or key.startswith(target + "."):
            return True
    return False


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``KEY=VALUE`` overrides with dotted keys; values are parsed as YAML.

    ``roles.actor_infer.devices=0-3`` sets a string, ``cluster.nodes=2`` an
    integer, ``pipeline.stages.train.after=[advantage]`` a list. Missing
    intermediate mappings are created. Returns a new dict; ``data`` is unchanged.
    """
    import copy

    result = copy.deepcopy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("an override must look like KEY=VALUE", field="--set", value=item)
        value = load_yaml_text(raw, f"--set {key}") if raw.strip() else ""
        parts = key.split(".")
        node: Any = result
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part) if isinstance(node, dict) else None
            if child is None:
                child = {}
                node[part] = child
            if not isinstance(child, dict):
                raise ConfigError(
                    f"cannot set {key!r}: {'.'.join(parts[: depth + 1])!r} is not a mapping",
                    field="--set",
                    value=item,
                )
            node = child
        node[parts[-1]] = value
    return result
