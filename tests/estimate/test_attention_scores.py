"""Score matrices kept where no flash kernel runs, fp32 attention (``keeps_attention_scores``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import estimate_config
from rlplex.estimate.specs import model_presets


def test_only_fp32_without_a_kernel_that_takes_it_keeps_scores() -> None:
    gqa = model_presets()["qwen2.5-7b"]  # 28 query heads, 4 KV heads
    assert gqa.num_kv_heads < gqa.num_heads
    # Flash attention runs in bf16 and fp16: no score matrix whatever the layers.
    for precision in ("bf16", "fp16"):
        for kernels in ("eager", "fused"):
            for masked in (True, False):
                assert not f.keeps_attention_scores(gqa, precision, kernels, masked=masked)
    # fp32: Transformer Engine's unfused attention keeps them, mask or not.
    assert f.keeps_attention_scores(gqa, "fp32", "fused", masked=True)
    assert f.keeps_attention_scores(gqa, "fp32", "fused", masked=False)
    # PyTorch's SDPA: the math path only where Hugging Face passes enable_gqa (grouped KV
    # heads, no mask); with a mask, or without grouping, the memory-efficient kernel.
    assert f.keeps_attention_scores(gqa, "fp32", "eager", masked=False)
    assert not f.keeps_attention_scores(gqa, "fp32", "eager", masked=True)
    mha = gqa.model_copy(update={"num_kv_heads": gqa.num_heads})
    assert not f.keeps_attention_scores(mha, "fp32", "eager", masked=False)
    assert f.keeps_attention_scores(mha, "fp32", "fused", masked=False)


def test_score_matrix_bytes_by_hand() -> None:
    s = model_presets()["qwen2.5-7b"]
    tokens, sequence, layers, heads = 2048, 512, 28, 28
    plain = f.activation_bytes(s, tokens, precision="fp32")
    scores = f.activation_bytes(s, tokens, precision="fp32", scores_sequence=sequence)
    # The softmax's fp32 output: heads x tokens x sequence, every layer.
    assert scores - plain == pytest.approx(layers * heads * tokens * sequence * 4)
    # A forward holds one layer's scores and their softmax at once.
    one = f.activation_bytes(s, tokens, precision="fp32", backward=False, scores_sequence=sequence)
    assert one - f.activation_bytes(s, tokens, precision="fp32", backward=False) == pytest.approx(
        2 * heads * tokens * sequence * 4
    )
    # Split over tensor-parallel ranks with the heads.
    assert f.activation_bytes(
        s, tokens, precision="fp32", tp=4, scores_sequence=sequence
    ) == pytest.approx(scores / 4)


def _train_peak(tmp_path: Path, precision: str) -> float:
    hf = {
        "model_type": "qwen2", "hidden_size": 1024, "intermediate_size": 2816,
        "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
        "vocab_size": 32000, "max_position_embeddings": 1024, "tie_word_embeddings": False,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(hf))
    data = {
        "model": str(tmp_path),
        "workload": {
            "prompts_per_step": 4,
            "samples_per_prompt": 1,
            "prompt_tokens": {"mean": 256, "max": 256},
            "response_tokens": {"mean": 256, "max": 256},
            "micro_batch_size": 4,
            "packing": False,
        },
        "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": "h100"},
        "roles": {
            "actor_train": {
                "devices": [0],
                "precision": precision,
                "parallel": {"kernels": "eager"},
            }
        },
        "pipeline": {"stages": {"train": {"role": "actor_train"}}},
    }
    return estimate_config(config_from_dict(data, file="x.yaml")).roles["actor_train"].peak_gb


def test_the_gpu_test_model_gains_its_eight_score_matrices(tmp_path: Path) -> None:
    """tests/estimate/test_cuda_peak_memory.py's model: fp32, 16 query heads over 4 KV heads."""
    fp32 = _train_peak(tmp_path, "fp32")
    # 8 layers x 16 heads x 4 sequences x 512 x 512 x 4 bytes: the 64 MiB a layer an H200 showed.
    expected = 8 * 16 * 4 * 512 * 512 * 4 / 1e9
    without = fp32 - expected
    assert without == pytest.approx(4.325, abs=0.001)  # the estimate before the term
    assert fp32 == pytest.approx(4.862, abs=0.001)


def _config(tmp_path: Path, precision: str) -> Path:
    path = tmp_path / f"{precision}.yaml"
    path.write_text(
        "model: qwen2.5-0.5b\n"
        "workload: {prompts_per_step: 4, samples_per_prompt: 1, micro_batch_size: 4,\n"
        "  packing: false,\n"
        "  prompt_tokens: {mean: 256, max: 256}, response_tokens: {mean: 256, max: 256}}\n"
        "cluster: {nodes: 1, gpus_per_node: 1, gpu: h100}\n"
        f"roles: {{actor_train: {{devices: [0], precision: {precision},"
        " parallel: {kernels: eager}}}\n"
        "pipeline: {stages: {train: {role: actor_train}}}\n"
    )
    return path


def test_estimate_says_when_attention_keeps_its_scores(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from rlplex.cli import app

    runner = CliRunner()
    fp32 = runner.invoke(app, ["estimate", str(_config(tmp_path, "fp32")), "--json"])
    assert fp32.exit_code == 0, fp32.output
    scores = json.loads(fp32.output)["assumptions"]["models"]["actor_train"]["attention_scores"]
    # Qwen2.5-0.5B: 14 query heads (2 KV heads), 4 sequences of 512 tokens, fp32.
    assert scores["gb_per_layer"] == pytest.approx(14 * 4 * 512 * 512 * 4 / 1e9, abs=1e-4)
    assert scores["layers"] == 24 and "math path" in scores["why"]
    text = runner.invoke(app, ["estimate", str(_config(tmp_path, "fp32"))])
    assert "attention keeps its score matrices" in " ".join(text.output.split())
    bf16 = runner.invoke(app, ["estimate", str(_config(tmp_path, "bf16")), "--json"])
    models = json.loads(bf16.output)["assumptions"]["models"]
    assert models["actor_train"]["attention_scores"] is None


def test_a_padded_or_packed_hugging_face_batch_takes_the_memory_efficient_kernel(
    tmp_path: Path,
) -> None:
    """Hugging Face passes ``enable_gqa`` only without a mask: a padded batch (lengths that
    vary) or a packed one keeps no score matrix; Transformer Engine's fp32 fallback keeps the
    packed row's."""
    from rlplex.estimate import passes as e

    config = config_from_dict(
        {
            "model": "qwen2.5-0.5b",
            "workload": {
                "prompts_per_step": 4, "samples_per_prompt": 1, "micro_batch_size": 4,
                "prompt_tokens": {"mean": 200, "max": 256},
                "response_tokens": {"mean": 256, "max": 256},
            },
            "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": "h100"},
            "roles": {"actor_train": {"devices": [0], "precision": "fp32",
                                      "parallel": {"kernels": "eager"}}},
            "pipeline": {"stages": {"train": {"role": "actor_train"}}},
        },
        file="x.yaml",
    )  # fmt: skip
    spec = model_presets()["qwen2.5-0.5b"]
    role = config.roles["actor_train"]
    for packing in (False, True):
        w = config.workload.model_copy(update={"packing": packing})
        assert e._scores_sequence(spec, role, w, 2048) == 0.0
    fused = role.model_copy(
        update={"parallel": role.parallel.model_copy(update={"kernels": "fused", "sp": 2})}
    )
    packed = config.workload.model_copy(update={"packing": True})
    assert e._scores_sequence(spec, fused, packed, 1024) == 2048  # the whole row, over sp
    padded = config.workload.model_copy(update={"packing": False})
    assert e._scores_sequence(spec, fused, padded, 1024) == 512  # the longest sequence
