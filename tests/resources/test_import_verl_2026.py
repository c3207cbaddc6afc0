"""verl's configs of 2026-02 to 2026-08 (verl-project/verl to 1dda039b9): keys that moved.

Each test writes a small config in verl's newer layout (never a copy of verl's files) and
checks that rlplex reads the value where verl now keeps it, and still where it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.config import load_config
from rlplex.errors import ConfigError
from rlplex.resources.importers.compose import compose
from rlplex.resources.yaml_io import load_yaml_file

BASE = "trainer: {nnodes: 1, n_gpus_per_node: 8}\nalgorithm: {adv_estimator: gae}\n"
NEW_REWARD = "reward: {reward_model: {enable: false}}\n"
"""The block a config of verl after 67dc84b96 (2026-02-11) always has."""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_critic_engine_block_moved_to_critic_fsdp(tmp_path: Path) -> None:
    """16253911d (2026-04-03): the critic's FSDP engine is ``critic.fsdp``; its offload and
    Ulysses size were silently read as off / 1."""
    text = BASE + NEW_REWARD + "critic: {strategy: fsdp, ulysses_sequence_parallel_size: 1,"
    text += " fsdp: {param_offload: true, optimizer_offload: true,"
    text += " ulysses_sequence_parallel_size: 2}}\n"
    par = load_config(write(tmp_path, text), format="verl").roles["critic"].parallel
    assert (par.offload_params, par.offload_optimizer, par.sp) == (True, True, 2)


def test_critic_engine_block_old_location_still_read(tmp_path: Path) -> None:
    text = BASE + "critic: {strategy: fsdp, ulysses_sequence_parallel_size: 2,"
    text += " model: {fsdp_config: {param_offload: true, optimizer_offload: true}}}\n"
    par = load_config(write(tmp_path, text), format="verl").roles["critic"].parallel
    assert (par.offload_params, par.offload_optimizer, par.sp) == (True, True, 2)


def test_reward_model_moved_under_reward(tmp_path: Path) -> None:
    """67dc84b96 (2026-02-11): ``reward.reward_model``; the reward model and its pool were
    silently dropped."""
    text = BASE + "reward: {reward_model: {enable: true, enable_resource_pool: true,"
    text += " nnodes: 1, n_gpus_per_node: 4, model_path: /m/rm}}\n"
    cfg = load_config(write(tmp_path, text), format="verl")
    assert cfg.roles["reward"].devices == (8, 9, 10, 11)
    assert cfg.roles["reward"].model == "/m/rm"


def test_reward_model_colocated_under_reward(tmp_path: Path) -> None:
    text = BASE + "reward: {reward_model: {enable: true}}\n"
    cfg = load_config(write(tmp_path, text), format="verl")
    assert cfg.roles["reward"].devices == cfg.roles["actor_train"].devices


@pytest.mark.parametrize(
    ("block", "per_worker"),
    [
        ("reward: {reward_model: {enable: true}}", 2),  # reward/reward.yaml's tp 2
        ("reward: {reward_model: {enable: true, rollout: {tensor_model_parallel_size: 4}}}", 4),
        ("reward: {reward_model: {enable: true, rollout: {tensor_model_parallel_size: 1}}}", 1),
        # the legacy reward loop keeps its engine under reward_model.rollout
        ("reward_model: {enable: true, use_reward_loop: true,"
         " rollout: {tensor_model_parallel_size: 4}}", 4),
    ],
)  # fmt: skip
def test_served_reward_model_workers_are_its_engines(
    tmp_path: Path, block: str, per_worker: int
) -> None:
    """A reward model a rollout engine serves runs as engines of its tensor-parallel size;
    it was read as one-GPU workers."""
    cfg = load_config(write(tmp_path, BASE + block + "\n"), format="verl")
    reward = cfg.roles["reward"]
    assert reward.num_gpus_per_worker == per_worker
    tp = reward.parallel.tp if reward.parallel is not None else None
    assert tp == (per_worker if per_worker > 1 else None)


def test_served_reward_model_engine_must_divide_its_gpus(tmp_path: Path) -> None:
    text = (
        BASE + "reward: {reward_model: {enable: true, rollout: {tensor_model_parallel_size: 3}}}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), format="verl")
    assert "reward.reward_model.rollout.tensor_model_parallel_size" in str(err.value)


def test_legacy_reward_model_keys_win_over_the_new_block(tmp_path: Path) -> None:
    """verl's migrate_legacy_reward_impl copies every legacy key that is not null over the
    new block's; legacy_reward_impl.yaml holds them null."""
    text = BASE + "reward_model: {enable: true, enable_resource_pool: null}\n"
    text += "reward: {reward_model: {enable: false, enable_resource_pool: true,"
    text += " nnodes: 1, n_gpus_per_node: 2}}\n"
    cfg = load_config(write(tmp_path, text), format="verl")
    assert cfg.roles["reward"].devices == (8, 9)
    old = BASE + "reward_model: {enable: true, enable_resource_pool: true, nnodes: 1,"
    old += " n_gpus_per_node: 4, model: {path: /m/old}}\n"
    cfg = load_config(write(tmp_path, old, "old.yaml"), format="verl")
    assert cfg.roles["reward"].devices == (8, 9, 10, 11) and cfg.roles["reward"].model == "/m/old"


def test_engine_workers_once_the_legacy_key_is_gone(tmp_path: Path) -> None:
    """044bbba27 (2026-04-20) removed ``trainer.use_legacy_worker_impl``: every run uses the
    engine workers, which send the batch unpadded; a file of before the key kept the legacy
    workers."""
    load = "data: {train_batch_size: 8, max_prompt_length: 64, max_response_length: 64}\n"
    load += "actor_rollout_ref: {model: {path: Qwen/Qwen2.5-0.5B}, rollout: {n: 2},"
    load += " actor: {ppo_micro_batch_size_per_gpu: 2}}\n"
    new = load_config(write(tmp_path, BASE + NEW_REWARD + load), format="verl")
    assert new.workload is not None and new.workload.controller.padding == "packed"
    old = load_config(write(tmp_path, BASE + load, "old.yaml"), format="verl")
    assert old.workload is not None and old.workload.controller.padding == "max"


@pytest.mark.parametrize(
    ("actor", "engine_workers", "sp"),
    [
        ("{ulysses_sequence_parallel_size: 1, fsdp_config: {ulysses_sequence_parallel_size: 4}}",
         True, 4),
        ("{ulysses_sequence_parallel_size: 2, fsdp_config: {ulysses_sequence_parallel_size: 4}}",
         True, 2),  # FSDPActorConfig copies a top-level size above 1 over the engine's
        ("{ulysses_sequence_parallel_size: 1, fsdp_config: {ulysses_sequence_parallel_size: 4}}",
         False, 1),  # the legacy fsdp_workers.py read the top-level size only
    ],
)  # fmt: skip
def test_actor_ulysses_in_its_engine_block(
    tmp_path: Path, actor: str, engine_workers: bool, sp: int
) -> None:
    text = BASE + (NEW_REWARD if engine_workers else "")
    text += f"actor_rollout_ref: {{actor: {actor}}}\n"
    par = load_config(write(tmp_path, text), format="verl").roles["actor_train"].parallel
    assert par.sp == sp


def test_veomni_engine_sizes_and_offload(tmp_path: Path) -> None:
    """2487c3628 (2026-02-10): ``strategy: veomni`` keeps its sizes and offload in the
    role's ``veomni`` block; rlplex read them as a plain FSDP run with none."""
    text = BASE + "actor_rollout_ref: {actor: {strategy: veomni, use_kl_loss: true,"
    text += " veomni: {ulysses_parallel_size: 2, expert_parallel_size: 4, param_offload: true,"
    text += " optimizer_offload: true}}, ref: {strategy: veomni, veomni: {param_offload: true}}}\n"
    cfg = load_config(write(tmp_path, text), format="verl")
    par = cfg.roles["actor_train"].parallel
    assert (par.fsdp, par.sp, par.ep, par.offload_params, par.offload_optimizer) == (
        True, 2, 4, True, True,
    )  # fmt: skip
    assert cfg.roles["reference"].parallel.offload_params is True


def test_torchtitan_engine_sizes(tmp_path: Path) -> None:
    """cb60e7096 (2026-02-24): ``strategy: torchtitan`` with its ``torchtitan`` block."""
    text = BASE + "actor_rollout_ref: {actor: {strategy: torchtitan, torchtitan:"
    text += " {tensor_parallel_size: 2, pipeline_parallel_size: 2, context_parallel_size: 2,"
    text += " activation_checkpoint: full, param_offload: true}}}\n"
    par = load_config(write(tmp_path, text), format="verl").roles["actor_train"].parallel
    assert (par.tp, par.pp, par.sp, par.recompute, par.offload_params) == (2, 2, 2, True, True)
    selective = text.replace("activation_checkpoint: full", "activation_checkpoint: selective")
    par = load_config(write(tmp_path, selective), format="verl").roles["actor_train"].parallel
    assert par.recompute is False


def test_defaults_option_interpolates_a_group_choice(tmp_path: Path) -> None:
    """verl's ppo_trainer.yaml since 2487c3628 lists ``actor@...: ${model_engine}_actor``:
    rlplex found no actor, reference or critic defaults at all."""
    (tmp_path / "model_engine").mkdir()
    (tmp_path / "actor").mkdir()
    (tmp_path / "model_engine" / "dp.yaml").write_text("# @package _global_\nmodel_engine: dp\n")
    (tmp_path / "model_engine" / "mega.yaml").write_text(
        "# @package _global_\nmodel_engine: mega\n"
    )
    (tmp_path / "actor" / "dp_actor.yaml").write_text("strategy: fsdp\n")
    (tmp_path / "actor" / "mega_actor.yaml").write_text("strategy: megatron\n")
    text = "defaults:\n  - model_engine: dp\n  - actor@a.actor: ${model_engine}_actor\n"
    text += "  - _self_\n"
    path = write(tmp_path, text)
    composed = compose(load_yaml_file(path), str(path))
    assert composed.missing_defaults == ()
    assert composed.data["a"]["actor"]["strategy"] == "fsdp"
    assert composed.data["model_engine"] == "dp"  # @package _global_: at the root
    # a command-line group override (model_engine=mega) lands as the file's own key
    over = compose({**load_yaml_file(path), "model_engine": "mega"}, str(path))
    assert over.data["a"]["actor"]["strategy"] == "megatron"


def test_v1_separate_async_puts_the_rollout_on_its_own_gpus(tmp_path: Path) -> None:
    """45632b5fa (2026-06-12): ``trainer.v1.trainer_mode: separate_async`` runs the rollout
    on ``actor_rollout_ref.rollout.nnodes`` x ``n_gpus_per_node`` GPUs, generation ahead by
    ``num_warmup_batches``; rlplex read it as a colocated synchronous run."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4, use_v1: true, v1: {trainer_mode:"
    text += " separate_async, separate_async: {num_warmup_batches: 2}}}\n"
    text += "algorithm: {adv_estimator: grpo}\n"
    text += "actor_rollout_ref: {rollout: {nnodes: 1, n_gpus_per_node: 4,"
    text += " checkpoint_engine: {backend: nccl}}}\n"
    cfg = load_config(write(tmp_path, text), format="verl")
    assert cfg.roles["actor_train"].devices == (0, 1, 2, 3)
    assert cfg.roles["actor_infer"].devices == (4, 5, 6, 7)
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 2)
    rollout = cfg.roles["actor_infer"].rollout
    assert (
        rollout is not None and rollout.partial_rollout and rollout.weight_sync == ("server_loaded")
    )


def test_v1_colocate_async_and_sync(tmp_path: Path) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4, use_v1: true, v1: {trainer_mode: MODE}}\n"
    text += "algorithm: {adv_estimator: grpo}\n"
    cfg = load_config(write(tmp_path, text.replace("MODE", "colocate_async")), format="verl")
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("async", 1)
    assert cfg.roles["actor_infer"].devices == cfg.roles["actor_train"].devices
    cfg = load_config(write(tmp_path, text.replace("MODE", "sync")), format="verl")
    assert (cfg.pipeline.mode, cfg.pipeline.max_staleness) == ("sync", 0)
    legacy = text.replace("use_v1: true", "use_v1: false").replace("MODE", "colocate_async")
    cfg = load_config(write(tmp_path, legacy), format="verl")  # main_ppo_v0: no v1 modes
    assert cfg.pipeline.mode == "sync"


def test_v1_unknown_trainer_mode(tmp_path: Path) -> None:
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4, use_v1: true, v1: {trainer_mode: turbo}}\n"
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text + "algorithm: {adv_estimator: grpo}\n"), format="verl")
    assert "trainer.v1.trainer_mode" in str(err.value) and "separate_async" in str(err.value)


def _engine_groups(root: Path) -> None:
    """A tiny ``model_engine`` group (files at the root, as verl's) and the actor options it
    picks, laid out as verl's trainer config folder."""
    for option in ("dp", "mega"):
        (root / "model_engine").mkdir(parents=True, exist_ok=True)
        (root / "actor").mkdir(exist_ok=True)
        (root / "model_engine" / f"{option}.yaml").write_text(
            f"# @package _global_\nmodel_engine: {option}\n"
        )
    (root / "actor" / "dp_actor.yaml").write_text("strategy: fsdp\n")
    (root / "actor" / "mega_actor.yaml").write_text("strategy: megatron\n")
    write(root, "defaults:\n  - model_engine: dp\n  - actor@a.actor: ${model_engine}_actor\n"
          "  - _self_\n", "trainer.yaml")  # fmt: skip


def test_group_choice_of_a_listed_config(tmp_path: Path) -> None:
    """verl's one-step-off and fully-async configs list ``ppo_trainer`` as a plain config,
    whose own list holds ``model_engine: dp`` and ``${model_engine}_actor``: rlplex knew only
    the primary file's choices, so it composed no actor, reference or critic defaults, and
    one_step_off_ppo_megatron_trainer.yaml's ``override model_engine: megatron`` (in the
    file it lists) was lost. Hydra knows every choice made anywhere in the tree."""
    _engine_groups(tmp_path)
    child = write(tmp_path, "defaults:\n  - trainer\n  - _self_\nextra: 1\n", "child.yaml")
    composed = compose(load_yaml_file(child), str(child))
    assert composed.missing_defaults == ()
    assert composed.data["a"]["actor"]["strategy"] == "fsdp"
    over = compose({**load_yaml_file(child), "model_engine": "mega"}, str(child))
    assert over.data["a"]["actor"]["strategy"] == "megatron"
    write(tmp_path, "defaults:\n  - trainer\n  - override model_engine: mega\n  - _self_\n",
          "trainer_mega.yaml")  # fmt: skip
    nested = write(tmp_path, "defaults:\n  - trainer_mega\n  - _self_\n", "nested.yaml")
    composed = compose(load_yaml_file(nested), str(nested))
    assert composed.missing_defaults == ()
    assert (composed.data["model_engine"], composed.data["a"]["actor"]["strategy"]) == (
        "mega",
        "megatron",
    )


def test_group_choice_naming_no_file_is_refused(tmp_path: Path) -> None:
    """``model_engine=megatorn`` on the command line: Hydra stops ("Could not find
    'model_engine/megatorn'"); rlplex composed the FSDP actor silently."""
    _engine_groups(tmp_path)
    path = tmp_path / "trainer.yaml"
    with pytest.raises(ConfigError) as err:
        compose({**load_yaml_file(path), "model_engine": "megatorn"}, str(path))
    assert (err.value.field, err.value.value, err.value.file) == (
        "model_engine",
        "megatorn",
        str(path),
    )
    assert "model_engine/megatorn.yaml" in err.value.message


def test_package_header_and_entry_package(tmp_path: Path) -> None:
    """A file's ``# @package`` header places it only when the entry listing it gives no
    ``@PACKAGE`` (Hydra's get_package), and it is absolute: rlplex put a ``_global_`` file
    listed as ``g@sub.x`` at the root, and ignored other headers."""
    (tmp_path / "g").mkdir()
    (tmp_path / "h").mkdir()
    (tmp_path / "g" / "glob.yaml").write_text("# @package _global_\nk: 1\n")
    (tmp_path / "h" / "pk.yaml").write_text("# @package foo\nk: 2\n")
    path = write(tmp_path, "defaults:\n  - g@sub.x: glob\n  - h: pk\n  - _self_\nz: 0\n")
    assert compose(load_yaml_file(path), str(path)).data == {
        "sub": {"x": {"k": 1}},
        "foo": {"k": 2},
        "z": 0,
    }


def test_pkg_search_path(tmp_path: Path) -> None:
    """verl's fully_async_ppo_trainer.yaml finds ppo_trainer through
    ``hydra.searchpath: [pkg://verl.trainer.config]``, which rlplex skipped: none of verl's
    defaults were composed."""
    config = tmp_path / "verl" / "trainer" / "config"
    config.mkdir(parents=True)
    write(config, "trainer: {nnodes: 3}\n", "ppo_trainer.yaml")
    recipe = tmp_path / "verl" / "experimental" / "config"
    recipe.mkdir(parents=True)
    path = write(recipe, "hydra:\n  searchpath:\n    - pkg://verl.trainer.config\n"
                 "defaults:\n  - ppo_trainer\n  - _self_\n")  # fmt: skip
    composed = compose(load_yaml_file(path), str(path))
    assert (composed.missing_defaults, composed.data["trainer"]["nnodes"]) == ((), 3)


@pytest.mark.parametrize(
    ("extra", "recomputes"),
    [
        ("rollout: {nnodes: 1, n_gpus_per_node: 4}\n", False),  # one-step-off's config: true
        ("", False),  # a synchronous run with bypass_mode: true
        (
            "rollout: {nnodes: 1, n_gpus_per_node: 4}\nasync_training: {staleness_threshold: 1}\n",
            False,
        ),
    ],
)
def test_rollout_correction_bypass_mode_skips_old_logprob(
    tmp_path: Path, extra: str, recomputes: bool
) -> None:
    """verl's trainers skip the old log-prob pass when
    ``algorithm.rollout_correction.bypass_mode`` (true in one_step_off_ppo_trainer.yaml and
    fully_async_ppo_trainer.yaml @ 1dda039b9): rlplex planned one for one-step-off runs (its
    dapo_7b_math_megatron_4_12.sh: 104 s a step that verl does not spend)."""
    text = "trainer: {nnodes: 1, n_gpus_per_node: 4}\n" + extra
    text += "algorithm: {adv_estimator: grpo, rollout_correction: {bypass_mode: true}}\n"
    pipeline = load_config(write(tmp_path, text), format="verl").pipeline
    assert ("old_logprob" in pipeline.names) is recomputes
    decoupled = text.replace("bypass_mode: true", "bypass_mode: false")
    pipeline = load_config(write(tmp_path, decoupled), format="verl").pipeline
    assert "old_logprob" in pipeline.names  # verl recomputes them (fully async too)
