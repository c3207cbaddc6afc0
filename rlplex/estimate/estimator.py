"""Stage seconds and state GB of a config, from its model, workload and GPU.

:func:`estimate` takes the checked pieces of a config (cluster, roles,
pipeline, model, workload, efficiency) and returns an :class:`Estimate`: per
stage its seconds, FLOPs, bytes and what bounds it; per role the GB per device
of every state and its peak; and every assumption made, so that nothing is
assumed silently. Formulas: :mod:`rlplex.estimate.formulas` and
``docs/cost-model.md``.

Which formula a stage gets follows from its kind and name:

- ``kind: train`` (``train``, ``critic_train``): forward + backward, 6 x active
  params x tokens (8 x with recomputation), plus attention;
- a name starting with ``generate`` / ``rollout``: prefill + decode;
- ``*logprob*``, ``values``, and ``reward`` on a GPU role: one forward pass;
- ``weight_sync``: the trainer's gather, the broadcast or device copy, the engine's
  loads (:mod:`~rlplex.estimate.weight_sync`);
- anything else (CPU and driver stages) cannot be estimated: give ``seconds``.

A stage with ``share`` s < 1 (a reward cluster of one domain, one of several teachers)
passes over s of the step's samples: its forward pass's FLOPs, micro-batches and
controller transfer, or its rule reward's per-sequence seconds, scale with them.

The terms live by stage kind: :mod:`~rlplex.estimate.passes` (train and forward),
:mod:`~rlplex.estimate.generation`, :mod:`~rlplex.estimate.weight_sync`; the role
states in :mod:`~rlplex.estimate.states`; what they share in
:mod:`~rlplex.estimate.context`; the assumptions in :mod:`~rlplex.estimate.assumptions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from rlplex.dag.stage import Stage
from rlplex.errors import ConfigError
from rlplex.estimate.assumptions import assumptions, state_remedy
from rlplex.estimate.context import (
    MISSING_HINTS,
    Context,
    Inputs,
    RoleEstimate,
    StageEstimate,
    is_rule_reward,
    missing_inputs,
    plain_detail,
    roles_afresh,
    stage_kind,
)
from rlplex.estimate.generation import estimate_generate, in_flight_turn, streams_in_flight
from rlplex.estimate.judge import estimate_judge, streamed_judge
from rlplex.estimate.passes import estimate_forward, estimate_reward_cpu, estimate_train
from rlplex.estimate.states import role_states
from rlplex.estimate.weight_sync import estimate_weight_sync
from rlplex.resources.cluster import Role


class Estimate(BaseModel):
    """Everything estimated for one config, with the assumptions behind it."""

    model_config = ConfigDict(frozen=True)

    stages: dict[str, StageEstimate]
    """Every stage of the pipeline by name, in pipeline order (CPU and driver stages too, as
    kind ``cpu``)."""
    roles: dict[str, RoleEstimate]
    """State sizes of every GPU role the pipeline uses (a stage's role, a weight sync's source
    or destination), by name; CPU roles and unused ones are absent."""
    assumptions: dict[str, Any]
    """Every input and default the estimate used (GPU preset, workload, models and their
    layout, efficiencies, engine settings, length distribution ...), for ``rlplex estimate``
    to print and ``--json`` to carry."""
    warnings: tuple[str, ...] = ()
    """What the estimator assumed that a user may not expect (an ``auto`` role priced on
    the whole cluster, a hub name matched to a preset ...); empty: none."""

    def to_json(self) -> dict[str, Any]:
        """The ``rlplex estimate --json`` document (see issue 10)."""
        return {
            "stages": {
                n: {
                    "seconds": s.seconds,
                    "flops": s.flops,
                    "bytes": s.bytes,
                    "bound": s.bound,
                    "terms": dict(s.terms),
                    "detail": plain_detail(s.detail),
                }
                for n, s in self.stages.items()
            },
            "roles": {
                n: {
                    "states": dict(r.states),
                    "host_states": dict(r.host_states),
                    "peak_gb": r.peak_gb,
                }
                for n, r in self.roles.items()
            },
            "assumptions": self.assumptions,
        }


def cannot_estimate(missing: Sequence[str], file: str | None) -> ConfigError:
    """The error of a config that lacks ``missing`` inputs, with a ``--set`` for the first."""
    return ConfigError(
        "cannot estimate: the config needs " + ", ".join(missing)
        + f" (e.g. {MISSING_HINTS[missing[0]]}; see docs/cost-model.md)",
        field=missing[0],
        file=file,
    )  # fmt: skip


def estimate(inputs: Inputs) -> Estimate:
    """Estimate every stage and every GPU role of a config.

    Roles with given ``states`` keep them (the KV cache a given ``kv_cache``
    allows caps generation's batch); stages with given ``seconds`` are still
    estimated (for ``rlplex estimate`` to compare), the config keeps its own.

    Raises:
        ConfigError: an input is missing or wrong (model, workload, cluster.gpu,
            parallel sizes), or a state cannot fit even alone on a GPU.
    """
    missing = missing_inputs(inputs)
    if missing:
        raise cannot_estimate(missing, inputs.file)
    ctx = Context(inputs)
    roles: dict[str, RoleEstimate] = {}
    for name, role in inputs.roles.items():
        if role.is_gpu and name in ctx.stages_of:
            roles[name] = role_states(ctx, role)
    # Estimated states stand in for missing ones when sizing the weight sync: a role that
    # gives some states (its KV cache) keeps the estimates of the others (its weights).
    effective = {
        n: r.model_copy(update={"states": {**roles[n].states, **r.states}}) if n in roles else r
        for n, r in inputs.roles.items()
    }
    stages: dict[str, StageEstimate] = {}
    for stage in inputs.pipeline.stages:
        role = effective.get(stage.role or "")
        kind = stage_kind(stage, role)
        if kind == "weight_sync":
            stages[stage.name] = estimate_weight_sync(ctx, stage, effective)
            continue
        if kind == "cpu" and is_rule_reward(stage, role):
            # Every rule reward scores the step's responses on its own CPU workers (ROLL's
            # reward clusters, one per domain, run beside one another).
            stages[stage.name] = estimate_reward_cpu(ctx, stage)
            continue
        if kind == "cpu" or role is None:
            stages[stage.name] = StageEstimate(
                stage=stage.name, kind="cpu", seconds=stage.seconds, bound="given",
                detail={"why": "CPU and driver stages (and unknown GPU stage names) are not"
                        " estimated: give seconds"},
            )  # fmt: skip
            continue
        if kind == "generate" and streams_in_flight(ctx, role):
            continue  # priced below, with the trainer's turn
        fn = {
            "train": estimate_train, "forward": estimate_forward,
            "generate": estimate_generate, "judge": estimate_judge,
        }  # fmt: skip
        stages[stage.name] = fn[kind](ctx, stage, role, roles[role.name])

    def used(s: Stage) -> float | None:
        """What the plan will take of a trainer's stage: the given seconds, else the
        estimate; None for a CPU or driver stage (not the trainer's)."""
        if s.name in stages and stages[s.name].kind == "cpu":
            return None
        if s.seconds is not None or s.name not in stages:
            return s.seconds
        return stages[s.name].seconds

    for stage in inputs.pipeline.stages:
        role = effective.get(stage.role or "")
        if stage.name in stages or role is None:
            continue
        turn = in_flight_turn(inputs.pipeline, stage, used)
        stages[stage.name] = estimate_generate(ctx, stage, role, roles[role.name], turn)
    for stage in inputs.pipeline.stages:
        beside = _streamed_beside(inputs, stage, effective)
        if beside is not None and stages[stage.name].kind == "judge":
            generate_s = used(beside)
            if generate_s is not None:
                stages[stage.name] = streamed_judge(stages[stage.name], generate_s, beside.name)
    stages = {s.name: stages[s.name] for s in inputs.pipeline.stages}
    for name, est in roles.items():
        transient = max(
            (stages[s.name].memory_gb for s in ctx.stages_of.get(name, []) if s.name in stages),
            default=0.0,
        )
        roles[name] = est.model_copy(update={"activations_gb": transient})
    _check_fits(inputs, roles)
    return Estimate(
        stages=stages, roles=roles, assumptions=assumptions(ctx, roles, stages),
        warnings=tuple(ctx.warnings),
    )  # fmt: skip


def _streamed_beside(inputs: Inputs, stage: Stage, roles: Mapping[str, Role]) -> Stage | None:
    """The generation a streaming judge (``judge.streams``) works beside: the generation
    stage it runs after, on GPUs the judge's role does not use; None for any other stage,
    or when the two share a GPU (or either is still to be placed)."""
    if stage.judge is None or not stage.judge.streams:
        return None
    role = roles.get(stage.role or "")
    by_name = {s.name: s for s in inputs.pipeline.stages}
    for name in stage.after:
        upstream = by_name.get(name)
        source = roles.get(upstream.role or "") if upstream is not None else None
        if upstream is None or stage_kind(upstream, source) != "generate":
            continue
        if role is None or source is None or not role.devices or not source.devices:
            return None
        return None if set(role.devices) & set(source.devices) else upstream
    return None


def _check_fits(inputs: Inputs, roles: Mapping[str, RoleEstimate]) -> None:
    """A role whose states alone exceed a GPU cannot run even with the rest offloaded."""
    cap = inputs.cluster.gpu_memory_gb
    for name, est in roles.items():
        given = inputs.roles[name].states
        states = given or est.states
        for state, gb in states.items():
            if gb > cap:
                raise ConfigError(
                    f"the estimated {state} alone take {gb:.1f} GB per GPU (model"
                    f" {est.model}, {est.params / 1e9:.2f}B params, tp={est.tp} pp={est.pp}"
                    f" dp={est.dp}) but a GPU has {cap:g} GB, so it cannot fit even with"
                    f" everything else offloaded; {state_remedy(inputs.roles[name], state)}",
                    field=f"roles.{name}.states.{state}",
                    value=round(gb, 2),
                    file=inputs.file,
                )


def estimate_config(config: Any) -> Estimate:
    """:func:`estimate` for a loaded :class:`~rlplex.config.Config`.

    Raises:
        ConfigError: the config lacks ``model``, ``workload`` or ``cluster.gpu``
            (naming the first missing one), or an input is wrong.
    """
    # What the loader filled from an earlier estimate is not given: the roles' states and
    # the weight syncs' seconds (a colocated sync's resharding) are estimated afresh.
    stages = tuple(
        s.model_copy(update={"seconds": None})
        if s.is_weight_sync and config.is_estimated(f"pipeline.stages.{s.name}.seconds")
        else s
        for s in config.pipeline.stages
    )
    pipeline = config.pipeline.model_copy(update={"stages": stages})
    inputs = Inputs.of_config(config, roles_afresh(config), pipeline)
    if config.lacking and missing_inputs(inputs):
        # An imported workload without its prompt was held back whole: name what the file
        # lacks, as its loading warning does, not the whole workload (whose example --set
        # would overwrite the batch and lengths the file gives).
        raise cannot_estimate(config.lacking, config.source)
    return estimate(inputs)
