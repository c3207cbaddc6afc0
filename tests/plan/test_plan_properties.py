"""Property tests: random pipelines, clusters and placements always give valid plans."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from plan_cases import make_config

from rlplex.errors import InfeasibleError
from rlplex.plan import make_plan, verify_plan
from rlplex.sim import simulate

BLOCKS = ["0-3", "4-7", "0-7", "0-1", "2-3", "4-5", "6-7"]


@st.composite
def configs(draw):
    memory = draw(st.sampled_from([40, 80]))
    state_gb = st.integers(min_value=1, max_value=30)
    n_roles = draw(st.integers(min_value=1, max_value=4))
    roles = {}
    for i in range(n_roles):
        states = {"weights": draw(state_gb)}
        if draw(st.booleans()):
            states["optimizer"] = draw(state_gb)
        if draw(st.booleans()):
            states[draw(st.sampled_from(["grads", "kv_cache"]))] = draw(state_gb)
        roles[f"r{i}"] = {"devices": draw(st.sampled_from(BLOCKS)), "states": states}
    roles["cpu"] = {"world_size": 2}
    names = [*roles, "driver"]
    stages = {}
    n_stages = draw(st.integers(min_value=1, max_value=7))
    for j in range(n_stages):
        name = f"st{j}"
        after = draw(st.lists(st.sampled_from(list(stages) or ["-"]), max_size=2, unique=True))
        stages[name] = {
            "role": draw(st.sampled_from(names)),
            "seconds": draw(st.integers(min_value=0, max_value=50)),
            "after": [a for a in after if a != "-"],
            "memory_gb": draw(st.sampled_from([0, 2, 8])),
            "kind": draw(st.sampled_from(["run", "run", "train"])),
        }
    mode, k = "sync", 0
    gpu = [r for r in roles if r != "cpu"]
    if len(gpu) >= 2 and draw(st.booleans()):
        src, dst = gpu[0], gpu[1]
        stages["sync"] = {
            "kind": "weight_sync",
            "from": src,
            "to": dst,
            "after": [f"st{n_stages - 1}"],
        }
        disjoint = not set(_ranks(roles[src]["devices"])) & set(_ranks(roles[dst]["devices"]))
        if disjoint and draw(st.booleans()):
            mode, k = "async", draw(st.integers(min_value=0, max_value=2))
    return make_config(roles, stages, memory=memory, mode=mode, k=k)


def _ranks(spec: str) -> range:
    a, b = spec.split("-")
    return range(int(a), int(b) + 1)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_random_plans_verify_and_respect_the_bound(cfg):
    try:
        plan = make_plan(cfg)
    except InfeasibleError:
        assume(False)
        return
    verify_plan(plan, cfg)
    assert plan.period_s >= plan.lower_bound_s - 1e-6
    base = make_plan(cfg, baseline="sequential")
    verify_plan(base, cfg)
    verify_plan(make_plan(cfg, baseline="naive-colocate"), cfg)
    timeline = simulate(plan, cfg, steps=3)
    assert len(timeline.metrics) == 3
