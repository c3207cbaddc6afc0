"""A GRPO step defined in Python with the decorator API (used by python.yaml)."""

import rlplex


@rlplex.stage(role="actor_infer", seconds=120, memory_gb=10)
def generate(): ...


@rlplex.stage(role="rewards", seconds=10)
def reward(generate): ...


@rlplex.stage(role="reference", seconds=20)
def ref_logprob(generate): ...


@rlplex.stage(role="actor_train", seconds=20, needs=["weights"])
def old_logprob(generate): ...


@rlplex.stage(role="driver", seconds=1)
def advantage(reward, ref_logprob, old_logprob): ...


@rlplex.stage(role="actor_train", seconds=80, memory_gb=20)
def train(advantage): ...


@rlplex.weight_sync(from_="actor_train", to="actor_infer")
def weight_sync(train): ...


def grpo() -> rlplex.Pipeline:
    return rlplex.define_pipeline(
        generate, reward, ref_logprob, old_logprob, advantage, train, weight_sync
    )
