"""How far the in-flight loop's average is from the loop's own, now and before the cycle rule.

``rlplex.estimate.decode.simulate_in_flight`` walks an engine with in-flight weight updates
(NeMo RL's async GRPO) step after step and stops once its loop repeats. This script checks
where it stops against a long walk of the same loop: 1,680 measured steps (whole cycles of
any length from 1 to 8 steps) after the warm-up, with the stop on a repeat turned off. Two
sets of loops:

- the loops the 192-GPU NeMo RL staleness search walks (``bench/planner.py``'s row), 150
  sampled with seed 1;
- 1,200 random toy loops (seed 5): 2-6 prompt groups of 5-60 tokens, 1-6 slots, k 1-8,
  trainer turns of 0-40 s.

"before" is the rule of commit d0ce28a (max(2, k) gaps alike in a row, else a window of
6 + 2k steps after the warm-up), read from git; it is left out where git or the commit is
not at hand.

Run: ``.venv/bin/python bench/in_flight_cycles.py`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rlplex.estimate.decode as decode  # noqa: E402
import rlplex.estimate.generation as generation  # noqa: E402
from rlplex.config import load_config  # noqa: E402
from rlplex.plan import resolve_placement  # noqa: E402

BEFORE = "d0ce28a"
SEARCH = "heldout_nemorl06_qwen3_30ba3b_8off_64gen128train_h100.yaml"
LONG_STEPS = 1680


def _before() -> Any | None:
    """The decode module as it was at :data:`BEFORE`, or None."""
    try:
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BEFORE}:rlplex/estimate/decode.py"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "decode_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("decode_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _long_walk(args: tuple[Any, ...]) -> Any:
    k = max(1, int(args[3]))
    kept = decode.IN_FLIGHT_MEASURED_STEPS
    decode.IN_FLIGHT_MEASURED_STEPS = LONG_STEPS - 2 * k
    try:
        return decode.simulate_in_flight(*args, stop_on_repeat=False)
    finally:
        decode.IN_FLIGHT_MEASURED_STEPS = kept


def _off(loop: Any, ref: Any) -> float:
    """The larger relative error of the period and the decode seconds per step."""
    return max(
        abs(loop.period_s / ref.period_s - 1), abs(loop.per_step.total_s / ref.per_step.total_s - 1)
    )


def _search_loops() -> list[tuple[Any, ...]]:
    captured: list[tuple[Any, ...]] = []
    walk = decode.simulate_in_flight

    def capture(*args: Any) -> Any:
        captured.append(args)
        return walk(*args)

    generation.simulate_in_flight = capture  # type: ignore[assignment]
    try:
        resolve_placement(load_config(ROOT / "bench" / "published" / SEARCH), auto=True, top=5)
    finally:
        generation.simulate_in_flight = walk  # type: ignore[assignment]
    return random.Random(1).sample(captured, min(150, len(captured)))


def _toy_loops(module: Any) -> list[tuple[Any, ...]]:
    rng = random.Random(5)
    loops = []
    for _ in range(1200):
        k = rng.choice([1, 2, 3, 4, 6, 8])
        lengths = [rng.choice([5, 10, 20, 30, 40, 60]) + rng.random() * rng.choice([0, 1])
                   for _ in range(rng.choice([2, 3, 4, 6]))]  # fmt: skip
        slots = rng.choice([1, 2, 3, 4, 6])
        trainer_s = rng.choice([0.0, 5.0, 10.0, 20.0, 40.0, 13.7])
        sync_s = rng.choice([0.0, 1.0, 2.0])
        per_sequence_s = rng.choice([0.0, 0.1])
        costs = module.StepCosts(
            weight_bytes=lambda b: 1.0, kv_bytes_per_token=0.0, flops_per_token=0.0,
            attention_flops_per_context=0.0, bandwidth=1.0, flop_rate=1.0, floor_s=0.5,
            per_sequence_s=per_sequence_s,
        )  # fmt: skip
        groups = [module.PromptGroup((length,), length) for length in lengths]
        loops.append((groups, 0, slots, k, trainer_s, sync_s, costs))
    return loops


def _row(
    name: str, loops: list[tuple[Any, ...]], old: Any | None, old_loops: list[tuple[Any, ...]]
) -> str:
    """One table row: ``loops`` walked now and (``old_loops``, the same in the module of
    :data:`BEFORE`) before, each against its long walk."""
    now_off, before_off = [], []
    for i, args in enumerate(loops):
        ref = _long_walk(args)
        now_off.append(_off(decode.simulate_in_flight(*args), ref))
        if old is not None:
            before_off.append(_off(old.simulate_in_flight(*old_loops[i]), ref))
    cells = [f"{max(now_off):.2g}", str(sum(e > 1e-6 for e in now_off))]
    if old is not None:
        cells += [f"{max(before_off):.2g}", str(sum(e > 1e-6 for e in before_off))]
    else:
        cells += ["-", "-"]
    return f"| {len(loops):,} {name} | " + " | ".join(cells) + " |"


def main() -> None:
    old = _before()
    print("| loops | now: most off | now: off > 1e-6 | before: most off | before: off > 1e-6 |")
    print("|---|---:|---:|---:|---:|")
    search = _search_loops()  # the old module takes the same arguments (duck-typed costs)
    print(_row(f"of the 192-GPU search ({SEARCH})", search, old, search), flush=True)
    toys = _toy_loops(decode)
    old_toys = _toy_loops(old) if old is not None else []
    print(_row("random toy loops (seed 5)", toys, old, old_toys), flush=True)


if __name__ == "__main__":
    main()
