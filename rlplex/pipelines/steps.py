"""The step DAG that GRPO and PPO share, so the two pipelines cannot drift apart.

Both generate, score, take reference and old log-probs, compute advantages on
the driver, train the policy and sync its weights to the rollout engine; PPO
adds the critic (``values`` before the advantage, ``critic_train`` after it).
Stage costs (``seconds``) are the toy task's per-stage times measured under
``rlplex run examples/toy_grpo.yaml`` on a 2-core CPU machine (``rlplex viz`` of
the record prints them); on other hardware only their ratios carry over.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from rlplex.dag.api import PipelineBuilder
from rlplex.dag.pipeline import Pipeline
from rlplex.pipelines.config import RLConfig


class StageFunction:
    """A function of :mod:`rlplex.pipelines.stages`, imported when it is first called.

    Building the step DAG is what planning does (``rlplex plan examples/toy_grpo.yaml``),
    and planning imports no torch (DESIGN.md); the stage functions need torch, so
    each is bound by name and imported on the worker that runs it. The signature
    (``ctx`` and the upstream stages it takes) is declared here, so the executor
    passes the same values without importing anything.
    """

    def __init__(self, name: str, *params: str, optional: tuple[str, ...] = ()) -> None:
        self.name = name
        self.params = params
        self.optional = optional
        self.__name__ = name

    @property
    def __signature__(self) -> inspect.Signature:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature(
            [inspect.Parameter("ctx", kind)]
            + [inspect.Parameter(p, kind) for p in self.params]
            + [inspect.Parameter(p, kind, default=None) for p in self.optional]
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module = importlib.import_module("rlplex.pipelines.stages")
        return getattr(module, self.name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"StageFunction({self.name!r})"


class _Stages:
    """The stage functions by name, as :class:`StageFunction` objects (no torch import)."""

    generate = StageFunction("generate")
    reward = StageFunction("reward", "generate")
    ref_logprob = StageFunction("ref_logprob", "generate")
    old_logprob = StageFunction("old_logprob", "generate")
    values = StageFunction("values", "generate")
    advantage = StageFunction(
        "advantage", "generate", "reward", "ref_logprob", "old_logprob", optional=("values",)
    )
    train = StageFunction("train", "advantage")
    critic_train = StageFunction("critic_train", "advantage")
    vllm_weight_sync = StageFunction("vllm_weight_sync", "train")


def build_step(cfg: RLConfig, *, critic: bool) -> Pipeline:
    """The checked step DAG with the callables of :mod:`rlplex.pipelines.stages` bound."""
    s = _Stages

    b = PipelineBuilder(mode=cfg.mode, max_staleness=cfg.max_staleness)
    gen = b.stage("generate", role="actor_infer", seconds=0.02, fn=s.generate)
    rew = b.stage("reward", role="rewards", seconds=0.01, after=[gen], fn=s.reward)
    ref = b.stage("ref_logprob", role="reference", seconds=0.02, after=[gen], fn=s.ref_logprob)
    old = b.stage(
        "old_logprob",
        role="actor_train",
        seconds=0.02,
        after=[gen],
        needs=["weights"],
        fn=s.old_logprob,
    )
    inputs = [gen, rew, ref, old]
    if critic:
        inputs.append(
            b.stage(
                "values", role="critic", seconds=0.02, after=[gen], needs=["weights"], fn=s.values
            )
        )
    adv = b.stage("advantage", role="driver", seconds=0.005, after=inputs, fn=s.advantage)
    tr = b.stage("train", role="actor_train", seconds=0.05, after=[adv], fn=s.train)
    if critic:
        b.stage("critic_train", role="critic", seconds=0.05, after=[adv], fn=s.critic_train)
    b.weight_sync(
        from_="actor_train",
        to="actor_infer",
        after=[tr],
        fn=s.vllm_weight_sync if cfg.generator.backend == "vllm" else None,
    )
    return b.build()
