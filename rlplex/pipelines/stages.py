"""The stage callables of the PPO and GRPO pipelines, and the role setup functions.

Each callable follows the executor's convention (:mod:`rlplex.runtime.worker`):
``fn(ctx, **upstream)`` with ``ctx.state`` the role's state from its setup
function (:mod:`rlplex.stages.roles`) and one keyword per upstream stage,
holding this worker's shard of that stage's result. Batches are
``dict[str, Tensor]`` in the layout of :mod:`rlplex.stages.batch`, so the
executor splits and joins them row-wise across a role's workers. Metrics go
through ``ctx.log``: ``reward/mean``, ``kl``, ``loss/policy``,
``loss/value``, ``response_length/mean``, ``tokens_per_s`` and
``time/<stage>`` (seconds inside the callable).

The same callables run in-process under :mod:`rlplex.pipelines.local`.
Modules are imported by name in Ray workers, so everything here is a
module-level function (setups are bound to their config with
:func:`functools.partial`).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import torch

from rlplex.pipelines.config import RLConfig
from rlplex.stages import advantages as adv_fns
from rlplex.stages import batch as B
from rlplex.stages import losses, toy
from rlplex.stages.logprobs import forward_logprobs, forward_values, response_logprobs
from rlplex.stages.logprobs import response_values as critic_values
from rlplex.stages.rewards import decode_batch, load_reward_fn, rule_scores, scores_tensor
from rlplex.stages.roles import (
    CriticState,
    PolicyState,
    ReferenceState,
    RewardState,
    RolloutState,
    make_critic,
    make_hf_rollout,
    make_policy,
    make_reference,
    match_initial_residency,
    pick_device,
)


@dataclass
class DriverState:
    """The controller's state: only the settings."""

    settings: RLConfig
    """The pipeline's hyperparameters."""


@dataclass
class WeightsMessage:
    """Trained weights sent by ``train`` to a ``weight_sync`` callable (vLLM rollout)."""

    weights: dict[str, torch.Tensor]
    """Parameter name -> CPU tensor."""


# -- setups ----------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def load_tokenizer(path: str | None) -> Any:
    """The checkpoint's own tokenizer for ``model.path`` (local files only), else the toy one."""
    if path is None:
        return toy.toy_tokenizer()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if tok.pad_token_id is None:
        # Many causal LMs ship without a pad token; eos works since masks mark real tokens.
        tok.pad_token = tok.eos_token
    return tok


def _prepare(cfg: RLConfig, info: Any) -> torch.device:
    torch.set_num_threads(cfg.torch_threads)
    return pick_device(getattr(info, "devices", ()), cfg.device)


def _settle(state: Any, info: Any) -> Any:
    if info is not None and info.state_gb:
        match_initial_residency(state.offloader, list(info.state_gb), info.initial_residency)
    return state


def _setup_trained(make: Any, cfg: RLConfig, optim: Any, info: Any) -> Any:
    """A trained role's state; data-parallel over ``info.group`` when the executor set one."""
    device = _prepare(cfg, info)
    n_micro = cfg.micro_batches_per_step(optim)
    group = getattr(info, "group", None)
    return _settle(make(cfg.model, optim, n_micro, device, cfg, group), info)


def setup_policy(cfg: RLConfig, info: Any = None) -> PolicyState:
    return _setup_trained(make_policy, cfg, cfg.optim, info)


def setup_rollout(cfg: RLConfig, info: Any = None) -> RolloutState:
    device = _prepare(cfg, info)
    if cfg.generator.backend == "vllm":
        from rlplex.stages.generation import VLLMGenerator, make_vllm_engine
        from rlplex.stages.offload import VllmOffload  # type: ignore[attr-defined]

        if cfg.model.path is None:
            raise ValueError("the vllm generator needs model.path (a local checkpoint)")
        engine = make_vllm_engine(cfg.model.path, cfg.generator)
        tok = load_tokenizer(cfg.model.path)
        gen = VLLMGenerator(engine, tok.pad_token_id, tok.eos_token_id)
        return _settle(RolloutState(gen, None, VllmOffload(engine), cfg), info)
    return _settle(make_hf_rollout(cfg.model, load_tokenizer(cfg.model.path), device, cfg), info)


def setup_reference(cfg: RLConfig, info: Any = None) -> ReferenceState:
    device = _prepare(cfg, info)
    return _settle(make_reference(cfg.model, device, cfg), info)


def setup_critic(cfg: RLConfig, info: Any = None) -> CriticState:
    return _setup_trained(make_critic, cfg, cfg.critic_optim, info)


def setup_rewards(cfg: RLConfig, info: Any = None) -> RewardState:
    ref = cfg.reward_fn or toy.reward_fn_ref(cfg.task)
    return RewardState(load_reward_fn(ref), load_tokenizer(cfg.model.path), cfg)


def setup_driver(cfg: RLConfig, info: Any = None) -> DriverState:
    return DriverState(cfg)


# -- stages ----------------------------------------------------------------------------


def _pad_to(batch: B.Batch, prompt_width: int, response_width: int, pad_id: int) -> B.Batch:
    """Pad to fixed widths so that the shards of several workers concatenate."""
    out = dict(batch)
    p = prompt_width - batch["prompt_ids"].shape[1]
    if p > 0:
        out["prompt_ids"] = torch.nn.functional.pad(batch["prompt_ids"], (p, 0), value=pad_id)
        out["prompt_mask"] = torch.nn.functional.pad(batch["prompt_mask"], (p, 0), value=0)
    r = response_width - batch["response_ids"].shape[1]
    if r > 0:
        out["response_ids"] = torch.nn.functional.pad(batch["response_ids"], (0, r), value=pad_id)
        out["response_mask"] = torch.nn.functional.pad(batch["response_mask"], (0, r), value=0)
    return out


def generate(ctx: Any) -> B.Batch:
    """``actor_infer``: sample ``n`` responses for this worker's share of the step's prompts."""
    state: RolloutState = ctx.state
    cfg: RLConfig = state.settings
    tok = load_tokenizer(cfg.model.path)
    prompts = [tok.encode(p) for p in toy.prompts_for_step(cfg.task, ctx.step)]
    n = len(prompts)
    start, end = n * ctx.rank // ctx.world_size, n * (ctx.rank + 1) // ctx.world_size
    torch.manual_seed(cfg.seed * 1_000_003 + ctx.step * 101 + ctx.rank)
    t0 = time.perf_counter()
    batch = state.generator.generate(prompts[start:end], cfg.sampling)
    seconds = time.perf_counter() - t0
    batch = _pad_to(
        batch, max(len(p) for p in prompts), cfg.sampling.max_new_tokens, tok.pad_token_id
    )
    batch["group"] = batch["group"] + start
    tokens = int(batch["response_mask"].sum())
    ctx.log(**{"tokens_per_s": tokens / max(seconds, 1e-9), "time/generate": seconds})
    return batch


def reward(ctx: Any, generate: B.Batch) -> torch.Tensor:
    """A CPU role: the rule reward of each of this worker's rows."""
    state: RewardState = ctx.state
    t0 = time.perf_counter()
    prompts, responses = decode_batch(generate, state.tokenizer)
    scores = scores_tensor(rule_scores(state.reward_fn, prompts, responses))
    ctx.log(**{"time/reward": time.perf_counter() - t0})
    return scores


def _timed_logprobs(ctx: Any, model: Any, generate: B.Batch, name: str) -> torch.Tensor:
    """Response log-probs under ``model``, logging the seconds as ``time/<name>``."""
    cfg: RLConfig = ctx.state.settings
    t0 = time.perf_counter()
    out = response_logprobs(model, generate, cfg.sampling.temperature, cfg.optim.micro_batch_size)
    ctx.log(**{f"time/{name}": time.perf_counter() - t0})
    return out


def ref_logprob(ctx: Any, generate: B.Batch) -> torch.Tensor:
    """``reference``: log-probs of the responses under the frozen initial policy."""
    state: ReferenceState = ctx.state
    return _timed_logprobs(ctx, state.model, generate, "ref_logprob")


def old_logprob(ctx: Any, generate: B.Batch) -> torch.Tensor:
    """``actor_train``: log-probs of the responses under the policy that is about to train."""
    state: PolicyState = ctx.state
    return _timed_logprobs(ctx, state.trainer.model, generate, "old_logprob")


def values(ctx: Any, generate: B.Batch) -> torch.Tensor:
    """``critic``: the critic's value of each response position."""
    state: CriticState = ctx.state
    cfg: RLConfig = state.settings
    t0 = time.perf_counter()
    out = critic_values(state.trainer.model, generate, cfg.critic_optim.micro_batch_size)
    ctx.log(**{"time/values": time.perf_counter() - t0})
    return out


def compute_advantages(
    cfg: RLConfig,
    batch: B.Batch,
    scores: torch.Tensor,
    ref: torch.Tensor,
    old: torch.Tensor,
    value: torch.Tensor | None,
) -> tuple[B.Batch, dict[str, float]]:
    """The driver's arithmetic, pure: advantages (and returns) plus the step's metrics."""
    mask = batch["response_mask"]
    kl_tokens = adv_fns.kl_estimate(old, ref, "k1")
    kl = float(adv_fns.masked_mean(kl_tokens, mask))
    penalised = cfg.kl_mode == "reward" and cfg.kl_coef > 0
    extra: dict[str, torch.Tensor] = {"old_logprobs": old, "ref_logprobs": ref, "scores": scores}
    if cfg.algorithm == "grpo":
        seq_scores = scores
        if penalised:
            seq_scores = scores - cfg.kl_coef * (kl_tokens * mask).sum(-1)
        extra["advantages"] = adv_fns.group_advantages(
            seq_scores, batch["group"], mask, cfg.norm_by_std
        )
    else:
        if value is None:
            raise ValueError("PPO needs the critic's values")
        rewards = adv_fns.token_rewards(scores, mask, kl_tokens if penalised else None, cfg.kl_coef)
        advantages, returns = adv_fns.gae(rewards, value, mask, cfg.gamma, cfg.lam)
        if cfg.whiten_advantages:
            advantages = adv_fns.masked_whiten(advantages, mask)
        extra.update(advantages=advantages, returns=returns, values=value)
    metrics = {
        "reward/mean": float(scores.mean()),
        "kl": kl,
        "response_length/mean": float(mask.sum(-1).float().mean()),
        "advantage/abs_mean": float(adv_fns.masked_mean(extra["advantages"].abs(), mask)),
    }
    return B.merge(batch, extra), metrics


def advantage(
    ctx: Any,
    generate: B.Batch,
    reward: torch.Tensor,
    ref_logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    values: torch.Tensor | None = None,
) -> B.Batch:
    """``driver``: GRPO group advantages or PPO GAE, and the KL to the reference."""
    cfg: RLConfig = ctx.state.settings
    t0 = time.perf_counter()
    out, metrics = compute_advantages(cfg, generate, reward, ref_logprob, old_logprob, values)
    ctx.log(**metrics, **{"time/advantage": time.perf_counter() - t0})
    return out


def _units(aggregation: str) -> Any:
    if aggregation == "token-mean":
        return lambda mb: float(mb["response_mask"].sum())
    return lambda mb: float((mb["response_mask"].sum(-1) > 0).sum())


def _minibatches(cfg: RLConfig, batch: B.Batch, seed: int) -> list[B.Batch]:
    n = B.batch_size(batch)
    size = min(cfg.mini_batch_size or n, n)
    out = []
    gen = torch.Generator().manual_seed(seed)
    for _ in range(cfg.ppo_epochs):
        order = torch.randperm(n, generator=gen)
        out.extend(B.split(B.select(batch, order), size))
    return out


def policy_update(cfg: RLConfig, state: PolicyState, batch: B.Batch, seed: int) -> dict[str, float]:
    """PPO/GRPO policy loss over mini-batches and micro-batches; the averaged statistics."""
    device = next(state.trainer.model.parameters()).device
    aggregation = cfg.aggregation
    use_kl_loss = cfg.kl_mode == "loss" and cfg.kl_coef > 0

    def loss_fn(model: Any, mb: B.Batch) -> tuple[torch.Tensor, dict[str, float]]:
        mb = {k: v.to(device) for k, v in mb.items()}
        logp = forward_logprobs(model, mb, cfg.sampling.temperature)
        mask = mb["response_mask"]
        loss, stats = losses.policy_loss(
            logp, mb["old_logprobs"], mb["advantages"], mask, cfg.clip_eps, aggregation
        )
        stats["loss/policy"] = float(loss.detach())
        if use_kl_loss:
            kl = losses.kl_loss(logp, mb["ref_logprobs"], mask, cfg.kl_estimator, aggregation)
            stats["loss/kl"] = float(kl.detach())
            loss = loss + cfg.kl_coef * kl
        return loss, stats

    units = _units(aggregation)
    history = []
    for mini in _minibatches(cfg, batch, seed):
        micro = B.split(mini, cfg.optim.micro_batch_size)
        history.append(state.trainer.step(micro, loss_fn, units))
    return {k: sum(h[k] for h in history) / len(history) for k in history[0]}


def train(ctx: Any, advantage: B.Batch) -> WeightsMessage | None:
    """``actor_train``: one RL step of policy updates."""
    state: PolicyState = ctx.state
    cfg: RLConfig = state.settings
    t0 = time.perf_counter()
    stats = policy_update(cfg, state, advantage, cfg.seed * 7919 + ctx.step)
    ctx.log(
        **{
            "loss/policy": stats["loss/policy"],
            "clip_frac": stats["clip_frac"],
            "grad_norm": stats["grad_norm"],
            **({"loss/kl": stats["loss/kl"]} if "loss/kl" in stats else {}),
            "time/train": time.perf_counter() - t0,
        }
    )
    if cfg.generator.backend == "vllm":
        return WeightsMessage({k: v.detach().cpu() for k, v in state.named_weights().items()})
    return None


def critic_update(cfg: RLConfig, state: CriticState, batch: B.Batch, seed: int) -> dict[str, float]:
    """The clipped value loss over mini-batches and micro-batches."""
    device = next(state.trainer.model.parameters()).device

    def loss_fn(model: Any, mb: B.Batch) -> tuple[torch.Tensor, dict[str, float]]:
        mb = {k: v.to(device) for k, v in mb.items()}
        v = forward_values(model, mb)
        return losses.value_loss(
            v, mb["values"], mb["returns"], mb["response_mask"], cfg.value_clip
        )

    units = _units("token-mean")
    history = []
    for mini in _minibatches(cfg, batch, seed):
        micro = B.split(mini, cfg.critic_optim.micro_batch_size)
        history.append(state.trainer.step(micro, loss_fn, units))
    return {k: sum(h[k] for h in history) / len(history) for k in history[0]}


def critic_train(ctx: Any, advantage: B.Batch) -> None:
    """``critic``: fit the values to the GAE returns."""
    state: CriticState = ctx.state
    cfg: RLConfig = state.settings
    t0 = time.perf_counter()
    stats = critic_update(cfg, state, advantage, cfg.seed * 7907 + ctx.step)
    ctx.log(**{"loss/value": stats["loss"], "time/critic_train": time.perf_counter() - t0})


def vllm_weight_sync(ctx: Any, train: WeightsMessage) -> None:
    """``weight_sync`` for a vLLM rollout: load the trained weights into the engine in place."""
    state: RolloutState = ctx.state
    state.generator.update_weights(train.weights.items())
