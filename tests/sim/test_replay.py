"""Replay: recorded stage durations through a config's plan, per step, against the record."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import config_from_dict, load_config
from rlplex.plan import make_plan
from rlplex.sim import simulate
from rlplex.sim.replay import (
    replay,
    replay_timeline,
    stage_columns,
    step_times,
)
from rlplex.sim.simulate import drain_steps, extract_pattern, steady_period
from rlplex.timeline.importers import import_record

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RECORDS = EXAMPLES / "records"


@pytest.mark.parametrize("name", ["grpo.yaml", "ppo.yaml", "async.yaml", "disaggregated.yaml"])
def test_fast_replay_loop_agrees_with_the_simulator(name: str) -> None:
    """step_times (no events) must give simulate()'s step times for the same durations."""
    cfg = load_config(EXAMPLES / name)
    plan = make_plan(cfg)
    rows = [{"generate": 100.0 + 7 * n, "train": 90.0 - 3 * n, "reward": 5.0 + n} for n in range(9)]
    timeline = simulate(plan, cfg, steps=9, durations=dict(enumerate(rows)))
    pattern = extract_pattern(plan, cfg)
    times = step_times(pattern, stage_columns(pattern, rows), 9)
    assert times == pytest.approx([timeline.metrics[n]["step_s"] for n in range(9)])
    assert steady_period(times, drain_steps(plan)) == pytest.approx(timeline.meta["period_s"])


@pytest.mark.parametrize("name", ["grpo.yaml", "ppo.yaml", "async.yaml"])
def test_replaying_a_jittered_simulated_record_reproduces_its_step_times(
    name: str, tmp_path: Path
) -> None:
    """A record made by the simulator (10 % jitter) replays through its own plan within 5 %."""
    cfg = load_config(EXAMPLES / name)
    plan = make_plan(cfg)
    record = tmp_path / "run.jsonl"
    simulate(plan, cfg, steps=30, jitter=0.1, seed=7).write_jsonl(record)
    result = replay(import_record(record), cfg)
    assert len(result.steps) == 30
    assert not result.warnings
    for step in result.steps:
        assert step.recorded_s is not None
        assert abs(step.error_pct) < 5.0, step
    assert result.mean_abs_error_pct < 0.01  # same plan, same durations: the same step times


@pytest.mark.parametrize(
    ("record", "config", "fmt", "steps"),
    [
        ("verl_quickstart.jsonl", "records/verl_quickstart.yaml", "verl", 10),
        ("verl_quickstart_console.log", "records/verl_quickstart.yaml", "verl", 10),
        ("roll_rlvr_stdout.log", "roll.yaml", "roll", 6),
        ("grpo_run.jsonl", "grpo.yaml", "rlplex", 3),
    ],
)
def test_every_importer_format_replays(record: str, config: str, fmt: str, steps: int) -> None:
    run = import_record(RECORDS / record)
    result = replay(run, load_config(EXAMPLES / config))
    assert run.format == fmt
    assert [s.step for s in result.steps] == sorted(run.steps)
    assert len(result.steps) == steps
    for s in result.steps:
        # Nothing recorded runs in parallel with more than the recorded stages explain.
        assert 0 < s.explained_s <= s.predicted_s + 1e-9
        if s.recorded_s is not None:
            assert s.unattributed_s == pytest.approx(s.recorded_s - s.explained_s)
    assert result.mean_abs_error_pct is not None


def test_verl_quickstart_unattributed_time_is_the_driver_overhead() -> None:
    """The example's step totals are the stages' sum plus 1.2 s; everything runs on one GPU.

    So each step's explained time is the sum of its six stages, its unattributed
    time 1.2 s, and its prediction the sum plus the modelled weight sync
    (1 GB / 200 GB/s = 0.005 s).
    """
    run = import_record(RECORDS / "verl_quickstart.jsonl")
    result = replay(run, load_config(RECORDS / "verl_quickstart.yaml"))
    for s in result.steps:
        total = sum(run.steps[s.step].values())
        assert s.explained_s == pytest.approx(total)
        assert s.unattributed_s == pytest.approx(1.2, abs=1e-6)
        assert s.predicted_s == pytest.approx(total + 0.005)
    assert result.warnings == (
        "config stage(s) not in the record, replayed with the model: weight_sync 0.005 s",
    )


def test_rolls_missing_last_total_is_left_out_of_the_error() -> None:
    result = replay(
        import_record(RECORDS / "roll_rlvr_stdout.log"), load_config(EXAMPLES / "roll.yaml")
    )
    last = result.steps[-1]
    assert last.recorded_s is None and last.error_pct is None and last.unattributed_s is None
    assert "reward 10 s" in result.warnings[0] and "advantage 1 s" in result.warnings[0]
    errors = [abs(s.error_pct) for s in result.steps[:-1]]
    assert result.mean_abs_error_pct == pytest.approx(sum(errors) / len(errors))


def test_recorded_stages_the_config_lacks_are_named() -> None:
    """The verl run has a critic (values, critic_train); GRPO has none."""
    result = replay(
        import_record(RECORDS / "verl_quickstart.jsonl"), load_config(EXAMPLES / "grpo.yaml")
    )
    assert any(
        w.startswith("recorded stage(s) not in the config") and "values, critic_train" in w
        for w in result.warnings
    )
    assert any("reward 10 s, old_logprob 20 s" in w for w in result.warnings)


def test_offloads_are_predicted_but_not_explained_by_the_record(tmp_path: Path) -> None:
    """A tight colocated step reloads the optimizer (8 GB at 4 GB/s = 2 s) before train.

    The record holds only the stages (1 s + 1 s); the plan adds the reload on the
    critical path, so predicted = 4 s and explained = 2 s.
    """
    cfg = config_from_dict({
        "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory_gb": 20, "host_gb_per_s": 4},
        "roles": {
            "actor_train": {"devices": "0", "states": {"weights": 2, "optimizer": 8}},
            "actor_infer": {"devices": "0", "states": {"weights": 2, "kv_cache": 9}},
        },
        "pipeline": {"stages": {
            "generate": {"role": "actor_infer", "seconds": 1},
            "train": {"role": "actor_train", "seconds": 1, "after": ["generate"]},
        }},
    })  # fmt: skip
    record = tmp_path / "r.jsonl"
    record.write_text(
        '{"step": 0, "op": "s0/generate", "kind": "run", "stage": "generate", "devices": [0],'
        ' "start_s": 0, "end_s": 1}\n'
        '{"step": 0, "op": "s0/train", "kind": "run", "stage": "train", "devices": [0],'
        ' "start_s": 3, "end_s": 4}\n'
    )
    plan = make_plan(cfg)
    assert any(op.kind == "reload" and op.duration_s > 0 for op in plan.ops)
    (step,) = replay(import_record(record), cfg, plan).steps
    assert step.explained_s == pytest.approx(2.0)
    assert step.recorded_s == pytest.approx(4.0)
    assert step.unattributed_s == pytest.approx(2.0)
    assert step.predicted_s == pytest.approx(plan.period_s)


def test_replay_timeline_draws_the_first_recorded_steps() -> None:
    run = import_record(RECORDS / "verl_quickstart.jsonl")
    cfg = load_config(RECORDS / "verl_quickstart.yaml")
    plan = make_plan(cfg)
    timeline = replay_timeline(run, cfg, plan, steps=3)
    assert timeline.meta["source"] == "replay"
    gen = [e for e in timeline.events if e.stage == "generate"]
    assert [e.duration_s for e in gen] == pytest.approx(
        [run.steps[n]["generate"] for n in range(3)]
    )


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_a_rehearsal_run_replays_through_its_own_plan(tmp_path: Path) -> None:
    """A short Ray rehearsal (stages sleep their planned time) replays within 5 % per step.

    Everything fits on the GPUs and copies are fast, so transfers are ~0 s in
    the model as in the run.
    """
    pytest.importorskip("ray")
    from rlplex.runtime import execute

    cfg = config_from_dict({
        "cluster": {"nodes": 1, "gpus_per_node": 2, "gpu_memory_gb": 80,
                    "host_gb_per_s": 1000, "device_copy_gb_per_s": 1000},
        "roles": {
            "actor_train": {"devices": "0-1", "states": {"weights": 1, "optimizer": 2}},
            "actor_infer": {"devices": "0-1", "states": {"weights": 1, "kv_cache": 4}},
            "rewards": {"world_size": 1},
        },
        "pipeline": {"stages": {
            "generate": {"role": "actor_infer", "seconds": 0.2},
            "reward": {"role": "rewards", "seconds": 0.1, "after": ["generate"]},
            "advantage": {"role": "driver", "seconds": 0.05, "after": ["reward"]},
            "train": {"role": "actor_train", "seconds": 0.2, "after": ["advantage"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        }},
    })  # fmt: skip
    plan = make_plan(cfg)
    record = tmp_path / "rehearsal.jsonl"
    execute(plan, cfg, steps=3, record=record)
    result = replay(import_record(record), cfg, plan)
    assert len(result.steps) == 3
    for step in result.steps:
        assert abs(step.error_pct) < 5.0, step


def test_an_rlplex_record_replays_with_the_transfers_it_recorded(tmp_path: Path) -> None:
    """Transfers that ran faster than modelled (a CPU run moves no bytes) are replayed as run.

    The record is the plan simulated with every offload and reload taking 0 s;
    with modelled transfers the replay would add their 1 s a step.
    """
    data = {
        "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory_gb": 4, "host_gb_per_s": 2},
        "roles": {
            "actor_train": {"devices": [0], "states": {"weights": 1, "optimizer": 2}},
            "actor_infer": {"devices": [0], "states": {"weights": 1, "kv_cache": 1}},
        },
        "pipeline": {"stages": {
            "generate": {"role": "actor_infer", "seconds": 1},
            "train": {"role": "actor_train", "seconds": 1, "after": ["generate"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        }},
    }  # fmt: skip
    cfg = config_from_dict(data)
    plan = make_plan(cfg)
    assert sum(op.end_s - op.start_s for op in plan.ops if op.kind != "run") > 0.5
    record = tmp_path / "run.jsonl"
    instant = lambda _n, name: 0.0 if name.startswith(("offload/", "reload/")) else None  # noqa: E731
    simulate(plan, cfg, steps=5, durations=instant).write_jsonl(record)
    result = replay(import_record(record), cfg, plan)
    assert len(result.steps) == 5
    for step in result.steps:
        assert abs(step.error_pct) < 5.0, step
