"""From a config to a Plan: pick the policy (planner or a baseline), schedule, package.

:func:`make_plan` is the entry point others call. It resolves the placement
(searching it for ``devices: auto`` roles), schedules with the planner's
policy or a baseline's, and turns the internal schedule into the plan JSON of
DESIGN.md (op ids, devices, dependencies by id, residency, bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlplex.config import Config
from rlplex.errors import ConfigError
from rlplex.plan.bound import lower_bound
from rlplex.plan.costs import config_placement
from rlplex.plan.model import Op, Plan
from rlplex.plan.schedule import Options, Problem, Schedule, all_fit, schedule

BASELINES = ("sequential", "naive-colocate")
"""Baselines computed with the same cost model: today's frameworks' default behaviours."""


def default_unroll(staleness: int) -> int:
    """Steps unrolled for an async plan: enough for k steps in flight to reach steady state."""
    return 3 * (staleness + 1) + 4


def plan_options(
    config: Config,
    placement: Mapping[str, Sequence[int]],
    baseline: str | None = None,
    steps: int | None = None,
) -> Options:
    """The scheduling options of the planner (``baseline=None``) or of a baseline."""
    k = config.pipeline.staleness
    gpu_roles = tuple(placement)
    if baseline is None:
        if k > 0:
            return Options(steps=steps or default_unroll(k), staleness=k, cyclic=False)
        return Options(steps=1, cyclic=True)
    if baseline == "sequential":
        return Options(steps=1, cyclic=True, serial=True, offload_after=gpu_roles, start_empty=True)
    if baseline == "naive-colocate":
        base = plan_options(config, placement, None, steps)
        problem = Problem(config, placement, Options(steps=1))
        if all_fit(problem):
            return base
        # Roles on devices where not everything fits offload everything after each call.
        lay = problem.layout
        crowded = []
        for role in gpu_roles:
            for c in lay.role_classes[role]:
                total = sum(
                    problem.sizes[(r, s)]
                    for r in lay.class_roles[c]
                    for s in config.roles[r].states
                )
                transient = max((t.memory_gb for t in problem.tasks if c in t.classes), default=0.0)
                if total + transient > problem.capacity + 1e-6:
                    crowded.append(role)
                    break
        return Options(
            steps=base.steps,
            staleness=base.staleness,
            cyclic=base.cyclic,
            offload_after=tuple(crowded),
            start_empty=True,
        )
    raise ConfigError(
        f"unknown baseline (expected one of: {', '.join(BASELINES)})",
        field="--baseline",
        value=baseline,
    )


def make_plan(config: Config, *, baseline: str | None = None, steps: int | None = None) -> Plan:
    """The plan of ``config``: the planner's, or the ``sequential`` / ``naive-colocate`` baseline.

    Roles with ``devices: auto`` are placed by :func:`rlplex.plan.search.search_placements`
    first. ``steps`` is the number of steps to unroll (async; a sync plan repeats its
    steady-state step that many times).

    Raises:
        InfeasibleError: a stage's states plus transient memory exceed a GPU,
            naming the stage, the role and the GB figures.
        ConfigError: an unknown baseline.
    """
    placement: dict[str, tuple[int, ...]]
    if any(r.auto for r in config.roles.values()):
        from rlplex.plan.search import search_placements

        placement = dict(search_placements(config, top=1)[0].placement)
    else:
        placement = config_placement(config)
    return plan_for_placement(config, placement, baseline=baseline, steps=steps)


def plan_for_placement(
    config: Config,
    placement: Mapping[str, Sequence[int]],
    *,
    baseline: str | None = None,
    steps: int | None = None,
) -> Plan:
    """The plan of ``config`` on an explicit placement (role -> devices)."""
    options = plan_options(config, placement, baseline, steps)
    sched = schedule(config, placement, options)
    bound = lower_bound(config, placement)
    return to_plan(config, sched, bound.value, options, baseline, repeat=_repeat(options, steps))


def _repeat(options: Options, steps: int | None) -> int:
    return steps if (options.steps == 1 and steps and steps > 1) else 1


def to_plan(
    config: Config,
    sched: Schedule,
    lower_bound_s: float,
    options: Options,
    baseline: str | None = None,
    repeat: int = 1,
) -> Plan:
    """Package an internal schedule as the plan JSON's model."""
    lay = sched.layout
    device_cache: dict[tuple[int, ...], tuple[int, ...]] = {}

    def devices(classes: tuple[int, ...]) -> tuple[int, ...]:
        if classes not in device_cache:
            device_cache[classes] = lay.devices_of(classes)
        return device_cache[classes]

    period = sched.period()
    raw = sched.ops
    ids = [f"s{o.step}/{o.name}" for o in raw]
    ops: list[Op] = []
    for n in range(repeat):
        shift = n * period
        last_ids = _sinks(raw, ids) if n else []
        for i, o in enumerate(raw):
            deps = [_shift_id(ids[d], n) for d in o.deps]
            if n and not o.deps:
                deps = [_shift_id(x, n - 1) for x in last_ids]
            fields = {
                "id": _shift_id(ids[i], n),
                "kind": o.kind,
                "step": o.step + n,
                "devices": devices(o.classes),
                "start_s": o.start + shift,
                "end_s": o.end + shift,
                "deps": tuple(deps),
                "stage": o.stage,
                "role": o.role,
                "state": o.state,
                "memory_gb": o.memory_gb,
                "gb": o.gb,
                "from_role": o.from_role,
            }
            ops.append(Op.model_construct(**fields))
    ops.sort(key=lambda op: (op.start_s, op.id))
    residency = {
        role: [s for s in config.roles[role].states if sched.initial.get((role, s))]
        for role in lay.placement
    }
    steps = sched.steps * repeat
    return Plan(
        mode=config.pipeline.mode,
        makespan_s=sched.makespan + (repeat - 1) * period,
        period_s=period,
        lower_bound_s=lower_bound_s,
        capacity_gb=config.cluster.gpu_memory_gb,
        placement={r: list(d) for r, d in lay.placement.items()},
        states={r: {s: float(v) for s, v in config.roles[r].states.items()} for r in lay.placement},
        initial_residency=residency,
        ops=ops,
        staleness=options.staleness,
        unrolled_steps=steps,
        pattern_step=sched.pattern_step if sched.steps > 1 else 0,
        baseline=baseline,
    )


def _shift_id(op_id: str, n: int) -> str:
    if not n:
        return op_id
    step, _, rest = op_id.partition("/")
    return f"s{int(step[1:]) + n}/{rest}"


def _sinks(raw, ids) -> list[str]:
    """Ops of a step nothing else in it waits for: where the next step's first ops start."""
    used = {d for o in raw for d in o.deps}
    return [ids[i] for i in range(len(raw)) if i not in used]
