"""bench/gpu_pass_speed.py's comparison half (a CPU replays the H200's measurements)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_loader import load_bench

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "bench" / "gpu" / "h200-2026-11-28-c" / "pass_speed.json"


def test_a_case_is_estimated_as_the_measured_micro_batch() -> None:
    """4 rows of 2,048 tokens of the 7B: one micro-batch of 8,192 tokens; the train pass is
    the train stage less its optimizer step and per-step overhead (the measurement has
    neither); the efficiency the measurement implies is the estimate's FLOPs over the
    measured seconds at the H200's 989.5 TFLOP/s."""
    from rlplex.config.build import config_from_dict
    from rlplex.estimate import formulas as f
    from rlplex.estimate.estimator import estimate_config
    from rlplex.estimate.specs import model_presets

    bench = load_bench("gpu_pass_speed")
    case = {"model": "qwen2.5-7b", "rows": 4, "length": 2048, "recompute": False,
            "forward_s": 0.25, "train_s": 0.75, "forward_activation_gb": 10.0,
            "train_activation_gb": 60.0}  # fmt: skip
    out = bench.predict(case, "h200")
    stage = estimate_config(config_from_dict(bench.case_config(case, "h200"))).stages["train"]
    assert stage.detail["micro_batches_per_rank"] == 1
    assert stage.detail["micro_batch_tokens"] == 8192
    step_overhead = stage.detail["step_overhead_s"]
    assert step_overhead > 0 and stage.detail["cpu_optimizer_s"] > 0
    assert out["train"]["estimated_s"] == pytest.approx(
        stage.seconds - step_overhead - stage.detail["cpu_optimizer_s"]
    )
    assert out["train"]["estimated_s"] < stage.seconds - step_overhead
    flops = f.forward_flops(model_presets()["qwen2.5-7b"], 2048) * 4
    assert out["forward"]["efficiency_measured"] == pytest.approx(
        flops / (0.25 * 989.5e12), rel=0.02
    )
    # The log-prob path the bench runs: 10 bytes a logit (fp32_log_softmax), 8,192 x 152,064.
    assert out["forward"]["activation_estimated_gb"] > 8192 * 152_064 * 10 / 1e9


def test_the_h200_measurements_replay_on_a_cpu() -> None:
    """Every case of the committed measurement is estimated; 8-16K-token micro-batches come
    out 22-35 % longer than one GPU took (docs/benchmarks.md: the ``train``/``forward``
    ceilings hold what multi-GPU runs lose); the AdamW steps at the measured shares."""
    bench = load_bench("gpu_pass_speed")
    result = bench.compare(json.loads(MEASURED.read_text()))
    assert len(result["cases"]) == len(bench.CASES)
    big = [r for r in result["cases"] if r["rows"] * r["length"] >= 8192]
    assert big and all(0.2 < r[p]["error"] < 0.36 for r in big for p in ("forward", "train"))
    assert {o["model"] for o in result["optimizer"]} == set(bench.OPTIMIZER_PRESETS)
    for o in result["optimizer"]:
        for kind in ("foreach", "fused"):
            assert o[f"{kind}_estimated_s"] == pytest.approx(o[f"{kind}_s"], rel=0.12)


def test_no_cuda_measures_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine would measure 7B models here")
    bench = load_bench("gpu_pass_speed")
    assert bench.main(["--out", str(tmp_path / "m.json")]) == 0
    assert capsys.readouterr().out.strip() == bench.NOT_MEASURED
    assert not (tmp_path / "m.json").exists()


def test_one_of_measure_or_compare_is_needed() -> None:
    bench = load_bench("gpu_pass_speed")
    with pytest.raises(SystemExit) as err:
        bench.main([])
    assert err.value.code == 2
