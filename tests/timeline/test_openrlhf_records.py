"""OpenRLHF's step timers (``train/timing/NAME`` in wandb): its history CSV, summary records
with ``framework: openrlhf``, and the split of its joint timers, concurrent ones included
(rlplex.timeline.importers.openrlhf, rlplex.timeline.joint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import Config, load_config
from rlplex.errors import ConfigError
from rlplex.timeline.importers import detect_record_format, import_record
from rlplex.timeline.importers.base import RecordedRun
from rlplex.timeline.joint import modelled_span, split_joint
from rlplex.timeline.lengths import recorded_lengths

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "examples" / "records" / "openrlhf_wandb.csv"
MAKE = "reward@reward+old_logprob+ref_logprob+values+advantage"
TRAIN = "critic_train+train"
GEN = "generate+reward@driver"
HEADER = "_step,train/global_step,train/timing/generation,train/timing/make_experience,"
HEADER += "train/timing/ppo_train,train/timing/broadcast,train/timing/step_total"


def write(tmp_path: Path, text: str, name: str = "run.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_example_history_reads_each_step_by_train_global_step() -> None:
    run = import_record(CSV)
    assert detect_record_format(CSV) == "history"
    # wandb's _step counts every wandb.log call (0-11 here); the step is train/global_step,
    # and the samples table's and the evaluation's rows are no step's.
    assert run.step_numbers == (1, 2, 3, 4, 5)
    assert run.steps[1] == {GEN: 31.42, MAKE: 46.10, TRAIN: 158.31, "weight_sync": 2.61}
    assert run.step_s[1] == pytest.approx(238.44)
    assert run.joint[TRAIN] == ("critic_train", "train")
    assert run.joint[GEN] == ("generate", "reward@driver")
    assert set(run.concurrent) == {MAKE, TRAIN}
    assert run.unknown_keys == ()
    assert run.metrics[1]["train/policy_loss"] == pytest.approx(0.1421)


def test_its_lengths_are_openrlhfs_rollout_figures() -> None:
    lengths = recorded_lengths(import_record(CSV))
    assert lengths is not None
    assert lengths.keys == ("train/rollout/response_length_mean", "train/rollout/truncated_rate")
    assert lengths.response_mean == pytest.approx((471.2 + 478.9 + 486.3 + 492.0 + 497.4) / 5)
    assert lengths.clip_ratio == pytest.approx((0.047 + 0.044 + 0.051 + 0.049 + 0.053) / 5)


def test_a_step_logged_twice_with_timings_is_still_refused(tmp_path: Path) -> None:
    # The samples table's row may repeat the last train/global_step (wandb's step_sync):
    # skipped for want of timings; a second row of timings for one step is not.
    table = f"{HEADER}\n0,,,,,,\n1,1,30,40,150,2,222\n2,1,,,,,\n3,2,31,41,151,2,225\n"
    assert import_record(write(tmp_path, table)).step_numbers == (1, 2)
    twice = f"{HEADER}\n1,1,30,40,150,2,222\n3,1,31,41,151,2,225\n"
    with pytest.raises(ConfigError, match="step 1 appears twice"):
        import_record(write(tmp_path, twice, "twice.csv"))


def test_train_global_step_wins_over_step_and_an_unknown_timer_is_named(tmp_path: Path) -> None:
    text = "_step,train/global_step,train/timing/generation,train/timing/queue\n5,2,30,1\n"
    run = import_record(write(tmp_path, text))
    assert run.step_numbers == (2,)
    assert run.unknown_keys == ("train/timing/queue",)
    assert run.metrics[2]["train/timing/queue"] == 1


def test_a_panel_export_of_openrlhf_timers(tmp_path: Path) -> None:
    text = (
        "train/global_step,r1 - train/timing/ppo_train,r1 - train/timing/ppo_train__MIN,"
        "r1 - train/timing/ppo_train__MAX\n1,150,150,150\n2,151,151,151\n"
    )
    run = import_record(write(tmp_path, text))
    assert run.steps == {1: {TRAIN: 150.0}, 2: {TRAIN: 151.0}}


def test_only_unknown_openrlhf_timers_are_refused_naming_openrlhf(tmp_path: Path) -> None:
    text = "train/global_step,train/timing/queue,x\n1,3,4\n"
    with pytest.raises(ConfigError, match="verl, NeMo RL or OpenRLHF logs"):
        import_record(write(tmp_path, text))


def test_verl_history_keeps_its_step_column(tmp_path: Path) -> None:
    # No OpenRLHF column: _step stays the step even beside a train/global_step column.
    text = "_step,train/global_step,timing_s/gen,timing_s/step\n3,9,20,30\n"
    run = import_record(write(tmp_path, text))
    assert run.steps == {3: {"generate": 20.0}} and run.joint == {}


def test_summary_record_in_openrlhfs_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "framework: openrlhf\nsteps: 10\n"
        "timing_s: {generation: 30, make_experience: 45, ppo_train: 160, broadcast: 2.5,"
        " step_total: 237.5}\n",
        "s.yaml",
    )
    run = import_record(path)
    assert run.steps == {1: {GEN: 30.0, MAKE: 45.0, TRAIN: 160.0, "weight_sync": 2.5}}
    assert run.step_s == {1: 237.5}
    assert set(run.concurrent) == {MAKE, TRAIN}
    assert run.unknown_keys == ()


def test_summary_runs_table_with_wandbs_column_names(tmp_path: Path) -> None:
    # A runs table has no framework column: its train/timing/ columns say OpenRLHF.
    path = write(
        tmp_path,
        "Name,State,train/timing/ppo_train,train/timing/step_total,"
        "train/rollout/response_length_mean\nppo-8b,finished,160,240,480\n",
        "runs.csv",
    )
    run = import_record(path)
    assert run.format == "summary"
    assert run.steps == {1: {TRAIN: 160.0}} and run.step_s == {1: 240.0}
    assert run.metrics[1]["summary/framework"] == "openrlhf"
    assert recorded_lengths(run).response_mean == 480  # type: ignore[union-attr]


def test_an_unknown_framework_lists_openrlhf(tmp_path: Path) -> None:
    path = write(tmp_path, "framework: trl\ntiming_s: {gen: 1}\n", "s.yaml")
    with pytest.raises(ConfigError, match="verl, nemo_rl, openrlhf, rlplex"):
        import_record(path)


def config(tmp_path: Path, critic_devices: str) -> Config:
    """Actor training on GPUs 0-1, the critic on ``critic_devices``; train 100 s, critic 60 s."""
    text = (
        "cluster: {nodes: 1, gpus_per_node: 4, gpu_memory_gb: 80}\n"
        "roles:\n"
        "  actor_train: {devices: '0-1', states: {weights: 4}}\n"
        "  actor_infer: {devices: '2-3', states: {weights: 4}}\n"
        f"  critic: {{devices: '{critic_devices}', states: {{weights: 4}}}}\n"
        "pipeline:\n  mode: sync\n  stages:\n"
        "    generate: {role: actor_infer, seconds: 30}\n"
        "    reward: {role: driver, seconds: 10, after: [generate]}\n"
        "    advantage: {role: driver, seconds: 1, after: [reward]}\n"
        "    critic_train: {role: critic, seconds: 60, after: [advantage]}\n"
        "    train: {role: actor_train, seconds: 100, after: [advantage]}\n"
    )
    path = tmp_path / f"c{critic_devices}.yaml"
    path.write_text(text)
    return load_config(path)


def record() -> RecordedRun:
    return RecordedRun(
        format="history",
        steps={1: {TRAIN: 120.0, GEN: 44.0}},
        joint={TRAIN: ("critic_train", "train"), GEN: ("generate", "reward@driver")},
        concurrent=(TRAIN,),
    )


def test_a_concurrent_timer_gives_each_member_the_ratio_of_the_span(tmp_path: Path) -> None:
    side = config(tmp_path, "2-3")  # the critic's GPUs are not the actor's
    assert modelled_span({"critic_train": 60, "train": 100}, side) == 100
    split = split_joint(record(), side)
    # Measured 120 s over a modelled span of 100 s: each member x 1.2, the actor's 120 s
    # the critical one; a proportional split would give 75 s and 45 s.
    assert split.steps[1]["train"] == pytest.approx(120.0)
    assert split.steps[1]["critic_train"] == pytest.approx(72.0)
    assert split.concurrent == () and split.joint == {}
    assert any("side by side" in w for w in split.warnings)


def test_a_concurrent_timer_on_shared_gpus_is_the_proportional_split(tmp_path: Path) -> None:
    shared = config(tmp_path, "0-1")  # one after the other on the actor's GPUs
    assert modelled_span({"critic_train": 60, "train": 100}, shared) == 160
    split = split_joint(record(), shared)
    assert split.steps[1]["train"] == pytest.approx(75.0)
    assert split.steps[1]["critic_train"] == pytest.approx(45.0)
    assert not any("side by side" in w for w in split.warnings)


def test_a_role_bound_member_counts_only_on_its_role(tmp_path: Path) -> None:
    cfg = config(tmp_path, "2-3")
    # reward on the driver: generation's timer holds it (modelled 30 s and 10 s).
    split = split_joint(record(), cfg)
    assert split.steps[1]["generate"] == pytest.approx(33.0)
    assert split.steps[1]["reward"] == pytest.approx(11.0)
    # A reward model's reward (role reward) is not in generation: all of it to generate.
    model = RecordedRun(
        format="history",
        steps={1: {"generate+reward@reward": 44.0}},
        joint={"generate+reward@reward": ("generate", "reward@reward")},
    )
    split = split_joint(model, cfg)
    assert split.steps[1] == {"generate": pytest.approx(44.0)}
    assert any("all to generate" in w for w in split.warnings)


def test_a_side_by_side_member_waits_for_what_it_depends_on(tmp_path: Path) -> None:
    cfg = config(tmp_path, "2-3")
    # advantage (driver, no GPUs) waits for the reward, which waits for generation.
    assert modelled_span({"generate": 30, "reward": 10, "advantage": 1}, cfg) == 41
    assert modelled_span({"generate": 30, "critic_train": 60}, cfg) == 90


def test_a_step_with_the_actor_frozen_gives_ppo_train_to_the_critic_alone(tmp_path: Path) -> None:
    # --critic.freezing_steps: ppo_train runs only the critic's fit on the first steps
    # (ppo_trainer.py:271-272), whose status then has critic_loss and no policy_loss.
    text = (
        f"{HEADER},train/critic_loss,train/policy_loss\n"
        "1,1,30,40,150,2,222,0.2,\n"
        "3,2,31,41,151,2,225,0.1,0.05\n"
    )
    run = import_record(write(tmp_path, text))
    assert run.steps[1]["critic_train"] == 150.0 and TRAIN not in run.steps[1]
    assert run.steps[2][TRAIN] == 151.0
    assert any("steps 1:" in w and "critic_train alone" in w for w in run.warnings)


def test_the_async_trainers_broadcast_is_no_weight_sync(tmp_path: Path) -> None:
    # The async trainer's step_total is the wall time since the last step, not the sum
    # (ppo_trainer_async.py:234-238), and its broadcast waits for the engines' lock that
    # generation holds (:255-265): a metric, not weight_sync's seconds.
    sync = f"{HEADER}\n1,1,30,40,150,2,222\n3,2,31,41.5,151,2.25,225.75\n"
    run = import_record(write(tmp_path, sync))
    assert run.steps[1]["weight_sync"] == 2.0 and run.steps[2]["weight_sync"] == 2.25
    assert not any("async" in w for w in run.warnings)
    waited = f"{HEADER}\n1,1,30,40,150,25,215\n"
    run = import_record(write(tmp_path, waited, "async.csv"))
    assert "weight_sync" not in run.steps[1] and run.step_s[1] == 215.0
    assert run.metrics[1]["train/timing/broadcast"] == 25
    assert any("async trainer" in w for w in run.warnings)


def test_a_summary_of_an_async_run_keeps_broadcast_as_a_metric(tmp_path: Path) -> None:
    text = (
        "framework: openrlhf\ntiming_s: {generation: 30, make_experience: 45,"
        " ppo_train: 160, broadcast: 20, step_total: 215}\n"
    )
    run = import_record(write(tmp_path, text, "a.yaml"))
    assert "weight_sync" not in run.steps[1] and run.metrics[1]["timing/broadcast"] == 20
    assert any("async trainer" in w for w in run.warnings)
