"""Import an rlplex Timeline record (JSON lines) as per-step stage durations.

Each ``run`` or ``weight_sync`` event contributes ``end_s - start_s`` to its
stage in its step; offload and reload events are not stages: their durations
go to :attr:`RecordedRun.transfers` under their op id without the step prefix,
so a replay through the plan that ran uses them (a what-if, which moves other
states, models its own). A step's recorded time is its
metrics' ``step_s`` when present, else the span from its first op's start to
its last op's end. A step whose metrics say ``incomplete`` (the run failed or
was stopped during it) is left out, with a warning: its missing stages would
otherwise be replayed as if they had run.
"""

from __future__ import annotations

from pathlib import Path

from rlplex.plan.ids import COMPUTE_KINDS, TRANSFER_KINDS, OpId
from rlplex.timeline.importers.base import (
    Collector,
    RecordedRun,
    as_float,
    parse_json,
    read_lines,
)


def import_rlplex(path: str | Path, *, skip_bad_lines: bool = False) -> RecordedRun:
    """Read a Timeline JSONL file.

    Raises:
        ConfigError: a malformed line that is not the last (unless skipping).
    """
    out = Collector("rlplex", str(path), skip_bad_lines)
    spans: dict[int, list[float]] = {}
    for number, line, is_last in read_lines(path):
        out.at(number, line, is_last)
        obj, why = parse_json(line)
        if why is not None:
            out.bad_line(number, why, line, is_last)
            continue
        if not isinstance(obj, dict):
            out.bad_line(number, "not a JSON object", line, is_last)
            continue
        if "meta" in obj and "step" not in obj:
            continue
        step = obj.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            out.bad_line(number, "has no integer 'step'", line, is_last)
            continue
        if "metrics" in obj and "op" not in obj:
            if not out.first_time(("metrics", step), f"the metrics of step {step}"):
                continue
            metrics = obj["metrics"] if isinstance(obj["metrics"], dict) else {}
            for key, value in metrics.items():
                seconds = as_float(value) if key == "step_s" else None
                if seconds is not None:
                    if out.valid_seconds(f"step_s of step {step}", seconds):
                        out.step_s[step] = seconds
                else:
                    out.metric(step, key, value)
            continue
        start, end = as_float(obj.get("start_s")), as_float(obj.get("end_s"))
        if start is None or end is None or not isinstance(obj.get("kind"), str):
            out.bad_line(number, "an event needs 'kind', 'start_s' and 'end_s'", line,
                         is_last)  # fmt: skip
            continue
        name = obj.get("op") or obj.get("stage")
        # end - start is NaN or infinite whenever either end is: one check covers both.
        if not out.valid_seconds(f"op {name!r} of step {step}", end - start):
            continue
        if not out.first_time((step, str(name)), f"op {name!r} of step {step}"):
            continue
        span = spans.setdefault(step, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
        if obj["kind"] in COMPUTE_KINDS and obj.get("stage"):
            out.stage(step, str(obj["stage"]), end - start)
        elif obj["kind"] in TRANSFER_KINDS and isinstance(obj.get("op"), str):
            op = OpId.parse(obj["op"], step)
            out.transfer(step, op.name if op.step == step else obj["op"], end - start)
    dropped = _drop_unfinished_last_step(out)
    for step, (start, end) in spans.items():
        if step != dropped:
            out.step_s.setdefault(step, end - start)
    for step, metrics in out.metrics.items():
        if metrics.get("incomplete") is True:
            for table in (out.steps, out.step_s, out.transfers):
                table.pop(step, None)
            why = metrics.get("failure")
            out.warnings.append(
                f"step {step} is incomplete (the run stopped during it"
                + (f": {why}" if why else "")
                + "); left out"
            )
    return out.result()


def _drop_unfinished_last_step(out: Collector) -> int | None:
    """Leave out a last step with no metrics event (the recorder writes one as each step
    ends) that lacks a stage every earlier step has: the run stopped (killed, crashed without
    a word, still running) part way through it. Replayed, its missing stages would take their
    modelled seconds beside recorded ones of another scale. Returns the step left out."""
    if len(out.steps) < 2:
        return None
    last = max(out.steps)
    if ("metrics", last) in out.first_seen:
        return None
    earlier = [set(stages) for step, stages in out.steps.items() if step != last]
    missing = sorted(set.intersection(*earlier) - set(out.steps[last]))
    if not missing:
        return None
    for table in (out.steps, out.step_s, out.transfers, out.metrics):
        table.pop(last, None)
    out.warnings.append(
        f"step {last} stops part way (no {', '.join(missing)}, which every earlier step has"
        " and no metrics): the run ended during it; left out"
    )
    return last
