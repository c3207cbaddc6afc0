"""The step DAG: validation errors, cycles against an independent check, order, exports."""

from __future__ import annotations

import subprocess
import sys

import pytest
from child_python import child_env
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplex.dag import (
    CycleError,
    DuplicateStageError,
    Pipeline,
    PipelineBuilder,
    Stage,
    UnknownDependencyError,
    UnknownRoleError,
    WeightSyncError,
    define_pipeline,
    stage,
    weight_sync,
)
from rlplex.dag.export import to_dot, to_mermaid


def grpo(mode: str = "sync", k: int = 0) -> Pipeline:
    b = PipelineBuilder(mode=mode, max_staleness=k)  # type: ignore[arg-type]
    gen = b.stage("generate", role="actor_infer", seconds=120)
    rew = b.stage("reward", role="rewards", seconds=10, after=[gen])
    old = b.stage("old_logprob", role="actor_train", seconds=20, after=[gen], needs=["weights"])
    adv = b.stage("advantage", role="driver", seconds=1, after=[rew, old])
    train = b.stage("train", role="actor_train", seconds=80, after=[adv])
    b.weight_sync(from_="actor_train", to="actor_infer", after=[train])
    return b.build()


def test_builder_kinds_and_order() -> None:
    p = grpo()
    assert p.stage("train").kind == "train"
    assert p.stage("weight_sync").is_weight_sync
    assert p.topological_order() == (
        "generate", "reward", "old_logprob", "advantage", "train", "weight_sync",
    )  # fmt: skip


def test_decorator_style_matches_builder() -> None:
    @stage(role="actor_infer", seconds=120)
    def generate(ctx): ...

    @stage(role="rewards", seconds=10)
    def reward(generate): ...

    @stage(role="actor_train", seconds=80)
    def train(ctx, reward): ...

    @weight_sync(from_="actor_train", to="actor_infer")
    def weight_sync_(train): ...

    p = define_pipeline(generate, reward, train, weight_sync_)
    assert p.stage("train").after == ("reward",)
    assert p.stage("generate").after == ()
    assert p.stage("weight_sync_").to_role == "actor_infer"


def test_undecorated_function_refused() -> None:
    def plain(): ...

    with pytest.raises(TypeError, match="'plain' is not a stage"):
        define_pipeline(plain)


@pytest.mark.parametrize(
    ("stages", "error", "message"),
    [
        (
            [Stage(name="a", role="r"), Stage(name="a", role="r")],
            DuplicateStageError,
            "stage 'a' is defined twice",
        ),
        (
            [Stage(name="a", role="r", after=("zz",))],
            UnknownDependencyError,
            "stage 'a' runs after 'zz', which is not a stage (stages: a)",
        ),
        (
            [Stage(name="a", role="nope")],
            UnknownRoleError,
            "stage 'a' uses role 'nope', which is not defined (roles: r, s)",
        ),
        (
            [Stage.model_validate({"name": "ws", "kind": "weight_sync", "from": "r"})],
            WeightSyncError,
            "weight_sync stage 'ws' needs a 'to' role",
        ),
        (
            [Stage.model_validate({"name": "ws", "from": "r", "to": "r"})],
            WeightSyncError,
            "weight_sync stage 'ws' sends 'r' to itself",
        ),
        (
            [Stage(name="a", role="r", after=("b",)), Stage(name="b", role="r", after=("a",))],
            CycleError,
            "the stages form a cycle: ",
        ),
    ],
)
def test_check_errors(stages, error, message) -> None:
    with pytest.raises(error) as info:
        Pipeline(stages=tuple(stages)).check(["r", "s"])
    assert message in str(info.value)


def test_cycle_lists_the_cycle() -> None:
    p = Pipeline(
        stages=(
            Stage(name="a", role="r", after=("c",)),
            Stage(name="b", role="r", after=("a",)),
            Stage(name="c", role="r", after=("b",)),
        )
    )
    with pytest.raises(CycleError) as info:
        p.check()
    cycle = info.value.cycle
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"a", "b", "c"}


def _has_cycle(n: int, edges: set[tuple[int, int]]) -> bool:
    """Independent check: iterative three-colour DFS over 'dst after src' edges."""
    succ: dict[int, list[int]] = {i: [] for i in range(n)}
    for src, dst in edges:
        succ[src].append(dst)
    colour = [0] * n
    for root in range(n):
        if colour[root]:
            continue
        stack = [(root, iter(succ[root]))]
        colour[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
            elif colour[nxt] == 1:
                return True
            elif colour[nxt] == 0:
                colour[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
    return False


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=20),
        )
    )
)
def test_check_accepts_exactly_the_acyclic(case) -> None:
    n, edges = case
    stages = tuple(
        Stage(
            name=f"s{i}",
            role="r",
            seconds=1,
            after=tuple(sorted({f"s{a}" for a, b in edges if b == i})),
        )
        for i in range(n)
    )
    pipeline = Pipeline(stages=stages)
    if _has_cycle(n, edges):
        with pytest.raises(CycleError):
            pipeline.check(["r"])
    else:
        pipeline.check(["r"])
        order = pipeline.topological_order()
        position = {name: i for i, name in enumerate(order)}
        assert sorted(order) == sorted(s.name for s in stages)
        assert all(position[f"s{a}"] < position[f"s{b}"] for a, b in edges)


_ORDER_SCRIPT = """
from rlplex.dag import PipelineBuilder
b = PipelineBuilder()
g = b.stage("generate", role="i", seconds=1)
for name in ["zeta", "alpha", "mid", "beta", "omega", "kappa"]:
    b.stage(name, role="t", seconds=1, after=[g])
b.stage("join", role="t", seconds=1, after=["zeta", "alpha", "mid", "beta", "omega", "kappa"])
print(",".join(b.build().topological_order()))
"""


def test_order_independent_of_hash_seed() -> None:
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _ORDER_SCRIPT],
            env=child_env(inherit=False, PYTHONHASHSEED=seed, PATH=""),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("0", "1", "12345")
    }
    assert outputs == {"generate,zeta,alpha,mid,beta,omega,kappa,join"}


def test_cross_step_edges_follow_staleness() -> None:
    assert [(e.src, e.dst, e.lag) for e in grpo().cross_step_edges()] == [
        ("weight_sync", "generate", 1)
    ]
    assert grpo("async", 2).cross_step_edges()[0].lag == 3
    assert grpo("sync", 2).cross_step_edges()[0].lag == 1


def test_dot_export() -> None:
    dot = to_dot(grpo())
    assert dot.startswith("digraph pipeline {")
    assert '"generate" -> "reward";' in dot
    assert '"advantage" -> "train";' in dot
    assert '"weight_sync" -> "generate" [style=dashed, constraint=false, label="step +1"];' in dot
    assert 'label="weight_sync\\nactor_train → actor_infer"' in dot
    assert dot.rstrip().endswith("}")


def test_mermaid_export() -> None:
    text = to_mermaid(grpo("async", 1))
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    assert "  generate --> reward" in lines
    assert "  weight_sync -. step +2 .-> generate" in lines
    assert '  train["train<br/>actor_train, 80s"]' in lines
    assert "  class generate role_actor_infer" in lines


def test_mermaid_ids_are_distinct_and_not_mermaid_words() -> None:
    """Found in review (2026-11-29): ``gen-a`` and ``gen_a`` became one node, and a stage
    named ``end`` (a Mermaid word) broke the chart."""
    import rlplex
    from rlplex.dag.export import to_mermaid

    b = rlplex.PipelineBuilder()
    first = b.stage("gen-a", role="a", seconds=1)
    second = b.stage("gen_a", role="a", seconds=1, after=[first])
    b.stage("end", role="a", seconds=1, after=[second])
    lines = to_mermaid(b.build()).splitlines()
    assert "  gen_a --> gen_a_2" in lines and "  gen_a_2 --> stage_end" in lines
