"""The config sections the estimator reads: workload, per-role parallelism and precision.

They live here, apart from the estimator's formulas, because the config
loader and the importers (ROLL, RLinf, verl) fill them in without needing the
formulas. All of them are optional: a config without them plans from the
``seconds`` and ``states`` it gives.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Precision = Literal["bf16", "fp16", "fp32", "fp8"]
OptimizerName = Literal["adamw", "adam", "sgd"]

MAX_TOKENS = 2**24
"""Longest sequence a workload may name (16,777,216 tokens): far past any model's
context, and small enough that the estimator's token-squared terms stay finite."""


class TokenLength(BaseModel):
    """A sequence length of a workload: its mean and its maximum, in tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: float = Field(gt=0, le=MAX_TOKENS, allow_inf_nan=False)
    """Mean tokens per sequence."""
    max: int = Field(ge=1, le=MAX_TOKENS)
    """Longest sequence allowed (the framework's max length), in tokens."""


class Workload(BaseModel):
    """What one RL step processes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompts_per_step: int = Field(ge=1)
    """Prompts in one step's batch (verl ``data.train_batch_size``, ROLL ``rollout_batch_size``)."""
    samples_per_prompt: int = Field(1, ge=1)
    """Responses generated per prompt (GRPO's group size; verl ``rollout.n``)."""
    prompt_tokens: TokenLength
    """Prompt length."""
    response_tokens: TokenLength
    """Response length."""
    micro_batch_size: int = Field(1, ge=1)
    """Sequences per micro-batch per GPU in training and log-prob passes (activations)."""
    epochs: int = Field(1, ge=1)
    """Passes over the step's batch in each train stage (PPO epochs)."""


class Parallel(BaseModel):
    """How a GPU role splits its model over its devices."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int | None = Field(None, ge=1)
    """Tensor-parallel size; default: ``num_gpus_per_worker`` (inference) or 1 (training)."""
    pp: int = Field(1, ge=1)
    """Pipeline-parallel size."""
    dp: int | None = Field(None, ge=1)
    """Data-parallel size; default: devices / (tp x pp)."""
    zero: Literal[0, 1, 2, 3] = 0
    """DeepSpeed ZeRO stage: 1 shards optimizer state, 2 also grads, 3 also weights over dp."""
    fsdp: bool = False
    """FSDP full sharding (weights, grads and optimizer state over dp, like ZeRO-3)."""
    recompute: bool = False
    """Activation recomputation (checkpointing): 8x instead of 6x params x tokens to train."""


class Efficiency(BaseModel):
    """Achieved fractions of the hardware's peak; unset ones take the published defaults.

    ``rlplex calibrate`` fits them from a record and writes them to a costs file
    (``efficiency:``). A stage listed under ``stages`` uses its own factor instead
    of its kind's (for generation it scales both prefill and decode).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    train: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Train and critic_train: fraction of peak FLOP/s (MFU)."""
    forward: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Log-prob, value and reward-model passes: fraction of peak FLOP/s."""
    prefill: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Generation's prompt processing: fraction of peak FLOP/s."""
    decode: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Generation's decode steps: fraction of peak memory bandwidth."""
    host_copy: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Offload/reload: fraction of the host link (fills ``cluster.host_gb_per_s``)."""
    link: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Weight sync: fraction of NVLink/network (fills the cluster's copy speeds)."""
    stages: dict[str, float] = Field(default_factory=dict)
    """Per-stage factor relative to the stage's kind default (1.0: as the kind says)."""
