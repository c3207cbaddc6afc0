"""``rlplex size``: the search, the front, configs written back, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import config_from_dict, load_config
from rlplex.plan import make_plan
from rlplex.reports.size import size_report, write_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEVEN_B = EXAMPLES / "estimate_7b.yaml"
runner = CliRunner()


@pytest.fixture(scope="module")
def report_8():
    return size_report(SEVEN_B, [8], ["h100"], price_per_gpu_hour=2.0)


def test_fastest_plan_that_fits_on_8_h100(report_8):
    (row,) = report_8.rows
    assert row.best is not None and row.reason is None
    fits = [s for s in report_8.candidates if s.fits]
    assert row.best.period_s == min(s.period_s for s in fits)
    assert {s.knobs.mode for s in report_8.candidates} == {"sync", "async k=1", "async k=2"}
    assert {s.knobs.placement for s in report_8.candidates} >= {"colocated", "split 4+4"}
    best = row.best
    # 1024 prompts x 5 samples x (256 + 512) tokens per step, over 8 GPUs.
    assert best.tokens_per_s_per_gpu == pytest.approx(1024 * 5 * 768 / best.period_s / 8)
    assert best.gpu_hours_per_1000 == pytest.approx(best.period_s * 1000 * 8 / 3600)
    assert best.cost_per_1000 == pytest.approx(best.gpu_hours_per_1000 * 2.0)
    assert 0 < best.peak_gpu_gb <= 85.52
    assert report_8.smallest == {"h100": 8}


def test_every_candidate_config_plans_to_its_period(report_8):
    """What size priced is what its native config plans to, async ones included."""
    checked = 0
    for s in report_8.candidates:
        if s.fits and (s is report_8.front[0] or s.knobs.staleness == 1) and checked < 4:
            config = config_from_dict(s.native, base_dir=EXAMPLES)
            assert make_plan(config).period_s == pytest.approx(s.period_s, rel=1e-9)
            checked += 1
    assert checked >= 2


def test_out_config_is_taken_as_is_by_plan_and_simulate(report_8, tmp_path):
    out = tmp_path / "sized.yaml"
    chosen = write_config(report_8, 1, out)
    # The written file sits elsewhere: the model is a preset, so it loads anywhere.
    config = load_config(out)
    assert make_plan(config).period_s == pytest.approx(chosen.period_s, rel=1e-9)
    result = runner.invoke(app, ["plan", str(out), "--json", "--verify"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["period_s"] == pytest.approx(chosen.period_s, rel=1e-9)
    sim = runner.invoke(app, ["simulate", str(out), "--steps", "2", "--json"])
    assert sim.exit_code == 0, sim.output
    assert json.loads(sim.stdout)["plan_period_s"] == pytest.approx(chosen.period_s, rel=1e-9)


def test_a_count_that_cannot_fit_says_why_in_one_line():
    report = size_report(EXAMPLES / "estimate_72b.yaml", [8], ["h100"])
    (row,) = report.rows
    assert row.best is None and report.front == ()
    assert "\n" not in row.reason
    assert "85.52 GB" in row.reason and "optimizer" in row.reason
    assert "fix:" in row.reason


def test_a_count_the_parallel_layout_cannot_use_says_so_not_memory():
    """A trainer of tp 4 x pp 4 and ep 16 cannot be laid out on 8 GB200s: the fix names the
    layout, not more memory (it used to say "a GPU with more memory")."""
    published = Path(__file__).resolve().parents[2] / "bench" / "published"
    path = published / "heldout_nemorl06_qwen3_235b_1off_64gen64train_gb200.yaml"
    report = size_report(path, [8], ["gb200"])
    (row,) = report.rows
    assert row.best is None and row.reason is not None
    assert "does not divide the role's 8 devices" in row.reason
    assert row.reason.endswith("fix: a GPU count the role's tp x pp and pp x ep divide, or a"
                               " smaller layout")  # fmt: skip


def test_a_count_whose_ranks_the_shard_group_does_not_divide_names_the_group(tmp_path):
    """A hybrid-sharding group of 16 (the file's 16 GPUs) sized on 8: the fix names
    shard_group, not the tp x pp layout (the refusal's wording matched the layout's)."""
    text = SEVEN_B.read_text().replace("nodes: 1", "nodes: 2").replace('"0-7"', '"0-15"')
    text = text.replace("recompute: true}", "recompute: true, shard_group: 16}")
    path = tmp_path / "hsdp.yaml"
    path.write_text(text)
    assert load_config(path).roles["actor_train"].parallel.shard_group == 16
    report = size_report(path, [8], ["h100"])
    (row,) = report.rows
    assert row.best is None and row.reason is not None
    assert "roles.actor_train.parallel.shard_group" in row.reason
    assert row.reason.endswith(
        "fix: a GPU count whose data-parallel ranks the shard_group divides (a multiple of"
        " tp x pp x shard_group), or another shard_group (--set)"
    )


def test_activations_that_no_count_fits_are_not_fixed_by_more_gpus():
    """Each GPU holds its own micro-batch's activations: 447 GB of a 64 x 24K-token log-prob
    micro-batch on every count from 8 to 64 H100s. The fix named more GPUs; it names the
    activations (the reason says how to lower them) or a larger GPU."""
    report = size_report(
        SEVEN_B,
        [8, 64],
        ["h100"],
        overrides=["workload.micro_batch_size=64", "workload.response_tokens.max=16384",
                   "workload.response_tokens.mean=8000"],
    )  # fmt: skip
    for row in report.rows:
        assert row.best is None and row.activation_bound
        assert "activations" in row.reason and "recompute" in row.reason
        assert "more GPUs than tried" not in row.reason
        assert row.reason.endswith(
            "fix: fewer activations (above), which more GPUs do not reduce, or a GPU with more"
            " memory"
        )
    # A state too large is still fixed by more GPUs (or a larger GPU).
    states = size_report(EXAMPLES / "estimate_72b.yaml", [8], ["h100"]).rows[0]
    assert not states.activation_bound


def test_cli_table_json_png_and_out_config(tmp_path):
    # the PNG's folder does not exist yet: made, as every other writer makes its own
    png, out = tmp_path / "new" / "size.png", tmp_path / "row1.yaml"
    args = ["size", str(SEVEN_B), "--gpus", "8", "--gpu", "h100", "--png", str(png)]
    result = runner.invoke(app, [*args, "--out-config", "1", "--out-file", str(out)])
    assert result.exit_code == 0, result.output
    assert "Pareto front" in result.output and "smallest that fits on h100: 8 GPUs" in result.output
    assert png.stat().st_size > 10_000 and out.exists()
    data = json.loads(runner.invoke(app, ["size", str(SEVEN_B), "--gpus", "8", "--json"]).stdout)
    assert data["smallest"] == {"h100": 8} and data["front"][0]["gpus"] == 8


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--gpus", "12"], ["--gpus", "12", "whole number of 8-GPU nodes"]),
        (["--gpus", ""], ["--gpus"]),
        (["--gpus", "-8"], ["--gpus", "-8"]),
        (["--gpus", "8,x"], ["--gpus", "x"]),
        (["--gpus", "8", "--gpu", "b300"], ["--gpu", "b300", "h100"]),
        (["--gpus", "8", "--price-per-gpu-hour", "cheap"], ["--price-per-gpu-hour", "cheap"]),
        (["--gpus", "8", "--out-config", "9"], ["--out-config", "9"]),
        (["--max-gpus", "4"], ["--max-gpus", "4", "one node"]),
        (["--gpus", "8", "--max-gpus", "16"], ["--max-gpus", "not both"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, names):
    result = runner.invoke(app, ["size", str(SEVEN_B), *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    for name in names:
        assert name in lines[0]


def test_costs_from_calibrate_change_the_estimate(tmp_path, report_8):
    """A costs file halving the train efficiency's default slows every plan down."""
    costs = tmp_path / "costs.yaml"
    costs.write_text("efficiency: {train: 0.2}\n")
    slow = size_report(SEVEN_B, [8], ["h100"], costs=costs)
    assert slow.rows[0].best.period_s > report_8.rows[0].best.period_s


def test_a_config_without_a_model_keeps_its_worker_size_and_states():
    """examples/ppo.yaml gives seconds and states: only placement and mode are searched."""
    report = size_report(EXAMPLES / "ppo.yaml", [8, 16], ["h100"])
    assert {s.knobs.rollout_tp for s in report.candidates} == {2}
    assert {s.knobs.sharding for s in report.candidates} == {"given"}
    best = report.rows[1].best
    # Stage seconds given for 8 GPUs scale ideally to 16 (scaling 1): about half the period.
    assert best.period_s < report.rows[0].best.period_s * 0.6


def test_the_fastest_plan_gives_way_to_a_less_stale_one_within_the_tolerance() -> None:
    """As plan --auto picks k: a plan with more staleness must be faster by more than
    STALENESS_TOLERANCE to be chosen over one with less."""
    from rlplex.plan.placement import STALENESS_TOLERANCE
    from rlplex.plan.sizing import Knobs
    from rlplex.reports.size import Scored, _fastest

    def scored(k: int, period: float) -> Scored:
        return Scored(Knobs(16, "h100", 4, 1, "fsdp", staleness=k), period_s=period)

    sync, k2 = scored(0, 100.0), scored(2, 100.0 / (1 + STALENESS_TOLERANCE / 2))
    assert _fastest([k2, sync]) is sync
    faster = scored(2, 100.0 / (1 + 2 * STALENESS_TOLERANCE))
    assert _fastest([sync, faster]) is faster
    assert _fastest([]) is None


def test_a_step_counts_each_trajectory_once_whatever_trains_on_it(tmp_path: Path) -> None:
    """With each turn trained as its own sample (``turns.samples: turn``) the trainer sees a
    trajectory's context again and again; the step's tokens per second count the trajectory
    once (bug: the samples' tokens, 3.4x the agentic example's own)."""
    from rlplex.reports.size import _tokens_per_step

    agentic = EXAMPLES / "estimate_agentic.yaml"
    once = _tokens_per_step(load_config(agentic))
    per_turn = _tokens_per_step(load_config(agentic, overrides=["workload.turns.samples=turn"]))
    # 512 trajectories of a 600-token prompt and 5 answers of 256 with 4 replies of 150.
    assert once == per_turn == pytest.approx(512 * (600 + 5 * 256 + 4 * 150))


def test_an_imported_config_is_sized_as_plan_reads_it() -> None:
    """A NeMo RL file is searched from its native form (model, workload, Megatron sizes), and
    each candidate's native config plans to the period size priced."""
    report = size_report(EXAMPLES / "nemo_rl.yaml", [16], ["h100"])
    (row,) = report.rows
    assert row.best is not None and row.best.tokens_per_s_per_gpu is not None
    config = config_from_dict(row.best.native, base_dir=EXAMPLES)
    assert make_plan(config).period_s == pytest.approx(row.best.period_s, rel=1e-9)
    # The file's own key (NeMo RL's prompts per step) set on the file, as plan reads it.
    half = size_report(
        EXAMPLES / "nemo_rl.yaml", [16], ["h100"], overrides=["grpo.num_prompts_per_step=32"]
    )
    assert half.rows[0].best.period_s < row.best.period_s


def test_cli_sizes_a_verl_file_with_set_and_format() -> None:
    args = ["size", str(EXAMPLES / "verl.yaml"), "--gpus", "8", "--gpu", "h100", "--json"]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0, plain.output
    forced = runner.invoke(app, [*args, "--format", "verl", "--set", "pipeline.mode=async"])
    assert forced.exit_code == 0, forced.output
    data = json.loads(forced.stdout)
    assert data["smallest"] == {"h100": 8}
    # The file names no batch: the search says it sized the importer's defaults.
    assert any("lacks workload" in w for w in data["warnings"])
    bad = runner.invoke(app, [*args, "--format", "roll"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1, bad.output


def test_a_megatron_trainer_keeps_its_distributed_optimizer() -> None:
    """A trainer that splits its model (NeMo RL's Megatron tp 2) keeps the sharding its
    framework has, the distributed optimizer; the search turned it into FSDP. A data-parallel
    trainer's sharding (examples/estimate_7b.yaml, FSDP) is still searched."""
    report = size_report(EXAMPLES / "nemo_rl.yaml", [16], ["h100"])
    assert {s.knobs.sharding for s in report.candidates} == {"given"}
    trainer = report.rows[0].best.native["roles"]["actor_train"]["parallel"]
    assert trainer.get("zero") == 1 and not trainer.get("fsdp") and trainer["tp"] == 2
    plain = size_report(SEVEN_B, [8], ["h100"])
    assert {s.knobs.sharding for s in plain.candidates} == {"fsdp", "zero1"}


def test_the_fastest_plan_is_no_slower_than_the_files_own_layout() -> None:
    """Found in review (2026-11-29): 72B on 32 H100s planned at 923.96 s as written (rollout
    tp 8) but sized at 928.66 s (tp 4), tp 8 never tried."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan

    own = make_plan(load_config(EXAMPLES / "estimate_72b.yaml")).period_s
    report = size_report(EXAMPLES / "estimate_72b.yaml", [32], ["h100"])
    best = report.rows[0].best
    assert best is not None and best.period_s is not None
    assert best.period_s <= own * (1 + 1e-9)


def test_a_file_whose_own_placement_does_not_fit_is_still_sized() -> None:
    """The README's 72B on estimate_7b.yaml's 8 GPUs does not load (its optimizer alone
    outgrows a GPU); ``size`` is how a user finds the count that fits, so the file's own
    placement must not refuse the whole search (it did, with the loader's one line, and
    ``--gpu h100,h20`` refused where ``--gpu h20,h100`` sized: tour 30)."""
    over = ("model=qwen2.5-72b",)
    report = size_report(SEVEN_B, [8, 16], ["h100"], overrides=over)
    eight, sixteen = report.rows
    assert eight.best is None and "optimizer" in (eight.reason or "")
    assert sixteen.best is not None and report.smallest == {"h100": 16}
    result = runner.invoke(
        app, ["size", str(SEVEN_B), "--set", "model=qwen2.5-72b", "--gpus", "8,16",
              "--gpu", "h100"], env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "smallest that fits on h100: 16 GPUs" in result.output
    assert "8 x h100 does not fit" in result.output


def test_given_seconds_of_a_role_left_to_the_search_are_priced_as_plan_prices_them(
    tmp_path: Path,
) -> None:
    """grpo.yaml with its roles left to the search (devices: auto) and its stage seconds
    given: ``plan`` takes those seconds as measured on the whole cluster (8 GPUs) and prices
    the rollout on 0-3 with the trainer and reference on 4-7 at 481.01 s; size took them as
    measured on each candidate's own devices (a 120 s generation as 120 s on 4 GPUs) and
    ranked that split at 241.01 s, as fast as colocated. And it warned that the auto roles
    were estimated as if on all the cluster's GPUs, which none of its candidates is (rev31)."""
    from rlplex.estimate.context import AUTO_ESTIMATED
    from rlplex.plan.placement import resolve_placement

    text = (EXAMPLES / "grpo.yaml").read_text().replace('devices: "0-7"', "devices: auto")
    path = tmp_path / "grpo_auto.yaml"
    path.write_text(text.replace("gpu_memory_gb: 80", "gpu_memory_gb: 80\n  gpu: h100"))
    report = size_report(path, [8], ["h100"])
    split = next(
        s
        for s in report.candidates
        if s.knobs.rollout_gpus == 4 and not s.knobs.colocated and not s.knobs.staleness
    )
    searched = resolve_placement(load_config(path), top=20).candidates
    apart = (("actor_infer",), ("actor_train", "reference"))
    same = next(
        c for c in searched if c.placement["actor_infer"] == (0, 1, 2, 3) and c.groups == apart
    )
    assert split.period_s == pytest.approx(same.period_s)
    assert split.period_s > 1.5 * min(s.period_s or 0 for s in report.candidates if s.fits)
    # The written config plans as the search did.
    assert make_plan(config_from_dict(split.native, file=str(path))).period_s == pytest.approx(
        split.period_s
    )
    left = [f"roles.{r}.devices=auto" for r in ("actor_train", "actor_infer", "reference")]
    seven_b_auto = size_report(SEVEN_B, [8], ["h100"], overrides=left)
    read = load_config(SEVEN_B, overrides=["roles.actor_infer.devices=auto"])
    assert any(AUTO_ESTIMATED in w for w in read.warnings)
    assert not any(AUTO_ESTIMATED in w for w in seven_b_auto.warnings)
