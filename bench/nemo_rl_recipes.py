"""The held-out NeMo RL runs planned from the recipes their tables cite, through the importer.

Run: ``.venv/bin/python bench/nemo_rl_recipes.py NEMO_RL_GIT [--json]``, where
``NEMO_RL_GIT`` is a clone of NVIDIA-NeMo/RL (a bare one works: ``git --git-dir``). Each
held-out NeMo RL config in ``bench/published/`` names, in its header, the recipe its row was
run with and the commit (``Recipe: examples/configs/....yaml ... @ REF``). This script takes
that recipe at that commit (``git archive REF examples/configs``), reads it with rlplex's
NeMo RL importer (``--format nemo_rl``) and plans it with only what a recipe cannot say set
by ``--set``, each from the hand-written config: the GPU (``cluster.gpu``), the model where
the recipe names none rlplex knows, the lengths (``workload.prompt_tokens``,
``response_tokens``) and the controller's per-rank sends of releases before v0.7.

It prints, per run, the planned step of the hand-written config and of the imported recipe,
how far apart they are, the stages that differ by more than 5 %, and each against the
published step; then the median |difference| and the median |error| of the imported plans.
A row whose header names no recipe (NeMo RL had none for it), or whose recipe does not plan
alone (the row's command overrode it: NeMo RL v0.3's blog runs), is skipped, saying why.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published import CASES, CONFIGS

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.reports.sweep import plan_point
from rlplex.resources.yaml_io import load_yaml_file

_RECIPE = re.compile(r"(examples/configs/[\w./-]+\.yaml)")
_REF = re.compile(r"@ ([0-9a-f]{7,40}|v\d+\.\d+\.\d+)")


def recipe_of(config: Path) -> tuple[str, str] | None:
    """(recipe path, git ref) a held-out config's header names, or None ("Recipe: none")."""
    lines = config.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if "Recipe:" in line), None)
    if start is None or "Recipe: none" in lines[start]:
        return None
    paragraph = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("#   "):
            break
        paragraph.append(line)
    text = " ".join(paragraph)
    path, ref = _RECIPE.search(text), _REF.search(text)
    if path is None or ref is None:
        return None
    return path.group(1), ref.group(1)


def overrides_from(config: Path) -> list[str]:
    """What a recipe cannot say, from the hand-written config."""
    data = load_yaml_file(config)
    load = data["workload"]
    out = [f"cluster.gpu={data['cluster']['gpu']}", f"model={data['model']}"]
    for key in ("prompt_tokens", "response_tokens"):
        for field, value in load[key].items():
            out.append(f"workload.{key}.{field}={value}")
    if (load.get("controller") or {}).get("per_rank"):
        out.append("workload.controller.per_rank=true")
    return out


def extract(git_dir: Path, ref: str, cache: dict[str, Path], root: Path) -> Path:
    if ref not in cache:
        target = root / ref
        target.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "--git-dir", str(git_dir), "archive", ref, "examples/configs"],
            check=True, capture_output=True,
        )  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
        cache[ref] = target
    return cache[ref]


def run(git_dir: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cache: dict[str, Path] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if not (case.heldout and case.config.startswith("heldout_nemorl")):
                continue
            config = CONFIGS / case.config
            named = recipe_of(config)
            row: dict[str, Any] = {"id": case.id, "published_s": case.step_s}
            if named is None:
                rows.append({**row, "skipped": "its header names no NeMo RL recipe"})
                continue
            path, ref = named
            tree = extract(git_dir, ref, cache, Path(tmp))
            hand, hand_stages = plan_point(load_config(config))
            try:
                imported = load_config(
                    tree / path, overrides=overrides_from(config), format="nemo_rl"
                )
                step, stages = plan_point(imported)
            except ConfigError as exc:  # the row ran with command-line overrides of the recipe
                rows.append({**row, "recipe": f"{path} @ {ref}",
                             "skipped": f"the recipe alone does not plan: {exc}"})  # fmt: skip
                continue
            differ = {
                name: (round(stages.get(name) or 0.0, 2), round(hand_stages.get(name) or 0.0, 2))
                for name in sorted(set(stages) | set(hand_stages))
                if abs((stages.get(name) or 0.0) - (hand_stages.get(name) or 0.0))
                > 0.05 * max(abs(hand_stages.get(name) or 0.0), 1.0)
            }
            rows.append({
                **row, "recipe": f"{path} @ {ref}", "hand_s": hand, "imported_s": step,
                "difference": step / hand - 1.0, "stages_differ": differ,
                "imported_error": step / case.step_s - 1.0 if case.step_s else None,
                "hand_error": hand / case.step_s - 1.0 if case.step_s else None,
            })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path, help="a clone of NVIDIA-NeMo/RL (bare or not)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    git_dir = args.git_dir / ".git" if (args.git_dir / ".git").is_dir() else args.git_dir
    rows = run(git_dir)
    done = [r for r in rows if "skipped" not in r]
    summary = {
        "planned": len(done),
        "skipped": len(rows) - len(done),
        "median_abs_difference": statistics.median(abs(r["difference"]) for r in done),
        "median_abs_imported_error": statistics.median(
            abs(r["imported_error"]) for r in done if r["imported_error"] is not None
        ),
        "median_abs_hand_error": statistics.median(
            abs(r["hand_error"]) for r in done if r["hand_error"] is not None
        ),
    }
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="held-out NeMo RL runs: hand-written config vs the imported recipe")
    for col in ("case", "recipe", "hand s", "imported s", "difference", "published s",
                "imported error", "stages that differ (imported, hand)"):  # fmt: skip
        table.add_column(col, overflow="fold")
    for r in rows:
        if "skipped" in r:
            table.add_row(r["id"], r.get("recipe", ""), *[""] * 5, f"skipped: {r['skipped']}")
            continue
        err = r["imported_error"]
        table.add_row(
            r["id"], r["recipe"], f"{r['hand_s']:.1f}", f"{r['imported_s']:.1f}",
            f"{r['difference']:+.1%}", f"{r['published_s']:.1f}",
            "-" if err is None else f"{err:+.0%}",
            ", ".join(f"{k} {a}/{b}" for k, (a, b) in r["stages_differ"].items()),
        )  # fmt: skip
    console = Console(width=200)
    console.print(table)
    console.print(
        f"{summary['planned']} planned from their recipes ({summary['skipped']} skipped): median"
        f" |imported - hand-written| {summary['median_abs_difference']:.1%}; median |error| vs"
        f" published: imported {summary['median_abs_imported_error']:.1%}, hand-written"
        f" {summary['median_abs_hand_error']:.1%}"
    )


if __name__ == "__main__":
    main()
