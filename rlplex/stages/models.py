"""Models for the stages: causal LMs, value-head critics and reward models.

Every role builds its model from one :class:`ModelConfig`: either a local
Hugging Face checkpoint (``path``; nothing is downloaded) or, for tests and the
demo, a small randomly initialised Llama- or Qwen2-style network built from a
config object. The critic is the same backbone with a one-output token head
(``AutoModelForTokenClassification``, as verl and OpenRLHF do), and a reward
model is the backbone with a one-output sequence head.

``transformers`` and torch are imported lazily so that ``import rlplex`` stays
light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import torch


class ModelConfig(BaseModel):
    """Which network a role holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str | None = None
    """A local Hugging Face checkpoint directory; when set, the tiny-model fields are ignored."""
    arch: Literal["llama", "qwen2"] = "llama"
    """Architecture of the randomly initialised model."""
    num_layers: int = Field(2, ge=1)
    """Transformer blocks."""
    hidden_size: int = Field(64, ge=8)
    """Width of the residual stream."""
    intermediate_size: int = Field(128, ge=8)
    """Width of the MLP."""
    num_heads: int = Field(4, ge=1)
    """Attention heads."""
    num_kv_heads: int = Field(2, ge=1)
    """Key/value heads (grouped-query attention)."""
    vocab_size: int = Field(16, ge=4)
    """Vocabulary size; must match the tokenizer."""
    max_positions: int = Field(64, ge=8)
    """Longest sequence (prompt plus response)."""
    pad_token_id: int = 0
    """Id of the padding token."""
    bos_token_id: int = 1
    """Id of the beginning-of-sequence token."""
    eos_token_id: int = 2
    """Id of the end-of-sequence token."""
    seed: int = 0
    """Seed of the random initialisation (every role gets the same initial weights)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Parameter dtype."""


def _dtype(name: str) -> torch.dtype:
    import torch

    return getattr(torch, name)


def hf_config(config: ModelConfig) -> Any:
    """The ``transformers`` config of the tiny model, or the checkpoint's config."""
    from transformers import AutoConfig, LlamaConfig, Qwen2Config

    if config.path is not None:
        return AutoConfig.from_pretrained(config.path, local_files_only=True)
    cls = LlamaConfig if config.arch == "llama" else Qwen2Config
    return cls(
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        max_position_embeddings=config.max_positions,
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        tie_word_embeddings=False,
    )


def _build(auto_cls: Any, config: ModelConfig, **kwargs: Any) -> torch.nn.Module:
    import torch

    hf = hf_config(config)
    for key, value in kwargs.items():
        setattr(hf, key, value)
    if config.path is not None:
        model = auto_cls.from_pretrained(
            config.path, config=hf, local_files_only=True, dtype=_dtype(config.dtype)
        )
    else:
        # The same seed gives every role (actor, reference, rollout) the same initial weights.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            model = auto_cls.from_config(hf, dtype=_dtype(config.dtype))
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = config.pad_token_id
    return model


def build_causal_lm(config: ModelConfig) -> torch.nn.Module:
    """The policy (and reference, and rollout) network."""
    from transformers import AutoModelForCausalLM

    return _build(AutoModelForCausalLM, config)


def build_critic(config: ModelConfig) -> torch.nn.Module:
    """The LM backbone with a one-output token head: a value per position.

    The head's dropout is off (HF defaults to 0.1): a noisy value target only slows the critic.
    """
    from transformers import AutoModelForTokenClassification

    return _build(AutoModelForTokenClassification, config, num_labels=1, classifier_dropout=0.0)


def build_reward_model(config: ModelConfig) -> torch.nn.Module:
    """The LM backbone with a one-output sequence head: a score per sequence."""
    from transformers import AutoModelForSequenceClassification

    return _build(AutoModelForSequenceClassification, config, num_labels=1)
