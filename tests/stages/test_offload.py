"""The offload protocol and its backends (torch on CPU, stand-ins for DeepSpeed and vLLM)."""

from __future__ import annotations

import pytest
import torch

from rlplex.stages.offload import BookkeepingOffload, Offloadable, find_offloadable
from rlplex.stages.offload_deepspeed import DeepSpeedOffload
from rlplex.stages.offload_torch import TorchOffload, flatten_parameters
from rlplex.stages.offload_vllm import VllmOffload


def model_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
    return model, torch.optim.Adam(model.parameters(), lr=0.1)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
    loss = model(torch.randn(4, 8)).square().mean()
    loss.backward()
    optimizer.step()


def test_backends_implement_the_protocol() -> None:
    model, opt = model_and_optimizer()
    for backend in (
        TorchOffload(model, opt),
        DeepSpeedOffload(object()),
        VllmOffload(object()),
        BookkeepingOffload(),
    ):
        assert isinstance(backend, Offloadable)

    class Holder:
        offloader = BookkeepingOffload()

    assert find_offloadable(Holder()) is Holder.offloader
    assert find_offloadable(object()) is None


def test_flatten_keeps_parameter_identity_and_values() -> None:
    model, _ = model_and_optimizer()
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    flats = flatten_parameters([model])
    assert len(flats) == 1 and flats[0].numel() == sum(p.numel() for p in params)
    assert [p is q for p, q in zip(params, model.parameters(), strict=True)] == [True] * len(params)
    assert all(torch.equal(a, b) for a, b in zip(before, params, strict=True))


def test_torch_offload_bytes_follow_dirty_clean_and_dead() -> None:
    model, opt = model_and_optimizer()
    backend = TorchOffload(model, opt)
    train_step(model, opt)
    sizes = backend.state_bytes()
    weight_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert (
        sizes["weights"] == weight_bytes
        and sizes["optimizer"] > 0
        and sizes["grads"] == weight_bytes
    )
    # first offload copies (never copied before), grads are dropped
    assert backend.offload(["weights", "grads"]) == weight_bytes
    assert all(p.grad is None for p in model.parameters())
    assert backend.resident_states() == {"optimizer"}
    assert backend.reload(["weights"]) == weight_bytes
    # untouched since the reload: clean, nothing to copy
    assert backend.offload(["weights"]) == 0
    backend.reload(["weights"])
    train_step(model, opt)  # dirties weights and optimizer
    assert backend.offload(["weights"]) == weight_bytes
    backend.reload(["weights"])
    # a dead offload drops the content and the reload only re-allocates
    assert backend.offload(["weights"], dead=True) == 0
    assert backend.reload(["weights"]) == 0
    # offloading what is not resident is a no-op
    assert backend.offload(["grads"]) == 0


def test_torch_offload_named_weights_feed_weight_sync() -> None:
    model, opt = model_and_optimizer()
    backend = TorchOffload(model, opt)
    names = set(backend.named_weights())
    assert names == {n for n, _ in model.named_parameters()}


class FakeDeepSpeedEngine:
    """The documented DeepSpeed surface: offload_states(include=...) / reload_states()."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def offload_states(self, include=None, device=None, pin_memory=True, non_blocking=False):
        self.calls.append(
            (
                "offload",
                tuple(str(getattr(i, "value", i)) for i in include),
                str(getattr(device, "value", device)),
            )
        )

    def reload_states(self, non_blocking=False):
        self.calls.append(("reload",))


def test_deepspeed_offload_maps_states_to_buffer_types() -> None:
    engine = FakeDeepSpeedEngine()
    backend = DeepSpeedOffload(engine, sizes={"weights": 100, "optimizer": 300})
    assert backend.offload(["optimizer"]) == 300
    assert engine.calls[-1][:2] == ("offload", ("hp_params", "optim_states"))
    assert backend.offload(["weights"], dead=True) == 0
    assert engine.calls[-1][:2] == ("offload", ("lp_params",))
    assert backend.resident_states() == {"grads"}
    # DeepSpeed reloads everything; what the plan keeps off goes back at once
    assert backend.reload(["weights"]) == 100
    assert engine.calls[-2:] == [("reload",), ("offload", ("hp_params", "optim_states"), "cpu")]
    assert backend.resident_states() == {"weights", "grads"}


class FakeLLM:
    """vLLM's sleep-mode surface: sleep(level) and wake_up(tags)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def sleep(self, level: int = 1) -> None:
        self.calls.append(("sleep", level))

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.calls.append(("wake_up", tuple(tags or ())))


@pytest.mark.parametrize(("dead", "level", "moved"), [(False, 1, 400), (True, 2, 0)])
def test_vllm_offload_sleeps_and_wakes_weights_first(dead: bool, level: int, moved: int) -> None:
    llm = FakeLLM()
    backend = VllmOffload(llm, weights_bytes=400, kv_cache_bytes=900)
    assert backend.offload(["weights", "kv_cache"], dead=dead) == moved
    assert llm.calls == [("sleep", level)]
    assert backend.resident_states() == frozenset()
    assert backend.reload(["weights", "kv_cache"]) == moved
    assert llm.calls[1:] == [("wake_up", ("weights",)), ("wake_up", ("kv_cache",))]


def test_vllm_kv_cache_alone_round_trips_the_weights() -> None:
    llm = FakeLLM()
    backend = VllmOffload(llm, weights_bytes=400)
    assert backend.offload(["kv_cache"]) == 800
    assert llm.calls == [("sleep", 1), ("wake_up", ("weights",))]
    assert backend.resident_states() == {"weights"}
    backend.reload(["kv_cache"])
    assert llm.calls[-1] == ("wake_up", ("kv_cache",))


def _llm_and_adamw(seed: int = 0):
    from rlplex.stages.models import ModelConfig, build_causal_lm

    torch.manual_seed(seed)
    model = build_causal_lm(ModelConfig(seed=seed))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _lm_step(model, optimizer, seed: int) -> float:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (4, 12), generator=gen)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())


def _snapshot(model, optimizer) -> list[bytes]:
    tensors = [*model.parameters()] + [
        v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)
    ]
    # (clone: .numpy() on the tensor itself would make its storage non-resizable)
    return [t.detach().clone().numpy().tobytes() for t in tensors]


def test_torch_offload_round_trip_is_bit_identical_and_trains_like_a_twin() -> None:
    """The real copy path on CPU (copy_on_cpu): storages freed, bytes back, same next loss."""
    model, opt = _llm_and_adamw()
    twin, twin_opt = _llm_and_adamw()
    backend = TorchOffload(model, opt, pin_memory=False, copy_on_cpu=True)
    TorchOffload(twin, twin_opt, pin_memory=False)  # same flattening, never offloaded
    assert _lm_step(model, opt, 1) == _lm_step(twin, twin_opt, 1)
    hosts = None
    for round_ in range(3):
        before = _snapshot(model, opt)
        sizes = backend.state_bytes()
        moved = backend.offload(["weights", "optimizer", "grads"])
        assert moved == sizes["weights"] + sizes["optimizer"]
        # The memory is really gone, and the optimizer state is one block per dtype.
        assert all(p.untyped_storage().nbytes() == 0 for p in model.parameters())
        moments = backend._tensors("optimizer")
        assert len({t.untyped_storage().data_ptr() for t in moments}) == 1
        assert all(t.untyped_storage().nbytes() == 0 for t in moments)
        assert backend.reload(["weights", "optimizer", "grads"]) == moved
        assert _snapshot(model, opt) == before
        # Host buffers are allocated once and kept.
        now = [id(m.host) for m in backend._movers.values()]
        assert hosts is None or now == hosts
        hosts = now
        assert _lm_step(model, opt, 2 + round_) == _lm_step(twin, twin_opt, 2 + round_)
    assert _snapshot(model, opt) == _snapshot(twin, twin_opt)


def test_torch_offload_clean_state_is_freed_without_copy_and_comes_back() -> None:
    model, opt = _llm_and_adamw()
    backend = TorchOffload(model, opt, pin_memory=False, copy_on_cpu=True)
    _lm_step(model, opt, 1)
    weights = backend.state_bytes()["weights"]
    assert backend.offload(["weights"]) == weights
    backend.reload(["weights"])
    before = _snapshot(model, opt)
    assert backend.offload(["weights"]) == 0  # clean: freed, host copy still current
    assert model.lm_head.weight.untyped_storage().nbytes() == 0
    assert backend.reload(["weights"]) == weights
    assert _snapshot(model, opt) == before
    # dead: dropped, the reload only re-allocates
    assert backend.offload(["weights"], dead=True) == 0
    assert backend.reload(["weights"]) == 0
    assert model.lm_head.weight.untyped_storage().nbytes() > 0


def test_a_stand_in_engine_is_never_measured_with_cuda_counters(monkeypatch) -> None:
    """On a CUDA machine the stand-in reports its sizes, not CUDA's allocation deltas."""
    import rlplex.stages.offload_deepspeed as ods

    readings = iter(range(0, 10**9, 7))
    monkeypatch.setattr(ods, "_allocated", lambda: next(readings))  # as if CUDA were there
    backend = DeepSpeedOffload(FakeDeepSpeedEngine(), sizes={"weights": 100, "optimizer": 300})
    assert backend.mover == "deepspeed"
    assert backend.offload(["optimizer"]) == 300
    assert backend.reload(["optimizer"]) == 300


def test_a_refused_state_leaves_the_others_of_the_call_consistent() -> None:
    """Offload queues every state before waiting: a state refused midway (memory torch does
    not own) must not leave one already started half done, and changes nothing of its own."""
    import numpy as np

    model, opt = _llm_and_adamw()
    backend = TorchOffload(model, opt, pin_memory=False, copy_on_cpu=True, flatten=False)
    _lm_step(model, opt, 1)
    first = next(iter(opt.state))
    opt.state[first] = {"exp_avg": torch.from_numpy(np.ones(8, dtype=np.float32))}
    for other in list(opt.state)[1:]:
        del opt.state[other]
    weights = _snapshot(model, opt)[: len(list(model.parameters()))]
    with pytest.raises(RuntimeError, match="not resizable"):
        backend.offload(["weights", "optimizer"])
    # The weights, started first, really left; the optimizer state is as it was.
    assert backend.resident_states() == {"optimizer", "grads"}
    assert all(p.untyped_storage().nbytes() == 0 for p in model.parameters())
    assert opt.state[first]["exp_avg"].untyped_storage().nbytes() == 32
    assert backend._movers["optimizer"].storages == []
    backend.reload(["weights"])
    assert _snapshot(model, opt)[: len(weights)] == weights


def test_a_reload_that_fails_midway_still_lands_what_it_started(monkeypatch) -> None:
    """Out of memory allocating the second state: the first one's copy is waited for and
    the state counted resident, so nothing reads weights still in flight."""
    model, opt = _llm_and_adamw()
    backend = TorchOffload(model, opt, pin_memory=False, copy_on_cpu=True)
    _lm_step(model, opt, 1)
    before = _snapshot(model, opt)
    backend.offload(["weights", "optimizer"])

    def out_of_memory() -> int:
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(backend._movers["optimizer"], "begin_reload", out_of_memory)
    with pytest.raises(torch.OutOfMemoryError):
        backend.reload(["weights", "optimizer"])
    assert backend.resident_states() == {"weights", "grads"}
    assert backend._movers["weights"].physical is False
    monkeypatch.undo()
    backend.reload(["optimizer"])
    assert _snapshot(model, opt) == before
    assert set(backend.last_phases) == {"allocate_and_queue_s", "copy_s"}
