"""Stages whose function is a stub are rehearsed, as those without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.dag.stubs import is_empty

ROOT = Path(__file__).resolve().parents[2]


def _ellipsis() -> None: ...


def _passes(x: int) -> None:
    pass


def _documented(x: int, y: int) -> None:
    """Only a docstring."""


def _returns_none() -> None:
    return None


def _works(x: int) -> int:
    return x + 1


def _prints() -> None:
    print("hi")


def _returns_zero() -> int:
    return 0


@pytest.mark.parametrize(
    ("fn", "empty"),
    [(_ellipsis, True), (_passes, True), (_documented, True), (_returns_none, True),
     (_works, False), (_prints, False), (_returns_zero, False), (len, False)],
)  # fmt: skip
def test_a_stub_is_told_from_code(fn: object, empty: bool) -> None:
    assert is_empty(fn) is empty  # type: ignore[arg-type]


def test_readmes_decorator_pipeline_is_predicted_as_rehearsed() -> None:
    """Found in review (2026-11-29): README's ``...`` bodies counted as code, so `rlplex run
    --time-scale 0.01` ran them as no-ops (0.05 s a step) and predicted 241 s; they are
    rehearsed now, and the prediction scales them as the run does."""
    from rlplex.config import load_config
    from rlplex.plan import make_plan
    from rlplex.reports.run import predicted_period

    cfg = load_config(ROOT / "examples" / "python.yaml")
    plan = make_plan(cfg)
    assert all(s.fn is not None for s in cfg.pipeline.stages if not s.is_weight_sync)
    assert predicted_period(plan, cfg, 3, 0.01) == pytest.approx(plan.period_s * 0.01, rel=0.05)
