"""Parameter, FLOP, KV-cache and state-size formulas of a transformer, as pure functions.

Every formula is written out, with its source, in ``docs/cost-model.md``. The
parameter counts are exact for the Hugging Face implementations of Llama,
Qwen2, Qwen3, Qwen3-MoE and DeepSeek-V3 (tests compare them with the tensors
of real tiny models); FLOPs count a multiply-add as 2.
"""

from __future__ import annotations

from typing import Literal

from rlplex.estimate.specs import ModelSpec
from rlplex.resources.cluster import BYTES_PER_GB

Head = Literal["lm", "value", "score"]
"""What sits on the backbone: the LM head (policy, reference), a one-output
token head with bias (critic: ``AutoModelForTokenClassification``) or a
one-output sequence head without bias (reward model)."""

BYTES_PER_ELEMENT: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
"""Bytes of one weight or activation element per precision."""

GB = BYTES_PER_GB
"""Bytes per GB: the config's (:data:`rlplex.resources.cluster.BYTES_PER_GB`, 10^9)."""


def attention_params(s: ModelSpec) -> int:
    """Weights of one attention block (projections, biases, q/k norms)."""
    h = s.hidden_size
    if s.is_mla:
        qk = s.qk_nope_head_dim + s.qk_rope_head_dim
        if s.q_lora_rank:
            q = h * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * s.num_heads * qk
        else:
            q = h * s.num_heads * qk
        kv = (
            h * (s.kv_lora_rank + s.qk_rope_head_dim)
            + s.kv_lora_rank
            + s.kv_lora_rank * s.num_heads * (s.qk_nope_head_dim + s.v_head_dim)
        )
        return q + kv + s.num_heads * s.v_head_dim * h
    d = s.head_width
    q_dim, kv_dim = s.num_heads * d, s.num_kv_heads * d
    params = h * q_dim + 2 * h * kv_dim + q_dim * h
    if s.attention_output_gate:
        params += h * q_dim  # the gate's half of the query projection
    if s.qkv_bias:
        params += q_dim + 2 * kv_dim
    if s.qk_norm:
        params += 2 * d
    return params


def linear_key_width(s: ModelSpec) -> int:
    """Query (and key) width of one linear-attention layer: key heads x key head width."""
    return s.linear_num_key_heads * s.linear_key_head_dim


def linear_value_width(s: ModelSpec) -> int:
    """Value width of one linear-attention layer: value heads x value head width."""
    return s.linear_num_value_heads * s.linear_value_head_dim


def linear_attention_params(s: ModelSpec) -> int:
    """Weights of one Gated DeltaNet mixer (Qwen3-Next's ``Qwen3NextGatedDeltaNet``).

    The q/k/v/z projection (``2 x key width + 2 x value width`` outputs), the per-head
    beta/decay projection (``2 x value heads``), the depthwise causal convolution over q, k
    and v (``linear_conv_kernel_dim`` taps, no bias), the decay's ``A_log`` and ``dt_bias``
    per value head, the gated RMSNorm over a value head, and the output projection.

    A Mamba-2 mixer (Nemotron-H's ``NemotronHMamba2Mixer``) has one input projection to x, z
    (value width each), B, C (key width each) and one step size per head; the convolution
    over x, B and C with a bias; ``A_log``, ``D`` and ``dt_bias`` per head; the gated RMSNorm
    over the whole value width; and the output projection.
    """
    h = s.hidden_size
    key, value, heads = linear_key_width(s), linear_value_width(s), s.linear_num_value_heads
    conv = (2 * key + value) * s.linear_conv_kernel_dim
    if s.linear_mixer == "mamba2":
        conv_bias = 2 * key + value
        return h * (2 * key + 2 * value + heads) + conv + conv_bias + 3 * heads + value + value * h
    return (
        h * (2 * key + 2 * value)
        + h * 2 * heads
        + conv
        + 2 * heads
        + s.linear_value_head_dim
        + value * h
    )


def linear_state_flops(s: ModelSpec) -> float:
    """FLOPs per token of the linear-attention layers' recurrence, beyond their projections:
    each value head updates its ``key head x value head`` state with the token's key and
    value and reads it with the query (two rank-1 products, ``4 x dk x dv``), every layer.
    The chunked kernels' within-chunk products are left out (docs/cost-model.md)."""
    per_layer = 4 * s.linear_num_value_heads * s.linear_key_head_dim * s.linear_value_head_dim
    return float(s.linear_attention_layers * per_layer)


def linear_state_bytes(s: ModelSpec, precision: str = "bf16", tp: int = 1, pp: int = 1) -> float:
    """Bytes of one sequence's linear-attention state on one device of a tp x pp engine: per
    layer, each value head's ``key head x value head`` recurrent state (in fp32 where the model
    says so, :attr:`~rlplex.estimate.specs.ModelSpec.linear_state_fp32`) and the convolution's
    last ``kernel - 1`` inputs (vLLM's Mamba-style cache; heads split over tp ranks)."""
    if not s.linear_attention_layers:
        return 0.0
    b = BYTES_PER_ELEMENT[precision]
    recurrent = s.linear_num_value_heads * s.linear_key_head_dim * s.linear_value_head_dim
    conv = max(0, s.linear_conv_kernel_dim - 1) * (2 * linear_key_width(s) + linear_value_width(s))
    state_b = BYTES_PER_ELEMENT["fp32"] if s.linear_state_fp32 else b
    return s.linear_attention_layers * (recurrent * state_b + conv * b) / tp / pp


def _mlp(s: ModelSpec, width: int) -> int:
    """Weights of one MLP or expert of ``width``: SwiGLU's gate, up and down, or two."""
    return s.mlp_matrices * s.hidden_size * width


def _shared_width(s: ModelSpec) -> int:
    return s.shared_expert_intermediate_size or s.moe_intermediate_size


def expert_params(s: ModelSpec) -> int:
    """Weights of one routed expert: its matrices between the width it reads and writes (the
    latent width of a latent MoE, else the hidden size) and ``moe_intermediate_size``."""
    return s.mlp_matrices * s.expert_input_size * s.moe_intermediate_size


def moe_layer_params(s: ModelSpec, experts: int) -> int:
    """Weights of one MoE MLP counting ``experts`` routed experts (router included; a latent
    MoE's projections down to the latent width and back)."""
    h = s.hidden_size
    router = h * s.num_experts + (s.num_experts if s.router_bias else 0)
    shared = s.shared_experts * _mlp(s, _shared_width(s))
    if s.shared_expert_intermediate_size and s.shared_expert_gate:
        shared += h  # Qwen2-MoE's shared-expert gate
    latent = 2 * h * s.moe_latent_size
    return experts * expert_params(s) + shared + router + latent


def routed_expert_params(s: ModelSpec) -> int:
    """Weights of every routed expert of every MoE layer (what expert parallelism splits)."""
    return s.moe_layers * s.num_experts * expert_params(s)


def projection_params(s: ModelSpec) -> int:
    """Weights of every dense MLP's and routed expert's projections (gate, up, down): what
    NeMo RL's shard-to-shard refit (``nccl_reshard``) moves as slices; shared experts,
    attention, embeddings, norms and routers are broadcast whole. Qwen3-4B: 66.9 % of its
    weights, Qwen3-30B-A3B 95.0 %, DeepSeek-V3 97.6 %, the "XferDTensor fraction" NeMo RL
    publishes for them (docs/design-docs/nccl-reshard-refit.md @ 36b5999a7)."""
    return s.dense_mlp_layers * _mlp(s, s.intermediate_size) + routed_expert_params(s)


def projection_tensors(s: ModelSpec) -> int:
    """Transfers of a shard-to-shard refit: one per dense MLP projection and one per routed
    projection of an MoE layer (its experts grouped into one ``[experts, ...]`` entry; a
    layer whose experts are stacked in the checkpoint, gpt-oss's, sends its two stacks)."""
    routed = 2 if s.fused_expert_tensors else s.mlp_matrices
    return s.dense_mlp_layers * s.mlp_matrices + s.moe_layers * routed


def projection_checkpoint_tensors(s: ModelSpec) -> int:
    """Checkpoint tensors (:func:`param_tensors`) among the projections of
    :func:`projection_params`: a dense MLP's matrices, every routed expert's (gpt-oss: the
    layer's stacked gate-up and down)."""
    routed = 2 if s.fused_expert_tensors else s.mlp_matrices * s.num_experts
    return s.dense_mlp_layers * s.mlp_matrices + s.moe_layers * routed


RESHARD_STREAMS = 2
"""Trainer pipeline stages whose projections a shard-to-shard refit moves at once: NeMo RL's
generation side spreads the per-stage transfer groups over ``NRL_REFIT_NUM_STREAMS`` CUDA
streams (default 2; docs/design-docs/nccl-reshard-refit.md @ 36b5999a7), and every rank of
a stage's group issues the same transfers in the same order, so with more stages than
streams only that many stages' trainer ranks send at a time."""


def layer_params(s: ModelSpec, *, active: bool = False) -> int:
    """Weights of all transformer blocks (attention, MLP or experts, a norm before each).

    ``active``: only the routed experts a token uses (MoE), for FLOPs.
    """
    h = s.hidden_size
    total = s.attention_layers * attention_params(s) + s.sublayers * h
    if s.linear_attention_layers:
        total += s.linear_attention_layers * linear_attention_params(s)
    total += s.dense_mlp_layers * _mlp(s, s.intermediate_size)
    if s.is_moe:
        experts = s.experts_per_token if active else s.num_experts
        total += s.moe_layers * moe_layer_params(s, experts)
    return total


def head_params(s: ModelSpec, head: Head = "lm") -> int:
    """Weights of the output head that are not shared with the embedding."""
    if head == "value":
        return s.hidden_size + 1
    if head == "score":
        return s.hidden_size
    return 0 if s.tied_embeddings else s.vocab_size * s.hidden_size


def total_params(s: ModelSpec, head: Head = "lm") -> int:
    """Every weight: embedding, blocks, final norm, head (what is stored and trained)."""
    return s.vocab_size * s.hidden_size + layer_params(s) + s.hidden_size + head_params(s, head)


def active_params(s: ModelSpec, head: Head = "lm") -> int:
    """Weights one token's forward pass multiplies by: blocks with its experts, and the head.

    The embedding is a lookup (no FLOPs) and is left out; the LM head's matmul
    is counted even when it is tied to the embedding.
    """
    head_matmul = s.vocab_size * s.hidden_size if head == "lm" else s.hidden_size
    return layer_params(s, active=True) + head_matmul


def param_tensors(s: ModelSpec, head: Head = "lm") -> int:
    """Tensors of the model's Hugging Face checkpoint: what a tensor-by-tensor weight sync
    gathers, sends and loads one at a time.

    A norm per mixer and per MLP; attention's projections (MLA: the query and key/value
    down- and up-projections with their norms), biases and q/k norms; a dense
    MLP's three matrices (two ungated), or an MoE layer's router (and its score bias), three
    matrices per routed expert, one shared-expert MLP and its gate. DeepSeek-V3
    gives 45,395, the count NeMo RL's refit logs for it. A linear-attention layer's
    mixer has its input projections (Qwen3-Next 2, Qwen3.5 4) and five more tensors
    (:data:`LINEAR_MIXER_OTHER_TENSORS`); a Mamba-2 mixer eight
    (:data:`MAMBA2_MIXER_TENSORS`).
    """
    if s.is_mla:
        attention = (3 if s.q_lora_rank else 1) + 3 + 1
    else:
        attention = 4 + (3 if s.qkv_bias else 0) + (2 if s.qk_norm else 0)
    # gpt-oss stacks a layer's experts: gate_up_proj, down_proj and a bias each.
    experts = 4 if s.fused_expert_tensors else s.mlp_matrices * s.num_experts
    moe = 1 + (1 if s.router_bias else 0) + experts + (2 if s.moe_latent_size else 0)
    if s.shared_experts:
        gate = s.shared_expert_intermediate_size and s.shared_expert_gate
        moe += s.mlp_matrices + (1 if gate else 0)
    if s.linear_mixer == "mamba2":
        linear = MAMBA2_MIXER_TENSORS
    else:
        linear = s.linear_in_projections + LINEAR_MIXER_OTHER_TENSORS
    mixers = s.attention_layers * attention + s.linear_attention_layers * linear
    tensors = s.sublayers + mixers + s.dense_mlp_layers * s.mlp_matrices + s.moe_layers * moe
    head_tensors = 0 if head == "lm" and s.tied_embeddings else (2 if head == "value" else 1)
    return 1 + tensors + 1 + head_tensors


LINEAR_MIXER_OTHER_TENSORS = 5
"""Checkpoint tensors of one Gated DeltaNet mixer besides its input projections: the
convolution, ``A_log``, ``dt_bias``, the gated norm and the output projection."""

MAMBA2_MIXER_TENSORS = 8
"""Checkpoint tensors of one Mamba-2 mixer: the input projection, the convolution's weight and
bias, ``A_log``, ``D``, ``dt_bias``, the gated norm and the output projection."""


def attention_width(s: ModelSpec) -> int:
    """heads x (query/key width + value width): the attention FLOPs per key per layer / 2."""
    if s.is_mla:
        return s.num_heads * (s.qk_nope_head_dim + s.qk_rope_head_dim + s.v_head_dim)
    return 2 * s.num_heads * s.head_width


def decode_attention_width(s: ModelSpec) -> int:
    """:func:`attention_width` of a decode step: MLA decodes absorbed (vLLM, SGLang: the
    up-projections folded into the query and output), each head scoring the cached latent
    and rope key (``kv_lora + rope``) and summing the latent (``kv_lora``) per key."""
    if s.is_mla:
        return s.num_heads * (2 * s.kv_lora_rank + s.qk_rope_head_dim)
    return attention_width(s)


def token_flops(s: ModelSpec, head: Head = "lm") -> float:
    """FLOPs per token that do not grow with its context: ``2 x active params`` of matmuls
    and the linear-attention layers' recurrence (:func:`linear_state_flops`)."""
    return 2.0 * active_params(s, head) + linear_state_flops(s)


def windowed_square(tokens: float, window: int) -> float:
    """Twice the keys a causal sequence of ``tokens`` tokens attends to in all when each token
    sees at most the last ``window`` (0: no window): ``tokens**2`` up to the window, then
    ``2 x window x tokens - window**2`` (token i attends to ``min(i, window)`` keys)."""
    if window <= 0 or tokens <= window:
        return tokens * tokens
    return 2.0 * window * tokens - window * window


def attention_squares(s: ModelSpec, tokens: float) -> float:
    """Layer-weighted squared length of one sequence: ``tokens**2`` for each full-attention
    layer and :func:`windowed_square` for each windowed one (times ``attention_width``, the
    causal attention FLOPs of one forward pass)."""
    full = s.full_attention_layers * tokens * tokens
    return full + s.sliding_window_layers * windowed_square(tokens, s.sliding_window)


def attended_keys(s: ModelSpec, context: float) -> float:
    """Keys one token attends to over all softmax-attention layers at ``context`` cached
    tokens: the whole context in a full layer, at most ``sliding_window`` in a windowed one."""
    windowed = min(context, s.sliding_window) if s.sliding_window_layers else 0.0
    return s.full_attention_layers * context + s.sliding_window_layers * windowed


def forward_flops(s: ModelSpec, tokens: float, head: Head = "lm") -> float:
    """FLOPs of one causal forward pass over one sequence of ``tokens`` tokens.

    ``2 x active params x tokens`` for the matmuls, plus the attention scores
    and weighted sum: token i attends to i keys, ``2 x i x attention_width``
    FLOPs per softmax-attention layer, summed over the sequence (``tokens**2 / 2``
    keys; a windowed layer at most ``sliding_window`` keys a token,
    :func:`attention_squares`); linear-attention layers add their recurrence per token
    (:func:`linear_state_flops`).
    """
    quadratic = attention_width(s) * attention_squares(s, tokens)
    return token_flops(s, head) * tokens + quadratic


def decode_token_flops(s: ModelSpec, context: float, head: Head = "lm") -> float:
    """FLOPs to decode one token that attends to ``context`` cached tokens."""
    attention = 2.0 * decode_attention_width(s) * attended_keys(s, context)
    return token_flops(s, head) + attention


def kv_elements_per_token(s: ModelSpec) -> int:
    """Cached elements per token over the softmax-attention layers (K and V; MLA: the latent
    and rope key); linear-attention layers keep a fixed state instead
    (:func:`linear_state_bytes`)."""
    if s.is_mla:
        return s.attention_layers * (s.kv_lora_rank + s.qk_rope_head_dim)
    return 2 * s.attention_layers * s.num_kv_heads * s.head_width


def kv_bytes_per_token(
    s: ModelSpec, precision: str = "bf16", tp: int = 1, pp: int = 1, *, windowed: bool = False
) -> float:
    """KV-cache bytes per token on one device of a tp x pp inference engine, over the
    full-attention layers (``windowed``: over the windowed layers, which keep at most
    ``sliding_window`` tokens a sequence, :func:`window_kv_bytes`).

    K/V heads split over tensor-parallel ranks; with fewer KV heads than ranks
    each rank keeps one head (vLLM replicates them). MLA's latent is kept whole
    on every rank. Layers split over pipeline stages.
    """
    b = BYTES_PER_ELEMENT[precision]
    layers = s.sliding_window_layers if windowed else s.full_attention_layers
    if s.is_mla:
        return kv_elements_per_token(s) * b / pp * layers / s.attention_layers
    heads_per_rank = max(1.0, s.num_kv_heads / tp)
    return 2 * layers * heads_per_rank * s.head_width * b / pp


def window_kv_bytes(
    s: ModelSpec, context: float, precision: str = "bf16", tp: int = 1, pp: int = 1
) -> float:
    """KV-cache bytes one sequence of ``context`` tokens holds in the windowed layers on one
    device: at most ``sliding_window`` tokens each (vLLM's hybrid KV-cache manager frees the
    blocks that leave the window)."""
    if not s.sliding_window_layers:
        return 0.0
    tokens = min(context, s.sliding_window)
    return tokens * kv_bytes_per_token(s, precision, tp, pp, windowed=True)


def expected_experts_touched(s: ModelSpec, batch: float) -> float:
    """Routed experts one MoE layer reads for ``batch`` tokens under uniform routing.

    ``E x (1 - (1 - k/E)**batch)``: every token picks k of E experts.
    """
    if not s.is_moe:
        return 0.0
    return s.num_experts * (1.0 - (1.0 - s.experts_per_token / s.num_experts) ** max(batch, 1.0))


def decode_weight_bytes(s: ModelSpec, batch: float, precision: str, head: Head = "lm") -> float:
    """Weight bytes one decode step of ``batch`` sequences reads (all devices together).

    Every weight matrix is read once, but an untied input embedding is a lookup: the step
    reads its ``batch`` rows, not the table (a tied one is read whole as the LM head).
    """
    b = BYTES_PER_ELEMENT[precision]
    held = total_params(s, head)
    if not s.tied_embeddings:
        held -= s.vocab_size * s.hidden_size - min(batch, s.vocab_size) * s.hidden_size
    if not s.is_moe:
        return held * b
    dense = held - routed_expert_params(s)
    touched = expected_experts_touched(s, batch)
    return (dense + s.moe_layers * touched * expert_params(s)) * b


def layer_activation_elements(
    s: ModelSpec, *, swiglu_tensors: int = 4, largest: bool = False
) -> float:
    """Activation elements one layer keeps per token for the backward pass.

    Two norm inputs and outputs (4h), queries and attention output
    (2 x heads x head width), keys and values (2 x KV heads x head width), and
    the SwiGLU's gate, up, activation and product (4 x MLP width; for MoE the
    token's experts, and its k routed copies of the hidden state in and out,
    2 x k x h). Flash attention keeps no score matrix. This is the
    34 x h bytes per token of Korthikanti et al. (2022) for a GPT MLP of 4h,
    re-derived for GQA and SwiGLU. ``swiglu_tensors``: 4 for SwiGLU as separate operators
    (Hugging Face: gate, up, silu(gate), product); 3 for Megatron's fused bias-SwiGLU,
    which keeps its input (gate and up, 2 x width) and the product fc2 needs. An ungated MLP
    (squared ReLU) keeps one tensor fewer: its input, the activation's output (and, eager,
    the ReLU's output the square needs).
    The figure is the mean over the layers (what all of them keep together, over their
    count): a linear-attention mixer keeps its q/k/v/z projection, the convolved q/k/v and
    its output (``4 x key width + 4 x value width``); a hybrid's layers that are a mixer or
    an MLP alone (Nemotron-H) keep one norm's input and output (2h) and their one part's
    tensors; dense and MoE layers their own MLP's. ``largest``: the layer that keeps the most
    instead (what one layer's recomputation or forward holds at once).
    """
    h = s.hidden_size
    if s.is_mla:
        q = s.num_heads * (s.qk_nope_head_dim + s.qk_rope_head_dim)
        kv = s.num_heads * (s.qk_nope_head_dim + s.v_head_dim)
        attn = q + kv + s.num_heads * s.v_head_dim
    else:
        attn = 2 * s.num_heads * s.head_width + 2 * s.num_kv_heads * s.head_width
    linear = 4 * linear_key_width(s) + 4 * linear_value_width(s)
    mixers = s.attention_layers * attn + s.linear_attention_layers * linear
    tensors = swiglu_tensors if s.gated_mlp else swiglu_tensors - 1
    dense = tensors * s.intermediate_size
    moe = 0.0
    if s.is_moe:
        width = s.experts_per_token * s.moe_intermediate_size + s.shared_experts * _shared_width(s)
        # Each token's k routed copies: the permuted input the experts' first GEMM keeps for
        # its weight gradient, and the experts' outputs the weighted combine keeps for the
        # routing probabilities' gradient (Megatron's grouped GEMM and unpermute; Hugging
        # Face's index_select and routing-weight multiply alike).
        routed = 2 * s.experts_per_token * s.expert_input_size
        if s.moe_latent_size:  # the down-projection's output and the up-projection's input
            routed += 2 * s.moe_latent_size
        moe = tensors * width + routed
    if largest:
        mixer = max(attn if s.attention_layers else 0, linear if s.linear_attention_layers else 0)
        mlp = max(dense if s.dense_mlp_layers else 0, moe if s.moe_layers else 0)
        paired = s.num_layers - s.mixer_only_layers - s.mlp_only_layers
        if paired:
            return 4 * h + mixer + mlp
        return 2 * h + max(mixer if s.mixer_only_layers else 0, mlp if s.mlp_only_layers else 0)
    mlps = s.dense_mlp_layers * dense + s.moe_layers * moe
    return (2 * h * s.sublayers + mixers + mlps) / s.num_layers


EAGER_SAVED_NORM_BYTES = 8.0
"""Bytes per hidden element per token and layer that a Hugging Face decoder layer keeps for
the backward beyond :func:`layer_activation_elements`: each of its two RMSNorms upcasts its
input to fp32 and keeps that copy (2 x 4 bytes), in bf16 and in fp32 alike. With per-head
q/k RMSNorms (Qwen3), 4 bytes plus one element's more per query and key element. Measured
with ``bench/saved_activations.py`` (every tensor autograd saves, counted on the CPU,
Llama, Qwen2 and Qwen3 layers with SDPA attention): 8.07 x hidden per token and layer, and
6.1 (bf16) or 8.1 (fp32) bytes per q/k element."""


def eager_saved_bytes_per_token(s: ModelSpec, precision: str = "bf16") -> float:
    """Bytes per token and layer that eager Hugging Face layers keep for the backward beyond a
    fused layer's activations (:data:`EAGER_SAVED_NORM_BYTES`)."""
    per_token = EAGER_SAVED_NORM_BYTES * s.hidden_size * s.layer_units / s.num_layers
    if s.qk_norm and not s.is_mla:
        b = BYTES_PER_ELEMENT[precision if precision != "fp8" else "bf16"]
        per_token += (4 + b) * (s.num_heads + s.num_kv_heads) * s.head_width
    return per_token


def activation_bytes(
    s: ModelSpec,
    tokens: float,
    *,
    precision: str = "bf16",
    tp: int = 1,
    pp: int = 1,
    recompute: bool = False,
    backward: bool = True,
    head: Head = "lm",
    eager: bool = False,
    logits_bytes: float | None = None,
    in_flight: int = 1,
    sequence_parallel: bool = True,
    scores_sequence: float = 0.0,
) -> float:
    """Transient bytes per device of one micro-batch of ``tokens`` tokens.

    Training keeps every layer's activations (``backward``), or with
    recomputation only each layer's input plus one layer's full set; a
    forward-only pass keeps one layer's. The LM head's fp32 logits (and, in
    training, their gradient) come on top. Tensor parallelism with sequence
    parallelism splits all of it over tp ranks; pipeline stages hold their
    layers. ``in_flight``: micro-batches a pipeline stage holds at once in training (1F1B:
    the first stage runs ``min(pp, m)`` forwards before its first backward); the last stage,
    which holds the logits, holds one: the peak is the larger of the two. ``eager``: Hugging
    Face modules, whose norms keep fp32 copies (:func:`eager_saved_bytes_per_token`).
    ``logits_bytes``: bytes per logit held at the peak (default fp32 logits, and their fp32
    gradient in training: 4 or 8). Without ``sequence_parallel`` the norms' inputs and
    outputs (``4h`` a token and layer) stay whole on every tensor-parallel rank.
    ``scores_sequence``: the row length whose score matrix each softmax-attention layer
    keeps when no flash kernel runs (:func:`keeps_attention_scores`): the softmax's fp32
    output, heads x tokens x that length (0: a flash kernel, no score matrix); a forward
    holds the scores and their softmax at once.
    """
    b = BYTES_PER_ELEMENT[precision if precision != "fp8" else "bf16"]
    layers = s.num_layers / pp
    swiglu = 4 if eager else 3  # Megatron's fused bias-SwiGLU keeps 3 tensors, not 4

    def one_layer(largest: bool) -> float:
        """A layer's bytes: the mean layer (what all of them store), or the largest one (what
        a forward or a recomputation holds at once)."""
        elements = layer_activation_elements(s, swiglu_tensors=swiglu, largest=largest)
        per = elements * b * tokens
        if not sequence_parallel and tp > 1:
            # Scaled by tp here because the whole is divided by tp below.
            paired = s.num_layers > s.mixer_only_layers + s.mlp_only_layers
            sublayers = (2 if paired else 1) if largest else s.sublayers / s.num_layers
            norms = 2 * s.hidden_size * sublayers
            per += norms * b * tokens * (tp - 1)
        if eager:
            per += eager_saved_bytes_per_token(s, precision) * tokens
        if scores_sequence > 0 and s.attention_layers:
            # The mean layer's stored probabilities; the largest, running its forward, also
            # the scores the softmax reads.
            share = 2.0 if largest else s.attention_layers / s.num_layers
            per += share * s.num_heads * tokens * scores_sequence * 4
        return per

    per_layer, largest_layer = one_layer(False), one_layer(True)
    working = 0.0  # one layer's full set, recomputed during the backward
    if not backward:
        stored, working = 0.0, largest_layer
    elif recompute:
        # Each layer's input, split over tp by sequence parallel, whole on every rank without.
        whole = tp if not sequence_parallel and tp > 1 else 1
        stored, working = layers * s.hidden_size * b * tokens * whole, largest_layer
    else:
        stored = layers * per_layer
    head_width = s.vocab_size if head == "lm" else 1
    per_logit = logits_bytes if logits_bytes is not None else 4 * (2 if backward else 1)
    logits = tokens * head_width * per_logit
    held = max(1, in_flight) if backward else 1
    first_stage = held * stored + working
    last_stage = stored + working + logits
    return max(first_stage, last_stage) / tp


def keeps_attention_scores(
    s: ModelSpec, precision: str, kernels: str, *, masked: bool = True
) -> bool:
    """Whether a training or log-prob pass keeps each attention layer's score matrix.

    Flash attention (FlashAttention-2, cuDNN, Transformer Engine's fused attention) keeps
    none, but runs only in fp16 and bf16. In fp32, Transformer Engine falls back to its
    unfused attention, which keeps the softmax's output. PyTorch's
    ``scaled_dot_product_attention`` (Hugging Face's default, ``eager`` here) takes its
    memory-efficient kernel, which takes fp32 and keeps none, except where Hugging Face
    passes ``enable_gqa`` (grouped KV heads and no attention mask, ``use_gqa_in_sdpa``:
    every sequence of the batch at one length, unpacked), which that kernel does not
    take: the math path runs and keeps the softmax's output. ``masked``: the batch needs
    a mask (padding, packing). An H200 measured the 64 MiB a layer this predicts for 16
    heads over 4 unpadded sequences of 512 tokens (``bench/gpu_peak_phases.py``).
    """
    if precision != "fp32" or not s.attention_layers:
        return False
    if kernels != "eager":
        return True
    return s.num_kv_heads < s.num_heads and not masked


def optimizer_bytes_per_param(optimizer: str, precision: str) -> int:
    """Optimizer state per parameter: fp32 moments, and fp32 master weights when training
    in lower precision (mixed precision, as DeepSpeed and Megatron keep them).

    AdamW/Adam: two moments (8 B) + master (4 B); SGD with momentum: 4 B + master.
    """
    moments = 8 if optimizer in ("adamw", "adam") else 4
    master = 0 if precision == "fp32" else 4
    return moments + master


EAGER_EXCESS_BYTES: dict[str, float] = {"hidden": 60.0, "attn": 16.0, "mlp": 4.0, "qk_norm": 32.0}
"""Bytes per element of each width that a Hugging Face decoder layer's non-matmul operators
move per token in a forward pass beyond a fused (Transformer Engine) layer's. Measured, eager:
84.7 x hidden + 20.4 x (query + key widths) + 9.9 x MLP width, + 36.0 x (query + key widths)
for a per-head q/k RMSNorm (``bench/elementwise_bytes.py``: each ATen operator's tensors
counted on the CPU, bf16, Qwen2/Qwen3 layers, fit within 0.3 %): each RMSNorm upcasts to fp32
and runs five operators (36 bytes per element), the rotary embedding five (20), SwiGLU two
(10), each residual add one (6). Fused, from what each Transformer Engine kernel reads and
writes once: two norms folded into their matmuls' input (6 each), two residual adds (6 each),
rotary 4, SwiGLU 6, q/k norm 4."""

HOST_BACKWARD_PASSES = 3.6
"""Host work of a backward pass in eager PyTorch, in ``layer_s`` units (the forward's).
MEASURED on one H200 (``bench/gpu_pass_speed.py``, 2026-11-28, two calls): Hugging Face
Qwen2.5-0.5B and 1.5B, one row of 1,024 tokens, where the passes are host-bound, forward +
backward (gradients accumulated into allocated ones) took 3.3-4.3 ms a layer, 4.2-5.4 times
``layer_s`` (0.8 ms): a backward of 3.2-4.4, of which 3.6 is taken. Measured against that
machine's own forward the backward was 3.6-3.8 forwards in the first call and 1.9-2.1 in the
second, whose forwards took 1.06-1.18 ms a layer: the host's speed varied between the calls,
the whole train pass less so. On the CPU alone (``bench/layer_overhead.py``, no kernel
launches) the backward was 1.8 forwards."""

EAGER_BACKWARD_RATIO = 2.3
"""Backward traffic of those operators over their forward traffic (measured: 2.25-2.36)."""


def eager_excess_bytes_per_token(s: ModelSpec) -> float:
    """Forward bytes per token per layer (averaged over the layers) that eager Hugging Face
    modules move beyond fused kernels (:data:`EAGER_EXCESS_BYTES`)."""
    c = EAGER_EXCESS_BYTES
    if s.is_mla:  # the rotary embedding runs over the rope part of each head only
        attn = (s.num_heads + 1) * s.qk_rope_head_dim
    else:
        attn = (s.num_heads + s.num_kv_heads) * s.head_width
    moe_width = s.experts_per_token * s.moe_intermediate_size + s.shared_experts * _shared_width(s)
    mlp = (s.dense_mlp_layers * s.intermediate_size + s.moe_layers * moe_width) / s.num_layers
    # Norms and residual adds come with each mixer and MLP; the rotary embedding and q/k norms
    # with each mixer (a linear mixer's own elementwise work, its convolution, activation,
    # norms and gate, unmeasured, priced as attention's).
    hidden = c["hidden"] * s.hidden_size * s.layer_units / s.num_layers
    attn *= s.mixer_layers / s.num_layers
    per_token = hidden + c["attn"] * attn + c["mlp"] * mlp
    if s.qk_norm:
        per_token += c["qk_norm"] * attn
    return per_token


# An eager decode step's host work per layer, in dense (Qwen2) layers: what each part of a
# layer adds, measured with vLLM 0.6.3's own layer code on the CPU, its CUDA kernels stood in
# for (``bench/vllm_eager_layers.py``; docs/benchmarks.md "Seventeenth pass"): the medians of
# five runs of the differences of its ratios (the machine is shared and noisy).
EAGER_MOE_LAYERS = 0.42
"""Routed experts in place of a dense MLP: router, top-k, alignment by expert, two Triton
grouped GEMMs, their sum (runs: 0.43, 0.42, 0.42, 0.42, 0.56)."""
EAGER_SHARED_EXPERT_LAYERS = 0.45
"""Shared (always-active) experts beside the routed ones (runs: 0.45, 0.51, 0.47, 0.43,
0.36)."""
EAGER_MLA_LAYERS = 1.56
"""Multi-head latent attention in place of grouped-query attention: its low-rank
projections, their norms and DeepSeek's YaRN rotary embedding in PyTorch operators (runs:
1.56, 1.60, 1.56, 1.50, 1.97)."""
EAGER_GROUPED_TOPK_LAYERS = 0.53
"""A grouped top-k router (DeepSeek) in place of a softmax top-k: PyTorch operators for the
group scores, the group mask and the second top-k (runs: 0.56, 0.72, 0.53, 0.47, 0.49)."""


def eager_layers(s: ModelSpec) -> float:
    """An eager decode step's host work over all of ``s``'s layers, in dense layers: each
    layer counts 1, MLA layers more, MoE layers more again (:data:`EAGER_MOE_LAYERS` and the
    ratios beside it)."""
    per_moe_layer = EAGER_MOE_LAYERS
    if s.shared_experts or s.shared_expert_intermediate_size:
        per_moe_layer += EAGER_SHARED_EXPERT_LAYERS
    if s.expert_groups > 1:
        per_moe_layer += EAGER_GROUPED_TOPK_LAYERS
    layers = s.layer_units * (1.0 + (EAGER_MLA_LAYERS if s.is_mla else 0.0))
    return layers + s.moe_layers * per_moe_layer


LORA_MODULES_PER_LAYER = 4
"""Linear layers vLLM wraps for LoRA in each decoder layer, whichever projections an adapter
adapts (``LoRAModelManager`` wraps every supported module of the model): the merged q/k/v,
the attention output, the merged gate/up (every expert's, in a fused MoE layer) and the
down projection."""

LORA_KERNELS_PER_MODULE = 3
"""Kernels vLLM's V1 GPU LoRA path launches per wrapped linear layer and decode step
(``PunicaWrapperGPU.add_lora_linear``: a zeroed fp32 buffer, one ``lora_shrink`` and one
``lora_expand`` over all the layer's slices); vLLM's V0 path (0.6) launches them per slice
(``PunicaWrapper.add_lora_packed_nslice``: q, k, v and gate, up apart)."""

LORA_SLICES_PER_LAYER_V0 = 3 + 1 + 2 + 1
"""Slices of a decoder layer's wrapped linear layers that vLLM's V0 LoRA path loops over."""

DECODE_LAYER_KERNELS = 8
"""Small kernels of a decoder layer besides its GEMMs (norms, rotary, cache write,
activation, residual adds): what ``decode_layer_s`` prices (docs/cost-model.md), so that
``decode_layer_s / DECODE_LAYER_KERNELS`` is one small kernel replayed from a CUDA graph."""

EAGER_LAYER_OPERATORS = 20
"""PyTorch operators a vLLM decoder layer issues in eager mode: what ``eager_layer_s`` prices
(docs/cost-model.md), so that ``eager_layer_s / EAGER_LAYER_OPERATORS`` is one operator."""


def _lora_attention(s: ModelSpec, targets: frozenset[str]) -> list[tuple[int, int]]:
    """(d_in, d_out) of each adapted attention projection of one layer."""
    h = s.hidden_size
    mats: list[tuple[int, int]] = []
    if s.is_mla:
        qk = s.qk_nope_head_dim + s.qk_rope_head_dim
        if "q" in targets:
            if s.q_lora_rank:
                mats += [(h, s.q_lora_rank), (s.q_lora_rank, s.num_heads * qk)]
            else:
                mats.append((h, s.num_heads * qk))
        if targets & {"k", "v"}:  # keys and values share MLA's compressed projection
            mats += [
                (h, s.kv_lora_rank + s.qk_rope_head_dim),
                (s.kv_lora_rank, s.num_heads * (s.qk_nope_head_dim + s.v_head_dim)),
            ]
        if "o" in targets:
            mats.append((s.num_heads * s.v_head_dim, h))
        return mats
    d = s.head_width
    gate = 2 if s.attention_output_gate else 1  # a gated query projection is twice as wide
    widths = {"q": gate * s.num_heads * d, "k": s.num_kv_heads * d, "v": s.num_kv_heads * d}
    mats += [(h, widths[t]) for t in ("q", "k", "v") if t in targets]
    if "o" in targets:
        mats.append((s.num_heads * d, h))
    return mats


def _lora_linear_mixer(s: ModelSpec, targets: frozenset[str]) -> list[tuple[int, int]]:
    """(d_in, d_out) of each adapted projection of one linear-attention mixer: its input
    projections where the attention's q, k and v carry adapters, its output projection
    where o does (peft's ``all-linear`` adapts them all; a Mamba-2 mixer's input one only)."""
    h, key, value = s.hidden_size, linear_key_width(s), linear_value_width(s)
    heads = s.linear_num_value_heads
    mats: list[tuple[int, int]] = []
    if {"q", "k", "v"} <= targets:
        if s.linear_mixer == "mamba2":
            outs = [2 * key + 2 * value + heads]
        elif s.linear_in_projections == 4:
            outs = [2 * key + value, value, heads, heads]
        else:
            outs = [2 * key + 2 * value, 2 * heads]
        mats += [(h, out) for out in outs]
    # A Mamba-2 mixer's output projection carries none: its fused kernel bypasses the module
    # (peft refuses ``out_proj`` on Mamba models; NeMo RL's Nemotron-H recipes exclude it).
    if "o" in targets and s.linear_mixer != "mamba2":
        mats.append((value, h))
    return mats


def _lora_mixers(s: ModelSpec, targets: frozenset[str]) -> list[tuple[int, int]]:
    """Every layer's adapted mixer projections: softmax attention's, linear attention's."""
    mats = s.attention_layers * _lora_attention(s, targets)
    if s.linear_attention_layers:
        mats += s.linear_attention_layers * _lora_linear_mixer(s, targets)
    return mats


def _lora_mlp(
    s: ModelSpec, width: int, targets: frozenset[str], *, expert: bool = False
) -> list[tuple[int, int]]:
    """(d_in, d_out) of each adapted matrix of one MLP or expert (an ungated one has no gate;
    a latent MoE's routed experts read and write the latent width)."""
    h = s.expert_input_size if expert else s.hidden_size
    mats = [(h, width) for t in ("gate", "up") if t in targets and (s.gated_mlp or t == "up")]
    if "down" in targets:
        mats.append((width, h))
    return mats


def _lora_latent(s: ModelSpec, targets: frozenset[str]) -> list[tuple[int, int]]:
    """(d_in, d_out) of a latent MoE's adapted projections: down to the latent width with the
    experts' up projections, back with their down ones (peft's all-linear adapts both)."""
    if not s.moe_latent_size:
        return []
    mats = [(s.hidden_size, s.moe_latent_size)] if "up" in targets else []
    if "down" in targets:
        mats.append((s.moe_latent_size, s.hidden_size))
    return mats


def lora_params(s: ModelSpec, rank: int, targets: tuple[str, ...], *, active: bool = False) -> int:
    """Adapter weights of every adapted projection: ``rank x (d_in + d_out)`` each.

    Every block's attention projections in ``targets``; its MLP's, or in an MoE
    layer every routed expert's (``active``: the ``experts_per_token`` a token
    uses, for FLOPs) and the shared experts'. The router and the output head
    carry none (peft's ``all-linear`` leaves the head out).
    """
    wanted = frozenset(targets)
    total = sum(a + b for a, b in _lora_mixers(s, wanted))
    total += s.dense_mlp_layers * sum(a + b for a, b in _lora_mlp(s, s.intermediate_size, wanted))
    if s.is_moe:
        experts = s.experts_per_token if active else s.num_experts
        expert = sum(a + b for a, b in _lora_mlp(s, s.moe_intermediate_size, wanted, expert=True))
        shared = s.shared_experts * sum(a + b for a, b in _lora_mlp(s, _shared_width(s), wanted))
        latent = sum(a + b for a, b in _lora_latent(s, wanted))
        total += s.moe_layers * (experts * expert + shared + latent)
    return rank * total


def lora_tensors(s: ModelSpec, targets: tuple[str, ...]) -> int:
    """Tensors of the adapter checkpoint (an A and a B per adapted projection): what a
    tensor-by-tensor sync of the adapters sends one at a time."""
    wanted = frozenset(targets)
    mlp = len(_lora_mlp(s, s.intermediate_size, wanted))
    matrices = len(_lora_mixers(s, wanted)) + s.dense_mlp_layers * mlp
    if s.is_moe:
        matrices += s.moe_layers * (s.num_experts + s.shared_experts) * mlp
        matrices += s.moe_layers * len(_lora_latent(s, wanted))
    return 2 * matrices


def lora_decode_kernels(vllm_v0: bool) -> int:
    """Kernels vLLM's LoRA path adds to one decoder layer per decode step."""
    if vllm_v0:
        return LORA_KERNELS_PER_MODULE * LORA_SLICES_PER_LAYER_V0
    return LORA_KERNELS_PER_MODULE * LORA_MODULES_PER_LAYER


# What LoRA adapters move beside their two small matmuls, per token and adapted projection:
# the scaling and the sum over the projection's output in the forward; the backward's
# scaling of the output gradient and the sum of the input gradients of the two paths.
# Measured with peft 0.21.2's own LoRA Linear on Qwen2/Qwen3 layers on the CPU
# (``bench/lora_bytes.py``: exact, every shape and rank); Megatron-Bridge's LoRALinear runs
# the same two operators (its adapter's scaling, then ``linear_output + adapter_output``).
LORA_EAGER_FORWARD_OUT = 10.0
"""Forward bytes per element of an adapted projection's output width (scale 4, sum 6)."""
LORA_EAGER_BACKWARD_OUT = 4.0
"""Backward bytes per element of its output width (the gradient's scaling)."""
LORA_EAGER_BACKWARD_IN = 6.0
"""Backward bytes per element of its input width (the two input gradients summed)."""


def lora_elementwise_bytes(s: ModelSpec, targets: tuple[str, ...]) -> tuple[float, float]:
    """(forward, backward) bytes per token per layer (averaged over the layers) that LoRA
    adapters' non-matmul operators move; an MoE layer counts the experts a token uses."""
    wanted = frozenset(targets)
    mats = _lora_mixers(s, wanted)
    mats += s.dense_mlp_layers * _lora_mlp(s, s.intermediate_size, wanted)
    if s.is_moe:
        routed = _lora_mlp(s, s.moe_intermediate_size, wanted, expert=True)
        per_token = s.experts_per_token * routed + _lora_latent(s, wanted)
        per_token += s.shared_experts * _lora_mlp(s, _shared_width(s), wanted)
        mats += s.moe_layers * per_token
    d_out = sum(b for _, b in mats) / s.num_layers
    d_in = sum(a for a, _ in mats) / s.num_layers
    return (
        LORA_EAGER_FORWARD_OUT * d_out,
        LORA_EAGER_BACKWARD_OUT * d_out + LORA_EAGER_BACKWARD_IN * d_in,
    )


# What peft's LoRA adapters add to a layer's host work in eager PyTorch, in layers' worth
# (``layer_s``): ``bench/layer_overhead.py --lora RANK`` times a frozen Qwen2 stack and the
# same stack with adapters on every projection in turns, on one CPU thread, at ranks small
# enough (4 and 8) that the adapters' own arithmetic does not count; each adapted projection's
# forward is a Python wrapper around two more linears, a scaling and a sum.
LORA_HOST_FORWARD = 0.79
"""Extra host work of a forward pass (ratio adapted / frozen 1.786 at rank 4, 1.791 at 8)."""
LORA_HOST_TRAIN = 0.94
"""Extra host work of a forward + backward pass (1.955 at rank 4, 1.926 at 8)."""


# What verl's entropy over the logits (``entropy_from_logits``: a softmax, its product with the
# logits, a log-sum-exp) holds over the bf16 logits at its peak, per logit: measured with verl
# 0.5.0's own function on the CPU, every storage its operators create tracked until freed
# (``bench/logits_memory.py``: exact for every shape).
ENTROPY_FORWARD_BYTES = 4.0
"""A forward pass (the softmax and its product with the logits, both bf16)."""
ENTROPY_TRAIN_BYTES = 12.0
"""A forward + backward pass (their gradients and the logits' gradient come on top)."""
ENTROPY_COMPILED_TRAIN_BYTES = 4.0
"""A forward + backward pass of the entropy ``torch.compile``d, as verl's FSDP actor runs it
by default (``use_torch_compile``): Inductor keeps no softmax for the backward, which
recomputes it; the peak is the forward's one fp32 buffer of the normalised exponentials
(4 bytes), the backward's bf16 gradient (2) coming after it is freed. MEASURED on the CPU
with verl 0.5.0's function (``bench/logits_memory.py --compiled``: 4.00 training and 4.00
forward, the eager function 4.00 and 12.00 by the same resident-peak method); Inductor's
CUDA code is not measured."""


# What the plain log-prob path (``torch.log_softmax(logits.float(), -1)`` and a gather of the
# targets) holds at its peak, per logit, the model's bf16 logits included: measured on the CPU,
# every storage its operators create tracked until freed (``bench/logits_memory.py --plain``:
# 8 and 12 bytes over the logits at every shape), and on one H200 (``bench/gpu_pass_speed.py``:
# a 1,024-token log-prob pass's peak above the weights, 1.56 GB at every model size, is
# 1,024 x 151,936 logits x 10 bytes).
PLAIN_LOGPROB_FORWARD_BYTES = 10.0
"""A forward pass: bf16 logits (2), their fp32 copy (4) and the fp32 log-softmax (4)."""
PLAIN_LOGPROB_TRAIN_BYTES = 14.0
"""A forward + backward pass: the log-softmax's gradient and its input's come on top, less the
fp32 copy freed after the forward."""


# The same path followed by the entropy of the logits in fp32 (ROLL's entropy_from_logits: an
# fp32 copy, its softmax, their product and a log-sum-exp), which ROLL's log-prob passes always
# take for their metrics and its training takes with ``entropy_loss_coef`` > 0: measured the
# same way (``bench/logits_memory.py --plain``: 12 and 32 bytes over the logits), the bf16
# logits included.
PLAIN_ENTROPY_FORWARD_BYTES = 14.0
"""A forward pass: the log-probs' fp32 tensors are freed before the entropy's 12 bytes."""
PLAIN_ENTROPY_TRAIN_BYTES = 34.0
"""A forward + backward pass with the entropy in the loss: autograd keeps both paths' fp32
tensors for the backward."""
