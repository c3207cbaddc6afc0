"""NeMo RL's console log and wandb history: the timers each stage becomes, joint timers,
skipped passes, validation blocks, bad lines and detection."""
# ruff: noqa: E501 -- log lines read best whole

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.timeline.importers import detect_record_format, import_record
from rlplex.timeline.importers.nemo_rl import EXPOSED_WARNING
from rlplex.timeline.lengths import recorded_lengths

RECORDS = Path(__file__).resolve().parents[2] / "examples" / "records"

# Two steps as NeMo RL's grpo_train prints them, the driver's lines prefixed by Ray as a
# job's log has them; step 2 runs validation (its own timing block, which is not the
# step's) and skips the reference pass; a Performance Metrics block follows each Timing.
LOG = """\
(TaskRunner pid=4242) ========================= Epoch 1/2 =========================
(TaskRunner pid=4242)
(TaskRunner pid=4242) ========================= Step 1/2 =========================
(TaskRunner pid=4242) ▶ Preparing batch...
(TaskRunner pid=4242) ▶ Generating responses for batch of size 512...
(VllmGenerationWorker pid=77) INFO 08-22 10:01:12 [block_pool.py:321] Successfully reset prefix cache
(TaskRunner pid=4242) ▶ Computing logprobs...
(TaskRunner pid=4242) 📊 Training Results:
(TaskRunner pid=4242)   • Loss: 0.0132
(TaskRunner pid=4242)   • Avg Reward: 0.4121
(TaskRunner pid=4242)   • Mean Generation Length: 612.4531
(TaskRunner pid=4242) ⏱️  Timing:
(TaskRunner pid=4242)   • Total step time: 82.85s
(TaskRunner pid=4242)   • generation: 44.02s (53.1%)
(VllmGenerationWorker pid=77) INFO 08-22 10:01:40 a worker's line printed in between
(TaskRunner pid=4242)   • policy_training: 19.87s (24.0%)
(TaskRunner pid=4242)   • policy_and_reference_logprobs: 11.45s (13.8%)
(TaskRunner pid=4242)   • prepare_for_generation/total: 4.12s (5.0%)
(TaskRunner pid=4242)   • prepare_for_generation/transfer_and_update_weights: 2.91s (3.5%)
(TaskRunner pid=4242)   • data_processing: 0.41s (0.5%)
(TaskRunner pid=4242)   • reward_calculation: 0.05s (0.1%)
(TaskRunner pid=4242)   • advantage_calculation: 0.02s (0.0%)
(TaskRunner pid=4242)
(TaskRunner pid=4242) 🔍 Performance Metrics:
(TaskRunner pid=4242)   • Mean Total Tokens per Sample: 833.82
(TaskRunner pid=4242) ========================= Step 2/2 =========================
(TaskRunner pid=4242) ▶ Computing logprobs...
(TaskRunner pid=4242) ▶ Skipping reference_logprobs (skip_reference_policy_logprobs_calculation=True)...
(TaskRunner pid=4242) ▶ Starting validation at step 2...
(TaskRunner pid=4242) 📊 Validation Results:
(TaskRunner pid=4242)     • Accuracy: 0.4375
(TaskRunner pid=4242)     • Average response length: 598.2 tokens
(TaskRunner pid=4242)   ⏱️  Validation Timing:
(TaskRunner pid=4242)     • Total validation time: 21.37s
(TaskRunner pid=4242) 📊 Training Results:
(TaskRunner pid=4242)   • Mean Generation Length: 631.0912
(TaskRunner pid=4242) ⏱️  Timing:
(TaskRunner pid=4242)   • Total step time: 105.02s
(TaskRunner pid=4242)   • generation: 45.31s (43.1%)
(TaskRunner pid=4242)   • policy_training: 19.64s (18.7%)
(TaskRunner pid=4242)   • policy_and_reference_logprobs: 6.10s (5.8%)
(TaskRunner pid=4242)   • prepare_for_generation/transfer_and_update_weights: 2.88s (2.7%)
(TaskRunner pid=4242) 🔍 Performance Metrics:
(TaskRunner pid=4242)   • Mean Total Tokens per Sample: 851.10
(TaskRunner pid=4242) ========================= Epoch 2/2 =========================
(TaskRunner pid=4242) ========================= Step 1/2 =========================
(TaskRunner pid=4242) ▶ Skipping prev_logprobs (force_on_policy_ratio=True)...
(TaskRunner pid=4242) ⏱️  Timing:
(TaskRunner pid=4242)   • Total step time: 80.00s
(TaskRunner pid=4242)   • policy_and_reference_logprobs: 5.50s (6.9%)
"""


def write(tmp_path: Path, text: str, name: str = "nemo.log") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_console_steps_stages_and_joint_timers(tmp_path: Path) -> None:
    run = import_record(write(tmp_path, LOG))
    assert run.format == "nemo_rl"
    assert run.steps[1] == pytest.approx(
        {
            "generate+reward": 44.02,
            "train": 19.87,
            "old_logprob+ref_logprob": 11.45,
            "weight_sync": 2.91,
            "advantage": 0.07,
        }
    )
    assert run.joint == {
        "generate+reward": ("generate", "reward"),
        "old_logprob+ref_logprob": ("old_logprob", "ref_logprob"),
    }
    assert run.step_s == {1: 82.85, 2: 105.02, 3: 80.0}
    assert run.metrics[1]["mean_gen_tokens_per_sample"] == 612.4531
    assert run.metrics[1]["timing/train/prepare_for_generation/total"] == 4.12
    assert run.unknown_keys == (
        "timing/train/data_processing",
        "timing/train/prepare_for_generation/total",
    )


def test_validation_and_performance_blocks_are_not_the_steps(tmp_path: Path) -> None:
    run = import_record(write(tmp_path, LOG))
    every = {k for m in run.metrics.values() for k in m}
    assert not any("validation" in k.lower() or "Tokens per Sample" in k for k in every)
    assert "Accuracy" not in every and "Average response length" not in every
    assert recorded_lengths(run, [1, 2]).response_mean == pytest.approx((612.4531 + 631.0912) / 2)


def test_a_skipped_pass_leaves_the_joint_timer_to_the_other(tmp_path: Path) -> None:
    run = import_record(write(tmp_path, LOG))
    assert run.steps[2]["old_logprob"] == 6.10 and "old_logprob+ref_logprob" not in run.steps[2]
    # Epoch 2's step 1 is the run's step 3, and there the old log-probs were skipped.
    assert run.steps[3] == {"ref_logprob": 5.50}


def test_the_example_log_reads_with_its_lengths() -> None:
    path = RECORDS / "nemo_rl_console.log"
    assert detect_record_format(path) == "nemo_rl"
    run = import_record(path)
    assert sorted(run.steps) == [1, 2, 3, 4, 5]
    assert set(run.steps[1]) == {
        "generate+reward", "old_logprob+ref_logprob", "train", "weight_sync", "advantage",
    }  # fmt: skip
    assert recorded_lengths(run).keys == ("mean_gen_tokens_per_sample",)


def test_exposed_generation_is_a_metric_with_a_warning(tmp_path: Path) -> None:
    text = (
        "========================= Step 1/10 =========================\n"
        "⏱️  Timing:\n"
        "  • Total step time: 60.00s\n"
        "  • exposed_generation: 20.00s (33.3%)\n"
        "  • policy_training: 30.00s (50.0%)\n"
        "  • weight_sync: 3.00s (5.0%)\n"
        "  • idle/refit_bubble: 3.50s (5.8%)\n"
    )
    run = import_record(write(tmp_path, text))
    assert run.steps[1] == {"train": 30.0, "weight_sync": 3.0}
    assert run.metrics[1]["timing/train/exposed_generation"] == 20.0
    assert EXPOSED_WARNING in run.warnings
    assert "wait for generation" in EXPOSED_WARNING
    assert run.unknown_keys == ("timing/train/idle/refit_bubble",)


HEADER = "========================= Step 1/5 =========================\n⏱️  Timing:\n"


@pytest.mark.parametrize(
    ("text", "line", "message", "value"),
    [
        (
            HEADER + "  • Total step time: -1.00s\n  • generation: 1.00s (1.0%)\n",
            3,
            "expected a finite duration >= 0 s, got -1.0",
            "-1.00s",
        ),
        (
            HEADER + "  • generation: nans (nan%)\n  • policy_training: 1.00s (1.0%)\n",
            3,
            "got nan",
            "nans",
        ),
        (
            HEADER + "  • generation: fast\n  • policy_training: 1.00s (1.0%)\n",
            3,
            "expected '• NAME: SECONDSs (PERCENT%)'",
            "generation: fast",
        ),
        (
            HEADER + "  • generation: 1.00s (1.0%)\n" + HEADER + "  • generation: 1.00s (1.0%)\n",
            5,
            "Timing block appears twice (first on line 2)",
            "Timing",
        ),
        (
            "⏱️  Timing:\n  • generation: 1.00s (1.0%)\n"
            + HEADER
            + "  • generation: 1.00s (1.0%)\n",
            1,
            "a Timing block before any Step header",
            "Timing",
        ),
    ],
)
def test_bad_lines_name_the_file_line_and_value(
    tmp_path: Path, text: str, line: int, message: str, value: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        import_record(path, format="nemo_rl")
    err = caught.value
    assert err.file == str(path) and err.line == line
    assert message in err.message and value in (err.value or "")
    skipped = import_record(path, format="nemo_rl", skip_bad_lines=True)
    assert any(f"line {line}" in w and "skipped" in w for w in skipped.warnings)


def test_a_truncated_last_line_is_dropped_with_a_warning(tmp_path: Path) -> None:
    run = import_record(
        write(tmp_path, HEADER + "  • generation: 41.00s (50.0%)\n  • policy_training: 30.1")
    )
    assert run.steps[1] == {"generate+reward": 41.0}
    assert any("line 4" in w and "truncated last line" in w for w in run.warnings)


def test_detection_needs_a_step_header_and_a_timing_block(tmp_path: Path) -> None:
    chatter = "".join(f"(VllmGenerationWorker pid=7) INFO line {i}\n" for i in range(500))
    far = write(
        tmp_path,
        HEADER.splitlines()[0] + "\n" + chatter + "⏱️  Timing:\n  • generation: 1.00s (1.0%)\n",
    )
    assert detect_record_format(far) == "nemo_rl"
    config_dump = "".join(f" 'key_{i}': {i},\n" for i in range(400))  # the config NeMo RL prints
    late = write(
        tmp_path,
        "Final config:\n{" + config_dump + "}\n" + HEADER + "  • generation: 1.00s (1.0%)\n",
        "late.log",
    )
    assert detect_record_format(late) == "nemo_rl"
    header_only = write(tmp_path, HEADER.splitlines()[0] + "\n" + chatter, "header.log")
    with pytest.raises(ConfigError, match="NeMo RL console"):
        detect_record_format(header_only)
    validation_only = write(
        tmp_path, "  ⏱️  Validation Timing:\n    • Total validation time: 2.00s\n", "val.log"
    )
    with pytest.raises(ConfigError):
        detect_record_format(validation_only)
    verl = write(tmp_path, "step:1 - timing_s/gen:30.5 - timing_s/step:50.0\n", "verl.log")
    assert detect_record_format(verl) == "verl"


def test_a_wandb_history_of_nemo_rl_keys(tmp_path: Path) -> None:
    csv = (
        ",_step,_runtime,timing/train/generation,timing/train/policy_and_reference_logprobs,"
        "timing/train/policy_training,timing/train/total_step_time,timing/train/exposed_generation,"
        "timing/train/valid_tokens_per_sec_per_gpu,timing/train/training_prep,"
        "timing/validation/total_validation_time,train/mean_gen_tokens_per_sample\n"
        "0,1,90.1,44.0,11.5,19.9,82.9,,1510.2,1.6,21.4,612.5\n"
        "1,2,175.0,45.3,11.6,19.6,84.0,0.5,1498.7,1.6,,631.1\n"
    )
    run = import_record(write(tmp_path, csv, "nemo_run.csv"))
    assert run.format == "history"
    assert run.steps[1] == {"generate+reward": 44.0, "old_logprob+ref_logprob": 11.5, "train": 19.9}
    assert run.joint["old_logprob+ref_logprob"] == ("old_logprob", "ref_logprob")
    assert run.step_s == {1: 82.9, 2: 84.0}
    # Validation's timing and the throughput are metrics, not the step's and not unknown.
    assert run.metrics[1]["timing/validation/total_validation_time"] == 21.4
    assert run.metrics[1]["timing/train/valid_tokens_per_sec_per_gpu"] == 1510.2
    assert run.unknown_keys == ("timing/train/training_prep",)
    assert EXPOSED_WARNING in run.warnings
    assert recorded_lengths(run).response_mean == pytest.approx((612.5 + 631.1) / 2)


def test_a_negative_nemo_rl_cell_names_its_column(tmp_path: Path) -> None:
    csv = "_step,timing/train/policy_training,timing/train/total_step_time\n1,19.9,80\n2,-3,81\n3,19.0,82\n"
    path = write(tmp_path, csv, "nemo_run.csv")
    with pytest.raises(ConfigError) as caught:
        import_record(path)
    assert caught.value.line == 3 and caught.value.field == "timing/train/policy_training"
    assert caught.value.value == "-3"


# NeMo RL's driver is the script's own process (unprefixed); its workers' output reaches the
# driver's console through Ray, prefixed, at any moment: a Python warning (a path first), a
# worker's emoji line or its own bullet lines land inside the driver's Timing block.
INTERLEAVED = """\
========================= Step 1/4 =========================
⏱️  Timing:
  • Total step time: 82.85s
  • generation: 44.02s (53.1%)
(DTensorPolicyWorker pid=812) /opt/nemo_rl/models/policy/dtensor_policy_worker.py:412: UserWarning: To copy construct from a tensor, use sourceTensor.clone()
  • policy_training: 19.87s (24.0%)
(VllmGenerationWorker pid=77, ip=10.0.0.2) ✅ engine asleep
(VllmGenerationWorker pid=77, ip=10.0.0.2)   • kv cache usage: 81%
  • policy_and_reference_logprobs: 11.45s (13.8%)
*** a stray line of the driver's stderr
  • prepare_for_generation/transfer_and_update_weights: 2.91s (3.5%)

🔍 Performance Metrics:
  • Mean Total Tokens per Sample: 833.82
"""


def test_other_processes_lines_inside_a_timing_block_do_not_end_it(tmp_path: Path) -> None:
    run = import_record(write(tmp_path, INTERLEAVED))
    assert run.steps[1] == pytest.approx(
        {
            "generate+reward": 44.02,
            "train": 19.87,
            "old_logprob+ref_logprob": 11.45,
            "weight_sync": 2.91,
        }
    )
    assert run.step_s == {1: 82.85}
    assert "kv cache usage" not in run.metrics.get(1, {})
