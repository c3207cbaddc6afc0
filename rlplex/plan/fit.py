"""Fit checks: does each stage fit a GPU alone, does everything fit together?

Before scheduling, :func:`check_fits` refuses a placement on which some stage
cannot run even with everything else offloaded (its needed states plus its
transient memory exceed a GPU). :func:`crowded_classes` finds the device
classes where not every role's states fit at once: the planner starts with
everything resident when there are none, and the ``naive-colocate`` baseline
offloads the roles on them after every call.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlplex.errors import InfeasibleError
from rlplex.plan.ids import OpKind
from rlplex.plan.problem import Problem


def crowded_classes(problem: Problem) -> list[int]:
    """Device classes where every role's states together, plus any stage's transient, overflow."""
    lay = problem.layout
    out = []
    for c in range(lay.num_classes):
        total = sum(
            problem.sizes[(r, s)]
            for r in lay.class_roles[c]
            for s in problem.config.roles[r].states
        )
        transient = max((t.work.memory_gb for t in problem.tasks if c in t.classes), default=0.0)
        if total + transient > problem.capacity + 1e-6:
            out.append(c)
    return out


def all_fit(problem: Problem) -> bool:
    """Whether every role's states fit together on every device (plus any stage's transient)."""
    return not crowded_classes(problem)


def crowded_roles(problem: Problem, roles: Sequence[str]) -> list[str]:
    """The roles of ``roles`` that have a device in a crowded class, in the given order."""
    crowded = set(crowded_classes(problem))
    return [r for r in roles if any(c in crowded for c in problem.layout.role_classes[r])]


def check_fits(problem: Problem) -> None:
    """Each stage alone must fit a GPU: its needed states plus transient memory.

    Raises:
        InfeasibleError: naming the stage, the role and the GB figures.
    """
    cap = problem.capacity
    lay = problem.layout
    seen: set[str] = set()
    for t in problem.tasks:
        if t.name in seen or not t.classes:
            continue
        seen.add(t.name)
        for c in t.classes:
            parts = [
                (f"{r}.{s}", problem.sizes[(r, s)])
                for (r, s) in t.needs
                if c in lay.role_classes[r]
            ]
            total = sum(gb for _, gb in parts) + t.work.memory_gb
            if total > cap + 1e-6:
                detail = " + ".join(f"{n} {gb:g}" for n, gb in parts)
                if t.work.memory_gb:
                    detail += f" + transient {t.work.memory_gb:g}"
                role = (
                    f"roles {t.work.from_role!r} and {t.work.role!r}"
                    if t.work.kind == OpKind.WEIGHT_SYNC
                    else f"role {t.work.role!r}"
                )
                largest = max([*parts, ("transient memory", t.work.memory_gb)], key=lambda p: p[1])
                raise InfeasibleError(
                    f"stage {t.name!r} on {role} needs {total:g} GB per GPU"
                    f" ({detail} GB) on GPUs {span(lay.classes[c])}, but a GPU has"
                    f" {cap:g} GB (gpu_memory_gb); it overflows by {total - cap:g} GB while"
                    f" {t.name!r} runs, the largest part being {largest[0]} ({largest[1]:g} GB)"
                )


def span(devices: Sequence[int]) -> str:
    if len(devices) > 1 and devices[-1] - devices[0] == len(devices) - 1:
        return f"{devices[0]}-{devices[-1]}"
    return ",".join(map(str, devices))
