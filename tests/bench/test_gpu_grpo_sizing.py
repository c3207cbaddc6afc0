"""bench/gpu_grpo.py's sizing of the toy (runs on a CPU; the bench itself needs CUDA)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from bench_loader import load_bench

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


def test_the_toy_is_sized_from_its_model_and_batch_by_hand() -> None:
    """8 layers x 1024 hidden (16 heads of 64, MLP 2816, vocab 16), fp32: 102.8M parameters;
    32 prompts x 8 samples of bos + 3 digits + 2 answer tokens."""
    from rlplex.pipelines.config import RLConfig

    bench = load_bench("gpu_grpo")
    cfg = RLConfig(device="cpu", model=bench.MODELS["8x1024"])
    states, stages = bench.toy_memory(cfg)
    h, layers, mlp, vocab = 1024, 8, 2816, 16
    params = layers * (4 * h * h + 3 * h * mlp + 2 * h) + 2 * vocab * h + h
    weights = params * 4 / 1e9
    # The gradients live inside the train stage only (dropped after each optimizer step).
    assert states["actor_train"] == pytest.approx({"weights": weights, "optimizer": 2 * weights})
    tokens = 256 * 6
    kv = tokens * layers * 2 * h * 4 / 1e9  # K and V of every layer, 16 heads x 64, fp32
    assert states["actor_infer"] == pytest.approx({"weights": weights, "kv_cache": kv})
    micro = 64 * 6
    per_layer = (4 * h + 2 * h + 2 * h + 4 * mlp) * 4 + 8 * h  # fused set + the norms' copies
    forward = (per_layer * micro + micro * vocab * 4) / 1e9
    backward = (layers * per_layer * micro + 2 * micro * vocab * 4) / 1e9
    assert stages["ref_logprob"] == stages["old_logprob"] == pytest.approx(forward)
    # The train step: its gradients, and AdamW's moment-sized temporary (0.41 GB), which
    # outgrows the activations.
    assert backward < weights
    assert stages["train"] == pytest.approx(2 * weights)
    # A GPU that holds the largest role and its step but not every state at once.
    gpu = bench.shared_gpu_gb(states, stages)
    everything = sum(sum(s.values()) for s in states.values())
    assert 4 * weights + weights <= gpu < everything + weights


def test_the_device_script_parses() -> None:
    assert subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_all.sh")]).returncode == 0
