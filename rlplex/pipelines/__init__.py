"""Ready RL pipelines written with the public API.

:mod:`~rlplex.pipelines.grpo` and :mod:`~rlplex.pipelines.ppo` (sync or
one-step-off async by :class:`~rlplex.pipelines.config.RLConfig`),
their stage callables (:mod:`~rlplex.pipelines.stages`), role setups and layouts
(:mod:`~rlplex.pipelines.roles`), an in-process runner (:mod:`~rlplex.pipelines.local`)
and the demo (:mod:`~rlplex.pipelines.demo`).

A pipeline module offers two functions: ``pipeline()`` returns the
:class:`~rlplex.Pipeline` and ``setups()`` the role setups (role name ->
``setup(info) -> state``). A YAML config names the first,
``pipeline: {python: "rlplex.pipelines.grpo:pipeline"}``, and ``rlplex run``
calls the second, so that the stages find their models on the workers (see
``examples/toy_grpo.yaml``). Neither imports torch: planning stays instant.
"""
