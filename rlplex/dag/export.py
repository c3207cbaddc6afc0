"""Pipelines as Graphviz DOT and Mermaid text, for docs and quick looks."""

from __future__ import annotations

import zlib

from rlplex.dag.pipeline import Pipeline

PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip
"""Role colours (Tableau 10)."""

KNOWN_ROLE_COLOURS = {
    "actor_train": PALETTE[0],
    "actor_infer": PALETTE[1],
    "reference": PALETTE[2],
    "critic": PALETTE[3],
    "reward": PALETTE[4],
    "rewards": PALETTE[4],
    "driver": PALETTE[9],
    "inference": PALETTE[5],
    "reward_model": PALETTE[6],
}
"""The roles of ROLL, verl and RLinf keep one colour in every chart and DAG picture."""


def role_colour(role: str) -> str:
    """The colour of ``role``, keyed by its name alone, so that it is the same in every chart.

    Known roles have fixed colours; any other name picks a palette colour by a
    stable hash of the name (not by the order roles appear, which differs from
    chart to chart).
    """
    if role in KNOWN_ROLE_COLOURS:
        return KNOWN_ROLE_COLOURS[role]
    return PALETTE[zlib.crc32(role.encode()) % len(PALETTE)]


def role_colours(pipeline: Pipeline) -> dict[str, str]:
    """The colour of every role the pipeline uses (see :func:`role_colour`)."""
    return {role: role_colour(role) for role in pipeline.roles_used()}


def _label(pipeline: Pipeline, name: str) -> str:
    stage = pipeline.stage(name)
    if stage.is_weight_sync:
        return f"{name}\\n{stage.from_role} → {stage.to_role}"
    cost = f", {stage.seconds:g}s" if stage.seconds is not None else ""
    return f"{name}\\n{stage.role}{cost}"


def to_dot(pipeline: Pipeline) -> str:
    """Graphviz DOT: nodes coloured by role, cross-step edges dashed and labelled."""
    colours = role_colours(pipeline)
    lines = [
        "digraph pipeline {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontcolor=white];',
    ]
    for stage in pipeline.stages:
        role = stage.from_role if stage.is_weight_sync else stage.role
        colour = colours.get(role or "", "#888888")
        lines.append(
            f'  "{stage.name}" [label="{_label(pipeline, stage.name)}", fillcolor="{colour}"];'
        )
    for stage in pipeline.stages:
        for dep in stage.after:
            lines.append(f'  "{dep}" -> "{stage.name}";')
    for edge in pipeline.cross_step_edges():
        lines.append(
            f'  "{edge.src}" -> "{edge.dst}"'
            f' [style=dashed, constraint=false, label="step +{edge.lag}"];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_id(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


MERMAID_WORDS = frozenset({"end", "graph", "flowchart", "subgraph", "class", "classdef",
                           "click", "style", "linkstyle", "direction"})  # fmt: skip
"""Words Mermaid reads as its own in a flowchart: not usable as a node id."""


def _mermaid_ids(names: list[str]) -> dict[str, str]:
    """A distinct Mermaid node id per stage: the name with other characters as ``_``
    (``gen-a`` and ``gen.a`` would both be ``gen_a``: the second gets ``gen_a_2``), a
    Mermaid word (``end``) prefixed."""
    ids: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        base = _mermaid_id(name)
        base = f"stage_{base}" if base.lower() in MERMAID_WORDS else base
        candidate, k = base, 2
        while candidate in used:
            candidate, k = f"{base}_{k}", k + 1
        used.add(candidate)
        ids[name] = candidate
    return ids


def to_mermaid(pipeline: Pipeline) -> str:
    """Mermaid flowchart text: one class per role, cross-step edges dotted."""
    colours = role_colours(pipeline)
    node = _mermaid_ids([s.name for s in pipeline.stages])
    lines = ["flowchart LR"]
    for stage in pipeline.stages:
        label = _label(pipeline, stage.name).replace("\\n", "<br/>").replace('"', "#quot;")
        lines.append(f'  {node[stage.name]}["{label}"]')
    for stage in pipeline.stages:
        for dep in stage.after:
            lines.append(f"  {node[dep]} --> {node[stage.name]}")
    for edge in pipeline.cross_step_edges():
        lines.append(f"  {node[edge.src]} -. step +{edge.lag} .-> {node[edge.dst]}")
    for role, colour in colours.items():
        lines.append(f"  classDef role_{_mermaid_id(role)} fill:{colour},color:#fff")
    for stage in pipeline.stages:
        role = stage.from_role if stage.is_weight_sync else stage.role
        lines.append(f"  class {node[stage.name]} role_{_mermaid_id(role or '')}")
    return "\n".join(lines) + "\n"
