"""A record's joint timers divided among the config's stages (rlplex.timeline.joint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import Config, load_config
from rlplex.timeline.importers.base import RecordedRun
from rlplex.timeline.joint import joint_shares, split_joint

JOINT = {"old_logprob+ref_logprob": ("old_logprob", "ref_logprob")}


def config(tmp_path: Path, old: float | None, ref: float | None) -> Config:
    """A sync config whose log-prob passes cost ``old`` and ``ref`` seconds (None: absent)."""
    stages = ["    generate: {role: actor_infer, seconds: 100}"]
    passes = []
    if old is not None:
        stages.append(f"    old_logprob: {{role: actor_train, seconds: {old}, after: [generate]}}")
        passes.append("old_logprob")
    if ref is not None:
        stages.append(f"    ref_logprob: {{role: reference, seconds: {ref}, after: [generate]}}")
        passes.append("ref_logprob")
    after = ", ".join(passes or ["generate"])
    stages.append(f"    train: {{role: actor_train, seconds: 50, after: [{after}]}}")
    text = (
        "cluster: {nodes: 1, gpus_per_node: 4, gpu_memory_gb: 80}\n"
        "roles:\n"
        "  actor_train: {devices: '0-3', states: {weights: 4}}\n"
        "  actor_infer: {devices: '0-3', states: {weights: 4}}\n"
        "  reference: {devices: '0-3', states: {weights: 4}}\n"
        "pipeline:\n  mode: sync\n  stages:\n" + "\n".join(stages) + "\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return load_config(path)


def record() -> RecordedRun:
    return RecordedRun(
        format="nemo_rl",
        steps={
            1: {"generate": 90.0, "old_logprob+ref_logprob": 20.0},
            # The reference pass skipped: the old pass alone, then joint again.
            2: {"old_logprob": 8.0},
            3: {"old_logprob+ref_logprob": 40.0, "old_logprob": 1.0},
        },
        joint=JOINT,
        warnings=("an import warning",),
    )


def test_split_in_proportion_to_the_configs_modelled_seconds(tmp_path: Path) -> None:
    cfg = config(tmp_path, old=30, ref=10)
    split = split_joint(record(), cfg)
    assert split.joint == {}
    assert split.steps[1] == pytest.approx(
        {"generate": 90.0, "old_logprob": 15.0, "ref_logprob": 5.0}
    )
    assert split.steps[2] == {"old_logprob": 8.0}
    assert split.steps[3] == pytest.approx({"old_logprob": 31.0, "ref_logprob": 10.0})
    # Each member keeps the joint figure's measured/modelled ratio.
    assert split.steps[1]["old_logprob"] / 30 == pytest.approx(split.steps[1]["ref_logprob"] / 10)
    assert split.warnings[0] == "an import warning"
    assert split.warnings[1].startswith("joint timers split by the config's modelled seconds")
    assert "old_logprob 75.0 %, ref_logprob 25.0 %" in split.warnings[1]
    assert len(split.warnings) == 2


def test_a_member_the_config_lacks_gets_nothing(tmp_path: Path) -> None:
    cfg = config(tmp_path, old=30, ref=None)
    split = split_joint(record(), cfg)
    assert split.steps[1] == {"generate": 90.0, "old_logprob": 20.0}
    assert split.steps[3] == {"old_logprob": 41.0}
    assert "all to old_logprob (the config has no ref_logprob)" in split.warnings[-1]


def test_no_member_in_the_config_leaves_the_timer_out(tmp_path: Path) -> None:
    cfg = config(tmp_path, old=None, ref=None)
    steps = {
        1: {"generate": 9.0, "old_logprob+ref_logprob": 2.0},
        2: {"old_logprob+ref_logprob": 2.0},
    }
    run = RecordedRun(format="nemo_rl", steps=steps, joint=JOINT)
    split = split_joint(run, cfg)
    assert split.steps == {1: {"generate": 9.0}}
    assert "the config has none of old_logprob, ref_logprob, left out" in split.warnings[-1]


def test_equal_shares_where_the_config_prices_both_at_zero(tmp_path: Path) -> None:
    cfg = config(tmp_path, old=0, ref=0)
    assert joint_shares(("old_logprob", "ref_logprob"), cfg) == {
        "old_logprob": 0.5,
        "ref_logprob": 0.5,
    }
    split = split_joint(record(), cfg)
    assert split.steps[1] == {"generate": 90.0, "old_logprob": 10.0, "ref_logprob": 10.0}
    assert "(the config prices them at 0 s)" in split.warnings[-1]


def test_a_record_without_joint_timers_comes_back_unchanged(tmp_path: Path) -> None:
    run = RecordedRun(format="verl", steps={1: {"generate": 1.0}})
    assert split_joint(run, config(tmp_path, old=30, ref=10)) is run


def test_the_split_is_pure(tmp_path: Path) -> None:
    run = record()
    before = run.model_dump()
    split_joint(run, config(tmp_path, old=30, ref=10))
    assert run.model_dump() == before
