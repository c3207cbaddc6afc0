"""rlplex estimate: the table, the JSON document, the presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlplex.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_json_is_the_issue_document() -> None:
    result = CliRunner().invoke(app, ["estimate", str(ROOT / "examples" / "estimate_7b.yaml"),
                                      "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"stages", "roles", "assumptions"}
    assert doc["stages"]["generate"]["bound"] in ("compute", "memory", "latency")
    assert doc["roles"]["actor_train"]["states"]["optimizer"] > 0
    assert doc["assumptions"]["gpu"]["preset"] == "h100"


def test_table_and_assumptions() -> None:
    result = CliRunner().invoke(
        app, ["estimate", str(ROOT / "examples" / "estimate_72b.yaml")], env={"COLUMNS": "160"}
    )
    assert result.exit_code == 0, result.output
    for text in ("estimated stages", "memory per GPU", "assumptions", "qwen2.5-72b", "fsdp"):
        assert text in result.output


def test_assumptions_name_the_log_prob_micro_batch() -> None:
    """A config whose log-prob passes take their own micro-batch says so; others do not."""
    published = ROOT / "bench" / "published"
    result = CliRunner().invoke(
        app,
        ["estimate", str(published / "heldout_verl_qwen25_05b_1gpu_h20.yaml")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "micro-batch 2 (log-prob passes 4);" in result.output
    result = CliRunner().invoke(
        app, ["estimate", str(ROOT / "examples" / "estimate_7b.yaml")], env={"COLUMNS": "200"}
    )
    assert "micro-batch 4; epochs" in result.output


def test_table_prices_a_rule_reward_stage_and_leaves_other_cpu_stages_given() -> None:
    result = CliRunner().invoke(
        app, ["estimate", str(ROOT / "examples" / "estimate_7b.yaml")], env={"COLUMNS": "160"}
    )
    assert result.exit_code == 0, result.output
    rows: dict[str, str] = {}
    for line in result.output.splitlines():  # the stages table comes first
        if line.count("│") >= 5:
            rows.setdefault(line.split("│")[1].strip(), line)
    # 1,024 prompts x 5 samples = 5,120 sequences at 4 ms each; the plan keeps the given 5 s.
    assert "20.48 s" in rows["reward"] and "5 s given" in rows["reward"]
    assert "- " in rows["advantage"].split("│")[3] and "given" in rows["advantage"]


def test_list_presets() -> None:
    result = CliRunner().invoke(app, ["estimate", "--list-presets"], env={"COLUMNS": "160"})
    assert result.exit_code == 0
    assert "deepseek-v3" in result.output and "b200" in result.output


def test_assumptions_say_how_the_weight_sync_was_priced() -> None:
    """Split: every engine device receives the whole model; colocated: the engine's share."""
    split = ROOT / "bench" / "published" / "heldout_nemorl_deepseekv3_1off_256gen256train_h100.yaml"
    result = CliRunner().invoke(app, ["estimate", str(split)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "weight_sync: every actor_infer device receives the whole model (1342.05 GB" in text
    assert (
        "overlapped (45,395 checkpoint tensors loaded in 3.22 s, load_tensor_s each, beside"
        " the next bucket's moves)" in text
    )
    result = CliRunner().invoke(
        app, ["estimate", str(ROOT / "examples" / "estimate_7b.yaml"), "--json"]
    )
    sync = json.loads(result.stdout)["assumptions"]["weight_syncs"]["weight_sync"]
    assert sync["colocated"] is True
    # The engine's tp-2 share is half the model; an FSDP trainer over 8 GPUs lacks 7/8 of it.
    assert sync["gb_per_device"] == pytest.approx(sync["gather_gb"] * 4 / 7)
    assert sync["whole_model"] is False and sync["loaded_gb"] == sync["gb_per_device"]
    # verl's colocated sync hands each tp-2 engine rank every full tensor: the whole model.
    verl = ROOT / "bench" / "published" / "verl_osp_7b_fsdp2_colocate_16xh20.yaml"
    result = CliRunner().invoke(app, ["estimate", str(verl)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "(15.23 GB, every full tensor through its weight-update API, at reshard_gb_s;" in text


def test_assumptions_name_the_data_parallel_stragglers() -> None:
    """A long-tailed 28K-token run over 32 data-parallel groups: the train pass waits for the
    group holding the longest sequences, and estimate says by how much (table and JSON)."""
    config = ROOT / "bench" / "published" / "heldout_verl_fa_7b_colocate_128xh20.yaml"
    result = CliRunner().invoke(app, ["estimate", str(config), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    stragglers = doc["assumptions"]["stragglers"]
    assert stragglers["train"] > 1.1
    # Thousands of short sequences per group in token-budget micro-batches balance out:
    # nothing to name.
    other = CliRunner().invoke(
        app, ["estimate", str(ROOT / "examples" / "estimate_agentic.yaml"), "--json"]
    )
    assert json.loads(other.stdout)["assumptions"]["stragglers"] == {}
    result = CliRunner().invoke(app, ["estimate", str(config)], env={"COLUMNS": "300"})
    text = " ".join(result.output.split())
    assert "data-parallel stragglers" in text and f"train {stragglers['train']:.2f}x" in text


def test_an_ignored_partial_rollout_is_reported_as_ignored(tmp_path: Path) -> None:
    """Regression: estimate printed "partial rollouts: streams" beside the warning that they
    were ignored, and plan --auto warned although its search picks a staleness >= 1."""
    import yaml

    raw = yaml.safe_load((ROOT / "examples" / "estimate_7b.yaml").read_text())
    raw["cluster"]["nodes"] = 2
    raw["roles"]["actor_infer"]["devices"] = "8-15"
    raw["roles"]["actor_infer"]["rollout"] = {"partial_rollout": True}
    raw["pipeline"]["mode"] = "async"
    raw["pipeline"]["max_staleness"] = 0
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["estimate", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert (
        json.loads(result.stdout)["assumptions"]["rollout"]["actor_infer"]["partial_rollout"]
        is False
    )
    plan = CliRunner().invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert "partial_rollout is ignored" in " ".join(plan.output.split())
    auto = CliRunner().invoke(app, ["plan", str(path), "--auto"], env={"COLUMNS": "200"})
    assert auto.exit_code == 0, auto.output
    assert "partial_rollout is ignored" not in " ".join(auto.output.split())


def test_the_estimate_says_how_generation_runs() -> None:
    """Where generation's time goes: replicas, sequences, running slots against the KV
    cache's room, decode steps and the longest response, the floor; the same figures are in
    --json under the stage's detail."""
    path = str(ROOT / "examples" / "estimate_7b.yaml")
    text = CliRunner().invoke(app, ["estimate", path], env={"COLUMNS": "100"})
    assert text.exit_code == 0, text.output
    doc = json.loads(CliRunner().invoke(app, ["estimate", path, "--json"]).stdout)
    d = doc["stages"]["generate"]["detail"]
    assert {"replicas", "slots", "kv_slots", "decode_steps", "longest_response"} <= set(d)
    line = next(x for x in text.output.splitlines() if x.startswith("generate: "))
    assert f"{d['replicas']} replica(s) of tp {d['tp']} x pp {d['pp']}" in line
    assert f"at most {d['slots']:,} running (KV cache room for {d['kv_slots']:,})" in line
    assert f"{d['decode_steps']:,.0f} decode steps" in line
    assert f"floor {d['step_floor_s'] * 1000:.1f} ms per decode step" in line


def test_generation_line_for_steps_held_together_and_a_streaming_engine() -> None:
    from rlplex.cli.stage_lines import generation_line

    held = {"replicas": 2, "tp": 1, "pp": 1, "sequences_per_replica": 64, "slots": 256,
            "kv_slots": 300, "mean_batch": 200.0, "decode_steps": 500.0,
            "longest_response": 4000.0, "clip_ratio": 0.0, "step_floor_s": 0.005,
            "steps_in_flight": 4, "partial_rollout": False}  # fmt: skip
    line = generation_line(held)
    assert "2,000 decode steps for 4 steps' requests decoded together, 500 per step" in line
    assert "cut at the max" not in line
    streaming = {**held, "partial_rollout": True, "steps_in_flight": 1}
    line = generation_line(streaming)
    assert "streamed 256 at a time across steps" in line and "KV cache room" not in line
    assert "; 500 decode steps (longest response 4,000 tokens)" in line
    in_flight = {**held, "steps_in_flight": 1, "in_flight_weight_updates": True,
                 "trainer_s": 40.0, "sync_s": 2.5, "loop_period_s": 61.3,
                 "idle_s": 0.0}  # fmt: skip
    assert generation_line(in_flight).endswith(
        "; in-flight weight updates: decodes on through the trainer's 40.0 s and each 2.5 s"
        " weight load, a step every 61.3 s, idle 0.0 s of it"
    )


def test_the_estimate_of_a_nemo_rl_one_step_off_run_says_it_decodes_through_syncs() -> None:
    path = str(ROOT / "bench" / "published" / "nemorl_llama31_8b_1off_8gen8train_h100.yaml")
    text = CliRunner().invoke(app, ["estimate", path], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    out = " ".join(text.output.split())
    assert "in-flight weight updates: decodes through each sync on its KV cache" in out
    assert "in-flight weight updates: decodes on through the trainer's" in out
    doc = json.loads(CliRunner().invoke(app, ["estimate", path, "--json"]).stdout)
    assert doc["assumptions"]["rollout"]["actor_infer"]["in_flight_weight_updates"] is True


def test_the_estimate_says_how_each_pass_runs() -> None:
    """Train and log-prob stages say their tokens, micro-batches per rank, passes and
    efficiency, and the terms beyond compute that cost time (0.05 s or more)."""
    from rlplex.cli.stage_lines import pass_line

    path = str(ROOT / "examples" / "estimate_7b.yaml")
    text = CliRunner().invoke(app, ["estimate", path], env={"COLUMNS": "100"}).output
    doc = json.loads(CliRunner().invoke(app, ["estimate", path, "--json"]).stdout)
    d = doc["stages"]["train"]["detail"]
    line = next(x for x in text.splitlines() if x.startswith("train: "))
    assert line == f"train: {pass_line(d)}"
    assert (
        f"{d['micro_batches_per_rank']:,} micro-batches of {d['micro_batch_tokens']:,.0f}" in line
    )
    assert f"data-parallel communication {d['comm_s']:.1f} s" in line
    made_comm = {"tokens": 1.0, "devices": 2, "micro_batches_per_rank": 1,
                 "micro_batch_tokens": 1.0, "passes": 3.0, "efficiency": 0.5,
                 "comm_s": 4.0, "comm_exposed_s": 1.5}  # fmt: skip
    assert pass_line(made_comm).endswith(
        "; data-parallel communication 4.0 s, 1.5 s of it beyond compute"
    )
    made = {"tokens": 1000.0, "devices": 2, "micro_batches_per_rank": 3,
            "micro_batch_tokens": 200.0, "passes": 1.0, "efficiency": 0.5,
            "pipeline_bubble_s": 0.01, "host_s": 1.25, "straggler": 1.2}  # fmt: skip
    assert pass_line(made) == (
        "1,000 tokens on 2 GPU(s), 3 micro-batches of 200 tokens per rank, 1 pass(es) at"
        " efficiency 0.50; host 1.2 s, busiest data-parallel rank x1.20"
    )
    # A train stage's optimizer step, at its kernels' share of the bandwidth.
    stepped = {**made, "optimizer_steps": 4, "optimizer_s": 0.26, "straggler": 1.0}
    assert pass_line(stepped).endswith("4 optimizer step(s); host 1.2 s, optimizer step 0.3 s")


def test_the_estimate_says_what_the_controller_moves() -> None:
    """Each pass says the GB its controller moves and the seconds; the assumptions say the
    padding, the bytes per slot and the speed (NeMo RL: longest, per rank; RLinf: none)."""
    from rlplex.cli.stage_lines import pass_line

    made = {"tokens": 1000.0, "devices": 2, "micro_batches_per_rank": 3,
            "micro_batch_tokens": 200.0, "passes": 1.0, "efficiency": 0.5,
            "controller_s": 12.34, "controller_gb": 6.17,
            "controller_padded_tokens": 30720.0}  # fmt: skip
    assert pass_line(made).endswith(
        "; controller 6.2 GB both ways (30,720 tokens a sequence) 12.3 s"
    )
    published = ROOT / "bench" / "published"
    cases = {
        "heldout_verl_fa_7b_colocate_128xh20.yaml": "controller: every GPU pass's batch padded"
        " to the prompt max + the response max, 52 bytes per token slot sent, 4 returned per"
        " tp/pp/cp rank, at 0.5 GB/s, both ways (one process)",
        "nemorl_llama31_8b_onpolicy_16xh100.yaml": "controller: every GPU pass's batch padded"
        " to the step's longest sequence, 27 bytes per token slot sent per tp/pp/cp rank, 3"
        " returned per tp/pp/cp rank, at 0.5 GB/s, both ways (one process)",
        "heldout_rlinf_r1distill_qwen15b_collocated_8xh100.yaml": "controller: the workers pass"
        " the batch among themselves (padding none): not priced",
    }
    for name, expected in cases.items():
        result = CliRunner().invoke(
            app, ["estimate", str(published / name)], env={"COLUMNS": "400"}
        )
        assert result.exit_code == 0, result.output
        assert expected in result.output, name
    result = CliRunner().invoke(
        app, ["estimate", str(published / "heldout_verl_fa_7b_colocate_128xh20.yaml")],
        env={"COLUMNS": "400"},
    )  # fmt: skip
    line = next(x for x in result.output.splitlines() if x.startswith("old_logprob: "))
    assert "controller " in line and "(30,720 tokens a sequence)" in line


def test_assumptions_say_what_the_engine_runs() -> None:
    """An eager DeepSeek-V3 engine's layers are counted in dense layers' host work (61 x 2.56 +
    58 x 1.40 = 237.4); a vLLM V0 engine says its host work per sequence."""
    dsv3 = ROOT / "bench" / "published" / "heldout_verl_dsv3_colocate_96xh20.yaml"
    result = CliRunner().invoke(app, ["estimate", str(dsv3)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "its 61 layers issue the host work of 237.4 dense transformer layers" in text
    quickstart = ROOT / "examples" / "estimate_verl_quickstart.yaml"
    result = CliRunner().invoke(app, ["estimate", str(quickstart)], env={"COLUMNS": "300"})
    text = " ".join(result.output.split())
    assert "eager (no CUDA graphs), vLLM V0 engine (73 us of host work per running" in text
    doc = json.loads(CliRunner().invoke(app, ["estimate", str(quickstart), "--json"]).stdout)[
        "assumptions"
    ]["rollout"]["actor_infer"]
    assert doc["vllm_v0"] is True and doc["eager_layers"] == doc["layers"] == 24


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ((), "optimizer adamw (PyTorch's multi-tensor step, efficiency.optimizer_foreach)"),
        (
            ("roles.actor_train.parallel.fsdp=false", "roles.actor_train.parallel.zero=1"),
            "optimizer adamw (a fused step, efficiency.optimizer_fused)",
        ),
    ],
)
def test_the_assumptions_say_how_the_optimizer_steps(overrides: tuple[str, ...], says: str) -> None:
    """An FSDP trainer steps PyTorch's AdamW, a sharded optimizer outside FSDP a fused one; a
    CPU optimizer's step is neither."""
    args = ["estimate", str(ROOT / "examples" / "estimate_7b.yaml")]
    for override in overrides:
        args += ["--set", override]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert says in " ".join(result.output.split())
    on_cpu = CliRunner().invoke(
        app, [*args, "--set", "roles.actor_train.parallel.cpu_optimizer=true"],
        env={"COLUMNS": "250"},
    )  # fmt: skip
    assert on_cpu.exit_code == 0, on_cpu.output
    assert "step, efficiency.optimizer_" not in on_cpu.output


RESHARDED = """\
model: deepseek-v3
workload:
  prompts_per_step: 1
  samples_per_prompt: 1
  prompt_tokens: {mean: 16, max: 16}
  response_tokens: {mean: 16, max: 16}
cluster: {nodes: 64, gpus_per_node: 8, gpu: h100}
roles:
  actor_train: {devices: "0-255", parallel: {pp: 16, ep: 16}}
  actor_infer: {devices: "256-511", num_gpus_per_worker: 32, rollout: {weight_sync: resharded}}
pipeline:
  mode: sync
  stages:
    generate: {role: actor_infer}
    train: {role: actor_train, after: [generate]}
    weight_sync: {kind: weight_sync, from: actor_train, to: actor_infer, after: [train]}
"""


def test_resharded_sync_says_what_goes_as_slices(tmp_path: Path) -> None:
    """DeepSeek-V3 as NeMo RL's nccl_reshard page lays it out (PP16 x EP16 -> TP32 x DP8):
    each engine device's slice is 97.6 % of the model over 32 (40.94 GB)."""
    path = tmp_path / "dsv3.yaml"
    path.write_text(RESHARDED)
    result = CliRunner().invoke(app, ["estimate", str(path)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    slice_ = "receives its 40.94 GB slice of the MLP and expert projections (97.6% of"
    assert slice_ in result.output
    assert "183 transfers" in result.output and "resharded (842 checkpoint tensors" in result.output
