"""Cost terms of the estimator against values computed by hand from the config's inputs and
the documented default efficiencies (rlplex/estimate/data/efficiency.yaml).

The ``base`` fixture (tests/estimate/conftest.py) is llama-3.1-8b on one node of 8 H100:
989.5 TFLOPS, 3,350 GB/s of HBM, 85.52 GB; host copies at 64 x 0.8 = 51.2 GB/s, NVLink at
450 x 0.8 = 360 GB/s, the network across nodes at 50 x 0.8 = 40 GB/s (one NIC per GPU).
Its step: 64 prompts x 4 samples = 256 sequences of 100 + 300 tokens on average (200 + 600
at most), micro-batches of 2 sequences.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate import formulas as f
from rlplex.estimate.estimator import Estimate, estimate_config
from rlplex.estimate.specs import model_presets
from rlplex.estimate.states import generate_transient_gb

P = 8_030_261_248  # llama-3.1-8b parameters (tests/estimate/test_formulas.py)
H100 = 989.5e12  # peak bf16 FLOP/s; the size factors' reference GPU, so their halves stay
HBM = 3350e9  # bytes/s
HOST = 64 * 0.8  # GB/s per device, host link
NVLINK = 450 * 0.8  # GB/s per device
NETWORK = 50 * 0.8  # GB/s per device across nodes

# Default efficiencies (efficiency.yaml).
TRAIN = FORWARD = PREFILL = 0.6
WIDTH_HALF = 1024
TOKENS_HALF = 512
MOE_IMBALANCE = 1.25
DECODE_STEP_S = 0.0041
DECODE_LAYER_S = 3e-5
DECODE_MOE_LAYER_S = 3e-5
ALLREDUCE_S = 1e-5
LOGITS_BYTES = 16

SEQUENCES = 256
PADDED = 200 + 600  # tokens of every sequence with ``packing: false``
PACKED = 100 + 300  # mean tokens of a packed sequence


def _estimate(config: dict[str, Any]) -> Estimate:
    return estimate_config(config_from_dict(copy.deepcopy(config), file="t.yaml"))


def _size(width: float, tokens: float) -> float:
    """Width and micro-batch factors of the default efficiencies on an H100."""
    return width / (width + WIDTH_HALF) * tokens / (tokens + TOKENS_HALF)


def _moe(base: dict[str, Any]) -> None:
    """qwen3-30b-a3b (hidden 2,048, 48 MoE layers of 128 experts, 8 per token, each 768 wide);
    the trainer sharded so that it fits."""
    base["model"] = "qwen3-30b-a3b"
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}


def test_parameter_offload_loads_weights_each_pass_and_writes_back_after_training(
    base: dict[str, Any],
) -> None:
    """Offloaded parameters cross the host link once per pass: loaded for a log-prob pass,
    loaded and written back (every weight is trained) for a train pass."""
    plain = _estimate(base)
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "offload_params": True}
    base["roles"]["reference"]["parallel"] = {"fsdp": True, "offload_params": True}
    est = _estimate(base)
    trainer_gb = P * 2 / 1e9  # bf16, whole on every rank (zero 1)
    reference_gb = P * 2 / 8 / 1e9  # bf16, FSDP over 8 ranks
    assert est.stages["ref_logprob"].detail["param_offload_s"] == pytest.approx(reference_gb / HOST)
    assert est.stages["old_logprob"].detail["param_offload_s"] == pytest.approx(trainer_gb / HOST)
    assert est.stages["train"].detail["param_offload_s"] == pytest.approx(
        trainer_gb / HOST * (1 + 1)
    )
    # The load is overhead and nothing else moves.
    for name, gb in (("ref_logprob", reference_gb), ("old_logprob", trainer_gb)):
        assert est.stages[name].terms["overhead"] == pytest.approx(
            plain.stages[name].terms["overhead"] + gb / HOST
        )


def test_every_optimizer_step_reads_and_writes_the_states(base: dict[str, Any]) -> None:
    """Two optimizer steps (``mini_batches: 2``) read and write weights, grads and optimizer
    state twice at 0.7 of HBM bandwidth (a fused Adam: ``optimizer_fused``); the logits'
    traffic does not depend on the steps."""
    base["workload"]["mini_batches"] = 2
    train = _estimate(base).stages["train"]
    # zero 1: each rank steps its 1/8 of the bf16 weights from its 1/8 of the bf16 grads,
    # with AdamW's 12 bytes per parameter over dp 8.
    states_gb = P * 2 / 8 / 1e9 + P * 2 / 8 / 1e9 + P * 12 / 8 / 1e9
    one_step = 2 * states_gb * 1e9 / (HBM * 0.7)
    # LM head logits: each rank's 256 x 400 / 8 tokens x 128,256 entries x 16 bytes, 3 passes.
    logits = 3 * SEQUENCES * PACKED / 8 * 128_256 * LOGITS_BYTES / HBM
    assert train.terms["memory"] == pytest.approx(2 * one_step + logits)
    assert train.detail["optimizer_steps"] == 2
    # ZeRO-2 holds only its gradient shard: its optimizer step reads the same bytes (its
    # eager DeepSpeed layers add their own traffic, so compare the two steps' difference).
    base["roles"]["actor_train"]["parallel"] = {"zero": 2}
    zero2 = _estimate(base).stages["train"]
    base["roles"]["actor_train"]["parallel"] = {"zero": 2, "cpu_optimizer": True}
    no_gpu_step = _estimate(base).stages["train"]
    assert zero2.terms["memory"] - no_gpu_step.terms["memory"] == pytest.approx(2 * one_step)


def test_a_distributed_optimizer_steps_its_dense_and_expert_shards(base: dict[str, Any]) -> None:
    """Megatron's distributed optimizer at ep 8 on 8 GPUs: each rank steps 1/8 of the dense
    weights (dp 8) and all of its own experts (expert data parallel 1), from the same share
    of its bf16 gradients, with its AdamW shard."""
    _moe(base)
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "ep": 8}
    train = _estimate(base).stages["train"]
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "ep": 8, "cpu_optimizer": True}
    no_gpu_step = _estimate(base).stages["train"]
    spec = model_presets()["qwen3-30b-a3b"]
    experts = 48 * 128 * 3 * 2048 * 768
    dense = f.total_params(spec) - experts
    own = dense / 8 + experts / 8  # the rank's shard of weights and grads
    optimizer = own * 12  # fp32 master weights and two moments
    step = 2 * (own * 2 + own * 2 + optimizer) / (HBM * 0.7)
    assert train.terms["memory"] - no_gpu_step.terms["memory"] == pytest.approx(step)


def test_a_second_epoch_doubles_the_training_flops_and_micro_batches(
    base: dict[str, Any],
) -> None:
    """Each epoch runs forward and backward (3 x forward FLOPs) over the step's tokens again,
    in as many micro-batches, at the same efficiency."""
    base["workload"]["packing"] = False
    base["workload"]["epochs"] = 2
    train = _estimate(base).stages["train"]
    spec = model_presets()["llama-3.1-8b"]
    fwd = f.forward_flops(spec, PADDED) * SEQUENCES
    assert train.flops == pytest.approx(3 * fwd * 2)
    eff = TRAIN * _size(4096, 2 * PADDED)
    assert train.detail["efficiency"] == pytest.approx(eff)
    assert train.terms["compute"] == pytest.approx(3 * fwd * 2 / (8 * H100 * eff))
    # 256 x 800 tokens over 8 ranks in micro-batches of 2 x 800: 16 per epoch.
    assert train.detail["micro_batches_per_rank"] == 2 * 16
    assert train.detail["tokens"] == pytest.approx(2 * SEQUENCES * PADDED)


def test_sequence_parallel_splits_each_micro_batch_over_its_ranks(base: dict[str, Any]) -> None:
    """Under sequence (context) parallel a micro-batch's tokens split over the sp ranks, so
    each GPU's matmuls run on fewer tokens (a lower micro-batch factor), and the data-parallel
    groups are devices / (tp x pp x sp)."""
    base["workload"]["packing"] = False
    base["roles"]["actor_train"]["parallel"] = {"zero": 1, "tp": 2, "sp": 2}
    train = _estimate(base).stages["train"]
    spec = model_presets()["llama-3.1-8b"]
    fwd = f.forward_flops(spec, PADDED) * SEQUENCES
    assert train.detail["micro_batch_tokens"] == 2 * PADDED
    eff = TRAIN * _size(4096, 2 * PADDED / 2)  # 800 tokens per GPU
    assert train.detail["efficiency"] == pytest.approx(eff)
    assert train.terms["compute"] == pytest.approx(3 * fwd / (8 * H100 * eff))
    # 8 // (2 x 1 x 2) = 2 groups, each 256 x 800 / 2 tokens in micro-batches of 1,600.
    groups = 8 // (2 * 1 * 2)
    assert train.detail["group_tokens_per_sync"] == pytest.approx(SEQUENCES * PADDED / groups)
    assert train.detail["micro_batches_per_rank"] == SEQUENCES * PADDED / groups / (2 * PADDED)


def test_expert_parallel_routes_every_ranks_tokens_to_its_experts(base: dict[str, Any]) -> None:
    """With the experts over ep ranks each rank's experts receive the tokens of all ep ranks:
    ``mb_tokens / tp x k x ep / E`` per expert, so ep 4 makes the experts' grouped GEMMs
    four times fuller than ep 1."""
    _moe(base)
    base["workload"]["packing"] = False  # every sequence 800 tokens: no straggler
    base["roles"]["reference"]["parallel"] = {"fsdp": True, "ep": 4}
    ref = _estimate(base).stages["ref_logprob"]
    spec = model_presets()["qwen3-30b-a3b"]
    fwd = f.forward_flops(spec, PADDED) * SEQUENCES
    mb = 2 * PADDED  # 1,600 tokens, tp 1
    eff = FORWARD * _size(2048, mb)
    assert ref.detail["efficiency"] == pytest.approx(eff)
    routed = 48 * 8 * 3 * 2048 * 768  # MoE layers x k x SwiGLU of hidden 2,048, width 768
    share = routed / f.active_params(spec)
    per_expert = mb / 1 * 8 * 4 / 128  # 400 tokens
    slower = _size(2048, mb) / _size(768, per_expert)
    scale = 1 - share + share * slower * MOE_IMBALANCE
    assert ref.detail["straggler"] == 1.0
    assert ref.terms["compute"] == pytest.approx(fwd / (8 * H100 * eff) * scale)


def test_expert_all_to_all_across_nodes_uses_the_network(base: dict[str, Any]) -> None:
    """Dispatch and combine send each token's hidden state to its k experts' ranks and back
    in every MoE layer, the (ep-1)/ep that leaves the rank: over NVLink within a node, over
    the network once the ep group leaves its NVLink fabric (a log-prob pass: one pass)."""
    _moe(base)
    base["workload"]["packing"] = False
    tokens = SEQUENCES * PADDED

    def all_to_all(devices: int, ep: int, gb_per_s: float) -> float:
        per_device = tokens / devices
        sent = 2 * per_device * 8 * 2048 * 2 * 48 * (ep - 1) / ep  # k 8, hidden 2,048, bf16
        return sent / (gb_per_s * 1e9)

    base["roles"]["reference"]["parallel"] = {"fsdp": True, "ep": 8}
    within = _estimate(base).stages["ref_logprob"]
    assert within.detail["expert_all_to_all_s"] == pytest.approx(all_to_all(8, 8, NVLINK))
    # ep 16 over two nodes of 8 GPUs: the network.
    base["cluster"]["nodes"] = 2
    base["roles"]["reference"]["devices"] = "0-15"
    base["roles"]["reference"]["parallel"] = {"fsdp": True, "ep": 16}
    apart = _estimate(base).stages["ref_logprob"]
    assert apart.detail["expert_all_to_all_s"] == pytest.approx(all_to_all(16, 16, NETWORK))


def test_training_moves_the_all_to_alls_forward_and_back(base: dict[str, Any]) -> None:
    """The backward of a dispatch or combine is one all-to-all of the same size (the
    activations' gradients): a train pass moves twice a forward's traffic, three times with
    recomputation, though its FLOPs are three and four forwards."""
    _moe(base)
    base["workload"]["packing"] = False
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True, "ep": 8}
    per_device = SEQUENCES * PADDED / 8
    forward = 2 * per_device * 8 * 2048 * 2 * 48 * 7 / 8 / (NVLINK * 1e9)
    train = _estimate(base).stages["train"]
    assert train.detail["expert_all_to_all_s"] == pytest.approx(2 * forward)
    base["roles"]["actor_train"]["parallel"]["recompute"] = True
    again = _estimate(base).stages["train"]
    assert again.detail["expert_all_to_all_s"] == pytest.approx(3 * forward)


def test_tensor_parallel_collectives_across_nodes_use_the_network(base: dict[str, Any]) -> None:
    """A tensor-parallel group larger than a node's NVLink exchanges its activations (four
    all-gathers / reduce-scatters of tokens x hidden per layer in a forward) over the
    network."""
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "h100"}
    tokens = SEQUENCES * PACKED

    def one_way(tp: int, gb_per_s: float) -> float:
        dp = 8 // tp
        per_device = 4 * 32 * tokens / dp * 4096 * 2 * (tp - 1) / tp  # bf16
        return per_device / (gb_per_s * 1e9)

    base["roles"]["reference"]["parallel"] = {"tp": 8}
    across = _estimate(base).stages["ref_logprob"]
    assert across.detail["tp_activation_s"] == pytest.approx(one_way(8, NETWORK))
    base["roles"]["reference"]["parallel"] = {"tp": 4}
    within = _estimate(base).stages["ref_logprob"]
    assert within.detail["tp_activation_s"] == pytest.approx(one_way(4, NVLINK))


def test_decode_floor_of_a_pipeline_parallel_engine(base: dict[str, Any]) -> None:
    """A pipeline-parallel engine keeps pp micro-batches in flight, each through every stage
    once a step: each device runs its stage's layers pp times a step, so every layer's
    small kernels count (as without pp), plus pp hand-offs; tensor parallel adds two
    all-reduces per layer, at the latency within its own group."""
    base["roles"]["actor_infer"]["parallel"] = {"tp": 1, "pp": 2}
    floor = _estimate(base).stages["generate"].detail["step_floor_s"]
    assert floor == pytest.approx(DECODE_STEP_S + DECODE_LAYER_S * 32 + 2 * ALLREDUCE_S)
    base["roles"]["actor_infer"]["num_gpus_per_worker"] = 4
    base["roles"]["actor_infer"]["parallel"] = {"tp": 2, "pp": 2}
    both = _estimate(base).stages["generate"].detail["step_floor_s"]
    assert both == pytest.approx(
        DECODE_STEP_S + DECODE_LAYER_S * 32 + 2 * 32 * ALLREDUCE_S + 2 * ALLREDUCE_S
    )
    # Stages across two 4-GPU nodes: the hand-offs cross them, tp 2 all-reduces do not.
    base["cluster"] = {"nodes": 2, "gpus_per_node": 4, "gpu": "h100"}
    base["roles"]["actor_infer"]["num_gpus_per_worker"] = 8
    base["roles"]["actor_infer"]["parallel"] = {"tp": 2, "pp": 4}
    apart = _estimate(base).stages["generate"].detail["step_floor_s"]
    cross_host = 0.008  # the engine spans hosts: its per-step messages between them
    assert apart == pytest.approx(
        DECODE_STEP_S + DECODE_LAYER_S * 32 + 2 * 32 * ALLREDUCE_S + 4 * 5e-5 + cross_host
    )


def test_a_pipeline_parallel_engine_reads_its_weights_once_per_micro_batch(
    base: dict[str, Any],
) -> None:
    """Each device holds 1/(tp x pp) of the weights and reads them once per micro-batch in
    flight (pp a step): a step's weight reads are W / tp per device, as without pp."""
    base["roles"]["actor_infer"]["parallel"] = {"tp": 1, "pp": 2}
    gen = _estimate(base).stages["generate"]
    d = gen.detail
    per_device = (P - 128_256 * 4096 + d["mean_batch"] * 4096) * 2  # W / tp, bf16, tp 1
    replicas = d["replicas"]
    assert gen.bytes == pytest.approx(d["decode_steps"] * per_device * 2 * replicas, rel=1e-6)


def test_decode_floor_of_an_expert_parallel_engine(base: dict[str, Any]) -> None:
    """An expert-parallel engine dispatches and combines each MoE layer's tokens: two
    all-to-all latencies per MoE layer and decode step."""
    _moe(base)
    base["roles"]["actor_infer"]["num_gpus_per_worker"] = 1
    base["roles"]["actor_infer"]["parallel"] = {"tp": 1, "ep": 2}
    floor = _estimate(base).stages["generate"].detail["step_floor_s"]
    assert floor == pytest.approx(
        DECODE_STEP_S + DECODE_LAYER_S * 48 + DECODE_MOE_LAYER_S * 48 + 2 * 48 * ALLREDUCE_S
    )
    # Replicas of one GPU whose expert-parallel group spans two nodes: the all-to-alls pay
    # the latency across nodes though each replica sits on one GPU.
    base["cluster"]["nodes"] = 2
    base["roles"]["actor_infer"]["devices"] = "0-15"
    base["roles"]["actor_infer"]["parallel"] = {"tp": 1, "ep": 16}
    floor = _estimate(base).stages["generate"].detail["step_floor_s"]
    assert floor == pytest.approx(
        DECODE_STEP_S + DECODE_LAYER_S * 48 + DECODE_MOE_LAYER_S * 48 + 2 * 48 * 5e-5
    )


def test_decode_reads_the_experts_a_batch_touches() -> None:
    """A decode step of b sequences reads the dense weights and, per MoE layer, the experts its
    tokens route to: E x (1 - (1 - k/E)**b) of them under uniform routing."""
    spec = model_presets()["qwen3-30b-a3b"]
    touched = 128 * (1 - (1 - 8 / 128) ** 16)
    assert touched == pytest.approx(82.42, abs=0.01)
    assert f.expected_experts_touched(spec, 16) == pytest.approx(touched)
    assert f.expected_experts_touched(spec, 1) == pytest.approx(8)
    expert = 3 * 2048 * 768  # one SwiGLU expert
    # The untied embedding table is a lookup: a step reads its batch's rows, not the table.
    dense = f.total_params(spec) - 48 * 128 * expert - 151_936 * 2048
    assert f.decode_weight_bytes(spec, 16, "bf16") == pytest.approx(
        (dense + 16 * 2048 + 48 * touched * expert) * 2
    )
    assert f.decode_weight_bytes(spec, 1, "fp8") == pytest.approx(dense + 2048 + 48 * 8 * expert)
    # A tied table is the LM head too: read whole.
    tied = model_presets()["qwen2.5-0.5b"]
    assert tied.tied_embeddings
    assert f.decode_weight_bytes(tied, 8, "bf16") == pytest.approx(f.total_params(tied) * 2)


def test_a_stage_efficiency_factor_scales_only_its_stage(base: dict[str, Any]) -> None:
    """``efficiency.stages.NAME`` multiplies that stage's efficiency: 0.5 doubles its compute
    exactly and leaves the other stages alone."""
    base["workload"]["packing"] = False
    base["efficiency"] = {"stages": {"train": 0.5, "generate": 0.5}}
    est = _estimate(base)
    spec = model_presets()["llama-3.1-8b"]
    fwd = f.forward_flops(spec, PADDED) * SEQUENCES
    eff = TRAIN * 0.5 * _size(4096, 2 * PADDED)
    assert est.stages["train"].detail["efficiency"] == pytest.approx(eff)
    assert est.stages["train"].terms["compute"] == pytest.approx(3 * fwd / (8 * H100 * eff))
    old = est.stages["old_logprob"]
    assert old.terms["compute"] == pytest.approx(fwd / (8 * H100 * FORWARD * _size(4096, 1600)))
    # Generation's prefill: the replica's 64 prompts of 100 tokens on tp 2.
    gen = est.stages["generate"].detail
    eff_prefill = PREFILL * 0.5 * 4096 / (4096 + WIDTH_HALF)
    assert gen["eff_prefill"] == pytest.approx(eff_prefill)
    assert gen["prefill_s"] == pytest.approx(
        f.forward_flops(spec, 100) * 64 / (2 * H100 * eff_prefill)
    )


def test_kv_cache_is_capped_by_the_engines_memory_share(base: dict[str, Any]) -> None:
    """An engine allocates the KV cache its batch needs only as far as its share of the GPU
    (``gpu_memory_utilization``, 0.9) leaves after weights and a prefill chunk's
    activations."""
    base["workload"]["prompts_per_step"] = 2048  # 8,192 sequences: 2,048 per replica
    est = _estimate(base)
    spec = model_presets()["llama-3.1-8b"]
    weights_gb = P * 2 / 2 / 1e9  # tp 2
    assert est.roles["actor_infer"].states["weights"] == pytest.approx(weights_gb)
    # 2,048 sequences per replica at 200 + 600 tokens, 131,072 / 2 bytes a token at tp 2
    need = 2048 * (200 + 600) * 131_072 / 2 / 1e9
    room = 0.9 * 85.52 - weights_gb - generate_transient_gb(spec, "bf16", 2, 1)
    assert need > room
    assert est.roles["actor_infer"].states["kv_cache"] == pytest.approx(room)
    base["roles"]["actor_infer"]["rollout"] = {"gpu_memory_utilization": 0.8}
    lower = _estimate(base).roles["actor_infer"].states["kv_cache"]
    assert lower == pytest.approx(room - 0.1 * 85.52)


def test_a_role_giving_some_states_keeps_the_estimates_of_the_others(
    base: dict[str, Any],
) -> None:
    """An engine that gives its KV cache still holds its estimated weights: the weight sync
    moves them (it moved none when any state was given)."""
    plain = _estimate(base).stages["weight_sync"]
    base["roles"]["actor_infer"]["states"] = {"kv_cache": 10}
    given = _estimate(base).stages["weight_sync"]
    assert given.detail["gb_per_device"] == pytest.approx(P * 2 / 2 / 1e9)  # bf16 over tp 2
    assert given.seconds == pytest.approx(plain.seconds)


def test_recomputation_gathers_no_third_copy_of_the_weights(base: dict[str, Any]) -> None:
    """FSDP gathers the weights for the forward and for the backward; the recomputed forward
    runs on the backward's copy, so recomputation adds FLOPs but no data-parallel bytes."""
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    plain = _estimate(base).stages["train"]
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True, "recompute": True}
    again = _estimate(base).stages["train"]
    assert again.bytes == pytest.approx(plain.bytes)
    assert again.detail["comm_s"] == pytest.approx(plain.detail["comm_s"])
    assert again.flops == pytest.approx(plain.flops * 4 / 3)


def test_moe_layers_keep_their_routed_copies_for_the_backward() -> None:
    """Per token and layer: 4h of norms, q and attention output (2 x 32 x 128), k and v
    (2 x 4 x 128), 4 x the experts' width (8 x 768), and the k = 8 routed copies of the
    hidden state, in (the grouped GEMM's saved input) and out (the weighted combine's)."""
    spec = model_presets()["qwen3-30b-a3b"]
    h = 2048
    by_hand = 4 * h + 2 * 32 * 128 + 2 * 4 * 128 + 4 * 8 * 768 + 2 * 8 * h
    assert f.layer_activation_elements(spec) == by_hand
    # Megatron's fused bias-SwiGLU keeps its input and the product: 3 x 8 x 768.
    assert f.layer_activation_elements(spec, swiglu_tensors=3) == by_hand - 8 * 768


def test_the_first_pipeline_stage_holds_its_micro_batches_in_flight() -> None:
    """1F1B: the first of pp stages runs min(pp, m) forwards before its first backward, so
    it holds that many micro-batches' activations of its L/pp layers; the last stage holds
    one and the logits; the peak is the larger."""
    spec = model_presets()["llama-3.1-8b"]
    tokens, tp, pp = 4096, 2, 4
    # Fused (Megatron) kernels: SwiGLU keeps 3 tensors of its 14,336 width, not 4.
    per_layer = f.layer_activation_elements(spec, swiglu_tensors=3) * 2 * tokens
    stored = 32 / pp * per_layer
    logits = tokens * 128_256 * 8  # fp32 logits and their gradient
    one = f.activation_bytes(spec, tokens, tp=tp, pp=pp)
    assert one == pytest.approx((stored + logits) / tp)
    four = f.activation_bytes(spec, tokens, tp=tp, pp=pp, in_flight=4)
    assert four == pytest.approx(max(4 * stored, stored + logits) / tp)
    assert four > one
    # With recomputation a stage keeps each layer's input (h a token) per micro-batch in
    # flight, and one layer's full set while it recomputes.
    checkpoints = 32 / pp * 4096 * 2 * tokens
    again = f.activation_bytes(spec, tokens, tp=tp, pp=pp, recompute=True, in_flight=4)
    assert again == pytest.approx(
        max(4 * checkpoints + per_layer, checkpoints + per_layer + logits) / tp
    )


def test_a_pipelined_trainer_sizes_its_first_stage_for_pp_micro_batches(
    base: dict[str, Any],
) -> None:
    """The train stage's transient memory holds min(pp, m) micro-batches: 2 stages with
    32 micro-batches a step hold 2 on the first stage."""
    base["workload"]["packing"] = False
    base["roles"]["actor_train"]["parallel"] = {"pp": 2, "zero": 1}
    train = _estimate(base).stages["train"]
    # 256 sequences over 4 data-parallel groups, 2 a micro-batch, one optimizer step.
    assert train.detail["micro_batches_per_rank"] == 32
    spec = model_presets()["llama-3.1-8b"]
    expected = f.activation_bytes(spec, 2 * 800, pp=2, in_flight=2) / 1e9
    assert train.memory_gb == pytest.approx(expected, rel=1e-6)


def test_without_sequence_parallel_each_tp_rank_keeps_the_norms_whole() -> None:
    """Megatron's tensor parallel without sequence parallel splits attention and MLP
    activations over tp but keeps the norms' inputs and outputs (4h a token and layer) whole
    on every rank (Korthikanti et al. 2022: 10sbh + 24sbh/t); recomputation's checkpoints
    (each layer's input, h) are whole too."""
    spec = model_presets()["llama-3.1-8b"]
    tokens, tp = 4096, 4
    split = f.activation_bytes(spec, tokens, tp=tp)
    whole = f.activation_bytes(spec, tokens, tp=tp, sequence_parallel=False)
    assert whole - split == pytest.approx(32 * 4 * 4096 * 2 * tokens * (tp - 1) / tp)
    again = f.activation_bytes(spec, tokens, tp=tp, recompute=True, sequence_parallel=False)
    split_again = f.activation_bytes(spec, tokens, tp=tp, recompute=True)
    checkpoints = 32 * 4096 * 2 * tokens
    one_layer = 4 * 4096 * 2 * tokens
    assert again - split_again == pytest.approx((checkpoints + one_layer) * (tp - 1) / tp)
    assert f.activation_bytes(spec, tokens, sequence_parallel=False) == pytest.approx(
        f.activation_bytes(spec, tokens)
    )  # no tensor parallel: nothing to split


def test_sharded_ranks_wait_for_the_fullest_micro_batch(base: dict[str, Any]) -> None:
    """FSDP ranks meet at every layer's gather, so a micro-batch cut by count (2 sequences)
    waits for the rank whose pair is longest: 1 + z_8 x s / (sqrt(2) m), with z_8 Blom's
    expected maximum of 8 normal draws and m, s the sequence length's mean and spread (prompt
    100 + the default shape of mean 300, max 600). ZeRO-1 ranks meet once a step; a token
    budget balances the micro-batches."""
    import statistics as stats

    from rlplex.estimate.lengths import response_lengths

    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    train = _estimate(base).stages["train"]
    dist = response_lengths(300, 600)
    spread = math.sqrt(dist.mean_square() - 300**2)
    z = stats.NormalDist().inv_cdf((8 - 0.375) / (8 + 0.25))
    assert train.detail["straggler"] == pytest.approx(1 + z * spread / (math.sqrt(2) * 400))
    assert train.detail["straggler"] > 1.2
    base["roles"]["actor_train"]["parallel"] = {"zero": 1}
    assert _estimate(base).stages["train"].detail["straggler"] == pytest.approx(1.0, abs=0.02)
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    base["workload"]["micro_batch_tokens"] = 800
    assert _estimate(base).stages["train"].detail["straggler"] < 1.05


def test_mla_decodes_absorbed() -> None:
    """vLLM decodes MLA with the up-projections absorbed: each of DeepSeek-V3's 128 heads
    scores the cached latent and rope key (512 + 64) and sums the latent (512) per key, not
    the prefill's 128 + 64 + 128 per head."""
    spec = model_presets()["deepseek-v3"]
    assert f.decode_attention_width(spec) == 128 * (512 + 64 + 512)
    assert f.attention_width(spec) == 128 * (128 + 64 + 128)
    assert f.decode_token_flops(spec, 1000) == pytest.approx(
        f.token_flops(spec) + 2 * 128 * 1088 * 61 * 1000
    )
    dense = model_presets()["llama-3.1-8b"]
    assert f.decode_attention_width(dense) == f.attention_width(dense)


def test_an_fsdp_trainer_steps_torch_adamw_at_its_own_bandwidth(base: dict[str, Any]) -> None:
    """Under FSDP the step is PyTorch's multi-tensor AdamW (``optimizer_foreach``, 0.28 of the
    bandwidth, measured by bench/gpu_pass_speed.py); Megatron's and DeepSpeed's fused Adam
    (``optimizer_fused``, 0.7). Each rank steps its 1/8 of every state (FSDP shards them)."""
    base["roles"]["actor_train"]["parallel"] = {"fsdp": True}
    fsdp = _estimate(base).stages["train"]
    states_gb = (P * 2 + P * 2 + P * 12) / 8 / 1e9
    assert fsdp.detail["optimizer_s"] == pytest.approx(2 * states_gb * 1e9 / (HBM * 0.28))
    base["efficiency"] = {"optimizer_foreach": 0.5}
    faster = _estimate(base).stages["train"]
    assert faster.detail["optimizer_s"] == pytest.approx(fsdp.detail["optimizer_s"] * 0.28 / 0.5)
