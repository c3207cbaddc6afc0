"""``rlplex compare`` and the view options: contradictions refused, each file's suffix checked
(--gantt .html, --trace .json, as --png .png)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke, one_line, runner

from rlplex.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_compare_refuses_b_and_baseline_together() -> None:
    result = invoke("compare", EXAMPLES / "ppo.yaml", EXAMPLES / "grpo.yaml",
                    "--baseline", "sequential")  # fmt: skip
    one_line(result, "error: --baseline: give a second timeline B or --baseline, not both")
    one_line(invoke("compare", EXAMPLES / "ppo.yaml"), "error: B: give either a second timeline B")


GANTT = "an HTML page's file name must end in .html or .htm"
TRACE = "a Perfetto trace's file name must end in .json"


@pytest.mark.parametrize(
    ("args", "option", "name", "said"),
    [
        (("plan", EXAMPLES / "ppo.yaml"), "--gantt", "g.png", GANTT),
        (("plan", EXAMPLES / "ppo.yaml"), "--trace", "t.png", TRACE),
        (("simulate", EXAMPLES / "ppo.yaml"), "--trace", "t.html", TRACE),
        (("viz", EXAMPLES / "ppo.yaml"), "--gantt", "g.json", GANTT),
        (("viz", EXAMPLES / "ppo.yaml"), "--trace", "t.png", TRACE),
        (("compare", EXAMPLES / "ppo.yaml", "--baseline", "sequential"), "--gantt", "g.png", GANTT),
        (("size", EXAMPLES / "estimate_7b.yaml", "--gpus", "8"), "--html", "s.png", GANTT),
        (
            ("size", EXAMPLES / "estimate_7b.yaml", "--gpus", "8"),
            "--png",
            "s.html",
            "a PNG chart's file name must end in .png",
        ),
    ],
    ids=lambda v: str(v)[-24:],
)
def test_each_view_needs_its_own_suffix(args, option, name, said, tmp_path: Path) -> None:
    target = tmp_path / name
    one_line(invoke(*args, option, target), f"error: {option}: {said} (got '{target}')")
    assert not target.exists()


def test_htm_and_upper_case_suffixes_are_taken(tmp_path: Path) -> None:
    result = invoke("plan", EXAMPLES / "ppo.yaml", "--gantt", tmp_path / "g.HTM",
                    "--trace", tmp_path / "t.JSON")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (tmp_path / "g.HTM").exists() and (tmp_path / "t.JSON").exists()


@pytest.mark.parametrize("command", ["replay", "whatif"])
def test_replay_and_whatif_check_the_gantt_suffix_before_any_work(command: str) -> None:
    """A wrong --gantt suffix is said before the record is read (it was said after the
    replay or every alternative had been computed)."""
    result = runner.invoke(
        app, [command, "no-such-record.jsonl", "-c", str(EXAMPLES / "grpo.yaml"),
              "--gantt", "out.png"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--gantt" in result.output and "no-such-record" not in result.output
