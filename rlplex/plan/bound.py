"""A proven lower bound on the step time of any valid plan for one placement.

Used to report how far a plan is from optimal (its gap) and to prune the
placement search without scheduling. Three bounds, each valid on its own:

- critical path (sync): the step's longest dependency chain of stage
  durations; transfers only add to it;
- busiest lane: every GPU runs one compute op at a time and every CPU role one
  stage at a time, so each step costs at least the work of its busiest device
  class or CPU role;
- weight-sync cycle (async, staleness k): generate of step t+k+1 starts after
  weight_sync of step t, which ends at least the reader-to-sync path after
  generate of step t started, so k+1 periods cover that path.

Each bound takes the stages' seconds from the cost model. The placement search
ranks its candidates with ``relaxed=True``: an engine with in-flight weight
updates is then priced at its steady state (every step at full slots), which its
loop cannot beat on average, instead of simulating the loop for each trainer
turn the candidates give (:func:`~rlplex.plan.costs.stage_seconds_bound`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rlplex.config import Config
from rlplex.plan.costs import stage_seconds, stage_seconds_bound
from rlplex.plan.layout import group_device_classes
from rlplex.resources.cluster import DRIVER


@dataclass(frozen=True)
class Bound:
    """The lower bound and its parts."""

    value: float
    """The bound: the largest of the parts that apply to the mode."""
    critical_path: float
    """Longest chain of stage durations in one step."""
    busiest_lane: float
    """Compute seconds per step of the busiest device class or CPU role."""
    cycle: float
    """Async: reader-to-weight-sync path divided by k+1 (0 in sync mode)."""


def lower_bound(
    config: Config,
    placement: Mapping[str, Sequence[int]],
    *,
    staleness: int | None = None,
    serial: bool = False,
    relaxed: bool = False,
) -> Bound:
    """The lower bound of ``config`` on ``placement`` (role -> devices).

    ``staleness`` defaults to the pipeline's (0 in sync mode); ``serial`` bounds
    the ``sequential`` baseline, whose stages run one at a time; ``relaxed``
    prices in-flight engines at their steady state (cheaper, never above).
    """
    pipeline = config.pipeline
    k = pipeline.staleness if staleness is None else staleness
    layout = group_device_classes(placement)
    seconds = stage_seconds_bound if relaxed else stage_seconds
    dur = {s.name: seconds(config, s, layout.placement) for s in pipeline.stages}
    order = pipeline.topological_order()
    finish: dict[str, float] = {}
    for name in order:
        stage = pipeline.stage(name)
        finish[name] = dur[name] + max((finish[d] for d in stage.after), default=0.0)
    critical = max(finish.values(), default=0.0)
    load: dict[object, float] = {}
    for stage in pipeline.stages:
        roles = stage.roles
        lanes: set[object] = set()
        for role in roles:
            if role in layout.role_classes:
                lanes.update(layout.role_classes[role])
            else:
                lanes.add(role or DRIVER)
        for lane in lanes:
            load[lane] = load.get(lane, 0.0) + dur[stage.name]
    busiest = max(load.values(), default=0.0)
    if serial:
        busiest = sum(dur.values())
    cycle = 0.0
    if k > 0:
        role_states = config.role_states()
        for sync in pipeline.stages:
            if not sync.is_weight_sync:
                continue
            for reader in pipeline.weight_readers(sync, role_states):
                path = _longest_path(pipeline, order, dur, reader, sync.name)
                cycle = max(cycle, path / (k + 1))
    value = max(busiest, cycle) if k > 0 else max(critical, busiest)
    return Bound(value=value, critical_path=critical, busiest_lane=busiest, cycle=cycle)


def _longest_path(pipeline, order, dur, src: str, dst: str) -> float:
    """Longest path from the start of ``src`` to the end of ``dst`` (0 if none)."""
    best: dict[str, float] = {src: dur[src]}
    for name in order:
        if name == src:
            continue
        stage = pipeline.stage(name)
        reach = [best[d] for d in stage.after if d in best]
        if reach:
            best[name] = max(reach) + dur[name]
    return best.get(dst, 0.0)
