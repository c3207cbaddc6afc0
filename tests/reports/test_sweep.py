"""rlplex.reports.sweep and ``rlplex estimate --sweep``: values, bad values, the PNG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.errors import ConfigError, InvalidValueError
from rlplex.reports.sweep import parse_sweep, plan_point, sweep_config

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "estimate_7b.yaml"
KEY = "workload.response_tokens.mean"


def test_parse_sweep_keeps_value_texts() -> None:
    assert parse_sweep(f"{KEY}=500, 1000,2000") == (KEY, ("500", "1000", "2000"))


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (f"{KEY}=500", "two or more"),
        (f"{KEY}=500,500", "two or more"),
        (f"{KEY}=500,abc", "'abc' is not a number"),
        (f"{KEY}=500,nan", "'nan' is not a number"),
        ("500,1000", "KEY=V1,V2"),
        ("=1,2", "KEY=V1,V2"),
        (f"{KEY}=500,,1000", "'' is not a number"),
        ("cluster.gpu=h100,h100", "two or more"),
        ("cluster.gpu=h100,H100", "two or more"),  # presets are matched case-insensitively
        ("cluster.gpu=h100,80", "'h100' is not a number, and the other values are"),
    ],
)
def test_parse_sweep_refuses(spec: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        parse_sweep(spec)
    assert info.value.field == "--sweep"


def test_each_point_is_the_config_with_that_value() -> None:
    sweep = sweep_config(CONFIG, KEY, ("256", "1024"))
    assert [p.value for p in sweep.points] == [256.0, 1024.0]
    for point in sweep.points:
        cfg = load_config(CONFIG, overrides=[f"{KEY}={point.value:g}"])
        period, stages = plan_point(cfg)
        assert point.period_s == pytest.approx(period)
        assert point.stages == pytest.approx(stages)
    low, high = sweep.period_range() or (0.0, 0.0)
    assert low < high  # longer responses take longer
    assert sweep.points[1].stages["train"] > sweep.points[0].stages["train"]


def test_a_key_the_config_lacks_is_refused() -> None:
    with pytest.raises(ConfigError, match="no such field") as info:
        sweep_config(CONFIG, "workload.response_tokens.meen", ("1", "2"))
    assert info.value.value == "workload.response_tokens.meen"


def test_a_schema_field_the_file_leaves_to_its_default_is_accepted() -> None:
    sweep = sweep_config(CONFIG, "workload.epochs", ("1", "2"))
    # A second epoch doubles the passes and optimizer steps, not the per-step overhead.
    one, two = sweep.points[0].stages["train"], sweep.points[1].stages["train"]
    assert 1.5 * one < two < 2 * one


def test_an_efficiency_parameter_is_swept_though_the_file_has_no_efficiency_section() -> None:
    """A bug until 2026-11-28: the key was looked up on the config's ``efficiency``, None when
    the file leaves every parameter to its default, and refused as "no such field"."""
    sweep = sweep_config(CONFIG, "efficiency.controller_gb_s", ("0.25", "1"))
    slow, fast = (p.stages["train"] for p in sweep.points)
    assert slow > fast  # the controller's batch moves four times slower
    with pytest.raises(ConfigError, match="no such field"):
        sweep_config(CONFIG, "efficiency.controler_gb_s", ("0.25", "1"))


def test_a_value_that_does_not_load_is_a_point_with_its_error() -> None:
    """A mean past the file's max is refused by the two together (workload.response_tokens),
    not by the mean's own field: the rest of the range is still planned."""
    sweep = sweep_config(CONFIG, KEY, ("512", "1000000"))
    assert sweep.points[0].period_s is not None
    assert sweep.points[1].period_s is None
    assert "mean 1e+06 exceeds max" in (sweep.points[1].error or "")


@pytest.mark.parametrize(
    ("key", "values", "words"),
    [
        ("grpo.num_prompts_per_step", ("64", "-5"), "must be an integer >= 1"),
        ("cluster.gpu", ("h100", "h1OO"), "unknown GPU preset"),
    ],
)
def test_an_imported_files_key_the_importer_refuses_refuses_the_sweep(
    key: str, values: tuple[str, str], words: str
) -> None:
    """The importers' range checks and the GPU preset lookup refuse one value each, as the
    native schema does (a bug until 2026-11-28: a row marked "does not load", exit 0)."""
    nemo = ROOT / "examples" / "nemo_rl.yaml"
    lengths = ("cluster.gpu=h100", "workload.prompt_tokens.mean=100",
               "workload.prompt_tokens.max=512")  # fmt: skip
    with pytest.raises(InvalidValueError, match=words) as info:
        sweep_config(nemo, key, values, overrides=lengths)
    assert info.value.field == key


@pytest.mark.parametrize(
    ("key", "values", "words"),
    [
        ("workload.micro_batch_size", ("4", "-1"), "greater than or equal to 1"),
        ("workload.response_tokens.clip_ratio", ("0.1", "1.5"), "less than or equal to 1"),
        ("efficiency.decode_step_s", ("-0.001", "0.004"), "greater than or equal to 0"),
    ],
)
def test_a_value_the_swept_field_refuses_refuses_the_sweep(
    key: str, values: tuple[str, str], words: str
) -> None:
    """A bug until 2026-11-28: a negative floor or a share above 1 in a sweep was a point
    marked "does not load" and the command exited 0."""
    with pytest.raises(InvalidValueError, match=words) as info:
        sweep_config(CONFIG, key, values)
    assert info.value.field == key
    spec = f"{key}={','.join(values)}"
    result = CliRunner().invoke(app, ["estimate", str(CONFIG), "--sweep", spec],
                                env={"COLUMNS": "400"})  # fmt: skip
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and key in result.output


def test_cli_table_json_and_png(tmp_path: Path) -> None:
    png = tmp_path / "sweep.png"
    result = CliRunner().invoke(
        app, ["estimate", str(CONFIG), "--sweep", f"{KEY}=256,512,1024", "--png", str(png)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # The table's columns depend on the console's width; the figures are in --json below.
    assert "step over the range" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = CliRunner().invoke(app, ["estimate", str(CONFIG), "--sweep", f"{KEY}=256,512",
                                      "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["key"] == KEY and len(doc["points"]) == 2
    assert "generate" in json.dumps(doc["points"][0])


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("workload.response_tokens.meen=1,2", "workload.response_tokens.meen"),
        (f"{KEY}=500", "two or more"),
        (f"{KEY}=500,x", "'x' is not a number"),
    ],
)
def test_cli_bad_sweep_is_one_line_exit_2(spec: str, words: str) -> None:
    result = CliRunner().invoke(app, ["estimate", str(CONFIG), "--sweep", spec],
                                env={"COLUMNS": "400"})  # fmt: skip
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_png_without_sweep_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["estimate", str(CONFIG), "--png", str(tmp_path / "x.png")])
    assert result.exit_code == 2 and "--sweep" in result.output


RECORD = ROOT / "examples" / "records" / "verl_quickstart.jsonl"
QUICKSTART = ROOT / "examples" / "estimate_verl_quickstart.yaml"
FOUR = (
    "4gpu: cluster.gpus_per_node=4 roles.actor_infer.devices=0-3 roles.actor_train.devices=0-3"
    " roles.critic.devices=0-3 roles.reference.devices=0-3"
)


def test_whatif_sweep_sets_the_key_on_every_alternative() -> None:
    from rlplex.reports.records import RecordSource
    from rlplex.reports.sweep import whatif_sweep

    source = RecordSource(RECORD, QUICKSTART)
    # The quickstart's responses are capped at 256 tokens: 500 was clamped to it until
    # 2026-11-28 and is now refused (mean past max), a point without a best.
    sweep = whatif_sweep(source, KEY, ("50", "250"), alts=(FOUR,))
    assert sweep.stays_best and sweep.bests == ("4gpu",)
    short, long = (p.periods["4gpu"] for p in sweep.points)
    assert short is not None and long is not None and short != long  # the exponents moved
    with pytest.raises(ConfigError, match="no such field"):
        whatif_sweep(source, "workload.nope", ("1", "2"), alts=(FOUR,))
    with pytest.raises(InvalidValueError, match="greater than or equal to 0"):
        whatif_sweep(source, "efficiency.decode_step_s", ("0.004", "-1"), alts=(FOUR,))
    past = whatif_sweep(source, KEY, ("50", "500"), alts=(FOUR,))
    assert past.points[1].best is None and "exceeds max 256" in (past.points[1].error or "")
    gpus = whatif_sweep(source, "cluster.gpu", ("h20", "h100"), alts=(FOUR,))
    assert [p.value for p in gpus.points] == ["h20", "h100"]


def test_stays_best_is_false_when_the_best_changes() -> None:
    from rlplex.reports.sweep import WhatIfPoint, WhatIfSweep

    sweep = WhatIfSweep(
        key=KEY,
        baseline="as recorded",
        points=(WhatIfPoint(value=1, best="a"), WhatIfPoint(value=2, best="b")),
    )
    assert not sweep.stays_best and sweep.bests == ("a", "b")
    failed = WhatIfSweep(
        key=KEY,
        baseline="as recorded",
        points=(WhatIfPoint(value=1, best="a"), WhatIfPoint(value=2, error="x")),
    )
    assert not failed.stays_best


def test_cli_whatif_sweep_says_whether_the_best_stays() -> None:
    result = CliRunner().invoke(
        app,
        ["whatif", str(RECORD), "--config", str(QUICKSTART), "--alt", FOUR,
         "--sweep", f"{KEY}=50,250"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "4gpu, stays best over the swept range" in result.output
    result = CliRunner().invoke(
        app, ["whatif", str(RECORD), "--config", str(QUICKSTART), "--alt", FOUR,
              "--sweep", f"{KEY}=50"],
    )  # fmt: skip
    assert result.exit_code == 2 and "two or more" in result.output


def test_a_config_that_does_not_fit_as_written_is_still_swept(tmp_path: Path) -> None:
    text = CONFIG.read_text(encoding="utf-8").replace(
        "micro_batch_size: 4", "micro_batch_size: 4096"
    )
    path = tmp_path / "huge_batch.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError):
        load_config(path)
    sweep = sweep_config(path, "workload.micro_batch_size", ("4096", "4"))
    assert sweep.points[0].error and sweep.points[1].period_s
    with pytest.raises(ConfigError, match=r"memory_gb|states"):
        sweep_config(path, "workload.nope", ("1", "2"))


def test_word_values_sweep_in_the_order_given(tmp_path: Path) -> None:
    """GPU presets, models or true/false are swept as words: each point keeps its text, the
    table and the PNG show them in the order given (the H20's 148 TFLOP/s take longer)."""
    assert parse_sweep("cluster.gpu=h100, h20") == ("cluster.gpu", ("h100", "h20"))
    sweep = sweep_config(CONFIG, "cluster.gpu", ("h100", "h20"))
    assert [p.value for p in sweep.points] == ["h100", "h20"]
    h100, h20 = (p.period_s or 0.0 for p in sweep.points)
    assert h20 > 2 * h100
    cfg = load_config(CONFIG, overrides=["cluster.gpu=h20"])
    assert sweep.points[1].period_s == pytest.approx(plan_point(cfg)[0])
    packing = sweep_config(CONFIG, "workload.packing", ("true", "false"))
    assert packing.points[1].stages["train"] > packing.points[0].stages["train"]  # padding
    png = tmp_path / "gpus.png"
    result = CliRunner().invoke(
        app, ["estimate", str(CONFIG), "--sweep", "cluster.gpu=h100,h20", "--png", str(png)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "h20" in result.output and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = CliRunner().invoke(app, ["estimate", str(CONFIG), "--sweep", "cluster.gpu=h100,h20",
                                      "--json"])  # fmt: skip
    assert [p["value"] for p in json.loads(result.stdout)["points"]] == ["h100", "h20"]


def test_a_word_value_that_names_nothing_is_refused_or_a_point() -> None:
    """An unknown GPU preset is a value cluster.gpu refuses: the sweep stops (until
    2026-11-28 it was a point); a model name that matches nothing may be a folder missing
    here, so it stays a point with its error."""
    with pytest.raises(InvalidValueError, match="h2000"):
        sweep_config(CONFIG, "cluster.gpu", ("h100", "h2000"))
    sweep = sweep_config(CONFIG, "model", ("qwen2.5-7b", "no-such-model"))
    assert sweep.points[0].period_s is not None
    assert sweep.points[1].period_s is None and "no-such-model" in (sweep.points[1].error or "")


def test_a_sweep_says_when_its_configs_keep_the_default_costs() -> None:
    """An imported file without a model keeps rlplex's default stage costs at every swept GPU:
    the sweep is flat, and the warning that says why was dropped (tour 30)."""
    roll = ROOT / "examples" / "roll.yaml"
    sweep = sweep_config(roll, "cluster.gpu", ("h100", "h20"))
    assert len({p.period_s for p in sweep.points}) == 1  # flat: nothing read the GPU
    assert any("defaults" in w and "lacks model" in w for w in sweep.warnings)
    assert sweep.to_json()["warnings"] == list(sweep.warnings)
    # A swept GPU gives a file that names its model and workload its estimates: no such
    # warning, although the file as written (no GPU) has one.
    estimated = sweep_config(roll, "cluster.gpu", ("h100", "h20"), overrides=("model=qwen2.5-7b",
                             "workload.prompts_per_step=64", "workload.prompt_tokens.mean=256",
                             "workload.prompt_tokens.max=512", "workload.response_tokens.mean=512",
                             "workload.response_tokens.max=1024"))  # fmt: skip
    assert not any("defaults" in w for w in estimated.warnings)
    result = CliRunner().invoke(app, ["estimate", str(roll), "--sweep", "cluster.gpu=h100,h20"],
                                env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "warning: stage times and state sizes are rlplex's defaults" in result.output


def test_a_whatif_sweep_keeps_the_whatif_warnings() -> None:
    """``whatif --sweep`` dropped what ``whatif`` warns of: a record of stages the config
    lacks (here the ROLL example's GRPO config under verl's PPO record) swept silently."""
    from rlplex.reports.records import RecordSource
    from rlplex.reports.sweep import whatif_sweep

    source = RecordSource(RECORD, ROOT / "examples" / "roll.yaml")
    sweep = whatif_sweep(source, "cluster.host_gb_per_s", ("10", "20"),
                         alts=("a: pipeline.mode=async pipeline.max_staleness=1",))  # fmt: skip
    assert any("not in the config" in w and "critic_train" in w for w in sweep.warnings)
    assert sweep.to_json()["warnings"] == list(sweep.warnings)
    result = CliRunner().invoke(
        app, ["whatif", str(RECORD), "--config", str(ROOT / "examples" / "roll.yaml"), "--alt",
              "a: pipeline.mode=async pipeline.max_staleness=1", "--sweep",
              "cluster.host_gb_per_s=10,20"], env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "warning: recorded stage(s) not in the config" in result.output


def test_a_searched_placement_s_stages_are_priced_where_the_plan_runs_them() -> None:
    """``estimate --sweep`` of a file whose roles the search places (devices: auto): each
    point's period was the searched plan's (42.02 s, the rollout on 8 of 16 GPUs) but its
    stages the loaded config's, estimated for the whole cluster (generate 39.36 s, train
    11.92 s for a plan that runs them in 41.97 s and 20.60 s). Each stage is now what the
    plan runs, as the file with the chosen devices given shows it (rev31)."""
    from rlplex.plan import make_plan

    base = ["cluster.nodes=2", "workload.prompts_per_step=64",
            "workload.response_tokens.mean=2048", "workload.response_tokens.max=4096",
            "pipeline.mode=async", "pipeline.max_staleness=1"]  # fmt: skip
    roles = ("actor_train", "actor_infer", "reference")
    auto = load_config(CONFIG, overrides=[*base, *(f"roles.{r}.devices=auto" for r in roles)])
    period, stages = plan_point(auto)
    plan = make_plan(auto)
    assert len(plan.placement["actor_infer"]) == 8
    ran: dict[str, float] = {}
    for op in plan.ops:
        if op.stage is not None and op.kind in ("run", "weight_sync"):
            ran.setdefault(op.stage, op.end_s - op.start_s)
    assert period == pytest.approx(plan.period_s)
    assert stages == pytest.approx(ran)
    chosen = [f"roles.{r}.devices={','.join(map(str, plan.placement[r]))}" for r in roles]
    given = plan_point(load_config(CONFIG, overrides=[*base, *chosen]))
    assert period == pytest.approx(given[0]) and stages == pytest.approx(given[1])
