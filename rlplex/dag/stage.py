"""One stage of an RL step: what runs, on which role, after what, at what cost."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

StageKindName = Literal["run", "train", "weight_sync"]

MAX_STAGE_SECONDS = 1e7
"""About 116 days: a longer stage is a unit mistake (milliseconds given as seconds)."""
MAX_SCALING = 2.0
"""Scaling exponents past 2 (a super-quadratic speed-up from more GPUs) describe no real stage;
bounding it also keeps ``(d0 / d) ** s`` finite for any GPU count."""

STAGE_NAME = re.compile(r"[\w.-]+")
"""A stage name: letters, digits, ``_``, ``-`` and ``.`` (``generate``, ``reward_math-rule``,
``ref_logprob.teacher``). A name is part of op ids (``s0/generate``), record keys
(``time/generate``) and graph nodes (DOT, Mermaid), so ``/``, quotes, whitespace and the
empty name would break them."""

TRAIN_STAGE_NAMES = frozenset({"train", "critic_train"})
"""Stages of kind ``train`` unless told otherwise: they dirty weights and optimizer."""

GENERATION_PREFIXES = ("generate", "rollout", "gen")
"""Name prefixes of the stages the estimator prices as generation (lower-cased)."""


class Judge(BaseModel):
    """A generative judge (an LLM as a judge): the stage asks its role's model about each
    sample and reads a short answer, instead of scoring it in one forward pass.

    The judge's prompt is the sample (its prompt and response) inside a template; its
    answer is ``response_tokens`` long. The role's engine (``rollout``) says how many
    samples it judges at once (``max_num_seqs``; ROLL's local judge generates one sample at
    a time) and whether it replays CUDA graphs."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    response_tokens: StrictInt = Field(ge=1, le=1_000_000)
    """Tokens of the judge's answer per sample (a verdict such as ``YES``: a token or two
    and the end-of-sequence token); at most the judge's ``max_new_tokens``."""
    template_tokens: StrictInt = Field(0, ge=0, le=1_000_000)
    """Tokens the judge's prompt adds around each sample (instructions, the reference
    answer's labels); 0 when the sample is given as it is."""
    reload_every: StrictInt | None = Field(None, ge=1, le=1_000_000)
    """Samples the judge's engine judges between a wake and a sleep: it is woken (its
    weights copied back from host memory) before and put back to sleep (copied to host
    memory) after every this many, within the stage (ROLL's judge sleeps after each
    ``compute_rewards`` call, one prompt's samples, when actor_infer shares GPUs with
    another role or on Hugging Face's ``hf_infer``); None: it stays awake through the
    stage."""
    streams: bool = False
    """Whether the judge scores each prompt's samples as soon as they are generated, beside
    the generation it runs after (ROLL's default ``generate_opt_level: 1``: each prompt's
    samples go to a reward worker when they are done): the stage then holds only what the
    judge cannot finish while the rollout runs, at least one call (``reload_every``
    samples, or one). Only on GPUs the generation does not use; False: it starts when the
    generation has ended."""


def whole_step_stage(name: str, kind: str) -> str | None:
    """Why a stage cannot process a share of the step's samples (:attr:`Stage.share`), or
    None for one that may (a reward, log-prob or values pass)."""
    if kind == "train":
        return "a train stage trains on the whole step's samples"
    if kind == "weight_sync":
        return "a weight sync sends the weights, not samples"
    if name.lower().startswith(GENERATION_PREFIXES):
        return "a generation stage generates the whole step's samples"
    return None


class Stage(BaseModel):
    """A node of the step DAG.

    A ``weight_sync`` stage has no ``role``; it names ``from`` (the trained role)
    and ``to`` (the inference role) and occupies both roles' devices. Its cost
    comes from the cluster's copy speeds unless ``seconds`` is given (as in a
    replay of recorded timings).
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False
    )

    name: str
    """Unique stage name, e.g. ``generate`` (see :data:`STAGE_NAME`)."""
    role: str | None = None
    """The role whose workers run the stage (``driver`` for the controller)."""
    kind: StageKindName = "run"
    """``run``; ``train`` (dirties the role's weights and optimizer); ``weight_sync``."""
    after: tuple[str, ...] = ()
    """Stages of the same step that must finish first."""
    seconds: StrictFloat | None = Field(None, ge=0, le=MAX_STAGE_SECONDS)
    """Duration measured on ``at_devices`` devices; required except for weight_sync."""
    at_devices: StrictInt | None = Field(None, ge=1, le=65_536)
    """Device count ``seconds`` was measured on; default: the role's device count."""
    scaling: StrictFloat = Field(1.0, ge=0, le=MAX_SCALING)
    """Exponent s: on d devices instead of d0 the stage takes ``seconds * (d0/d)**s``."""
    memory_gb: StrictFloat = Field(0.0, ge=0, le=1e6)
    """Transient memory per device while the stage runs, in GB."""
    share: StrictFloat = 1.0
    """The fraction of the step's samples the stage processes, in (0, 1]: a reward cluster
    that scores one domain's samples (ROLL's ``domain_interleave_probs``), one of several
    distillation teachers (NeMo RL routes each sample to one). The estimator prices the
    stage's forward pass or rule reward over that share of the samples, micro-batches as
    large as before; given ``seconds`` are taken as they are. Generation, train stages and
    weight syncs process the whole step: 1 only."""
    judge: Judge | None = None
    """A generative judge's stage: the estimator prices it as generation over the samples
    (prefill of each judge prompt, decode of its answer) on the role's engine, not as a
    forward pass (:class:`Judge`). GPU roles only."""
    micro_batch_size: StrictInt | None = Field(None, ge=1, le=1_000_000)
    """Sequences per micro-batch of this stage's train or forward pass on each rank, where
    it differs from the workload's (``workload.micro_batch_size`` for train stages,
    ``logprob_micro_batch_size`` for forward passes): verl's critic, reference and rollout
    log-prob passes each take their own. None: the workload's."""
    micro_batch_tokens: StrictInt | None = Field(None, ge=0, le=100_000_000)
    """Token budget of one packed micro-batch of this stage's pass in a data-parallel group,
    as ``workload.micro_batch_tokens`` (per GPU times the sequence / context-parallel size: a
    role's own dynamic batches, verl's ``critic.ppo_max_token_len_per_gpu``), where it
    differs from the workload's. ``0``: no budget, micro-batches of ``micro_batch_size``
    sequences where the workload has one (a role whose dynamic batches are off while the
    actor's are on). None: the workload's."""
    packing: bool | None = None
    """Whether this stage's pass packs its sequences (each costs its own length) or pads
    each to the longest prompt and response, where it differs from ``workload.packing``
    (ROLL pads every pass but a Megatron worker's dynamic batches and sequence packing).
    None: the workload's."""
    needs: tuple[str, ...] | None = None
    """States that must be resident; ``None`` means all of the role's states."""
    from_role: str | None = Field(None, alias="from")
    """weight_sync only: the role whose trained weights are sent."""
    to_role: str | None = Field(None, alias="to")
    """weight_sync only: the role whose weights are overwritten."""
    fn: Callable[..., Any] | None = Field(None, exclude=True, repr=False)
    """Optional implementation, run by the executor; planning ignores it."""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if not STAGE_NAME.fullmatch(name):
            # A custom error type (not a ValueError's value_error): the name alone is wrong,
            # as with a type or range error.
            raise PydanticCustomError(
                "stage_name",
                "must hold only letters, digits, '_', '-' and '.'",
            )
        return name

    @field_validator("share")
    @classmethod
    def _share_in_range(cls, share: float, info: ValidationInfo) -> float:
        if not 0.0 < share <= 1.0:
            raise PydanticCustomError("share_range", "must be in (0, 1]")
        # ``kind`` is set by the time ``share`` is checked (fields in declaration order, the
        # default kind before them); a stage whose name or kind failed is refused for that.
        name, kind = info.data.get("name"), info.data.get("kind")
        why = whole_step_stage(name, kind) if name and kind else None
        if share < 1.0 and why is not None:
            raise PydanticCustomError("share_whole_step", f"must be 1: {why}")
        return share

    @field_validator("judge")
    @classmethod
    def _judge_scores_samples(cls, judge: Judge | None, info: ValidationInfo) -> Judge | None:
        name, kind = info.data.get("name"), info.data.get("kind")
        why = whole_step_stage(name, kind) if name and kind and judge is not None else None
        if why is not None:
            raise PydanticCustomError(
                "judge_stage", f"must be absent: a judge scores samples, and {why}"
            )
        return judge

    @model_validator(mode="before")
    @classmethod
    def _default_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kind" not in data:
            name = data.get("name")
            if name in TRAIN_STAGE_NAMES:
                data = {**data, "kind": "train"}
            elif name == "weight_sync" or "from" in data or "from_role" in data:
                data = {**data, "kind": "weight_sync"}
        return data

    @property
    def is_weight_sync(self) -> bool:
        return self.kind == "weight_sync"

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles whose devices the stage occupies."""
        if self.is_weight_sync:
            return tuple(r for r in (self.from_role, self.to_role) if r)
        return (self.role,) if self.role else ()

    def reads_state(self, state: str, role_states: tuple[str, ...]) -> bool:
        """Whether the stage needs ``state`` of its role resident."""
        if self.is_weight_sync:
            return state == "weights"
        needed = self.needs if self.needs is not None else role_states
        return state in needed
