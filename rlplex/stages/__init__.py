"""Real stage implementations: models, generation, log-probs, rewards, advantages, losses.

Torch building blocks of an RL step, one idea per module:
:mod:`~rlplex.stages.models` (tiny or local HF models, critic, reward model),
:mod:`~rlplex.stages.tokenizer`, :mod:`~rlplex.stages.batch` (the shared token
layout), :mod:`~rlplex.stages.generation` (HF and vLLM backends),
:mod:`~rlplex.stages.logprobs`, :mod:`~rlplex.stages.rewards`,
:mod:`~rlplex.stages.advantages`, :mod:`~rlplex.stages.losses`,
:mod:`~rlplex.stages.optim` (torch AdamW, DeepSpeed ZeRO),
:mod:`~rlplex.stages.roles` (what each role's workers hold),
:mod:`~rlplex.stages.toy` (the toy task), and the offload protocol with its
backends (:mod:`~rlplex.stages.offload`). Importing this package imports
nothing heavy; torch is imported by the modules that need it.
"""
