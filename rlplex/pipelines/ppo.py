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

from rlplex.dag.pipeline import Pipeline
from rlplex.pipelines.config import RLConfig
from rlplex.pipelines.roles import role_setups
from rlplex.pipelines.steps import build_step


def default_config() -> RLConfig:
    """PPO defaults for the toy task."""
    return RLConfig(algorithm="ppo", kl_mode="reward", kl_coef=0.001)


def build_pipeline(cfg: RLConfig | None = None) -> Pipeline:
    """The PPO step DAG with its stage callables."""
    cfg = cfg or default_config()
    return build_step(cfg, critic=True)


def pipeline() -> Pipeline:
    """The default PPO pipeline (for ``pipeline: {python: "rlplex.pipelines.ppo:pipeline"}``)."""
    return build_pipeline()


def setups(cfg: RLConfig | None = None) -> dict[str, Callable[[Any], Any]]:
    """Role name -> setup function for the executor."""
    return role_setups(cfg or default_config())
