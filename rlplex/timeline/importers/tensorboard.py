"""Import TensorBoard event files: the scalars verl, NeMo RL, OpenRLHF and ROLL log there.

Many runs log to TensorBoard rather than wandb (no account, no network on the
cluster), and the event files are then all a user has of the run's timings. Each of
the four frameworks writes its step metrics with ``torch.utils.tensorboard``'s
``SummaryWriter.add_scalar(tag, value, step)``, under the names it gives wandb:

- verl (``verl/utils/tracking.py``, ``_TensorboardAdapter.log``): every key of the
  step's dict, ``timing_s/gen`` ... ``timing_s/step``, at the trainer's step;
- NeMo RL (``nemo_rl/utils/logger.py``, ``TensorboardLogger.log_metrics``): the timers
  under ``timing/train/``, the rest under ``train/``, at the step its wandb gets;
- OpenRLHF (``openrlhf/utils/logging_utils.py``, ``TensorboardLogger.log_train``): the
  step's dict under ``train/`` (its timers ``train/timing/NAME``) at ``global_step``, the
  evaluations under ``eval/``;
- ROLL (``roll/utils/tracking.py``, ``TensorBoardTracker.log``): its ``time/NAME`` keys
  at the step (``time/step_total`` lags one step, as in its console lines).

So a run's scalars, gathered per step, are read by the same mappings as a wandb
history (:func:`rlplex.timeline.importers.history.add_value`), or ROLL's
(:func:`rlplex.timeline.importers.roll.add_step`) when a tag is one of ROLL's timers.

The format (TensorFlow's TFRecord of ``Event`` protocol buffers, as
``tensorboard/summary/writer/record_writer.py`` writes it): each record is a
little-endian uint64 length, the masked CRC-32C of those 8 bytes, the payload, and the
masked CRC-32C of the payload. The payload is an ``Event`` (``tensorboard/compat/proto/
event.proto``: ``wall_time`` 1, ``step`` 2, ``file_version`` 3, ``summary`` 5), whose
``Summary`` holds ``Value``\\ s (``tag`` 1, ``simple_value`` 2, ``tensor`` 8): a scalar is
``simple_value`` (``add_scalar``'s default) or a one-element ``TensorProto`` (``dtype`` 1,
``tensor_content`` 4, ``float_val`` 5, ``double_val`` 6, ``int_val`` 7, ``int64_val``
10; TensorFlow 2's ``tf.summary.scalar``). Decoded here with the protobuf wire rules, so
rlplex needs neither TensorBoard nor TensorFlow. Text, images, histograms and
non-scalar tensors are not read.

A path is one event file, or a run's folder: every ``*tfevents*`` file in it and below,
read in name order (the writer names each file by its start time, so a resumed run's
file comes after the first). A folder whose event files sit in several folders holds
several runs (TensorBoard's ``--logdir`` of a project) and is refused, naming them. A
step logged again in a later file (a run resumed from a checkpoint redoes the steps after
it) keeps the later values, with a warning. Each record's length CRC is checked (a
record that does not frame is a corrupt file, refused unless ``--skip-bad-lines``); a
record cut short at the end of a file is a crash mid-write, dropped with a warning: of the
last file, or of an earlier one (the run that crashed, then was resumed from a checkpoint
into a new file).
Errors name the file and the record's byte offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlplex.errors import ConfigError
from rlplex.timeline.importers import openrlhf, roll
from rlplex.timeline.importers.base import Collector, RecordedRun, check_record_path

FORMAT = "tensorboard"
MARKER = "tfevents"
"""In every event file's name: ``events.out.tfevents.<time>.<host>.<pid>.<n>``."""
FILE_VERSION = b"brain.Event:"
"""The first event of every file says its version (``brain.Event:2``)."""
HEADER_BYTES = 12
"""A record's length (8 bytes) and its masked CRC (4)."""

# Field numbers of tensorboard/compat/proto/{event,summary,tensor}.proto.
_EVENT_STEP, _EVENT_FILE_VERSION, _EVENT_SUMMARY = 2, 3, 5
_SUMMARY_VALUE = 1
_VALUE_TAG, _VALUE_SIMPLE, _VALUE_TENSOR = 1, 2, 8
_TENSOR_DTYPE, _TENSOR_SHAPE, _TENSOR_CONTENT = 1, 2, 4
_TENSOR_FLOAT, _TENSOR_DOUBLE, _TENSOR_INT, _TENSOR_INT64 = 5, 6, 7, 10
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64 = 1, 2, 3, 9
_CONTENT_FORMAT = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q"}


def _crc32c_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC32C = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C (Castagnoli), rotated right by 15 and offset."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    """``payload`` as one TFRecord record: its length, the length's masked CRC, the payload,
    the payload's masked CRC (the writer's framing; the benchmark and the tests write with
    it)."""
    length = struct.pack("<Q", len(payload))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + payload
        + struct.pack("<I", masked_crc32c(payload))
    )


class WireError(ValueError):
    """A payload that is not a protocol buffer."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireError("a varint runs past its message")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field of a message: an int for varints, the
    raw bytes for fixed64/fixed32/length-delimited fields."""
    pos, end = 0, len(data)
    while pos < end:
        # One-byte keys and lengths are nearly all of them: read without a call.
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            if pos < end and data[pos] < 0x80:
                size, pos = data[pos], pos + 1
            else:
                size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        else:  # groups (3, 4) are not in these messages
            raise WireError(f"wire type {wire} of field {number}")
        if pos > end:
            raise WireError(f"field {number} runs past its message")
        yield number, wire, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _packed(raw: bytes, wire: int, fmt: str) -> list[float | int]:
    """A repeated numeric field: packed (one length-delimited run) or one element."""
    if wire == 0:
        return [_signed64(raw)] if isinstance(raw, int) else []
    if fmt in ("<f", "<d") and wire in (1, 5):
        return [struct.unpack(fmt, raw)[0]]
    if fmt in ("<f", "<d"):
        size = struct.calcsize(fmt)
        return [v[0] for v in struct.iter_unpack(fmt, raw[: len(raw) // size * size])]
    values, pos = [], 0
    while pos < len(raw):
        value, pos = _varint(raw, pos)
        values.append(_signed64(value))
    return values


def _tensor_scalar(data: bytes) -> float | int | None:
    """A ``TensorProto`` holding one number, or None (text, a vector, an unknown type)."""
    dtype, content, values, dims = 0, b"", [], 0
    for number, wire, value in _fields(data):
        if number == _TENSOR_DTYPE and wire == 0:
            dtype = value
        elif number == _TENSOR_SHAPE and wire == 2:
            dims = sum(1 for n, _, _ in _fields(value) if n == 2)  # TensorShapeProto.dim
        elif number == _TENSOR_CONTENT and wire == 2:
            content = value
        elif number == _TENSOR_FLOAT:
            values += _packed(value, wire, "<f")
        elif number == _TENSOR_DOUBLE:
            values += _packed(value, wire, "<d")
        elif number in (_TENSOR_INT, _TENSOR_INT64):
            values += _packed(value, wire, "<q")
    if dims or dtype not in _CONTENT_FORMAT:
        return None
    if content:
        fmt = _CONTENT_FORMAT[dtype]
        return struct.unpack(fmt, content)[0] if len(content) == struct.calcsize(fmt) else None
    return values[0] if len(values) == 1 else None


def _scalars(summary: bytes) -> Iterator[tuple[str, float | int]]:
    """(tag, number) of each scalar value of a ``Summary``."""
    for number, _, value in _fields(summary):
        if number != _SUMMARY_VALUE:
            continue
        tag, scalar = None, None
        for field, wire, raw in _fields(value):
            if field == _VALUE_TAG and wire == 2:
                tag = raw.decode("utf-8", errors="replace")
            elif field == _VALUE_SIMPLE and wire == 5:
                scalar = struct.unpack("<f", raw)[0]
            elif field == _VALUE_TENSOR and wire == 2:
                scalar = _tensor_scalar(raw)
        if tag is not None and scalar is not None:
            yield tag, scalar


def event_files(path: str | Path) -> list[Path]:
    """The event files of ``path``: itself, or a run folder's ``*tfevents*`` files in name
    order.

    Raises:
        ConfigError: a folder with no event file, or with event files in several folders.
    """
    path = Path(path)
    if not path.is_dir():
        return [check_record_path(path)]
    files = sorted(p for p in path.rglob(f"*{MARKER}*") if p.is_file())
    if not files:
        raise ConfigError(
            f"is a directory with no TensorBoard event file (*{MARKER}*) in it", file=str(path)
        )
    folders = sorted({str(p.parent.relative_to(path)) for p in files})
    if len(folders) > 1:
        raise ConfigError(
            f"holds the event files of {len(folders)} runs ("
            + ", ".join(folders[:6])
            + (f" and {len(folders) - 6} more" if len(folders) > 6 else "")
            + "): give one run's folder",
            file=str(path),
        )
    return sorted(files, key=lambda p: p.name)


def looks_like_tensorboard(path: str | Path) -> bool:
    """A folder with event files, or a file named like one or starting with an event
    file's first record (its length CRC right and ``brain.Event:`` in it)."""
    path = Path(path)
    if path.is_dir():
        return any(p.is_file() for p in path.rglob(f"*{MARKER}*"))
    if MARKER in path.name:
        return True
    try:
        with path.open("rb") as handle:
            head = handle.read(256)
    except OSError:
        return False
    if len(head) < HEADER_BYTES:
        return False
    (crc,) = struct.unpack("<I", head[8:12])
    return masked_crc32c(head[:8]) == crc and FILE_VERSION in head[HEADER_BYTES:]


def _event(payload: bytes) -> tuple[int, dict[str, float | int]]:
    """An ``Event``'s step and the scalars of its summary (none for the file's version
    event, text, images ...)."""
    step, values = 0, {}
    for number, wire, value in _fields(payload):
        if number == _EVENT_STEP and wire == 0:
            step = _signed64(value)
        elif number == _EVENT_SUMMARY and wire == 2:
            values.update(_scalars(value))
    return step, values


class _Reader:
    """One import's bad-record rules: a record that does not frame or parse is an error
    (``--skip-bad-lines``: a warning), one cut short at the end of a file a crash
    mid-write, dropped with a warning."""

    def __init__(self, skip_bad_lines: bool) -> None:
        self.skip_bad_lines = skip_bad_lines
        self.skipped = 0
        self.warnings: list[str] = []

    def bad(self, file: Path, offset: int, reason: str, is_crash: bool) -> None:
        where = f"{file.name}, the record at byte {offset:,}"
        if is_crash:
            self.warnings.append(f"{where}: {reason}; a record cut short by a crash, ignored")
            return
        if self.skip_bad_lines:
            self.skipped += 1
            self.warnings.append(f"{where}: {reason}; skipped")
            return
        raise ConfigError(f"the record at byte {offset:,}: {reason}", file=str(file))

    def records(self, file: Path) -> Iterator[tuple[int, bytes]]:
        """(byte offset, payload) of each record of one event file.

        A record cut short can only be a file's last (a length that frames, then the end
        of the file): the writer that crashed there wrote nothing after it, whether or not
        a resumed run's writer opened a later file, so it is a crash in every file."""
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the file: {exc.strerror or exc}", file=str(file)
            ) from None
        pos = 0
        framed: set[bytes] = set()  # headers checked: a run's records repeat a few lengths
        while pos < len(data):
            header = data[pos : pos + HEADER_BYTES]
            if len(header) < HEADER_BYTES:
                self.bad(file, pos, "its header is cut short", True)
                return
            (length,) = struct.unpack("<Q", header[:8])
            if (
                header not in framed
                and masked_crc32c(header[:8]) != struct.unpack("<I", header[8:12])[0]
            ):
                # Without a length to trust, nothing after it frames.
                self.bad(
                    file,
                    pos,
                    "not a TensorBoard record (its length's checksum is wrong: a corrupt"
                    " file, or not an event file)",
                    False,
                )
                return
            framed.add(header)
            end = pos + HEADER_BYTES + length + 4
            if end > len(data):
                self.bad(file, pos, f"its {length:,} bytes are cut short", True)
                return
            yield pos, data[pos + HEADER_BYTES : pos + HEADER_BYTES + length]
            pos = end


class _StepCollector(Collector):
    """A collector whose bad values name their step and tag (an event file has no lines)."""

    def bad_line(self, number: int, reason: str, text: str, is_last: bool) -> None:
        where = f"step {number}" + (f", tag {self.field!r}" if self.field else "")
        if self.skip_bad_lines:
            self.skipped += 1
            self.warnings.append(f"{where}: {reason}; skipped")
            return
        raise ConfigError(f"{where}: {reason}", file=self.file, value=text[:120])


def import_tensorboard(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read a run's TensorBoard event files (a file or a run folder) into a
    :class:`RecordedRun`.

    Raises:
        ConfigError: no event file, several runs, a record that does not frame or parse
            (naming the file and its byte offset), or no timing scalar.
    """
    # history imports the importers this one shares; imported here, not at the top.
    from rlplex.timeline.importers.history import add_value, openrlhf_warnings

    files = event_files(path)
    reader = _Reader(skip_bad_lines)
    scalars: dict[int, dict[str, float | int]] = {}
    relogged: set[int] = set()
    for file in files:
        file_steps: set[int] = set()
        for offset, payload in reader.records(file):
            try:
                step, values = _event(payload)
            except WireError as exc:
                reader.bad(file, offset, f"not an Event: {exc}", False)
                continue
            if not values:
                continue
            if step in scalars and step not in file_steps:
                relogged.add(step)
                scalars[step] = {}
            file_steps.add(step)
            scalars.setdefault(step, {}).update(values)
    out = _StepCollector(FORMAT, str(path), skip_bad_lines)
    out.warnings.extend(reader.warnings)
    if relogged:
        out.warnings.append(
            f"{len(relogged)} step(s) logged again in a later event file (a resumed run):"
            f" the later values kept (steps {min(relogged)}-{max(relogged)})"
        )
    tags = {tag for values in scalars.values() for tag in values}
    is_roll = any(tag in roll.STAGES or tag == roll.TOTAL_KEY for tag in tags)
    is_openrlhf = any(tag.startswith(openrlhf.TIMING_COLUMN) for tag in tags)
    frozen: list[int] = []
    waited: list[int] = []
    for step in sorted(scalars):
        out.at(step, f"step {step}", False)
        if is_roll:
            roll.add_step(out, step, scalars[step])
            continue
        # OpenRLHF's timers are read by what the step's other values say (as its history's).
        reading = openrlhf.step_reading(scalars[step]) if is_openrlhf else openrlhf.StepReading()
        if reading.actor_frozen:
            frozen.append(step)
        if reading.waited:
            waited.append(step)
        for tag, value in scalars[step].items():
            out.at(step, repr(value), False, tag)
            add_value(out, step, tag, value, reading)
    openrlhf_warnings(out, frozen, waited)
    if not out.steps and not out.step_s:
        raise ConfigError(
            "no scalar is a stage or step time verl, NeMo RL, OpenRLHF or ROLL logs"
            f" ({len(scalars)} steps of {len(tags)} tags read, e.g. "
            + ", ".join(sorted(tags)[:4])
            + '; docs/record.md "TensorBoard")',
            file=str(path),
        )
    return out.result()
