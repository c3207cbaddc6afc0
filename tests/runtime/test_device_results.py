"""Which stage results stay on the device: those whose every consumer shares the producer's GPUs."""

from __future__ import annotations

from types import SimpleNamespace

from rlplex.plan.ids import OpKind, OpWork
from rlplex.runtime.dispatcher import StageBinding, _share_on_device


def op(stage: str, role: str, devices: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(work=OpWork(OpKind.RUN, devices, stage=stage, role=role))


def test_only_results_consumed_on_the_same_devices_stay_there() -> None:
    schedule = SimpleNamespace(
        ops=[
            op("generate", "actor_infer", (0,)),
            op("old_logprob", "actor_train", (0,)),
            op("ref_logprob", "reference", (0,)),
            op("reward", "rewards", ()),
            op("advantage", "driver", ()),
            op("train", "actor_train", (0,)),
            op("values", "critic", (1,)),
        ]
    )
    bindings = {
        "old_logprob": StageBinding(upstream=("generate",)),
        "ref_logprob": StageBinding(upstream=("generate",)),
        "train": StageBinding(upstream=("old_logprob", "ref_logprob")),
        "reward": StageBinding(upstream=("ref_logprob",)),
        "values": StageBinding(upstream=("generate",)),
        "advantage": StageBinding(upstream=("train",)),
    }
    groups = {r: object() for r in ("actor_infer", "actor_train", "reference", "rewards", "critic")}
    shared = _share_on_device(schedule, bindings, groups)
    # generate also feeds the critic on GPU 1; ref_logprob feeds a CPU role; train the driver.
    assert shared == {"old_logprob"}
    del bindings["values"]
    assert _share_on_device(schedule, bindings, groups) == {"generate", "old_logprob"}


def test_a_rehearsal_sleeps_the_work_not_the_modelled_dispatch_overhead() -> None:
    """With ``cluster.dispatch_s``, planned op times include it; the worker is told the work."""
    from rlplex.config import config_from_dict
    from rlplex.plan import make_plan
    from rlplex.runtime.dispatcher import Dispatcher
    from rlplex.runtime.groups import WorkerGroup
    from rlplex.runtime.schedule import expand_plan

    cfg = config_from_dict(
        {
            "cluster": {"nodes": 1, "gpus_per_node": 1, "gpu_memory_gb": 80, "dispatch_s": 0.25},
            "roles": {"actor_train": {"devices": [0], "states": {"weights": 1}}},
            "pipeline": {"stages": {"train": {"role": "actor_train", "seconds": 1.0}}},
        }
    )
    schedule = expand_plan(make_plan(cfg), 1, staleness=0)
    (op,) = [o for o in schedule.ops if o.work.kind == "run"]
    assert op.planned_s == 1.25 and op.work_s == 1.0  # the plan says which part is overhead

    calls: list[dict] = []

    class Run:
        def remote(self, meta, *args):
            calls.append(meta)
            return object(), object()

    actor = SimpleNamespace(run=Run())
    group = WorkerGroup(role="actor_train", actors=[actor], infos=[])
    recorder = SimpleNamespace(now=lambda: 0.0)
    dispatcher = Dispatcher(schedule, {"actor_train": group}, recorder, {}, timeout_s=10)
    dispatcher._issue_run(op, group, "train")
    assert calls[0]["planned_s"] == 1.0


def test_workers_hand_a_shared_result_to_a_colocated_consumer_and_free_it_per_step(
    monkeypatch,
) -> None:
    """The worker glue, in-process: produce, share, consume, release (CPU shared memory)."""
    import functools
    import os

    import torch

    import rlplex.runtime.worker as W
    from rlplex.runtime.context import WorkerInfo
    from rlplex.runtime.data import OnDevice

    # On a GPU only CUDA tensors are shared; here CPU tensors stand in for them.
    monkeypatch.setattr(
        W, "share_on_device", functools.partial(W.share_on_device, device_types=("cpu",))
    )
    seen: list[torch.Tensor] = []

    def produce(ctx):
        return {"logp": torch.full((4, 3), float(ctx.step)), "n": 4}

    def consume(ctx, produce):
        seen.append(produce["logp"].clone())
        return None

    info = WorkerInfo(role="actor_train", devices=(0,))
    producer = W.RoleWorker(info, None, {"produce": produce})
    consumer = W.RoleWorker(WorkerInfo(role="reference", devices=(0,)), None, {"consume": consume})
    meta = {"stage": "produce", "step": 3, "planned_s": 0.0, "inputs": [], "share_on_device": True}
    result, _ = producer.run(meta)
    assert isinstance(result, OnDevice) and os.path.exists(result.shared.path)
    meta = {"stage": "consume", "step": 3, "planned_s": 0.0, "inputs": [("produce", 1, False)]}
    consumer.run(meta, result)
    assert torch.equal(seen[0], torch.full((4, 3), 3.0))
    assert producer.release_step(3) == 1
    assert not os.path.exists(result.shared.path)
    assert producer.release_step(3) == 0
