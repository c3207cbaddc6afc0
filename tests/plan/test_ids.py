"""Op ids (``s{step}/{name}``) and op kinds, defined once."""

from __future__ import annotations

import json

import pytest

from rlplex.config import load_config
from rlplex.plan import make_plan
from rlplex.plan.ids import (
    COMPUTE_KINDS,
    TRANSFER_KINDS,
    OpId,
    OpKind,
    format_id,
    op_name,
    op_step,
    shift_id,
    transfer_name,
)


def test_parse_and_format_round_trip() -> None:
    op = OpId.parse("s12/offload/actor_train/optimizer#2")
    assert op == OpId(12, "offload/actor_train/optimizer#2")
    assert str(op) == "s12/offload/actor_train/optimizer#2" == format_id(12, op.name)
    assert OpId.parse("train", default_step=3) == OpId(3, "train")
    with pytest.raises(ValueError, match="not an op id"):
        OpId.parse("train")


def test_shift_and_helpers() -> None:
    assert OpId(2, "train").shifted(3) == OpId(5, "train")
    assert OpId(2, "train").at(0) == OpId(0, "train")
    assert shift_id("s1/weight_sync", 2) == "s3/weight_sync"
    assert shift_id("s1/weight_sync", 0) == "s1/weight_sync"
    assert op_name("s7/reload/a/weights") == "reload/a/weights"
    assert op_name("no-prefix") == "no-prefix"
    assert op_step("s7/x") == 7 and op_step("x") is None
    assert OpId(1, "b") < OpId(2, "a")


def test_transfer_names_count_repeats() -> None:
    assert transfer_name("offload", "a", "weights") == "offload/a/weights"
    assert transfer_name(OpKind.RELOAD, "a", "kv_cache", 2) == "reload/a/kv_cache#2"
    assert str(OpId.transfer(0, "reload", "a", "weights")) == "s0/reload/a/weights"
    with pytest.raises(ValueError):
        transfer_name("move", "a", "weights")


def test_kinds_are_strings_and_partition_the_ops() -> None:
    assert OpKind.RUN == "run" and f"{OpKind.WEIGHT_SYNC}" == "weight_sync"
    assert set(OpKind) == COMPUTE_KINDS | TRANSFER_KINDS
    assert not COMPUTE_KINDS & TRANSFER_KINDS


def test_plan_json_writes_kinds_as_strings() -> None:
    plan = make_plan(load_config("examples/grpo.yaml"))
    ops = json.loads(plan.to_json())["ops"]
    assert {op["kind"] for op in ops} <= {"run", "offload", "reload", "weight_sync"}
    for op in plan.ops:
        assert str(op.op_id) == op.id and op.op_id.step == op.step


def test_op_work_is_read_off_a_plan_op_without_copying_fields_by_hand() -> None:
    from dataclasses import FrozenInstanceError, fields

    from rlplex.plan.ids import OpWork

    plan = make_plan(load_config("examples/ppo.yaml"))
    for op in plan.ops:
        work = op.work()
        assert isinstance(work.kind, OpKind) and work.kind == op.kind
        assert work.devices == tuple(op.devices)
        for name in ("stage", "role", "state", "from_role", "gb", "memory_gb"):
            assert getattr(work, name) == getattr(op, name), name
        assert work.lane == ("compute" if op.kind in COMPUTE_KINDS else "transfer")
    # Every field of the description is a field of the wire op, except ``dead``
    # (an extra the planner writes only when it knows).
    wire = set(type(plan.ops[0]).model_fields)
    assert {f.name for f in fields(OpWork)} - wire == {"dead"}
    with pytest.raises(FrozenInstanceError):
        work.kind = OpKind.RUN  # type: ignore[misc]


def test_op_work_dead_comes_from_the_plans_extra_or_the_caller() -> None:
    from rlplex.plan.model import Op

    op = Op(id="s0/offload/r/w", kind="offload", start_s=0, end_s=0, role="r", state="w")
    assert op.work().dead is False
    assert op.work(dead=True).dead is True
    written = Op.model_validate({**op.model_dump(), "dead": True})
    assert written.work().dead is True
    assert written.work(dead=False).dead is False
