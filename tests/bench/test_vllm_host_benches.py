"""bench/vllm_v0_host.py, vllm_v1_host.py and vllm_eager_layers.py: the parts that run without
vLLM (its install, and the arithmetic behind ``formulas.EAGER_*_LAYERS``)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from bench_loader import load_bench

from rlplex.estimate import formulas as f


def test_install_is_done_once_and_drops_the_extension_that_breaks_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wheel and the extras go in with ``--no-deps`` (the project's torch stays); the
    ``_core_C`` extension is removed, the others kept; a second call does nothing."""
    v0 = load_bench("vllm_v0_host")
    calls: list[list[str]] = []

    def pip(cmd: list[str], check: bool) -> None:
        calls.append(cmd)
        (tmp_path / "vllm").mkdir(exist_ok=True)
        for name in ("_core_C.abi3.so", "_C.abi3.so", "_moe_C.abi3.so"):
            (tmp_path / "vllm" / name).write_bytes(b"")

    monkeypatch.setattr(subprocess, "run", pip)
    v0.install(tmp_path)
    assert len(calls) == 1
    assert "--no-deps" in calls[0] and "vllm==0.6.3" in calls[0]
    assert set(v0.V0_EXTRAS) <= set(calls[0])
    assert sorted(p.name for p in (tmp_path / "vllm").iterdir()) == ["_C.abi3.so", "_moe_C.abi3.so"]
    v0.install(tmp_path)
    assert len(calls) == 1
    v1 = load_bench("vllm_v1_host")
    v0.install(tmp_path, v1.VERSION, v1.EXTRAS)  # another version: its own install
    assert len(calls) == 2 and "vllm==0.8.5" in calls[1]


def _rows(ratios: dict[str, float]) -> list[dict[str, Any]]:
    return [{"layer": name, "ratio_to_dense": r} for name, r in ratios.items()]


def test_the_parts_of_a_layer_are_differences_of_the_measured_ratios() -> None:
    """Routed experts = MoE - dense; shared experts = MoE with - without; MLA = DeepSeek dense -
    dense; grouped top-k = (DeepSeek MoE - DeepSeek dense) - (MoE with shared - dense)."""
    bench = load_bench("vllm_eager_layers")
    ratios = {
        "Qwen2 dense": 1.0,
        "Qwen2-MoE, no shared expert (Qwen3-MoE's routing)": 1.43,
        "Qwen2-MoE, shared expert": 1.88,
        "DeepSeek-V2 dense (MLA)": 2.56,
        "DeepSeek-V2 MoE (MLA, grouped top-k, shared experts)": 4.00,
    }
    parts = bench.components(_rows(ratios))
    assert list(parts.values()) == pytest.approx([0.43, 0.45, 1.56, 0.56])
    # The constants the estimator uses are those parts (the medians of five such runs), and a
    # DeepSeek-V3 MoE layer adds up to the measured DeepSeek MoE layer within the runs' spread.
    v3_moe_layer = 1 + f.EAGER_MLA_LAYERS + f.EAGER_MOE_LAYERS
    v3_moe_layer += f.EAGER_SHARED_EXPERT_LAYERS + f.EAGER_GROUPED_TOPK_LAYERS
    assert v3_moe_layer == pytest.approx(4.0, abs=0.1)
