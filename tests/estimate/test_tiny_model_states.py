"""On CPU, the estimated GB of weights, grads and AdamW state equal the real tensors' bytes.

The models are the tiny ones the pipelines build (rlplex.stages.models), in
fp32 and trained with torch AdamW (rlplex.stages.optim's default backend):
fp32 weights keep no separate master copy, so AdamW holds 8 bytes per
parameter (two moments). AdamW's per-tensor ``step`` counters (one scalar per
parameter tensor) are not model state and are left out of both sides.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate.estimator import estimate_config

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _real_bytes(model: torch.nn.Module) -> tuple[int, int, int]:
    params = [p for p in model.parameters() if p.requires_grad]
    batch = torch.randint(3, 16, (2, 8))
    out = model(input_ids=batch)
    out.logits.float().sum().backward()
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    optimizer.step()
    weights = sum(p.numel() * p.element_size() for p in params)
    grads = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
    moments = sum(
        t.numel() * t.element_size()
        for state in optimizer.state.values()
        for key, t in state.items()
        if key in ("exp_avg", "exp_avg_sq")
    )
    return weights, grads, moments


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_estimated_states_equal_real_tensors(arch: str, tmp_path: Path) -> None:
    from rlplex.stages.models import ModelConfig, build_causal_lm, build_critic, hf_config

    tiny = ModelConfig(arch=arch, num_layers=2, hidden_size=64, intermediate_size=96,
                       num_heads=4, num_kv_heads=2, vocab_size=32)  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(hf_config(tiny).to_dict()))
    data = {
        "model": str(tmp_path),
        "workload": {
            "prompts_per_step": 4,
            "samples_per_prompt": 2,
            "prompt_tokens": {"mean": 4, "max": 8},
            "response_tokens": {"mean": 2, "max": 4},
        },
        "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": "cpu"},
        "roles": {
            "actor_train": {"devices": [0], "precision": "fp32"},
            "critic": {"devices": [0], "precision": "fp32"},
        },
        "pipeline": {
            "stages": {
                "values": {"role": "critic"},
                "critic_train": {"role": "critic", "after": ["values"]},
                "train": {"role": "actor_train", "after": ["values"]},
            }
        },
    }
    cfg = config_from_dict(data, file="tiny.yaml")
    est = estimate_config(cfg)
    for role, build in (("actor_train", build_causal_lm), ("critic", build_critic)):
        weights, grads, moments = _real_bytes(build(tiny))
        states = est.roles[role].states
        assert est.roles[role].params * 4 == weights
        assert states["weights"] * 1e9 == pytest.approx(weights, rel=1e-12)
        assert states["grads"] * 1e9 == pytest.approx(grads, rel=1e-12)
        assert states["optimizer"] * 1e9 == pytest.approx(moments, rel=1e-12)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_checkpoint_tensor_count_equals_the_real_state_dict(arch: str) -> None:
    from rlplex.estimate import formulas as f
    from rlplex.estimate.specs import spec_from_hf_config
    from rlplex.stages.models import ModelConfig, build_causal_lm, hf_config

    tiny = ModelConfig(arch=arch, num_layers=3, hidden_size=64, intermediate_size=96,
                       num_heads=4, num_kv_heads=2, vocab_size=32)  # fmt: skip
    spec = spec_from_hf_config(hf_config(tiny).to_dict(), file="config.json")
    assert f.param_tensors(spec) == len(build_causal_lm(tiny).state_dict())
