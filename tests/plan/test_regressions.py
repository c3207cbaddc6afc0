"""Named regression cases: each failed before its fix (see the docstrings)."""

from __future__ import annotations

import pytest
from plan_cases import make_config

from rlplex.plan import make_plan, plan_for_placement, verify_plan
from rlplex.plan.steady import lane_repeats, max_cycle_ratio
from rlplex.sim import simulate
from rlplex.sim.simulate import device_order_repeats

ONE_GB = {"weights": 1}
FOUR_ROLES = {
    "r0": {"devices": "0-3", "states": ONE_GB},
    "r1": {"devices": "4-7", "states": ONE_GB},
    "r2": {"devices": "0-3", "states": ONE_GB},
    "r3": {"devices": "0-3", "states": ONE_GB},
    "cpu": {"world_size": 2},
}
TRAIN = {"weights": 2, "optimizer": 4, "grads": 2}


def _zero_stages_then(st4: dict) -> dict:
    stages = {f"st{i}": {"role": "r0", "seconds": 0} for i in range(4)}
    stages["st4"] = st4
    stages["sync"] = {"kind": "weight_sync", "from": "r0", "to": "r1", "after": ["st4"]}
    return stages


def _assert_steady(plan, cfg) -> None:
    """Valid, at or above its bound, repeating, and simulated at its own period."""
    verify_plan(plan, cfg)
    assert plan.period_s >= plan.lower_bound_s - 1e-6
    assert device_order_repeats(plan, plan.pattern_step)
    timeline = simulate(plan, cfg, steps=40)
    assert timeline.meta["period_s"] == pytest.approx(plan.period_s, rel=1e-6)


def test_starved_weight_sync_still_costs_its_time_every_step():
    """Async k=1; st0..st3 (0 s) and st4 (1 s) on r0, a sync r0 -> r1 after st4.

    No stage reads r1's weights, so nothing waited for the sync and the list
    scheduler put every step's sync after all the unrolled st4s; the period,
    measured as the spacing of step ends, came out as one sync (0.04 s) per
    step against a bound of 1.04 s. Every step needs st4 and the sync
    (1 GB / 25 GB/s) on GPUs 0-3: the period is exactly 1.04 s.
    """
    cfg = make_config(
        FOUR_ROLES, _zero_stages_then({"role": "r0", "seconds": 1}), memory=40, mode="async", k=1
    )
    plan = make_plan(cfg)
    assert plan.lower_bound_s == pytest.approx(1.04)
    assert plan.period_s == pytest.approx(1.04)
    _assert_steady(plan, cfg)


def test_sequential_baseline_reloads_dead_weights_for_free_after_a_zero_length_read():
    """Sync; st4 (0 s) reads r1's weights, then the sync r0 -> r1 overwrites them.

    The sequential baseline offloads r1 after st4 and reloads its weights for
    the sync. Between st4 (the last read) and the sync the weights are dead,
    so the reload is an allocation (0 s), as the baseline planned. The verifier
    looked for the next access by start time, found the 0 s st4 that starts
    at the same instant (but ran before the reload) and demanded 0.04 s.
    """
    cfg = make_config(FOUR_ROLES, _zero_stages_then({"role": "r1", "seconds": 0}), memory=40)
    plan = make_plan(cfg, baseline="sequential")
    verify_plan(plan, cfg)
    reload = plan.op("s0/reload/r1/weights#2")
    assert reload.start_s >= plan.op("s0/st4").end_s
    assert reload.end_s == reload.start_s


def _verl_quickstart_work(placement: dict[str, str]):
    """The verl quickstart's recorded work (seconds on 1 GPU) on 16 GPUs, async k=1."""
    roles = {
        "actor_train": {"devices": placement["actor_train"], "states": TRAIN},
        "actor_infer": {
            "devices": placement["actor_infer"],
            "states": {"weights": 1, "kv_cache": 31},
        },
        "reference": {"devices": placement["reference"], "states": {"weights": 1}},
        "critic": {"devices": placement["critic"], "states": TRAIN},
    }
    one = {"at_devices": 1}
    stages = {
        "generate": {"role": "actor_infer", "seconds": 22.1811, "memory_gb": 4, **one},
        "ref_logprob": {
            "role": "reference",
            "seconds": 4.3237,
            "memory_gb": 2,
            "after": ["generate"],
            **one,
        },
        "values": {
            "role": "critic",
            "seconds": 5.8389,
            "memory_gb": 2,
            "needs": ["weights"],
            "after": ["generate"],
            **one,
        },
        "advantage": {"role": "driver", "seconds": 0.1124, "after": ["ref_logprob", "values"]},
        "critic_train": {
            "role": "critic",
            "seconds": 15.5686,
            "memory_gb": 6,
            "after": ["advantage"],
            **one,
        },
        "train": {
            "role": "actor_train",
            "seconds": 20.3638,
            "memory_gb": 6,
            "after": ["advantage"],
            **one,
        },
        "weight_sync": {
            "kind": "weight_sync",
            "from": "actor_train",
            "to": "actor_infer",
            "after": ["train"],
        },
    }
    return make_config(roles, stages, gpus=16, mode="async", k=1)


def test_async_ppo_with_critic_keeps_one_device_order_every_step():
    """actor_infer+reference 0-7 | actor_train+critic 8-15, async k=1 (the replay report).

    The unrolled HEFT rank (longest path to the last unrolled step) made
    train and critic_train swap places on GPUs 8-15 between odd and even
    steps, so no step repeated and the simulator's one-step pattern was
    wrong. Ranks are now per step: every interior step runs the same order.
    """
    half = {"actor_infer": "0-7", "reference": "0-7", "actor_train": "8-15", "critic": "8-15"}
    cfg = _verl_quickstart_work(half)
    plan = make_plan(cfg)
    _assert_steady(plan, cfg)
    orders = []
    for step in range(2, plan.unrolled_steps - 2):
        on_8 = [op for op in plan.ops if op.step == step and 8 in op.devices]
        runs = sorted((op for op in on_8 if op.kind == "run"), key=lambda op: op.start_s)
        orders.append([op.stage for op in runs])
    assert all(order == orders[0] for order in orders)
    # Per step, GPUs 8-15 run values, critic_train and train and the sync's copy.
    assert plan.period_s >= (5.8389 + 15.5686 + 20.3638) / 8 + 1 / 25


def test_async_three_groups_period_is_not_below_its_bound():
    """actor_infer+reference 0-5 | actor_train 6-10 | critic 11-15 (rlplex whatif --auto).

    The bound is the weight-sync cycle: generate 22.1811/6 + ref_logprob
    4.3237/6 + advantage 0.1124 + train 20.3638/5 + sync 1 GB / 25 GB/s, over
    k + 1 = 2 steps = 4.544895 s. The old period (mean spacing of step ends
    over an odd window of an alternating schedule) said 4.527 s.
    """
    cfg = _verl_quickstart_work(
        {"actor_infer": "0-5", "reference": "0-5", "actor_train": "6-10", "critic": "11-15"}
    )
    plan = make_plan(cfg)
    assert plan.lower_bound_s == pytest.approx(4.544895)
    _assert_steady(plan, cfg)


def test_stage_fed_by_the_driver_does_not_drift_ahead_of_the_weight_sync():
    """Async k=2: st2 on r0 (GPUs 6-7) follows a 9 s driver stage; the 29 s st0 reads r1.

    The driver feeds st2 every 9 s but the sync (after st2) is paced by st0,
    29.2 s a step, so in the earliest-start schedule st2 runs further ahead of
    the syncs on GPUs 6-7 every step: no step repeats. The tasks are then
    rescheduled in a fixed order per step, which repeats at the bound.
    """
    roles = {
        "r0": {"devices": "6-7", "states": {"weights": 5}},
        "r1": {"devices": "0-1", "states": {"weights": 5}},
        "r2": {"devices": "0-3", "states": {"weights": 5}},
        "cpu": {"world_size": 2},
    }
    stages = {
        "st0": {"role": "r1", "kind": "train", "seconds": 29, "memory_gb": 8},
        "st1": {"role": "driver", "seconds": 9, "memory_gb": 8},
        "st2": {"role": "r0", "kind": "train", "seconds": 6, "after": ["st1"], "memory_gb": 2},
        "sync": {"kind": "weight_sync", "from": "r0", "to": "r1", "after": ["st2"]},
    }
    cfg = make_config(roles, stages, mode="async", k=2)
    plan = make_plan(cfg)
    assert plan.period_s == pytest.approx(29.2)
    _assert_steady(plan, cfg)


def test_explicit_placement_matches_make_plan_pattern():
    """plan_for_placement and make_plan agree on the repeating step and its period."""
    cfg = make_config(
        FOUR_ROLES, _zero_stages_then({"role": "r0", "seconds": 1}), memory=40, mode="async", k=1
    )
    placement = {r: tuple(cfg.roles[r].devices) for r in ("r0", "r1", "r2", "r3")}
    a, b = make_plan(cfg), plan_for_placement(cfg, placement)
    assert (a.pattern_step, a.period_s) == (b.pattern_step, b.period_s)


def test_max_cycle_ratio_and_lane_repeats_by_hand():
    """Two ops on one lane: a (2 s) then b (3 s), b waits for a of the step before.

    Cycles: the lane a -> b -> a (5 s over 1 step) and b -> b via a (5 s); the
    ratio is 5. A pattern waiting for itself (zero-step cycle) cannot repeat.
    """
    deps = [[(-1, 1)], [(0, 0)]]
    assert max_cycle_ratio([2.0, 3.0], deps) == pytest.approx(5.0)
    assert max_cycle_ratio([2.0, 3.0], [[(0, 1)], [(0, 0)]]) is None
    assert lane_repeats([(0, "a"), (0, "b"), (1, "a"), (1, "b"), (2, "a")], 1)
    # b of step t runs after a of step t+1 on odd steps only: no one-step order.
    alternating = [(0, "a"), (0, "b"), (1, "a"), (2, "a"), (1, "b"), (2, "b"), (3, "a")]
    assert not lane_repeats(alternating, 1) or not lane_repeats(alternating, 2)


def test_an_estimated_weight_sync_is_priced_again_on_other_devices():
    """The loader fills an estimable sync's seconds for the config's own placement (colocated
    here: resharding and the engine's wake-up, 7 s); a plan that splits the two roles used
    to keep those seconds. It now prices the split sync as the estimator does for a config
    written that way (every engine device receives the whole model)."""
    from pathlib import Path

    from rlplex.config import load_config
    from rlplex.plan.costs import weight_sync_seconds

    example = Path(__file__).resolve().parents[2] / "examples" / "estimate_7b.yaml"
    colocated = load_config(example)
    stage = colocated.pipeline.stage("weight_sync")
    here = {"actor_infer": tuple(range(8)), "actor_train": tuple(range(8))}
    assert weight_sync_seconds(colocated, stage, here) == pytest.approx(stage.seconds)
    split = {"actor_infer": (0, 1, 2, 3), "actor_train": (4, 5, 6, 7)}
    moved = weight_sync_seconds(colocated, stage, split)
    written_split = load_config(
        example,
        overrides=[
            "roles.actor_infer.devices=0-3", "roles.actor_train.devices=4-7",
            "roles.reference.devices=4-7",
        ],
    )  # fmt: skip
    expected = written_split.pipeline.stage("weight_sync").seconds
    assert moved == pytest.approx(expected, rel=1e-6)
    assert moved < 0.5 * stage.seconds  # no engine wake-up between disjoint GPUs


def test_auto_placement_takes_workers_wider_than_a_node_and_the_trainers_expert_layout():
    """The search rejected every block in which a worker crossed a node, even a worker wider
    than a node that fills whole nodes, as the config's own rule allows (vLLM tp 16 on 8-GPU
    nodes; NeMo RL's DeepSeek-V3 engines of 32 GPUs): `plan --auto` found no placement at
    all. It also proposed trainers whose expert-parallel size does not divide a pipeline
    stage's devices, which the estimator rejects in a config written that way."""
    from rlplex.plan.search import search_placements

    roles = {
        "infer": {"devices": "auto", "num_gpus_per_worker": 16, "states": ONE_GB},
        "train": {"devices": "auto", "parallel": {"pp": 2, "ep": 8}, "states": TRAIN},
    }
    stages = {
        "gen": {"role": "infer", "seconds": 10},
        "learn": {"role": "train", "seconds": 10, "after": ["gen"]},
        "sync": {"kind": "weight_sync", "from": "train", "to": "infer", "after": ["learn"]},
    }
    cfg = make_config(roles, stages, nodes=4)
    found = search_placements(cfg, top=10, budget_s=None)
    assert found
    for cand in found:
        infer, train = cand.placement["infer"], cand.placement["train"]
        assert len(infer) % 16 == 0 and infer[0] % 8 == 0  # whole nodes per worker
        assert (len(train) // 2) % 8 == 0  # ep 8 divides a pipeline stage's devices


def test_auto_placement_lays_an_engine_out_as_the_estimator_does(monkeypatch):
    """An engine with `parallel.pp` but no `tp` runs tensor parallel over its worker's GPUs
    (the estimator's rule); the search took its tp as 1 and offered engines of 40 or 56 GPUs
    (8-GPU workers, pp 2), which the estimator cannot lay out: their generation fell back to
    scaling the config's seconds. Every candidate's engine now holds whole tp x pp groups."""
    from pathlib import Path

    import rlplex.plan.search as search
    from rlplex.config import load_config
    from rlplex.estimate.generation import generate_seconds_at
    from rlplex.plan.bound import lower_bound
    from rlplex.plan.search import search_placements

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(
        root / "bench/published/heldout_nemorl_qwen3_32b_1off_32gen32train_h100.yaml",
        overrides=[
            "roles.actor_infer.num_gpus_per_worker=8", "roles.actor_infer.parallel.pp=2",
            "roles.actor_train.parallel.tp=8", "roles.reference.parallel.tp=8",
            "roles.actor_train.parallel.pp=1", "roles.reference.parallel.pp=1",
        ],
    )  # fmt: skip
    roles = {n: r.model_copy(update={"auto": True}) if r.is_gpu else r
             for n, r in cfg.roles.items()}  # fmt: skip
    cfg = cfg.model_copy(update={"roles": roles})
    tried: list[int] = []  # the engine's GPUs in every candidate the search bounds

    def spy(config, placement, **kw):
        tried.append(len(placement["actor_infer"]))
        return lower_bound(config, placement, **kw)

    monkeypatch.setattr(search, "lower_bound", spy)
    found = search_placements(cfg, top=10, budget_s=None)
    assert found and tried and all(n % 16 == 0 for n in tried)
    gen = cfg.pipeline.stage("generate")
    for cand in found:
        assert generate_seconds_at(cfg, gen, cand.placement) is not None
