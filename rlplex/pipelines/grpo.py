"""GRPO as a Python DAG: generate, reward, ref/old log-probs, group advantages, train, sync.

::

    generate ─┬─ reward ──────┐
              ├─ ref_logprob ─┼─ advantage ── train ── weight_sync
              └─ old_logprob ─┘

Stage costs (``seconds``) are rough CPU timings of the toy task; the planner
only needs their ratios. :func:`build_pipeline` returns the checked
:class:`~rlplex.Pipeline` with the callables of :mod:`rlplex.pipelines.stages`
bound; :func:`setups` gives each role's setup function for the executor. For
the YAML route, ``pipeline: {python: "rlplex.pipelines.grpo:pipeline"}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlplex.dag.api import PipelineBuilder
from rlplex.dag.pipeline import Pipeline
from rlplex.pipelines.config import RLConfig
from rlplex.pipelines.roles import role_setups


def build_pipeline(cfg: RLConfig | None = None) -> Pipeline:
    """The GRPO step DAG with its stage callables."""
    from rlplex.pipelines import stages as s

    cfg = cfg or RLConfig(algorithm="grpo")
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
    adv = b.stage(
        "advantage", role="driver", seconds=0.01, after=[gen, rew, ref, old], fn=s.advantage
    )
    tr = b.stage("train", role="actor_train", seconds=0.3, after=[adv], fn=s.train)
    b.weight_sync(
        from_="actor_train",
        to="actor_infer",
        after=[tr],
        fn=s.vllm_weight_sync if cfg.generator.backend == "vllm" else None,
    )
    return b.build()


def pipeline() -> Pipeline:
    """The default GRPO pipeline (for ``pipeline: {python: "rlplex.pipelines.grpo:pipeline"}``)."""
    return build_pipeline()


def setups(cfg: RLConfig | None = None) -> dict[str, Callable[[Any], Any]]:
    """Role name -> setup function (``setup(info) -> state``) for the executor."""
    cfg = cfg or RLConfig(algorithm="grpo")
    return role_setups(cfg)


__all__ = ["build_pipeline", "pipeline", "setups"]
