"""Host memory, planned: each node's host copies over the step, refused past host_memory_gb.

The hand-computed case (issue 19): a 7B actor + reference + rollout colocated
on one 8-GPU node of 80 GB GPUs. Per GPU (7.0e9 parameters):

- actor_train with ZeRO-2 (weights and grads replicated, optimizer sharded):
  weights bf16 7e9 x 2 B = 14 GB, grads 14 GB, AdamW fp32 master + two moments
  7e9 x 12 B / 8 GPUs = 10.5 GB;
- reference, one replica per GPU: weights 14 GB;
- actor_infer, tensor parallel 1 with vLLM at ~0.9 memory utilisation: weights
  14 GB and a 58 GB KV cache.

While generate runs, a GPU holds the rollout's 14 + 58 = 72 GB, so the 8 GB left
cannot hold the actor's weights (14), its optimizer (10.5) or the reference
(14): all three are offloaded. The node's host then holds their copies from
all 8 GPUs: actor weights 14 x 8 = 112 GB, actor optimizer 10.5 x 8 = 84 GB,
reference weights 14 x 8 = 112 GB, together 308 GB. 308 > 256: refused, naming
the node and the 308 GB peak; 308 <= 1024: the plan is made, and reports 308.
The rollout's weights hold nothing on the host: after generate they are dead
(the weight sync overwrites them) and are dropped, not copied.
"""

from __future__ import annotations

import json

import pytest

from rlplex.config import config_from_dict
from rlplex.errors import ConfigError, InfeasibleError
from rlplex.plan import make_plan, verify_plan
from rlplex.plan.host import host_intervals, host_peaks
from rlplex.plan.model import Plan
from rlplex.plan.verify import PlanVerificationError


def colocated_7b(host_memory_gb: float, nodes: int = 1) -> dict:
    devices = f"0-{8 * nodes - 1}"
    return {
        "cluster": {
            "nodes": nodes,
            "gpus_per_node": 8,
            "gpu_memory_gb": 80,
            "host_gb_per_s": 25,
            "host_memory_gb": host_memory_gb,
        },
        "roles": {
            "actor_train": {
                "devices": devices,
                "states": {"weights": 14, "optimizer": 10.5, "grads": 14},
            },
            "actor_infer": {"devices": devices, "states": {"weights": 14, "kv_cache": 58}},
            "reference": {"devices": devices, "states": {"weights": 14}},
        },
        "pipeline": {
            "stages": {
                "generate": {"role": "actor_infer", "seconds": 100},
                "ref_logprob": {"role": "reference", "seconds": 20, "after": ["generate"]},
                "old_logprob": {
                    "role": "actor_train",
                    "seconds": 20,
                    "after": ["generate"],
                    "needs": ["weights"],
                },
                "advantage": {
                    "role": "driver",
                    "seconds": 1,
                    "after": ["ref_logprob", "old_logprob"],
                },
                "train": {
                    "role": "actor_train",
                    "seconds": 60,
                    "memory_gb": 20,
                    "after": ["advantage"],
                },
                "weight_sync": {
                    "kind": "weight_sync",
                    "from": "actor_train",
                    "to": "actor_infer",
                    "after": ["train"],
                },
            }
        },
    }


PEAK = 14 * 8 + 10.5 * 8 + 14 * 8  # actor weights + actor optimizer + reference = 308 GB


def test_colocated_7b_refused_on_256_gb_naming_the_node_peak():
    assert PEAK == 308
    with pytest.raises(InfeasibleError) as err:
        make_plan(config_from_dict(colocated_7b(256)))
    msg = str(err.value)
    assert "node 0's host memory peaks at 308.0 GB" in msg
    assert "256 GB (cluster.host_memory_gb)" in msg
    for held in (
        "actor_train.weights 112.0",
        "reference.weights 112.0",
        "actor_train.optimizer 84.0",
    ):
        assert held in msg
    assert "\n" not in msg


def test_colocated_7b_fits_on_1_tb_and_reports_the_peak():
    config = config_from_dict(colocated_7b(1024))
    plan = make_plan(config)
    verify_plan(plan, config)
    assert plan.host_memory_gb == 1024
    assert plan.host_peaks == {0: pytest.approx(PEAK)}
    peak = host_peaks(plan, config)[0]
    assert peak.held == {
        "actor_train.weights": pytest.approx(112),
        "actor_train.optimizer": pytest.approx(84),
        "reference.weights": pytest.approx(112),
    }
    # The rollout's weights are dead after generate: dropped, never on the host.
    assert host_intervals(plan, config)[("actor_infer", "weights")] == []
    # The reference never changes: its host copy is kept the whole step (clean offloads are free).
    assert host_intervals(plan, config)[("reference", "weights")] == [(0.0, plan.makespan_s)]


def test_host_peak_counts_each_node_of_a_role_spread_over_two_nodes():
    config = config_from_dict(colocated_7b(1024, nodes=2))
    plan = make_plan(config)
    assert plan.host_peaks == {0: pytest.approx(PEAK), 1: pytest.approx(PEAK)}


def test_verify_catches_a_plan_edited_to_exceed_host_memory():
    config = config_from_dict(colocated_7b(1024))
    plan = make_plan(config)
    data = plan.to_dict()
    data["host_memory_gb"] = 300  # below the 308 GB the node holds
    with pytest.raises(PlanVerificationError) as err:
        verify_plan(Plan.model_validate(data), config)
    assert err.value.rule == "host"
    assert "node 0 holds 308 GB" in str(err.value)


def test_verify_checks_the_configs_host_memory():
    """A plan made for 1 TB nodes, verified against the 256 GB config, is caught."""
    plan = make_plan(config_from_dict(colocated_7b(1024)))
    with pytest.raises(PlanVerificationError) as err:
        verify_plan(plan, config_from_dict(colocated_7b(256)))
    assert err.value.rule == "host"


def test_fewer_host_copies_release_a_kept_copy_at_reload():
    """Keeping fewer host copies: the reference's copy goes when it is reloaded.

    Kept while clean, the reference's copy spans the whole step; released at each
    reload, it spans only the offloaded time (offload start to reload end), and
    its next offload copies again (14 GB at 25 GB/s = 0.56 s instead of free).
    """
    from dataclasses import replace

    from rlplex.plan.bound import lower_bound
    from rlplex.plan.placed import _plan_once
    from rlplex.plan.policy import plan_options

    config = config_from_dict(colocated_7b(1024))
    placement = {r: config.roles[r].devices for r in ("actor_train", "actor_infer", "reference")}
    options = plan_options(config, placement)
    bound = lower_bound(config, placement).value
    fewer = replace(options, drop_host=frozenset({("reference", "weights")}))
    plan, _ = _plan_once(config, placement, fewer, bound, None)
    verify_plan(plan, config)
    spans = host_intervals(plan, config)[("reference", "weights")]
    reload = plan.op("s0/reload/reference/weights")
    offload = plan.op("s0/offload/reference/weights")
    assert spans == [(offload.start_s, reload.end_s)]
    assert offload.end_s - offload.start_s == pytest.approx(14 / 25)


def test_preset_fills_host_memory_and_the_file_overrides_it():
    base = colocated_7b(1024)
    cluster = {k: v for k, v in base["cluster"].items() if k != "host_memory_gb"}
    with_preset = config_from_dict({**base, "cluster": {**cluster, "gpu": "h100"}})
    assert with_preset.cluster.host_memory_gb == 2048  # DGX H100: 2 TB
    assert "cluster.host_memory_gb" in with_preset.estimated
    four = config_from_dict(
        {**base, "cluster": {**cluster, "gpu": "h100", "gpus_per_node": 4, "nodes": 2}}
    )
    assert four.cluster.host_memory_gb == 1024  # the same host memory per GPU
    given = config_from_dict({**base, "cluster": {**cluster, "gpu": "h100", "host_memory_gb": 512}})
    assert given.cluster.host_memory_gb == 512


def test_plan_cli_prints_host_peaks_and_refuses_with_exit_2(tmp_path):
    import json

    import yaml
    from typer.testing import CliRunner

    from rlplex.cli import app

    runner = CliRunner()
    path = tmp_path / "colocated.yaml"
    path.write_text(yaml.safe_dump(colocated_7b(256)))
    refused = runner.invoke(app, ["plan", str(path)])
    assert refused.exit_code == 2
    assert "node 0's host memory peaks at 308.0 GB" in refused.output
    assert "Traceback" not in refused.output
    fits = runner.invoke(app, ["plan", str(path), "--set", "cluster.host_memory_gb=1024"])
    assert fits.exit_code == 0, fits.output
    assert "host memory per node at its peak" in fits.output and "308.00" in fits.output
    data = json.loads(
        runner.invoke(
            app, ["plan", str(path), "--set", "cluster.host_memory_gb=1024", "--json", "--verify"]
        ).stdout
    )
    assert data["host_peaks"] == {"0": 308.0} and data["host_memory_gb"] == 1024


def test_a_baseline_that_overflows_host_memory_is_shown_not_refused():
    """The sequential baseline offloads everything after each stage; on 256 GB nodes
    the planner's plan is refused, the baseline's is returned with its overflow, and
    --verify names the node."""
    config = config_from_dict(colocated_7b(256))
    plan = make_plan(config, baseline="sequential")
    assert max(plan.host_peaks.values()) > 256
    with pytest.raises(PlanVerificationError) as err:
        verify_plan(plan, config)
    assert err.value.rule == "host"


def cpu_optimizer_8b(host_memory_gb: float) -> dict:
    """An estimated Llama-3.1-8B GRPO step on one 8-GPU node, AdamW on the CPU."""
    return {
        "model": "llama-3.1-8b",
        "workload": {"prompts_per_step": 16, "samples_per_prompt": 4,
                     "prompt_tokens": {"mean": 100, "max": 200},
                     "response_tokens": {"mean": 300, "max": 600}},
        "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "h100",
                    "host_memory_gb": host_memory_gb},
        "roles": {"actor_infer": {"devices": "0-3"},
                  "actor_train": {"devices": "4-7", "parallel": {"cpu_optimizer": True}}},
        "pipeline": {"mode": "async", "max_staleness": 1, "stages": {
            "generate": {"role": "actor_infer"},
            "train": {"role": "actor_train", "after": ["generate"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        }},
    }  # fmt: skip


def test_a_cpu_optimizers_state_is_held_in_host_memory_all_step():
    """AdamW's fp32 master weights and moments (12 bytes per parameter) and the fp32 gradients
    it steps with (4) live in host memory with a CPU optimizer: 4 unsharded trainer GPUs on
    the node hold 4 x 8.03e9 x 16 B."""
    config = config_from_dict(cpu_optimizer_8b(2048))
    role = config.roles["actor_train"]
    assert "optimizer" not in role.states
    per_gpu = 8_030_261_248 * 16 / 1e9
    assert role.host_states["optimizer"] == pytest.approx(per_gpu, abs=1e-3)
    plan = make_plan(config)
    verify_plan(plan, config)
    peak = host_peaks(plan, config)[0]
    assert peak.held["actor_train.optimizer (host-resident)"] == pytest.approx(
        4 * per_gpu, abs=0.01
    )
    assert plan.host_peaks == {0: pytest.approx(peak.peak_gb)}
    assert peak.peak_gb >= 4 * per_gpu - 0.01
    # The Gantt's host strip shows the same GB from the start.
    from rlplex.plan.memory_lanes import memory_lanes

    host = next(lane for lane in memory_lanes(plan, config) if lane.kind == "host")
    assert host.peak_gb == pytest.approx(peak.peak_gb, abs=0.01)
    # 513.9 GB of optimizer state do not fit a 256 GB node: refused, naming it.
    with pytest.raises(InfeasibleError, match=r"actor_train\.optimizer \(host-resident\) 513\.9"):
        make_plan(config_from_dict(cpu_optimizer_8b(256)))


def test_a_cpu_optimizers_host_memory_counts_when_the_gpu_states_are_given():
    """Regression: the host state was filled only for roles whose states were estimated, so
    giving the GPU states by hand dropped the CPU optimizer's 514 GB from the host peak."""
    raw = cpu_optimizer_8b(256)
    raw["roles"]["actor_train"]["states"] = {"weights": 16.06, "grads": 16.06}
    config = config_from_dict(raw)
    assert config.roles["actor_train"].host_states["optimizer"] == pytest.approx(128.484, abs=1e-3)
    with pytest.raises(InfeasibleError, match=r"actor_train\.optimizer \(host-resident\)"):
        make_plan(config)


def test_host_states_can_be_given_and_a_cpu_role_cannot_hold_them():
    raw = colocated_7b(1024)
    raw["roles"]["actor_train"]["host_states"] = {"optimizer": 20}
    config = config_from_dict(raw)
    assert config.roles["actor_train"].host_states == {"optimizer": 20}
    plan = make_plan(config)
    assert host_peaks(plan, config)[0].held["actor_train.optimizer (host-resident)"] == 160
    raw["roles"]["actor_train"]["host_states"] = {"optimizer": -1}
    with pytest.raises(ConfigError, match="must be >= 0 GB") as err:
        config_from_dict(raw)
    assert err.value.field == "roles.actor_train.host_states.optimizer"
    raw["roles"]["actor_train"]["host_states"] = {}
    raw["roles"]["rewards"] = {"world_size": 2, "host_states": {"optimizer": 1}}
    with pytest.raises(ConfigError, match="CPU role") as err:
        config_from_dict(raw)
    assert err.value.field == "roles.rewards.host_states"


def test_a_given_host_optimizer_is_not_also_estimated_on_the_gpu_and_show_marks_only_estimates():
    from typer.testing import CliRunner

    from rlplex.cli import app

    raw = cpu_optimizer_8b(2048)
    raw["roles"]["actor_train"]["parallel"] = {}
    raw["roles"]["actor_train"]["host_states"] = {"optimizer": 20.0}
    config = config_from_dict(raw)
    role = config.roles["actor_train"]
    assert "optimizer" not in role.states and role.host_states == {"optimizer": 20.0}
    assert not config.is_estimated("roles.actor_train.host_states.optimizer")
    estimated = config_from_dict(cpu_optimizer_8b(2048))
    assert estimated.is_estimated("roles.actor_train.host_states.optimizer")
    import yaml

    path = __import__("pathlib").Path(__import__("tempfile").mkdtemp()) / "h.yaml"
    path.write_text(yaml.safe_dump(raw))
    shown = json.loads(CliRunner().invoke(app, ["show", str(path), "--json"]).stdout)
    assert shown["roles"]["actor_train"]["host_states"] == {"optimizer": 20.0}
    assert "roles.actor_train.host_states.optimizer" not in shown["estimated"]
