"""The native config loader: every error kind with its exact message, examples, --set."""
# ruff: noqa: E501 -- tables of exact error messages read best one per line

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlplex.config import detect_format, load_config
from rlplex.errors import ConfigError, InvalidValueError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

BASE = """\
cluster: {nodes: 2, gpus_per_node: 4, gpu_memory_gb: 80}
roles:
  actor_train: {devices: "0-7", states: {weights: 4, optimizer: 8}}
  actor_infer: {devices: "0-7", num_gpus_per_worker: 2, states: {weights: 4, kv_cache: 30}}
  rewards: {world_size: 4}
pipeline:
  mode: sync
  stages:
    generate: {role: actor_infer, seconds: 120}
    reward: {role: rewards, seconds: 10, after: [generate]}
    train: {role: actor_train, seconds: 80, after: [reward]}
    weight_sync: {kind: weight_sync, from: actor_train, to: actor_infer, after: [train]}
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_base_loads(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, BASE))
    assert cfg.roles["actor_infer"].world_size == 4
    assert cfg.roles["rewards"].devices == ()
    assert cfg.pipeline.stage("train").kind == "train"


# (override applied with --set, message after "FILE: ")
BAD_SETS = [
    (
        "roles.actor_train.devices=0-8",
        "roles.actor_train.devices: device 8 is outside the cluster, which has GPUs 0-7 (got '0-8')",
    ),
    (
        "roles.actor_train.devices=__import__('os').system('touch x')",
        "roles.actor_train.devices: cannot parse device item \"__import__('os').system('touch x')\"; allowed forms: ",
    ),
    (
        "roles.actor_infer.num_gpus_per_worker=3",
        "roles.actor_infer.num_gpus_per_worker: does not divide the role's 8 devices (got 3)",
    ),
    (
        "roles.actor_infer.devices=1-6",
        "roles.actor_infer.num_gpus_per_worker: worker 1 would span nodes [0, 1] (GPUs [3, 4]); a worker that fits in one node (4 GPUs) must stay in it (got 2)",
    ),
    (
        "roles.actor_infer.devices=[3, 4]",
        "roles.actor_infer.num_gpus_per_worker: worker 0 would span nodes [0, 1] (GPUs [3, 4]); a worker that fits in one node (4 GPUs) must stay in it (got 2)",
    ),
    (
        "roles.actor_infer.world_size=3",
        "roles.actor_infer.world_size: disagrees with len(devices) // num_gpus_per_worker = 8 // 2 = 4 (got 3)",
    ),
    (
        "pipeline.stages.train.seconds=-1",
        "pipeline.stages.train.seconds: must be greater than or equal to 0 (got -1)",
    ),
    (
        "pipeline.stages.train={role: actor_train, after: [reward]}",
        "pipeline.stages.train.seconds: is required (the stage's duration)",
    ),
    (
        "roles.actor_train.states.weights=81",
        "roles.actor_train.states.weights: is larger than one GPU (80 GB) (got 81.0)",
    ),
    (
        "roles.actor_train.states.weights=-1",
        "roles.actor_train.states.weights: must be >= 0 GB (got -1.0)",
    ),
    (
        "roles.actor_train.states.activations=1",
        "roles.actor_train.states.activations: must be 'weights', 'optimizer', 'grads' or 'kv_cache' (got 'activations')",
    ),
    ("roles.actor_train.colour=red", "roles.actor_train.colour: unknown key (got 'red')"),
    ("cluster.gpus=8", "cluster.gpus: unknown key (got 8)"),
    ("cluster.nodes=0", "cluster.nodes: must be greater than or equal to 1 (got 0)"),
    (
        "extra.thing=1",
        "extra: unknown key (expected one of: cluster, roles, pipeline, model, workload, efficiency)",
    ),
    (
        "pipeline.stages.train.after=[nope]",
        "pipeline.stages.train.after: stage 'train' runs after 'nope', which is not a stage (stages: generate, reward, train, weight_sync) (got ['nope'])",
    ),
    (
        "pipeline.stages.train.role=critic",
        "pipeline.stages.train.role: stage 'train' uses role 'critic', which is not defined (roles: actor_infer, actor_train, driver, rewards) (got 'critic')",
    ),
    ("pipeline.stages.generate.after=[weight_sync]", "pipeline.stages: the stages form a cycle: "),
    (
        "pipeline.stages.weight_sync.to=rewards",
        "pipeline.stages.weight_sync.to: weight_sync stage 'weight_sync' names 'rewards', which is not a GPU role (got 'rewards')",
    ),
    (
        "pipeline.stages.weight_sync.to=ghost",
        "pipeline.stages.weight_sync.to: stage 'weight_sync' uses role 'ghost', which is not defined (roles: actor_infer, actor_train, driver, rewards) (got 'ghost')",
    ),
    (
        "pipeline.stages.train.needs=[kv_cache]",
        "pipeline.stages.train.needs: role 'actor_train' has no state 'kv_cache' (it has: weights, optimizer) (got ['kv_cache'])",
    ),
    ("pipeline.mode=async", None),
    ("pipeline.max_staleness=1", None),
    (
        "roles.rewards.states={weights: 1}",
        "roles.rewards.states: a CPU role (no devices) cannot hold GPU states; give it devices (got {'weights': 1.0})",
    ),
    (
        "roles.driver={world_size: 2}",
        "roles.driver: 'driver' is the built-in controller role and cannot be redefined",
    ),
    ("pipeline.mode=later", "pipeline.mode: must be 'sync' or 'async' (got 'later')"),
    (
        "roles.actor_train.parallel={kernels: turbo}",
        "roles.actor_train.parallel.kernels: must be 'fused' or 'eager' (got 'turbo')",
    ),
]


def test_staleness_may_exceed_the_stage_count_up_to_the_cap(tmp_path: Path) -> None:
    """Regression: max_staleness was refused above the stage count, so NeMo RL's
    max_trajectory_age_steps 8 with six stages could not be written; the engine holds that
    many steps' requests, so the value matters. The absolute cap still holds."""
    path = write(tmp_path, BASE)
    stages = len(load_config(path).pipeline.stages)
    cfg = load_config(
        path, overrides=["pipeline.mode=async", f"pipeline.max_staleness={stages + 3}"]
    )
    assert cfg.pipeline.staleness == stages + 3
    # The planner unrolls enough steps for k in flight, and the plan verifies.
    from rlplex.plan import make_plan, verify_plan

    plan = make_plan(cfg)
    verify_plan(plan, cfg)
    assert plan.period_s > 0
    with pytest.raises(ConfigError, match="less than or equal to 64"):
        load_config(path, overrides=["pipeline.mode=async", "pipeline.max_staleness=65"])


@pytest.mark.parametrize(("override", "message"), [b for b in BAD_SETS if b[1]])
def test_bad_values(tmp_path: Path, override: str, message: str) -> None:
    path = write(tmp_path, BASE)
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides=[override])
    assert str(info.value).startswith(f"{path}: {message}")


def test_async_roles_may_share_gpus(tmp_path: Path) -> None:
    """DESIGN.md: roles share GPUs in async mode too (ROLL's partial-GPU mode)."""
    path = write(tmp_path, BASE)
    cfg = load_config(path, overrides=["pipeline.mode=async", "pipeline.max_staleness=1"])
    assert cfg.pipeline.staleness == 1
    assert set(cfg.roles["actor_infer"].devices) & set(cfg.roles["actor_train"].devices)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file is empty"),
        ("# only a comment\n", "the file is empty"),
        (
            "cluster: {nodes: 1\nroles: {}\n",
            ":2: YAML syntax error: expected ',' or '}', but got ':'",
        ),
        ("cluster:\n  nodes: 1\n  nodes: 2\n", ":3: key 'nodes' appears twice in the same mapping"),
        ("- 1\n- 2\n", "the config must be a mapping (got [1, 2])"),
        ("cluster: {}\nroles: {}\n", "pipeline: is required"),
        (
            "cluster: {}\nroles: {}\npipeline: {stages: {}}\n",
            "pipeline.stages: the pipeline has no stages",
        ),
        (
            "cluster: {}\nroles: {}\npipeline: {stages: [{name: generate, seconds: 1}]}\n",
            "pipeline.stages: must map each stage's name to its fields",
        ),
        (
            "cluster: !!python/object/apply:os.system ['touch pwned']\n",
            "YAML syntax error: could not determine a constructor",
        ),
    ],
)
def test_file_level_errors(tmp_path: Path, monkeypatch, text: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert message in str(info.value)
    assert str(info.value).startswith(str(path))
    assert not (tmp_path / "pwned").exists()


def test_yaml_error_line_number(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("mode: sync", "mode: [sync"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.line is not None and info.value.line >= 8
    assert f"{path}:{info.value.line}: YAML syntax error" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")


def test_set_creates_and_parses_yaml(tmp_path: Path) -> None:
    cfg = load_config(
        write(tmp_path, BASE),
        overrides=["roles.actor_infer.devices=0-3", "pipeline.stages.generate.memory_gb=12"],
    )
    assert cfg.roles["actor_infer"].devices == (0, 1, 2, 3)
    assert cfg.pipeline.stage("generate").memory_gb == 12


def test_bad_override_syntax(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="an override must look like KEY=VALUE"):
        load_config(write(tmp_path, BASE), overrides=["novalue"])


def test_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--format: unknown format"):
        load_config(write(tmp_path, BASE), format="toml")


def test_python_pipeline_errors(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def make():\n    raise RuntimeError('boom')\n")
    text = BASE.split("pipeline:")[0] + 'pipeline: {python: "broken.py:make"}\n'
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    # Issue 13 defect 7: the file and line of the user's code are named.
    broken = tmp_path / "broken.py"
    assert (
        f"pipeline.python: the pipeline function failed at {broken}:2 (in make): RuntimeError: boom"
        in str(info.value)
    )
    path = write(tmp_path, text.replace("make", "absent"))
    with pytest.raises(ConfigError, match="has no function 'absent'"):
        load_config(path)


def test_native_costs_override(tmp_path: Path) -> None:
    costs = write(tmp_path, "stages: {train: {seconds: 40}}\n", "costs.yaml")
    cfg = load_config(write(tmp_path, BASE), costs=costs)
    assert cfg.pipeline.stage("train").seconds == 40


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_validates(example: Path) -> None:
    cfg = load_config(example)
    assert cfg.pipeline.stages
    assert cfg.format == detect_format(__import__("yaml").safe_load(example.read_text()))
    cfg.pipeline.check([*cfg.roles, "driver"])


def test_import_rlplex_is_light() -> None:
    code = (
        "import sys, rlplex, rlplex.cli, rlplex.config; "
        "bad = [m for m in ('torch', 'ray') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("roles.actor_infr.devices=0-3", "the config has no role 'actor_infr'"),
        ("pipeline.stages.trian.seconds=3", "the config has no stage 'trian'"),
    ],
)
def test_set_refuses_to_create_a_role_or_stage_by_typo(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLES / "ppo.yaml", overrides=[override])
    assert info.value.field == "--set" and message in info.value.message


def test_set_may_add_fields_to_existing_roles_and_stages() -> None:
    cfg = load_config(
        EXAMPLES / "ppo.yaml",
        overrides=["roles.critic.num_gpus_per_worker=2", "pipeline.stages.train.scaling=0.5"],
    )
    assert cfg.roles["critic"].num_gpus_per_worker == 2
    assert cfg.pipeline.stage("train").scaling == 0.5


def test_every_format_has_an_importer_and_a_name_in_the_type() -> None:
    """The format registry is the one list: ``--format`` choices, the type and the importers."""
    from typing import get_args

    from rlplex.config import FORMATS, IMPORTERS, ConfigFormat, to_native

    assert FORMATS[0] == "native" and FORMATS[1:] == tuple(IMPORTERS)
    assert set(FORMATS) == set(get_args(ConfigFormat))
    native = {"cluster": {}, "roles": {}, "pipeline": {"stages": {}}}
    assert to_native("native", native, "f.yaml", None) == native


def test_a_set_on_an_imported_file_that_changes_nothing_says_so() -> None:
    """A misspelt framework key would change nothing without a word: an override of an
    imported file's own keys that leaves its native form as it was gets a warning naming
    it; one the importer reads does not."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    typo = "actor_rollout_ref.rollout.tensor_model_paralel_size=4"
    cfg = load_config(examples / "verl.yaml", overrides=[typo])
    (note,) = [w for w in cfg.warnings if w.startswith("--set")]
    assert typo in note and "verl importer does not read" in note
    read = load_config(examples / "nemo_rl.yaml", overrides=["grpo.num_prompts_per_step=32"])
    assert not [w for w in read.warnings if w.startswith("--set")]
    same = load_config(examples / "nemo_rl.yaml", overrides=["grpo.num_prompts_per_step=64"])
    assert [w for w in same.warnings if w.startswith("--set grpo.num_prompts_per_step=64")]


def test_one_of_two_overrides_of_the_same_key_is_the_unread_one() -> None:
    """Taken out one at a time, each of two equal overrides looked redundant beside the other
    and both were named; taken out cumulatively, only the first is."""
    examples = Path(__file__).resolve().parents[1] / "examples"
    twice = ["grpo.num_prompts_per_step=32", "grpo.num_prompts_per_step=32"]
    cfg = load_config(examples / "nemo_rl.yaml", overrides=twice)
    assert len([w for w in cfg.warnings if w.startswith("--set")]) == 1


def test_a_mean_length_past_its_max_is_refused_not_clamped() -> None:
    """A bug until 2026-11-28: a response (or prompt) mean above its max loaded, and the
    estimator silently used the max; a sweep of the mean drew a flat line past it."""
    path = EXAMPLES / "estimate_7b.yaml"
    for key, value in (("response_tokens", 5000), ("prompt_tokens", 5000)):
        with pytest.raises(ConfigError) as info:
            load_config(path, overrides=[f"workload.{key}.mean={value}"])
        # Two fields together refuse it: no value of the mean alone is "invalid".
        assert not isinstance(info.value, InvalidValueError)
        assert info.value.field == f"workload.{key}"
        assert f"mean {value} exceeds max" in str(info.value)
        assert str(info.value).startswith(f"{path}: ")
    # The error keeps its kind when a loader attributes it to a file.
    assert type(InvalidValueError("x", field="f").with_file("a.yaml")) is InvalidValueError


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("roles.actor_train.parallel.tp=3", "roles.actor_train.parallel", {"tp": 3}),
        ("roles.actor_train.parallel.sp=3", "roles.actor_train.parallel.sp", 3),
        ("roles.actor_train.parallel.sp=5", "roles.actor_train.parallel.sp", 5),
    ],
)
def test_parallel_sizes_must_tile_the_devices_even_when_nothing_is_estimated(
    override: str, field: str, value: object
) -> None:
    """Found in review (2026-11-29): examples/ppo.yaml gives every stage's seconds, so the
    estimator never ran and a tp of 3 or an sp of 5 on 8 GPUs loaded and planned."""
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLES / "ppo.yaml", overrides=[override])
    assert (info.value.field, info.value.value) == (field, value)
    assert load_config(EXAMPLES / "ppo.yaml", overrides=["roles.actor_train.parallel.sp=4"])


def test_an_efficiency_above_the_peak_is_said() -> None:
    """Found in review (2026-11-29): efficiency.train=5 loaded without a word. Still loads
    (calibrating on a machine faster than its preset gives such fits), with a warning."""
    cfg = load_config(EXAMPLES / "estimate_7b.yaml", overrides=["efficiency.train=5"])
    assert any(w.startswith("efficiency.train: 5.0 is above 1") for w in cfg.warnings)
    plain = load_config(EXAMPLES / "estimate_7b.yaml", overrides=["efficiency.train=0.5"])
    assert not any("above 1" in w for w in plain.warnings)


PY_STAGES = """\
import rlplex

@rlplex.stage(role="actor_infer", seconds=GEN)
def generate(): ...

@rlplex.stage(role="actor_train", seconds=80)
def train(generate): ...

def grpo():
    return rlplex.define_pipeline(generate, train)

def stale():
    return grpo().model_copy(update={"mode": "async", "max_staleness": 1000})

def empty():
    return grpo().model_copy(update={"stages": ()})
"""


@pytest.mark.parametrize(
    ("function", "seconds", "field", "said"),
    [
        ("grpo", "None", "pipeline.stages.generate.seconds", "is required (the stage's duration)"),
        ("stale", "120", "pipeline.max_staleness", "must be at most 64"),
        ("empty", "120", "pipeline.stages", "the pipeline has no stages"),
    ],
)
def test_a_python_pipeline_is_held_to_what_a_yaml_one_is(
    tmp_path: Path, function: str, seconds: str, field: str, said: str
) -> None:
    """Found in review (2026-11-29): a Python stage without seconds was planned at 0 s, a
    Python pipeline's staleness of 1,000 planned for 41 s, and an empty one planned."""
    (tmp_path / "stages.py").write_text(PY_STAGES.replace("GEN", seconds))
    text = BASE.split("pipeline:")[0] + f'pipeline: {{python: "stages.py:{function}"}}\n'
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert info.value.field == field and said in str(info.value)
    assert "(from pipeline.python 'stages.py:" in str(info.value)


def test_a_pipeline_file_imports_its_neighbours_and_is_read_again_when_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review (2026-11-29): "sub/uses.py:grpo" could not import a module beside it
    unless run from its folder; and an edited file kept its first stages for the life of
    the process (a notebook reloading the config)."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "stages.py").write_text(PY_STAGES.replace("GEN", "120"))
    (sub / "uses.py").write_text("from stages import grpo\n")
    config = write(
        tmp_path, BASE.split("pipeline:")[0] + 'pipeline: {python: "sub/uses.py:grpo"}\n'
    )
    monkeypatch.chdir(tmp_path.parent)
    assert load_config(config).pipeline.stage("generate").seconds == 120
    direct = write(
        tmp_path,
        BASE.split("pipeline:")[0] + 'pipeline: {python: "sub/stages.py:grpo"}\n',
        "d.yaml",
    )
    assert load_config(direct).pipeline.stage("generate").seconds == 120
    import os

    (sub / "stages.py").write_text(PY_STAGES.replace("GEN", "60"))
    stat = (sub / "stages.py").stat()
    os.utime(sub / "stages.py", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert load_config(direct).pipeline.stage("generate").seconds == 60
    import sys

    sys.modules.pop("stages", None)  # uses.py's import of its neighbour: no leak to others


def test_an_error_of_rlplexs_api_in_a_pipeline_function_is_named_at_the_users_line(
    tmp_path: Path,
) -> None:
    """Found in review (2026-11-29): a stage's bad value was reported "at rlplex/dag/api.py"
    with the exception's class name; the user's line and rlplex's own words now."""
    (tmp_path / "bad.py").write_text(
        "import rlplex\n\ndef grpo():\n"
        "    @rlplex.stage(role='actor_infer', seconds=-1)\n"
        "    def generate(): ...\n"
        "    return rlplex.define_pipeline(generate)\n"
    )
    text = BASE.split("pipeline:")[0] + 'pipeline: {python: "bad.py:grpo"}\n'
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert (
        f"the pipeline function failed at {tmp_path / 'bad.py'}:4 (in grpo): stage 'generate':"
        " seconds: must be greater than or equal to 0 (got -1)" in str(info.value)
    )
