"""What each role's workers hold: the model, its optimizer, its engine, its offloader.

A pipeline's setup functions build one of these per worker (on the worker,
once) and the stage callables read it from ``ctx.state``. Each holds an
``offloader`` (an :class:`~rlplex.stages.offload.Offloadable`) so the executor
can move its states off and onto the GPUs as the plan says, and the roles a
weight sync connects offer ``named_weights()``: the trainer's are sent, the
inference engine's are overwritten in place.

- :class:`PolicyState` (``actor_train``): the policy and its optimizer
  (torch AdamW with :class:`~rlplex.stages.offload_torch.TorchOffload`, or a
  DeepSpeed engine with :class:`~rlplex.stages.offload_deepspeed.DeepSpeedOffload`);
- :class:`RolloutState` (``actor_infer``): a :class:`~rlplex.stages.generation.Generator`;
- :class:`ReferenceState` (``reference``): the frozen initial policy;
- :class:`CriticState` (``critic``): the value model and its optimizer;
- :class:`RewardState` (a CPU role): the rule reward function and the tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rlplex.stages.generation import Generator
from rlplex.stages.models import ModelConfig, build_causal_lm, build_critic
from rlplex.stages.optim import DeepSpeedTrainer, OptimConfig, TorchTrainer, make_trainer


def pick_device(devices: Sequence[int] = (), want: str = "auto") -> torch.device:
    """``cuda`` when the worker was given GPUs and CUDA works (or when asked), else ``cpu``."""
    if want != "auto":
        return torch.device(want)
    if devices and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _param_bytes(module: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def _torch_offload(modules: Sequence[torch.nn.Module], optimizers: Sequence[Any] = ()) -> Any:
    from rlplex.stages.offload import TorchOffload  # type: ignore[attr-defined]

    return TorchOffload(list(modules), list(optimizers))


def _named(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.data for name, p in module.named_parameters()}


def match_initial_residency(
    offloader: Any, planned_states: Sequence[str], initial: Sequence[str]
) -> None:
    """Offload the planned states that the plan's first step expects off the device."""
    off = [s for s in planned_states if s not in set(initial)]
    if off and offloader is not None:
        offloader.offload(off)


@dataclass
class PolicyState:
    """``actor_train``: the trained policy."""

    model: torch.nn.Module
    """The policy network (for DeepSpeed: the engine's module)."""
    trainer: TorchTrainer | DeepSpeedTrainer
    """Accumulates gradients and steps the optimizer."""
    offloader: Any
    """Moves weights/optimizer/grads off and on the GPUs."""
    settings: Any = None
    """The pipeline's hyperparameters, for the stage callables."""

    def named_weights(self) -> dict[str, torch.Tensor]:
        return {name: t for name, t in self.trainer.named_weights()}


def _trainable(
    model: torch.nn.Module,
    optim_config: OptimConfig,
    num_micro_batches: int,
    device: torch.device,
    group: Any = None,
) -> tuple[TorchTrainer | DeepSpeedTrainer, Any]:
    """``model``'s optimizer backend and the offloader that moves all of its states."""
    if optim_config.backend == "deepspeed":
        from rlplex.stages.offload import DeepSpeedOffload  # type: ignore[attr-defined]

        trainer = make_trainer(model, optim_config, num_micro_batches, group)
        weights = _param_bytes(model)
        # fp32 AdamW: master weights are the params themselves, plus two moments.
        sizes = {"weights": weights, "optimizer": 2 * weights, "grads": weights}
        return trainer, DeepSpeedOffload(trainer.engine, sizes, pin_memory=device.type == "cuda")
    # The offloader first: it flattens the parameters, which the optimizer must then hold.
    offloader = _torch_offload([model])
    trainer = make_trainer(model, optim_config, num_micro_batches, group)
    offloader.optimizers.append(trainer.optimizer)
    return trainer, offloader


def make_policy(
    model_config: ModelConfig,
    optim_config: OptimConfig,
    num_micro_batches: int,
    device: torch.device,
    settings: Any = None,
    group: Any = None,
) -> PolicyState:
    """The policy on ``device`` with the configured optimizer backend and its offloader.

    ``group``: the role's data-parallel process group (gradients are all-reduced over it).
    """
    model = build_causal_lm(model_config).to(device)
    trainer, offloader = _trainable(model, optim_config, num_micro_batches, device, group)
    return PolicyState(model, trainer, offloader, settings)


@dataclass
class RolloutState:
    """``actor_infer``: the inference engine."""

    generator: Generator
    """Samples responses."""
    model: torch.nn.Module | None
    """The HF model behind the generator (None for vLLM)."""
    offloader: Any
    """Frees the engine's memory while other roles run."""
    settings: Any = None
    """The pipeline's hyperparameters."""

    def named_weights(self) -> dict[str, torch.Tensor]:
        if self.model is None:
            raise TypeError("a vLLM rollout takes weights through its weight_sync stage")
        return _named(self.model)

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Take new weights through the engine's own API (vLLM ``load_weights``, HF in place)."""
        self.generator.update_weights(named_tensors)

    def load_shared(self, shared: Any) -> int:
        """Take a shared weight bucket: vLLM maps it in its own workers; HF copies in place."""
        engine_load = getattr(self.generator, "load_shared", None)
        if callable(engine_load):
            return int(engine_load(shared))
        from rlplex.stages.weight_sync import load_shared

        return load_shared(shared, self.load_weights)


def make_hf_rollout(
    model_config: ModelConfig, tokenizer: Any, device: torch.device, settings: Any = None
) -> RolloutState:
    from rlplex.stages.generation import HFGenerator

    model = build_causal_lm(model_config).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    generator = HFGenerator(model, tokenizer.pad_token_id, tokenizer.eos_token_id)
    return RolloutState(generator, model, _torch_offload([model]), settings)


@dataclass
class ReferenceState:
    """``reference``: the frozen initial policy."""

    model: torch.nn.Module
    """The reference network."""
    offloader: Any
    """Moves its weights off and on."""
    settings: Any = None
    """The pipeline's hyperparameters."""


def make_reference(
    model_config: ModelConfig, device: torch.device, settings: Any = None
) -> ReferenceState:
    model = build_causal_lm(model_config).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return ReferenceState(model, _torch_offload([model]), settings)


@dataclass
class CriticState:
    """``critic``: the value model."""

    model: torch.nn.Module
    """Backbone plus a one-output token head."""
    trainer: TorchTrainer | DeepSpeedTrainer
    """Its optimizer backend."""
    offloader: Any
    """Moves weights/optimizer/grads off and on."""
    settings: Any = None
    """The pipeline's hyperparameters."""


def make_critic(
    model_config: ModelConfig,
    optim_config: OptimConfig,
    num_micro_batches: int,
    device: torch.device,
    settings: Any = None,
    group: Any = None,
) -> CriticState:
    """The value model on ``device``, trained like the policy (see :func:`make_policy`)."""
    model = build_critic(model_config).to(device)
    trainer, offloader = _trainable(model, optim_config, num_micro_batches, device, group)
    return CriticState(model, trainer, offloader, settings)


@dataclass
class RewardState:
    """A CPU role scoring responses with a rule."""

    reward_fn: Any
    """``fn(prompt, response) -> float``."""
    tokenizer: Any
    """Decodes the token ids."""
    settings: Any = None
    """The pipeline's hyperparameters."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else a custom reward stage wants to keep."""
