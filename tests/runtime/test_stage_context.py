"""A stage's call waits for the GPU work it queued (``rlplex.runtime.context``)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from rlplex.runtime.context import StageContext, WorkerInfo, call_stage, wait_for_device


class FakeStream:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def synchronize(self) -> None:
        self.log.append("stream synchronized")


def fake_torch(log: list[str], *, available: bool, initialized: bool) -> Any:
    cuda = types.SimpleNamespace(
        is_available=lambda: available,
        is_initialized=lambda: initialized,
        current_stream=lambda: FakeStream(log),
        synchronize=lambda: log.append("device synchronized"),
    )
    return types.SimpleNamespace(cuda=cuda)


def test_a_stage_returns_after_its_queued_gpu_work(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    monkeypatch.setitem(sys.modules, "torch", fake_torch(log, available=True, initialized=True))

    def stage(ctx: StageContext) -> int:
        log.append("stage ran")
        return 7

    ctx = StageContext(step=0, stage="train", info=WorkerInfo(role="actor"))
    assert call_stage(stage, ctx, {}) == 7
    # Only this thread's stream: a transfer on the side stream is not waited for.
    assert log == ["stage ran", "stream synchronized"]


@pytest.mark.parametrize(("available", "initialized"), [(False, False), (True, False)])
def test_no_wait_where_nothing_was_queued(
    monkeypatch: pytest.MonkeyPatch, available: bool, initialized: bool
) -> None:
    log: list[str] = []
    torch = fake_torch(log, available=available, initialized=initialized)
    monkeypatch.setitem(sys.modules, "torch", torch)
    wait_for_device()
    assert log == []


def test_no_torch_import_for_a_process_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    wait_for_device()
    assert "torch" not in sys.modules
