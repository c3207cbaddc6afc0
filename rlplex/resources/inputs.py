"""The config sections the estimator reads: workload, per-role parallelism and precision.

They live here, apart from the estimator's formulas, because the config
loader and the importers (ROLL, RLinf, verl) fill them in without needing the
formulas. All of them are optional: a config without them plans from the
``seconds`` and ``states`` it gives.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

Precision = Literal["bf16", "fp16", "fp32", "fp8"]
OptimizerName = Literal["adamw", "adam", "sgd"]

MAX_TOKENS = 2**24
"""Longest sequence a workload may name (16,777,216 tokens): far past any model's
context, and small enough that the estimator's token-squared terms stay finite."""


class TokenLength(BaseModel):
    """A sequence length of a workload: its mean and its maximum, in tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: float = Field(gt=0, le=MAX_TOKENS, allow_inf_nan=False)
    """Mean tokens per sequence."""
    max: int = Field(ge=1, le=MAX_TOKENS)
    """Longest sequence allowed (the framework's max length), in tokens."""
    clip_ratio: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    """Share of sequences cut at ``max`` (verl's ``response_length/clip_ratio``); default: what
    the documented length distribution puts beyond ``max`` (``docs/cost-model.md``)."""

    @model_validator(mode="after")
    def _mean_within_max(self) -> TokenLength:
        # Lengths are capped at max, so a mean above it is a typo (a max in the wrong unit,
        # the two swapped), not something to clamp silently.
        if self.mean > self.max:
            raise ValueError(f"mean {self.mean:g} exceeds max {self.max}")
        return self


class Controller(BaseModel):
    """How the step's batch moves between the single controller and the workers of each pass.

    verl, NeMo RL, OpenRLHF and ROLL drive every GPU pass from one Python process (the driver,
    or in verl's fully-async trainer the trainer's controller): it serializes each worker's
    share of the padded batch, sends it through Ray and gathers the results, one process for
    the whole cluster, so the seconds do not shrink as GPUs are added. RLinf's workers pass
    the batch among themselves (channels): ``padding: none``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    padding: Literal["max", "longest", "packed", "none"] = "max"
    """Length every sequence of the batch is padded to: ``max``, the prompt max plus the
    response max (verl pads to ``data.max_prompt_length`` + ``max_response_length``);
    ``longest``, the step's longest sequence (NeMo RL's ``batched_message_log_to_flat_message``);
    ``packed``, each sequence at its own length, the mean (verl with
    ``trainer.use_legacy_worker_impl: disable`` strips the padding before sending); ``none``,
    no batch through the controller."""
    bytes_per_token: float = Field(52.0, ge=0, le=1e4, allow_inf_nan=False)
    """Bytes per padded token slot the controller sends to a pass's workers, the mean over a
    step's passes; default: verl's batch (int64 prompts, responses, masks, ids and positions,
    fp32 scores: about 43 for a log-prob pass, 61 for a train pass, which adds old log-probs,
    advantages and rewards). NeMo RL's: about 27 (int64 ids and token mask, fp32 advantages
    and log-probs: 24 for a log-prob pass, 32 for a train pass)."""
    returned_bytes_per_token: float = Field(4.0, ge=0, le=1e4, allow_inf_nan=False)
    """Bytes per padded token slot the workers return, the mean over a step's passes (fp32
    log-probs and, for verl's old log-probs, entropies; a train pass returns only metrics)."""
    per_rank: bool = False
    """Each data-parallel shard serialized again for every tensor-, pipeline- and
    context-parallel rank that receives it (NeMo RL before v0.7 passed it by value to each
    worker); ``false``: once per shard (``ray.put`` first: verl, NeMo RL v0.7)."""
    returned_per_rank: bool = True
    """The results fetched from every tensor-, pipeline- and context-parallel rank of a shard
    and the copies dropped (NeMo RL's ``get_results``; verl's workers since 2025-08-06,
    d37674c8a, whose Ulysses ranks each return the shard's); ``false``: one copy per shard
    (verl's FSDP workers before then returned their own share)."""


class Turns(BaseModel):
    """Multi-turn (agentic) trajectories: the model answers, an environment or a tool replies,
    the model answers again, up to ``max`` times; the trainer sees the whole trajectory.

    With ``turns``, a workload's ``response_tokens`` is one turn's answer and a "sequence"
    is a trajectory: its prompt, every turn's answer and the observations between them
    (ROLL's agentic pipeline, verl's ``rollout.multi_turn`` and agent loops). Each turn is
    a new request to the engine: the tokens added since the last one are prefilled, the
    answer decoded, and the trajectory waits ``env_s`` for the environment's reply; the
    step waits for the trajectory that takes longest, turn after turn.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean: float = Field(ge=1, le=1_000_000, allow_inf_nan=False)
    """Assistant turns per trajectory, on average."""
    max: StrictInt = Field(ge=1, le=1_000_000)
    """Most assistant turns a trajectory takes (ROLL's ``max_actions_per_traj``, verl's
    ``multi_turn.max_assistant_turns``)."""
    observation_tokens: float = Field(0.0, ge=0, le=MAX_TOKENS, allow_inf_nan=False)
    """Tokens the environment or tool appends after each turn but the last (the next
    observation, a tool's output, a user's reply), on average."""
    env_s: float = Field(0.0, ge=0, le=86_400, allow_inf_nan=False)
    """Seconds a trajectory waits per turn for the environment or tool (a simulator step, a
    sandbox command, a search call, and the framework's round trip to the engine)."""
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    """Most tokens after the prompt in one trajectory: its answers and the observations
    between them (ROLL's ``sequence_length`` minus the prompt, verl's
    ``data.max_response_length``); default: ``max`` answers at the response max and the
    observations between them."""
    prefix_caching: bool = True
    """The engine keeps a trajectory's KV cache from one turn to the next (vLLM's automatic
    prefix caching, SGLang's radix cache): each turn prefills only the observation added;
    ``false``: every turn prefills the whole context again."""
    samples: Literal["trajectory", "turn"] = "trajectory"
    """What the trainer gets of a trajectory. ``trajectory``: one sample holding all of it
    (ROLL's ``TrajEnvManager``, verl's multi-turn rollout). ``turn``: one sample per turn,
    each the whole context before the turn and its answer (ROLL's step-wise env managers,
    ``AgentNativeStepEnvManager`` and GiGPO's ``StepEnvManager``): T samples per trajectory
    whose lengths grow with the turns, so that the trainer's tokens grow with their square."""

    @model_validator(mode="after")
    def _mean_within_max(self) -> Turns:
        if self.mean > self.max:
            raise ValueError(f"mean {self.mean:g} exceeds max {self.max}")
        return self

    def most(self) -> int:
        """Most turns a trajectory takes: ``max``, or 1 when the mean is 1 (every trajectory
        then answers once, whatever ``max`` allows)."""
        return 1 if self.mean <= 1 else self.max


def continuation(response: TokenLength, turns: Turns | None) -> tuple[float, int]:
    """(mean, max) tokens after the prompt of one sequence: its response, or a multi-turn
    trajectory's answers and the observations between them (capped at ``turns.max_tokens``)."""
    answer = min(response.mean, response.max)
    if turns is None:
        return answer, response.max
    mean = turns.mean * answer + (turns.mean - 1) * turns.observation_tokens
    most = turns.most()
    longest = math.ceil(most * response.max + (most - 1) * turns.observation_tokens)
    return mean, min(longest, turns.max_tokens) if turns.max_tokens else longest


class Workload(BaseModel):
    """What one RL step processes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompts_per_step: int = Field(ge=1)
    """Prompts in one step's batch (verl ``data.train_batch_size``, ROLL ``rollout_batch_size``)."""
    samples_per_prompt: int = Field(1, ge=1)
    """Responses generated per prompt (GRPO's group size; verl ``rollout.n``)."""
    prompt_tokens: TokenLength
    """Prompt length."""
    response_tokens: TokenLength
    """Response length."""
    micro_batch_size: int = Field(1, ge=1)
    """Sequences per micro-batch per GPU in training and log-prob passes (activations)."""
    epochs: int = Field(1, ge=1)
    """Passes over the step's batch in each train stage (PPO epochs)."""
    generated_per_trained: float = Field(1.0, ge=1.0, le=100.0, allow_inf_nan=False)
    """Prompts the rollout generates (and scores) per prompt the step trains on. Dynamic
    sampling (DAPO) drops the prompt groups whose samples all score alike and generates more
    until ``prompts_per_step`` groups are left: at least verl's ``data.gen_batch_size /
    data.train_batch_size`` (``algorithm.filter_groups.enable``), NeMo RL's
    ``grpo.batch_multiplier`` (``use_dynamic_sampling``), more when many groups are dropped
    and another round runs. The log-prob and train passes see the trained prompts only."""
    mini_batches: int = Field(1, ge=1)
    """Optimizer steps per train stage per epoch (verl: train batch / ``ppo_mini_batch_size``)."""
    packing: bool = True
    """Sequences packed without padding (verl ``use_remove_padding``, NeMo sequence packing,
    dynamic token budgets); ``false`` pads every micro-batch to its longest sequence."""
    micro_batch_tokens: int | None = Field(None, ge=1)
    """Token budget of one packed micro-batch of a data-parallel group: per GPU, times the
    sequence/context-parallel size that splits each sequence over the group (verl's
    ``ppo_max_token_len_per_gpu`` x ``ulysses_sequence_parallel_size``, as verl's actor
    multiplies them; NeMo RL's ``train_mb_tokens``); default: ``micro_batch_size`` x the
    longest sequence."""
    logprob_micro_batch_size: int | None = Field(None, ge=1)
    """Sequences per micro-batch per GPU in forward-only passes (old and reference log-probs,
    critic values), where frameworks set their own (verl ``log_prob_micro_batch_size_per_gpu``,
    NeMo RL ``policy.logprob_batch_size``); default: ``micro_batch_size``."""
    logprob_micro_batch_tokens: int | None = Field(None, ge=1)
    """Token budget of one forward-only micro-batch of a data-parallel group, as
    ``micro_batch_tokens`` (verl ``log_prob_max_token_len_per_gpu`` x its Ulysses size);
    default: ``micro_batch_tokens``."""
    controller: Controller = Controller()
    """How the single controller moves the batch to and from each GPU pass's workers."""
    turns: Turns | None = None
    """Multi-turn trajectories (agentic RL, tool calls): ``response_tokens`` is then one
    turn's answer (its ``clip_ratio``, if given, the share of trajectories cut at their
    maximum); unset: one answer per prompt."""

    @field_validator("turns")
    @classmethod
    def _trajectory_fits(cls, turns: Turns | None, info: ValidationInfo) -> Turns | None:
        response = info.data.get("response_tokens")
        if turns is not None and isinstance(response, TokenLength):
            mean, cap = continuation(response, turns)
            if mean > cap:
                raise ValueError(
                    f"a trajectory's mean {mean:g} tokens after the prompt (turns.mean x"
                    f" response_tokens.mean + the observations between them) exceeds its"
                    f" maximum {cap}"
                )
            if cap > MAX_TOKENS:
                raise ValueError(
                    f"a trajectory may hold {cap:,} tokens after the prompt (turns.max x"
                    f" response_tokens.max + the observations between them), past the"
                    f" {MAX_TOKENS:,} a workload may name: set turns.max_tokens"
                )
        return turns

    def trajectories(self) -> int:
        """Sequences (or multi-turn trajectories) one step generates."""
        return self.prompts_per_step * self.samples_per_prompt

    def generated_prompts(self) -> int:
        """Prompts the rollout generates per step: ``prompts_per_step`` times
        ``generated_per_trained``, whole prompts (NeMo RL truncates the same way)."""
        return max(self.prompts_per_step, int(self.prompts_per_step * self.generated_per_trained))

    def generated(self) -> int:
        """Sequences (or trajectories) the rollout generates per step: every generated
        prompt's group."""
        return self.generated_prompts() * self.samples_per_prompt

    def scored(self) -> int:
        """Samples the reward scores per step: the trained ones, scaled as the generated."""
        return self.sequences() * self.generated() // self.trajectories()

    def sequences(self) -> int:
        """Samples one step trains on: a sequence or trajectory each, or with ``turns.samples:
        turn`` one per turn (the trajectories' mean turns each, rounded)."""
        if self.turns is not None and self.turns.samples == "turn":
            return max(1, round(self.trajectories() * self.turns.mean))
        return self.trajectories()

    def sequence_mean(self) -> float:
        """Mean tokens of one trained sample: its prompt and everything after it."""
        return self.prompt_tokens.mean + self.continuation_mean()

    def trajectory_mean(self) -> float:
        """Mean tokens after the prompt in one generated sequence: the response, or a whole
        trajectory's answers and the observations between them."""
        return continuation(self.response_tokens, self.turns)[0]

    def trajectory_max(self) -> int:
        """Most tokens after the prompt in one generated sequence (the response max, or a
        trajectory's cap: ``turns.max_tokens``, else its most answers at the response max and
        the observations between them)."""
        return continuation(self.response_tokens, self.turns)[1]

    def continuation_mean(self) -> float:
        """Mean tokens after the prompt in one trained sample: :meth:`trajectory_mean`, or
        with ``turns.samples: turn`` a turn's answer and the context before it beyond the
        prompt (turn j holds j - 1 answers and observations: (T - 1) / 2 of them on
        average)."""
        t = self.turns
        if t is None or t.samples == "trajectory":
            return self.trajectory_mean()
        answer = min(self.response_tokens.mean, self.response_tokens.max)
        return answer + (answer + t.observation_tokens) * (t.mean - 1) / 2

    def continuation_max(self) -> int:
        """Most tokens after the prompt in one trained sample: the trajectory's (its last
        turn's sample holds all of it)."""
        return self.trajectory_max()

    def generated_share(self) -> float:
        """Share of the tokens after the prompt that the engine decodes (1 without turns;
        with them, the answers' share, the rest being observations it prefills)."""
        mean = self.trajectory_mean()
        if self.turns is None or mean <= 0:
            return 1.0
        return self.turns.mean * min(self.response_tokens.mean, self.response_tokens.max) / mean


LogitsMode = Literal[
    "fp32", "fp32_log_softmax", "fp32_log_softmax_entropy_forward", "fp32_log_softmax_entropy",
    "bf16", "bf16_entropy_forward", "bf16_entropy", "bf16_entropy_compiled",
]  # fmt: skip
"""How a pass holds a language-model head's logits (:attr:`Parallel.logits`)."""


class Parallel(BaseModel):
    """How a GPU role splits its model over its devices."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int | None = Field(None, ge=1)
    """Tensor-parallel size; default: ``num_gpus_per_worker`` (inference) or 1 (training)."""
    pp: int = Field(1, ge=1)
    """Pipeline-parallel size."""
    dp: int | None = Field(None, ge=1)
    """Data-parallel size; default: devices / (tp x pp)."""
    zero: Literal[0, 1, 2, 3] = 0
    """DeepSpeed ZeRO stage: 1 shards optimizer state, 2 also grads, 3 also weights over dp."""
    fsdp: bool = False
    """FSDP full sharding (weights, grads and optimizer state over dp, like ZeRO-3)."""
    shard_group: int | None = Field(None, ge=1)
    """Over how many data-parallel ranks the sharded states are split (hybrid sharding:
    PyTorch's HSDP, verl's and VeOmni's ``fsdp_size``, TorchTitan's
    ``data_parallel_shard_size``); default: all of them. It must divide dp: the ranks form
    dp / ``shard_group`` replicas of ``shard_group`` consecutive ranks each, every replica
    holding the whole sharded state. Weights are gathered and gradients reduce-scattered
    within a group (within a node when it fits one), and each group's gradient shards are
    all-reduced across the replicas. With ZeRO-1/2 the optimizer state (and ZeRO-2's
    gradients) is partitioned over the group (Megatron's
    ``num_distributed_optimizer_instances``); with neither ``fsdp`` nor ``zero`` nothing is
    sharded and it is refused. Routed experts (``ep``) split over their expert data-parallel
    ranks / replicas."""
    recompute: bool = False
    """Activation recomputation (checkpointing): 8x instead of 6x params x tokens to train."""
    ep: int = Field(1, ge=1)
    """Expert-parallel size (MoE): experts split over this many ranks, tokens sent by all-to-all."""
    sp: int = Field(1, ge=1)
    """Sequence / context parallel size (verl's Ulysses ``ulysses_sequence_parallel_size``,
    Megatron's ``context_parallel_size``): each sequence split over this many ranks."""
    sequence_parallel: bool = True
    """Megatron's sequence parallelism under tensor parallel: the norms' and residuals'
    activations split over the tp ranks with the rest. ``false`` (NeMo RL's default,
    ``megatron_cfg.sequence_parallel``): each tp rank keeps them whole, ``4h`` elements a
    token and layer (Korthikanti et al. 2022, section 4.2.2)."""
    offload_params: bool = False
    """Parameters kept in host memory between passes and loaded for each one (verl
    ``param_offload``, Megatron ``param_offload``): the load is paid inside every pass."""
    offload_optimizer: bool = False
    """Optimizer state kept in host memory and loaded for each optimizer step (verl
    ``optimizer_offload``)."""
    cpu_optimizer: bool = False
    """The optimizer step runs on the CPU (DeepSpeed ZeRO-Offload's CPU Adam, Megatron's
    ``optimizer_cpu_offload``): gradients go to the host, updated weights come back."""
    logits: LogitsMode = "fp32"
    """How a pass holds the language-model head's logits at its peak. ``fp32``: an fp32 copy,
    and in training its fp32 gradient, 4 bytes per logit forward and 8 training (Megatron's
    vocab-parallel cross entropy, which works in place on its fp32 copy).
    ``fp32_log_softmax``: the plain path, ``log_softmax(logits.float())`` then a gather: the
    bf16 logits, their fp32 copy and the fp32 log-softmax, 10 bytes forward and 14 training
    (NeMo RL's log-probs without tensor or context parallelism,
    ``get_next_token_logprobs_from_logits``; rlplex's own stages; measured by
    ``bench/logits_memory.py --plain`` and on an H200). ``fp32_log_softmax_entropy_forward``:
    as ``fp32_log_softmax``, and forward passes also take the logits' entropy in fp32, 14
    bytes (ROLL's strategies outside Megatron: ``log_probs_from_logits``, then
    ``entropy_from_logits`` for the metrics). ``fp32_log_softmax_entropy``: training takes it
    too, 34 bytes (ROLL's ``entropy_loss_coef`` > 0). ``bf16``: the model's bf16 logits, the
    loss's gradient written into them, 2 bytes either way (verl's FSDP passes:
    flash-attention's cross entropy with ``inplace_backward``, dp_actor.py).
    ``bf16_entropy_forward``: as ``bf16``, and forward passes also take the logits' entropy, 4
    bytes more (verl's actor: its old log-probs compute it for the metrics).
    ``bf16_entropy``: training takes it too, 12 bytes more (an entropy term in the loss,
    ``entropy_coeff`` != 0). ``bf16_entropy_compiled``: the same with the entropy
    ``torch.compile``d (verl's default, ``use_torch_compile``), 4 bytes more either way. The
    entropy's bytes are measured by ``bench/logits_memory.py`` (``--compiled``)."""
    kernels: Literal["fused", "eager"] | None = None
    """How the layers run in train and log-prob passes. ``fused``: Megatron-Core with
    Transformer Engine (or Liger kernels): each norm, rotary embedding and activation one
    kernel, or folded into a matmul. ``eager``: Hugging Face modules, each a chain of
    PyTorch operators whose memory traffic adds to the matmuls' (``bench/elementwise_bytes.py``
    counts it) and whose norms keep fp32 copies for the backward
    (``bench/saved_activations.py``). Default: eager under ``fsdp`` or ZeRO-2/3 (the Hugging
    Face models that verl's FSDP workers, NeMo RL's DTensor path, RLinf and DeepSpeed trainers
    shard), fused otherwise (Megatron-Core)."""

    @field_validator("shard_group")
    @classmethod
    def _group_of_sharded_states(cls, group: int | None, info: ValidationInfo) -> int | None:
        # A group only says something where states are sharded, and must tile dp when it is
        # given here (else it is checked once dp is known from the devices).
        if group is None:
            return group
        if not info.data.get("fsdp") and not info.data.get("zero"):
            raise ValueError(
                f"shard_group {group} splits sharded states over a group, but nothing is"
                " sharded: set fsdp: true or zero: 1, 2 or 3 (or drop shard_group)"
            )
        dp = info.data.get("dp")
        if dp is not None and dp % group:
            raise ValueError(
                f"shard_group {group} does not divide dp {dp}: the data-parallel ranks form"
                " dp / shard_group replicas of one group each"
            )
        return group


class Rollout(BaseModel):
    """How a generating role's inference engine runs (vLLM / SGLang settings)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_num_seqs: int = Field(1024, ge=1, le=1_000_000)
    """Most sequences one engine decodes at once (vLLM ``max_num_seqs``; verl's default 1024)."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, allow_inf_nan=False)
    """Share of each GPU the engine fills with weights, activations and KV cache."""
    cuda_graphs: bool = True
    """Decode steps replay CUDA graphs (``false``: eager, verl's ``enforce_eager``)."""
    vllm_v0: bool = False
    """The engine is vLLM's V0 engine (every vLLM before 0.8, later ones under
    ``VLLM_USE_V1=0``, verl's hybrid-engine fork of vLLM 0.6.3): one Python process
    schedules, prepares inputs, samples and processes outputs for every running sequence at
    every decode step while the GPU waits, ``decode_sequence_v0_s`` per sequence instead of
    V1's ``decode_sequence_s`` (``bench/vllm_v0_host.py`` measures it)."""
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    """The KV cache's element type (vLLM ``kv_cache_dtype``): ``auto`` keeps it in the
    model's activation type (bf16, also for an fp8 engine), ``fp8`` halves it."""
    weight_sync: Literal[
        "overlapped", "bucketed", "bucketed_overlapped", "per_tensor", "resharded", "server_loaded"
    ] = "overlapped"
    """How the engine receives trained weights from a trainer on other GPUs (and, for
    ``server_loaded``, from one on the same GPUs: each engine rank then loads every full
    tensor, the whole model, at ``reshard_gb_s``, as verl's colocated sync does). All but
    ``resharded``: every engine rank receives every full tensor (the trainer gathers each
    one from its shards and broadcasts it) and keeps its slice. ``overlapped``: NeMo RL's
    refit: tensors packed into buckets, the next one gathered while the last is broadcast, over
    communicators of every trainer and engine rank, so that both moves use the NIC of every
    member GPU of a node. ``bucketed``: buckets gathered, broadcast and loaded one after
    another at one NIC per device (verl's checkpoint engine, as its published sync times
    were fitted: its fully-async recipe's ``async_training.checkpoint_engine``, where each
    engine worker loads the buckets itself); ``bucketed_overlapped``: the same with the
    next bucket gathered while the last is broadcast (its
    ``overlap_broadcast_and_consume``). ``server_loaded``: verl's checkpoint engine since
    2026-02 (``rollout.checkpoint_engine.backend`` nccl, nixl, ...): buckets broadcast from
    the trainer's first rank while the next is gathered, and each engine rank hands every
    full tensor to its engine through the weight-update API a colocated sync uses
    (``reshard_gb_s`` for the whole model, ``load_tensor_s`` per tensor), the engines' KV
    cache released and resumed around it (``engine_switch_s``). ``per_tensor``: one tensor
    at a time, each paying ``sync_tensor_s`` (verl's one-step-off and fully-async NCCL sync
    before its checkpoint engine). ``resharded``:
    NeMo RL's ``refit_transport: nccl_reshard``: the MLP and routed-expert projections go
    shard to shard (each engine slice leaves the trainer once, from at most two of its
    pipeline stages at a time, in stripes to the engine replicas that hold it, which then
    all-gather it; one transfer of ``sync_tensor_s`` per projection), then the rest
    (attention, embeddings, norms, routers, shared experts) as ``overlapped``."""
    sleep_level: StrictInt = Field(2, ge=1, le=2)
    """What the engine does with its weights while it sleeps beside a trained role on the same
    GPUs (vLLM sleep mode, every step): ``2`` drops them, the weight sync refills them
    (verl with vLLM >= 0.8.5, rlplex's own runtime); ``1`` copies them to pinned host memory
    and back at the wake, before the weight sync overwrites them (NeMo RL, ROLL's default,
    verl's ``layered_summon``): two copies of the engine's weights over the host link per
    step. Ignored where the engine has its own GPUs (it never sleeps)."""
    partial_rollout: bool = False
    """The engine streams across steps: at each weight sync its unfinished sequences are
    interrupted and resumed after it with the new weights (verl fully_async's
    ``partial_rollout``; interruptible generation in AReaL and slime), and finished ones are
    replaced by the next steps' requests. Its slots stay full, no step waits for the longest
    response, and every interrupted sequence's context is prefilled again after the sync.
    Ignored, with a warning, where the engine cannot stream (as verl ignores it at staleness
    0): a pipeline that is not async with ``max_staleness`` >= 1, or GPUs shared with a
    trained role."""
    in_flight_weight_updates: bool = False
    """The engine keeps decoding through each weight sync: its running sequences go on with
    their KV cache under the new weights, nothing is prefilled again (NeMo RL's
    ``grpo.async_grpo.in_flight_weight_updates`` with vLLM's async engine). Its trajectory
    collector keeps at most ``max_staleness`` steps' prompt groups in flight, frees a
    group's place only when all its responses are done, and admits a group for step
    t + 1 + ``max_staleness`` only once the weights trained on step t have arrived; while
    the trainer trains and syncs, the engine runs on what it holds. Priced by simulating
    that loop (docs/cost-model.md): how much of the longest responses' tail it hides
    depends on the responses per prompt and on the trainer. Ignored, with a warning, where
    the engine cannot stream (as ``partial_rollout``); not together with
    ``partial_rollout``, which interrupts sequences instead."""

    @model_validator(mode="after")
    def _one_way_to_stream(self) -> Rollout:
        if self.partial_rollout and self.in_flight_weight_updates:
            raise ValueError(
                "partial_rollout and in_flight_weight_updates are two ways for an engine to go"
                " on through a weight sync (interrupt and prefill again, or keep the KV"
                " cache): set one"
            )
        return self


LoraTarget = Literal["q", "k", "v", "o", "gate", "up", "down"]
"""A projection that can carry LoRA adapters: attention's query, key, value and output, the
MLP's gate, up and down (of every expert, in an MoE layer)."""

LORA_TARGETS: tuple[LoraTarget, ...] = ("q", "k", "v", "o", "gate", "up", "down")
"""Every projection of a block: Hugging Face peft's ``all-linear`` (which leaves the output
head out)."""


class Lora(BaseModel):
    """Low-rank adapters (LoRA) on a role's projections; the base weights stay frozen.

    A trained role gives gradients and optimizer state to the adapters only, and its
    backward computes no weight gradients for the frozen matrices (input gradients only: a
    third fewer matmul FLOPs). A generating role applies the adapters at run time (vLLM's
    ``enable_lora``): every decode step runs vLLM's LoRA kernels beside each layer's own (a
    buffer, a shrink and an expand per wrapped linear layer, four wrapped a layer), and a
    weight sync from a LoRA-trained role sends it the adapters only. An engine without
    ``lora`` fed by a LoRA-trained role receives the merged weights (NeMo RL; verl's
    Megatron ``lora.merge``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: StrictInt = Field(ge=1, le=65536)
    """Adapter rank r: a d_in x d_out projection gains an A (d_in x r) and a B (r x d_out)
    (peft's ``r``, verl's ``lora_rank``, ROLL's ``lora_rank``, NeMo RL's ``dim``)."""
    targets: tuple[LoraTarget, ...] = LORA_TARGETS
    """Projections that carry adapters, or ``all-linear`` (the default: every projection of
    every block, as peft's ``all-linear``)."""
    frozen_precision: Literal["bf16", "fp32"] = "bf16"
    """How a trained role stores its frozen base weights: ``bf16`` (Megatron-Bridge, ROLL's
    ``dtype: bf16``) or ``fp32`` (verl's FSDP actor loads its model in fp32,
    ``fsdp_config.model_dtype``, and casts each gathered layer to bf16 to compute). Full
    fine-tuning holds an fp32 master copy either way; frozen weights have none, so fp32
    storage doubles their GB."""

    @field_validator("targets", mode="before")
    @classmethod
    def _all_linear(cls, value: object) -> object:
        if value == "all-linear":
            return LORA_TARGETS
        if isinstance(value, list | tuple) and not value:
            raise ValueError("name at least one projection, or all-linear")
        return value


class Efficiency(BaseModel):
    """Achieved fractions of the hardware's peak, and the latencies and overheads the
    estimator prices; unset ones take the defaults of ``rlplex/estimate/data/efficiency.yaml``
    (each with its source in that file and in ``docs/cost-model.md``).

    ``rlplex calibrate`` fits them from a record and writes them to a costs file
    (``efficiency:``). A stage listed under ``stages`` uses its own factor instead
    of its kind's (for generation it scales both prefill and decode).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    train: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Train and critic_train: fraction of peak FLOP/s (MFU)."""
    forward: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Log-prob, value and reward-model passes: fraction of peak FLOP/s."""
    prefill: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Generation's prompt processing and compute-bound decode steps: fraction of peak FLOP/s
    (times the width factor of ``width_half``)."""
    decode: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Generation's decode steps: fraction of peak memory bandwidth."""
    host_copy: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Offload/reload: fraction of the host link (fills ``cluster.host_gb_per_s``)."""
    link: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Fraction of NVLink / network bandwidth that copies and collectives reach: fills
    ``cluster.device_copy_gb_per_s`` and ``network_gb_per_s``, which weight syncs,
    data-parallel traffic, tensor-parallel collectives and expert all-to-alls move at."""
    width_half: float | None = Field(None, ge=0, le=1e6, allow_inf_nan=False)
    """Hidden size at which matmul efficiency is half its ceiling on an H100 (scaled by a
    GPU's peak over an H100's): a pass runs at ``train`` (or ``forward``, ``prefill``) x
    ``h / (h + width_half)`` of peak."""
    tokens_half: float | None = Field(None, ge=0, le=1e9, allow_inf_nan=False)
    """Tokens per micro-batch per GPU at which a train or log-prob pass runs at half its
    efficiency on an H100 (scaled by a GPU's peak over an H100's; small micro-batches cannot
    fill the GPU): efficiency x ``tokens / (tokens + tokens_half)``."""
    layer_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Fixed seconds per layer per micro-batch of a train or log-prob pass (kernel launches,
    FSDP hooks, Python), forward only; a backward counts ``formulas.HOST_BACKWARD_PASSES``."""
    optimizer_foreach: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    """An optimizer step under FSDP (PyTorch's AdamW, multi-tensor): fraction of peak memory
    bandwidth at which it reads and writes weights, gradients and optimizer state once."""
    optimizer_fused: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    """The same for a fused Adam kernel (Megatron's, DeepSpeed's FusedAdam)."""
    decode_step_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Floor of every decode step: scheduling, sampling, output processing (CUDA graphs on)."""
    decode_layer_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Seconds per layer per decode step of the layer's small kernels (norms, rotary, cache
    writes, activations), CUDA graphs or not."""
    decode_moe_layer_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Extra seconds per MoE layer per decode step (routing, top-k, sorting tokens by expert,
    combining)."""
    eager_layer_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Extra seconds per layer per decode step without CUDA graphs (eager launches)."""
    decode_sequence_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Host seconds per running sequence per decode step."""
    decode_sequence_v0_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Host seconds per running sequence per decode step of a vLLM V0 engine
    (``rollout.vllm_v0``)."""
    allreduce_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Latency of one small all-reduce within a node (two per layer per tensor-parallel
    decode step)."""
    allreduce_inter_node_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Latency of one small all-reduce whose ranks span nodes."""
    cross_host_step_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Extra seconds of every decode step of an inference engine whose GPUs span hosts (more
    than ``cluster.gpus_per_node``): the engine's per-step control messages between hosts and
    the inter-node collectives beyond ``allreduce_inter_node_s``."""
    engine_switch_s: float | None = Field(None, ge=0, le=3600, allow_inf_nan=False)
    """Seconds to wake a colocated inference engine and put it back to sleep, per step, besides
    moving its weights and cache (allocations, cache re-initialisation, CUDA graph warm-up); a
    ``server_loaded`` sync pays it once for releasing and resuming the engines' KV cache."""
    fp8_matmul_speedup: float | None = Field(None, ge=1, le=4, allow_inf_nan=False)
    """How much faster an fp8 role's weight matmuls run than bf16 ones on a GPU with FP8
    tensor cores (train, log-prob and prefill; attention stays bf16)."""
    sync_tensor_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Seconds per checkpoint tensor of a ``per_tensor`` weight sync between disjoint GPUs
    besides moving its bytes (two collectives' latency and the engine's load of the
    tensor); a ``resharded`` sync pays it per projection transfer (assumed, not measured
    for it)."""
    load_tensor_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Seconds the inference engine spends loading each checkpoint tensor of a weight sync
    (name mapping, its weight loader's copy into the fused layout) besides moving its bytes:
    colocated, ``bucketed`` and overlapped syncs (a ``per_tensor`` one pays
    ``sync_tensor_s`` instead)."""
    refit_gather: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    """Fraction of the NICs of its node's member GPUs at which a trainer gathers full tensors
    across nodes for a weight sync (measured on NeMo RL's export; colocated syncs,
    ``overlapped`` ones and a ``resharded`` one's whole tensors use it, verl's ``bucketed``
    and ``per_tensor`` keep one NIC)."""
    reshard_gb_s: float | None = Field(None, gt=0, le=1e5, allow_inf_nan=False)
    """GB/s at which a colocated weight sync gathers the trainer's shards and loads them into
    the engine's layout, per device (tensor-by-tensor, through the framework); a
    ``server_loaded`` sync loads the whole model at it on every engine device."""
    step_overhead_s: float | None = Field(None, ge=0, le=3600, allow_inf_nan=False)
    """Per-step framework overhead on the trainer's critical path (reward dispatch, logging,
    checkpoint-free bookkeeping; the passes' batch moves are ``controller_gb_s``'s)."""
    moe_imbalance: float | None = Field(None, ge=1, le=100, allow_inf_nan=False)
    """Load of the busiest expert rank over the mean (MoE): the expert matmuls take this much
    longer than under uniform routing."""
    sequence_overhead_s: float | None = Field(None, ge=0, le=10, allow_inf_nan=False)
    """Controller seconds per sequence per step outside the GPU stages (rule rewards,
    collation; the passes' batch moves are ``controller_gb_s``'s)."""
    logits_bytes: float | None = Field(None, ge=0, le=1e4, allow_inf_nan=False)
    """Bytes of memory traffic per logit (token x vocabulary entry) of a language-model head
    per pass: writing, upcasting, log-softmax and gathering the log-probs."""
    cpu_adam_params_per_s: float | None = Field(None, gt=0, le=1e15, allow_inf_nan=False)
    """Parameters per second one node's CPU optimizer updates (CPU Adam)."""
    controller_gb_s: float | None = Field(None, gt=0, le=1e4, allow_inf_nan=False)
    """GB/s at which the single controller serializes a pass's batch for its workers and
    deserializes what they return (``workload.controller``)."""
    stages: dict[str, float] = Field(default_factory=dict)
    """Per-stage factor relative to the stage's kind default (1.0: as the kind says)."""
