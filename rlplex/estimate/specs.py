"""Model and GPU specs: the architecture and hardware numbers the estimates start from.

A model is named by a preset (``qwen2.5-7b``), a local Hugging Face folder or
its ``config.json``, or a hub-style path that is not on this machine
(``Qwen/Qwen2.5-7B-Instruct``), which is matched to a preset with a warning.
A GPU is named by a preset (``h100``). Presets are data shipped with the
package (``rlplex/estimate/data/*.yaml``, each number with its source).
Every failure is a :class:`~rlplex.errors.ConfigError` naming the file, the
field and the value.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rlplex.errors import ConfigError, InvalidValueError


class ModelSpec(BaseModel):
    """A decoder-only transformer's architecture numbers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Preset name, or the path it was read from."""
    source: str = ""
    """Where the numbers come from (a URL or a file)."""
    num_layers: int = Field(ge=1)
    """Transformer blocks (``num_hidden_layers``)."""
    hidden_size: int = Field(ge=1)
    """Width of the residual stream."""
    intermediate_size: int = Field(0, ge=0)
    """Width of a dense layer's SwiGLU MLP."""
    num_heads: int = Field(ge=1)
    """Query heads."""
    num_kv_heads: int = Field(ge=1)
    """Key/value heads (grouped-query attention)."""
    head_dim: int = Field(0, ge=0)
    """Width of one head; 0 means ``hidden_size // num_heads``."""
    vocab_size: int = Field(ge=1)
    """Vocabulary size (rows of the embedding and of the LM head)."""
    tied_embeddings: bool = False
    """The LM head shares the embedding matrix."""
    qkv_bias: bool = False
    """q/k/v projections have biases (Qwen2)."""
    qk_norm: bool = False
    """RMSNorm on each query and key head (Qwen3)."""
    num_experts: int = Field(0, ge=0)
    """Routed experts per MoE layer; 0 for a dense model."""
    experts_per_token: int = Field(0, ge=0)
    """Routed experts each token uses."""
    moe_intermediate_size: int = Field(0, ge=0)
    """Width of one expert's SwiGLU MLP."""
    shared_experts: int = Field(0, ge=0)
    """Always-active experts of width ``moe_intermediate_size`` (DeepSeek)."""
    shared_expert_intermediate_size: int = Field(0, ge=0)
    """Width of one always-active expert when it differs (Qwen2-MoE); 0: as above."""
    first_dense_layers: int = Field(0, ge=0)
    """Leading layers with a dense MLP instead of experts (DeepSeek ``first_k_dense_replace``)."""
    router_bias: bool = False
    """The router has a per-expert score bias (DeepSeek-V3)."""
    expert_groups: int = Field(0, ge=0)
    """Groups of a grouped top-k router (DeepSeek ``n_group``: the best groups first, then
    experts within them); 0 or 1: one top-k over all experts."""
    q_lora_rank: int = Field(0, ge=0)
    """MLA: rank of the query compression (0: a full query projection)."""
    kv_lora_rank: int = Field(0, ge=0)
    """MLA: rank of the key/value compression; > 0 turns on multi-head latent attention."""
    qk_nope_head_dim: int = Field(0, ge=0)
    """MLA: per-head query/key width without rotary embedding."""
    qk_rope_head_dim: int = Field(0, ge=0)
    """MLA: per-head query/key width with rotary embedding."""
    v_head_dim: int = Field(0, ge=0)
    """MLA: per-head value width."""
    attention_output_gate: bool = False
    """Gated attention: the query projection also produces a sigmoid gate on the attention
    output, twice its width (Qwen3-Next, Qwen3.5: ``attn_output_gate``)."""
    linear_attention_layers: int = Field(0, ge=0)
    """Layers whose token mixer is linear attention (Gated DeltaNet) instead of softmax
    attention: a fixed-size recurrent state per sequence instead of a growing KV cache, work
    linear in the sequence instead of quadratic (Qwen3-Next, Qwen3.5: the
    ``linear_attention`` entries of ``layer_types``); 0 for a plain transformer."""
    linear_num_key_heads: int = Field(0, ge=0)
    """Linear attention: query/key heads (``linear_num_key_heads``)."""
    linear_num_value_heads: int = Field(0, ge=0)
    """Linear attention: value heads, one recurrent state each (``linear_num_value_heads``)."""
    linear_key_head_dim: int = Field(0, ge=0)
    """Linear attention: width of one query/key head (``linear_key_head_dim``)."""
    linear_value_head_dim: int = Field(0, ge=0)
    """Linear attention: width of one value head (``linear_value_head_dim``)."""
    linear_conv_kernel_dim: int = Field(0, ge=0)
    """Linear attention: taps of the short causal convolution over q, k and v
    (``linear_conv_kernel_dim``)."""
    linear_in_projections: Literal[2, 4] = 2
    """Linear attention: input projections of a mixer, 2 (Qwen3-Next: ``in_proj_qkvz``,
    ``in_proj_ba``) or 4 (Qwen3.5: ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``,
    ``in_proj_a``); the same weights, more tensors and LoRA adapters."""
    sliding_window: int = Field(0, ge=0)
    """Keys a windowed attention layer attends to: each token the last ``sliding_window``
    tokens (Mistral v0.1, Gemma 3, gpt-oss: ``sliding_window``); 0 for none."""
    sliding_window_layers: int = Field(0, ge=0)
    """Softmax-attention layers that are windowed (the ``sliding_attention`` entries of
    ``layer_types``; gpt-oss alternates, Gemma 3 has five per global layer): their attention
    work and KV cache stop growing at ``sliding_window`` tokens."""
    moe_latent_size: int = Field(0, ge=0)
    """Latent MoE (Nemotron-3 Super): each MoE layer projects the hidden state down to this
    width before its routed experts and back after them, so the experts, and the tokens the
    expert-parallel all-to-all moves, are this wide; 0: the experts take the hidden state."""
    mixer_only_layers: int = Field(0, ge=0)
    """Layers that are a token mixer alone, with no MLP after it (Nemotron-H's ``M`` and
    ``*`` blocks: one norm and one mixer); 0 for a transformer, whose every layer is a mixer
    and an MLP."""
    mlp_only_layers: int = Field(0, ge=0)
    """Layers that are an MLP or an MoE alone, with no mixer before it (Nemotron-H's ``-``
    and ``E`` blocks); a count, not Qwen-MoE's ``mlp_only_layers`` config key (a list of the
    layers whose MLP is dense)."""
    gated_mlp: bool = True
    """The MLPs and experts are gated (SwiGLU: gate, up and down matrices); false for two
    matrices around a plain activation (Nemotron-H's squared ReLU: up and down)."""
    shared_expert_gate: bool = True
    """A shared expert of its own width (``shared_expert_intermediate_size``) is scaled by a
    sigmoid gate of its own (Qwen2-MoE, Qwen3-Next); Nemotron-H's is not."""
    linear_mixer: Literal["gated_deltanet", "mamba2"] = "gated_deltanet"
    """What the linear-attention layers are: Gated DeltaNet (Qwen3-Next, Qwen3.5) or Mamba-2
    (Nemotron-H: ``mamba_num_heads`` heads of ``mamba_head_dim`` are the value heads,
    ``n_groups`` groups of ``ssm_state_size`` the key heads, ``conv_kernel`` the taps)."""
    linear_state_fp32: bool = False
    """The linear-attention layers' recurrent state is cached in fp32 whatever the model's
    precision (Nemotron-H: ``mamba_ssm_cache_dtype``, float32 where the config names none,
    which vLLM's ``NemotronHForCausalLMConfig`` follows)."""
    fused_expert_tensors: bool = False
    """The checkpoint stores each MoE layer's experts as a few stacked tensors (gpt-oss:
    ``gate_up_proj``, ``down_proj`` and their biases) rather than three per expert: what a
    tensor-by-tensor weight sync counts."""
    aliases: tuple[str, ...] = ()
    """Other names a model path is matched against."""

    @model_validator(mode="after")
    def _linear_attention_is_whole(self) -> ModelSpec:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_heads}) is not a multiple of"
                f" num_key_value_heads ({self.num_kv_heads}): grouped-query attention shares"
                " each key/value head among a whole number of query heads"
            )
        if self.mixer_only_layers + self.mlp_only_layers > self.num_layers:
            raise ValueError(
                f"mixer_only_layers ({self.mixer_only_layers}) and mlp_only_layers"
                f" ({self.mlp_only_layers}) exceed num_layers ({self.num_layers})"
            )
        if self.linear_attention_layers > self.mixer_layers:
            raise ValueError(
                f"linear_attention_layers ({self.linear_attention_layers}) exceeds the layers"
                f" with a mixer ({self.mixer_layers})"
            )
        if self.first_dense_layers > self.mlp_layers:
            raise ValueError(
                f"first_dense_layers ({self.first_dense_layers}) exceeds the layers with an MLP"
                f" ({self.mlp_layers})"
            )
        widths = (self.linear_num_key_heads, self.linear_num_value_heads,
                  self.linear_key_head_dim, self.linear_value_head_dim)  # fmt: skip
        if self.linear_attention_layers and not all(widths):
            raise ValueError(
                "a model with linear_attention_layers needs linear_num_key_heads,"
                " linear_num_value_heads, linear_key_head_dim and linear_value_head_dim"
            )
        if self.sliding_window_layers > self.attention_layers:
            raise ValueError(
                f"sliding_window_layers ({self.sliding_window_layers}) exceeds the"
                f" softmax-attention layers ({self.attention_layers})"
            )
        if self.sliding_window_layers and not self.sliding_window:
            raise ValueError("a model with sliding_window_layers needs sliding_window")
        return self

    @property
    def head_width(self) -> int:
        return self.head_dim or self.hidden_size // self.num_heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def mixer_layers(self) -> int:
        """Layers with a token mixer (softmax or linear attention)."""
        return self.num_layers - self.mlp_only_layers

    @property
    def mlp_layers(self) -> int:
        """Layers with an MLP or an MoE."""
        return self.num_layers - self.mixer_only_layers

    @property
    def sublayers(self) -> int:
        """Mixers and MLPs together, each behind a norm and ending in a residual add (and,
        under tensor parallel, an all-reduce): twice the layers of a transformer."""
        return self.mixer_layers + self.mlp_layers

    @property
    def layer_units(self) -> float:
        """Layers' worth of per-layer kernels: a transformer layer counts 1, a block that is a
        mixer or an MLP alone 1/2 (``sublayers / 2``)."""
        return self.sublayers / 2

    @property
    def moe_layers(self) -> int:
        return self.mlp_layers - self.first_dense_layers if self.is_moe else 0

    @property
    def dense_mlp_layers(self) -> int:
        """Layers with a dense MLP (all of them in a dense model)."""
        return self.mlp_layers - self.moe_layers

    @property
    def expert_input_size(self) -> int:
        """Width a routed expert reads and writes: the latent width, else the hidden size."""
        return self.moe_latent_size or self.hidden_size

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one MLP or expert: 3 gated (gate, up, down), else 2."""
        return 3 if self.gated_mlp else 2

    @property
    def attention_layers(self) -> int:
        """Layers with softmax attention (the ones that keep a KV cache)."""
        return self.mixer_layers - self.linear_attention_layers

    @property
    def full_attention_layers(self) -> int:
        """Softmax-attention layers that attend to the whole context (not windowed)."""
        return self.attention_layers - self.sliding_window_layers


class GpuSpec(BaseModel):
    """One GPU's hardware figures (peaks, not achieved rates)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    """Preset key (``h100``)."""
    name: str
    """Full name."""
    peak_tflops: float = Field(gt=0)
    """Dense BF16 tensor-core TFLOP/s."""
    memory_gb: float = Field(gt=0)
    """Device memory, GB."""
    memory_gb_per_s: float = Field(gt=0)
    """Device memory bandwidth, GB/s."""
    host_gb_per_s: float = Field(gt=0)
    """Host<->device link per direction, GB/s."""
    intra_node_gb_per_s: float = Field(gt=0)
    """GPU<->GPU inside a node per direction, GB/s."""
    inter_node_gb_per_s: float = Field(gt=0)
    """GPU<->GPU across nodes per direction, GB/s."""
    node_host_memory_gb: float = Field(2048.0, gt=0)
    """Host memory of the usual node of this GPU (``node_gpus`` of them), GB."""
    node_gpus: int = Field(8, ge=1)
    """GPUs of that usual node."""
    nvlink_gpus: int | None = Field(None, ge=1)
    """GPUs one NVLink fabric joins where it spans several nodes (GB200 NVL72: 72)."""
    fp8: bool = True
    """FP8 tensor cores at twice the BF16 rate (Hopper, Ada, Blackwell); the A100 has none."""
    aliases: tuple[str, ...] = ()
    """Other names accepted for the preset."""
    sources: dict[str, str] = Field(default_factory=dict)
    """Where the figures come from."""


def _data(name: str) -> dict[str, Any]:
    text = resources.files("rlplex.estimate").joinpath("data", name).read_text(encoding="utf-8")
    return yaml.safe_load(text)


@functools.cache
def model_presets() -> dict[str, ModelSpec]:
    """Every shipped model preset by name."""
    return {
        key: ModelSpec.model_validate({"name": key, **body})
        for key, body in _data("models.yaml").items()
    }


@functools.cache
def gpu_presets() -> dict[str, GpuSpec]:
    """Every shipped GPU preset by key."""
    return {
        key: GpuSpec.model_validate({"key": key, **body})
        for key, body in _data("gpus.yaml").items()
    }


@functools.cache
def efficiency_defaults() -> dict[str, dict[str, Any]]:
    """The default efficiency factors with what they are fractions of and their sources."""
    return _data("efficiency.yaml")


def gpu_spec(name: str, *, field: str = "cluster.gpu", file: str | None = None) -> GpuSpec:
    """The GPU preset called ``name`` (case-insensitive, aliases accepted).

    Raises:
        ConfigError: no such preset (naming the known ones).
    """
    key = name.strip().lower()
    for spec in gpu_presets().values():
        if key == spec.key or key in spec.aliases:
            return spec
    raise InvalidValueError(
        f"unknown GPU preset (known: {', '.join(gpu_presets())})",
        field=field,
        value=name,
        file=file,
    )


# Suffixes of released checkpoints that share the base model's architecture.
_SUFFIXES = re.compile(
    r"(-(instruct|thinking|chat|base|it|hf|math|coder|awq|gptq|int4|int8|fp8|bf16|\d{4}))+$"
)


def _normalise(name: str) -> str:
    stem = name.strip().rstrip("/").split("/")[-1].lower().replace("_", "-")
    stem = re.sub(r"^meta-", "", stem)
    return _SUFFIXES.sub("", stem)


def match_preset(name: str) -> ModelSpec | None:
    """The preset a model name or hub path names, or None.

    ``Qwen/Qwen2.5-7B-Instruct`` -> ``qwen2.5-7b``; ``meta-llama/Llama-3.1-8B`` ->
    ``llama-3.1-8b``. The organisation, ``-Instruct``/``-Chat``/``-Base``-style
    suffixes and case are ignored; words after the last size, then words before the
    base's name, are dropped until a preset matches (a fine-tune or a reward model named
    after its base).
    """
    wanted = _normalise(name)
    spec = _match_trailing(wanted)
    # A model named with words before its base's name (``Skywork-Reward-V2-Qwen3-0.6B``, a
    # reward model on Qwen3-0.6B): drop leading words, but only from a name with one size
    # (``Qwen2.5-7B-...-distill-Qwen2.5-72B`` is not the 72B) and never words that say the
    # network is another one (a draft head, an embedding model, a vision model).
    if spec is not None or len(_SIZE.findall(wanted)) != 1:
        return spec
    while "-" in wanted:
        word, _, wanted = wanted.partition("-")
        if _OTHER_NETWORK.search(word) or not _SIZE.search(wanted):
            return None
        spec = _match_trailing(wanted)
        if spec is not None:
            return spec
    return None


_SIZE = re.compile(r"(?<![a-z0-9.])\d+(\.\d+)?b(-a\d+(\.\d+)?b)?(?=-|$)")
"""A parameter count in a model name: ``8b``, ``0.6b``, ``30b-a3b``."""


_OTHER_NETWORK = re.compile(
    r"eagle|medusa|draft|speculat|mtp|mamba|moe|prun|llava|vision|video|\bvl\b|omni|audio"
    r"|embed|gte|rerank|clip|siglip"
)
"""Words that make a model named after a base a different network (a speculative-decoding
head, a hybrid, an upcycled MoE, a pruned or multimodal model, an embedding model): a name
that needs them dropped matches no preset."""


def _match_trailing(wanted: str) -> ModelSpec | None:
    """The preset a normalised name is, or is once words after its last size are dropped."""
    # Words may be dropped from the end only down to the last size (``8b``, ``30b-a3b``).
    sizes = list(_SIZE.finditer(wanted))
    floor = sizes[-1].end() if sizes else len(wanted)
    droppable = not _OTHER_NETWORK.search(wanted[floor:])
    while True:
        spec = _exact(wanted)
        if spec is not None or not droppable:
            return spec
        # A fine-tune named after its base (``Qwen2.5-7B-Instruct-RLVR``): drop the last
        # word and try again, while what is left still ends in a size (``7b``, ``a3b``).
        stem, _, _ = wanted.rpartition("-")
        if len(stem) < floor:
            return None
        wanted = _SUFFIXES.sub("", stem)
        if len(wanted) < floor:
            return None


def _exact(wanted: str) -> ModelSpec | None:
    """The preset whose name or alias a normalised name is (dashes aside)."""
    for key, spec in model_presets().items():
        if wanted == key or wanted in spec.aliases:
            return spec
        if wanted.replace("-", "") == key.replace("-", ""):
            return spec
    return None


_HF_REQUIRED = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "vocab_size",
)


_HF_COUNTS = (
    "intermediate_size", "num_key_value_heads", "head_dim", "num_experts", "n_routed_experts",
    "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
    "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size",
    "first_k_dense_replace", "n_group", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "mamba_num_heads",
    "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel", "moe_latent_size",
)  # fmt: skip
"""Optional config.json keys read as counts: each, when present and not null, a non-negative
integer (else one error naming it, not a traceback)."""

_GATED_ATTENTION_TYPES = ("qwen3_next",)

_LOCAL_EXPERT_TYPES = ("mixtral", "gpt_oss", "phimoe")
"""Model types whose ``num_local_experts`` experts, of width ``intermediate_size``, make every
layer's MLP (no dense layers, no shared expert)."""
"""Model types whose attention always carries an output gate (Qwen3.5 says it in
``attn_output_gate``)."""


def _text_config(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The language model's keys of a config (a multimodal model nests them under
    ``text_config``; the vision encoder is not counted), and what the source note says."""
    text = data.get("text_config")
    if "num_hidden_layers" not in data and isinstance(text, dict):
        merged = {**text}
        if "tie_word_embeddings" in data:  # transformers ties by the top-level flag
            merged["tie_word_embeddings"] = data["tie_word_embeddings"]
        return merged, " (text_config: the language model; its vision encoder is not counted)"
    return data, ""


def _linear_attention_layers(data: dict[str, Any], file: str) -> int:
    """Layers whose mixer is linear attention: the ``linear_attention`` entries of
    ``layer_types``, else every layer but each ``full_attention_interval``-th."""
    layers = int(data["num_hidden_layers"])
    if "linear_num_value_heads" not in data:
        return 0  # other linear attentions (MiniMax's lightning) have no fields here
    types = data.get("layer_types")
    if isinstance(types, list) and types:
        return sum(1 for t in types if t == "linear_attention")
    interval = data.get("full_attention_interval")
    if interval is not None:
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ConfigError(
                "must be a positive integer", field="full_attention_interval", value=interval,
                file=file,
            )  # fmt: skip
        return layers - layers // interval
    return 0


_HYBRID_BLOCKS: dict[str, str] = {
    "M": "mamba", "*": "attention", "-": "mlp", "E": "moe",
    "mamba": "mamba", "linear_attention": "mamba", "attention": "attention",
    "full_attention": "attention", "mlp": "mlp", "moe": "moe",
}  # fmt: skip
"""Nemotron-H's block kinds by ``hybrid_override_pattern`` letter and by the names of
``layers_block_type`` (transformers 5 writes ``linear_attention`` and ``full_attention``)."""


def _hybrid_blocks(data: dict[str, Any], file: str) -> dict[str, Any]:
    """A Nemotron-H config's layout as ModelSpec fields: each layer is one block, a Mamba-2
    mixer (``M``), softmax attention (``*``), a squared-ReLU MLP (``-``) or an MoE (``E``),
    named by ``hybrid_override_pattern`` or ``layers_block_type``.

    Raises:
        ConfigError: the pattern is missing, names an unknown block or disagrees with
            ``num_hidden_layers``.
    """
    pattern = data.get("hybrid_override_pattern")
    field = "hybrid_override_pattern"
    blocks: list[Any] = list(pattern) if isinstance(pattern, str) else []
    if not blocks and isinstance(data.get("layers_block_type"), list):
        field, blocks = "layers_block_type", list(data["layers_block_type"])
    if not blocks:
        raise ConfigError(
            "a Nemotron-H config needs its layers' kinds (hybrid_override_pattern or"
            " layers_block_type)",
            field="hybrid_override_pattern", file=file,
        )  # fmt: skip
    unknown = sorted({str(b) for b in blocks if not isinstance(b, str) or b not in _HYBRID_BLOCKS})
    if unknown:
        raise ConfigError(
            f"names block kinds rlplex does not read: {', '.join(unknown)} (it reads M, *, -, E"
            " and mamba, attention, mlp, moe)",
            field=field, value=pattern if field == "hybrid_override_pattern" else unknown,
            file=file,
        )  # fmt: skip
    if len(blocks) != data["num_hidden_layers"]:
        raise ConfigError(
            f"names {len(blocks)} layers but num_hidden_layers is {data['num_hidden_layers']}",
            field=field, file=file,
        )  # fmt: skip
    # Biases transformers' and vLLM's Nemotron-H read but no released checkpoint sets.
    for key, unmodelled in (("use_bias", True), ("mlp_bias", True), ("use_conv_bias", False)):
        if bool(data.get(key, not unmodelled)) is unmodelled:
            raise ConfigError(
                f"is {str(unmodelled).lower()}: rlplex counts Nemotron-H's projections without"
                " biases and its convolution with one, as released checkpoints have them",
                field=key, value=data.get(key), file=file,
            )  # fmt: skip
    kinds = [_HYBRID_BLOCKS[b] for b in blocks]
    count = {k: kinds.count(k) for k in ("mamba", "attention", "mlp", "moe")}
    head_dim = int(data.get("mamba_head_dim") or 64)
    expand = data.get("expand") or 2
    heads = int(data.get("mamba_num_heads") or expand * data["hidden_size"] // head_dim)
    mamba: dict[str, Any] = {}
    if count["mamba"]:
        mamba = {
            "linear_attention_layers": count["mamba"],
            "linear_mixer": "mamba2",
            "linear_num_key_heads": int(data.get("n_groups") or 8),  # transformers' default
            "linear_key_head_dim": int(data.get("ssm_state_size") or 128),
            "linear_num_value_heads": heads,
            "linear_value_head_dim": head_dim,
            "linear_conv_kernel_dim": int(data.get("conv_kernel") or 4),
            # vLLM caches the state in the config's mamba_ssm_cache_dtype, float32 when it
            # names none (vllm/model_executor/models/config.py, NemotronHForCausalLMConfig).
            "linear_state_fp32": data.get("mamba_ssm_cache_dtype", "float32") == "float32",
        }
    return {
        "mixer_only_layers": count["mamba"] + count["attention"],
        "mlp_only_layers": count["mlp"] + count["moe"],
        "first_dense_layers": count["mlp"] if count["moe"] else 0,
        "moe_latent_size": int(data.get("moe_latent_size") or 0) if count["moe"] else 0,
        "has_moe": bool(count["moe"]),
        **mamba,
    }


def _sliding_window(data: dict[str, Any], attention_layers: int) -> dict[str, int]:
    """``sliding_window`` and the windowed layers of a config: the ``sliding_attention``
    entries of ``layer_types`` (gpt-oss, Gemma 3), else all but every
    ``sliding_window_pattern``-th layer (Gemma 3 before ``layer_types``), else every layer
    (Mistral v0.1); none when ``use_sliding_window`` is false (Qwen2 and Qwen3 name a window
    they do not use) or the window is null."""
    window = data.get("sliding_window")
    model_type = str(data.get("model_type", ""))
    # Qwen2 and Qwen3 name a window they use only with use_sliding_window true (their
    # classes' default false), and then in the layers from max_window_layers on.
    qwen = model_type.startswith(("qwen2", "qwen3"))
    if (
        isinstance(window, bool)
        or not isinstance(window, int)
        or window < 1
        or data.get("use_sliding_window") is False
        or (qwen and data.get("use_sliding_window") is not True)
    ):
        return {}
    types = data.get("layer_types")
    pattern = data.get("sliding_window_pattern")
    if not isinstance(pattern, int) or isinstance(pattern, bool) or pattern < 1:
        # Gemma 3 and Gemma 2 configs may leave it to their classes' defaults.
        family = str(data.get("model_type", "")).removesuffix("_text")
        pattern = {"gemma3": 6, "gemma2": 2}.get(family)
    full_first = data.get("max_window_layers")
    if isinstance(types, list) and types:
        layers = sum(1 for t in types if t == "sliding_attention")
    elif qwen and isinstance(full_first, int) and not isinstance(full_first, bool):
        layers = max(0, attention_layers - full_first)
    elif pattern:
        layers = attention_layers - attention_layers // pattern
    else:
        layers = attention_layers
    return {"sliding_window": window, "sliding_window_layers": layers} if layers else {}


def spec_from_hf_config(data: dict[str, Any], file: str) -> ModelSpec:
    """A ModelSpec from a Hugging Face ``config.json`` dict.

    Raises:
        ConfigError: a required key is missing or not a positive integer
            (naming ``file`` and the key).
    """
    data, note = _text_config(data)
    for key in _HF_COUNTS:
        value = data.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise ConfigError(
                "must be a non-negative integer", field=key, value=value, file=file
            )  # fmt: skip
    blocks = data.get("layers_block_type") or data.get("hybrid_override_pattern")
    if data.get("model_type") == "nemotron_h" and "num_hidden_layers" not in data and blocks:
        # transformers 5 writes a Nemotron-H config's layers as the list of their kinds only.
        data = {**data, "num_hidden_layers": len(blocks)}
    for key in _HF_REQUIRED:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(
                "is required to estimate (a positive integer)"
                if key not in data
                else "must be a positive integer",
                field=key,
                file=file,
                **({"value": value} if key in data else {}),
            )
    model_type = str(data.get("model_type", ""))
    # Nemotron-H: every layer one block (a Mamba-2 mixer, attention, an MLP or an MoE).
    hybrid = _hybrid_blocks(data, file) if model_type == "nemotron_h" else {}
    if hybrid:
        # vLLM builds the shared experts as one MLP n_shared_experts times as wide; neither
        # it nor transformers ties the head or gives attention biases, whatever the keys say.
        shared_width = int(data.get("moe_shared_expert_intermediate_size") or 0)
        data = {
            **data,
            "shared_expert_intermediate_size": shared_width
            * max(1, int(data.get("n_shared_experts") or 1)),
            "n_shared_experts": 1 if shared_width else 0,
            "attention_bias": False,
            "tie_word_embeddings": False,
        }
        if not hybrid.pop("has_moe"):
            data = {**data, "n_routed_experts": 0}
    experts = int(data.get("num_experts") or data.get("n_routed_experts") or 0)
    if not experts and data.get("num_local_experts"):
        if model_type not in _LOCAL_EXPERT_TYPES:
            # Llama 4 interleaves MoE and dense layers and adds a shared expert of its own
            # width: read as Mixtral's layout it would be silently wrong.
            raise ConfigError(
                f"a mixture-of-experts layout rlplex does not read (model_type {model_type!r};"
                f" it reads {', '.join(_LOCAL_EXPERT_TYPES)}'s): give a preset or a native"
                " config of its numbers",
                field="num_local_experts",
                value=data["num_local_experts"],
                file=file,
            )
        # Mixtral and gpt-oss: every layer's MLP is experts of width intermediate_size.
        experts = int(data["num_local_experts"])
        data = {**data, "moe_intermediate_size": data.get("intermediate_size")}
    if experts and not data.get("moe_intermediate_size"):
        raise ConfigError(
            "is required for a mixture-of-experts model", field="moe_intermediate_size", file=file
        )
    if not experts and not data.get("intermediate_size"):
        raise ConfigError(
            "is required to estimate (a positive integer)", field="intermediate_size", file=file
        )
    first_dense = int(data.get("first_k_dense_replace") or hybrid.get("first_dense_layers") or 0)
    step = data.get("decoder_sparse_step")
    if experts and (data.get("mlp_only_layers") or (isinstance(step, int) and step > 1)):
        # Qwen-MoE: layer i is MoE unless listed in mlp_only_layers or (i + 1) % step != 0;
        # the dense ones are counted (first_dense_layers is a count, not positions).
        dense_only = set(data.get("mlp_only_layers") or ())
        every = step if isinstance(step, int) and step > 0 else 1
        layers = int(data["num_hidden_layers"])
        moe = sum(1 for i in range(layers) if i not in dense_only and (i + 1) % every == 0)
        first_dense = layers - moe
    shared = int(data.get("n_shared_experts") or 0)
    shared_width = int(data.get("shared_expert_intermediate_size") or 0)
    if shared_width and not shared:
        shared = 1
    blocks = {k: v for k, v in hybrid.items() if k != "first_dense_layers"}
    linear: dict[str, Any] = {}
    linear_layers = int(blocks.get("linear_attention_layers", 0))
    if not hybrid:
        linear_layers = _linear_attention_layers(data, file)
    if linear_layers and not hybrid:
        linear_keys = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                       "linear_value_head_dim", "linear_conv_kernel_dim")  # fmt: skip
        linear = {"linear_attention_layers": linear_layers}
        linear.update({k: int(data.get(k) or 0) for k in linear_keys})
        # Qwen3.5 splits Qwen3-Next's two input projections into four.
        linear["linear_in_projections"] = 4 if model_type.startswith("qwen3_5") else 2
    hybrid_qwen = model_type.startswith(("qwen3_next", "qwen3_5"))
    gated = model_type in _GATED_ATTENTION_TYPES or bool(data.get("attn_output_gate", hybrid_qwen))
    mixers = int(data["num_hidden_layers"]) - int(blocks.get("mlp_only_layers", 0))
    window = _sliding_window(data, mixers - linear_layers)
    try:
        return ModelSpec(
            name=file,
            source=file + note,
            num_layers=data["num_hidden_layers"],
            hidden_size=data["hidden_size"],
            intermediate_size=int(data.get("intermediate_size") or 0),
            num_heads=data["num_attention_heads"],
            num_kv_heads=int(data.get("num_key_value_heads") or data["num_attention_heads"]),
            head_dim=int(data.get("head_dim") or 0),
            vocab_size=data["vocab_size"],
            tied_embeddings=bool(data.get("tie_word_embeddings", False)),
            qkv_bias=bool(data.get("attention_bias", model_type.startswith("qwen2"))),
            qk_norm=model_type.startswith(("qwen3", "gemma3")),  # Qwen3 (-MoE, -VL, -Next, 3.5)
            num_experts=experts,
            experts_per_token=int(data.get("num_experts_per_tok") or 0),
            moe_intermediate_size=int(data.get("moe_intermediate_size") or 0),
            shared_experts=shared,
            shared_expert_intermediate_size=shared_width,
            first_dense_layers=first_dense,
            router_bias=model_type in ("deepseek_v3", "gpt_oss", "nemotron_h"),
            fused_expert_tensors=model_type == "gpt_oss",
            expert_groups=int(data.get("n_group") or 0) if experts else 0,
            q_lora_rank=int(data.get("q_lora_rank") or 0),
            kv_lora_rank=int(data.get("kv_lora_rank") or 0),
            qk_nope_head_dim=int(data.get("qk_nope_head_dim") or 0),
            qk_rope_head_dim=int(data.get("qk_rope_head_dim") or 0),
            v_head_dim=int(data.get("v_head_dim") or 0),
            attention_output_gate=gated,
            **linear,
            **window,
            **blocks,
            **({"gated_mlp": False, "shared_expert_gate": False} if hybrid else {}),
        )
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise ConfigError(
            f"does not describe a model rlplex can estimate: {message}", file=file
        ) from None


def resolve_model(
    name: str,
    *,
    field: str = "model",
    file: str | None = None,
    base_dir: Path | None = None,
    warn: list[str] | None = None,
) -> ModelSpec:
    """The ModelSpec ``name`` refers to.

    In order: a preset name; a local folder with ``config.json`` or a
    ``config.json`` file (relative paths from ``base_dir``); a hub-style name
    whose folder is not here, matched to a preset (a warning is appended to
    ``warn``).

    Raises:
        ConfigError: nothing matches (naming the field and the value), or the
            config.json is unreadable or lacks a field.
    """
    presets = model_presets()
    key = name.strip().lower()
    if key in presets:
        return presets[key]
    path = Path(name).expanduser()
    if not path.is_absolute() and base_dir is not None and (base_dir / path).exists():
        path = base_dir / path
    if path.is_dir():
        path = path / "config.json"
        if not path.exists():
            raise ConfigError(
                "the folder has no config.json to read the architecture from",
                field=field,
                value=name,
                file=file,
            )
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read it as JSON: {exc}", file=str(path)) from None
        if not isinstance(data, dict):
            raise ConfigError("must be a JSON object", file=str(path))
        return spec_from_hf_config(data, str(path))
    spec = match_preset(name)
    if spec is not None:
        if warn is not None:
            multimodal = re.search(r"-(vl|omni)\b", _normalise(name)) is not None
            warn.append(
                f"{field}: {name!r} is not on this machine; using the architecture of preset"
                f" {spec.name!r} ({spec.source})"
                + (
                    ": its language model; the vision encoder is not counted (its weights,"
                    " and the image tokens' encoding, a few percent more)"
                    if multimodal
                    else ""
                )
            )
        return spec
    raise ConfigError(
        "not a model preset, a local Hugging Face folder or a config.json, and its name"
        " matches no preset; give a preset name (rlplex estimate --list-presets) or a path"
        " to a config.json with num_hidden_layers, hidden_size, num_attention_heads,"
        " num_key_value_heads, intermediate_size and vocab_size",
        field=field,
        value=name,
        file=file,
    )
