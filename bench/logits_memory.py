"""What verl's entropy over the logits holds at its peak: the source of
``formulas.ENTROPY_FORWARD_BYTES``, ``ENTROPY_TRAIN_BYTES`` and
``ENTROPY_COMPILED_TRAIN_BYTES``.

Run: ``.venv/bin/python bench/logits_memory.py [--json] [--target DIR] [--plain | --compiled]``.

``--compiled`` measures the entropy as verl's FSDP actor runs it by default,
``torch.compile(entropy_from_logits, dynamic=True)`` (dp_actor.py, ``use_torch_compile``
true unless set false), on the CPU with Inductor. The dispatch tracker below cannot see
inside a compiled graph, so each pass runs on large logits in this process with the peak
resident memory (``VmHWM``, reset through ``/proc/self/clear_refs``, Linux and glibc only:
its heap trimmed and large blocks mapped afresh first) taken over the memory before it,
after a first pass at the same shape; the eager function is measured the same way beside
it, as the check that this method agrees with the tracker (4 and 12 bytes). Inductor's CPU
code is not its CUDA code: ``--compiled --device cuda --stand-in`` measures a GPU's (the caching
allocator's peak; ``bench/gpu_all.sh`` runs it), verl's operators written here because a
lent GPU machine installs nothing.

``--plain`` measures instead the plain path, ``log_softmax(logits.float())`` and a gather
(NeMo RL's log-probs without tensor parallelism, rlplex's own stages), and that path
followed by the logits' entropy in fp32 (ROLL's log-prob passes): the sources of
``formulas.PLAIN_LOGPROB_*_BYTES`` and ``PLAIN_ENTROPY_*_BYTES`` (those add the bf16 logits'
own 2 bytes).

verl's FSDP actor computes its log-probs with flash-attention's cross entropy over the
model's bf16 logits, the gradient written into them (``inplace_backward``): 2 bytes per
logit. Its old-log-prob pass also computes the logits' entropy for its metrics, and its
training pass does when the loss has an entropy term (``entropy_coeff`` != 0), with
``verl.utils.torch_functional.entropy_from_logits`` (a softmax, its product with the logits,
a log-sum-exp). This script installs verl's wheel without dependencies (into the user's cache
unless ``--target``), loads that module alone (its imports of tensordict and verl's device
helpers stood in for), and runs the function on bf16 logits on the CPU, forward under
``no_grad`` and forward + backward, with a ``TorchDispatchMode`` that keeps the bytes of every
storage the operators create alive until it is freed: the peak over the logits themselves, per
logit, is what the entropy adds (the logits' gradient included in training).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import types
import weakref
from pathlib import Path
from typing import Any

VERL_VERSION = "0.5.0"
"""The verl release measured (its ``entropy_from_logits``)."""
SHAPES = ((128, 4096), (256, 8192))
"""(tokens, vocabulary) of the logits measured: the bytes per logit do not depend on them."""


def default_target() -> Path:
    return Path.home() / ".cache" / f"rlplex-verl-{VERL_VERSION}"


def install(target: Path) -> None:
    """verl's wheel without its dependencies (torch comes from the project's environment)."""
    marker = target / f".verl-{VERL_VERSION}"
    if marker.exists():
        return
    target.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    print(f"installing verl=={VERL_VERSION} (no dependencies) into {target} ...", flush=True)
    subprocess.run([*pip, f"verl=={VERL_VERSION}"], check=True)
    marker.write_text("ok\n")


def torch_functional(target: Path) -> Any:
    """verl's ``verl/utils/torch_functional.py``, loaded alone."""
    import torch

    tensordict = types.ModuleType("tensordict")
    tensordict.TensorDict = object  # type: ignore[attr-defined]
    device = types.ModuleType("verl.utils.device")
    device.get_device_name = lambda: "cpu"  # type: ignore[attr-defined]
    device.get_torch_device = lambda: torch.cpu  # type: ignore[attr-defined]
    for name in ("verl", "verl.utils"):
        package = types.ModuleType(name)
        package.__path__ = []  # type: ignore[attr-defined]
        sys.modules.setdefault(name, package)
    sys.modules.setdefault("tensordict", tensordict)
    sys.modules["verl.utils.device"] = device
    path = target / "verl" / "utils" / "torch_functional.py"
    spec = importlib.util.spec_from_file_location("verl.utils.torch_functional", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peak_bytes(fn: Any, tokens: int, vocab: int, *, train: bool) -> int:
    """Peak bytes of the storages the operators in ``fn(logits)`` create and keep alive."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Live(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live: dict[int, int] = {}
            self.now = 0
            self.peak = 0

        def _track(self, tensor: Any) -> None:
            storage = tensor.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if key in self.live or size == 0:
                return
            self.live[key] = size
            self.now += size
            self.peak = max(self.peak, self.now)

            def gone(key: int = key, size: int = size) -> None:
                if self.live.pop(key, None) is not None:
                    self.now -= size

            weakref.finalize(storage, gone)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            for item in tree_flatten(out)[0]:
                if isinstance(item, torch.Tensor):
                    self._track(item)
            return out

    torch.manual_seed(0)
    logits = torch.randn(tokens, vocab, dtype=torch.bfloat16, requires_grad=train)
    mode = Live()
    with mode:
        if train:
            fn(logits).float().sum().backward()
        else:
            with torch.no_grad():
                fn(logits)
    return mode.peak


def plain_logprobs(logits: Any) -> Any:
    """The plain log-prob path: an fp32 log-softmax of the logits gathered at the targets
    (NeMo RL's ``get_next_token_logprobs_from_logits`` without tensor parallelism)."""
    import torch

    targets = torch.zeros(logits.shape[0], 1, dtype=torch.long)
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets)[:, 0]


def plain_entropy(logits: Any) -> Any:
    """The logits' entropy in fp32, as ROLL's ``entropy_from_logits`` computes it."""
    import torch

    logits = logits.float()
    pd = torch.nn.functional.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


def plain_logprobs_then_entropy(logits: Any) -> Any:
    """ROLL's log-prob pass: the plain log-probs, then the entropy for the metrics."""
    return plain_logprobs(logits) + plain_entropy(logits)


def measure_plain() -> list[dict[str, Any]]:
    """Bytes per logit the plain path (``path: log-probs``) and the plain path followed by the
    entropy (``path: log-probs + entropy``) hold over the bf16 logits, forward and training."""
    rows = []
    for path, fn in (("log-probs", plain_logprobs),
                     ("log-probs + entropy", plain_logprobs_then_entropy)):  # fmt: skip
        for tokens, vocab in SHAPES:
            logits = tokens * vocab
            forward = peak_bytes(fn, tokens, vocab, train=False) / logits
            train = peak_bytes(fn, tokens, vocab, train=True) / logits
            rows.append({"path": path, "tokens": tokens, "vocab": vocab, "forward": forward,
                         "train": train})  # fmt: skip
    return rows


def _status_bytes(key: str) -> int:
    with open("/proc/self/status", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status (Linux only)")


def stand_in_entropy(logits: Any) -> Any:
    """The operators of verl's ``entropy_from_logits`` (verl/utils/torch_functional.py), for a
    machine that cannot install verl's wheel (a lent GPU reaches no registry)."""
    import torch

    pd = torch.nn.functional.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


def _fresh_heap() -> None:
    """Make every buffer of the pass raise the resident size: glibc maps each allocation of
    1 MiB or more afresh and unmaps it when freed (by default its threshold rises to 32 MiB
    as large blocks are freed), and the free blocks already in its heap give their pages
    back (``malloc_trim``), so that a buffer placed in one faults its pages in anew."""
    import ctypes

    libc = ctypes.CDLL("libc.so.6")
    m_mmap_threshold = -3
    libc.mallopt(m_mmap_threshold, 1 << 20)
    libc.malloc_trim(0)


def _run(fn: Any, logits: Any, train: bool) -> None:
    import torch

    if train:
        fn(logits).float().sum().backward()
    else:
        with torch.no_grad():
            fn(logits)


def resident_peak(fn: Any, tokens: int, vocab: int, *, train: bool, device: str = "cpu") -> int:
    """Peak bytes ``fn(logits)`` (and its backward, with ``train``) adds over the memory before
    it, bf16 logits of ``tokens`` x ``vocab`` already made: the process's resident peak on the
    CPU, the caching allocator's peak on a CUDA device."""
    import gc

    import torch

    for small in (64, 96):  # compile (dynamic shapes) and warm up on small logits first
        warm = torch.randn(small, vocab, dtype=torch.bfloat16, device=device)
        _run(fn, warm.requires_grad_(train), train)
    del warm
    logits = torch.randn(tokens, vocab, dtype=torch.bfloat16, device=device).requires_grad_(train)
    _run(fn, logits, train)  # once at this shape too: no compilation inside the measured pass
    logits.grad = None
    gc.collect()
    if device != "cpu":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        _run(fn, logits, train)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    _fresh_heap()
    # No collection during the pass: garbage freed then (an earlier caller's tensors) would
    # lower the resident size under the peak being read.
    gc.disable()
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as handle:
            handle.write("5")  # reset VmHWM to the current resident size
        before = _status_bytes("VmRSS:")
        _run(fn, logits, train)
        return _status_bytes("VmHWM:") - before
    finally:
        gc.enable()


def measure_compiled(
    fn: Any, tokens: int = 4096, vocab: int = 32000, device: str = "cpu"
) -> list[dict[str, Any]]:
    """Bytes per logit the entropy adds, eager and ``torch.compile``d (resident peak on the
    CPU, the allocator's peak on CUDA)."""
    import torch

    rows = []
    for label, run in (("eager", fn), ("compiled", torch.compile(fn, dynamic=True))):
        forward = resident_peak(run, tokens, vocab, train=False, device=device)
        train = resident_peak(run, tokens, vocab, train=True, device=device)
        rows.append({"path": label, "tokens": tokens, "vocab": vocab, "device": device,
                     "forward": forward / (tokens * vocab),
                     "train": train / (tokens * vocab)})  # fmt: skip
    return rows


def measure(target: Path) -> list[dict[str, Any]]:
    module = torch_functional(target)
    rows = []
    for tokens, vocab in SHAPES:
        logits = tokens * vocab
        forward = peak_bytes(module.entropy_from_logits, tokens, vocab, train=False) / logits
        train = peak_bytes(module.entropy_from_logits, tokens, vocab, train=True) / logits
        rows.append({"tokens": tokens, "vocab": vocab, "forward": forward, "train": train})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--target", type=Path, default=None, help="where verl is installed")
    parser.add_argument(
        "--plain", action="store_true",
        help="measure the plain path, log_softmax(logits.float()) (no verl needed)",
    )  # fmt: skip
    parser.add_argument(
        "--compiled", action="store_true",
        help="verl's entropy eager and torch.compile'd, by resident peak (Linux, Inductor)",
    )  # fmt: skip
    parser.add_argument(
        "--device", default="cpu", help="with --compiled: cpu, or cuda (the allocator's peak)"
    )
    parser.add_argument(
        "--stand-in", action="store_true",
        help="with --compiled: verl's operators written here, no verl wheel (no registry)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.compiled:
        if args.stand_in:
            fn, what = stand_in_entropy, "verl's entropy operators (stand-in)"
        else:
            target = args.target or default_target()
            install(target)
            fn = torch_functional(target).entropy_from_logits
            what = f"verl {VERL_VERSION}'s entropy_from_logits"
        shape = (8192, 151936) if args.device != "cpu" else (4096, 32000)
        rows = measure_compiled(fn, *shape, device=args.device)
        title = (
            f"bytes per logit {what} adds over bf16 logits, eager and torch.compile'd"
            f" ({args.device}, Inductor)"
        )
    elif args.plain:
        rows = measure_plain()
        title = (
            "bytes per logit log_softmax(logits.float()) and a gather (then, second, ROLL's fp32"
            " entropy) add over bf16 logits"
        )
    else:
        target = args.target or default_target()
        install(target)
        rows = measure(target)
        title = f"bytes per logit verl {VERL_VERSION}'s entropy_from_logits adds over bf16 logits"
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(title)
    print("tokens  vocab   forward (no_grad)  forward + backward")
    for r in rows:
        path = f"{r['path']:20s}" if "path" in r else ""
        print(f"{path}{r['tokens']:6d} {r['vocab']:6d}   {r['forward']:17.3f}  {r['train']:18.3f}")


if __name__ == "__main__":
    main()
