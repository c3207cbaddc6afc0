"""What a rule-based reward costs the controller per sequence and per token, measured here.

A rule reward (verl's naive and DAPO reward managers, ROLL's math rule workers, NeMo RL's
math environment) handles every scored sequence on a CPU: it slices the sample out of the
batch, detokenizes its prompt and response with the model's tokenizer, and runs a checker
over the response's text (a regular expression for the final answer). This script times
that loop over sequences of several response lengths and fits ``seconds = a + b x tokens``:
``a`` the fixed work per sequence, ``b`` per response token (detokenizing dominates).

Nothing is downloaded: the tokenizer is a byte-level BPE trained here (Hugging Face
``tokenizers``) on the Python sources of this virtual environment, and the sequences are
windows of those sources' tokens, wrapped in
``transformers``' ``PreTrainedTokenizerFast`` as the frameworks load theirs; decoding costs
per token about the same whatever the vocabulary's size. The checker is this script's own
(the last ``#### number`` or ``\\boxed{...}`` of the text, as GSM8K and MATH checkers look
for), not a framework's code.

Run: ``.venv/bin/python bench/reward_cpu.py [--sequences 400]`` (about a minute on 2 cores;
each length's least of ``--rounds`` rounds).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

ANSWER = re.compile(r"####\s*(-?[0-9.,]+)|\\boxed\{([^{}]*)\}")
LENGTHS = (128, 512, 2048, 8192)


def _corpus(limit_bytes: int) -> list[str]:
    """Python source text of this environment, up to ``limit_bytes``."""
    root = Path(sys.prefix) / "lib"
    texts: list[str] = []
    size = 0
    for path in sorted(root.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        size += len(text)
        if size >= limit_bytes:
            break
    return texts


def _tokenizer(vocab: int):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"])
    bpe.train_from_iterator(_corpus(8_000_000), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")


def _score(text: str, truth: str) -> float:
    found = ANSWER.findall(text[-300:]) or ANSWER.findall(text)
    if not found:
        return 0.0
    answer = next(a for a in found[-1] if a).replace(",", "").strip()
    return 1.0 if answer == truth else 0.0


def _time_loop(tok, lengths: list[int], prompt: int, rng: random.Random) -> float:  # type: ignore[no-untyped-def]
    """Seconds per sequence of the reward loop over ``lengths`` responses."""
    import torch

    n, width = len(lengths), prompt + max(lengths)
    # Real text's tokens (random ids decode to long, rare byte runs): windows of the
    # environment's sources, encoded once.
    stream = tok.encode("\n".join(_corpus(4 * width * 8)), add_special_tokens=False)
    starts = [rng.randrange(0, len(stream) - width) for _ in range(n)]
    ids = torch.tensor([stream[s : s + width] for s in starts])
    mask = torch.zeros((n, width), dtype=torch.long)
    mask[:, :prompt] = 1
    for i, length in enumerate(lengths):
        mask[i, prompt : prompt + length] = 1
    batch = {"input_ids": ids, "attention_mask": mask, "position_ids": ids.clone()}
    start = time.perf_counter()
    total = 0.0
    for i in range(n):
        item = {k: v[i] for k, v in batch.items()}  # the sample sliced out of the batch
        valid = int(item["attention_mask"][prompt:].sum())
        prompt_text = tok.decode(item["input_ids"][:prompt], skip_special_tokens=True)
        response = item["input_ids"][prompt : prompt + valid]
        response_text = tok.decode(response, skip_special_tokens=True)
        total += _score(prompt_text[-10:] + response_text + " #### 42", "42")
    elapsed = time.perf_counter() - start
    assert total == n  # every synthetic answer is found
    return elapsed / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=400, help="sequences per length")
    parser.add_argument("--vocab", type=int, default=65_536, help="the BPE's vocabulary")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens per sequence")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per length (the least)")
    args = parser.parse_args()
    started = time.perf_counter()
    tok = _tokenizer(args.vocab)
    print(f"tokenizer: byte-level BPE, {tok.vocab_size:,} tokens, trained in"
          f" {time.perf_counter() - started:.1f} s")  # fmt: skip
    rng = random.Random(0)
    points: list[tuple[int, float]] = []
    print("| response tokens | seconds per sequence |")
    print("|---:|---:|")
    for length in LENGTHS:
        count = max(20, args.sequences * LENGTHS[0] // length)
        # The least of several rounds: the machine is shared, and other work only adds time.
        per = min(_time_loop(tok, [length] * count, args.prompt, rng) for _ in range(args.rounds))
        points.append((length, per))
        print(f"| {length:,} | {per * 1e6:,.1f} µs |")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    print(f"fit: {intercept * 1e6:.1f} µs per sequence (with a {args.prompt}-token prompt)"
          f" + {slope * 1e6:.3f} µs per response token")  # fmt: skip


if __name__ == "__main__":
    main()
