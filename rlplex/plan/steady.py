"""The steady state of an unrolled (async) schedule: its repeating step and true period.

An async plan unrolls a few steps; the simulator and the executor repeat one
of them (the *pattern step*) forever, each op waiting for the ops it depends
on, as (step offset, op) pairs. Repeating a step is a valid schedule only if
the unrolled steps around it have the same ops with the same relative
dependencies (which include each device's order: every op waits for the op
before it on its compute lane or copy engine). The period of that repetition
is then exact: the maximum, over the cycles of the pattern's dependency graph,
of the cycle's durations divided by the steps it spans (the maximum cycle
ratio of a max-plus recurrence). Each device's order is one such cycle
spanning one step, and the weight-sync edge closes one spanning k+1 steps, so
this period is never below :func:`rlplex.plan.bound.lower_bound`.

Measuring the period as the spacing of unrolled step ends instead is wrong:
a starved op (a weight sync no one waits for) can push every step's end to
the end of the unrolled window, and a schedule whose device order alternates
between odd and even steps has no one-step period at all.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import pairwise

EPS = 1e-9

Deps = Sequence[Sequence[tuple[int, int]]]
"""For each pattern op: the (step offset, op index) pairs it waits for."""


def max_cycle_ratio(durations: Sequence[float], deps: Deps) -> float | None:
    """Steady-state period of repeating a one-step op pattern; None if it cannot repeat.

    Op j of step n starts when each dependency (off, k), op k of step n + off,
    has ended. The period is the maximum over dependency cycles of
    ``sum(durations) / -sum(offsets)``, found by raising a candidate period to
    the ratio of a cycle that is still positive under it (Bellman-Ford) until
    none is. A cycle spanning zero or a negative number of steps means the
    pattern waits for itself: None.
    """
    n = len(durations)
    edges = [(k, j, off, durations[k]) for j in range(n) for off, k in deps[j]]
    scale = 1.0 + sum(abs(d) for d in durations)
    period = 0.0
    for _ in range(4 * n + 8):
        cycle = _positive_cycle(n, edges, period, EPS * scale)
        if cycle is None:
            return period
        total = sum(d for _, _, _, d in cycle)
        span = -sum(off for _, _, off, _ in cycle)
        if span <= 0:
            return None
        ratio = total / span
        if ratio <= period + EPS * scale:
            return period
        period = ratio
    return period


def _positive_cycle(n: int, edges, period: float, eps: float):
    """Edges of a cycle with ``sum(d + off * period) > 0``, or None."""
    dist = [0.0] * n
    pred: list[tuple | None] = [None] * n
    last = -1
    for _ in range(n):
        last = -1
        for edge in edges:
            k, j, off, d = edge
            value = dist[k] + d + off * period
            if value > dist[j] + eps:
                dist[j] = value
                pred[j] = edge
                last = j
        if last < 0:
            return None
    # A node relaxed in the n-th pass leads back, through its predecessors, into a cycle.
    node = last
    for _ in range(n):
        node = pred[node][0]  # type: ignore[index]
    cycle = []
    cur = node
    while True:
        edge = pred[cur]
        assert edge is not None
        cycle.append(edge)
        cur = edge[0]
        if cur == node:
            break
    return cycle


def lane_repeats(lane: Sequence[tuple[int, Hashable]], step: int) -> bool:
    """Whether repeating ``step``'s ops of one device lane gives that lane one chain.

    ``lane`` lists the lane's ops, (step, name), in the order the lane runs
    them. Repeating one step is a valid order only if each of the step's ops
    follows exactly one op of the lane and these predecessors form one cycle
    through all of the step's ops spanning exactly one step. Two chains that
    drift apart (a stage running ever further ahead of another on the same
    GPUs) or two orders alternating between steps fail this.
    """
    mine = {name for s, name in lane if s == step}
    if not mine:
        return True
    pred: dict[Hashable, tuple[Hashable, int]] = {}
    for (ps, pname), (s, name) in pairwise(lane):
        if s == step:
            pred[name] = (pname, ps - step)
    if set(pred) != mine or sorted(map(repr, (k for k, _ in pred.values()))) != sorted(
        map(repr, mine)
    ):
        return False
    first = next(iter(mine))
    key, total, seen = first, 0, 0
    while True:
        key, off = pred[key]
        total += off
        seen += 1
        if key == first or seen > len(mine):
            break
    return key == first and seen == len(mine) and total == -1


Signature = dict[Hashable, frozenset[tuple[int, Hashable]]]
"""Per op name of one step: its dependencies as (step offset, op name)."""


def repeating_steps(signatures: Sequence[Signature]) -> list[int]:
    """Steps whose ops and relative dependencies equal both neighbours' (interior steps only)."""
    return [
        s
        for s in range(1, len(signatures) - 1)
        if signatures[s] == signatures[s - 1] and signatures[s] == signatures[s + 1]
    ]


def pick_pattern(
    signatures: Sequence[Signature],
    durations: Sequence[dict[Hashable, float]],
    lanes: Sequence[Sequence[tuple[int, Hashable]]],
    prefer: int,
) -> tuple[int, float] | None:
    """The repeating step nearest ``prefer`` whose pattern can repeat, with its period.

    ``durations[s]`` gives the duration of each op of step s; ``lanes`` each
    device lane's ops in order (see :func:`lane_repeats`). None when no
    unrolled step repeats (the device order changes from step to step).
    """
    for step in sorted(repeating_steps(signatures), key=lambda s: (abs(s - prefer), -s)):
        if not all(lane_repeats(lane, step) for lane in lanes):
            continue
        names = list(signatures[step])
        index = {name: i for i, name in enumerate(names)}
        if any(dep not in index for name in names for _, dep in signatures[step][name]):
            continue
        deps = [
            [(off, index[dep]) for off, dep in sorted(signatures[step][name], key=repr)]
            for name in names
        ]
        period = max_cycle_ratio([durations[step][name] for name in names], deps)
        if period is not None:
            return step, period
    return None
