"""The problem, the scheduler and async rescheduling, each driven on its own."""

from __future__ import annotations

import pytest

from rlplex.config import load_config
from rlplex.plan import make_plan
from rlplex.plan.costs import config_placement
from rlplex.plan.policy import default_unroll, plan_options
from rlplex.plan.problem import Options, Problem
from rlplex.plan.rescheduling import priorities, unrolled_schedule
from rlplex.plan.scheduler import Scheduler


def test_problem_unrolls_steps_with_cross_step_edges() -> None:
    cfg = load_config("examples/async.yaml")
    k = cfg.pipeline.staleness
    problem = Problem(cfg, config_placement(cfg), Options(steps=4, staleness=k, cyclic=False))
    stages = len(cfg.pipeline.stages)
    assert len(problem.tasks) == 4 * stages
    gen = problem.tasks[problem.task_of[(k + 1, "generate")]]
    ws = problem.task_of[(0, "weight_sync")]
    assert ws in gen.preds
    # The same stage has the same rank in every step (ties broken alike every step).
    ranks = {(t.name, t.step): t.rank for t in problem.tasks}
    assert ranks[("generate", 0)] == ranks[("generate", 3)]


def test_scheduler_places_every_task_at_the_earliest_time_its_deps_allow() -> None:
    cfg = load_config("examples/grpo.yaml")
    problem = Problem(cfg, config_placement(cfg), Options())
    resident = {p: True for p in problem.pairs}
    dirty = {p: False for p in problem.pairs}
    sched = Scheduler(problem, resident, dirty).run()
    assert {(o.step, o.name) for o in sched.ops if o.work.kind == "run"} >= {(0, "train")}
    for op in sched.ops:
        earliest = max((sched.ops[d].end for d in op.deps), default=0.0)
        assert op.start == pytest.approx(earliest)


def test_async_rescheduling_gives_a_repeating_step() -> None:
    cfg = load_config("examples/async.yaml")
    placement = config_placement(cfg)
    options = plan_options(cfg, placement)
    assert options.steps == default_unroll(cfg.pipeline.staleness)
    problem = Problem(cfg, placement, options)
    pairs = problem.pairs
    sched = unrolled_schedule(problem, {p: False for p in pairs}, {p: False for p in pairs})
    assert sched.steady_period is not None
    assert sched.period() == pytest.approx(make_plan(cfg).period_s)
    orders = priorities(problem, sched)
    assert len(orders) == 2 and all(len(o) == len(problem.tasks) for o in orders)
    first = problem.task_of[(1, "generate")]
    later = problem.task_of[(2, "generate")]
    assert all(o[later] > o[first] for o in orders)
