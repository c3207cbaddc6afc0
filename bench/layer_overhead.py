"""The host cost of one transformer layer in eager PyTorch: the source of ``layer_s``.

Run: ``.venv/bin/python bench/layer_overhead.py [--layers 24] [--repeats 30]``.

A train or log-prob pass of a small model on a GPU is not bound by its FLOPs
but by the host: eager PyTorch issues every operator of every layer from
Python, one launch each, and a padded Hugging Face attention synchronises
with the device once per layer. This script measures that host cost on this
machine's CPU with a Hugging Face Qwen2 stack (the architecture of the
quickstart's Qwen2.5-0.5B) made so narrow (hidden 64) and short (4 x 16
tokens) that the arithmetic is negligible: what is left is Python, module
hooks and the dispatcher, per layer and micro-batch. It prints:

- the operators one layer issues in a forward pass (``torch.profiler``);
- milliseconds per layer for a forward pass (no grad) and for forward +
  backward, the median of ``--repeats`` timings, one thread;
- the ``layer_s`` this implies (forward, per layer and micro-batch), to hold
  against ``rlplex/estimate/data/efficiency.yaml``.

On a GPU each operator also pays a kernel launch of a few microseconds on
top (not measured here), so these figures are a floor for the host cost of a
pass on a GPU machine whose CPU is as fast as this one.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _build(layers: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        max_position_embeddings=256,
    )
    config._attn_implementation = "sdpa"
    return Qwen2ForCausalLM(config)


def _time(fn, repeats: int) -> float:
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()

    import torch
    from torch.profiler import profile

    torch.set_num_threads(1)
    model = _build(args.layers)
    ids = torch.randint(0, 256, (4, 16))
    mask = torch.ones_like(ids)

    def forward() -> None:
        with torch.no_grad():
            model(input_ids=ids, attention_mask=mask, use_cache=False)

    def train() -> None:
        out = model(input_ids=ids, attention_mask=mask, use_cache=False)
        out.logits.float().sum().backward()

    with profile() as prof:
        forward()
    top = [e for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]
    fwd = _time(forward, args.repeats) / args.layers
    both = _time(train, args.repeats) / args.layers
    print(f"Qwen2 eager, {args.layers} layers, hidden 64, 4 x 16 tokens, 1 CPU thread")
    print(f"operators per layer, forward:      {len(top) / args.layers:.0f}")
    print(f"ms per layer, forward:             {fwd * 1e3:.3f}")
    print(f"ms per layer, forward + backward:  {both * 1e3:.3f} ({both / fwd:.1f}x forward)")
    print(f"implied layer_s (forward):         {fwd:.5f} s")


if __name__ == "__main__":
    main()
