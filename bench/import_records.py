"""Benchmark: generate and import 100,000 recorded steps of verl and ROLL logs.

Writes a verl file-logger JSONL, a verl console log (Ray-prefixed), a ROLL
stdout log and a TensorBoard event file of verl's scalars (framed as TensorBoard's
writer frames them: the format is checked against TensorBoard's own writer and reader in
``tests/timeline/test_tensorboard_importer.py``; written here directly, since
``SummaryWriter`` takes about a minute for 800,000 scalars) of N steps each to a
temporary folder, imports each with
:func:`rlplex.timeline.importers.import_record`, and prints the seconds per
import. Target: under 10 s for 100,000 steps (replay timing is added by the
replay benchmark).

    .venv/bin/python bench/import_records.py [--steps 100000]
"""

from __future__ import annotations

import argparse
import json
import struct
import tempfile
import time
from pathlib import Path

from rlplex.timeline.importers import import_record
from rlplex.timeline.importers.tensorboard import frame

VERL_STAGES = {
    "gen": 21.5,
    "ref": 4.3,
    "values": 5.9,
    "adv": 0.11,
    "update_critic": 15.7,
    "update_actor": 20.4,
}


def write_logs(folder: Path, steps: int) -> dict[str, Path]:
    paths = {
        "verl jsonl": folder / "verl.jsonl",
        "verl console": folder / "verl_console.log",
        "roll stdout": folder / "roll.log",
    }
    with paths["verl jsonl"].open("w") as jsonl, paths["verl console"].open("w") as console:
        for step in range(steps):
            jitter = 1 + (step % 7) / 100
            data = {f"timing_s/{k}": round(v * jitter, 3) for k, v in VERL_STAGES.items()}
            data["timing_s/step"] = round(sum(data.values()) + 1.2, 3)
            data["critic/score/mean"] = 0.5
            jsonl.write(json.dumps({"step": step, "data": data}) + "\n")
            items = " - ".join(f"{k}:{v}" for k, v in data.items())
            console.write(f"(TaskRunner pid=4242) step:{step} - {items}\n")
    with paths["roll stdout"].open("w") as roll:
        for step in range(steps):
            metrics = {
                "time/step_generate": 90.0, "time/ref_log_probs_values": 10.0,
                "time/old_log_probs": 9.5, "time/step_train": 42.0,
                "time/step_model_update": 3.0, "time/step_total": 156.0,
            }  # fmt: skip
            roll.write(
                f"[INFO] step {step}\nmetrics_tag: "
                + json.dumps({"step": step, "metrics": metrics})
                + "\n"
            )
    paths["tensorboard"] = folder / "run" / "events.out.tfevents.1700000000.host.1.0"
    paths["tensorboard"].parent.mkdir()
    with paths["tensorboard"].open("wb") as events:
        events.write(frame(_event(0, file_version=b"brain.Event:2")))
        for step in range(steps):
            jitter = 1 + (step % 7) / 100
            data = {f"timing_s/{k}": v * jitter for k, v in VERL_STAGES.items()}
            data["timing_s/step"] = sum(data.values()) + 1.2
            data["critic/score/mean"] = 0.5
            for tag, value in data.items():
                events.write(frame(_event(step, tag=tag, value=value)))
    return paths


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(step: int, *, tag: str = "", value: float = 0.0, file_version: bytes = b"") -> bytes:
    """An ``Event`` (wall_time 1, step 2, file_version 3, summary 5) of one scalar."""
    head = b"\x09" + struct.pack("<d", 1.7e9 + step) + b"\x10" + _varint(step)
    if file_version:
        return head + _field(3, file_version)
    scalar = _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
    return head + _field(5, _field(1, scalar))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_logs(Path(tmp), args.steps)
        print("| log | steps | import s |\n|---|---|---|")
        for label, path in paths.items():
            start = time.perf_counter()
            run = import_record(path.parent if label == "tensorboard" else path)
            seconds = time.perf_counter() - start
            assert len(run.steps) == args.steps, (label, len(run.steps))
            print(f"| {label} | {args.steps:,} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
