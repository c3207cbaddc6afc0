"""Import every config file under some folders and report, per framework, what rlplex made of them.

A user with a folder of ROLL, RLinf, verl or NeMo RL configs can check all of them at
once: each ``*.yaml`` / ``*.yml`` file is read with :func:`rlplex.config.load_config`
(the framework detected per file, or given with ``--format``), and each ``*.sh`` /
``*.bash`` file as a launch script (framework ``verl script``, or ``openrlhf script`` for
one that runs ``openrlhf.cli.*``), and counted as

- ``accepted``: read into roles, devices and a pipeline;
- ``not RL``: refused because it is not an RL step (SFT, DPO, evaluation,
  generation, data collection ...), saying what it is;
- ``refused``: refused for another reason (the reason is grouped below);
- ``unrecognised``: not a ROLL, RLinf, verl or NeMo RL config (a ``defaults:`` fragment
  such as ``rollout/rollout.yaml``, another tool's file);
- ``crashed``: anything but a clean ``ConfigError`` (should be 0).

With ``--plan``, every accepted file is also planned and the plan verified
(``rlplex plan FILE --verify``); a file whose plan fails counts as
``plan failed``, with the reason grouped like the refusals.

Usage::

    python bench/import_corpus.py FOLDER [FOLDER ...] [--format roll|rlinf|verl|nemo_rl]
        [--csv FILE] [--json FILE] [--top N] [--plan] [--set KEY=VALUE ...]
        [--env NAME=VALUE ...]

``--env`` gives the launch scripts (not the YAML files) the variables they start with, as
``rlplex ... --env`` does (``DEVICE=gpu`` for verl's ``case "${DEVICE}"`` scripts).

It prints a Markdown table per framework, then the refusal reasons grouped
(numbers and rank lists in messages are folded so that equal reasons
group), and optionally writes one row per file (CSV or JSON) with the roles
read: ``name:GPUs/GPUs-per-worker``. Hydra ``defaults:`` are composed relative
to each file, so run it from anywhere.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from rlplex.config import detect_format, load_config
from rlplex.errors import ConfigError
from rlplex.resources.importers.launch_script import is_launch_script
from rlplex.resources.yaml_io import load_yaml_file

STATUSES = ("accepted", "not RL", "refused", "unrecognised", "crashed", "plan failed")


SCRIPT = "verl script"
"""The framework column of a launch script (``*.sh``: a verl run's command line)."""
OPENRLHF_SCRIPT = "openrlhf script"
"""The framework column of a launch script running OpenRLHF (``openrlhf.cli.*``)."""


def _script_framework(path: Path) -> str:
    """``openrlhf script`` for a script whose first trainer command is OpenRLHF's, else
    ``verl script`` (also for one that runs neither: counted as unrecognised)."""
    try:
        from rlplex.resources.importers.launch_script import is_openrlhf_module, script_launch
    except ImportError:  # an rlplex before the OpenRLHF importer (to measure a baseline)
        return SCRIPT
    try:
        launch = script_launch(path)
    except ConfigError:
        return SCRIPT
    return OPENRLHF_SCRIPT if is_openrlhf_module(launch.module) else SCRIPT


def _framework(path: Path, given: str | None) -> str:
    """The format the file is read as: given, else detected (``native`` = unrecognised)."""
    if is_launch_script(path):
        return _script_framework(path)
    if given:
        return given
    try:
        data = load_yaml_file(path)
    except ConfigError:
        return "native"
    if not isinstance(data, dict):
        return "native"
    fmt = detect_format(data)
    if fmt == "native" and "defaults" in data:
        try:
            from rlplex.resources.importers.compose import compose
        except ImportError:  # an rlplex before Hydra composition (to measure a baseline)
            return fmt
        try:
            fmt = detect_format(compose(data, str(path)).data)
        except ConfigError:
            return "native"
    return fmt


def _reason(message: str, path: Path) -> str:
    """A refusal message with the file and the specific values folded away, for grouping."""
    text = message.replace(f"{path}: ", "", 1).replace(str(path), "FILE")
    text = re.sub(r" \(got .*\)$", "", text)
    text = re.sub(r"\[[0-9, ]*\]", "[…]", text)
    return re.sub(r"\b[0-9]+\b", "N", text)


def check_file(
    path: Path,
    given: str | None,
    plan: bool = False,
    overrides: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Read one file with ``overrides`` (and plan it, with ``plan``); a row with its status
    and what was read. ``env``: the variables a launch script starts with (``--env``)."""
    fmt = _framework(path, given)
    row: dict[str, Any] = {"file": str(path), "framework": fmt, "status": "", "reason": ""}
    if fmt == "native":
        row["framework"] = "unrecognised"
        row["status"] = "unrecognised"
        return row
    try:
        script = fmt in (SCRIPT, OPENRLHF_SCRIPT)
        given_env = {"env": env} if script and env else {}  # older rlplex: no env parameter
        cfg = load_config(path, format=None if script else fmt, overrides=overrides, **given_env)
    except ConfigError as exc:
        message = str(exc)
        row["status"] = "not RL" if "not an RL training step" in message else "refused"
        if fmt == SCRIPT and "runs no verl trainer" in message:
            row["status"] = "unrecognised"  # a shell script that starts no verl run
        row["reason"] = _reason(message, path)
        return row
    except Exception as exc:  # the point of the corpus check: there must be none
        row["status"] = "crashed"
        row["reason"] = f"{type(exc).__name__}: {exc}"
        return row
    row["status"] = "accepted"
    row["nodes"] = cfg.cluster.nodes
    row["gpus_per_node"] = cfg.cluster.gpus_per_node
    row["mode"] = cfg.pipeline.mode
    row["max_staleness"] = cfg.pipeline.max_staleness
    row["roles"] = " ".join(
        f"{n}:{len(r.devices)}/{r.num_gpus_per_worker}" if r.devices else f"{n}:cpu{r.world_size}"
        for n, r in cfg.roles.items()
    )
    row["model"] = cfg.model or ""
    row["workload"] = cfg.workload is not None
    if plan:
        from rlplex.plan.planner import make_plan
        from rlplex.plan.verify import verify_plan

        try:
            result = make_plan(cfg)
            verify_plan(result, cfg)
            row["period_s"] = round(result.period_s, 3)
        except Exception as exc:  # a planner error or a broken rule: report, never stop
            row["status"] = "plan failed"
            row["reason"] = _reason(f"{type(exc).__name__}: {exc}", path)
    return row


def files_under(folders: list[Path]) -> list[Path]:
    found: list[Path] = []
    for folder in folders:
        if folder.is_file():
            found.append(folder)
            continue
        found.extend(
            sorted(
                p for p in folder.rglob("*")
                if p.suffix in (".yaml", ".yml") or is_launch_script(p)
            )
        )  # fmt: skip
    return found


def summary(rows: list[dict[str, Any]], top: int) -> str:
    """The Markdown report: counts per framework, then grouped reasons."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    for row in rows:
        counts[row["framework"]][row["status"]] += 1
        if row["status"] in ("refused", "not RL", "crashed", "plan failed"):
            reasons[row["framework"]][f"{row['status']}: {row['reason']}"] += 1
    lines = ["| framework | files | " + " | ".join(STATUSES) + " |"]
    lines.append("|---|---:|" + "---:|" * len(STATUSES))
    for fmt in sorted(counts):
        total = sum(counts[fmt].values())
        cells = " | ".join(str(counts[fmt][s]) for s in STATUSES)
        lines.append(f"| {fmt} | {total} | {cells} |")
    total = Counter[str]()
    for c in counts.values():
        total.update(c)
    cells = " | ".join(str(total[s]) for s in STATUSES)
    lines.append(f"| **all** | {sum(total.values())} | {cells} |")
    for fmt in sorted(reasons):
        lines.append("")
        lines.append(f"**{fmt}**: refusals grouped (count, reason)")
        lines.append("")
        for reason, n in reasons[fmt].most_common(top):
            lines.append(f"- {n} × {reason}")
        rest = sum(reasons[fmt].values()) - sum(n for _, n in reasons[fmt].most_common(top))
        if rest:
            lines.append(f"- {rest} × (other reasons)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="folders (or files) of configs")
    parser.add_argument(
        "--format", choices=["roll", "rlinf", "verl", "nemo_rl"], help="read every file as"
    )
    parser.add_argument("--csv", type=Path, help="write one row per file to this CSV file")
    parser.add_argument("--json", type=Path, help="write one object per file to this JSON file")
    parser.add_argument("--top", type=int, default=15, help="reasons to list per framework")
    parser.add_argument("--plan", action="store_true", help="also plan and verify accepted files")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
        help="an override for every file, as rlplex's --set (e.g. cluster.gpu=h100: estimate)",
    )  # fmt: skip
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="a variable every launch script starts with, as rlplex's --env (e.g. DEVICE=gpu)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not f.exists()]
    if missing:
        print(f"no such folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    env: dict[str, str] = {}
    if args.env:
        from rlplex.config.loading import parse_env

        try:
            env = parse_env(args.env)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    rows = [
        check_file(path, args.format, args.plan, tuple(args.overrides), env)
        for path in files_under(args.folders)
    ]
    print(summary(rows, args.top))
    if args.csv:
        fields = sorted({k for row in rows for k in row}, key=lambda k: (k != "file", k))
        with args.csv.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 1 if any(row["status"] == "crashed" for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
