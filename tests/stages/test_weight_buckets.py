"""Weight-sync buckets: layout, packing, sharing across processes, bucketed gloo broadcast."""

from __future__ import annotations

import datetime
import pickle
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from child_python import child_env

from rlplex.stages import weight_sync as W
from rlplex.stages.models import ModelConfig, build_causal_lm

ROOT = Path(__file__).resolve().parents[2]


def mixed_tensors() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {
        "b.weight": torch.randn(7, 5),
        "a.bias": torch.randn(3).to(torch.bfloat16),
        "c.count": torch.tensor(11, dtype=torch.int64),
        "d.mask": torch.rand(9) > 0.5,
        "e.empty": torch.empty(0, 4),
        "f.half": torch.randn(2, 3).to(torch.float16),
    }


def checksum(named: dict[str, torch.Tensor]) -> dict[str, float]:
    return {k: float(v.detach().double().sum()) for k, v in sorted(named.items())}


def test_buckets_respect_the_bound_and_give_big_tensors_their_own() -> None:
    specs = [
        ("w2", "float32", (10,), 40),
        ("w1", "float32", (2,), 8),
        ("big", "float32", (500,), 2000),
        ("w3", "float32", (200,), 800),
    ]
    buckets = W.plan_buckets(specs, bucket_bytes=1024)
    assert [[s.name for s in b.slots] for b in buckets] == [["big"], ["w1", "w2"], ["w3"]]
    assert buckets[1].slots[1].offset == W.ALIGN  # aligned for any dtype's view
    assert all(b.nbytes <= 1024 or len(b.slots) == 1 for b in buckets)
    assert W.plan_buckets([]) == []


def test_bad_bucket_size_and_repeated_names_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        W.plan_buckets([("a", "float32", (1,), 4)], bucket_bytes=0)
    with pytest.raises(ValueError, match="repeat: a"):
        W.plan_buckets([("a", "float32", (1,), 4), ("a", "float32", (1,), 4)])


@pytest.mark.parametrize("bucket_bytes", [1, 100, W.DEFAULT_BUCKET_BYTES])
def test_pack_unpack_round_trips_every_dtype_exactly(bucket_bytes: int) -> None:
    named = mixed_tensors()
    got = {}
    for bucket in W.buckets_of(named, bucket_bytes):
        flat = W.pack(named, bucket)
        assert flat.dtype == torch.uint8 and flat.numel() == bucket.nbytes
        got.update(W.unpack(flat, bucket))
    assert set(got) == set(named)
    for name, tensor in named.items():
        assert got[name].dtype == tensor.dtype and got[name].shape == tensor.shape
        assert torch.equal(got[name], tensor), name


def test_copy_into_keeps_the_destination_tensors_and_names_a_missing_one() -> None:
    src = build_causal_lm(ModelConfig(seed=1))
    dst = build_causal_lm(ModelConfig(seed=2))
    before = {n: p.data_ptr() for n, p in dst.named_parameters()}
    named_src = dict(src.named_parameters())
    load = W.copy_into({n: p.data for n, p in dst.named_parameters()})
    for bucket in W.buckets_of(named_src, 4096):
        load(W.unpack(W.pack(named_src, bucket), bucket))
    assert checksum(dict(dst.named_parameters())) == checksum(named_src)
    assert {n: p.data_ptr() for n, p in dst.named_parameters()} == before
    with pytest.raises(KeyError, match="'nope'"):
        load([("nope", torch.zeros(1))])


CONSUMER = """
import pickle, sys, torch
from rlplex.stages import weight_sync as W
from rlplex.stages.models import ModelConfig, build_causal_lm
handles = pickle.load(sys.stdin.buffer)
model = build_causal_lm(ModelConfig(seed=9))
load = W.copy_into({n: p.data for n, p in model.named_parameters()})
moved = sum(W.load_shared(h, load) for h in handles)
sums = {n: float(p.double().sum()) for n, p in sorted(model.named_parameters())}
print(repr((moved, sums)))
"""


@pytest.mark.slow
def test_shared_buckets_reach_another_process_checksums_equal() -> None:
    """The colocated protocol on CPU: the consumer maps the producer's memory and copies."""
    model = build_causal_lm(ModelConfig(seed=3))
    named = dict(model.named_parameters())
    shared = [W.share_packed(named, b) for b in W.buckets_of(named, 64 * 1024)]
    assert len(shared) > 1 and all(h.kind == "shm" for h, _ in shared)
    try:
        out = subprocess.run(
            [sys.executable, "-c", CONSUMER],
            input=pickle.dumps([h for h, _ in shared]),
            capture_output=True,
            check=True,
            cwd=ROOT,
            env=child_env(inherit=False, PATH="/usr/bin:/bin"),
            timeout=120,
        )
    finally:
        for handle, _ in shared:
            W.release(handle)
    moved, sums = eval(out.stdout.decode().strip().splitlines()[-1])
    assert sums == checksum(named)
    assert moved == sum(p.numel() * p.element_size() for p in named.values())
    assert not any(Path(h.path).exists() for h, _ in shared)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bucketed_broadcast_over_gloo_loads_every_receiver() -> None:
    import torch.distributed as dist

    src = build_causal_lm(ModelConfig(seed=4))
    named = dict(src.named_parameters())
    buckets = W.buckets_of(named, 16 * 1024)
    assert len(buckets) > 2
    receivers = [build_causal_lm(ModelConfig(seed=5 + i)) for i in range(2)]
    port, size = _free_port(), 3
    timeout = datetime.timedelta(seconds=60)
    moved: dict[int, int] = {}
    errors: list[BaseException] = []

    def member(rank: int) -> None:
        try:
            store = dist.TCPStore("127.0.0.1", port, size, rank == 0, timeout=timeout)
            group = dist.ProcessGroupGloo(store, rank, size, timeout)
            target = None if rank == 0 else receivers[rank - 1]
            loader = (
                None
                if target is None
                else W.copy_into({n: p.data for n, p in target.named_parameters()})
            )
            moved[rank] = W.broadcast_buckets(
                group,
                buckets,
                source=named if rank == 0 else None,
                loader=loader,
                device=torch.device("cpu"),
            )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    total = sum(p.numel() * p.element_size() for p in named.values())
    assert moved == {0: total, 1: total, 2: total}
    for receiver in receivers:
        assert checksum(dict(receiver.named_parameters())) == checksum(named)


def test_rollout_loads_through_its_engine_api_hf_in_place_and_vllm_by_name() -> None:
    from rlplex.stages.generation import HFGenerator, VLLMGenerator
    from rlplex.stages.roles import RolloutState

    src = dict(build_causal_lm(ModelConfig(seed=6)).named_parameters())
    hf_model = build_causal_lm(ModelConfig(seed=7))
    pointers = [p.data_ptr() for p in hf_model.parameters()]
    hf = RolloutState(HFGenerator(hf_model, 0, 2), hf_model, None)

    class StandInVllmModel:
        """vLLM's model surface used by weight loading: ``load_weights`` of (name, tensor)."""

        def __init__(self) -> None:
            self.model = build_causal_lm(ModelConfig(seed=8))
            self.loaded: list[str] = []

        def load_weights(self, weights):
            params = dict(self.model.named_parameters())
            with torch.no_grad():
                for name, tensor in weights:
                    params[name].copy_(tensor)
                    self.loaded.append(name)

    class StandInLLM:
        def __init__(self) -> None:
            self.worker = SimpleNamespace(model_runner=SimpleNamespace(model=StandInVllmModel()))

        def collective_rpc(self, method, args=()):
            return [method(self.worker, *args)]

    engine = StandInLLM()
    vllm = RolloutState(VLLMGenerator(engine, 0, 2, sampling_params_cls=dict), None, None)
    for bucket in W.buckets_of(src, 8 * 1024):
        flat = W.pack(src, bucket)
        hf.load_weights(W.unpack(flat, bucket))
        vllm.load_weights(W.unpack(flat, bucket))
    assert checksum(dict(hf_model.named_parameters())) == checksum(src)
    assert [p.data_ptr() for p in hf_model.parameters()] == pointers
    vllm_model = engine.worker.model_runner.model
    assert checksum(dict(vllm_model.model.named_parameters())) == checksum(src)
    assert sorted(vllm_model.loaded) == sorted(src)

    # The colocated path: only the handle reaches vLLM's worker, which maps and loads it.
    engine2 = StandInLLM()
    vllm2 = RolloutState(VLLMGenerator(engine2, 0, 2, sampling_params_cls=dict), None, None)
    hf2_model = build_causal_lm(ModelConfig(seed=9))
    hf2 = RolloutState(HFGenerator(hf2_model, 0, 2), hf2_model, None)
    for bucket in W.buckets_of(src, 8 * 1024):
        shared, _flat = W.share_packed(src, bucket)
        try:
            assert vllm2.load_shared(shared) == bucket.payload_bytes
            assert hf2.load_shared(shared) == bucket.payload_bytes
        finally:
            W.release(shared)
    model2 = engine2.worker.model_runner.model
    assert checksum(dict(model2.model.named_parameters())) == checksum(src)
    assert sorted(model2.loaded) == sorted(src)
    assert checksum(dict(hf2_model.named_parameters())) == checksum(src)
