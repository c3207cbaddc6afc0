"""Memory traffic that Hugging Face peft's LoRA adapters add to a decoder layer: the source of
the LoRA part of the eager-kernel term.

Run: ``.venv/bin/python bench/lora_bytes.py [--json]`` (peft comes with the ``dev`` extra).

A trainer that runs Hugging Face modules with peft LoRA (verl's FSDP workers, ROLL, NeMo RL's
DTensor path) computes each adapted projection as ``base(x) + lora_B(lora_A(x)) * scaling``:
beside the two small matmuls (priced as FLOPs), the scaling and the sum run as separate
operators over the projection's whole output, and the backward sums the input gradients of
the two paths. As ``bench/elementwise_bytes.py`` does for the layer's own operators, this
counts on the CPU the bytes every ATen operator reads and writes (matmuls and attention
skipped) in one Qwen2/Qwen3 decoder layer, forward and backward, bf16, its weights frozen,
with and without peft's adapters on every projection, at two token counts; the difference is
the adapters' traffic per token. It fits ``a · Σ d_out + b · Σ d_in`` over the adapted
projections' output and input widths, forward and backward, over several layer shapes and
ranks, and prints each shape against the fit. ``rlplex/estimate/formulas.py``
(``LORA_EAGER_*``) holds the figures this prints; ``tests/bench/test_lora_bytes.py`` counts
one shape against them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from elementwise_bytes import SHAPES, Shape, layer_bytes

RANKS = (8, 64)


def widths(shape: Shape) -> tuple[int, int]:
    """(Σ d_out, Σ d_in) over a layer's seven adapted projections."""
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    d_out = q + 2 * kv + shape.hidden + 2 * shape.mlp + shape.hidden
    d_in = 5 * shape.hidden + q + shape.mlp
    return d_out, d_in


def adapter_bytes(per_token: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """(forward, backward) bytes per token the adapters add: adapted minus frozen."""
    (f1, b1), (f0, b0) = per_token["lora"], per_token["frozen"]
    return f1 - f0, b1 - b0


def per_token(shape: Shape, rank: int) -> dict[str, tuple[float, float]]:
    """(forward, backward) bytes per token, frozen and adapted: two token counts' difference."""
    out = {}
    for name, r in (("frozen", 0), ("lora", rank)):
        f1, b1 = layer_bytes(shape, 64, lora_rank=r)
        f2, b2 = layer_bytes(shape, 128, lora_rank=r)
        out[name] = ((f2 - f1) / 64, (b2 - b1) / 64)
    return out


def fit(rows: list[tuple[Shape, float]]) -> dict[str, float]:
    """Least squares of bytes per token on Σ d_out and Σ d_in."""
    import numpy as np

    a = np.array([widths(s) for s, _ in rows], dtype=float)
    y = np.array([b for _, b in rows], dtype=float)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return {"d_out": float(coef[0]), "d_in": float(coef[1])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    import peft

    measured = []
    for shape in SHAPES:
        for rank in RANKS:
            measured.append((shape, rank, *adapter_bytes(per_token(shape, rank))))
    forward = fit([(s, f) for s, _, f, _ in measured])
    backward = fit([(s, b) for s, _, _, b in measured])
    rows: list[dict[str, Any]] = []
    for s, rank, f, b in measured:
        d_out, d_in = widths(s)
        rows.append({
            "shape": s._asdict(), "rank": rank, "d_out": d_out, "d_in": d_in,
            "forward_bytes_per_token": f, "backward_bytes_per_token": b,
            "fit_forward": forward["d_out"] * d_out + forward["d_in"] * d_in,
            "fit_backward": backward["d_out"] * d_out + backward["d_in"] * d_in,
        })  # fmt: skip
    if args.json:
        print(json.dumps({"forward_fit": forward, "backward_fit": backward, "rows": rows},
                         indent=2))  # fmt: skip
        return
    print(f"bytes per token per decoder layer that peft {peft.__version__}'s LoRA adds (bf16)")
    print("hidden  mlp    heads kv  hd  rank  Σd_out  Σd_in   forward  fit      backward  fit")
    for r in rows:
        s = r["shape"]
        print(
            f"{s['hidden']:6d} {s['mlp']:6d} {s['heads']:5d} {s['kv_heads']:3d} {s['head_dim']:4d}"
            f" {r['rank']:4d} {r['d_out']:7d} {r['d_in']:6d} {r['forward_bytes_per_token']:9.0f}"
            f" {r['fit_forward']:8.0f} {r['backward_bytes_per_token']:9.0f}"
            f" {r['fit_backward']:8.0f}"
        )
    print(
        f"forward: {forward['d_out']:.2f} x Σ d_out + {forward['d_in']:.2f} x Σ d_in;"
        f" backward: {backward['d_out']:.2f} x Σ d_out + {backward['d_in']:.2f} x Σ d_in"
        " bytes per token"
    )


if __name__ == "__main__":
    main()
