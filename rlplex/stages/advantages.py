"""Advantages and KL terms: the driver's ``advantage`` stage, as pure tensor functions.

PPO estimates per-token advantages with GAE against a critic; GRPO normalises
each sequence's score within the group of samples of its prompt and spreads
it over the response tokens. The reference policy enters in one of two ways:
as a per-token penalty in the reward (``kl_penalty``, PPO-style) or as a loss
term (``kl_loss`` in :mod:`rlplex.stages.losses`, GRPO-style). Each function
documents a small hand-computed example that the unit tests check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

KLEstimator = Literal["k1", "k2", "k3"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``x`` where ``mask`` is 1 (over ``dim``, or everything)."""
    mask = mask.to(x.dtype)
    if dim is None:
        return (x * mask).sum() / mask.sum().clamp(min=1)
    return (x * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / std`` over the masked entries (biased std), zero elsewhere."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * (var + eps).rsqrt() * mask.to(x.dtype)


def kl_estimate(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: KLEstimator = "k1"
) -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from sampled tokens (Schulman's k1/k2/k3).

    With ``d = ref - logp``: k1 = ``-d``; k2 = ``d**2 / 2``; k3 = ``exp(d) - d - 1``
    (unbiased and always >= 0). Example: logp = -1, ref = -2, so d = -1:
    k1 = 1, k2 = 0.5, k3 = e**-1 + 1 - 1 = 0.3679.
    """
    import torch

    d = ref_logprobs - logprobs
    if estimator == "k1":
        return -d
    if estimator == "k2":
        return 0.5 * d**2
    if estimator == "k3":
        # Clamp as verl does: exp of a large log-ratio overflows and means a dead policy anyway.
        d = d.clamp(-20.0, 20.0)
        return (torch.exp(d) - d - 1).clamp(-10.0, 10.0)
    raise ValueError(f"unknown KL estimator {estimator!r} (k1, k2 or k3)")


def token_rewards(
    scores: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, kl_coef: float = 0.0
) -> torch.Tensor:
    """``[B, R]`` rewards: the sequence score on its last response token, minus ``kl_coef * kl``.

    Example: score 1.0, mask [1, 1, 0], kl [0.5, 0.25, 9], coef 0.1 ->
    [-0.05, 1 - 0.025, 0] = [-0.05, 0.975, 0].
    """
    import torch

    mask_f = mask.to(torch.float32)
    rewards = torch.zeros_like(mask_f)
    last = (mask.sum(-1) - 1).clamp(min=0).long()
    rewards[torch.arange(mask.shape[0]), last] = scores.to(torch.float32)
    rewards = rewards * (mask.sum(-1, keepdim=True) > 0)
    if kl is not None and kl_coef:
        rewards = rewards - kl_coef * kl.to(torch.float32)
    return rewards * mask_f


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over response tokens; returns (advantages, returns).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` (V after the last token is 0) and
    ``A_t = delta_t + gamma * lam * A_{t+1}``; returns = A + V. Example with
    rewards [0, 1], values [0.5, 0.8], gamma = 1: delta = [0.3, 0.2]; with
    lam = 1, A = [0.5, 0.2] and returns [1.0, 1.0]; with lam = 0.5,
    A = [0.3 + 0.5 * 0.2, 0.2] = [0.4, 0.2].
    """
    import torch

    mask_f = mask.to(torch.float32)
    values = values.to(torch.float32) * mask_f
    rewards = rewards.to(torch.float32) * mask_f
    width = rewards.shape[1]
    last = torch.zeros_like(rewards[:, 0])
    out = []
    for t in reversed(range(width)):
        # Past the eos the values are masked to 0, so the last real token bootstraps from 0.
        next_value = values[:, t + 1] if t + 1 < width else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = delta + gamma * lam * last
        out.append(last)
    advantages = torch.stack(out[::-1], dim=1) * mask_f
    returns = (advantages + values) * mask_f
    return advantages, returns


def group_advantages(
    scores: torch.Tensor,
    group: torch.Tensor,
    mask: torch.Tensor,
    norm_by_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GRPO: each score minus its group's mean (over its group's std), on every response token.

    Uses the unbiased std, as the GRPO paper and verl do. Example: one group
    with scores [1, 0, 0, 1]: mean 0.5, std sqrt(4 * 0.25 / 3) = 0.5774,
    advantages [0.866, -0.866, -0.866, 0.866]. A group whose samples all
    score the same gets 0 (nothing to learn from it).
    """
    import torch

    scores = scores.to(torch.float32)
    normalised = torch.zeros_like(scores)
    for g in torch.unique(group):
        idx = group == g
        s = scores[idx]
        centred = s - s.mean()
        if norm_by_std:
            std = s.std() if s.numel() > 1 else torch.zeros(())
            centred = centred / (std + eps)
        normalised[idx] = centred
    return normalised[:, None] * mask.to(torch.float32)
