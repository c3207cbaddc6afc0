"""One set of numbers: every view of one analysis shows the same figures (issue 13)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.reports.records import planned_timeline

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "examples" / "records"
VERL = RECORDS / "verl_quickstart.jsonl"
VERL_CONFIG = RECORDS / "verl_quickstart.yaml"
SPLIT = (
    "cluster.nodes=2 cluster.gpus_per_node=8 roles.actor_infer.devices=0-3"
    " roles.actor_train.devices=4-15 roles.reference.devices=4-15 roles.critic.devices=4-15"
)

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def rlplex(*args: object) -> subprocess.CompletedProcess[str]:
    """The real entry point (``main``), as a user's shell runs it."""
    return subprocess.run(
        [sys.executable, "-m", "rlplex.cli", *map(str, args)],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip


def test_whatif_gantt_shows_the_tables_periods(tmp_path: Path) -> None:
    """Defect 2: the chart showed 68.45 s / 5.17 s / 13.25x against the table's figures."""
    html = tmp_path / "w.html"
    args = ["whatif", VERL, "-c", VERL_CONFIG, "--alt", f"4/12 async k=1: {SPLIT}"
            " pipeline.mode=async pipeline.max_staleness=1"]  # fmt: skip
    table = json.loads(invoke(*args, "--json").stdout)
    periods = {a["label"]: a["period_s"] for a in table["alternatives"]}
    result = invoke(*args, "--gantt", html)
    assert result.exit_code == 0, result.output
    text = html.read_text()
    diff = re.search(r"period as recorded ([\d.]+) s, 4/12 async k=1 ([\d.]+) s", text)
    assert diff is not None
    assert float(diff.group(1)) == pytest.approx(periods["as recorded"], abs=0.005)
    assert float(diff.group(2)) == pytest.approx(periods["4/12 async k=1"], abs=0.005)
    assert "gap -" not in text  # no period below a bound that does not apply to a replay


def test_whatif_page_shows_every_alternative_with_the_json_figures(tmp_path: Path) -> None:
    """Issue 21 item 6: the page showed the recorded run and the best alternative only."""
    from html.parser import HTMLParser

    from rlplex.viz.compare import ALTERNATIVES_JSON_ID

    page = tmp_path / "w.html"
    args = ["whatif", VERL, "-c", VERL_CONFIG,
            "--alt", f"4/12 sync: {SPLIT}",
            "--alt", f"4/12 async k=1: {SPLIT} pipeline.mode=async pipeline.max_staleness=1",
            "--alt", "huge: pipeline.stages.generate.memory_gb=60"]  # fmt: skip
    printed = json.loads(invoke(*args, "--json").stdout)
    result = invoke(*args, "--gantt", page)
    assert result.exit_code == 0, result.output
    assert "(every alternative, best first)" in " ".join(result.stdout.split())

    class Page(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[dict[str, str | None]] = []
            self.cells: list[list[str]] = []
            self.headers: list[str] = []
            self.embedded = ""
            self._in: str | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "tr" and "data-label" in a:
                self.rows.append(a)
                self.cells.append([])
                self._in = "row"
            elif tag == "td" and self._in == "row":
                self.cells[-1].append("")
            elif tag == "script" and a.get("id") == ALTERNATIVES_JSON_ID:
                self._in = "json"
            elif tag == "h2":
                self._in = "h2"

        def handle_endtag(self, tag: str) -> None:
            if tag in ("tr", "script", "h2"):
                self._in = None

        def handle_data(self, data: str) -> None:
            if self._in == "row" and self.cells[-1]:
                self.cells[-1][-1] += data
            elif self._in == "json":
                self.embedded += data
            elif self._in == "h2":
                self.headers.append(data)

    parsed = Page()
    parsed.feed(page.read_text())
    # The page carries the very object --json prints, and a row for each alternative in it.
    assert json.loads(parsed.embedded) == printed
    alts = printed["alternatives"]
    assert len(alts) == 4 and [r["data-label"] for r in parsed.rows] == [a["label"] for a in alts]
    for row, cells, alt in zip(parsed.rows, parsed.cells, alts, strict=True):
        if alt["period_s"] is None:  # the one that cannot run: its reason, no figures
            assert alt["label"] == "huge" and row["data-period-s"] == ""
            assert cells[2] == "-" and "needs 92 GB per GPU" in cells[5]
            continue
        assert float(row["data-period-s"]) == alt["period_s"]
        assert float(row["data-speedup"]) == alt["speedup"]
        assert cells[2] == f"{alt['period_s']:.2f}"
        assert cells[3] == f"{alt['speedup']:.2f}x"
    # A panel for every alternative that runs, best first, headed by the same period.
    runs = [a for a in alts if a["period_s"] is not None]
    assert parsed.headers == [a["label"] for a in runs]
    headers = re.findall(r'<div class="header"><div>period <b>([\d.]+) s<', page.read_text())
    assert headers == [f"{a['period_s']:.2f}" for a in runs]


def test_dag_out_refuses_a_picture_type_it_cannot_write(tmp_path: Path) -> None:
    """Defect 6: --out d.gif got DOT text and exit 0."""
    out = tmp_path / "d.gif"
    result = invoke("dag", ROOT / "examples" / "grpo.yaml", "--format", "dot", "--out", out)
    assert result.exit_code == 2
    assert "unknown DAG picture type '.gif'" in result.output
    assert not out.exists()


def test_a_usage_error_is_one_line_with_exit_2() -> None:
    """Defect 11: --steps 0 printed a five-line usage box."""
    proc = rlplex("simulate", "examples/grpo.yaml", "--steps", "0")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "--steps" in lines[0]
    assert "Traceback" not in proc.stderr


def test_fit_from_at_the_same_gpu_count_says_why_nothing_was_fitted() -> None:
    """Defect 12: --fit-from with a record at the same GPU count fitted nothing, silently."""
    result = invoke("whatif", VERL, "-c", VERL_CONFIG, "--alt", f"split: {SPLIT}",
                    "--fit-from", f"{VERL}={VERL_CONFIG}")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "generate: not fitted: all 2 records have it on 1 GPU" in result.output


def test_compare_puts_a_rehearsal_back_on_the_plans_time_scale(tmp_path: Path) -> None:
    """Defect 3: compare ignored a rehearsal's time_scale ("97.85x as fast")."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan
    from rlplex.reports.records import load_timeline
    from rlplex.sim import simulate

    cfg = load_config(ROOT / "examples" / "grpo.yaml")
    sim = simulate(make_plan(cfg), cfg, steps=3)
    sim.write_jsonl(tmp_path / "sim.jsonl")
    scale = 0.01
    rehearsal = sim.model_copy(
        update={
            "events": tuple(
                e.model_copy(update={"start_s": e.start_s * scale, "end_s": e.end_s * scale})
                for e in sim.events
            ),
            "meta": {"source": "ray", "time_scale": scale},
        }
    )
    rehearsal.write_jsonl(tmp_path / "rehearsal.jsonl")
    back = load_timeline(tmp_path / "rehearsal.jsonl")
    assert back.meta["time_scale_undone"] == scale
    assert back.events[-1].end_s == pytest.approx(sim.events[-1].end_s)
    result = invoke("compare", tmp_path / "sim.jsonl", tmp_path / "rehearsal.jsonl")
    assert result.exit_code == 0, result.output
    assert "1.00× as fast" in result.output and "--time-scale 0.01" in result.output


def test_simulate_prices_a_searched_placement_as_plan_does() -> None:
    """A file whose roles are placed by the search (devices: auto): plan estimates the chosen
    placement again on its own devices, and simulate priced the same plan's stages with the
    loaded figures, scaled from other devices (34.23 s simulated of a 60.07 s plan, or
    30.83 s of 59.07 s one-step-off; rev30b)."""
    file = ROOT / "examples" / "estimate_7b.yaml"
    roles = ("actor_train", "actor_infer", "reference")
    sets = ["cluster.nodes=2", "workload.prompts_per_step=64",
            "workload.response_tokens.mean=2048", "workload.response_tokens.max=4096",
            *(f"roles.{r}.devices=auto" for r in roles)]  # fmt: skip
    for mode in ([], ["pipeline.mode=async", "pipeline.max_staleness=1"]):
        args = [a for s in [*sets, *mode] for a in ("--set", s)]
        plan = json.loads(invoke("plan", file, *args, "--json").stdout)
        simulated = json.loads(invoke("simulate", file, *args, "--json").stdout)
        assert simulated["plan_period_s"] == pytest.approx(plan["period_s"], rel=1e-9)
        assert simulated["period_s"] == pytest.approx(plan["period_s"], rel=1e-6)
        # What compare and the pictures draw of a config: its plan, simulated.
        drawn = planned_timeline(file, steps=12, overrides=[*sets, *mode])
        assert drawn.meta["period_s"] == pytest.approx(plan["period_s"], rel=1e-6)


def test_a_searched_roles_warning_says_the_plans_figures_are_its_own() -> None:
    """``estimate`` prices a ``devices: auto`` role as read, on the whole cluster, and says so;
    ``simulate`` and a sweep show the plan's figures, estimated again on the devices the
    search chose, and said the same (the auto-pairing review)."""
    file = ROOT / "examples" / "estimate_7b.yaml"
    sets = ["--set", "cluster.nodes=2", "--set", "roles.actor_infer.devices=auto"]
    read = invoke("estimate", file, *sets)
    assert "roles.actor_infer: devices: auto; estimated as if on all 16 GPUs" in read.output
    sweep = ["--sweep", "workload.prompts_per_step=32,64"]
    for args in (["simulate", file, *sets, "--steps", "2"], ["estimate", file, *sets, *sweep]):
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert "as if on all" not in result.output
        assert "roles.actor_infer: devices: auto; placed by the search and estimated again" in (
            result.output
        )


def test_estimate_prices_an_auto_roles_weight_sync_on_the_whole_cluster_as_it_says() -> None:
    """``estimate`` says a ``devices: auto`` role is estimated as if on all the cluster's GPUs,
    but priced its weight sync as a network broadcast between disjoint sets (0.02 s), where a
    trainer on all 8 GPUs syncs by device copy as ``plan`` prices it (2.50 s)."""
    file = ROOT / "examples" / "estimate_7b.yaml"
    sets = ["--set", "roles.actor_infer.devices=auto"]
    estimated = json.loads(invoke("estimate", file, *sets, "--json").stdout)
    plan = json.loads(invoke("plan", file, *sets, "--json").stdout)
    assert plan["placement"]["actor_infer"] == list(range(8))
    (sync,) = [o for o in plan["ops"] if o["kind"] == "weight_sync"]
    sync_s = estimated["stages"]["weight_sync"]
    assert sync_s["detail"]["path"] == "device copy"
    assert sync_s["seconds"] == pytest.approx(sync["end_s"] - sync["start_s"], abs=1e-5)


def test_estimate_json_says_what_the_plan_takes_for_each_stage_as_its_table_does() -> None:
    """The table's "plan uses" column was not in --json: a stage with given seconds showed
    only the model's figure there (reward 20.48 s where the plan takes 5 s)."""
    args = ("estimate", "examples/estimate_7b.yaml", "--set", "pipeline.stages.reward.seconds=5")
    doc = json.loads(invoke(*args, "--json").stdout)["stages"]
    assert doc["reward"]["seconds"] == pytest.approx(20.48)
    assert doc["reward"]["plan_uses"] == {"source": "given", "given_s": 5.0}
    assert doc["generate"]["plan_uses"] == {"source": "estimate", "given_s": None}
    table = invoke(*args).stdout
    assert re.search(r"reward\s.*20\.48 s\s.*5 s given", table)
    plan = json.loads(invoke("plan", *args[1:], "--json").stdout)
    rewards = [op for op in plan["ops"] if op.get("stage") == "reward"]
    assert rewards and all(op["end_s"] - op["start_s"] == pytest.approx(5.0) for op in rewards)
