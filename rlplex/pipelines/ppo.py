"""PPO with a critic as a Python DAG.

::

    generate ─┬─ reward ──────┐
              ├─ ref_logprob ─┤
              ├─ old_logprob ─┼─ advantage ─┬─ train ── weight_sync
              └─ values ──────┘             └─ critic_train

The driver's advantage stage computes GAE from the critic's values and the
rule reward (minus a per-token KL penalty with ``kl_mode="reward"``, the
classic PPO-RLHF recipe, or with a KL loss term). :func:`build_pipeline`
returns the checked pipeline; :func:`setups` the role setup functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlplex.dag.api import PipelineBuilder
from rlplex.dag.pipeline import Pipeline
from rlplex.pipelines.config import RLConfig
from rlplex.pipelines.roles import role_setups


def default_config() -> RLConfig:
    """PPO defaults for the toy task."""
    return RLConfig(algorithm="ppo", kl_mode="reward", kl_coef=0.001)


def build_pipeline(cfg: RLConfig | None = None) -> Pipeline:
    """The PPO step DAG with its stage callables."""
    from rlplex.pipelines import stages as s

    cfg = cfg or default_config()
    b = PipelineBuilder(mode=cfg.mode, max_staleness=cfg.max_staleness)
    gen = b.stage("generate", role="actor_infer", seconds=0.3, fn=s.generate)
    rew = b.stage("reward", role="rewards", seconds=0.02, after=[gen], fn=s.reward)
    ref = b.stage("ref_logprob", role="reference", seconds=0.05, after=[gen], fn=s.ref_logprob)
    old = b.stage(
        "old_logprob",
        role="actor_train",
        seconds=0.05,
        after=[gen],
        needs=["weights"],
        fn=s.old_logprob,
    )
    val = b.stage(
        "values", role="critic", seconds=0.05, after=[gen], needs=["weights"], fn=s.values
    )
    adv = b.stage(
        "advantage",
        role="driver",
        seconds=0.01,
        after=[gen, rew, ref, old, val],
        fn=s.advantage,
    )
    tr = b.stage("train", role="actor_train", seconds=0.3, after=[adv], fn=s.train)
    b.stage("critic_train", role="critic", seconds=0.3, after=[adv], fn=s.critic_train)
    b.weight_sync(
        from_="actor_train",
        to="actor_infer",
        after=[tr],
        fn=s.vllm_weight_sync if cfg.generator.backend == "vllm" else None,
    )
    return b.build()


def pipeline() -> Pipeline:
    """The default PPO pipeline (for ``pipeline: {python: "rlplex.pipelines.ppo:pipeline"}``)."""
    return build_pipeline()


def setups(cfg: RLConfig | None = None) -> dict[str, Callable[[Any], Any]]:
    """Role name -> setup function for the executor."""
    return role_setups(cfg or default_config())
