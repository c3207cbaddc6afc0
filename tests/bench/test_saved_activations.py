"""bench/saved_activations.py: the count behind ``formulas.EAGER_SAVED_NORM_BYTES``."""

from __future__ import annotations

import pytest
from bench_loader import load_bench

from rlplex.estimate import formulas as f
from rlplex.estimate.specs import spec_from_hf_config

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

SMALL = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 64,
    "tie_word_embeddings": False,
    "attn_implementation": "sdpa",
}


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_a_hugging_face_layer_keeps_what_the_eager_formula_says(arch: str, dtype: str) -> None:
    """Counted saved bytes of a layer = the fused layer's elements + the eager extra (the two
    norms' fp32 copies; Qwen3's q/k norms too), within 1 % (counting the layer's weights too
    would add their bytes over 64 tokens: several times the layer's activations)."""
    bench = load_bench("saved_activations")
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    saved, config = bench.per_layer(arch, torch_dtype, SMALL, (2, 32))
    spec = spec_from_hf_config(config.to_dict(), arch)
    expected = f.layer_activation_elements(spec) * f.BYTES_PER_ELEMENT[dtype]
    expected += f.eager_saved_bytes_per_token(spec, dtype)
    assert saved == pytest.approx(expected, rel=0.01)
