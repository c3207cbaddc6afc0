"""rlplex.reports.misfit and ``rlplex estimate`` of a config that does not fit (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.reports.misfit import is_fit_error, misfit_report

BIG: dict[str, Any] = {
    "model": "qwen2.5-72b",
    "workload": {
        "prompts_per_step": 64,
        "samples_per_prompt": 4,
        "prompt_tokens": {"mean": 256, "max": 512},
        "response_tokens": {"mean": 512, "max": 1024},
    },
    "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "h100"},
    "roles": {
        "actor_train": {"devices": "0-7"},
        "actor_infer": {"devices": "0-7", "num_gpus_per_worker": 8},
    },
    "pipeline": {
        "stages": {
            "generate": {"role": "actor_infer"},
            "train": {"role": "actor_train", "after": ["generate"]},
            "weight_sync": {
                "kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                "after": ["train"],
            },
        }
    },
}  # fmt: skip


@pytest.fixture
def big(tmp_path: Path) -> Path:
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(BIG), encoding="utf-8")
    return path


def _error(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return info.value


def test_report_has_every_figure_and_the_shortfalls(big: Path) -> None:
    error = _error(big)
    assert is_fit_error(error)
    report = misfit_report(big, error)
    assert report.gpu_memory_gb == 85.52
    assert set(report.estimate.stages) == {"generate", "train", "weight_sync"}
    assert all(s.seconds and s.seconds > 0 for s in report.estimate.stages.values())
    weights = report.estimate.roles["actor_train"].states["weights"]
    # 72.7B bf16 parameters, unsharded, on every GPU: about 145 GB
    assert weights == pytest.approx(145.4, rel=0.01)
    by_what = {(s.role, s.what): s for s in report.shortfalls}
    short = by_what[("actor_train", "weights")]
    assert short.over_gb == pytest.approx(weights - 85.52)
    assert "zero: 3" in short.remedy or "fsdp" in short.remedy
    assert ("actor_train", "stage") in by_what
    assert ("actor_infer", "weights") not in by_what  # tp 8: 18 GB per GPU fits
    assert 0 < report.kv_cache_gb["actor_infer"] <= 0.9 * 85.52


def test_a_gpu_memory_given_by_set_is_the_cap(big: Path) -> None:
    report = misfit_report(big, _error(big), overrides=["cluster.gpu_memory_gb=40"])
    assert report.gpu_memory_gb == 40


def test_other_errors_are_not_fit_errors() -> None:
    assert not is_fit_error(ConfigError("x", field="roles.actor_train.devices"))
    assert is_fit_error(ConfigError("x", field="roles.actor_train.states.weights"))
    assert is_fit_error(ConfigError("x", field="pipeline.stages.train.memory_gb"))


def test_cli_prints_figures_marks_and_exits_2(big: Path) -> None:
    result = CliRunner().invoke(app, ["estimate", str(big)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    for text in ("does NOT fit", "memory per GPU", "does not fit:", "over by", "zero: 3"):
        assert text in result.output, text
    assert "Traceback" not in result.output
    # how each stage runs, as for a config that fits, but without a KV cache's room the GPU
    # does not leave (the misfit estimate prices the cache its sequences need)
    train = [x for x in result.output.splitlines() if x.startswith("train: ")]
    assert train and "micro-batches of" in train[0]
    assert "KV cache room" not in result.output
    result = CliRunner().invoke(app, ["estimate", str(big), "--json"])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["fits"] is False and doc["shortfalls"]


def test_a_config_that_fits_exits_0() -> None:
    root = Path(__file__).resolve().parents[2]
    result = CliRunner().invoke(app, ["estimate", str(root / "examples" / "estimate_7b.yaml")])
    assert result.exit_code == 0, result.output


def test_no_room_for_the_kv_cache_is_a_shortfall() -> None:
    root = Path(__file__).resolve().parents[2]
    path = root / "examples" / "estimate_7b.yaml"
    # tp 2: 72.7 GB of weights per GPU above 0.8 x 85.52 GB
    overrides = ["model=qwen2.5-72b", "roles.actor_infer.rollout.gpu_memory_utilization=0.8"]
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides=overrides)
    report = misfit_report(path, info.value, overrides=overrides)
    kv = next(s for s in report.shortfalls if s.what == "kv_cache")
    assert kv.role == "actor_infer" and kv.cap_gb == pytest.approx(0.8 * 85.52)
    weights = report.estimate.roles["actor_infer"].states["weights"]
    assert kv.need_gb == pytest.approx(
        weights + report.estimate.roles["actor_infer"].activations_gb
    )
    assert report.kv_cache_gb["actor_infer"] == 0.0
    assert "num_gpus_per_worker" in kv.remedy


def test_the_misfit_table_shows_a_cpu_optimizers_host_state(tmp_path: Path) -> None:
    """A 72B trainer with a CPU optimizer still does not fit one node (its weights and grads
    do not); the table shows where the optimizer is: in host memory, not on the GPU."""
    raw = {**BIG, "roles": {**BIG["roles"], "actor_train": {
        "devices": "0-7", "parallel": {"cpu_optimizer": True}}}}  # fmt: skip
    path = tmp_path / "cpu.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    host = misfit_report(path, err.value).estimate.roles["actor_train"].host_states
    assert host["optimizer"] > 0
    result = CliRunner().invoke(app, ["estimate", str(path), "--json"])
    assert result.exit_code == 2
    role = json.loads(result.stdout)["estimate"]["roles"]["actor_train"]
    assert "optimizer" not in role["states"] and role["host_states"]["optimizer"] > 0
    # The table, printed whole on an 80-column console (tables are never cut to its width).
    import importlib
    import io

    from rich.console import Console

    import rlplex.cli.misfit as cli_misfit

    cli_app = importlib.import_module("rlplex.cli.app")  # rlplex.cli.app is also the Typer app
    narrow = Console(file=io.StringIO(), width=80, force_terminal=False)
    saved = cli_misfit.console, cli_app.console
    cli_misfit.console = cli_app.console = narrow
    try:
        cli_misfit.print_misfit(misfit_report(path, err.value), json_=False)
    finally:
        cli_misfit.console, cli_app.console = saved
    assert f"{host['optimizer']:.2f} host" in narrow.file.getvalue()
