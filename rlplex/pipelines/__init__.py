"""Ready RL pipelines written with the public API.

:mod:`~rlplex.pipelines.grpo` and :mod:`~rlplex.pipelines.ppo` (sync or
one-step-off async by :class:`~rlplex.pipelines.config.RLConfig`),
their stage callables (:mod:`~rlplex.pipelines.stages`), role setups and layouts
(:mod:`~rlplex.pipelines.roles`), an in-process runner (:mod:`~rlplex.pipelines.local`)
and the demo (:mod:`~rlplex.pipelines.demo`).
"""
