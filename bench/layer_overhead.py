"""The host cost of one transformer layer in eager PyTorch: the source of ``layer_s``.

Run: ``.venv/bin/python bench/layer_overhead.py [--layers 24] [--repeats 30] [--lora RANK]``.

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

``--lora RANK`` also injects Hugging Face peft's LoRA adapters of that rank into
every projection of a copy of the stack, its base weights frozen, and times
both in turns: the ratio of the adapted stack's host time to the frozen one's,
forward and forward + backward, is what adapters add to ``layer_s``
(``formulas.LORA_HOST_LAYERS``).
"""

from __future__ import annotations

import argparse
import statistics
import time


def _build(layers: int, lora_rank: int | None = None):
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
    model = Qwen2ForCausalLM(config)
    if lora_rank is not None:
        model.requires_grad_(False)
        if lora_rank:
            from peft import LoraConfig, inject_adapter_in_model

            targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
            adapters = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules=targets)
            model = inject_adapter_in_model(adapters, model)
    return model


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
    parser.add_argument("--lora", type=int, default=None, help="also time peft LoRA of this rank")
    args = parser.parse_args()
    if args.lora:
        _lora(args.layers, args.repeats, args.lora)
        return

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


def _lora(layers: int, repeats: int, rank: int) -> None:
    """Frozen and LoRA-adapted stacks timed in turns: their host-time ratios."""
    import torch

    torch.set_num_threads(1)
    ids = torch.randint(0, 256, (4, 16))
    mask = torch.ones_like(ids)
    frozen, adapted = _build(layers, 0), _build(layers, rank)

    def passes(model):  # type: ignore[no-untyped-def]
        def forward() -> None:
            with torch.no_grad():
                model(input_ids=ids, attention_mask=mask, use_cache=False)

        def train() -> None:
            # the input embedding's output needs a gradient for the backward to run through
            # a frozen stack, as a trainer's frozen base does for its adapters
            embeds = model.get_input_embeddings()(ids).detach().requires_grad_(True)
            out = model(inputs_embeds=embeds, attention_mask=mask, use_cache=False)
            out.logits.float().sum().backward()

        return forward, train

    rounds = []
    for _ in range(5):  # in turns, so that the machine's load falls on both alike
        f0, t0 = passes(frozen)
        f1, t1 = passes(adapted)
        rounds.append(
            (_time(f1, repeats) / _time(f0, repeats), _time(t1, repeats) / _time(t0, repeats))
        )
    forward = statistics.median(r[0] for r in rounds)
    both = statistics.median(r[1] for r in rounds)
    print(f"Qwen2 eager, {layers} layers, frozen vs peft LoRA rank {rank} on every projection")
    print(f"host time, adapted / frozen, forward:            {forward:.3f}")
    print(f"host time, adapted / frozen, forward + backward: {both:.3f}")
    print(f"rounds: {', '.join(f'{a:.3f}/{b:.3f}' for a, b in rounds)}")


if __name__ == "__main__":
    main()
