"""``rlplex dag``: --format and --out's suffix agree or are refused; --config-format is named
as such wherever --format means another file's format."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke, one_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RECORDS = EXAMPLES / "records"


@pytest.mark.parametrize(
    ("name", "fmt", "said"),
    [
        ("x.dot", "mermaid", "a .dot file is DOT text (give --format dot, or no --format)"),
        ("x.gv", "mermaid", "a .gv file is DOT text (give --format dot, or no --format)"),
        ("x.mmd", "dot", "a .mmd file is Mermaid text (give --format mermaid, or no --format)"),
        ("x.svg", "mermaid", "a .svg file is drawn from DOT (give --format dot, or no --format)"),
    ],
)
def test_dag_format_that_contradicts_the_out_suffix_is_refused(
    name: str, fmt: str, said: str, tmp_path: Path
) -> None:
    out = tmp_path / name
    result = invoke("dag", EXAMPLES / "ppo.yaml", "--out", out, "--format", fmt)
    one_line(result, f"error: --format: does not match --out {out}: {said} (got '{fmt}')")
    assert not out.exists()


def test_dag_out_suffix_decides_without_format(tmp_path: Path) -> None:
    for name, head in (("x.dot", "digraph pipeline {"), ("x.mmd", "flowchart LR")):
        result = invoke("dag", EXAMPLES / "ppo.yaml", "--out", tmp_path / name)
        assert result.exit_code == 0, result.output
        assert (tmp_path / name).read_text().startswith(head)
    text = tmp_path / "x.txt"  # a .txt takes --format
    assert invoke("dag", EXAMPLES / "ppo.yaml", "--out", text, "--format", "dot").exit_code == 0
    assert text.read_text().startswith("digraph pipeline {")
    assert invoke("dag", EXAMPLES / "ppo.yaml").stdout.startswith("flowchart LR")


BAD = "unknown format (expected one of: native, roll, rlinf, verl, nemo_rl, openrlhf) (got 'foo')"
RECORD = (RECORDS / "verl_quickstart.jsonl", "-c", RECORDS / "verl_quickstart.yaml")


@pytest.mark.parametrize(
    "args",
    [
        ("dag", EXAMPLES / "roll.yaml"),
        ("replay", *RECORD),
        ("whatif", *RECORD),
        ("calibrate", *RECORD),
    ],
    ids=["dag", "replay", "whatif", "calibrate"],
)
def test_a_bad_config_format_names_config_format(args) -> None:
    one_line(invoke(*args, "--config-format", "foo"), f"error: --config-format: {BAD}")


def test_a_bad_format_still_names_format() -> None:
    one_line(invoke("show", EXAMPLES / "roll.yaml", "--format", "foo"), f"error: --format: {BAD}")
