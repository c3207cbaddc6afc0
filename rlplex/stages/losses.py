"""The train stages' losses: PPO's clipped policy loss (and GRPO's variant), the critic's.

Every loss takes ``[B, R]`` tensors over response tokens and the response
mask, and returns a scalar plus a dict of float statistics. How token losses
are averaged is the main difference between the PPO and GRPO variants:
``token-mean`` averages over all tokens of the batch (PPO, DAPO), while
``seq-mean-token-mean`` averages within each sequence first (the GRPO
paper), so short and long answers weigh the same. Each function documents a
hand-computed example that the unit tests check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from rlplex.stages.advantages import KLEstimator, kl_estimate, masked_mean

if TYPE_CHECKING:
    import torch

Aggregation = Literal["token-mean", "seq-mean-token-mean"]


def aggregate(loss: torch.Tensor, mask: torch.Tensor, mode: Aggregation) -> torch.Tensor:
    """Reduce ``[B, R]`` token losses to a scalar as ``mode`` says."""
    if mode == "token-mean":
        return masked_mean(loss, mask)
    if mode == "seq-mean-token-mean":
        per_seq = masked_mean(loss, mask, dim=-1)
        has_tokens = (mask.sum(-1) > 0).to(per_seq.dtype)
        return (per_seq * has_tokens).sum() / has_tokens.sum().clamp(min=1)
    raise ValueError(f"unknown loss aggregation {mode!r}")


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
    aggregation: Aggregation = "token-mean",
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped surrogate ``max(-A * r, -A * clip(r, 1 - eps, 1 + eps))``, r = exp(logp - old).

    Example (eps = 0.2), three tokens: (logp - old, A) = (0.2, 1): r = 1.2214,
    loss max(-1.2214, -1.2) = -1.2 (clipped); (-0.5, 1): r = 0.6065,
    max(-0.6065, -0.8) = -0.6065; (0.2, -1): max(1.2214, 1.2) = 1.2214.
    Token mean: (-1.2 - 0.6065 + 1.2214) / 3 = -0.1950; clip fraction 1/3.
    """
    import torch

    log_ratio = logprobs - old_logprobs
    ratio = torch.exp(log_ratio.clamp(-20.0, 20.0))
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps)
    loss_tokens = torch.maximum(unclipped, clipped)
    loss = aggregate(loss_tokens, mask, aggregation)
    with torch.no_grad():
        clip_frac = masked_mean((clipped > unclipped).float(), mask)
        approx_kl = masked_mean(-log_ratio, mask)
    return loss, {"clip_frac": float(clip_frac), "approx_kl": float(approx_kl)}


def kl_loss(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    mask: torch.Tensor,
    estimator: KLEstimator = "k3",
    aggregation: Aggregation = "token-mean",
) -> torch.Tensor:
    """KL(policy || reference) as a loss term (GRPO): the estimator averaged over tokens."""
    return aggregate(kl_estimate(logprobs, ref_logprobs, estimator), mask, aggregation)


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float | None = 0.2,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped critic loss: ``0.5 * max((v - R)**2, (old + clip(v - old, -c, c) - R)**2)``.

    Example (c = 0.2): v = 1.0, old = 0.5, R = 0.8: the clipped value is 0.7,
    so 0.5 * max(0.04, 0.01) = 0.02. With R = 1.0 instead the unclipped error is
    0 but the clipped one (0.7 - 1.0)**2 = 0.09, so the loss is 0.045.
    """
    import torch

    unclipped = (values - returns) ** 2
    if clip is None:
        loss_tokens = unclipped
        clip_frac = torch.zeros(())
    else:
        clipped_values = old_values + (values - old_values).clamp(-clip, clip)
        clipped = (clipped_values - returns) ** 2
        loss_tokens = torch.maximum(unclipped, clipped)
        clip_frac = masked_mean((clipped > unclipped).float(), mask)
    loss = 0.5 * masked_mean(loss_tokens, mask)
    return loss, {"value_clip_frac": float(clip_frac)}
