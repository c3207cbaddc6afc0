"""Which stage results stay on the device: those whose every consumer shares the producer's GPUs."""

from __future__ import annotations

from types import SimpleNamespace

from rlplex.runtime.dispatcher import StageBinding, _share_on_device


def op(stage: str, role: str, devices: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(kind="run", stage=stage, role=role, devices=devices)


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
