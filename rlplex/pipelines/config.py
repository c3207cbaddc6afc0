"""Hyperparameters of the ready PPO and GRPO pipelines, in one pydantic config.

One :class:`RLConfig` travels with every role's setup, so each stage callable
reads its settings from ``ctx.state.settings``; the defaults are tuned for the
toy task (:mod:`rlplex.stages.toy`) on a CPU: a 2-layer model that learns in a
minute. ``mode``/``max_staleness`` choose sync or one-step-off async.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlplex.dag.pipeline import Mode
from rlplex.stages.advantages import KLEstimator
from rlplex.stages.generation import GeneratorConfig, SamplingConfig
from rlplex.stages.losses import Aggregation
from rlplex.stages.models import ModelConfig
from rlplex.stages.optim import OptimConfig
from rlplex.stages.toy import ToyTaskConfig


class RLConfig(BaseModel):
    """Everything a PPO or GRPO run needs besides the cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    algorithm: Literal["grpo", "ppo"] = "grpo"
    """``grpo``: group-normalised advantages, no critic; ``ppo``: GAE with a critic."""
    model: ModelConfig = ModelConfig()
    """The policy (and the reference, the rollout engine and the critic's backbone)."""
    task: ToyTaskConfig = ToyTaskConfig()
    """The prompts and rule reward (the built-in toy task)."""
    reward_fn: str | None = None
    """``module:function`` rule reward; default: the toy task's."""
    sampling: SamplingConfig = SamplingConfig(n=8, max_new_tokens=2)
    """How the generate stage samples."""
    generator: GeneratorConfig = GeneratorConfig()
    """The inference engine (``hf`` or ``vllm``)."""
    optim: OptimConfig = OptimConfig(lr=3e-3, micro_batch_size=64)
    """The policy's optimizer."""
    critic_optim: OptimConfig = OptimConfig(lr=3e-3, micro_batch_size=64)
    """PPO: the critic's optimizer."""
    mini_batch_size: int | None = Field(None, ge=1)
    """Sequences per optimizer step; default the whole batch (one step per RL step)."""
    ppo_epochs: int = Field(1, ge=1)
    """Passes over the batch per RL step."""
    clip_eps: float = Field(0.2, gt=0)
    """PPO ratio clip."""
    value_clip: float | None = Field(0.2, gt=0)
    """PPO: critic value clip around the old values (None: no clipping)."""
    gamma: float = Field(1.0, ge=0, le=1)
    """PPO: discount."""
    lam: float = Field(0.95, ge=0, le=1)
    """PPO: GAE lambda."""
    whiten_advantages: bool = True
    """PPO: normalise GAE advantages over the batch."""
    norm_by_std: bool = True
    """GRPO: divide by the group's std (False: Dr. GRPO's mean-only centring)."""
    kl_mode: Literal["loss", "reward", "none"] = "loss"
    """How the reference enters: a KL loss term, a per-token reward penalty, or not at all."""
    kl_coef: float = Field(0.001, ge=0)
    """Weight of the KL term."""
    kl_estimator: KLEstimator = "k3"
    """Estimator of the KL loss (the reward penalty always uses k1)."""
    loss_aggregation: Aggregation | None = None
    """Token-loss averaging; default ``seq-mean-token-mean`` for GRPO, ``token-mean`` for PPO."""
    mode: Mode = "sync"
    """``sync``, or ``async``: generation of step t+1+k uses weights of step t."""
    max_staleness: int = Field(0, ge=0)
    """Async: how many steps generation may run ahead (1: one-step-off)."""
    device: str = "auto"
    """``auto`` (CUDA when the worker has a GPU), ``cpu`` or ``cuda``."""
    seed: int = 0
    """Seed of sampling and initialisation."""
    torch_threads: int = Field(1, ge=1)
    """CPU threads per worker (tests and the demo share a few cores)."""

    @model_validator(mode="after")
    def _check(self) -> RLConfig:
        batch = self.batch_size
        mini = self.mini_batch_size or batch
        if batch % mini:
            raise ValueError(
                f"mini_batch_size {mini} must divide the batch of {batch} sequences"
                f" (prompts_per_step x n)"
            )
        if self.mode == "async" and self.max_staleness < 1:
            raise ValueError("async mode needs max_staleness >= 1")
        return self

    @property
    def batch_size(self) -> int:
        """Sequences per RL step."""
        return self.task.prompts_per_step * self.sampling.n

    @property
    def aggregation(self) -> Aggregation:
        if self.loss_aggregation is not None:
            return self.loss_aggregation
        return "seq-mean-token-mean" if self.algorithm == "grpo" else "token-mean"

    def micro_batches_per_step(self, optim: OptimConfig) -> int:
        """Micro-batches per optimizer step (DeepSpeed's gradient_accumulation_steps)."""
        mini = self.mini_batch_size or self.batch_size
        return max(1, -(-mini // optim.micro_batch_size))
