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
  (``ppo_utils/experience_maker.py:80-96``): the forward passes, dispatched to their groups
  at once (:138-182) and waited for together (:186-194): the reward model's (when no
  reward came with the samples), the actor's old log-probs, the critic's values, the
  reference's log-probs; each group waits for its own pass first only where it shares GPUs
  (``colocate_all``, ``colocate_actor_ref``, ``colocate_critic_reward``: :100-106, :162-164).
  Then the advantages and returns on the driver (:238-331). The stages ``reward``
  (on the reward model's role: ``reward@reward``), ``old_logprob``, ``ref_logprob``,
  ``values`` and ``advantage``: joint, and *concurrent* (they ran as the config places
  them: side by side on disjoint GPUs, the advantage after them all).
- ``ppo_train`` (``ppo_trainer.py:240-242``, ``ppo_train`` :266-298): the critic's and the
  actor's ``fit``, started together and waited for together (:288-296), unless
  ``--ds.enable_sleep``: then the critic's, then the actor's, each reloaded before and
  offloaded after (:281-286). The stages ``critic_train`` and ``train``: joint and
  concurrent (on the same GPUs the config runs them one after the other, on disjoint ones
  side by side: as OpenRLHF did, but that ``enable_sleep`` serializes them whatever the
  GPUs). On the steps up to ``--critic.freezing_steps`` the actor does not train.
- ``broadcast`` (``ppo_trainer.py:245-248``, ``broadcast_to_vllm`` :300-316): the actor's
  weights to the engines, after the engines' weights wake up under ``--vllm.enable_sleep``;
  in the async trainer after waiting for the engines' lock, which generation holds
  (``ppo_trainer_async.py:255-265``). The stage ``weight_sync``.
- ``step_total``: the step's recorded time. The synchronous trainer's is the *sum* of the
  four timers (``ppo_trainer.py:541``; the experiences' hand-over to the trainers between
  ``make_experience`` and ``ppo_train`` is in no timer); the async trainer's is the wall
  time from the previous step's end, its wait for the next batch included
  (``ppo_trainer_async.py:234-238``).

A timer of another name under ``train/timing/`` stays a metric and is named as unknown.
"""

from __future__ import annotations

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


def add_timing(out: Collector, step: int, name: str, value: Any) -> None:
    """One OpenRLHF timer of ``step`` (``name`` without ``train/timing/``): a stage's
    seconds, a joint timer's, the step's time, or a metric under ``train/timing/NAME``
    (unknown timers named)."""
    key = TIMING_COLUMN + name
    seconds = as_float(value)
    if seconds is not None and out.timer(step, key, name, seconds, TABLE):
        return
    if seconds is not None:
        out.unknown.add(key)
    out.metric(step, key, value)
