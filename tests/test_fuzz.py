"""Property tests: mutated example configs and records never crash rlplex.

Hypothesis mutates ``examples/*.yaml`` (delete a key, retype a value, NaN /
infinity / booleans / huge numbers, deep nesting, an alias bomb) and
``examples/records/grpo_run.jsonl`` (drop, repeat, reorder lines, nasty field
values). Each mutant goes through the CLI in-process; the rule is the CLI's
contract: exit 0, or exit 2 with exactly one line on stderr; never a
traceback, and within a time budget. An accepted config must hold only finite
numbers. Examples are derandomized and bounded so the file stays fast; the
1,000-mutant run with memory measurements is ``bench/fuzz.py``.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BASES = {p.name: yaml.safe_load(p.read_text()) for p in sorted(EXAMPLES.glob("*.yaml"))}
RECORD = (EXAMPLES / "records" / "grpo_run.jsonl").read_text().splitlines()
BUDGET_S = 20.0  # per mutant, generous for a loaded CI box; the bench holds the 5 s target
runner = CliRunner()

NASTY = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 10**18, 10**30, "", "all", "auto", [], {}]),
    st.sampled_from(["0-99999999999", "list(range(0,9999999999))", "1e30", "x" * 300]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=12),
    st.lists(st.integers(min_value=-2, max_value=10**6), max_size=5),
)

settings_fast = settings(
    max_examples=30,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _parent(root: Any, path: tuple) -> Any:
    for part in path[:-1]:
        root = root[part]
    return root


@st.composite
def config_mutants(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(sorted(BASES)))
    data = copy.deepcopy(BASES[name])
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        op = draw(st.sampled_from(["delete", "nasty", "nasty", "deep", "bomb"]))
        if op == "delete":
            del parent[path[-1]]
        elif op == "nasty":
            parent[path[-1]] = draw(NASTY)
        elif op == "deep":
            value: Any = 1
            for _ in range(draw(st.sampled_from([5, 70, 300]))):
                value = [value]
            parent[path[-1]] = value
        if op == "bomb":
            text = yaml.safe_dump(data, sort_keys=False)
            bomb = "\n".join(
                [f"b0: &b0 [{', '.join(['x'] * 9)}]"]
                + [f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * 9)}]" for i in range(1, 8)]
            )
            return text + "\n" + bomb + "\n"
    try:
        return yaml.safe_dump(data, sort_keys=False)
    except (yaml.YAMLError, RecursionError):
        return "cluster: {}\n"


@st.composite
def record_mutants(draw: st.DrawFn) -> str:
    lines = list(RECORD)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["drop", "repeat", "swap", "field", "field", "truncate"]))
        i = draw(st.integers(0, len(lines) - 1)) if lines else 0
        if op == "drop" and lines:
            del lines[i]
        elif op == "repeat" and lines:
            lines.insert(i, lines[i])
        elif op == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "truncate" and lines:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif op == "field" and lines:
            try:  # an earlier "truncate" may have cut the line's JSON
                obj = json.loads(lines[i]) if lines[i].startswith("{") else None
            except json.JSONDecodeError:
                obj = None
            if isinstance(obj, dict) and obj:
                target = obj.get("metrics") if isinstance(obj.get("metrics"), dict) else obj
                if target:
                    key = draw(st.sampled_from(sorted(target)))
                    target[key] = draw(NASTY)
                    lines[i] = json.dumps(obj, allow_nan=True)
    return "\n".join(lines) + "\n"


def _check(result, started: float) -> None:
    assert time.perf_counter() - started < BUDGET_S
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, (result.exception, result.output)
    assert "Traceback" not in result.output
    if result.exit_code != 0:
        assert result.exit_code == 2, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, result.stderr


def _finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return True


@pytest.mark.slow
@settings_fast
@given(text=config_mutants())
def test_config_mutants_end_cleanly(text: str, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("c") / "mutant.yaml"
    path.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    validate = runner.invoke(app, ["validate", str(path)])
    _check(validate, started)
    started = time.perf_counter()
    _check(runner.invoke(app, ["plan", str(path)]), started)
    if validate.exit_code == 0:
        assert _finite(load_config(path).model_dump())


@settings(
    max_examples=20,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=record_mutants())
def test_record_mutants_end_cleanly(text: str, tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("r")
    path = folder / "run.jsonl"
    path.write_text(text, encoding="utf-8")
    config = str(EXAMPLES / "grpo.yaml")
    for args in (
        ["replay", str(path), "--config", config],
        ["replay", str(path), "--config", config, "--skip-bad-lines"],
        ["viz", str(path), "--gantt", str(folder / "g.html")],
    ):
        started = time.perf_counter()
        result = runner.invoke(app, args)
        _check(result, started)
        if result.exit_code == 0 and args[0] == "replay":
            assert "nan" not in result.stdout.lower().split()
