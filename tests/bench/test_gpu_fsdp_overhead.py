"""bench/gpu_fsdp_overhead.py on a machine without CUDA, and its ratios."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_loader import load_bench


def test_ratios_are_fsdp_over_plain() -> None:
    bench = load_bench("gpu_fsdp_overhead")
    case = {
        "plain": {"forward_s": 0.1, "train_s": 0.3},
        "fsdp": {"forward_s": 0.12, "train_s": 0.33},
    }
    assert bench.ratios(case) == {"forward": pytest.approx(1.2), "train": pytest.approx(1.1)}


def test_no_cuda_measures_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine would measure a 7B model here")
    bench = load_bench("gpu_fsdp_overhead")
    assert bench.main(["--out", str(tmp_path / "m.json")]) == 0
    assert capsys.readouterr().out.strip() == bench.NOT_MEASURED
    assert not (tmp_path / "m.json").exists()
