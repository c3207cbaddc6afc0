"""A stage's ``share`` of the step's samples: read from the native YAML, the Python API, a
Python pipeline's YAML overrides and a ``--costs`` file; refused outside (0, 1] and below 1
on stages that process the whole step (generation, training, weight syncs), in one line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rlplex
from rlplex.cli import app
from rlplex.config import load_config
from rlplex.dag import PipelineBuilder, StageDefinitionError, stage
from rlplex.errors import ConfigError

HEAD = (
    "cluster: {nodes: 1, gpus_per_node: 8, gpu_memory_gb: 80}\n"
    "roles:\n"
    '  actor_train: {devices: "0-7", states: {weights: 4}}\n'
    '  actor_infer: {devices: "0-7", states: {weights: 4}}\n'
    "  math: {world_size: 2}\n"
)


def _config(tmp_path: Path, reward: str = "", generate: str = "", train: str = "") -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        HEAD
        + "pipeline:\n  stages:\n"
        + f"    generate: {{role: actor_infer, seconds: 10{generate}}}\n"
        + f"    reward_math: {{role: math, seconds: 2, after: [generate]{reward}}}\n"
        + f"    train: {{role: actor_train, seconds: 10, after: [reward_math]{train}}}\n"
        + "    weight_sync: {from: actor_train, to: actor_infer, after: [train]}\n"
    )
    return path


def test_native_yaml_reads_a_share_and_defaults_to_the_whole_step(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, reward=", share: 0.4"))
    assert cfg.pipeline.stage("reward_math").share == 0.4
    assert cfg.pipeline.stage("generate").share == 1.0
    over = load_config(_config(tmp_path), overrides=["pipeline.stages.reward_math.share=0.25"])
    assert over.pipeline.stage("reward_math").share == 0.25


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("reward", "0", "pipeline.stages.reward_math.share: must be in (0, 1] (got 0)"),
        ("reward", "1.5", "pipeline.stages.reward_math.share: must be in (0, 1] (got 1.5)"),
        ("reward", "-0.2", "pipeline.stages.reward_math.share: must be in (0, 1] (got -0.2)"),
        (
            "generate",
            "0.5",
            "pipeline.stages.generate.share: must be 1: a generation stage generates the"
            " whole step's samples (got 0.5)",
        ),
        (
            "train",
            "0.5",
            "pipeline.stages.train.share: must be 1: a train stage trains on the whole"
            " step's samples (got 0.5)",
        ),
    ],
)
def test_a_share_out_of_range_or_on_a_whole_step_stage_is_one_line(
    tmp_path: Path, where: str, value: str, message: str
) -> None:
    path = _config(tmp_path, **{where: f", share: {value}"})
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}: {message}"


def test_a_weight_sync_takes_no_share(tmp_path: Path) -> None:
    path = _config(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides=["pipeline.stages.weight_sync.share=0.5"])
    assert str(info.value).endswith(
        "pipeline.stages.weight_sync.share: must be 1: a weight sync sends the weights, not"
        " samples (got 0.5)"
    )


def test_python_api_takes_a_share() -> None:
    @rlplex.stage(role="math", seconds=2, share=0.4)
    def reward_math(): ...

    b = PipelineBuilder()
    b.stage("ref_logprob_teacher", role="teacher", seconds=3, share=0.5)
    assert b.build().stage("ref_logprob_teacher").share == 0.5
    assert rlplex.define_pipeline(reward_math).stage("reward_math").share == 0.4
    with pytest.raises(StageDefinitionError) as info:
        stage(role="actor_infer", name="generate", share=0.5)(lambda: None)
    assert str(info.value) == (
        "stage 'generate': share: must be 1: a generation stage generates the whole step's"
        " samples (got 0.5)"
    )
    with pytest.raises(StageDefinitionError) as info:
        PipelineBuilder().stage("reward", role="math", share=2.0)
    assert str(info.value) == "stage 'reward': share: must be in (0, 1] (got 2.0)"


def test_python_pipeline_and_costs_file_set_a_share(tmp_path: Path) -> None:
    """Next to ``python:``, ``stages:`` may set a stage's share as it sets its costs; so may a
    ``--costs`` file, whose out-of-range share is refused naming the costs file."""
    (tmp_path / "pipe.py").write_text(
        textwrap.dedent(
            """\
            import rlplex

            def make():
                b = rlplex.PipelineBuilder()
                b.stage("generate", role="actor_infer", seconds=10)
                b.stage("reward_math", role="math", seconds=2, after="generate")
                return b.build()
            """
        )
    )
    path = tmp_path / "p.yaml"
    path.write_text(
        HEAD + 'pipeline: {python: "pipe.py:make", stages: {reward_math: {share: 0.3}}}\n'
    )
    assert load_config(path).pipeline.stage("reward_math").share == 0.3
    costs = tmp_path / "costs.yaml"
    costs.write_text("stages: {reward_math: {share: 0.6}}\n")
    assert load_config(_config(tmp_path), costs=costs).pipeline.stage("reward_math").share == 0.6
    costs.write_text("stages: {reward_math: {share: 0}}\n")
    with pytest.raises(ConfigError) as info:
        load_config(_config(tmp_path), costs=costs)
    assert str(info.value) == f"{costs}: stages.reward_math.share: must be in (0, 1] (got 0)"
