"""The sizing grid: tensor parallel sizes the model allows, split sizes, candidates, the front."""

from __future__ import annotations

from rlplex.plan.sizing import Knobs, candidates, pareto_front, split_sizes, tp_choices


def test_tp_divides_the_heads_and_spans_whole_nodes():
    # Qwen2.5-7B: 28 query heads, 4 KV heads: 8 does not divide 28.
    assert tp_choices(8, 8, heads=28, kv_heads=4, limit=8) == [1, 2, 4]
    # 64 heads, 8 KV heads on 32 GPUs of 8-GPU nodes: 16 spans two whole nodes.
    assert tp_choices(32, 8, heads=64, kv_heads=8, limit=8) == [1, 2, 4, 8, 16, 32]
    # 6-GPU nodes (powers of two only): 4 and 8 would straddle a node.
    assert tp_choices(12, 6, heads=48, kv_heads=48, limit=8) == [1, 2]
    # A tp must divide the rollout's GPUs.
    assert tp_choices(6, 8, heads=32, kv_heads=8, limit=8) == [1, 2]


def test_split_sizes_are_multiples_of_the_worker_and_strictly_inside():
    assert split_sizes(8, 1) == [2, 4, 6]
    assert split_sizes(8, 4) == [4]  # 2 rounds to 0 and 6 to 8: not inside
    assert split_sizes(4, 4) == []


def test_candidates_async_only_when_split():
    cands = candidates(8, "h100", 8, heads=28, kv_heads=4)
    colocated = [k for k in cands if k.colocated]
    assert colocated and all(k.staleness == 0 for k in colocated)
    assert {k.staleness for k in cands if not k.colocated} == {0, 1, 2}
    assert len(set(cands)) == len(cands)
    assert all(k.rollout_gpus % k.rollout_tp == 0 for k in cands)
    alone = candidates(8, "h100", 8, heads=28, kv_heads=4, can_split=False)
    assert all(k.colocated for k in alone)
    assert Knobs(8, "h100", 4, 2, "fsdp", 1).label() == "split 4+4, rollout tp 2, fsdp, async k=1"


def test_pareto_front_keeps_what_no_other_beats_on_both():
    points = [(10.0, 5.0), (20.0, 4.0), (15.0, 6.0), (30.0, 4.0), (5.0, 9.0)]
    assert pareto_front(points) == [4, 0, 1]


def test_tp_sizes_start_where_the_weights_fit():
    """Found in review (2026-11-29): the three smallest sizes for a 72B model were 1, 2 and
    4, two of which cannot hold its weights, so tp 8 (the file's own, and faster) was never
    tried. 145 GB of bf16 weights in an engine of 0.9 x 80 GB: tp 1 and 2 leave no room."""
    from rlplex.plan.sizing import weights_min_tp

    assert weights_min_tp(145.0, 72.0) == 4  # 145 / 2 = 72.5 >= 72
    assert weights_min_tp(15.2, 72.0) == 1
    assert weights_min_tp(144.0, 72.0) == 4  # 72.0 leaves no KV cache at all
    assert tp_choices(32, 8, heads=64, kv_heads=8, min_tp=4) == [4, 8, 16]
    own = candidates(32, "h100", 8, heads=64, kv_heads=8, min_tp=1, own_tp=32, can_split=False)
    assert sorted({k.rollout_tp for k in own}) == [1, 2, 4, 32]  # the file's own, too
