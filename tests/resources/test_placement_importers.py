"""ROLL, RLinf and verl placement importers: their rules, defaults, --costs, and errors."""
# ruff: noqa: E501 -- tables of exact error messages read best one per line

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.estimate.estimator import estimate_config
from rlplex.resources.importers.common import DEFAULT_STAGES, DEFAULT_STATES, resolve_ref
from rlplex.resources.importers.rlinf import parse_placement
from rlplex.resources.importers.verl import layout_pools

ROLL = """\
num_gpus_per_node: 8
infer_tp: 2
actor_train:
  strategy_args: {strategy_name: megatron_train}
  device_mapping: list(range(0,16))
actor_infer:
  strategy_args:
    strategy_name: vllm
    strategy_config: {tensor_parallel_size: "${infer_tp}", pipeline_parallel_size: 1}
  device_mapping: list(range(0,12))
reference:
  device_mapping: "[0, 1, 2, 3, 4, 5, 6, 7]"
critic:
  device_mapping: list(range(8,16))
rewards:
  math_rule: {world_size: 8}
  code_sandbox: {world_size: 4}
"""

RLINF = """\
cluster:
  num_nodes: 2
  component_placement:
    rollout: 0-9
    inference: 10-11
    actor, reward: 12-15
"""

VERL = """\
trainer: {nnodes: 2, n_gpus_per_node: 8}
algorithm: {adv_estimator: grpo}
actor_rollout_ref:
  actor: {use_kl_loss: true}
  rollout: {tensor_model_parallel_size: 4}
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(path: Path, **kwargs: Any) -> str:
    """The message of the ConfigError that ``load_config(path, **kwargs)`` must raise."""
    with pytest.raises(ConfigError) as info:
        load_config(path, **kwargs)
    return str(info.value)


def test_roll_rules(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, ROLL))
    assert cfg.format == "roll"
    assert (cfg.cluster.nodes, cfg.cluster.gpus_per_node) == (2, 8)
    infer = cfg.roles["actor_infer"]
    assert (infer.devices, infer.num_gpus_per_worker, infer.world_size) == (tuple(range(12)), 2, 6)
    assert cfg.roles["reference"].devices == tuple(range(8))
    # each ROLL reward cluster is its own role, named as in the file (rlvr_config.py)
    assert cfg.roles["math_rule"].world_size == 8 and not cfg.roles["math_rule"].devices
    assert cfg.roles["code_sandbox"].world_size == 4
    assert cfg.roles["actor_train"].states == DEFAULT_STATES["actor_train"]
    # a critic gives the PPO shape
    assert {"values", "critic_train"} <= set(cfg.pipeline.names)
    assert cfg.pipeline.stage("generate").seconds == DEFAULT_STAGES["generate"]["seconds"]
    assert cfg.pipeline.stage("reward_math_rule").role == "math_rule"
    assert cfg.pipeline.stage("reward_code_sandbox").role == "code_sandbox"


def test_roll_starts_workers_only_for_its_own_blocks(tmp_path: Path) -> None:
    """ROLL's dacite drops a top-level key its config does not type: a block that is not one
    of its worker configs starts no worker, whatever its device_mapping. A misspelt
    ``--set actor_trian.device_mapping=[0,1]`` made a ninth role on GPUs 0-1, with no
    warning (tour 30); it now changes nothing, and says so."""
    path = write(tmp_path, ROLL + "actor_trian: {device_mapping: list(range(0,2))}\n")
    assert "actor_trian" not in load_config(path).roles
    cfg = load_config(
        write(tmp_path, ROLL, "d.yaml"), overrides=["actor_trian.device_mapping=[0,1]"]
    )
    assert set(cfg.roles) == {
        "actor_train",
        "actor_infer",
        "reference",
        "critic",
        "math_rule",
        "code_sandbox",
    }
    assert any("actor_trian.device_mapping" in w and "changed nothing" in w for w in cfg.warnings)


def test_roll_gpu_reward_and_async(tmp_path: Path) -> None:
    text = ROLL.replace(
        "math_rule: {world_size: 8}", "judge: {device_mapping: 'list(range(12,16))'}"
    )
    text += "async_generation_ratio: 1\n"
    text = text.replace("list(range(0,16))", "list(range(0,8))").replace(
        "range(8,16)", "range(0,8)"
    )
    text = text.replace("list(range(0,12))", "list(range(8,12))")
    cfg = load_config(write(tmp_path, text))
    assert cfg.roles["judge"].devices == (12, 13, 14, 15)
    assert cfg.pipeline.stage("reward_judge").role == "judge"
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 1)


def test_roll_sglang_and_num_gpus_per_worker(tmp_path: Path) -> None:
    text = ROLL.replace("strategy_name: vllm", "strategy_name: sglang").replace(
        'tensor_parallel_size: "${infer_tp}"', "tp_size: 4"
    )
    text = text.replace(
        "critic:\n  device_mapping", "critic:\n  num_gpus_per_worker: 2\n  device_mapping"
    )
    cfg = load_config(write(tmp_path, text))
    # ROLL (worker_config.py) keeps the block's num_gpus_per_worker for sglang (default 1)
    assert cfg.roles["actor_infer"].num_gpus_per_worker == 1
    assert cfg.roles["critic"].num_gpus_per_worker == 2  # no strategy_args: kept
    # Found in review (2026-11-29): SGLang's own names were not read (0.9 / 256 assumed).
    engine = text.replace(
        "tp_size: 4",
        "tp_size: 4, mem_fraction_static: 0.85, max_running_requests: 64, disable_cuda_graph: true",
    )
    rollout = load_config(write(tmp_path, engine)).roles["actor_infer"].rollout
    assert rollout is not None
    assert (rollout.gpu_memory_utilization, rollout.max_num_seqs) == (0.85, 64)
    assert not rollout.cuda_graphs


ROLL_BAD = [
    (
        "actor_infer.device_mapping=list(range(0,11))",
        "actor_infer.device_mapping: has 11 GPUs, not a multiple of num_gpus_per_worker 2"
        " (ROLL: len(device_mapping) must be divisible by num_gpus_per_worker)"
        " (got 'list(range(0,11))')",
    ),
    (
        "actor_infer.device_mapping=list(range(7,13))",
        "actor_infer.device_mapping: worker 0 would span nodes [0, 1] (GPUs [7, 8]);"
        " a worker that fits in one node (8 GPUs) must stay in it (got 2)",
    ),
    (
        "actor_train.device_mapping=__import__('os').system('id')",
        "actor_train.device_mapping: cannot parse device item",
    ),
    ("actor_train.device_mapping=0-3,2", "actor_train.device_mapping: device 2 is listed twice"),
    (
        "infer_tp=0",
        "actor_infer.strategy_args.strategy_config.tensor_parallel_size: must be an integer >= 1 (got 0)",
    ),
    (
        "rewards.math_rule.world_size=0",
        "rewards.math_rule.world_size: must be an integer >= 1 (got 0)",
    ),
    ("num_gpus_per_node=zero", "num_gpus_per_node: must be an integer >= 1 (got 'zero')"),
    ("async_generation_ratio=-1", "async_generation_ratio: must be a number >= 0 (got -1)"),
]


@pytest.mark.parametrize(("override", "message"), ROLL_BAD)
def test_roll_errors(tmp_path: Path, override: str, message: str) -> None:
    path = write(tmp_path, ROLL)
    assert config_error(path, overrides=[override]).startswith(f"{path}: {message}")


def test_roll_needs_actor_blocks(tmp_path: Path) -> None:
    path = write(tmp_path, "actor_train: {device_mapping: 'list(range(0,8))'}\n")
    assert (
        config_error(path, format="roll")
        == f"{path}: actor_infer: a ROLL RL config needs a 'actor_infer' block with a device_mapping"
    )


def test_rlinf_rules(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, RLINF))
    assert cfg.format == "rlinf"
    assert cfg.roles["actor_infer"].devices == tuple(range(10))
    assert cfg.roles["inference"].devices == (10, 11)
    assert cfg.roles["actor_train"].devices == (12, 13, 14, 15)
    # RLinf scores with rules unless reward.use_reward_model: a process per GPU it is placed
    # on, computing on the CPU (found in review, 2026-11-29: priced as a model's forward).
    assert (cfg.roles["reward"].devices, cfg.roles["reward"].world_size) == ((), 4)
    assert cfg.pipeline.stage("old_logprob").role == "inference"
    assert cfg.pipeline.stage("weight_sync_inference").to_role == "inference"
    model = load_config(write(tmp_path, RLINF + "reward: {use_reward_model: true}\n"))
    assert model.roles["reward"].devices == (12, 13, 14, 15)


def test_rlinf_minibatches_inference_layout_and_collocated_offload(tmp_path: Path) -> None:
    """Found in review (2026-11-29): RLinf's reasoning runs train rollout_batch_size x
    group_size // n_minibatches samples an optimizer step, micro-batches of
    training_batch_size_per_gpu; the inference component has its own tp; the actor's
    offload flags act only where it shares GPUs with the rollout."""
    body = (
        "algorithm: {group_size: 8, n_minibatches: 4, training_batch_size_per_gpu: 2}\n"
        "data: {rollout_batch_size: 64, max_prompt_length: 512}\n"
        "runner: {seq_length: 2048}\n"
        "inference: {model: {tensor_model_parallel_size: 2}}\n"
        "actor: {offload_weight: true, offload_optimizer: true,"
        " model: {tensor_model_parallel_size: 2}}\n"
    )
    split = load_config(write(tmp_path, RLINF + body))
    assert split.workload is not None
    assert (split.workload.mini_batches, split.workload.micro_batch_size) == (4, 2)
    inference = split.roles["inference"].parallel
    assert inference is not None and inference.tp == 2
    actor = split.roles["actor_train"].parallel
    assert actor is not None and not actor.offload_params and not actor.offload_optimizer
    shared = "cluster:\n  num_nodes: 1\n  component_placement:\n    actor,rollout,reward: all\n"
    together = load_config(
        write(
            tmp_path,
            shared + body.replace("inference: {model: {tensor_model_parallel_size: 2}}\n", ""),
        )
    )
    actor = together.roles["actor_train"].parallel
    assert actor is not None and actor.offload_params and actor.offload_optimizer


@pytest.mark.parametrize(
    ("value", "devices", "per_worker"),
    [
        ("all", tuple(range(16)), 1),
        ("0-3,8-11", (0, 1, 2, 3, 8, 9, 10, 11), 1),
        (5, (5,), 1),
        ("0-3:0-1", (0, 1, 2, 3), 2),
        ("0-3:0-1,4-7:2-3", tuple(range(8)), 2),
        ("0-1:0-3", (0, 1), 1),
    ],
)
def test_rlinf_placements(value: object, devices: tuple[int, ...], per_worker: int) -> None:
    assert parse_placement(value, 16) == (devices, per_worker)


RLINF_BAD = [
    (
        "cluster.component_placement.inference=11-10",
        "cluster.component_placement.inference: descending resource rank range '11-10': the start must not exceed the end (got '11-10')",
    ),
    (
        "cluster.component_placement.inference=10-11,11",
        "cluster.component_placement.inference: resource rank 11 is listed twice (got '10-11,11')",
    ),
    (
        "cluster.component_placement.inference=10-16",
        "cluster.component_placement.inference: resource rank 16 is outside the cluster, which has GPUs 0-15 (got '10-16')",
    ),
    (
        "cluster.component_placement.inference=10-11:1-2",
        "cluster.component_placement.inference: process ranks must be continuous from 0 to 1, each once (got [1, 2]) (got '10-11:1-2')",
    ),
    (
        "cluster.component_placement.inference=10-12:0-1",
        "cluster.component_placement.inference: segment '10-12:0-1': 3 resources and 2 processes; one count must be a multiple of the other (got '10-12:0-1')",
    ),
    (
        "cluster.component_placement.inference=ten",
        "cluster.component_placement.inference: cannot parse resource rank 'ten'; expected N or N-M (got 'ten')",
    ),
    (
        "cluster.component_placement.inference=7-8",
        "cluster.component_placement: actor, rollout, inference and critic must either share the same GPUs (actor == rollout, collocated) or use disjoint GPUs (disaggregated), as RLinf's ModelParallelComponentPlacement requires",
    ),
    ("cluster.num_nodes=0", "cluster.num_nodes: must be an integer >= 1 (got 0)"),
    (
        "rollout.tensor_parallel_size=3",
        "rollout.tensor_parallel_size: does not divide the role's 10 devices (got 3)",
    ),
]


@pytest.mark.parametrize(("override", "message"), RLINF_BAD)
def test_rlinf_errors(tmp_path: Path, override: str, message: str) -> None:
    path = write(tmp_path, RLINF)
    assert config_error(path, overrides=[override]) == f"{path}: {message}"


def test_rlinf_component_placed_twice(tmp_path: Path) -> None:
    path = write(tmp_path, RLINF.replace("inference: 10-11", "actor: 10-11"))
    assert config_error(path) == (
        f"{path}: cluster.component_placement.actor, reward: component 'actor' is already"
        " placed by 'cluster.component_placement.actor'"
    )


def test_rlinf_needs_actor_and_rollout(tmp_path: Path) -> None:
    path = write(tmp_path, "cluster: {num_nodes: 1, component_placement: {actor: all}}\n")
    with pytest.raises(ConfigError, match="has no 'rollout' component"):
        load_config(path)


def test_verl_plain_trainer(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, VERL))
    assert cfg.format == "verl"
    assert (cfg.cluster.nodes, cfg.cluster.gpus_per_node) == (2, 8)
    assert set(cfg.roles) == {"actor_train", "actor_infer", "reference"}
    assert all(r.devices == tuple(range(16)) for r in cfg.roles.values())
    assert cfg.roles["actor_infer"].world_size == 4
    assert "values" not in cfg.pipeline.names  # grpo: no critic
    assert cfg.pipeline.stage("reward").role == "driver"  # rule reward in verl's driver


def test_verl_gae_default_has_critic(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "trainer: {n_gpus_per_node: 4}\n"))
    assert "critic" in cfg.roles and "critic_train" in cfg.pipeline.names
    assert "reference" not in cfg.roles


def test_verl_one_step_off(tmp_path: Path) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += "algorithm: {adv_estimator: grpo}\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.roles["actor_train"].devices == (0, 1, 2, 3)
    assert cfg.roles["actor_infer"].devices == (4, 5, 6, 7)
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 1)
    # verl broadcasts the trainer's weights to a separate rollout one tensor at a time.
    rollout = cfg.roles["actor_infer"].rollout
    assert rollout is not None and rollout.weight_sync == "per_tensor"
    assert not rollout.partial_rollout  # one-step-off generates each step's batch whole


@pytest.mark.parametrize(
    ("engine", "method"),
    [
        ("", "per_tensor"),
        ("checkpoint_engine: {enable: false}", "per_tensor"),
        ("checkpoint_engine: {enable: true}", "bucketed"),
        (
            "checkpoint_engine: {enable: true, overlap_broadcast_and_consume: true}",
            "bucketed_overlapped",
        ),
    ],
)
def test_verl_fully_async_weight_sync(tmp_path: Path, engine: str, method: str) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += f"algorithm: {{adv_estimator: grpo}}\nasync_training: {{{engine}}}\n"
    cfg = load_config(write(tmp_path, text))
    rollout = cfg.roles["actor_infer"].rollout
    assert rollout is not None and rollout.weight_sync == method


@pytest.mark.parametrize(
    ("backend", "method"),
    [
        ("naive", "per_tensor"),  # verl's colocated hand-over: the split falls back
        ("nccl", "server_loaded"),
        ("nixl", "server_loaded"),
        ("delta_sharded", "server_loaded"),  # priced as the full broadcast it replaces
    ],
)
def test_verl_checkpoint_engine_backend(tmp_path: Path, backend: str, method: str) -> None:
    """verl since 2026-02 picks the split sync with ``rollout.checkpoint_engine.backend``."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += "algorithm: {adv_estimator: grpo}\n"
    text += f"actor_rollout_ref: {{rollout: {{checkpoint_engine: {{backend: {backend}}}}}}}\n"
    rollout = load_config(write(tmp_path, text)).roles["actor_infer"].rollout
    assert rollout is not None and rollout.weight_sync == method


def test_verl_checkpoint_engine_backend_unknown(tmp_path: Path) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += "algorithm: {adv_estimator: grpo}\n"
    text += "actor_rollout_ref: {rollout: {checkpoint_engine: {backend: carrier_pigeon}}}\n"
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    message = str(err.value)
    assert "actor_rollout_ref.rollout.checkpoint_engine.backend" in message
    assert "carrier_pigeon" in message and "nccl" in message
    # A plugin (checkpoint_engine.custom_backend_module) registers its own names: verl
    # imports it before looking the backend up (checkpoint_engine/base.py); rlplex refused it.
    plugin = text.replace("backend: carrier_pigeon", "backend: carrier_pigeon,"
                          " custom_backend_module: my_pkg.pigeon")  # fmt: skip
    rollout = load_config(write(tmp_path, plugin)).roles["actor_infer"].rollout
    assert rollout is not None and rollout.weight_sync == "server_loaded"


@pytest.mark.parametrize(
    ("async_training", "partial"),
    [
        ("{staleness_threshold: 0.5, partial_rollout: true}", True),
        ("{staleness_threshold: 0, partial_rollout: true}", False),  # verl ignores it at 0
        ("{staleness_threshold: 0.5, partial_rollout: false}", False),
        ("{staleness_threshold: 0.5}", True),  # verl's fully-async default is on
        ("{trigger_parameter_sync_step: 4}", True),  # and its default threshold is 0.1
    ],
)
def test_verl_fully_async_partial_rollout(
    tmp_path: Path, async_training: str, partial: bool
) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += f"algorithm: {{adv_estimator: grpo}}\nasync_training: {async_training}\n"
    cfg = load_config(write(tmp_path, text))
    rollout = cfg.roles["actor_infer"].rollout
    assert rollout is not None and rollout.partial_rollout is partial


def test_verl_sync_partial_rollout_recipe_is_no_fully_async_run(tmp_path: Path) -> None:
    """Found in review (2026-11-29): verl-recipe's partial_rollout adds
    ``+async_training.partial_rollout=True`` to a synchronous colocated run; it was read as
    fully async and refused for a missing rollout pool."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nalgorithm: {adv_estimator: grpo}\n"
    cfg = load_config(write(tmp_path, text + "async_training: {partial_rollout: true}\n"))
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("sync", 0)
    assert cfg.roles["actor_infer"].devices == cfg.roles["actor_train"].devices == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("${DATA_HOME}/models/Qwen3-30B-A3B", "${DATA_HOME}/models/Qwen3-30B-A3B"),
        ("$HOME/models/Qwen2.5-7B-Instruct/", "$HOME/models/Qwen2.5-7B-Instruct/"),
        ("${MODEL_PATH}", None),  # nothing left to name it by
        ("/m/${NAME}", None),
    ],
)
def test_verl_model_path_under_an_unset_folder(
    tmp_path: Path, path: str, model: str | None
) -> None:
    """Found in review (2026-11-29): a launch script's ``MODEL_PATH=${DATA_HOME}/models/X``
    (its folder unset here) lost the model, which a preset matches by its name."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nalgorithm: {adv_estimator: grpo}\n"
    text += f"actor_rollout_ref: {{model: {{path: '{path}'}}}}\n"
    assert load_config(write(tmp_path, text)).model == model


@pytest.mark.parametrize(
    ("async_training", "recomputes"),
    [
        ("{staleness_threshold: 0.5}", False),  # use_rollout_log_probs: true by default
        ("{use_rollout_log_probs: true, compute_prox_log_prob: true}", True),  # MIS
        ("{use_rollout_log_probs: false}", True),
    ],
)
def test_verl_fully_async_trains_on_the_engines_log_probs(
    tmp_path: Path, async_training: str, recomputes: bool
) -> None:
    """Found in review (2026-11-29): fully async's default takes the engine's log-probs as
    the old ones; rlplex planned an old_logprob pass (and refused verl's 7B scripts on H20
    for its logits' memory)."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\nrollout: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += f"algorithm: {{adv_estimator: grpo}}\nasync_training: {async_training}\n"
    pipeline = load_config(write(tmp_path, text)).pipeline
    assert ("old_logprob" in pipeline.names) is recomputes
    assert "generate" in pipeline.stage("advantage").after or recomputes


def test_verl_megatron_recompute_and_cpu_optimizer(tmp_path: Path) -> None:
    """Regression: verl's Megatron engine ignores enable_gradient_checkpointing (True by
    default) and recomputes only what override_transformer_config asks; its CPU Adam is
    optim.override_optimizer_config.optimizer_cpu_offload. The importer read recompute from
    the former and never set cpu_optimizer."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 8}\nalgorithm: {adv_estimator: grpo}\n"
    text += "actor_rollout_ref:\n  actor:\n    strategy: megatron\n"
    text += "    megatron: {tensor_model_parallel_size: 2}\n"
    plain = load_config(write(tmp_path, text)).roles["actor_train"].parallel
    assert plain is not None and plain.tp == 2 and not plain.recompute
    assert not plain.cpu_optimizer
    text = text.replace(
        "{tensor_model_parallel_size: 2}",
        "{tensor_model_parallel_size: 2, override_transformer_config:"
        " {recompute_granularity: full}}",
    )
    text += "    optim: {override_optimizer_config: {optimizer_cpu_offload: true}}\n"
    # Megatron-core offloads optimizer_offload_fraction of the states, 0.0 by default.
    no_fraction = load_config(write(tmp_path, text)).roles["actor_train"].parallel
    assert no_fraction is not None and no_fraction.recompute and not no_fraction.cpu_optimizer
    text = text.replace("optimizer_cpu_offload: true}", "optimizer_cpu_offload: true,"
                        " optimizer_offload_fraction: 1.0}")  # fmt: skip
    both = load_config(write(tmp_path, text)).roles["actor_train"].parallel
    assert both is not None and both.recompute and both.cpu_optimizer
    # Selective recomputation (the attention core only) is not the full recompute pass.
    text = text.replace("recompute_granularity: full", "recompute_granularity: selective")
    selective = load_config(write(tmp_path, text)).roles["actor_train"].parallel
    assert selective is not None and not selective.recompute


def test_verl_fp8_rollout_quantization(tmp_path: Path) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\n"
    assert load_config(write(tmp_path, text)).roles["actor_infer"].precision == "bf16"
    text += "actor_rollout_ref: {rollout: {quantization: fp8}}\n"
    cfg = load_config(write(tmp_path, text))
    assert cfg.roles["actor_infer"].precision == "fp8"
    assert cfg.roles["actor_train"].precision == "bf16"


def test_verl_colocated_rollout_loads_every_full_tensor(tmp_path: Path) -> None:
    """verl's colocated sync hands each engine rank every full tensor (server_loaded): a tp-2
    engine's device loads the whole model, not its half, at reshard_gb_s."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\n"
    text += "actor_rollout_ref: {model: {path: Qwen/Qwen2.5-7B-Instruct}, rollout: "
    text += "{gpu_memory_utilization: 0.5, tensor_model_parallel_size: 2}}\n"
    text += "data: {train_batch_size: 8, max_prompt_length: 256, max_response_length: 256}\n"
    cfg = load_config(write(tmp_path, text), overrides=["cluster.gpu=h100"])
    rollout = cfg.roles["actor_infer"].rollout
    assert rollout is not None and rollout.gpu_memory_utilization == 0.5
    assert rollout.weight_sync == "server_loaded"
    sync = estimate_config(cfg).stages["weight_sync"]
    assert sync.detail["whole_model"]
    assert sync.detail["loaded_gb"] == pytest.approx(2 * sync.detail["gb_per_device"], rel=0.01)


def test_verl_explicit_pools(tmp_path: Path) -> None:
    text = """\
trainer: {n_gpus_per_node: 8}
resource_pool_spec: {actor_pool: [4], rollout_pool: [4, 4]}
mapping: {Actor: actor_pool, Rollout: rollout_pool, ref_policy: actor_pool, Critic: actor_pool}
"""
    cfg = load_config(write(tmp_path, text))
    assert cfg.roles["actor_train"].devices == (0, 1, 2, 3)
    assert cfg.roles["actor_infer"].devices == tuple(range(4, 12))
    assert cfg.roles["reference"].devices == (0, 1, 2, 3)
    assert cfg.cluster.nodes == 2
    # A rollout on its own pool gets verl's tensor-by-tensor sync, whatever the entry point.
    rollout = cfg.roles["actor_infer"].rollout
    assert rollout is not None and rollout.weight_sync == "per_tensor"


def test_layout_pools_never_splits_an_entry() -> None:
    placed, nodes = layout_pools({"a": [6], "b": [4]}, 8)
    assert placed == {"a": tuple(range(6)), "b": (8, 9, 10, 11)}
    assert nodes == 2
    with pytest.raises(ValueError, match="asks for 9 GPUs on one node, which has 8"):
        layout_pools({"a": [9]}, 8)


VERL_POOLS = """\
trainer: {n_gpus_per_node: 8}
resource_pool_spec: {global_pool: [8]}
mapping: {ActorRollout: global_pool}
"""

VERL_BAD = [
    (
        "mapping.Critic=nowhere",
        "mapping.Critic: no such resource pool (pools: global_pool) (got 'nowhere')",
    ),
    (
        "mapping.Judge=global_pool",
        "mapping.Judge: unknown verl role (expected one of: ActorRollout, ActorRolloutRef, Actor, Rollout, Critic, RefPolicy, RewardModel) (got 'Judge')",
    ),
    (
        "mapping.Actor=global_pool",
        "mapping.Actor: role 'actor_train' is mapped twice (got 'global_pool')",
    ),
    (
        "resource_pool_spec.global_pool=[16]",
        "resource_pool_spec.global_pool: asks for 16 GPUs on one node, which has 8 (got [16])",
    ),
    (
        "resource_pool_spec.global_pool=[0]",
        "resource_pool_spec.global_pool: must be an integer >= 1 (got 0)",
    ),
    (
        "actor_rollout_ref.rollout.tensor_model_parallel_size=3",
        "actor_rollout_ref.rollout.tensor_model_parallel_size: does not divide the role's 8 devices (got 3)",
    ),
]


@pytest.mark.parametrize(("override", "message"), VERL_BAD)
def test_verl_errors(tmp_path: Path, override: str, message: str) -> None:
    path = write(tmp_path, VERL_POOLS)
    assert config_error(path, overrides=[override]) == f"{path}: {message}"


def test_costs_file(tmp_path: Path) -> None:
    costs = write(
        tmp_path,
        "stages: {generate: {seconds: 95, memory_gb: 12}, train: {seconds: 60, scaling: 0.8}}\n"
        "states: {actor_infer: {kv_cache: 40}}\ncluster: {gpu_memory_gb: 141}\n",
        "costs.yaml",
    )
    cfg = load_config(write(tmp_path, RLINF), costs=costs)
    assert cfg.pipeline.stage("generate").seconds == 95
    assert cfg.pipeline.stage("generate").memory_gb == 12
    assert cfg.pipeline.stage("train").scaling == 0.8
    assert cfg.roles["actor_infer"].states == {"weights": 4.0, "kv_cache": 40.0}
    assert cfg.cluster.gpu_memory_gb == 141


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "stages: {train: {seconds: -2}}\n",
            "stages.train.seconds: Input should be greater than or equal to 0 (got -2)".replace(
                "Input should be", "must be"
            ),
        ),
        ("stages: {train: {secs: 2}}\n", "stages.train.secs: unknown key (got 2)"),
        (
            "stages: {nope: {seconds: 2}}\n",
            "stages.nope: no such stage in the pipeline (stages: generate, reward, old_logprob, advantage, train, weight_sync, weight_sync_inference)",
        ),
        (
            "states: {actor_infer: {activations: 2}}\n",
            "states.actor_infer.activations: unknown state kind (expected one of: weights, optimizer, grads, kv_cache) (got 'activations')",
        ),
        (
            "states: {critic: {weights: 2}}\n",
            "states.critic: no such GPU role (GPU roles: actor_infer, inference, actor_train)",
        ),
        ("budget: 3\n", "budget: unknown key (got 3)"),
        # found in review (2026-11-29): blamed on the config the costs were merged into
        (
            "cluster: {dispatch_s: -1}\n",
            "cluster.dispatch_s: must be greater than or equal to 0 (got -1)",
        ),
        ("cluster: {nodez: 2}\n", "cluster.nodez: unknown key (a cluster field: nodes,"),
    ],
)
def test_costs_errors_name_the_costs_file(tmp_path: Path, text: str, message: str) -> None:
    costs = write(tmp_path, text, "costs.yaml")
    assert config_error(write(tmp_path, RLINF), costs=costs).startswith(f"{costs}: {message}")


def test_format_override(tmp_path: Path) -> None:
    path = write(
        tmp_path, "actor_train: {device_mapping: '0-3'}\nactor_infer: {device_mapping: '4-7'}\n"
    )
    assert load_config(path).format == "roll"
    with pytest.raises(ConfigError, match="actor_train: unknown key"):
        load_config(path, format="native")


def test_resolve_ref() -> None:
    data = {"a": {"b": 3}, "c": "${a.b}", "d": "${c}"}
    assert resolve_ref("${d}", data) == 3
    assert resolve_ref("${missing}", data) == "${missing}"
    assert resolve_ref("${oc.env:HOME}", data) == "${oc.env:HOME}"


def test_rlinf_embodied_process_spanning_nodes(tmp_path: Path) -> None:
    """Embodied placements (HybridComponentPlacement): a process's GPUs stay on one node."""
    path = write(tmp_path, RLINF)
    message = config_error(
        path,
        overrides=["runner.task_type=embodied", "cluster.component_placement.inference=7-8:0"],
    )
    assert message == (
        f"{path}: cluster.component_placement.inference: worker 0 would span nodes [0, 1]"
        " (GPUs [7, 8]); a worker that fits in one node (8 GPUs) must stay in it (got 2)"
    )
