"""GPU check of weight sync between two Ray actors: CUDA IPC buckets vs the object store, NCCL.

``RAY_AUTH_MODE=disabled python bench/gpu_weight_sync.py [--gb 0.41] [--check]``
on a CUDA machine. Two actors share one GPU (the colocated case: trainer and
rollout on the same devices); the source's weights (bf16, ``--gb`` GB) reach
the destination's own tensors

- ``ipc``: packed into buckets of at most ``--bucket-mb`` MiB on the device,
  handed over as CUDA IPC handles through Ray and copied on the device
  (:mod:`rlplex.stages.weight_sync`, the executor's colocated path);
- ``store``: as CPU tensors through Ray's object store (the old path).

With two GPUs or more, ``nccl``: the same buckets broadcast from an actor on
GPU 0 to one on GPU 1 over a stand-alone NCCL group (the executor's path
between device sets). Checksums of source and destination must be equal.
Target (issue 11): 0.41 GB colocated in at most 20 ms (0.74 s via the object
store on an H100 before). Prints JSON; without CUDA prints ``no CUDA: not
measured`` and exits 0; ``--smoke-cpu`` runs it on CPU actors (shared memory
and gloo) to check the script.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402 - after the path insert

NOT_MEASURED = "no CUDA: not measured"


class Holder:
    """One side of a weight sync: named bf16 weights on this actor's device."""

    def __init__(self, gb: float, seed: int, cuda: bool) -> None:
        self.device = torch.device("cuda") if cuda else torch.device("cpu")
        tensor_bytes = 16 * 2**20  # 16 MiB per tensor, like a 4096 x 2048 bf16 matrix
        count = max(1, round(gb * 1e9 / tensor_bytes))
        gen = torch.Generator().manual_seed(seed)
        self.weights = {
            f"layers.{i:03d}.weight": torch.randn(4096, 2048, generator=gen)
            .to(torch.bfloat16)
            .to(self.device)
            for i in range(count)
        }
        self.layout: list[Any] = []
        self.export_: Any = None
        self.group: Any = None

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.weights.values())

    def checksum(self) -> float:
        return float(sum(t.double().sum() for t in self.weights.values()))

    def buckets(self, bucket_bytes: int) -> list[Any]:
        from rlplex.stages.weight_sync import buckets_of

        return buckets_of(self.weights, bucket_bytes)

    def prepare(self, layout: list[Any]) -> bool:
        self.layout = layout
        return True

    def export(self, index: int, *after: Any) -> Any:
        from rlplex.stages.weight_sync import release, share_packed

        if self.export_ is not None:
            release(self.export_[0])
        self.export_ = share_packed(self.weights, self.layout[index])
        return self.export_[0]

    def release(self, *after: Any) -> bool:
        from rlplex.stages.weight_sync import release

        if self.export_ is not None:
            release(self.export_[0])
        self.export_ = None
        return True

    def load(self, shared: Any) -> int:
        from rlplex.stages.weight_sync import copy_into, load_shared

        return load_shared(shared, copy_into(self.weights))

    def export_cpu(self) -> dict[str, Any]:
        return {k: v.to("cpu") for k, v in self.weights.items()}

    def import_cpu(self, weights: dict[str, Any]) -> int:
        from rlplex.stages.weight_sync import copy_into

        copy_into(self.weights)((k, v.to(self.device)) for k, v in weights.items())
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return len(weights)

    def address(self) -> tuple[str, int]:
        with socket.socket() as s:
            s.bind(("", 0))
            return "127.0.0.1", int(s.getsockname()[1])

    def join(self, host: str, port: int, rank: int, size: int) -> bool:
        import datetime

        import torch.distributed as dist

        timeout = datetime.timedelta(seconds=120)
        store = dist.TCPStore(host, port, size, rank == 0, timeout=timeout)
        if self.device.type == "cuda":
            self.group = dist.ProcessGroupNCCL(store, rank, size)
        else:
            self.group = dist.ProcessGroupGloo(store, rank, size, timeout)
        self.rank = rank
        return True

    def broadcast(self) -> int:
        from rlplex.stages.weight_sync import broadcast_buckets, copy_into

        return broadcast_buckets(
            self.group,
            self.layout,
            source=self.weights if self.rank == 0 else None,
            loader=None if self.rank == 0 else copy_into(self.weights),
            device=self.device,
        )


def _timed(fn: Any, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _median(xs: list[float]) -> float:
    return statistics.median(xs[1:] if len(xs) > 1 else xs)


def run(gb: float, bucket_bytes: int, rounds: int, cuda: bool) -> dict[str, Any]:
    import ray

    gpus = torch.cuda.device_count() if cuda else 0
    ray.init(
        address="local",  # its own: never a cluster another run left on the machine
        num_cpus=4,
        num_gpus=gpus,
        include_dashboard=False,
        log_to_driver=False,
        # The checkout, then this process's own path: where Ray and the project's
        # dependencies are put on the path rather than installed, workers need it too.
        runtime_env={
            "env_vars": {
                "PYTHONPATH": os.pathsep.join(
                    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
                )
            }
        },
    )
    try:
        actor = ray.remote(Holder)
        share = 0.5 if cuda else 0
        src = actor.options(num_gpus=share).remote(gb, 1, cuda)
        dst = actor.options(num_gpus=share).remote(gb, 2, cuda)
        nbytes, want = ray.get([src.nbytes.remote(), src.checksum.remote()])
        layout = ray.get(src.buckets.remote(bucket_bytes))
        ray.get([src.prepare.remote(layout), dst.prepare.remote(layout)])

        def ipc() -> None:
            after: list[Any] = []
            for index in range(len(layout)):
                shared = src.export.remote(index, *after)
                after = [dst.load.remote(shared)]
            ray.get(src.release.remote(*after))

        def store() -> None:
            ray.get(dst.import_cpu.remote(src.export_cpu.remote()))

        result: dict[str, Any] = {"gb": nbytes / 1e9, "buckets": len(layout)}
        ipc_s = _timed(ipc, rounds)
        result["ipc_checksum_equal"] = ray.get(dst.checksum.remote()) == want
        ray.kill(dst)
        dst = actor.options(num_gpus=share).remote(gb, 2, cuda)
        ray.get(dst.prepare.remote(layout))
        store_s = _timed(store, max(2, rounds // 3))
        result["store_checksum_equal"] = ray.get(dst.checksum.remote()) == want
        result["ipc_s"] = _median(ipc_s)
        result["store_s"] = _median(store_s)
        result["ipc_speedup"] = result["store_s"] / result["ipc_s"]
        result["ipc_gb_per_s"] = result["gb"] / result["ipc_s"]
        ray.kill(dst)
        ray.kill(src)

        if not cuda or gpus >= 2:
            one = 1 if cuda else 0
            a = actor.options(num_gpus=one).remote(gb, 3, cuda)
            b = actor.options(num_gpus=one).remote(gb, 4, cuda)
            want = ray.get(a.checksum.remote())
            ray.get([a.prepare.remote(layout), b.prepare.remote(layout)])
            host, port = ray.get(a.address.remote())
            ray.get([a.join.remote(host, port, 0, 2), b.join.remote(host, port, 1, 2)])
            key = "nccl" if cuda else "gloo"
            times = _timed(lambda: ray.get([a.broadcast.remote(), b.broadcast.remote()]), rounds)
            result[f"{key}_s"] = _median(times)
            result[f"{key}_gb_per_s"] = result["gb"] / result[f"{key}_s"]
            result[f"{key}_checksum_equal"] = ray.get(b.checksum.remote()) == want
        else:
            result["nccl"] = f"not measured: {gpus} GPU(s), needs 2"
    finally:
        ray.shutdown()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=0.41, help="GB of weights to sync")
    parser.add_argument("--bucket-mb", type=int, default=512, help="largest bucket, MiB")
    parser.add_argument("--rounds", type=int, default=6, help="syncs timed per method")
    parser.add_argument("--check", action="store_true", help="small and quick (tests)")
    parser.add_argument("--smoke-cpu", action="store_true", help="CPU actors: check the script")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if args.check or args.smoke_cpu:
        args.gb, args.bucket_mb, args.rounds = 0.05, 16, 3
    cuda = torch.cuda.is_available() and not args.smoke_cpu
    if not cuda and not args.smoke_cpu:
        print(NOT_MEASURED)
        return 0
    result = {
        "device": torch.cuda.get_device_name() if cuda else "cpu (smoke)",
        "torch": torch.__version__,
        **run(args.gb, args.bucket_mb * 2**20, args.rounds, cuda),
    }
    checks = [v for k, v in result.items() if k.endswith("checksum_equal")]
    result["ok"] = all(checks) and (
        not cuda or args.check or (result["ipc_s"] <= 0.020 and result["gb"] >= 0.4)
    )
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 2


if __name__ == "__main__":
    sys.exit(main())
