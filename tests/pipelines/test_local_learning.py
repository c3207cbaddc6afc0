"""The GRPO and PPO pipelines learn the toy task, run in-process (no Ray).

The acceptance figures of issue 6: GRPO's mean reward goes from <= 0.3 over
the first 5 steps to >= 0.8 over the last 5 within 60 steps; PPO's reward
rises and its value loss falls. Seeds are fixed. GRPO runs here with seed 1:
seed 0 learns under the Ray executor in every layout (colocated in
``tests/pipelines/test_demo.py``, split in ``tests/runtime/test_data_parallel.py``,
async and PPO with a DeepSpeed policy in ``test_executor_learning.py``), so this
second seed checks that learning does not hinge on one, on the in-process
runner. DeepSpeed's in-process training is ``tests/stages/test_optim.py``'s.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlplex.pipelines import grpo, local, ppo  # noqa: E402
from rlplex.pipelines.config import RLConfig  # noqa: E402


def _mean(xs):
    return sum(xs) / len(xs)


def _run(module, cfg, steps):
    metrics = local.run_local(module.build_pipeline(cfg), module.setups(cfg), steps)
    return [metrics[s] for s in range(steps)]


@pytest.mark.slow
def test_grpo_learns_the_toy_task_with_a_second_seed():
    seed = 1
    t0 = time.perf_counter()
    m = _run(grpo, RLConfig(seed=seed, model={"seed": seed}, task={"seed": seed}), 60)
    wall = time.perf_counter() - t0
    rewards = [s["reward/mean"] for s in m]
    assert _mean(rewards[:5]) <= 0.3
    assert _mean(rewards[-5:]) >= 0.8, rewards
    assert wall < 300
    for key in ("kl", "loss/policy", "response_length/mean", "tokens_per_s", "time/train"):
        assert all(key in s for s in m), key
    assert m[-1]["kl"] > m[0]["kl"]  # the policy moved away from the reference


@pytest.mark.slow
def test_ppo_with_a_critic_improves():
    m = _run(ppo, ppo.default_config(), 40)
    rewards = [s["reward/mean"] for s in m]
    value_loss = [s["loss/value"] for s in m]
    assert _mean(rewards[-5:]) > _mean(rewards[:5]) + 0.4, rewards
    assert _mean(value_loss[-5:]) < 0.5 * _mean(value_loss[:5]), value_loss


def test_async_generation_uses_weights_one_step_stale():
    """With k = 1, generation of step t runs after the weight sync of step t - 2 only."""
    cfg = RLConfig(mode="async", max_staleness=1, task={"prompts_per_step": 2}, sampling={"n": 2})
    order = []
    pipeline = grpo.build_pipeline(cfg)
    stages = []
    for stage in pipeline.stages:
        fn = stage.fn

        def traced(ctx=None, __fn=fn, __name=stage.name, **kw):
            order.append((__name, ctx.step))
            return __fn(ctx, **kw) if __fn is not None else None

        if stage.is_weight_sync:
            stages.append(stage)
        else:
            stages.append(stage.model_copy(update={"fn": _signature_like(fn, traced)}))
    pipeline = pipeline.model_copy(update={"stages": tuple(stages)})
    local.run_local(pipeline, grpo.setups(cfg), 3)
    gens = [i for i, (n, _) in enumerate(order) if n == "generate"]
    trains = [i for i, (n, _) in enumerate(order) if n == "train"]
    # generate(0), generate(1) before train(0); generate(2) after train(0), before train(1).
    assert gens[1] < trains[0] < gens[2] < trains[1]


def _signature_like(fn, wrapper):
    """A callable with ``fn``'s signature that calls ``wrapper`` (the runner reads signatures)."""
    import functools

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return wrapper(*args, **kwargs)

    return call


def _save_checkpoint(path):
    """A tiny Llama and a digit-level fast tokenizer saved as an ordinary HF checkpoint."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from rlplex.stages.models import ModelConfig, build_causal_lm

    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, **{str(d): 3 + d for d in range(10)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    )
    build_causal_lm(ModelConfig(seed=7)).save_pretrained(path)
    fast.save_pretrained(path)


def test_pipeline_runs_from_a_local_checkpoint(tmp_path):
    _save_checkpoint(tmp_path)
    cfg = RLConfig(model={"path": str(tmp_path)}, task={"prompts_per_step": 4})
    m = _run(grpo, cfg, 3)
    assert all(0.0 <= s["reward/mean"] <= 1.0 for s in m)
    assert m[2]["response_length/mean"] > 0


def test_planning_a_toy_config_imports_neither_torch_nor_ray():
    """DESIGN.md: planning stays free of torch (issue 14: toy configs took 8 s to validate)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from rlplex.config import load_config\n"
        "from rlplex.plan import make_plan, verify_plan\n"
        "for name in ('toy_grpo', 'toy_ppo'):\n"
        "    cfg = load_config(f'examples/{name}.yaml')\n"
        "    verify_plan(make_plan(cfg), cfg)\n"
        "print('torch' in sys.modules, 'ray' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"], out.stderr
