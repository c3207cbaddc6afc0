"""TensorBoard event files as records, written by the writer verl, NeMo RL, OpenRLHF and ROLL
use (``torch.utils.tensorboard.SummaryWriter``)."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.timeline.importers import detect_record_format, import_record
from rlplex.timeline.importers.tensorboard import frame, masked_crc32c

pytest.importorskip("tensorboard")
SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART_CSV = ROOT / "examples" / "records" / "verl_quickstart_wandb.csv"


def write_run(folder: Path, rows: dict[int, dict[str, float]], *, new_style: bool = False) -> Path:
    """One run's event file with ``rows`` (step -> tag -> value), as a framework writes it."""
    writer = SummaryWriter(str(folder))
    writer.add_text("train/generated_samples", "Sample: 1 + 1 = 2", 0)  # text: not a scalar
    for step, values in rows.items():
        for tag, value in values.items():
            writer.add_scalar(tag, value, step, new_style=new_style)
    writer.close()
    (file,) = folder.glob("*tfevents*")
    return file


def quickstart_rows() -> dict[int, dict[str, float]]:
    """The example wandb export's steps, as verl's tracker logs them to TensorBoard too."""
    rows: dict[int, dict[str, float]] = {}
    with QUICKSTART_CSV.open() as handle:
        for row in csv.DictReader(handle):
            step = int(row["_step"])
            rows[step] = {
                k: float(v) for k, v in row.items() if k and not k.startswith("_") and v != ""
            }
    return rows


def test_verls_scalars_read_as_its_wandb_export(tmp_path: Path) -> None:
    write_run(tmp_path / "run", quickstart_rows())
    from_events = import_record(tmp_path / "run")
    from_csv = import_record(QUICKSTART_CSV)
    assert from_events.format == "tensorboard"
    assert from_events.steps.keys() == from_csv.steps.keys()
    for step, stages in from_csv.steps.items():
        # The event file keeps float32: the same figures to 7 digits.
        assert from_events.steps[step] == pytest.approx(stages, rel=1e-6)
        assert from_events.step_s[step] == pytest.approx(from_csv.step_s[step], rel=1e-6)
    assert from_events.metrics[3]["critic/score/mean"] == pytest.approx(0.29, rel=1e-6)


def test_tensor_scalars_as_tensorflow_2_writes_them(tmp_path: Path) -> None:
    write_run(tmp_path, {1: {"timing_s/gen": 21.5, "timing_s/step": 68.25}}, new_style=True)
    run = import_record(tmp_path)
    assert run.steps == {1: {"generate": 21.5}} and run.step_s == {1: 68.25}


def test_one_event_file_detected_by_its_content_whatever_its_name(tmp_path: Path) -> None:
    file = write_run(tmp_path / "run", {1: {"timing_s/gen": 3.0, "timing_s/step": 9.0}})
    renamed = tmp_path / "record.bin"
    shutil.copy(file, renamed)
    assert detect_record_format(renamed) == "tensorboard"
    assert import_record(renamed).step_s == {1: 9.0}


def test_nemo_rl_openrlhf_and_roll_timers_by_their_own_mappings(tmp_path: Path) -> None:
    nemo = {
        1: {
            "timing/train/generation": 80.0,
            "timing/train/policy_training": 40.0,
            "timing/train/total_step_time": 130.0,
            "train/mean_gen_tokens_per_sample": 700.0,
        }
    }
    write_run(tmp_path / "nemo", nemo)
    run = import_record(tmp_path / "nemo")
    assert run.steps[1]["train"] == 40.0 and run.step_s == {1: 130.0}
    assert any(len(members) == 2 for members in run.joint.values())  # generate + reward

    openrlhf = {3: {"train/timing/broadcast": 2.5, "train/timing/step_total": 60.0}}
    write_run(tmp_path / "openrlhf", openrlhf)
    run = import_record(tmp_path / "openrlhf")
    assert run.steps == {3: {"weight_sync": 2.5}} and run.step_s == {3: 60.0}

    # ROLL's time/step_total logged at step N is step N-1's.
    roll = {
        1: {"time/step_generate": 30.0, "time/step_train": 20.0, "time/step_total": 99.0},
        2: {"time/step_generate": 31.0, "time/step_train": 21.0, "time/step_total": 55.0},
    }
    write_run(tmp_path / "roll", roll)
    run = import_record(tmp_path / "roll")
    assert run.steps[2] == {"generate": 31.0, "train": 21.0}
    assert run.step_s == {0: 99.0, 1: 55.0}


def test_a_resumed_run_keeps_the_later_file_s_steps(tmp_path: Path) -> None:
    first = write_run(tmp_path / "a", {s: {"timing_s/step": 10.0 + s} for s in range(1, 5)})
    second = write_run(tmp_path / "b", {s: {"timing_s/step": 20.0 + s} for s in range(3, 6)})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # Event files are named by their start time: the resumed run's sorts after.
    shutil.copy(first, run_dir / "events.out.tfevents.1700000000.host.1.0")
    shutil.copy(second, run_dir / "events.out.tfevents.1700009999.host.2.0")
    run = import_record(run_dir)
    assert run.step_s == {1: 11.0, 2: 12.0, 3: 23.0, 4: 24.0, 5: 25.0}
    assert any("logged again" in w and "steps 3-4" in w for w in run.warnings)


def test_a_resumed_run_whose_first_file_the_crash_cut_short_is_read(tmp_path: Path) -> None:
    # The run crashed mid-write (its last record cut short), then resumed into a new file:
    # the cut record is the crash's, as at the end of the last file, not a corrupt file.
    first = write_run(tmp_path / "a", {s: {"timing_s/step": 10.0 + s} for s in range(1, 5)})
    second = write_run(tmp_path / "b", {s: {"timing_s/step": 20.0 + s} for s in range(3, 6)})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "events.out.tfevents.1700000000.host.1.0").write_bytes(first.read_bytes()[:-7])
    shutil.copy(second, run_dir / "events.out.tfevents.1700009999.host.2.0")
    run = import_record(run_dir)
    assert run.step_s == {1: 11.0, 2: 12.0, 3: 23.0, 4: 24.0, 5: 25.0}
    assert any(
        "events.out.tfevents.1700000000.host.1.0" in w and "cut short by a crash" in w
        for w in run.warnings
    )


def test_a_folder_of_several_runs_is_refused_naming_them(tmp_path: Path) -> None:
    write_run(tmp_path / "project" / "ppo-a", {1: {"timing_s/step": 1.0}})
    write_run(tmp_path / "project" / "ppo-b", {1: {"timing_s/step": 2.0}})
    with pytest.raises(ConfigError, match=r"2 runs \(ppo-a, ppo-b\)"):
        import_record(tmp_path / "project")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="no TensorBoard event file"):
        import_record(empty, format="tensorboard")


def test_masked_crc32c_is_tensorflows() -> None:
    # CRC-32C of "123456789" is 0xE3069283 (RFC 3720's check value), then masked.
    crc = 0xE3069283
    assert masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as theirs

    for data in (b"", b"\x00" * 8, b"brain.Event:2", bytes(range(256))):
        assert masked_crc32c(data) == theirs(data)


def test_a_record_cut_short_at_the_end_is_dropped_one_in_the_middle_is_refused(
    tmp_path: Path,
) -> None:
    file = write_run(tmp_path / "run", {s: {"timing_s/step": float(s)} for s in range(1, 4)})
    whole = file.read_bytes()
    file.write_bytes(whole[:-7])  # a crash mid-write
    run = import_record(tmp_path / "run")
    assert run.step_s == {1: 1.0, 2: 2.0}
    assert any("cut short" in w for w in run.warnings)

    broken = bytearray(whole)
    broken[len(whole) // 2 : len(whole) // 2 + 12] = b"\xff" * 12
    bad = tmp_path / "bad" / "events.out.tfevents.1.host.1.0"
    bad.parent.mkdir()
    bad.write_bytes(bytes(broken))
    with pytest.raises(ConfigError, match="the record at byte"):
        import_record(bad)
    # Framed but not an Event: refused, or skipped with --skip-bad-lines.
    garbage = tmp_path / "garbage" / "events.out.tfevents.2.host.1.0"
    garbage.parent.mkdir()
    garbage.write_bytes(whole + frame(b"\x0f\xff") + frame(whole[:0]))
    with pytest.raises(ConfigError, match="not an Event"):
        import_record(garbage)
    skipped = import_record(garbage, skip_bad_lines=True)
    assert skipped.step_s == {1: 1.0, 2: 2.0, 3: 3.0}


def test_a_negative_timer_names_its_step_and_tag(tmp_path: Path) -> None:
    write_run(tmp_path, {7: {"timing_s/gen": -1.0, "timing_s/step": 3.0}})
    with pytest.raises(ConfigError, match=r"step 7, tag 'timing_s/gen'.*finite duration"):
        import_record(tmp_path)


def test_scalars_with_no_timer_are_refused_naming_some(tmp_path: Path) -> None:
    write_run(tmp_path, {1: {"reward/mean": 0.5}})
    with pytest.raises(ConfigError, match=r"no scalar is a stage or step time.*reward/mean"):
        import_record(tmp_path)


def _replay(record: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    config = ROOT / "examples" / "estimate_verl_quickstart.yaml"
    return subprocess.run(
        [sys.executable, "-m", "rlplex.cli", "replay", str(record), "--config", str(config),
         *extra],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip


def test_replay_of_a_run_folder_on_the_command_line(tmp_path: Path) -> None:
    import json

    write_run(tmp_path / "run", quickstart_rows())
    out = _replay(tmp_path / "run", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    from_csv = _replay(QUICKSTART_CSV, "--json")
    events, csv_steps = json.loads(out.stdout)["steps"], json.loads(from_csv.stdout)["steps"]
    assert [s["step"] for s in events] == [s["step"] for s in csv_steps]
    for a, b in zip(events, csv_steps, strict=True):
        assert a["predicted_s"] == pytest.approx(b["predicted_s"], rel=1e-5)
        assert a["recorded_s"] == pytest.approx(b["recorded_s"], rel=1e-6)
    write_run(tmp_path / "other", {1: {"timing_s/step": 1.0}})
    bad = _replay(tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "2 runs (other, run)" in bad.stderr


def test_openrlhf_steps_are_read_by_their_other_scalars_as_in_its_history(
    tmp_path: Path,
) -> None:
    """A frozen actor's step (a critic loss and no policy loss): ``ppo_train`` is the
    critic's alone, as the same row of a wandb history reads."""
    timers = {
        "train/timing/generation": 100.0,
        "train/timing/make_experience": 30.0,
        "train/timing/ppo_train": 50.0,
        "train/timing/broadcast": 5.0,
        "train/timing/step_total": 185.0,
    }
    rows = {
        1: {**timers, "train/critic_loss": 0.3},
        2: {**timers, "train/critic_loss": 0.2, "train/policy_loss": 0.1},
    }
    write_run(tmp_path / "run", rows)
    run = import_record(tmp_path / "run")
    history = tmp_path / "history.csv"
    keys = sorted({k for row in rows.values() for k in row})
    history.write_text(
        "train/global_step," + ",".join(keys) + "\n"
        + "\n".join(f"{s}," + ",".join(str(r.get(k, "")) for k in keys) for s, r in rows.items())
        + "\n"
    )  # fmt: skip
    from_csv = import_record(history)
    assert run.steps == from_csv.steps
    assert run.steps[1]["critic_train"] == 50.0
    assert "critic_train" not in run.steps[2]  # joint with train on step 2
    assert any("critic_train alone" in w for w in run.warnings)


def test_every_scalar_decoded_as_tensorboards_own_reader_reads_it(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    from rlplex.timeline.importers.tensorboard import _event, _Reader

    rows = {s: {"timing_s/gen": 1.5 * s, "critic/score/mean": -0.25 * s} for s in range(1, 4)}
    rows[2]["timing_s/step"] = 1e30  # float32's range
    rows[3]["response_length/max"] = 2**24  # exactly a float32
    files = [write_run(tmp_path / "a", rows), write_run(tmp_path / "b", rows, new_style=True)]
    for file in files:
        theirs = {}
        for event in EventFileLoader(str(file)).Load():
            for value in event.summary.value:
                array = tensor_util.make_ndarray(value.tensor)
                if array.dtype.kind == "f":  # the text's tensor is a string
                    theirs[(event.step, value.tag)] = float(array)
        ours = {}
        for _, payload in _Reader(False).records(file):
            step, values = _event(payload)
            ours.update({(step, tag): float(v) for tag, v in values.items()})
        assert ours == theirs and len(ours) == 8
