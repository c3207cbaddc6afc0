"""Token log-probs and values of the responses: the ref/old_logprob and values stages.

Both read the same ``[prompt | response]`` layout (:mod:`rlplex.stages.batch`):
the logits at column ``P + j - 1`` score response token j, so one forward pass
over the whole sequence gives every response token's log-prob under the
model. Log-probs are taken at the sampling temperature (logits divided by
it), so that PPO's ratio compares the distributions the tokens were drawn
from. Values are read the same way from a token-head critic: the value of the
state before response token j.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlplex.stages.batch import Batch, sequence, split

if TYPE_CHECKING:
    import torch


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[..., label]`` for each position, computed in float32."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def forward_logprobs(
    model: torch.nn.Module, batch: Batch, temperature: float = 1.0
) -> torch.Tensor:
    """``[B, R]`` log-probs of the response tokens; differentiable (used by train)."""
    device = _device(model)
    input_ids, attention_mask, position_ids = (t.to(device) for t in sequence(batch))
    width = batch["response_ids"].shape[1]
    logits = model(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
    ).logits
    logits = logits[:, -width - 1 : -1] / temperature
    return token_logprobs(logits, batch["response_ids"].to(device))


def forward_values(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """``[B, R]`` critic values of the states before each response token; differentiable."""
    device = _device(model)
    input_ids, attention_mask, position_ids = (t.to(device) for t in sequence(batch))
    width = batch["response_ids"].shape[1]
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)
    return out.logits[:, -width - 1 : -1, 0].float()


def response_logprobs(
    model: torch.nn.Module, batch: Batch, temperature: float = 1.0, micro_batch_size: int = 64
) -> torch.Tensor:
    """Log-probs without gradients, in micro-batches: the ref_logprob / old_logprob stages."""
    import torch

    was_training = model.training
    model.eval()
    with torch.no_grad():
        parts = [
            forward_logprobs(model, mb, temperature).cpu() for mb in split(batch, micro_batch_size)
        ]
    model.train(was_training)
    return torch.cat(parts, dim=0)


def response_values(
    model: torch.nn.Module, batch: Batch, micro_batch_size: int = 64
) -> torch.Tensor:
    """Critic values without gradients, in micro-batches: the values stage."""
    import torch

    was_training = model.training
    model.eval()
    with torch.no_grad():
        parts = [forward_values(model, mb).cpu() for mb in split(batch, micro_batch_size)]
    model.train(was_training)
    return torch.cat(parts, dim=0)


def reward_model_scores(
    model: torch.nn.Module, batch: Batch, micro_batch_size: int = 64
) -> torch.Tensor:
    """``[B]`` scores of a sequence-classification reward model (its last real token)."""
    import torch

    device = _device(model)
    parts = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for mb in split(batch, micro_batch_size):
            input_ids, attention_mask, position_ids = (t.to(device) for t in sequence(mb))
            logits = model(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
            ).logits
            parts.append(logits[:, 0].float().cpu())
    model.train(was_training)
    return torch.cat(parts, dim=0)
