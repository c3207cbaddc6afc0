"""A stage's own micro-batch (``pipeline.stages.S.micro_batch_size`` / ``micro_batch_tokens``)
replaces the workload's for that pass alone.

The ``base`` fixture (tests/estimate/conftest.py): 64 prompts x 4 samples of 100 + 300 tokens
on average, packed (the workload's default) in micro-batches of 2 sequences; the reference on
8 GPUs (FSDP, data parallel 8): 32 sequences a rank.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlplex.config import config_from_dict
from rlplex.estimate.estimator import estimate_config


def _stages(config: dict[str, Any]) -> dict[str, Any]:
    return estimate_config(config_from_dict(copy.deepcopy(config), file="t.yaml")).stages


def test_a_stage_micro_batch_sets_that_pass_alone(base: dict[str, Any]) -> None:
    """ref_logprob at 8 sequences: 32 / 8 = 4 micro-batches a rank, of 8 x 400 tokens;
    old_logprob keeps the workload's 2 (16 of 2 x 400)."""
    base["pipeline"]["stages"]["ref_logprob"]["micro_batch_size"] = 8
    stages = _stages(base)
    ref, old = stages["ref_logprob"].detail, stages["old_logprob"].detail
    assert (ref["micro_batches_per_rank"], ref["micro_batch_tokens"]) == (4, 8 * 400)
    assert (old["micro_batches_per_rank"], old["micro_batch_tokens"]) == (16, 2 * 400)
    # Fewer, larger micro-batches: fewer host launches and larger matmuls.
    plain = copy.deepcopy(base)
    del plain["pipeline"]["stages"]["ref_logprob"]["micro_batch_size"]
    assert stages["ref_logprob"].seconds < _stages(plain)["ref_logprob"].seconds


def test_a_stage_token_budget_packs_that_pass_alone(base: dict[str, Any]) -> None:
    """Packed, the train stage with its own budget of 4,000 tokens: a rank's 32 sequences
    of 400 mean tokens over 4 optimizer steps (3,200 tokens each) fit one micro-batch a
    step; old_logprob keeps 2 sequences a micro-batch (16 of them)."""
    base["workload"]["mini_batches"] = 4
    base["pipeline"]["stages"]["train"]["micro_batch_tokens"] = 4000
    stages = _stages(base)
    train, old = stages["train"].detail, stages["old_logprob"].detail
    assert train["micro_batches_per_rank"] == 4
    assert train["micro_batch_tokens"] == pytest.approx(3200)
    assert old["micro_batches_per_rank"] == 16


@pytest.mark.parametrize(("field", "value"), [("micro_batch_size", 0), ("micro_batch_tokens", -1)])
def test_a_stage_micro_batch_below_one_is_refused(
    base: dict[str, Any], field: str, value: int
) -> None:
    from rlplex.errors import ConfigError

    base["pipeline"]["stages"]["train"][field] = value
    with pytest.raises(ConfigError) as info:
        config_from_dict(base, file="bad.yaml")
    assert info.value.field == f"pipeline.stages.train.{field}"


def test_a_stage_budget_of_zero_counts_where_the_workload_packs_by_tokens(
    base: dict[str, Any],
) -> None:
    """A workload budget of 4,000 tokens (the actor's dynamic batches) and old_logprob's 0
    (its role's dynamic batches off): old_logprob counts 2 sequences a micro-batch (16 of
    them a rank), ref_logprob takes the budget (32 x 400 tokens in 4 micro-batches)."""
    base["workload"]["micro_batch_tokens"] = 4000
    base["pipeline"]["stages"]["old_logprob"]["micro_batch_tokens"] = 0
    stages = _stages(base)
    ref, old = stages["ref_logprob"].detail, stages["old_logprob"].detail
    assert (old["micro_batches_per_rank"], old["micro_batch_tokens"]) == (16, 2 * 400)
    assert ref["micro_batches_per_rank"] == 4


def test_a_stages_own_micro_batch_is_said_with_its_pass(base: dict[str, Any]) -> None:
    """``rlplex estimate`` prints every input: a stage's own micro-batch beside the workload's
    (the pass line), a budget of 0 as no budget."""
    from rlplex.cli.stage_lines import pass_line

    base["workload"]["micro_batch_tokens"] = 4000
    base["pipeline"]["stages"]["ref_logprob"]["micro_batch_size"] = 8
    base["pipeline"]["stages"]["old_logprob"]["micro_batch_tokens"] = 0
    stages = _stages(base)
    assert "(its own micro-batch: 8 sequences)" in pass_line(stages["ref_logprob"].detail)
    assert "(its own micro-batch: no token budget)" in pass_line(stages["old_logprob"].detail)
    assert "its own" not in pass_line(stages["train"].detail)


def test_a_token_budget_a_padded_pass_cannot_use_is_said(base: dict[str, Any]) -> None:
    """Padded micro-batches (``workload.packing: false``) are priced by their count: a budget
    there is not priced, and the estimate says so rather than drop it silently."""
    base["workload"]["packing"] = False
    base["pipeline"]["stages"]["ref_logprob"]["micro_batch_tokens"] = 4000
    config = config_from_dict(copy.deepcopy(base), file="t.yaml")
    warnings = estimate_config(config).warnings
    assert any(w.startswith("ref_logprob: its token budget (4,000 tokens") for w in warnings)


def test_the_remedy_names_the_micro_batch_that_sets_the_activations(
    base: dict[str, Any],
) -> None:
    """A stage with its own micro-batch is shrunk by its own knob; a forward pass without
    one by the log-prob settings; a train stage by the workload's."""
    from rlplex.estimate.assumptions import activation_remedy

    base["pipeline"]["stages"]["ref_logprob"]["micro_batch_size"] = 8
    config = config_from_dict(copy.deepcopy(base), file="t.yaml")
    role = config.roles["reference"]
    own = activation_remedy(role, config.pipeline.stage("ref_logprob"))
    assert "pipeline.stages.ref_logprob.micro_batch_size" in own
    forward = activation_remedy(config.roles["actor_train"], config.pipeline.stage("old_logprob"))
    assert "workload.logprob_micro_batch_size" in forward
    train = activation_remedy(config.roles["actor_train"], config.pipeline.stage("train"))
    assert "lower workload.micro_batch_size" in train


def test_a_stage_that_pads_costs_every_sequence_at_the_longest(base: dict[str, Any]) -> None:
    """``packing: false`` on ref_logprob alone (the workload packs): its micro-batches of 2
    sequences hold 2 x (200 + 600) tokens, its matmul FLOPs are every sequence's at 800
    tokens, twice the packed mean's 400 in the ratio of the tokens; old_logprob stays
    packed."""
    base["pipeline"]["stages"]["ref_logprob"]["packing"] = False
    stages = _stages(base)
    ref, old = stages["ref_logprob"], stages["old_logprob"]
    assert ref.detail["micro_batch_tokens"] == 2 * 800
    assert old.detail["micro_batch_tokens"] == 2 * 400
    assert ref.flops > 1.9 * old.flops
