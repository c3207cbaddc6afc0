"""Sampling responses behind one interface, with Hugging Face and vLLM backends.

The ``generate`` stage needs n samples per prompt with temperature and top-p,
and, between steps, the inference role must take the trainer's new weights
and give its memory back while others run. :class:`Generator` is that
contract; :class:`HFGenerator` runs ``model.generate`` (CPU or GPU) and
:class:`VLLMGenerator` drives a vLLM ``LLM`` built with
``enable_sleep_mode=True``: ``sleep(level)`` / ``wake_up(tags)`` free and
restore its memory and :meth:`VLLMGenerator.update_weights` loads new
weights in place through ``LLM.collective_rpc`` (each worker's
``model_runner.model.load_weights``, the path vLLM's RLHF examples use).
vLLM is optional: :func:`make_generator` raises :class:`BackendUnavailable`
with the install hint when it is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from rlplex.stages.batch import Batch, left_pad, response_mask

if TYPE_CHECKING:
    import torch


class BackendUnavailable(RuntimeError):
    """An optional backend (vLLM, DeepSpeed) is not installed or cannot run here."""


class SamplingConfig(BaseModel):
    """How responses are sampled."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(1.0, gt=0)
    """Softmax temperature; log-probs of the responses are taken at the same temperature."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    max_new_tokens: int = Field(4, ge=1)
    """Longest response."""
    n: int = Field(8, ge=1)
    """Samples per prompt (the GRPO group size)."""


class Generator(Protocol):
    """The inference role's engine."""

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig) -> Batch:
        """``n`` responses per prompt, as a batch (see :mod:`rlplex.stages.batch`), prompt-major."""
        ...

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load the trainer's weights in place."""
        ...

    def sleep(self, level: int = 1) -> None:
        """Free device memory: level 1 keeps a host copy of the weights, level 2 drops them."""
        ...

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Restore device memory (``weights``, ``kv_cache``, or both when ``tags`` is None)."""
        ...


def _batch_from_responses(
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    n: int,
    pad_id: int,
    eos_id: int,
) -> Batch:
    import torch

    repeated = [p for p in prompts for _ in range(n)]
    prompt_ids, prompt_mask = left_pad(repeated, pad_id)
    width = max(1, max(len(r) for r in responses))
    response_ids = torch.full((len(responses), width), pad_id, dtype=torch.long)
    for i, r in enumerate(responses):
        if r:
            response_ids[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
    mask = response_mask(response_ids, eos_id)
    # A row shorter than the width (no eos reached) must not count the padding.
    lengths = torch.as_tensor([len(r) for r in responses])
    mask = mask * (torch.arange(width)[None, :] < lengths[:, None]).long()
    group = torch.arange(len(prompts)).repeat_interleave(n)
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "response_ids": response_ids,
        "response_mask": mask,
        "group": group,
    }


class HFGenerator:
    """Sampling with ``transformers``' ``generate`` on the model's device."""

    def __init__(self, model: torch.nn.Module, pad_token_id: int, eos_token_id: int) -> None:
        self.model = model
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig) -> Batch:
        import torch
        from transformers import GenerationConfig

        device = next(self.model.parameters()).device
        prompt_ids, prompt_mask = left_pad(prompts, self.pad_token_id)
        config = GenerationConfig(
            do_sample=True,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=0,
            max_new_tokens=sampling.max_new_tokens,
            num_return_sequences=sampling.n,
            pad_token_id=self.pad_token_id,
            eos_token_id=self.eos_token_id,
        )
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            out = self.model.generate(
                input_ids=prompt_ids.to(device),
                attention_mask=prompt_mask.to(device),
                generation_config=config,
            )
        self.model.train(was_training)
        generated = out[:, prompt_ids.shape[1] :].cpu()
        responses = [row.tolist() for row in generated]
        return _batch_from_responses(
            prompts, responses, sampling.n, self.pad_token_id, self.eos_token_id
        )

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        import torch

        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in named_tensors:
                params[name].copy_(tensor.to(params[name].device))

    def sleep(self, level: int = 1) -> None:
        # The HF backend's memory is managed by the role's offload backend (TorchOffload).
        return None

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        return None


def _load_weights_on_worker(worker: Any, weights: list[tuple[str, Any]]) -> None:
    """Runs inside each vLLM worker (through ``collective_rpc``): load weights in place."""
    worker.model_runner.model.load_weights(weights=weights)


def _load_shared_on_worker(worker: Any, shared: Any) -> int:
    """Runs inside each vLLM worker: map a shared weight bucket (CUDA IPC) and load it by name.

    Only the handle crosses into vLLM's worker processes; the bytes are read
    where they lie, on the device.
    """
    from rlplex.stages.weight_sync import load_shared

    return load_shared(shared, lambda items: worker.model_runner.model.load_weights(weights=items))


class VLLMGenerator:
    """Sampling with a vLLM engine (``vllm.LLM`` or anything with its interface).

    The engine must offer ``generate(prompts, sampling_params)`` returning
    request outputs with ``.outputs[i].token_ids``, ``sleep(level)``,
    ``wake_up(tags)`` and ``collective_rpc(method, args=...)``.
    ``sampling_params_cls`` builds the per-call sampling parameters (vLLM's
    ``SamplingParams`` by default).
    """

    def __init__(
        self,
        engine: Any,
        pad_token_id: int,
        eos_token_id: int,
        sampling_params_cls: Any | None = None,
    ) -> None:
        self.engine = engine
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id
        if sampling_params_cls is None:
            from vllm import SamplingParams

            sampling_params_cls = SamplingParams
        self.sampling_params_cls = sampling_params_cls
        self.asleep = False

    def generate(self, prompts: Sequence[Sequence[int]], sampling: SamplingConfig) -> Batch:
        params = self.sampling_params_cls(
            n=sampling.n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens,
        )
        requests = [{"prompt_token_ids": list(p)} for p in prompts]
        outputs = self.engine.generate(requests, params, use_tqdm=False)
        responses = [list(o.token_ids) for out in outputs for o in out.outputs]
        return _batch_from_responses(
            prompts, responses, sampling.n, self.pad_token_id, self.eos_token_id
        )

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        weights = [(name, t.detach()) for name, t in named_tensors]
        self.engine.collective_rpc(_load_weights_on_worker, args=(weights,))

    def load_shared(self, shared: Any) -> int:
        """Load a shared weight bucket (:mod:`rlplex.stages.weight_sync`) in every vLLM worker."""
        self.engine.collective_rpc(_load_shared_on_worker, args=(shared,))
        return int(shared.bucket.payload_bytes)

    def sleep(self, level: int = 1) -> None:
        self.engine.sleep(level=level)
        self.asleep = True

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        self.engine.wake_up(tags=list(tags) if tags is not None else None)
        self.asleep = False


class GeneratorConfig(BaseModel):
    """Which engine the inference role runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["hf", "vllm"] = "hf"
    """``hf``: transformers ``generate`` (CPU or GPU); ``vllm``: a vLLM engine (GPU)."""
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1)
    """vLLM: fraction of the GPU its engine may take (weights plus KV cache)."""


def make_vllm_engine(model_path: str, config: GeneratorConfig) -> Any:
    """A vLLM ``LLM`` with sleep mode on, for a local checkpoint.

    Raises:
        BackendUnavailable: vLLM is not installed (``pip install rlplex[vllm]``).
    """
    try:
        from vllm import LLM
    except ImportError as exc:
        raise BackendUnavailable(
            f"the vllm generation backend needs vLLM (pip install 'rlplex[vllm]'): {exc}"
        ) from None
    return LLM(
        model=model_path,
        enable_sleep_mode=True,
        gpu_memory_utilization=config.gpu_memory_utilization,
    )
