"""The scheduler's parts, each on its own: memory profile, eviction policy, fit checks."""

from __future__ import annotations

import math

import pytest
from plan_cases import make_config

from rlplex.errors import InfeasibleError
from rlplex.plan.eviction import EvictionCandidate, choose_victim
from rlplex.plan.fit import all_fit, check_fits, crowded_classes, crowded_roles
from rlplex.plan.memory import MemoryProfile
from rlplex.plan.problem import Options, Problem


def test_memory_profile_finds_when_an_amount_fits_for_good() -> None:
    mem = MemoryProfile(base=50.0)
    mem.add(10.0, -20.0, op=7)  # 20 GB freed at t=10 by op 7
    assert mem.final == 30.0
    assert mem.earliest_fit(0.0, 40.0, capacity=80.0) == (10.0, 7)
    assert mem.earliest_fit(12.0, 40.0, capacity=80.0) == (12.0, -1)
    assert mem.earliest_fit(0.0, 20.0, capacity=80.0) == (0.0, -1)
    assert mem.earliest_fit(0.0, 60.0, capacity=80.0)[0] == math.inf


def _cand(pair, cost=0.0, size=1.0, next_use=1.0, order=0) -> EvictionCandidate:
    return EvictionCandidate(pair=pair, cost_s=cost, size_gb=size, next_use=next_use, order=order)


def _earliest_fit_by_hand(
    base: float, events: list[tuple[float, float, int]], lb: float, amount: float, capacity: float
) -> tuple[float, int]:
    """The first event time t >= lb (or lb) from which usage + amount stays within capacity."""
    times = sorted({t for t, _, _ in events})
    order = sorted(events, key=lambda e: (e[0], 0 if e[1] < 0 else 1, e[1], e[2]))

    def usage_from(t: float) -> float:
        # The most used at any point from t on (each event applies at its time).
        use = base + sum(d for tt, d, _ in order if tt <= t)
        worst = use
        for tt, d, _ in order:
            if tt > t:
                use += d
                worst = max(worst, use)
        return worst

    limit = capacity + 1e-6
    if usage_from(lb) + amount <= limit:
        return lb, -1
    for t in times:
        if t > lb and usage_from(t) + amount <= limit:
            first_op = next(op for tt, _, op in order if tt == t)  # frees come first
            return t, first_op
    return math.inf, -1


def test_memory_profile_earliest_fit_agrees_with_a_walk_by_hand() -> None:
    """Random profiles: the fit the profile finds (its walk stops at lb) is the one a walk of
    every event finds, and so is the op that frees it."""
    import random

    rng = random.Random(7)
    for _ in range(400):
        mem = MemoryProfile(base=rng.choice([0.0, 20.0, 50.0]))
        events: list[tuple[float, float, int]] = []
        for op in range(rng.randint(0, 8)):
            start = float(rng.randint(0, 10))
            size = float(rng.choice([5, 10, 20, 30]))
            end = start + rng.randint(1, 5)
            for t, d in ((start, size), (end, -size)):
                mem.add(t, d, op)
                events.append((t, d, op))
        lb = float(rng.randint(0, 16))
        amount = float(rng.choice([5, 10, 20, 40]))
        if mem.final + amount > 80.0:
            continue  # the scheduler evicts first: what it asks for fits in the end
        got = mem.earliest_fit(lb, amount, 80.0)
        want = _earliest_fit_by_hand(mem.base, events, lb, amount, 80.0)
        assert got == want, (events, lb, amount)


def test_eviction_prefers_free_then_furthest_next_use_then_enough() -> None:
    free = _cand(("a", "grads"), cost=0.0, next_use=1.0, order=3)
    costly = _cand(("b", "optimizer"), cost=2.0, next_use=99.0, order=0)
    assert choose_victim([costly, free], deficit_gb=1.0) == ("a", "grads")
    near = _cand(("a", "weights"), cost=1.0, next_use=5.0)
    far = _cand(("b", "weights"), cost=1.0, next_use=9.0, order=1)
    assert choose_victim([near, far], deficit_gb=1.0) == ("b", "weights")
    small = _cand(("a", "x"), cost=1.0, size=2.0, order=0)
    big = _cand(("b", "y"), cost=3.0, size=10.0, order=1)
    assert choose_victim([small, big], deficit_gb=5.0) == ("b", "y")  # alone frees enough
    assert choose_victim([], deficit_gb=1.0) is None


def _crowded_config(memory: float):
    roles = {
        "train": {"devices": "0-3", "states": {"weights": 30, "optimizer": 30}},
        "infer": {"devices": "0-3", "states": {"weights": 30}},
        "solo": {"devices": "4-7", "states": {"weights": 10}},
    }
    stages = {
        "generate": {"role": "infer", "seconds": 1, "memory_gb": 5},
        "train": {"role": "train", "seconds": 1, "after": ["generate"], "kind": "train"},
        "score": {"role": "solo", "seconds": 1, "after": ["generate"]},
    }
    return make_config(roles, stages, memory=memory)


def test_crowded_classes_and_roles() -> None:
    cfg = _crowded_config(memory=80)
    problem = Problem(cfg, {r: cfg.roles[r].devices for r in cfg.gpu_roles}, Options())
    assert crowded_classes(problem) == [0]
    assert crowded_roles(problem, ["train", "infer", "solo"]) == ["train", "infer"]
    assert not all_fit(problem)
    roomy = _crowded_config(memory=200)
    assert all_fit(Problem(roomy, {r: roomy.roles[r].devices for r in roomy.gpu_roles}, Options()))


def test_check_fits_names_the_stage_and_the_figures() -> None:
    cfg = _crowded_config(memory=62)
    problem = Problem(cfg, {r: cfg.roles[r].devices for r in cfg.gpu_roles}, Options())
    check_fits(problem)  # every stage fits alone
    tight = _crowded_config(memory=34)
    problem = Problem(tight, {r: tight.roles[r].devices for r in tight.gpu_roles}, Options())
    with pytest.raises(InfeasibleError, match=r"stage 'generate' on role 'infer' needs 35 GB"):
        check_fits(problem)


def test_policies_of_the_planner_and_the_baselines() -> None:
    from rlplex.errors import ConfigError
    from rlplex.plan.policy import plan_options

    cfg = _crowded_config(memory=80)
    placement = {r: cfg.roles[r].devices for r in cfg.gpu_roles}
    planner = plan_options(cfg, placement)
    assert planner.steps == 1 and planner.cyclic and not planner.offload_after
    seq = plan_options(cfg, placement, "sequential")
    assert seq.serial and seq.start_empty and seq.offload_after == ("train", "infer", "solo")
    naive = plan_options(cfg, placement, "naive-colocate")
    assert naive.offload_after == ("train", "infer") and naive.start_empty
    roomy = _crowded_config(memory=200)
    assert plan_options(roomy, placement, "naive-colocate") == plan_options(roomy, placement)
    with pytest.raises(ConfigError, match="unknown baseline"):
        plan_options(cfg, placement, "random")
