"""``rlplex estimate`` and ``whatif``: options that contradict or repeat are refused, not
silently dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke, one_line

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RECORDS = EXAMPLES / "records"


A, B = "workload.response_tokens.mean=256,512", "cluster.gpu=h100,h20"
KEY = "workload.response_tokens.mean"
C = f"{KEY}=256,512,1024"


@pytest.mark.parametrize(
    "args",
    [
        ("estimate", EXAMPLES / "estimate_7b.yaml"),
        ("whatif", RECORDS / "verl_quickstart.jsonl", "-c", RECORDS / "verl_quickstart.yaml"),
    ],
    ids=["estimate", "whatif"],
)
def test_a_second_sweep_is_refused_naming_both(args) -> None:
    result = invoke(*args, "--sweep", A, "--sweep", B)
    one_line(result, f"error: --sweep: one --sweep at a time, got '{A}' and '{B}'")


def test_one_sweep_still_sweeps() -> None:
    result = invoke("estimate", EXAMPLES / "estimate_7b.yaml", "--sweep", B)
    assert result.exit_code == 0, result.output
    # The title wraps with the config's path (a longer checkout path, a narrower table).
    assert "planned step vs cluster.gpu" in " ".join(result.stdout.split())


def test_list_presets_refuses_a_config_it_would_ignore() -> None:
    result = invoke("estimate", "--list-presets", EXAMPLES / "ppo.yaml")
    one_line(result, "error: --list-presets: lists the presets and reads no config")
    assert invoke("estimate", "--list-presets").exit_code == 0
    # nor the options it would ignore
    for extra in (("--set", "model=x"), ("--sweep", B), ("--json",)):
        result = invoke("estimate", "--list-presets", *extra)
        one_line(result, f"error: --list-presets: lists the presets and reads no config: drop"
                         f" {extra[0]} or --list-presets")  # fmt: skip


def test_sweep_png_needs_a_png_name(tmp_path: Path) -> None:
    page = tmp_path / "sweep.html"
    result = invoke("estimate", EXAMPLES / "estimate_7b.yaml", "--sweep", B, "--png", page)
    one_line(result, "error: --png: a PNG chart's file name must end in .png")
    assert not page.exists()


def test_a_sweep_of_few_values_is_a_column_per_value_and_no_number_is_cut() -> None:
    # Rows per value, a column per stage, was wider than 80 columns: rich cut 240.84 to 24….
    result = invoke("estimate", EXAMPLES / "estimate_7b.yaml", "--sweep", C)
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "seconds" in line)
    assert header.split("┃")[2:5] == ["    256 ", "    512 ", "   1024 "]
    step = next(line for line in result.stdout.splitlines() if "step (period)" in line)
    assert [c.strip() for c in step.split("│")[2:5]] == ["130.50", "183.39", "240.84"]
    assert "…" not in result.stdout


def test_a_sweep_of_more_values_than_stages_is_a_row_per_value() -> None:
    values = ",".join(str(v) for v in range(100, 1000, 100))  # 9 values, 7 stages
    result = invoke("estimate", EXAMPLES / "estimate_7b.yaml", "--sweep", f"{KEY}={values}")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 9 and rows[0].split("│")[1].strip() == "100"


def test_a_sweep_where_no_value_loads_prints_why_and_exits_2() -> None:
    result = invoke("estimate", EXAMPLES / "estimate_7b.yaml", "--sweep", f"{KEY}=5000,6000")
    assert result.exit_code == 2, result.output
    assert "mean 5000 exceeds max 1024" in result.stdout
    assert "error: --sweep: no swept value loads" in " ".join(result.stderr.split())
    assert "Traceback" not in result.output


def test_whatif_sweep_says_where_the_best_did_not_run() -> None:
    alt = (
        "4gpu: cluster.gpus_per_node=4 roles.actor_infer.devices=0-3"
        " roles.actor_train.devices=0-3 roles.critic.devices=0-3 roles.reference.devices=0-3"
    )
    args = ("whatif", RECORDS / "verl_quickstart.jsonl", "-c")
    result = invoke(*args, EXAMPLES / "estimate_verl_quickstart.yaml", "--alt", alt,
                    "--sweep", f"{KEY}=50,500")  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "4gpu, is best at every value that ran (not at 500: see above)" in text
    assert "changes over the swept range" not in text
    nothing = invoke(*args, RECORDS / "verl_quickstart.yaml", "--sweep", f"{KEY}=100,200")
    assert nothing.exit_code == 2, nothing.output
    assert "no swept value loads" in nothing.stderr
    assert "changes over the swept range" not in nothing.stdout


def test_a_stage_of_a_share_says_so() -> None:
    """A log-prob pass over a share of the step's samples prints the share before its
    tokens; a whole-step pass prints none."""
    result = invoke(
        "estimate", EXAMPLES / "estimate_7b.yaml", "--set", "pipeline.stages.ref_logprob.share=0.25"
    )
    assert result.exit_code == 0, result.output
    lines = {line.split(":", 1)[0]: line for line in result.output.splitlines() if ": " in line}
    assert lines["ref_logprob"].startswith(
        "ref_logprob: 25% of the step's samples, 983,040 tokens on 8 GPU(s)"
    )
    assert lines["old_logprob"].startswith("old_logprob: 3,932,160 tokens on 8 GPU(s)")
