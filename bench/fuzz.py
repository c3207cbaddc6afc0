"""Fuzz rlplex with hostile configs and records; check that every input ends cleanly.

Targets (issue 14): over at least 1,000 config mutants and 300 record mutants,
0 tracebacks, 0 runs over 5 s, peak memory under 500 MB for every input, and
every accepted config mutant a valid config (numbers finite, sections typed).
Then two timings: ``rlplex viz`` of a 300,000-line record (target < 10 s) and
``rlplex plan --auto`` of a config with 200 GPU roles (target < 30 s).

Config mutants start from ``examples/*.yaml``: a random edit of the parsed
tree (delete a key, retype a value, NaN / infinity / boolean / huge / negative
numbers, deep nesting, long lists, a list or mapping holding itself) or a
hand-written nasty text (alias bombs, recursive aliases as a document, device
list, states or pipeline, token lengths of 1e308, 1,000-deep nesting, 12 MB
files, device ranges far past the cluster, 10^9 x 10^9 clusters, a million
``after`` entries, crashing ``python:`` targets, ``scaling: 1e30``,
``max_staleness: 1000000``). Each goes through ``validate`` and ``plan``.
Record mutants start from ``examples/records/*`` and a simulated record:
truncated, shuffled, duplicated, interleaved, corrupted lines, NaN / negative
/ huge / retyped fields, deep JSON, a directory; each goes through ``replay``
(with and without ``--skip-bad-lines``) and ``viz``.

Each mutant runs in its own child process, forked from a parent that imported
rlplex once (a fresh interpreter per mutant would cost about a second each),
with a wall-clock limit (killed at 20 s, flagged over 5 s) and an address-space
cap of 4 GB; its peak resident memory is the child's ``ru_maxrss`` from
``os.wait4`` (it includes the ~100 MB of the preloaded interpreter). An exit
status counts as clean when it is 0, or 2 with exactly one line on stderr and
no traceback.

Run: PYTHONPATH=. .venv/bin/python bench/fuzz.py [--configs 1000] [--records 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import math
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

PYTHONPATH = os.environ.get("PYTHONPATH", "")
"""The caller's path, kept after the checkout for the CLI's children (a packed site folder)."""
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RECORDS = EXAMPLES / "records"
KILL_S = 20.0
SLOW_S = 5.0
MEMORY_CAP = 4 * 2**30

NASTY_VALUES: list[Any] = [
    None, True, False, 0, -1, 1e18, 10**30, -1e9, float("nan"), float("inf"), float("-inf"),
    "", "x" * 10_000, "0-99999999999", "list(range(0,9999999999))", "all", "auto", [], {},
    [[[[]]]], {"a": {"b": {"c": 1}}}, [1] * 5000, "1e30", 1e-300, "\x00\u202e",
    1e308,
]  # fmt: skip


# ---------------------------------------------------------------- config mutants


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _set(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(root, path[:-1])[path[-1]] = value
    return root


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def tree_mutant(data: dict, rng: random.Random) -> str:
    """One to three random edits of a parsed config, dumped back to YAML."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(data)
        path = rng.choice(paths[1:] or paths)
        op = rng.choice(
            ["delete", "nasty", "nasty", "nasty", "deep", "list", "rename", "dup", "recursive"]
        )
        try:
            if op == "delete" and path:
                parent = _get(data, path[:-1])
                del parent[path[-1]]
            elif op == "nasty":
                data = _set(data, path, copy.deepcopy(rng.choice(NASTY_VALUES)))
            elif op == "deep":
                data = _set(data, path, _deep(rng.choice([10, 60, 200])))
            elif op == "list":
                data = _set(data, path, [copy.deepcopy(_get(data, path))] * rng.choice([2, 300]))
            elif op == "recursive" and path:  # dumped as an alias inside its own anchor
                old = _get(data, path)
                loop: Any = {"a": old} if isinstance(old, dict) else [old]
                if isinstance(loop, dict):
                    loop["self"] = loop
                else:
                    loop.append(loop)
                data = _set(data, path, loop)
                break  # _paths would never end on it
            elif op == "rename" and path and isinstance(path[-1], str):
                parent = _get(data, path[:-1])
                parent[path[-1] + rng.choice(["_x", "", "s"])] = parent.pop(path[-1])
            elif op == "dup" and path:
                parent = _get(data, path[:-1])
                if isinstance(parent, list):
                    parent.append(copy.deepcopy(parent[path[-1]]))
        except (KeyError, IndexError, TypeError):
            continue
        if not isinstance(data, dict):
            break
    try:
        return yaml.safe_dump(data, sort_keys=False, width=10**9)
    except (yaml.YAMLError, RecursionError, ValueError):
        return "cluster: {nodes: 1}\n"


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _stages_chain(n: int) -> str:
    lines = ["cluster: {nodes: 1, gpus_per_node: 8}", "roles:", "  r: {devices: '0-7'}",
             "pipeline:", "  stages:", "    s0: {role: r, seconds: 1}"]  # fmt: skip
    lines += [f"    s{i}: {{role: r, seconds: 1, after: [s{i - 1}]}}" for i in range(1, n)]
    return "\n".join(lines) + "\n"


def _cpu_roles(n: int) -> str:
    roles = "\n".join(f"  r{i}: {{world_size: 1}}" for i in range(n))
    return (
        f"cluster: {{nodes: 1}}\nroles:\n{roles}\n"
        "pipeline: {stages: {a: {role: r0, seconds: 1}}}\n"
    )


def special_configs(base: str) -> list[tuple[str, str]]:
    """Hand-written nasty configs (text, label); ``base`` is a valid example's text."""
    est = (EXAMPLES / "estimate_7b.yaml").read_text()
    after = "[" + ", ".join(["generate"] * 1_000_000) + "]"
    out = [
        ("alias bomb at top", _alias_bomb() + base),
        ("alias bomb in a role", base.replace("roles:", "x_bomb: 1\nroles:", 1) + _alias_bomb()),
        ("deep nesting 1000", "cluster: " + "[" * 1000 + "]" * 1000 + "\n"),
        ("deep mapping 1000", "cluster:" + "".join(f"\n{' ' * (i + 1)}a:" for i in range(1000))),
        ("12 MB of comments", base + ("# " + "x" * 98 + "\n") * 125_000),
        ("5 MB role name", base.replace("roles:\n", "roles:\n  " + "r" * 5_000_000 + ": {}\n", 1)),
        ("huge device list", base + "x: [" + ",".join(["1"] * 300_000) + "]\n"),
        ("device range far out", base.replace('devices: "0-7"', 'devices: "0-99999999999"')),
        (
            "list(range) far out",
            base.replace('devices: "0-7"', 'devices: "list(range(0,9999999999))"'),
        ),
        (
            "1e9 x 1e9 cluster",
            "cluster: {nodes: 1000000000, gpus_per_node: 1000000000}\n"
            "roles: {a: {devices: all}}\npipeline: {stages: {g: {role: a, seconds: 1}}}\n",
        ),
        (
            "million after",
            "cluster: {nodes: 1}\nroles: {a: {devices: '0-7'}}\n"
            "pipeline: {stages: {generate: {role: a, seconds: 1}, "
            f"t: {{role: a, seconds: 1, after: {after}}}}}}}\n",
        ),
        ("400k chained stages", _stages_chain(400_000)),
        ("2k chained stages", _stages_chain(2_000)),
        ("600k cpu roles", _cpu_roles(600_000)),
        ("5k cpu roles", _cpu_roles(5_000)),
        (
            "no cluster",
            "\n".join(line for line in base.splitlines() if not line.startswith("cluster")),
        ),
        ("pipeline a string", "cluster: {}\nroles: {}\npipeline: generate\n"),
        ("pipeline a list", "cluster: {}\nroles: {}\npipeline: [generate, train]\n"),
        ("list key", "cluster: {}\n[a, b]: 1\n"),
        ("python os:abort", "cluster: {}\nroles: {}\npipeline: {python: 'os:abort'}\n"),
        ("python sys:exit", "cluster: {}\nroles: {}\npipeline: {python: 'sys:exit'}\n"),
        ("scaling 1e30", base.replace("seconds: 80", "seconds: 80, scaling: 1e30")),
        ("max_staleness 1e6", base.replace("mode: sync", "mode: async\n  max_staleness: 1000000")),
        ("nan weights", base.replace("weights: 4", "weights: .nan", 1)),
        ("inf memory", base.replace("gpu_memory_gb: 80", "gpu_memory_gb: .inf")),
        ("inf network", base.replace("network_gb_per_s: 25", "network_gb_per_s: .inf")),
        ("seconds true", base.replace("seconds: 80", "seconds: true")),
        ("nodes true", base.replace("nodes: 1", "nodes: true")),
        ("recursive alias", "x: &r [*r]\n" + base),
        ("recursive devices", base.replace('devices: "0-7"', "devices: &d [0, 1, *d]", 1)),
        (
            "recursive states",
            base.replace("states: {weights: 4,", "states: &s {self: *s, weights: 4,", 1),
        ),
        ("recursive pipeline", base.replace("pipeline:\n", "pipeline: &p\n  again: *p\n", 1)),
        (
            "prompt tokens 1e308",
            est.replace("prompt_tokens: {mean: 256", "prompt_tokens: {mean: 1e308"),
        ),
        (
            "response tokens 1e308",
            est.replace("response_tokens: {mean: 512", "response_tokens: {mean: 1.0e+308"),
        ),
        ("binary", "\x00\x01\x02\xff garbage"),
        ("empty", ""),
    ]
    return out


def config_mutants(count: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(label, suffix, text) of ``count`` config mutants, the nasty ones first."""
    examples = sorted(p for p in EXAMPLES.glob("*.yaml"))
    bases = {p.name: p.read_text() for p in examples}
    base = (EXAMPLES / "ppo.yaml").read_text()
    out = [(label, ".yaml", text) for label, text in special_configs(base)]
    parsed = {name: yaml.safe_load(text) for name, text in bases.items()}
    names = sorted(parsed)
    while len(out) < count:
        name = rng.choice(names)
        if rng.random() < 0.1:  # a textual edit: truncate or flip bytes
            text = bases[name]
            cut = rng.randrange(len(text))
            text = (
                text[:cut]
                if rng.random() < 0.5
                else text[:cut] + rng.choice("{}[]:&*!|>-'\"\t\n") + text[cut + 1 :]
            )
            out.append((f"{name} text edit", ".yaml", text))
        else:
            out.append((f"{name} tree edit", ".yaml", tree_mutant(parsed[name], rng)))
    return out[:count]


# ---------------------------------------------------------------- record mutants


def _record_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def record_mutant(text: str, other: str, rng: random.Random) -> str:
    lines = _record_lines(text)
    op = rng.choice(
        ["truncate", "shuffle", "duplicate", "interleave", "corrupt", "field", "field", "field",
         "deep", "long", "drop", "reverse"]
    )  # fmt: skip
    if op == "truncate":
        return text[: rng.randrange(len(text) + 1)]
    if op == "shuffle":
        rng.shuffle(lines)
    elif op == "duplicate":
        lines = lines + lines
    elif op == "interleave":
        others = _record_lines(other)
        merged = []
        for i in range(max(len(lines), len(others))):
            merged += lines[i : i + 1] + others[i : i + 1]
        lines = merged
    elif op == "corrupt" and lines:
        i = rng.randrange(len(lines))
        pos = rng.randrange(len(lines[i]) + 1)
        lines[i] = (
            lines[i][:pos]
            + rng.choice(["\x00", "}", "{", '"', "NaN", "]]", "\u00ff"])
            + lines[i][pos:]
        )
    elif op == "field" and lines:
        i = rng.randrange(len(lines))
        try:
            obj = json.loads(lines[i].split("metrics_tag:", 1)[-1])
        except json.JSONDecodeError:
            return "\n".join(lines) + "\n"
        if isinstance(obj, dict) and obj:
            target = obj
            if isinstance(obj.get("data"), dict) and obj["data"]:
                target = obj["data"]
            elif isinstance(obj.get("metrics"), dict) and obj["metrics"]:
                target = obj["metrics"]
            key = rng.choice(sorted(target))
            target[key] = rng.choice(
                [
                    float("nan"),
                    float("inf"),
                    -69.5,
                    -1,
                    1e300,
                    True,
                    "x",
                    None,
                    [],
                    {},
                    10**20,
                    2**63,
                ]
            )
            body = json.dumps(obj, allow_nan=True)
            lines[i] = ("metrics_tag: " + body) if "metrics_tag:" in lines[i] else body
    elif op == "deep":
        lines.insert(rng.randrange(len(lines) + 1), "[" * 100_000 + "]" * 100_000)
    elif op == "long":
        lines.insert(rng.randrange(len(lines) + 1), '{"step": 1, "op": "' + "x" * 2_000_000 + '"}')
    elif op == "drop" and lines:
        del lines[rng.randrange(len(lines))]
    elif op == "reverse":
        lines.reverse()
    return "\n".join(lines) + "\n"


def record_mutants(
    count: int, rng: random.Random, simulated: str
) -> list[tuple[str, str, str, str]]:
    """(label, suffix, text, config) of ``count`` record mutants."""
    sources = [
        (RECORDS / "grpo_run.jsonl", EXAMPLES / "grpo.yaml"),
        (RECORDS / "verl_quickstart.jsonl", RECORDS / "verl_quickstart.yaml"),
        (RECORDS / "verl_quickstart_console.log", RECORDS / "verl_quickstart.yaml"),
        (RECORDS / "roll_rlvr_stdout.log", RECORDS / "verl_quickstart.yaml"),
    ]
    texts = [(p.read_text(), str(c), p.suffix) for p, c in sources]
    texts.append((simulated, str(EXAMPLES / "ppo.yaml"), ".jsonl"))
    out = [
        ("empty record", ".jsonl", "", str(EXAMPLES / "grpo.yaml")),
        ("binary record", ".jsonl", "\x00\xff" * 100, str(EXAMPLES / "grpo.yaml")),
        ("a directory", "/", "", str(EXAMPLES / "grpo.yaml")),
        ("record twice", ".jsonl", texts[0][0] * 2, str(EXAMPLES / "grpo.yaml")),
        ("negative durations", ".jsonl", texts[0][0].replace('"end_s": 1', '"end_s": -1'),
         str(EXAMPLES / "grpo.yaml")),
        ("nan durations", ".jsonl", texts[0][0].replace('"end_s": 1', '"end_s": NaN'),
         str(EXAMPLES / "grpo.yaml")),
    ]  # fmt: skip
    while len(out) < count:
        text, config, suffix = rng.choice(texts)
        other = rng.choice(texts)[0]
        out.append(("record edit", suffix, record_mutant(text, other, rng), config))
    return out[:count]


# ---------------------------------------------------------------- running one input


def _run_cli(args: list[str]) -> dict[str, Any]:
    """Run the CLI in this (child) process; stderr captured; never raises."""
    import typer

    from rlplex.cli import app

    err = io.StringIO()
    out = io.StringIO()
    old_err, old_out = sys.stderr, sys.stdout
    sys.stderr, sys.stdout = err, out
    crash = None
    try:
        code = app(args, prog_name="rlplex", standalone_mode=False)
        code = 0 if code is None else int(code)
    except typer.Exit as exc:
        code = exc.exit_code
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:
        name = type(exc).__name__
        if name in ("UsageError", "BadParameter", "NoSuchOption", "MissingParameter"):
            code = 2
            err.write(f"usage: {exc}\n")
        else:
            code = 1
            crash = "".join(traceback.format_exception(exc))[-3000:]
    finally:
        sys.stderr, sys.stdout = old_err, old_out
    stderr = err.getvalue()
    lines = [line for line in stderr.splitlines() if line.strip()]
    clean = (
        crash is None
        and "Traceback" not in stderr
        and (code == 0 or (code == 2 and len(lines) == 1))
    )
    return {"code": code, "clean": clean, "stderr": stderr[-2000:], "crash": crash}


def _child(task: Callable[[], dict[str, Any]], result_path: Path) -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
        result = task()
    except BaseException as exc:
        result = {"clean": False, "crash": "".join(traceback.format_exception(exc))[-3000:]}
    try:
        result_path.write_text(json.dumps(result, default=str))
    finally:
        os._exit(0)


def run_forked(task: Callable[[], dict[str, Any]], tmp: Path) -> dict[str, Any]:
    """Run ``task`` in a forked child: its result, wall time and peak RSS (MB)."""
    result_path = tmp / f"result-{time.monotonic_ns()}.json"
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        _child(task, result_path)
    killed = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.perf_counter() - start > KILL_S:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            killed = True
            break
        time.sleep(0.005)
    wall = time.perf_counter() - start
    result: dict[str, Any]
    try:
        result = json.loads(result_path.read_text())
        result_path.unlink()
    except (OSError, json.JSONDecodeError):
        result = {"clean": False, "crash": f"child ended without a result (status {status})"}
    if killed:
        result = {"clean": False, "crash": f"killed after {KILL_S:g} s"}
    result["wall_s"] = wall
    result["rss_mb"] = usage.ru_maxrss / 1024
    return result


def check_accepted(path: Path) -> str | None:
    """None when an accepted config holds only finite numbers and typed sections."""
    from rlplex.config import Config, load_config

    cfg = load_config(path)
    if not isinstance(cfg, Config):
        return "not a Config"
    stack: list[Any] = [cfg.model_dump()]
    while stack:
        value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"non-finite number {value}"
        if isinstance(value, bool):
            continue
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    for role in cfg.roles.values():
        if not all(isinstance(gb, float) and gb >= 0 for gb in role.states.values()):
            return f"role {role.name}: bad state sizes"
    for stage in cfg.pipeline.stages:
        if stage.seconds is not None and (isinstance(stage.seconds, bool) or stage.seconds < 0):
            return f"stage {stage.name}: bad seconds"
    return None


def config_task(path: Path) -> Callable[[], dict[str, Any]]:
    def task() -> dict[str, Any]:
        validate = _run_cli(["validate", str(path)])
        plan = _run_cli(["plan", str(path), "--verify"])
        result = {"validate": validate, "plan": plan}
        result["clean"] = validate["clean"] and plan["clean"]
        result["torch"] = "torch" in sys.modules  # imported by the pipeline function?
        result["accepted"] = validate["code"] == 0
        if result["accepted"]:
            try:
                result["invalid"] = check_accepted(path)
            except Exception as exc:
                result["invalid"] = f"accepted, then refused in-process: {exc}"
        return result

    return task


def record_task(path: Path, config: str, out_dir: Path) -> Callable[[], dict[str, Any]]:
    def task() -> dict[str, Any]:
        runs = {
            "replay": _run_cli(["replay", str(path), "--config", config]),
            "replay_skip": _run_cli(["replay", str(path), "--config", config, "--skip-bad-lines"]),
            "viz": _run_cli(["viz", str(path), "--gantt", str(out_dir / "g.html")]),
        }
        runs["clean"] = all(r["clean"] for r in runs.values() if isinstance(r, dict))
        runs["accepted"] = runs["replay"]["code"] == 0
        return runs

    return task


# ---------------------------------------------------------------- timings


def simulated_record(lines: int, out: Path) -> Path:
    """A record of about ``lines`` lines: ppo.yaml simulated for enough steps."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan
    from rlplex.sim import simulate

    cfg = load_config(EXAMPLES / "ppo.yaml")
    plan = make_plan(cfg)
    one = simulate(plan, cfg, steps=2)
    per_step = max(1, len(one.events) // 2)
    timeline = simulate(plan, cfg, steps=max(1, lines // (per_step + 1)))
    timeline.write_jsonl(out)
    return out


def many_roles_config(roles: int, out: Path) -> Path:
    """``roles`` GPU roles, each generating then training in a chain, on 25 nodes of 8 GPUs."""
    lines = ["cluster: {nodes: 25, gpus_per_node: 8, gpu_memory_gb: 80}", "roles:"]
    lines += [f"  r{i}: {{devices: auto, states: {{weights: 1}}}}" for i in range(roles)]
    lines += ["pipeline:", "  stages:"]
    for i in range(roles):
        after = f", after: [s{i - 1}]" if i else ""
        lines.append(f"    s{i}: {{role: r{i}, seconds: {1 + i % 7}{after}}}")
    out.write_text("\n".join(lines) + "\n")
    return out


def timed_command(args: list[str]) -> tuple[float, int, str]:
    import subprocess

    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "rlplex.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), PYTHONPATH)))},
        timeout=600,
        check=False,
    )
    return time.perf_counter() - start, proc.returncode, (proc.stderr or "")[-500:]


# ---------------------------------------------------------------- main


def summarise(kind: str, results: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    crashes = [(label, r) for label, r in results if not r.get("clean")]
    slow = [(label, r["wall_s"]) for label, r in results if r["wall_s"] > SLOW_S]
    slow_torch = [label for label, r in results if r["wall_s"] > SLOW_S and r.get("torch")]
    accepted = [r for _, r in results if r.get("accepted")]
    invalid = [(label, r["invalid"]) for label, r in results if r.get("invalid")]
    return {
        "kind": kind,
        "mutants": len(results),
        "not clean": crashes,
        "slow": slow,
        "slow importing torch": slow_torch,
        "accepted": len(accepted),
        "invalid accepted": invalid,
        "peak_mb": max(r["rss_mb"] for _, r in results),
        "max_wall_s": max(r["wall_s"] for _, r in results),
        "slowest": max(results, key=lambda item: item[1]["wall_s"])[0],
        "exit codes": Counter(
            str(r.get("validate", r.get("replay", {})).get("code")) for _, r in results
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", type=int, default=1000)
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--viz-lines", type=int, default=300_000)
    parser.add_argument("--auto-roles", type=int, default=200)
    parser.add_argument("--show", type=int, default=5, help="Failures to print in full.")
    parser.add_argument(
        "--keep", type=Path, default=Path("/tmp/rlplex-fuzz"), help="Where failing inputs go."
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    import rlplex.cli
    import rlplex.plan
    import rlplex.sim  # noqa: F401

    started = time.perf_counter()
    summaries = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        results = []
        for i, (label, suffix, text) in enumerate(config_mutants(args.configs, rng)):
            path = tmp / f"c{i}{suffix}"
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
            result = run_forked(config_task(path), tmp)
            results.append((f"{i} {label}", result))
            if not result.get("clean") or result["wall_s"] > SLOW_S or result.get("invalid"):
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"config-{i}.yaml").write_bytes(path.read_bytes())
            path.unlink()
        summaries.append(summarise("config", results))
        simulated = simulated_record(120, tmp / "sim.jsonl").read_text()
        results = []
        for i, (label, suffix, text, config) in enumerate(
            record_mutants(args.records, rng, simulated)
        ):
            if suffix == "/":
                path = tmp / f"dir{i}"
                path.mkdir()
            else:
                path = tmp / f"r{i}{suffix}"
                path.write_text(text, encoding="utf-8", errors="surrogatepass")
            result = run_forked(record_task(path, config, tmp), tmp)
            results.append((f"{i} {label}", result))
            if (not result.get("clean") or result["wall_s"] > SLOW_S) and path.is_file():
                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"record-{i}{suffix}").write_bytes(path.read_bytes())
        summaries.append(summarise("record", results))
        big = simulated_record(args.viz_lines, tmp / "big.jsonl")
        lines = sum(1 for _ in big.open())
        viz_s, viz_rc, viz_err = timed_command(["viz", str(big), "--gantt", str(tmp / "big.html")])
        auto_cfg = many_roles_config(args.auto_roles, tmp / "auto.yaml")
        auto_s, auto_rc, auto_err = timed_command(["plan", str(auto_cfg), "--auto"])
    total = time.perf_counter() - started
    print(f"# fuzz run: seed {args.seed}, {total:.0f} s in all\n")
    print(
        "| inputs | mutants | not clean | over 5 s | peak RSS (MB) | slowest (s) | accepted"
        " | accepted but invalid |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in summaries:
        print(f"| {s['kind']} | {s['mutants']} | {len(s['not clean'])} | {len(s['slow'])} |"
              f" {s['peak_mb']:.0f} | {s['max_wall_s']:.2f} | {s['accepted']} |"
              f" {len(s['invalid accepted'])} |")  # fmt: skip
    print()
    print(f"- `rlplex viz` of a {lines:,}-line record: {viz_s:.2f} s (exit {viz_rc})")
    print(
        f"- `rlplex plan --auto` with {args.auto_roles} GPU roles: {auto_s:.2f} s (exit {auto_rc})"
    )
    for s in summaries:
        print(f"- slowest {s['kind']} mutant: {s['slowest']} ({s['max_wall_s']:.2f} s)")
        if s["slow"]:
            print(
                f"- {s['kind']}: {len(s['slow importing torch'])} of the {len(s['slow'])} runs"
                " over 5 s imported torch (a pipeline function that builds its stages with it)"
            )
    failed = False
    for s in summaries:
        for label, r in s["not clean"][: args.show]:
            failed = True
            print(
                f"\n## not clean: {s['kind']} {label}\n```\n"
                f"{json.dumps(r, default=str)[:3000]}\n```"
            )
        for label, wall in s["slow"][: args.show]:
            failed = True
            print(f"\n## slow: {s['kind']} {label}: {wall:.2f} s")
        for label, why in s["invalid accepted"][: args.show]:
            failed = True
            print(f"\n## accepted but invalid: {label}: {why}")
        if s["peak_mb"] >= 500:
            failed = True
    if viz_rc or auto_rc:
        print("\n", viz_err, auto_err)
    failed |= viz_s >= 10 or auto_s >= 30 or bool(viz_rc) or bool(auto_rc)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
