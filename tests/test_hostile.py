"""The corpus of hostile inputs (tests/fixtures/hostile/): each ends in one clear line, exit 2.

Small files live in the corpus; big ones (a 12 MB config, 100,000 chained
stages, a million ``after`` entries, 600,000 roles) are generated here at run
time. Every input goes through the CLI in-process (typer's CliRunner) and
must exit 2 with exactly one line on stderr naming the problem, no traceback.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app

HOSTILE = Path(__file__).resolve().parent / "fixtures" / "hostile"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
runner = CliRunner()

CONFIGS: dict[str, str] = {
    "alias_bomb.yaml": "YAML aliases expand to more than 200,000 nodes",
    "deep_nesting.yaml": ":1: nested more than 64 levels deep",
    "list_key.yaml": "a mapping key must be a name or a number, not a list",
    "pipeline_string.yaml": "pipeline: must be a mapping (got 'generate')",
    "pipeline_list.yaml": "pipeline: must be a mapping (got ['generate', 'train'])",
    "no_cluster.yaml": "cluster: is required",
    "nan_weights.yaml": "roles.actor_train.states.weights: must be a finite number (got nan)",
    "inf_gpu_memory.yaml": "cluster.gpu_memory_gb: must be a finite number (got inf)",
    "inf_network.yaml": "cluster.network_gb_per_s: must be a finite number (got inf)",
    "seconds_true.yaml": "pipeline.stages.train.seconds: must be a valid number (got True)",
    "nodes_true.yaml": "cluster.nodes: must be a valid integer (got True)",
    "device_range_far.yaml": "roles.actor_train.devices: device 8 is outside the cluster",
    "list_range_far.yaml": "roles.actor_train.devices: device 8 is outside the cluster",
    "huge_cluster_all.yaml": "cluster.nodes: must be less than or equal to 65536",
    "scaling_1e30.yaml": "pipeline.stages.train.scaling: must be less than or equal to 2",
    "staleness_1e6.yaml": "pipeline.max_staleness: must be less than or equal to 64",
    "python_os_abort.yaml": "not of the standard library's 'os'",
    "python_sys_exit.yaml": "not of the standard library's 'sys'",
    "python_user_abort.yaml": "'hostile_targets.py:abort_process' killed the process with SIGABRT",
    "python_user_exit.yaml": ": it called sys.exit(3)",
    "python_import_abort.yaml": "'import_abort_target.py:pipeline' killed the process with SIGABRT",
    "python_import_exit.yaml": "'import_exit_target.py:pipeline' ended the process (exit status 7)",
    "python_reexported_abort.yaml": "hostile_targets.py:abort is not a Python function",
    "verl_nnodes_huge.yaml": "trainer.nnodes: must be at most 65,536",
    "verl_nnodes_float.yaml": "trainer.nnodes: must be an integer >= 1",
    "rlinf_range_far.yaml": "past the largest cluster rlplex plans",
    "duplicate_key.yaml": "key 'cluster' appears twice",
    "recursive_alias.yaml": ":2: a recursive YAML alias",
    "recursive_devices.yaml": ":13: a recursive YAML alias",
    "recursive_states.yaml": ":14: a recursive YAML alias",
    "recursive_pipeline.yaml": ":27: a recursive YAML alias",
    "prompt_tokens_1e308.yaml": (
        "workload.prompt_tokens.mean: must be less than or equal to 16777216 (got 1e+308)"
    ),
    "response_tokens_1e308.yaml": (
        "workload.response_tokens.mean: must be less than or equal to 16777216 (got 1e+308)"
    ),
}

RECORDS: dict[str, str | tuple[str, ...]] = {
    "record_twice.jsonl": ":27: op 's0/generate' of step 0 appears twice (first on line 2)",
    "record_interleaved.jsonl": ":4: op 's0/generate' of step 0 appears twice",
    "record_negative_duration.jsonl": ":3: op 's0/reward' of step 0: expected a finite duration",
    "record_nan_duration.jsonl": "got nan",
    "record_inf_duration.jsonl": "got inf",
    "record_corrupt_line.jsonl": ":4: an event needs 'kind', 'start_s' and 'end_s'",
    "record_metrics_bad_step.jsonl": ":5: has no integer 'step'",
    # Python 3.11's decoder gives up at this depth; 3.12's nests deeper (its C recursion
    # limit), parses the line and finds a list: either way one line naming line 5.
    "record_deep_json.jsonl": (":5: JSON nested too deeply", ":5: not a JSON object"),
    "verl_step_twice.jsonl": ":11: step 0 appears twice (first on line 1)",
    "roll_step_twice.log": ":14: step 0 appears twice (first on line 2)",
}


def run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_line_error(result, expected: str | tuple[str, ...]) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    said = " ".join(result.stderr.split())
    alternatives = (expected,) if isinstance(expected, str) else expected
    assert any(text in said for text in alternatives), result.stderr


def test_corpus_is_complete() -> None:
    """Every corpus file is checked below (a new fixture without a test fails here)."""
    on_disk = {p.name for p in HOSTILE.iterdir() if p.suffix in (".yaml", ".jsonl", ".log")}
    assert on_disk == set(CONFIGS) | set(RECORDS)


@pytest.mark.parametrize("command", ["validate", "plan"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hostile_config(name: str, command: str) -> None:
    one_line_error(run(command, HOSTILE / name), CONFIGS[name])


def _record_config(name: str) -> Path:
    if name.startswith(("verl", "roll")):
        return EXAMPLES / "records" / "verl_quickstart.yaml"
    return EXAMPLES / "grpo.yaml"


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_hostile_record_replay(name: str) -> None:
    one_line_error(run("replay", HOSTILE / name, "--config", _record_config(name)), RECORDS[name])


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_hostile_record_skipped_and_counted(name: str) -> None:
    """--skip-bad-lines replays what is left and says what it skipped."""
    result = run("replay", HOSTILE / name, "--config", _record_config(name), "--skip-bad-lines")
    assert result.exit_code == 0, result.output
    assert "skipped" in result.stderr


@pytest.mark.parametrize("name", sorted(n for n in RECORDS if n.startswith("record")))
def test_hostile_record_viz(name: str, tmp_path: Path) -> None:
    result = run("viz", HOSTILE / name, "--gantt", tmp_path / "g.html")
    one_line_error(result, f"{name}:")
    assert not (tmp_path / "g.html").exists()


def test_duplicate_record_is_not_summed() -> None:
    """A record pasted twice used to replay at about twice the recorded time, in silence."""
    from rlplex.timeline.importers import import_record

    once = import_record(EXAMPLES / "records" / "grpo_run.jsonl")
    twice = import_record(HOSTILE / "record_twice.jsonl", skip_bad_lines=True)
    assert twice.steps == once.steps
    assert twice.step_s == once.step_s
    assert any("bad lines skipped in all" in w for w in twice.warnings)


def test_record_directory(tmp_path: Path) -> None:
    one_line_error(run("replay", tmp_path, "--config", EXAMPLES / "grpo.yaml"), "is a directory")
    one_line_error(run("viz", tmp_path), "is a directory")


def test_python_target_traceback_with_debug() -> None:
    result = run("--debug", "validate", HOSTILE / "python_user_abort.yaml")
    assert result.exit_code == 2
    assert "SIGABRT" in result.stderr
    assert "abort_process" in result.stderr.split("\n", 1)[1]  # faulthandler's stack


BIG_BASE = "cluster: {nodes: 1, gpus_per_node: 8}\nroles:\n  r: {devices: '0-7'}\n"


def _chain(n: int) -> str:
    stages = "\n".join(
        f"    s{i}: {{role: r, seconds: 1{f', after: [s{i - 1}]' if i else ''}}}" for i in range(n)
    )
    return BIG_BASE + "pipeline:\n  stages:\n" + stages + "\n"


BIG = {
    "12 MB of comments": (
        lambda: (EXAMPLES / "ppo.yaml").read_text() + ("# " + "x" * 98 + "\n") * 125_000,
        "over the limit of 10 MB",
    ),
    "100,000 chained stages": (lambda: _chain(100_000), "more than 20,000 items"),
    "2,000 chained stages": (lambda: _chain(2_000), "2,000 stages, more than the limit of 1,000"),
    "a million after entries": (
        lambda: (
            BIG_BASE + "pipeline: {stages: {g: {role: r, seconds: 1}, t: {role: r, seconds: 1,"
            " after: [" + ", ".join(["g"] * 1_000_000) + "]}}}\n"
        ),
        "more than 20,000 items",
    ),
    "600,000 CPU roles": (
        lambda: (
            "cluster: {}\nroles:\n"
            + "".join(f"  r{i}: {{world_size: 1}}\n" for i in range(600_000))
        ),
        "over the limit of 10 MB",
    ),
    "5,000 CPU roles": (
        lambda: (
            "cluster: {}\nroles:\n"
            + "".join(f"  r{i}: {{world_size: 1}}\n" for i in range(5_000))
            + "pipeline: {stages: {a: {role: r0, seconds: 1}}}\n"
        ),
        "5,000 roles, more than the limit of 1,000",
    ),
}


@pytest.mark.parametrize("name", sorted(BIG))
def test_big_configs_refused_fast(name: str, tmp_path: Path) -> None:
    make, expected = BIG[name]
    path = tmp_path / "big.yaml"
    path.write_text(make())
    start = time.perf_counter()
    one_line_error(run("validate", path), expected)
    assert time.perf_counter() - start < 15  # generous: a loaded CI box; the bench measures


RECURSIVE = {
    "a list holding itself": ("x: &r [*r]\n", 1),
    "a mapping holding itself": ("x: &r {a: 1, b: *r}\n", 1),
    "through a nested mapping": ("a: 1\nroles: &r\n  x:\n    y: [1, *r]\n", 4),
    "two anchors in a loop": ("a: &a [1, &b [2, *a]]\nc: *b\n", 1),
    "in an override": (None, None),
}


@pytest.mark.parametrize("name", sorted(RECURSIVE))
def test_recursive_alias_refused_fast(name: str, tmp_path: Path) -> None:
    """A self-referencing alias used to run `validate` past 20 s and 1 GB; now under a second."""
    text, line = RECURSIVE[name]
    start = time.perf_counter()
    if text is None:
        result = run("validate", EXAMPLES / "ppo.yaml", "--set", "cluster.nodes=&r [*r]")
        one_line_error(result, "--set cluster.nodes:1: a recursive YAML alias")
    else:
        path = tmp_path / "c.yaml"
        path.write_text(text)
        one_line_error(run("validate", path), f"c.yaml:{line}: a recursive YAML alias")
    assert time.perf_counter() - start < 1


def test_shared_aliases_are_not_recursive() -> None:
    """An anchor used twice, or inside another anchor, is a DAG, not a cycle: accepted."""
    from rlplex.resources.yaml_io import load_yaml_text

    data = load_yaml_text("a: &a [1, 2]\nb: &b {x: *a, y: *a}\nc: [*b, *b, *a]\n")
    assert data["c"] == [{"x": [1, 2], "y": [1, 2]}, {"x": [1, 2], "y": [1, 2]}, [1, 2]]


def test_file_size_limit_is_configurable(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text((EXAMPLES / "ppo.yaml").read_text() + "#" * 2 * 2**20 + "\n")
    assert run("validate", path).exit_code == 0
    monkeypatch.setenv("RLPLEX_MAX_FILE_MB", "1")
    one_line_error(run("validate", path), "over the limit of 1 MB")
    assert os.environ["RLPLEX_MAX_FILE_MB"] == "1"


def test_viz_skips_bad_lines_and_counts_them(tmp_path: Path) -> None:
    result = run("viz", HOSTILE / "record_twice.jsonl", "--skip-bad-lines")
    assert result.exit_code == 0, result.output
    assert "24 bad lines skipped in all" in result.stderr
