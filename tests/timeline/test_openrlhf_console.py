"""OpenRLHF's console log: each step's ``status`` dict as its trainers print it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.timeline.importers import detect_record_format, import_record
from rlplex.timeline.importers.openrlhf_console import parse_status

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "examples" / "records"
LOG = RECORDS / "openrlhf_console.log"


def test_the_example_console_reads_as_the_same_runs_wandb_export() -> None:
    console, wandb = import_record(LOG), import_record(RECORDS / "openrlhf_wandb.csv")
    assert console.format == "openrlhf" and detect_record_format(LOG) == "openrlhf"
    assert console.steps == wandb.steps and console.step_s == wandb.step_s
    assert console.joint == wandb.joint and console.concurrent == wandb.concurrent
    for step, metrics in wandb.metrics.items():
        for key in ("train/rollout/response_length_mean", "train/kl", "train/policy_loss"):
            assert console.metrics[step][key] == pytest.approx(metrics[key]), (step, key)


def test_numpy_and_torch_scalars_nan_and_inf_read_as_numbers() -> None:
    status = parse_status(
        "{'a': np.float64(1.5), 'b': tensor(2.0, device='cuda:0'), 'c': np.int64(3),"
        " 'd': nan, 'e': -inf, 'f': inf, 'name_nan': 'nan inside text', 'g': 1e-07}"
    )
    assert status["a"] == 1.5 and status["b"] == 2.0 and status["c"] == 3
    assert status["d"] is None and status["e"] == -math.inf and status["f"] == math.inf
    assert status["name_nan"] == "nan inside text" and status["g"] == 1e-07
    with pytest.raises(ValueError, match="does not parse"):
        parse_status("{'a': os.system('x')}")
    with pytest.raises(ValueError, match="not a dict"):
        parse_status("{1: 2}")


def _log(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


STEP = (
    "{'timing/make_experience': 40.0, 'timing/ppo_train': 100.0, 'timing/broadcast': 2.0,"
    " 'timing/generation': 30.0, 'timing/step_total': %s, 'policy_loss': 0.1}"
)


def test_the_async_trainers_line_and_its_wall_clock_total(tmp_path: Path) -> None:
    # ppo_trainer_async.py prints no sparkle, and its step_total is wall time (not the sum):
    # its broadcast waited for the engines' lock, kept as a metric.
    path = _log(tmp_path, "(PPOTrainer pid=1) Global step 7: " + STEP % "150.0")
    run = import_record(path)
    assert run.step_s == {7: 150.0}
    assert "weight_sync" not in run.steps[7]
    assert run.metrics[7]["train/timing/broadcast"] == 2.0
    assert any("not the sum of the other timers" in w for w in run.warnings)


def test_a_bad_status_line_is_refused_naming_it_and_a_cut_last_one_dropped(
    tmp_path: Path,
) -> None:
    good = "✨ Global step 1: " + STEP % "172.0"
    path = _log(tmp_path, good, "✨ Global step 2: {'timing/generation': 30.0, 'x': [}", good)
    with pytest.raises(ConfigError, match="does not parse") as caught:
        import_record(path)
    assert caught.value.line == 2
    cut = _log(tmp_path, good, "✨ Global step 2: {'timing/generation': 30.0, 'timing/pp}")
    run = import_record(cut)
    assert run.step_s == {1: 172.0}
    assert any("truncated last line" in w for w in run.warnings)
    twice = _log(tmp_path, good, good)
    with pytest.raises(ConfigError, match="step 1 appears twice"):
        import_record(twice)


def test_a_log_without_a_step_line_is_not_openrlhfs(tmp_path: Path) -> None:
    path = _log(tmp_path, "✨ Evaluation completed in 0:00:40, global_step 4, eval_metrics: {}")
    with pytest.raises(ConfigError, match="no 'Global step N"):
        import_record(path, format="openrlhf")
