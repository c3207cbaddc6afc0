"""Optimizer backends: exact gradient accumulation, and DeepSpeed ZeRO on CPU with offload."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlplex.stages import batch as B  # noqa: E402
from rlplex.stages import generation as G  # noqa: E402
from rlplex.stages import logprobs as LP  # noqa: E402
from rlplex.stages import models as M  # noqa: E402
from rlplex.stages import optim as O  # noqa: E402
from rlplex.stages import toy  # noqa: E402

torch.set_num_threads(1)


def _batch():
    tok = toy.toy_tokenizer()
    prompts = [tok.encode("12"), tok.encode("345")]
    responses = [[5, 2], [6, 7, 2], [7, 2], [8, 9, 9]]
    return G._batch_from_responses(prompts, responses, 2, tok.pad_token_id, tok.eos_token_id)


def _nll(model, mb):
    lp = LP.forward_logprobs(model, mb)
    mask = mb["response_mask"]
    return -(lp * mask).sum() / mask.sum(), {"tokens": float(mask.sum())}


def _tokens(mb):
    return float(mb["response_mask"].sum())


def test_gradient_accumulation_equals_the_full_batch():
    """Token-weighted micro-batches give the full batch's step exactly."""
    cfg = O.OptimConfig(lr=1e-2, grad_clip=None)
    full = O.TorchTrainer(M.build_causal_lm(M.ModelConfig()), cfg)
    micro = O.TorchTrainer(M.build_causal_lm(M.ModelConfig()), cfg)
    # Plain SGD makes the update the gradient itself (Adam's first step is sign-like and
    # would amplify float noise on near-zero gradients).
    for t in (full, micro):
        t.optimizer = torch.optim.SGD(t.model.parameters(), lr=1.0)
    batch = _batch()
    a = full.step([batch], _nll, _tokens)
    b = micro.step(B.split(batch, 1), _nll, _tokens)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
    assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    for (_, p), (_, q) in zip(full.named_weights(), micro.named_weights(), strict=True):
        assert torch.allclose(p, q, atol=1e-6)


def test_torch_trainer_lowers_the_loss():
    trainer = O.TorchTrainer(M.build_causal_lm(M.ModelConfig()), O.OptimConfig(lr=1e-2))
    batch = _batch()
    losses = [trainer.step(B.split(batch, 2), _nll, _tokens)["loss"] for _ in range(5)]
    assert losses[-1] < losses[0] - 0.5


@pytest.mark.slow
@pytest.mark.parametrize("stage", [1, 2])
def test_deepspeed_zero_trains_and_offloads_on_cpu(stage, monkeypatch):
    # init_deepspeed sets these for its one-process group; keep them out of later tests' env.
    for var in ("DS_ACCELERATOR", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    pytest.importorskip("deepspeed")
    from rlplex.stages.offload_deepspeed import DeepSpeedOffload

    cfg = O.OptimConfig(backend="deepspeed", zero_stage=stage, micro_batch_size=2, lr=1e-2)
    trainer = O.make_trainer(M.build_causal_lm(M.ModelConfig()), cfg, num_micro_batches=2)
    assert type(trainer.engine.optimizer).__name__ == "DeepSpeedZeroOptimizer"
    assert trainer.engine.zero_optimization_stage() == stage
    reference = O.TorchTrainer(
        M.build_causal_lm(M.ModelConfig()), cfg.model_copy(update={"backend": "torch"})
    )
    batch = _batch()
    micro = B.split(batch, 2)
    first = trainer.step(micro, _nll, _tokens)
    want = reference.step(micro, _nll, _tokens)
    # Same arithmetic as plain AdamW with exact accumulation.
    assert first["loss"] == pytest.approx(want["loss"], rel=1e-5)
    for (_, p), (_, q) in zip(trainer.named_weights(), reference.named_weights(), strict=True):
        assert torch.allclose(p, q, atol=1e-5)

    # Offload the optimizer through DeepSpeed's offload_states, reload, keep training.
    off = DeepSpeedOffload(
        trainer.engine,
        {"weights": 10, "optimizer": 20, "grads": 10},
        pin_memory=False,
        mover="deepspeed",
    )
    assert off.offload(["optimizer"]) == 20
    assert "optimizer" not in off.resident_states()
    assert trainer.engine.optimizer.offloaded_states  # DeepSpeed itself recorded the offload
    assert off.reload(["optimizer"]) == 20
    assert not trainer.engine.optimizer.offloaded_states
    after = [trainer.step(micro, _nll, _tokens)["loss"] for _ in range(2)]
    ref_after = [reference.step(micro, _nll, _tokens)["loss"] for _ in range(2)]
    assert after == pytest.approx(ref_after, rel=1e-4)

    # rlplex's own mover (the default for ZeRO 0-2): DeepSpeed's flat partitions go to host
    # buffers kept across calls, storages freed, and come back bit for bit.
    own = DeepSpeedOffload(trainer.engine, pin_memory=False, copy_on_cpu=True)
    assert own.mover == "rlplex"
    for _ in range(2):  # the second round reuses the host buffers
        before = _engine_snapshot(trainer.engine)
        sizes = own.state_bytes()
        moved = own.offload(["weights", "optimizer"])
        assert moved == sizes["weights"] + sizes["optimizer"] > 0
        assert all(p.untyped_storage().nbytes() == 0 for p in trainer.engine.module.parameters())
        hosts = [id(m.host) for m in own._movers.values()]
        assert own.reload(["optimizer", "weights"]) == moved
        assert _engine_snapshot(trainer.engine) == before
        more = [trainer.step(micro, _nll, _tokens)["loss"] for _ in range(2)]
        ref_more = [reference.step(micro, _nll, _tokens)["loss"] for _ in range(2)]
        assert more == pytest.approx(ref_more, rel=1e-4)
    assert [id(m.host) for m in own._movers.values()] == hosts
    assert more[-1] < first["loss"]


def _engine_snapshot(engine) -> list[bytes]:
    """Every weight and optimizer-state tensor of a DeepSpeed engine, as bytes."""
    from rlplex.stages.offload_deepspeed import _engine_tensors

    weights, optimizer = _engine_tensors(engine)
    # (clone: .numpy() on the tensor itself would make its storage non-resizable)
    return [t.detach().clone().numpy().tobytes() for t in [*weights(), *optimizer()]]


def test_missing_deepspeed_is_a_clear_error(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_deepspeed(name, *args, **kwargs):
        if name == "deepspeed":
            raise ImportError("No module named 'deepspeed'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_deepspeed)
    with pytest.raises(G.BackendUnavailable, match="rlplex\\[deepspeed\\]"):
        O.init_deepspeed()


def _gloo_groups(size):
    """``size`` stand-alone gloo groups of one process group, made in threads of this process."""
    import datetime
    import socket
    import threading

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    timeout = datetime.timedelta(seconds=30)
    groups = [None] * size

    def join(rank):
        store = dist.TCPStore("127.0.0.1", port, size, rank == 0, timeout=timeout)
        groups[rank] = dist.ProcessGroupGloo(store, rank, size, timeout)

    threads = [threading.Thread(target=join, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return groups


def test_data_parallel_workers_take_the_full_batch_step():
    """Two workers on uneven shards all-reduce gradients: each steps as one on the whole batch."""
    import threading

    cfg = O.OptimConfig(lr=1e-2, grad_clip=None)
    full = O.TorchTrainer(M.build_causal_lm(M.ModelConfig()), cfg)
    workers = [
        O.TorchTrainer(M.build_causal_lm(M.ModelConfig()), cfg, group=g) for g in _gloo_groups(2)
    ]
    for t in (full, *workers):
        t.optimizer = torch.optim.SGD(t.model.parameters(), lr=1.0)
    batch = _batch()
    full.step([batch], _nll, _tokens)
    shards = [B.select(batch, slice(0, 1)), B.select(batch, slice(1, 4))]
    threads = [
        threading.Thread(target=w.step, args=([shard], _nll, _tokens))
        for w, shard in zip(workers, shards, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for worker in workers:
        for (_, p), (_, q) in zip(full.named_weights(), worker.named_weights(), strict=True):
            assert torch.allclose(p, q, atol=1e-6)


def test_deepspeed_with_several_workers_is_refused_naming_the_size():
    class Group:
        def size(self):
            return 2

    model = M.build_causal_lm(M.ModelConfig())
    with pytest.raises(ValueError, match="2 data-parallel workers"):
        O.make_trainer(model, O.OptimConfig(backend="deepspeed"), 1, group=Group())


@pytest.mark.slow
def test_a_cpu_model_gets_deepspeeds_cpu_accelerator_even_with_cuda(monkeypatch):
    """DeepSpeed picks CUDA where it exists; a CPU model must still get the CPU accelerator."""
    pytest.importorskip("deepspeed")
    for var in ("DS_ACCELERATOR", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    deepspeed = O.init_deepspeed("cpu")
    from deepspeed.accelerator import get_accelerator

    assert os.environ["DS_ACCELERATOR"] == "cpu"
    assert get_accelerator().device_name() == "cpu"
    assert deepspeed.comm.get_world_size() == 1
