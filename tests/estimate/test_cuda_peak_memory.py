"""On CUDA: estimated peak memory of a trained role within 10 % of torch's measured peak.

Issue 10 asks for this on a CUDA machine (an 8-layer, 1024-hidden model
trained with AdamW): the device's peak over two steps, the second with the
optimizer's moments resident. It skips, saying why, without CUDA.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate.estimator import estimate_config

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (no GPU here)")
def test_train_step_peak_within_ten_percent(tmp_path: Path) -> None:
    from rlplex.stages.models import ModelConfig, build_causal_lm, hf_config

    tiny = ModelConfig(arch="qwen2", num_layers=8, hidden_size=1024, intermediate_size=2816,
                       num_heads=16, num_kv_heads=4, vocab_size=32000,
                       max_positions=1024)  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(hf_config(tiny).to_dict()))
    micro_batch, prompt, response = 4, 256, 256
    data = {
        "model": str(tmp_path),
        "workload": {
            "prompts_per_step": micro_batch,
            "samples_per_prompt": 1,
            "prompt_tokens": {"mean": prompt, "max": prompt},
            "response_tokens": {"mean": response, "max": response},
            "micro_batch_size": micro_batch,
            # One plain batch of equal-length rows: no padding, no packing, no mask.
            "packing": False,
        },
        "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": "h100"},
        # A Hugging Face model run as is: eager layers (their norms keep fp32 copies).
        "roles": {
            "actor_train": {"devices": [0], "precision": "fp32", "parallel": {"kernels": "eager"}}
        },
        "pipeline": {"stages": {"train": {"role": "actor_train"}}},
    }
    est = estimate_config(config_from_dict(data, file="cuda.yaml")).roles["actor_train"]
    model = build_causal_lm(tiny).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randint(3, 32000, (micro_batch, prompt + response), device="cuda")

    def step_peak_gb() -> float:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        logits = model(input_ids=batch).logits.float()
        logits.log_softmax(-1).mean().backward()
        del logits
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 1e9

    # The first step has no AdamW moments during its backward (they are made by its
    # optimizer step); from the second on they are resident, as the estimate assumes.
    # An H200 gave 3.705 GB for the first step alone (the estimate was then 4.191 GB, fused
    # layers; 4.325 GB with the eager layers this model has; a count of the tensors alive on
    # a CPU gives 4.253 GB for the second step).
    first, steady = step_peak_gb(), step_peak_gb()
    print(f"estimated peak {est.peak_gb:.3f} GB, measured {first:.3f} (step 1), {steady:.3f} GB")
    assert est.peak_gb == pytest.approx(max(first, steady), rel=0.10)
