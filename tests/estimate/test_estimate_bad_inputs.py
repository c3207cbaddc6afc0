"""Every bad input of the estimator: a ConfigError naming file, field and value; CLI exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config import config_from_dict, load_config
from rlplex.errors import ConfigError


def _error(data: dict[str, Any], file: str = "bad.yaml") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, file=file)
    return info.value


def test_unknown_model_preset(base: dict[str, Any]) -> None:
    base["model"] = "acme/SuperLM-13B"
    err = _error(base)
    assert (err.file, err.field, err.value) == ("bad.yaml", "model", "acme/SuperLM-13B")
    assert "matches no preset" in err.message


def test_unknown_role_model(base: dict[str, Any]) -> None:
    base["roles"]["reference"]["model"] = "nope-1b"
    err = _error(base)
    assert (err.field, err.value) == ("roles.reference.model", "nope-1b")


def test_unknown_gpu(base: dict[str, Any]) -> None:
    base["cluster"]["gpu"] = "h900"
    err = _error(base)
    assert (err.file, err.field, err.value) == ("bad.yaml", "cluster.gpu", "h900")
    assert "h100" in err.message


def test_config_json_missing_a_field(base: dict[str, Any], tmp_path: Path) -> None:
    hf = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 64, "vocab_size": 32}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(hf))
    base["model"] = str(tmp_path)
    err = _error(base)
    assert err.file == str(tmp_path / "config.json")
    assert err.field == "hidden_size"
    hf["hidden_size"] = "wide"
    (tmp_path / "config.json").write_text(json.dumps(hf))
    err = _error(base)
    assert (err.field, err.value) == ("hidden_size", "wide")


def test_folder_without_config_json(base: dict[str, Any], tmp_path: Path) -> None:
    base["model"] = str(tmp_path)
    err = _error(base)
    assert (err.field, err.value) == ("model", str(tmp_path))


def test_weights_that_cannot_fit_even_offloaded(base: dict[str, Any]) -> None:
    base["model"] = "qwen2.5-72b"
    base["roles"]["actor_infer"]["num_gpus_per_worker"] = 8  # inference fits on tp 8
    err = _error(base)  # training holds full bf16 weights per GPU (zero 1): 145 GB
    assert err.field == "roles.actor_train.states.weights"
    assert err.value == pytest.approx(145.4, abs=0.1)
    assert "cannot fit even with everything else offloaded" in err.message


def test_kv_cache_with_no_room(base: dict[str, Any]) -> None:
    base["model"] = "qwen2.5-72b"  # tp 2: 72.7 GB of weights per GPU above 0.8 x 85.52 GB
    base["roles"]["actor_infer"]["rollout"] = {"gpu_memory_utilization": 0.8}
    err = _error(base)
    assert err.field == "roles.actor_infer.states.kv_cache"
    assert "num_gpus_per_worker" in err.message


def test_parallel_sizes_that_do_not_divide(base: dict[str, Any]) -> None:
    base["roles"]["reference"]["parallel"] = {"tp": 3}
    err = _error(base)
    assert (err.field, err.value) == ("roles.reference.parallel", {"tp": 3})


def test_missing_inputs_keep_the_old_error_and_say_what_would_estimate(
    base: dict[str, Any],
) -> None:
    del base["workload"]
    del base["cluster"]["gpu"]
    err = _error(base)
    assert err.field == "pipeline.stages.generate.seconds"
    assert "is required" in err.message
    assert "workload, cluster.gpu to estimate it" in err.message


def test_cpu_stage_without_seconds(base: dict[str, Any]) -> None:
    """A CPU stage other than a rule reward (which is priced per sequence) needs seconds."""
    del base["pipeline"]["stages"]["advantage"]["seconds"]
    err = _error(base)
    assert err.field == "pipeline.stages.advantage.seconds"
    assert "cannot be estimated" in err.message


def test_bad_workload_and_efficiency(base: dict[str, Any]) -> None:
    base["workload"]["prompt_tokens"] = {"mean": -1, "max": 10}
    assert _error(base).field == "workload.prompt_tokens.mean"
    base["workload"]["prompt_tokens"] = {"mean": 10, "max": 10}
    base["efficiency"] = {"train": 0}
    assert _error(base).field == "efficiency.train"


@pytest.mark.parametrize(
    ("key", "value"),
    [("bytes_per_token", -1), ("returned_bytes_per_token", "many"), ("padding", "bucketed"),
     ("per_rank", "sometimes")],
)  # fmt: skip
def test_bad_controller(base: dict[str, Any], key: str, value: Any) -> None:
    base["workload"]["controller"] = {key: value}
    err = _error(base)
    assert (err.field, err.value) == (f"workload.controller.{key}", value)
    base["workload"]["controller"] = {}
    base["efficiency"] = {"controller_gb_s": 0}
    assert _error(base).field == "efficiency.controller_gb_s"


@pytest.mark.parametrize("which", ["prompt_tokens", "response_tokens"])
@pytest.mark.parametrize("key", ["mean", "max"])
def test_token_lengths_that_would_overflow(base: dict[str, Any], which: str, key: str) -> None:
    """A mean of 1e308 tokens used to end in an OverflowError (tokens squared) traceback."""
    base["workload"][which] = {"mean": 100, "max": 200, key: 1e308 if key == "mean" else 10**20}
    err = _error(base)
    assert err.field == f"workload.{which}.{key}"
    assert "less than or equal to 16777216" in err.message
    base["workload"][which] = {"mean": 2**24, "max": 2**24}  # the bound itself: finite, refused
    assert "cannot fit" in _error(base).message  # by the KV cache check, not by an overflow


def test_hub_path_not_here_matches_a_preset_with_a_warning(base: dict[str, Any]) -> None:
    base["model"] = "Qwen/Qwen2.5-7B-Instruct"
    cfg = config_from_dict(base, file="ok.yaml")
    assert any("qwen2.5-7b" in note and "not on this machine" in note for note in cfg.warnings)


def test_cli_exit_2_one_line(base: dict[str, Any], tmp_path: Path) -> None:
    base["cluster"]["gpu"] = "h900"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(base))
    runner = CliRunner()
    for args in (["estimate", str(path)], ["plan", str(path)], ["show", str(path)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        assert "cluster.gpu" in result.output and "h900" in result.output


def test_cli_estimate_without_inputs(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    result = CliRunner().invoke(app, ["estimate", str(root / "examples" / "grpo.yaml")])
    assert result.exit_code == 2
    assert "cannot estimate: the config needs model, workload, cluster.gpu" in result.output


def test_costs_file_efficiency_is_checked(base: dict[str, Any], tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(base))
    costs = tmp_path / "costs.yaml"
    costs.write_text("efficiency: {decode: -1}\n")
    with pytest.raises(ConfigError) as info:
        load_config(config, costs=costs)
    assert info.value.file == str(costs) and info.value.field == "efficiency.decode"


def test_cli_surfaces_the_preset_match_warning() -> None:
    root = Path(__file__).resolve().parents[2]
    result = CliRunner().invoke(
        app,
        ["plan", str(root / "examples" / "estimate_7b.yaml"), "--set",
         "model=Qwen/Qwen2.5-7B-Instruct", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0
    assert "not on this machine; using the architecture of preset 'qwen2.5-7b'" in result.output


def test_stage_that_cannot_fit_even_with_the_rest_offloaded(base: dict[str, Any]) -> None:
    base["model"] = "qwen2.5-7b"
    base["cluster"] = {"nodes": 1, "gpus_per_node": 2, "gpu": "l40s"}
    base["workload"]["micro_batch_size"] = 8
    base["roles"] = {"actor_train": {"devices": "0-1", "parallel": {"zero": 3}}}
    base["pipeline"] = {"stages": {"train": {"role": "actor_train"}}}
    err = _error(base)
    # 7.6B params over 2 GPUs: bf16 weights 7.62, grads 7.62, AdamW 12 B/param 45.69 GB
    assert err.field == "roles.actor_train.states"
    assert "weights 7.62 + optimizer 45.69 + grads 7.62" in err.message
    assert err.value > 7.62 + 45.69 + 7.62
    assert "even with every other role offloaded, but a GPU has 48.3 GB" in err.message
    # Recomputation and a smaller micro-batch leave only the states; still too big for 48 GB.
    base["roles"]["actor_train"]["parallel"]["recompute"] = True
    base["workload"]["micro_batch_size"] = 1
    again = _error(base)
    assert again.value < err.value


@pytest.mark.parametrize(
    ("section", "key", "value", "field"),
    [
        ("efficiency", "decode_step_s", -0.001, "efficiency.decode_step_s"),
        ("efficiency", "decode_layer_s", -1e-5, "efficiency.decode_layer_s"),
        ("efficiency", "optimizer_foreach", 1.5, "efficiency.optimizer_foreach"),
        ("efficiency", "cross_host_step_s", -0.008, "efficiency.cross_host_step_s"),
        ("efficiency", "moe_imbalance", 0.5, "efficiency.moe_imbalance"),
        ("response", "clip_ratio", 1.5, "workload.response_tokens.clip_ratio"),
        ("response", "clip_ratio", 0.9, "workload.response_tokens.clip_ratio"),
        (
            "rollout",
            "gpu_memory_utilization",
            1.2,
            "roles.actor_infer.rollout.gpu_memory_utilization",
        ),
        ("parallel", "ep", 0, "roles.actor_train.parallel.ep"),
        ("efficiency", "sync_tensor_s", -1e-4, "efficiency.sync_tensor_s"),
        ("efficiency", "load_tensor_s", -1e-5, "efficiency.load_tensor_s"),
        ("rollout", "weight_sync", "nccl", "roles.actor_infer.rollout.weight_sync"),
        ("rollout", "kv_cache_dtype", "fp4", "roles.actor_infer.rollout.kv_cache_dtype"),
        ("efficiency", "fp8_matmul_speedup", 0.5, "efficiency.fp8_matmul_speedup"),
        ("efficiency", "refit_gather", 0.0, "efficiency.refit_gather"),
        ("efficiency", "refit_gather", 1.5, "efficiency.refit_gather"),
        ("workload", "generated_per_trained", 0.5, "workload.generated_per_trained"),
    ],
)
def test_bad_cost_term_inputs_name_the_key(
    base: dict[str, Any], section: str, key: str, value: float | str, field: str
) -> None:
    """A negative floor, a share truncated above 1 (or one the mean cannot hold), ..."""
    if section == "efficiency":
        base["efficiency"] = {key: value}
    elif section == "response":
        base["workload"]["response_tokens"][key] = value
    elif section == "rollout":
        base["roles"]["actor_infer"]["rollout"] = {key: value}
    elif section == "workload":
        base["workload"][key] = value
    else:
        base["roles"]["actor_train"]["parallel"][key] = value
    err = _error(base)
    assert (err.field, err.value) == (field, value)


def test_estimated_seconds_are_not_rescaled_from_the_files_device_count():
    """Regression: ``--set roles.X.devices`` on an estimated config scaled twice.

    The estimate is made for the devices the role has after the overrides, so
    the stage must not be rescaled again from the file's 8 GPUs (generate on 4
    GPUs came out at twice the estimate).
    """
    from pathlib import Path

    from rlplex.config import load_config
    from rlplex.plan.costs import stage_seconds

    path = Path(__file__).resolve().parents[2] / "examples" / "estimate_7b.yaml"
    overrides = [
        "cluster.nodes=2",
        "roles.actor_infer.devices=0-3",
        "roles.actor_train.devices=4-15",
        "roles.reference.devices=4-15",
    ]
    config = load_config(path, overrides=overrides)
    placement = {r: config.roles[r].devices for r in config.gpu_roles}
    for stage in config.pipeline.stages:
        if f"pipeline.stages.{stage.name}.seconds" in config.estimated:
            assert stage_seconds(config, stage, placement) == stage.seconds
