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


class TokenLength(BaseModel):
    """A sequence length of a workload: its mean and its maximum, in tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: float = Field(gt=0, allow_inf_nan=False)
    """Mean tokens per sequence."""
    max: int = Field(ge=1)
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
