"""GPU check of the offload backends: memory returned, bit-identity, and copy speed.

``python bench/gpu_offload.py [--part all|weights|llama|deepspeed] [--small]``
on a CUDA machine (rlplex is loaded from this checkout). Prints the device
name and figures as JSON. Without CUDA it prints ``no CUDA: not measured`` and
exits 0; ``--smoke-cpu`` runs the same code on tiny CPU models (copies made
for real with ``copy_on_cpu``) to check the script itself.

Parts and targets (issues 5 and 11), each against a raw copy of the same
bytes into pinned host memory that already exists, measured in the same run:

- ``weights``: 2 GiB of fp32 weights with :class:`TorchOffload`: <= 5 % left
  allocated after offload, >= 80 % of the pinned copy each way;
- ``llama``: a >= 1B-parameter Llama (bf16) with AdamW, weights + optimizer
  state with ``TorchOffload(model, optimizer)``: memory returned, parameters
  and optimizer state bit-identical after the round trip, next step's loss
  equal to a twin that never offloaded, >= 90 % of the pinned copy each way;
- ``deepspeed``: ZeRO-1 and ZeRO-2 engines (about 440M parameters, bf16)
  through :class:`DeepSpeedOffload`: optimizer offload >= 50 % of the pinned
  copy from the second call on (rlplex's mover; DeepSpeed's own
  ``offload_states`` is measured beside it), states bit-identical, training
  goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

NOT_MEASURED = "no CUDA: not measured"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _allocated(device: torch.device) -> int:
    return torch.cuda.memory_allocated() if device.type == "cuda" else 0


def pinned_reference(nbytes: int, device: torch.device, rounds: int = 4) -> dict[str, float]:
    """GB/s of one plain copy of ``nbytes`` into existing pinned host memory, each way."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=device.type == "cuda")
    d2h, h2d = [], []
    for _ in range(rounds):
        _sync(device)
        t0 = time.perf_counter()
        host.copy_(src, non_blocking=True)
        _sync(device)
        d2h.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        src.copy_(host, non_blocking=True)
        _sync(device)
        h2d.append(time.perf_counter() - t0)
    del src, host
    gb = nbytes / 1e9
    return {"d2h_gb_per_s": gb / _median(d2h), "h2d_gb_per_s": gb / _median(h2d)}


def driver_round_trip(nbytes: int, device: torch.device, rounds: int = 4) -> dict[str, float]:
    """Seconds to take ``nbytes`` fresh from the driver and to hand them back (median).

    An offload ends with ``torch.cuda.empty_cache()`` (the memory must return to the
    driver for the other roles' processes) and the next reload allocates again: costs a
    copy into memory that already exists does not pay. The first H200 run measured the
    1.1B Llama's round trip at 88-89 % of the pinned copy; these say how much of the
    rest is the driver's."""
    if device.type != "cuda":
        return {"alloc_s": 0.0, "free_s": 0.0}
    alloc, free = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        t0 = time.perf_counter()
        block = torch.empty(nbytes, dtype=torch.uint8, device=device)
        torch.cuda.synchronize()
        alloc.append(time.perf_counter() - t0)
        del block
        t0 = time.perf_counter()
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        free.append(time.perf_counter() - t0)
    return {"alloc_s": _median(alloc), "free_s": _median(free)}


def _median(xs: list[float]) -> float:
    # Skip the first round (allocation, pinning) when there are several.
    return statistics.median(xs[1:] if len(xs) > 1 else xs)


def _clone_states(model: torch.nn.Module, optimizer: Any) -> list[torch.Tensor]:
    tensors = [p.detach() for p in model.parameters()] + [
        v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)
    ]
    return [t.clone() for t in tensors]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


# -- weights only -------------------------------------------------------------------


def part_weights(device: torch.device, small: bool) -> dict[str, Any]:
    from rlplex.stages.offload_torch import TorchOffload

    layers, width = (4, 256) if small else (32, 4096)
    base = _allocated(device)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
    model = model.to(device)
    backend = TorchOffload(model, copy_on_cpu=device.type == "cpu", pin_memory=True)
    _sync(device)
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    # The reference copy lives on the host: on the device it would count as memory
    # the offload left behind (the first GPU run read 100 % left for that reason).
    before = [p.detach().to("cpu", copy=True) for p in model.parameters()]
    offload_s, reload_s, left = [], [], []
    for _ in range(4):
        with torch.no_grad():
            model[0].weight.add_(0.0)  # dirty the weights: every offload copies
        _sync(device)
        t0 = time.perf_counter()
        backend.offload(["weights"])
        offload_s.append(time.perf_counter() - t0)
        left.append(_allocated(device) - base)
        t0 = time.perf_counter()
        backend.reload(["weights"])
        _sync(device)
        reload_s.append(time.perf_counter() - t0)
    intact = _same(before, [p.detach().cpu() for p in model.parameters()])
    del before
    ref = pinned_reference(model_bytes, device)
    gb = model_bytes / 1e9
    out = {
        "model_gb": gb,
        "allocated_after_offload_fraction": max(left) / model_bytes,
        "offload_gb_per_s": gb / _median(offload_s),
        "reload_gb_per_s": gb / _median(reload_s),
        "pinned_d2h_gb_per_s": ref["d2h_gb_per_s"],
        "pinned_h2d_gb_per_s": ref["h2d_gb_per_s"],
        "weights_intact": intact,
    }
    out["offload_vs_pinned"] = out["offload_gb_per_s"] / out["pinned_d2h_gb_per_s"]
    out["reload_vs_pinned"] = out["reload_gb_per_s"] / out["pinned_h2d_gb_per_s"]
    out["ok"] = (
        intact
        and out["allocated_after_offload_fraction"] <= 0.05
        and out["offload_vs_pinned"] >= 0.8
        and out["reload_vs_pinned"] >= 0.8
    )
    return out


# -- a >= 1B Llama with AdamW -----------------------------------------------------------


def _llama(device: torch.device, small: bool, seed: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    if small:
        cfg = LlamaConfig(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=128,
            attn_implementation="eager",
        )
    else:  # TinyLlama-1.1B's shape: 1.1e9 parameters, 2.2 GB in bf16
        cfg = LlamaConfig(
            hidden_size=2048,
            intermediate_size=5632,
            num_hidden_layers=22,
            num_attention_heads=32,
            num_key_value_heads=4,
            vocab_size=32000,
            attn_implementation="eager",  # deterministic backward: the twin's loss must match
        )
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return LlamaForCausalLM(cfg).to(device=device, dtype=dtype)


def _llama_step(model: torch.nn.Module, optimizer: Any, step: int) -> float:
    gen = torch.Generator().manual_seed(1000 + step)
    ids = torch.randint(0, model.config.vocab_size, (2, 64), generator=gen).to(model.device)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def part_llama(device: torch.device, small: bool) -> dict[str, Any]:
    try:
        return _part_llama(device, small)
    finally:
        torch.use_deterministic_algorithms(False)


def _part_llama(device: torch.device, small: bool) -> dict[str, Any]:
    from rlplex.stages.offload_torch import TorchOffload

    copy_on_cpu = device.type == "cpu"
    # Bit-equal losses with the twin need deterministic kernels (embedding backward).
    torch.use_deterministic_algorithms(True)
    model = _llama(device, small, seed=0)
    backend = TorchOffload(model, copy_on_cpu=copy_on_cpu)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    backend.optimizers.append(optimizer)
    twin = _llama(device, small, seed=0)
    TorchOffload(twin)  # the same flattening; never offloaded
    twin_opt = torch.optim.AdamW(twin.parameters(), lr=1e-4)
    losses_equal = _llama_step(model, optimizer, 0) == _llama_step(twin, twin_opt, 0)
    n_params = sum(p.numel() for p in model.parameters())

    offload_s, reload_s, freed, identical = [], [], [], []
    phases: list[dict[str, float]] = []
    for round_ in range(4):
        sizes = backend.state_bytes()
        total = sizes["weights"] + sizes["optimizer"]
        snapshot = _clone_states(model, optimizer)
        _sync(device)
        before = _allocated(device)
        t0 = time.perf_counter()
        moved = backend.offload(["weights", "optimizer", "grads"])
        offload_s.append(time.perf_counter() - t0)
        offload_phases = dict(backend.last_phases)
        freed.append((before - _allocated(device)) / total if device.type == "cuda" else 1.0)
        t0 = time.perf_counter()
        back = backend.reload(["weights", "optimizer", "grads"])
        _sync(device)
        reload_s.append(time.perf_counter() - t0)
        phases.append(
            {**{f"offload_{k}": v for k, v in offload_phases.items()},
             **{f"reload_{k}": v for k, v in backend.last_phases.items()}}
        )  # fmt: skip
        identical.append(
            moved == back == total and _same(snapshot, _clone_states(model, optimizer))
        )
        del snapshot
        step = 1 + round_
        losses_equal &= _llama_step(model, optimizer, step) == _llama_step(twin, twin_opt, step)
    del twin, twin_opt
    ref = pinned_reference(total, device)
    driver = driver_round_trip(total, device)
    gb = total / 1e9
    out = {
        "driver_alloc_s": driver["alloc_s"],
        "driver_free_s": driver["free_s"],
        # Where each move's time went (TorchOffload.last_phases), median of rounds 2-4.
        "phases_s": {k: _median([p[k] for p in phases]) for k in phases[0]},
        "offload_s": _median(offload_s),
        "reload_s": _median(reload_s),
        "params": n_params,
        "weights_gb": sizes["weights"] / 1e9,
        "optimizer_gb": sizes["optimizer"] / 1e9,
        "offload_gb_per_s": gb / _median(offload_s),
        "reload_gb_per_s": gb / _median(reload_s),
        "pinned_d2h_gb_per_s": ref["d2h_gb_per_s"],
        "pinned_h2d_gb_per_s": ref["h2d_gb_per_s"],
        "freed_fraction_min": min(freed),
        "bit_identical": all(identical),
        "next_loss_equals_twin": losses_equal,
    }
    out["offload_vs_pinned"] = out["offload_gb_per_s"] / out["pinned_d2h_gb_per_s"]
    out["reload_vs_pinned"] = out["reload_gb_per_s"] / out["pinned_h2d_gb_per_s"]
    out["ok"] = (
        out["bit_identical"]
        and losses_equal
        and out["freed_fraction_min"] >= 0.95
        and (small or n_params >= 1e9)
        and out["offload_vs_pinned"] >= 0.9
        and out["reload_vs_pinned"] >= 0.9
    )
    return out


# -- DeepSpeed ZeRO-1/2 ------------------------------------------------------------------


def _deepspeed_engine(device: torch.device, small: bool, stage: int) -> Any:
    from rlplex.stages.optim import DeepSpeedTrainer, OptimConfig

    if small:
        model = _llama(device, small, seed=1)
    else:  # about 440M parameters
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(1)
        cfg = LlamaConfig(
            hidden_size=1024,
            intermediate_size=4096,
            num_hidden_layers=24,
            num_attention_heads=16,
            num_key_value_heads=16,
            vocab_size=32000,
        )
        model = LlamaForCausalLM(cfg).to(device=device, dtype=torch.bfloat16)
    config = OptimConfig(backend="deepspeed", zero_stage=stage, micro_batch_size=2, lr=1e-4)
    return DeepSpeedTrainer(model, config, num_micro_batches=1)


def _engine_step(trainer: Any, step: int) -> float:
    engine = trainer.engine
    gen = torch.Generator().manual_seed(2000 + step)
    vocab = engine.module.config.vocab_size
    ids = torch.randint(0, vocab, (2, 64), generator=gen).to(engine.device)
    loss = engine(input_ids=ids, labels=ids).loss
    engine.backward(loss)
    engine.step()
    return float(loss.detach())


def part_deepspeed(device: torch.device, small: bool) -> dict[str, Any]:
    from rlplex.stages.offload_deepspeed import DeepSpeedOffload, _engine_tensors

    results: dict[str, Any] = {}
    ok = True
    for stage in (1, 2):
        trainer = _deepspeed_engine(device, small, stage)
        _engine_step(trainer, 0)  # creates the optimizer state
        per_mover: dict[str, Any] = {}
        for mover in ("rlplex", "deepspeed"):
            off = DeepSpeedOffload(
                trainer.engine,
                pin_memory=device.type == "cuda",
                mover=mover,
                copy_on_cpu=device.type == "cpu",
            )
            _, optimizer_tensors = _engine_tensors(trainer.engine)
            nbytes = sum(
                s.nbytes()
                for s in {
                    t.untyped_storage().data_ptr(): t.untyped_storage() for t in optimizer_tensors()
                }.values()
            )
            offload_s, reload_s, identical, freed = [], [], [], []
            for call in range(4):
                snapshot = [t.detach().clone() for t in optimizer_tensors()]
                _sync(device)
                before = _allocated(device)
                t0 = time.perf_counter()
                off.offload(["optimizer"])
                _sync(device)
                offload_s.append(time.perf_counter() - t0)
                freed.append(
                    (before - _allocated(device)) / nbytes if device.type == "cuda" else 1.0
                )
                t0 = time.perf_counter()
                off.reload(["optimizer"])
                _sync(device)
                reload_s.append(time.perf_counter() - t0)
                identical.append(_same(snapshot, [t.detach() for t in optimizer_tensors()]))
                del snapshot
                _engine_step(trainer, 1 + call)
            gb = nbytes / 1e9
            per_mover[mover] = {
                "optimizer_gb": gb,
                "first_offload_gb_per_s": gb / offload_s[0],
                "offload_gb_per_s_from_2nd": gb / statistics.median(offload_s[1:]),
                "reload_gb_per_s_from_2nd": gb / statistics.median(reload_s[1:]),
                "bit_identical": all(identical),
                "freed_fraction_min": min(freed),
            }
        ref = pinned_reference(int(per_mover["rlplex"]["optimizer_gb"] * 1e9), device)
        own = per_mover["rlplex"]
        own["offload_vs_pinned"] = own["offload_gb_per_s_from_2nd"] / ref["d2h_gb_per_s"]
        own["reload_vs_pinned"] = own["reload_gb_per_s_from_2nd"] / ref["h2d_gb_per_s"]
        stage_ok = (
            own["bit_identical"]
            and own["freed_fraction_min"] >= 0.9
            and own["offload_vs_pinned"] >= 0.5
        )
        ok &= stage_ok
        results[f"zero{stage}"] = {**per_mover, "pinned": ref, "ok": stage_ok}
        del trainer
        if device.type == "cuda":
            torch.cuda.empty_cache()
    results["ok"] = ok
    return results


PARTS = {"weights": part_weights, "llama": part_llama, "deepspeed": part_deepspeed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="all", choices=["all", *PARTS])
    parser.add_argument("--small", action="store_true", help="small models (quick checks)")
    parser.add_argument("--smoke-cpu", action="store_true", help="run on CPU to check the script")
    args = parser.parse_args(argv)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    if args.smoke_cpu:
        device = torch.device("cpu")
        os.environ["DS_ACCELERATOR"] = "cpu"
        args.small = True
    elif not torch.cuda.is_available():
        print(NOT_MEASURED)
        return 0
    else:
        device = torch.device("cuda")
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu (smoke)",
        "torch": torch.__version__,
        "small": args.small,
    }
    for name, part in PARTS.items():
        if args.part in ("all", name):
            result[name] = part(device, args.small)
    result["ok"] = all(v["ok"] for k, v in result.items() if isinstance(v, dict))
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] or device.type == "cpu" else 2


if __name__ == "__main__":
    sys.exit(main())
