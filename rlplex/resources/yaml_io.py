"""Reading YAML config files with errors a user can act on.

PyYAML silently keeps the last of two equal keys; a config with two stages of
the same name would lose one without a word. The loader here refuses
duplicate keys, and every syntax error becomes a :class:`ConfigError` with the
file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rlplex.errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in mapping:
            raise ConfigError(
                f"key {key!r} appears twice in the same mapping",
                line=key_node.start_mark.line + 1,
            )
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml_text(text: str, file: str = "<string>") -> Any:
    """Parse YAML text strictly; errors name ``file`` and the line."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except ConfigError as exc:
        raise exc.with_file(file) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"YAML syntax error: {problem}", file=file, line=line) from None


def load_yaml_file(path: str | Path) -> Any:
    """Read and strictly parse a YAML file; a missing or empty file is a ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the file: {exc}", file=str(path)) from None
    data = load_yaml_text(text, str(path))
    if data is None:
        raise ConfigError("the file is empty", file=str(path))
    return data


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
