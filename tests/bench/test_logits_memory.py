"""bench/logits_memory.py: the tracking behind ``formulas.ENTROPY_*_BYTES``."""

from __future__ import annotations

import pytest
import torch
from bench_loader import load_bench

from rlplex.estimate import formulas as f


def _entropy(logits: torch.Tensor) -> torch.Tensor:
    # a softmax distribution's entropy as the log-sum-exp less the expected logit: the
    # operators verl's entropy_from_logits runs, to check the tracker without verl installed
    pd = torch.nn.functional.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


def test_the_tracker_gives_the_entropy_constants() -> None:
    bench = load_bench("logits_memory")
    tokens, vocab = 64, 2048
    logits = tokens * vocab
    forward = bench.peak_bytes(_entropy, tokens, vocab, train=False) / logits
    train = bench.peak_bytes(_entropy, tokens, vocab, train=True) / logits
    assert forward == pytest.approx(f.ENTROPY_FORWARD_BYTES, abs=0.01)
    assert train == pytest.approx(f.ENTROPY_TRAIN_BYTES, abs=0.01)


def test_the_plain_log_softmax_path_gives_its_constants() -> None:
    """``log_softmax(logits.float())`` and a gather: an fp32 copy and the log-softmax over the
    bf16 logits (8 bytes), and in training their gradients and the logits' (12); the
    constants add the logits' own 2."""
    bench = load_bench("logits_memory")
    constants = {
        "log-probs": (f.PLAIN_LOGPROB_FORWARD_BYTES, f.PLAIN_LOGPROB_TRAIN_BYTES),
        "log-probs + entropy": (f.PLAIN_ENTROPY_FORWARD_BYTES, f.PLAIN_ENTROPY_TRAIN_BYTES),
    }
    rows = bench.measure_plain()
    assert {r["path"] for r in rows} == set(constants)
    for row in rows:
        forward, train = constants[row["path"]]
        assert row["forward"] + 2 == pytest.approx(forward, abs=0.01)
        assert row["train"] + 2 == pytest.approx(train, abs=0.01)


def test_the_tracker_frees_what_is_freed() -> None:
    """A chain of temporaries holds at most two at once."""
    bench = load_bench("logits_memory")

    def chain(x: torch.Tensor) -> torch.Tensor:
        for _ in range(5):
            x = x * 2
        return x

    peak = bench.peak_bytes(chain, 64, 1024, train=False)
    assert peak == 2 * 64 * 1024 * 2  # two bf16 tensors alive at once


@pytest.mark.slow
def test_the_compiled_entropy_keeps_less_than_the_eager_one() -> None:
    """verl's default runs the entropy torch.compile'd: by resident peak on the CPU, the eager
    function gives the tracker's 4 and 12 bytes (the method's check) and the compiled one
    4 and 4, ``formulas.ENTROPY_COMPILED_TRAIN_BYTES``."""
    import shutil
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("resident peak through /proc/self/clear_refs is Linux only")
    if not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("Inductor's CPU code needs a C++ compiler, and this machine has none")
    bench = load_bench("logits_memory")
    assert bench.stand_in_entropy is not None
    rows = {r["path"]: r for r in bench.measure_compiled(bench.stand_in_entropy, 2048, 8192, "cpu")}
    assert rows["eager"]["forward"] == pytest.approx(f.ENTROPY_FORWARD_BYTES, abs=0.3)
    assert rows["eager"]["train"] == pytest.approx(f.ENTROPY_TRAIN_BYTES, abs=0.3)
    assert rows["compiled"]["forward"] == pytest.approx(f.ENTROPY_FORWARD_BYTES, abs=0.3)
    assert rows["compiled"]["train"] == pytest.approx(f.ENTROPY_COMPILED_TRAIN_BYTES, abs=0.3)
