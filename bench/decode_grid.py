"""Which decode parameters fit both the RL corpus and published serving benchmarks?

Run: ``.venv/bin/python bench/decode_grid.py [--grid JSON] [--top N]``. For every
combination of the decode parameters in the grid (``efficiency.yaml`` keys;
the rest stay at their defaults) it plans the corpus of ``bench/published.py``
(with its calibrate-and-transfer check) and the serving rows of
``bench/serving.py`` whose layout the source prints, and reports the corpus'
median step error, the serving rows' median TPOT error (all, dense, MoE), and
whether the corpus targets of issue 18 hold: NeMo RL's steps within 15 %, every
pair's verdict right and speed-up within 25 %, each transfer within 15 %, the
quickstart's stages within 40 %. The held-out runs are not planned: they are
not for choosing parameters.

It answers a question, it does not change a default: docs/benchmarks.md
("Sixth pass") says what it found and why the defaults stayed.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_GRID: dict[str, list[float]] = {
    "decode": [0.6, 0.65, 0.7, 0.75, 0.8, 0.85],
    "decode_step_s": [0.001, 0.002, 0.003, 0.004],
    "allreduce_s": [1e-5, 2e-5, 3e-5],
    "decode_sequence_s": [5e-6, 1e-5, 2.5e-5, 5e-5],
}


def _module(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name[6:]}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def set_defaults(params: Mapping[str, float]) -> None:
    """Set the efficiency defaults of this process (the cached data file) to ``params``."""
    from rlplex.estimate.specs import efficiency_defaults

    eff = efficiency_defaults()
    for key, value in params.items():
        if key not in eff:
            raise KeyError(f"not an efficiency parameter: {key}")
        eff[key]["value"] = value


def score(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The corpus and serving figures under the current defaults."""
    published, serving = _module("bench_published"), _module("bench_serving")
    report = published.run(cases=published.CORPUS_CASES, sweep=False, transfers=True)
    steps = {r.id: r.step_error for r in report.cases if r.step_error is not None}
    quickstart = next(r for r in report.cases if r.id.startswith("verl-quickstart"))
    worst_stage = max(abs(p["error"]) for p in quickstart.phases.values())
    nemo = [e for case, e in steps.items() if case.startswith("nemorl")]
    speedups = [abs(p.speedup_error or 0.0) for p in report.pairs]
    transfers = [p.transfer["error"] for p in report.pairs if p.transfer]
    served = serving.summary(serving.run(rows))
    targets = (
        all(p.verdict_right for p in report.pairs)
        and max(abs(e) for e in nemo) <= 0.15
        and max(speedups) <= 0.25
        and max(abs(t) for t in transfers) <= 0.15
        and worst_stage <= 0.40
    )
    return {
        "targets_hold": targets,
        "corpus_median": statistics.median(abs(e) for e in steps.values()),
        "corpus_steps": [round(e, 3) for e in steps.values()],
        "transfers": [round(t, 3) for t in transfers],
        "serving_median": served["all"]["median_abs"],
        "serving_dense": served["dense"]["median_abs"],
        "serving_moe": served["moe"]["median_abs"],
    }


def run(grid: Mapping[str, Sequence[float]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the defaults' score, every grid point's score)."""
    from rlplex.estimate.specs import efficiency_defaults

    data = yaml.safe_load((ROOT / "bench" / "serving" / "serving_tpot.yaml").read_text())
    rows = [r for r in data["rows"] if not r.get("layout_inferred")]
    defaults = {key: efficiency_defaults()[key]["value"] for key in grid}
    baseline = {"params": defaults, **score(rows)}
    points = []
    try:
        for values in itertools.product(*grid.values()):
            params = dict(zip(grid, values, strict=True))
            set_defaults(params)
            points.append({"params": params, **score(rows)})
    finally:
        set_defaults(defaults)
    return baseline, points


def _line(point: Mapping[str, Any]) -> str:
    params = ", ".join(f"{k} {v:g}" for k, v in point["params"].items())
    return (
        f"{params}: targets {'hold' if point['targets_hold'] else 'FAIL'}; corpus median"
        f" {point['corpus_median'] * 100:.0f}%; serving median {point['serving_median'] * 100:.0f}%"
        f" (dense {point['serving_dense'] * 100:.0f}%, MoE {point['serving_moe'] * 100:.0f}%);"
        f" transfers {', '.join(f'{t * 100:+.0f}%' for t in point['transfers'])}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=json.loads, default=DEFAULT_GRID, help="JSON: key -> list")
    parser.add_argument("--top", type=int, default=10, help="grid points to print")
    parser.add_argument("--json", action="store_true", help="print every point as JSON")
    args = parser.parse_args(argv)
    baseline, points = run(args.grid)
    if args.json:
        print(json.dumps({"baseline": baseline, "points": points}, indent=2))
        return
    print("defaults:", _line(baseline))
    held = [p for p in points if p["targets_hold"]]
    held.sort(key=lambda p: (p["corpus_median"] + p["serving_median"], p["corpus_median"]))
    print(f"{len(held)} of {len(points)} grid points keep the corpus targets; the best by corpus")
    print("median + serving median:")
    for point in held[: args.top]:
        print(" ", _line(point))


if __name__ == "__main__":
    main()
