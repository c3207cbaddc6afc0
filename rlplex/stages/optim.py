"""Optimizer backends for the train stages: plain torch AdamW, or DeepSpeed ZeRO-1/2.

A train stage splits its batch into micro-batches, accumulates gradients and
steps once. :class:`TorchTrainer` and :class:`DeepSpeedTrainer` do that the
same way, so a pipeline switches backend by config. Gradient accumulation
weights each micro-batch by its share of the loss's denominator (tokens for a
token mean, sequences for a sequence mean), so the accumulated gradient is
exactly the full batch's.

Data parallelism: a role with several workers gives each a shard of the batch;
:class:`TorchTrainer` all-reduces the accumulated gradients over the role's
process group (:func:`all_reduce_grads`) before clipping and stepping, so every
worker takes the same step as one worker on the whole batch would.

DeepSpeed runs on CPU too: with no CUDA device, :func:`init_deepspeed` selects
DeepSpeed's CPU accelerator (``DS_ACCELERATOR=cpu``) and a one-process gloo
group, the setup DeepSpeed's own CPU tests use. Its ZeRO-1/2 engine offers
``offload_states`` / ``reload_states``, which the DeepSpeed offload backend
drives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from rlplex.stages.batch import Batch
from rlplex.stages.generation import BackendUnavailable

if TYPE_CHECKING:
    import torch

LossFn = Callable[["torch.nn.Module", Batch], tuple["torch.Tensor", dict[str, float]]]
"""``(model, micro_batch) -> (loss averaged over the micro-batch, stats)``."""
UnitsFn = Callable[[Batch], float]
"""The micro-batch's share of the loss denominator (token count, sequence count)."""


class OptimConfig(BaseModel):
    """How a train stage updates its model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["torch", "deepspeed"] = "torch"
    """``torch``: torch.optim.AdamW; ``deepspeed``: a DeepSpeed ZeRO engine around AdamW."""
    lr: float = Field(1e-3, gt=0)
    """Learning rate."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    grad_clip: float | None = Field(1.0, gt=0)
    """Clip the global gradient norm to this (None: no clipping)."""
    micro_batch_size: int = Field(32, ge=1)
    """Sequences per forward/backward; gradients accumulate over the micro-batches."""
    zero_stage: Literal[0, 1, 2] = 1
    """DeepSpeed only: ZeRO stage (1 partitions optimizer states, 2 gradients too)."""


class Trainer(Protocol):
    """Accumulates gradients over micro-batches and steps the optimizer."""

    model: torch.nn.Module

    def step(
        self, micro_batches: Sequence[Batch], loss_fn: LossFn, units: UnitsFn
    ) -> dict[str, float]:
        """One optimizer step over ``micro_batches``; returns mean loss, grad norm and stats."""
        ...

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """The weights to send to the inference role."""
        ...


def _mean_stats(all_stats: list[dict[str, float]], weights: list[float]) -> dict[str, float]:
    keys = {k for s in all_stats for k in s}
    return {
        k: sum(s.get(k, 0.0) * w for s, w in zip(all_stats, weights, strict=True)) for k in keys
    }


def _accumulate(
    model: Any,
    micro_batches: Sequence[Batch],
    loss_fn: LossFn,
    units: UnitsFn,
    backward: Callable[[torch.Tensor, float], None],
) -> tuple[dict[str, float], float]:
    """Forward and ``backward(loss, weight)`` each micro-batch, weighted by its share of units.

    Returns the weighted mean stats and loss, and the total units (the
    denominator the accumulated gradient is a mean over).
    """
    total = sum(units(mb) for mb in micro_batches) or 1.0
    weights = [units(mb) / total for mb in micro_batches]
    losses, stats = [], []
    for mb, weight in zip(micro_batches, weights, strict=True):
        loss, s = loss_fn(model, mb)
        backward(loss, weight)
        losses.append(float(loss.detach()))
        stats.append(s)
    out = _mean_stats(stats, weights)
    out["loss"] = sum(v * w for v, w in zip(losses, weights, strict=True))
    return out, total


def all_reduce_grads(model: torch.nn.Module, group: Any, units: float) -> None:
    """Make every data-parallel worker's gradient the mean over the whole batch.

    Each worker holds the mean gradient over its own ``units`` (tokens or
    sequences); scaling by them before the sum and dividing by the summed units
    after gives exactly the full batch's mean, even for uneven shards.
    """
    import torch
    import torch.distributed as dist

    params = [p for p in model.parameters() if p.requires_grad]
    # One flat buffer: one collective per step instead of one per parameter.
    flat = torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float()
            for p in params
        ]
        + [torch.tensor([1.0], device=params[0].device)]
    )
    flat[:-1] *= units
    flat[-1] = units
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.SUM
    group.allreduce([flat], opts).wait()
    flat[:-1] /= flat[-1]
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset : offset + n].view_as(p).to(p.dtype)
        offset += n


class TorchTrainer:
    """AdamW on a plain module; with a process group, data-parallel over its workers."""

    def __init__(
        self, model: torch.nn.Module, config: OptimConfig, group: Any | None = None
    ) -> None:
        import torch

        self.model = model
        self.config = config
        self.group = group
        """The role's data-parallel process group: gradients are all-reduced over it."""
        self.optimizer = torch.optim.AdamW(
            model.parameters(),
            lr=config.lr,
            betas=config.betas,
            weight_decay=config.weight_decay,
        )

    def step(
        self, micro_batches: Sequence[Batch], loss_fn: LossFn, units: UnitsFn
    ) -> dict[str, float]:
        import torch

        self.model.train()
        out, total = _accumulate(
            self.model, micro_batches, loss_fn, units, lambda loss, w: (loss * w).backward()
        )
        if self.group is not None and self.group.size() > 1:
            all_reduce_grads(self.model, self.group, total)
        clip = self.config.grad_clip if self.config.grad_clip is not None else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        out["grad_norm"] = float(grad_norm)
        return out

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, p in self.model.named_parameters():
            yield name, p.detach()


def init_deepspeed(device_type: str | None = None) -> Any:
    """Import DeepSpeed, on CPU when there is no CUDA device, with a process group ready.

    ``device_type``: where the model lives (``cpu`` or ``cuda``; default: CUDA
    if available). A CPU model gets DeepSpeed's CPU accelerator even on a
    machine with CUDA (DeepSpeed would otherwise pick CUDA for it).

    Raises:
        BackendUnavailable: DeepSpeed is not installed (``pip install rlplex[deepspeed]``).
    """
    import torch

    on_cpu = device_type == "cpu" or (device_type is None and not torch.cuda.is_available())
    if on_cpu:
        # Must be set before deepspeed is imported: it picks its accelerator at import.
        os.environ["DS_ACCELERATOR"] = "cpu"
    try:
        import deepspeed
    except ImportError as exc:
        raise BackendUnavailable(
            f"the deepspeed optimizer backend needs DeepSpeed (pip install 'rlplex[deepspeed]'):"
            f" {exc}"
        ) from None
    if on_cpu:
        from deepspeed.accelerator import get_accelerator, set_accelerator

        if get_accelerator().device_name() != "cpu":
            # Imported earlier in this process with CUDA: switch to the CPU accelerator.
            from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator

            set_accelerator(CPU_Accelerator())
    import torch.distributed as dist

    if dist.is_initialized():
        # DeepSpeed's engine reads these even when the group exists already.
        os.environ.setdefault("RANK", str(dist.get_rank()))
        os.environ.setdefault("LOCAL_RANK", str(dist.get_rank()))
        os.environ.setdefault("WORLD_SIZE", str(dist.get_world_size()))
    else:
        # A role worker that was not started by a launcher: a one-process group.
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        backend = "gloo" if on_cpu else "nccl"
        if backend == "gloo" and os.environ["WORLD_SIZE"] == "1":
            # One process never reduces across processes, and DeepSpeed's CPU backend would
            # otherwise JIT-compile its shared-memory all-reduce op (a minute) at first use.
            import importlib

            # (import_module: ``deepspeed.comm.torch`` as an attribute is the torch package.)
            importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
        deepspeed.init_distributed(dist_backend=backend, verbose=False)
    return deepspeed


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DeepSpeedTrainer:
    """A DeepSpeed ZeRO-1/2 engine around AdamW; ``engine`` is the offloadable object."""

    def __init__(self, model: torch.nn.Module, config: OptimConfig, num_micro_batches: int) -> None:
        import torch

        deepspeed = init_deepspeed(next(model.parameters()).device.type)
        self.config = config
        self.num_micro_batches = num_micro_batches
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay
        )
        world = torch.distributed.get_world_size()
        ds_config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": config.micro_batch_size,
            "gradient_accumulation_steps": num_micro_batches,
            "train_batch_size": config.micro_batch_size * num_micro_batches * world,
            "zero_optimization": {"stage": config.zero_stage},
            "zero_allow_untested_optimizer": True,
            "gradient_clipping": config.grad_clip or 0.0,
            "steps_per_print": 10**9,
            "wall_clock_breakdown": False,
        }
        if model.dtype == torch.bfloat16:
            ds_config["bf16"] = {"enabled": True}
        self.engine, _, _, _ = deepspeed.initialize(
            model=model, optimizer=optimizer, config=ds_config
        )
        self.model = self.engine

    def step(
        self, micro_batches: Sequence[Batch], loss_fn: LossFn, units: UnitsFn
    ) -> dict[str, float]:
        if len(micro_batches) != self.num_micro_batches:
            raise ValueError(
                f"DeepSpeed was set up for {self.num_micro_batches} micro-batches per step,"
                f" got {len(micro_batches)}; keep the train batch a fixed multiple of"
                " micro_batch_size"
            )
        self.engine.train()

        def backward(loss: torch.Tensor, weight: float) -> None:
            # The engine divides by gradient_accumulation_steps; undo that to weigh exactly.
            self.engine.backward(loss * weight * self.num_micro_batches)
            self.engine.step()

        out, _ = _accumulate(self.engine, micro_batches, loss_fn, units, backward)
        norm = self.engine.get_global_grad_norm()
        out["grad_norm"] = float(norm) if norm is not None else 0.0
        return out

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, p in self.engine.module.named_parameters():
            yield name, p.detach()


def make_trainer(
    model: torch.nn.Module,
    config: OptimConfig,
    num_micro_batches: int = 1,
    group: Any | None = None,
) -> TorchTrainer | DeepSpeedTrainer:
    """The configured backend around ``model``, data-parallel over ``group`` if given.

    Raises:
        ValueError: DeepSpeed with a group of several workers (its engine would
            need the role's workers in one default process group, which the
            executor does not set up).
    """
    if config.backend == "deepspeed":
        if group is not None and group.size() > 1:
            raise ValueError(
                f"the deepspeed backend trains on one worker per role; got {group.size()}"
                " data-parallel workers (use backend 'torch', which all-reduces gradients)"
            )
        return DeepSpeedTrainer(model, config, num_micro_batches)
    return TorchTrainer(model, config, group)
