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

from rlplex.dag.pipeline import Pipeline
from rlplex.pipelines.config import RLConfig
from rlplex.pipelines.roles import role_setups
from rlplex.pipelines.steps import build_step


def build_pipeline(cfg: RLConfig | None = None) -> Pipeline:
    """The GRPO step DAG with its stage callables."""
    cfg = cfg or RLConfig(algorithm="grpo")
    return build_step(cfg, critic=False)


def pipeline() -> Pipeline:
    """The default GRPO pipeline (for ``pipeline: {python: "rlplex.pipelines.grpo:pipeline"}``)."""
    return build_pipeline()


def setups(cfg: RLConfig | None = None) -> dict[str, Callable[[Any], Any]]:
    """Role name -> setup function (``setup(info) -> state``) for the executor."""
    cfg = cfg or RLConfig(algorithm="grpo")
    return role_setups(cfg)


__all__ = ["build_pipeline", "pipeline", "setups"]
