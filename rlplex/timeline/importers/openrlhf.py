"""OpenRLHF's step timers, as its wandb history and summary records name them.

OpenRLHF (OpenRLHF/OpenRLHF) times each PPO step with five wall-clock timers, added to the
step's ``status`` dict since v0.9.6 (4908e6ee, 2026-03-19; the names unchanged to v0.11.0
and after). Its ``WandbLogger.log_train`` logs that dict as ``train/NAME``
(``openrlhf/utils/logging_utils.py:97-99``) against the step metric ``train/global_step``
(``define_metric("train/*", step_metric="train/global_step")``, :79-80); TensorBoard gets
the same ``train/NAME`` scalars at ``global_step`` (:122-130). So a timer is
``train/timing/NAME``. Read at 3c3be623 (lines of ``openrlhf/trainer/`` files):

- ``generation`` (``ppo_trainer.py:525-529``; async: ``ppo_trainer_async.py:132-136``,
  in the generator, beside training): ``SamplesGenerator.generate_samples``: the engines'
  wake-up and sleep under ``--vllm.enable_sleep`` (``ppo_utils/samples_generator.py:106-120``)
  around the vLLM rollout, in which each response is scored as it ends when a remote
  reward or a ``reward_func`` file scores (``openrlhf/utils/agent.py``: the executor
  computes the reward after generation, in the engine's process). The stage ``generate``,
  joint with ``reward`` where the config scores on the driver (the OpenRLHF importer's
  remote reward: ``reward@driver``).
- ``make_experience`` (``ppo_trainer.py:215-217``): ``make_experience_batch``
  (``ppo_utils/experience_maker.py:80-96``): the forward passes, dispatched in this order
  (:138-182) and waited for together (:184-194): the reward model's (when no reward came
  with the samples), the actor's old log-probs, the critic's values, the reference's
  log-probs; the driver waits for a colocated group's pass before dispatching the next
  (``colocate_all``, ``colocate_actor_ref``, ``colocate_critic_reward``: :100-106, :162-164).
  Then the advantages and returns on the driver (:238-331). The stages ``reward``
  (on the reward model's role: ``reward@reward``), ``old_logprob``, ``ref_logprob``,
  ``values`` and ``advantage``: joint, and *concurrent* (they ran as the config places
  them, in the order the config importer gives them: side by side on disjoint GPUs but
  where a colocated pass blocks the driver, the advantage after them all).
- ``ppo_train`` (``ppo_trainer.py:240-242``, ``ppo_train`` :266-298): the critic's and the
  actor's ``fit``, started together and waited for together (:288-296), unless
  ``--ds.enable_sleep``: then the critic's, then the actor's, each reloaded before and
  offloaded after (:281-286). The stages ``critic_train`` and ``train``: joint and
  concurrent (on the same GPUs the config runs them one after the other, on disjoint ones
  side by side: as OpenRLHF did, but that ``enable_sleep`` serializes them whatever the
  GPUs; the OpenRLHF config importer makes ``train`` wait for ``critic_train`` under it).
  On the first steps, up to ``--critic.freezing_steps``, the actor does not train
  (:271-272): a history row with ``train/critic_loss`` and no ``train/policy_loss`` reads
  ``ppo_train`` as ``critic_train`` alone (:class:`StepReading`).
- ``broadcast`` (``ppo_trainer.py:245-248``, ``broadcast_to_vllm`` :300-316): the actor's
  weights to the engines, after the engines' weights wake up under ``--vllm.enable_sleep``;
  in the async trainer after waiting for the engines' lock, which generation holds
  (``ppo_trainer_async.py:255-265``). The stage ``weight_sync``; a step whose
  ``step_total`` is not the sum of the others (the async trainer's) keeps it as a metric,
  its wait not being the sync's time.
- ``step_total``: the step's recorded time. The synchronous trainer's is the *sum* of the
  four timers (``ppo_trainer.py:541``; the experiences' hand-over to the trainers between
  ``make_experience`` and ``ppo_train`` is in no timer); the async trainer's is the wall
  time from the previous step's end, its wait for the next batch included
  (``ppo_trainer_async.py:234-238``; the async trainer logs ``generation`` and
  ``step_total`` from v0.9.7, 266fbc58, the other three from v0.9.6).

A timer of another name under ``train/timing/`` stays a metric and is named as unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlplex.timeline.importers.base import Collector, TimerTable, as_float

FORMAT = "openrlhf"

STAGES: dict[str, str] = {"broadcast": "weight_sync"}
"""OpenRLHF timer -> rlplex stage (the timers of one stage alone)."""

JOINT: dict[str, tuple[str, ...]] = {
    "generation": ("generate", "reward@driver"),
    "make_experience": ("reward@reward", "old_logprob", "ref_logprob", "values", "advantage"),
    "ppo_train": ("critic_train", "train"),
}
"""OpenRLHF timers that span several rlplex stages, with the stages in pipeline order; a
``STAGE@ROLE`` member counts only where the config runs the stage on that role (the
reward is scored inside generation by a remote reward, inside ``make_experience`` by a
reward model)."""

CONCURRENT = frozenset({"make_experience", "ppo_train"})
"""Joint timers whose members ran as the config places them (side by side on disjoint
GPUs): :attr:`~rlplex.timeline.importers.base.RecordedRun.concurrent`."""

TOTAL = "step_total"
"""The step's recorded time."""
TABLE = TimerTable(total=TOTAL, stages=STAGES, joint=JOINT, concurrent=CONCURRENT)
"""OpenRLHF's timers as :meth:`~rlplex.timeline.importers.base.Collector.timer` reads them."""

PREFIX = "timing/"
"""The timers' prefix in OpenRLHF's ``status`` dict."""

WANDB_PREFIX = "train/"
"""What ``WandbLogger.log_train`` (and TensorBoard's ``log_train``) put before each key."""

TIMING_COLUMN = WANDB_PREFIX + PREFIX
"""A timer's column in a wandb history: ``train/timing/NAME``."""

STEP_COLUMN = WANDB_PREFIX + "global_step"
"""OpenRLHF's step: wandb's own ``_step`` counts every ``wandb.log`` call (the samples
table is logged in a call of its own, evaluations in others), not the training step."""

TIMERS = ("generation", "make_experience", "ppo_train", "broadcast", TOTAL)
"""Every timer OpenRLHF logs, in the order it runs them."""


ACTOR_LOSS = WANDB_PREFIX + "policy_loss"
"""The actor's loss, in every status its ``fit`` returns (``ppo_actor.py:369``): empty on a
step whose actor did not train."""
CRITIC_LOSS = WANDB_PREFIX + "critic_loss"
"""The critic's loss, in every status its ``fit`` returns (``ppo_critic.py:178``)."""
TOLERANCE_S = 0.05
"""How far (seconds, or :data:`TOLERANCE_SHARE` of it, the larger) the synchronous
trainer's ``step_total`` may be from the sum of the other timers: the sum itself, written
to a CSV with fewer digits."""
TOLERANCE_SHARE = 0.005


@dataclass(frozen=True)
class StepReading:
    """How one logged step's timers are read, from the other values of its row."""

    actor_frozen: bool = False
    """The critic trained and the actor did not (``--critic.freezing_steps``: ``ppo_train``
    runs the actor's ``fit`` only past them, ``ppo_trainer.py:271-272``): ``ppo_train`` is
    the critic's training alone."""
    waited: bool = False
    """``step_total`` is not the sum of the other timers: the async trainer's, whose
    ``broadcast`` waits for the engines' lock that generation holds
    (``ppo_trainer_async.py:255-265``, :128-140), so it is no weight sync's time."""


def step_reading(row: Mapping[str, float]) -> StepReading:
    """How to read one step's timers, from its row's values (wandb key -> number; a key not
    logged on the step absent)."""
    frozen = CRITIC_LOSS in row and ACTOR_LOSS not in row
    timers = {k[len(TIMING_COLUMN) :]: v for k, v in row.items() if k.startswith(TIMING_COLUMN)}
    total = timers.pop(TOTAL, None)
    parts = [timers[n] for n in TIMERS if n != TOTAL and n in timers]
    waited = (
        total is not None
        and len(parts) == len(TIMERS) - 1
        and abs(total - sum(parts)) > max(TOLERANCE_S, TOLERANCE_SHARE * total)
    )
    return StepReading(actor_frozen=frozen, waited=waited)


def add_timing(
    out: Collector, step: int, name: str, value: Any, reading: StepReading = StepReading()
) -> None:
    """One OpenRLHF timer of ``step`` (``name`` without ``train/timing/``): a stage's
    seconds, a joint timer's, the step's time, or a metric under ``train/timing/NAME``
    (unknown timers named); ``reading``: what the step's other values say (a frozen actor's
    ``ppo_train`` is the critic's alone; the async trainer's ``broadcast`` stays a metric)."""
    key = TIMING_COLUMN + name
    seconds = as_float(value)
    if name == "broadcast" and reading.waited:
        out.metric(step, key, value)
        return
    skipped = frozenset({"train"}) if reading.actor_frozen and name == "ppo_train" else frozenset()
    if seconds is not None and out.timer(step, key, name, seconds, TABLE, skipped):
        return
    if seconds is not None:
        out.unknown.add(key)
    out.metric(step, key, value)
