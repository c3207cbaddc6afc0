"""Does calibrating with a record's measured lengths carry to other runs better than the guess?

``calibrate`` fits physical parameters (the decode floors, the efficiencies) so that the
estimate of the recorded run matches its record. An imported config's mean response
length is rlplex's guess, half the maximum; a record of the run says what it was. Fitted
with the guess, the parameters absorb the ratio of the two and carry it to every run the
costs file is applied to. This script measures that on published NeMo RL v0.3 rows, whose
phases and mean generated tokens are both published (the held-out configs in
``bench/published/``, whose headers cite the blog post's rows):

- each source row becomes a summary record of its published ``generation`` and
  ``policy_training`` phases (``generate`` + ``reward`` and ``train``: the reward's
  estimate is taken off the generation phase, as ``bench/published.py`` does for timers
  that hold several stages) and its step, with or without its published mean response
  length (NeMo RL's ``mean_gen_tokens_per_sample``, written as a summary record's
  ``response_length: {mean: ...}``);
- the source config is read as an importer would give it: its mean response length set to
  half its maximum;
- calibrated on that record, the costs predict the target row (its config as written,
  with its published mean) and are compared with the target's published phases.

Run: ``.venv/bin/python bench/record_lengths.py [--json]`` (about a minute).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "bench" / "published"


@dataclass(frozen=True)
class Row:
    """A published NeMo RL v0.3 row (the figures of bench/published.py's case)."""

    label: str
    config: str
    step_s: float
    generation_s: float
    training_s: float


_FILE = "heldout_nemorl03_{}_onpolicy_{}xh100.yaml"
ROWS = {
    "8b-megatron": Row("Llama-3.1-8B Megatron, 8 H100", _FILE.format("llama31_8b", 8),
                       112.0, 58.0, 28.0),
    "8b-dtensor": Row("Llama-3.1-8B DTensor, 8 H100", _FILE.format("llama31_8b_dtensor", 8),
                      122.0, 57.0, 38.0),
    "70b-megatron": Row("Llama-3.1-70B Megatron, 64 H100", _FILE.format("llama31_70b", 64),
                        147.0, 84.0, 28.0),
    "70b-dtensor": Row("Llama-3.1-70B DTensor, 64 H100",
                       _FILE.format("llama31_70b_dtensor", 64), 230.0, 82.0, 97.0),
    "70b-16k": Row("Llama-3.3-70B 16K, 128 H100", _FILE.format("llama33_70b_16k", 128),
                   445.0, 287.0, 64.0),
}  # fmt: skip
"""Each row's step, generation and policy_training seconds, as bench/published.py has them."""
TRANSFERS = (
    ("8b-megatron", "8b-dtensor"),
    ("8b-dtensor", "8b-megatron"),
    ("70b-megatron", "70b-dtensor"),
    ("70b-dtensor", "70b-megatron"),
    ("70b-megatron", "70b-16k"),
    ("70b-16k", "70b-megatron"),
)


def _generation_s(config: Any) -> float:
    """The estimate of NeMo RL's generation phase: generate and reward."""
    from rlplex.estimate.estimator import estimate_config

    stages = estimate_config(config).stages
    return sum(float(stages[n].seconds or 0.0) for n in ("generate", "reward") if n in stages)


def _record(source: Row, config: Any, with_lengths: bool) -> dict[str, Any]:
    from rlplex.estimate.estimator import estimate_config

    reward = float(estimate_config(config).stages["reward"].seconds or 0.0)
    record: dict[str, Any] = {
        "framework": "rlplex",
        "timing_s": {
            "generate": round(source.generation_s - reward, 6),
            "train": source.training_s,
            "step": source.step_s,
        },
    }
    if with_lengths:
        assert config.workload is not None
        record["response_length"] = {"mean": config.workload.response_tokens.mean}
    return record


def transfer(source_key: str, target_key: str) -> dict[str, Any]:
    import yaml

    from rlplex.config import load_config
    from rlplex.plan import make_plan
    from rlplex.reports.calibrate import calibrate

    source, target = ROWS[source_key], ROWS[target_key]
    stated = load_config(CONFIGS / source.config)
    assert stated.workload is not None
    guess = stated.workload.response_tokens.max / 2
    out: dict[str, Any] = {
        "source": source.label, "target": target.label,
        "source_mean": stated.workload.response_tokens.mean, "guessed_mean": guess,
        "published_generation_s": target.generation_s, "published_step_s": target.step_s,
    }  # fmt: skip
    for label, with_lengths in (("record_lengths", True), ("guess", False)):
        with tempfile.TemporaryDirectory() as tmp:
            record = Path(tmp) / "summary.yaml"
            record.write_text(yaml.safe_dump(_record(source, stated, with_lengths)))
            # The config as an importer gives it: the guess is the file's own value (a --set
            # would be the user's, which a record's lengths never replace).
            data = yaml.safe_load((CONFIGS / source.config).read_text())
            data["workload"]["response_tokens"]["mean"] = guess
            guessed = Path(tmp) / source.config
            guessed.write_text(yaml.safe_dump(data))
            fit, doc = calibrate(record, guessed)
            notes = [w for w in fit.warnings if w.startswith("the record's lengths")]
            costs = Path(tmp) / "costs.yaml"
            costs.write_text(yaml.safe_dump(doc))
            predicted = load_config(CONFIGS / target.config, costs=costs)
            generation = _generation_s(predicted)
            step = make_plan(predicted).period_s
        out[label] = {
            "generation_s": generation,
            "generation_error": generation / target.generation_s - 1,
            "step_s": step,
            "step_error": step / target.step_s - 1,
            "decode_step_s": doc["efficiency"].get("decode_step_s"),
            "notes": notes,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = [transfer(s, t) for s, t in TRANSFERS]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("| calibrated on (mean: published / guessed) | predicted | generation published |"
          " with the record's lengths | with the guess | step published | with the record's"
          " lengths | with the guess |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        a, b = r["record_lengths"], r["guess"]
        print(
            f"| {r['source']} ({r['source_mean']:g} / {r['guessed_mean']:g}) | {r['target']} |"
            f" {r['published_generation_s']:.0f} s | {a['generation_s']:.1f} s"
            f" ({a['generation_error']:+.0%}) | {b['generation_s']:.1f} s"
            f" ({b['generation_error']:+.0%}) | {r['published_step_s']:.0f} s |"
            f" {a['step_s']:.1f} s ({a['step_error']:+.0%}) | {b['step_s']:.1f} s"
            f" ({b['step_error']:+.0%}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
