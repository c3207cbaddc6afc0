"""Peak memory per GPU of a plan: the figure, the moment, the residents."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.plan import make_plan
from rlplex.plan.peaks import peak_memory_by_device

ROOT = Path(__file__).resolve().parents[2]


def test_colocated_peak_is_generation_with_everything_resident() -> None:
    cfg = load_config(ROOT / "examples" / "estimate_7b.yaml")
    plan = make_plan(cfg)
    peaks = peak_memory_by_device(plan)
    assert set(peaks) == set(range(8))
    top = peaks[0]
    assert top.peak_gb <= plan.capacity_gb
    assert top.peak_gb == pytest.approx(sum(top.resident.values()) + top.transient_gb)
    assert top.during is not None and top.during.endswith("/generate")
    assert "actor_infer.kv_cache" in top.resident
    assert top.headroom_gb == pytest.approx(cfg.cluster.gpu_memory_gb - top.peak_gb)


def test_offloads_bound_the_peak() -> None:
    cfg = load_config(ROOT / "examples" / "toy_grpo.yaml")
    plan = make_plan(cfg)
    peak = peak_memory_by_device(plan)[0]
    everything = sum(sum(states.values()) for states in plan.states.values())
    assert everything > plan.capacity_gb >= peak.peak_gb > 0


def test_plan_prints_memory_and_marks_estimates() -> None:
    result = CliRunner().invoke(app, ["plan", str(ROOT / "examples" / "estimate_7b.yaml")])
    assert result.exit_code == 0, result.output
    assert "memory per GPU at its peak" in result.output
    assert "headroom" in result.output
    assert "* estimated: 5 stage times, 3 roles' states" in result.output
    shown = CliRunner().invoke(app, ["show", str(ROOT / "examples" / "estimate_7b.yaml")])
    assert "weights 1.903*" in shown.output
