"""The cost model of DESIGN.md as small pure functions.

The planner, the verifier, the lower bound and the simulator must agree to the
last digit on how long a stage, a weight sync or a transfer takes; they all
call these functions instead of repeating the formulas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rlplex.config import Config
from rlplex.dag.stage import Stage
from rlplex.plan.ids import COMPUTE_KINDS, OpKind
from rlplex.resources.cluster import COPIED_STATES, DRIVER, SCRATCH_STATES

Placement = Mapping[str, Sequence[int]]
"""Devices of each GPU role (global ranks)."""


def config_placement(config: Config) -> dict[str, tuple[int, ...]]:
    """The devices the config gives each placed GPU role (auto roles are left out)."""
    return {n: tuple(r.devices) for n, r in config.roles.items() if r.devices}


def reference_devices(config: Config, stage: Stage) -> int:
    """Device count ``seconds`` was measured on: ``at_devices``, else the config's devices.

    The config's devices are the role's as the file gives them
    (:attr:`~rlplex.config.Config.file_devices`: before ``--set`` overrides and
    auto placement). A role placed by the search (``devices: auto``) has no
    device count in the file; its stages are then taken as measured on the
    whole cluster.
    """
    if stage.at_devices is not None:
        return stage.at_devices
    if stage.role in config.file_devices:
        return config.file_devices[stage.role or ""]
    role = config.roles.get(stage.role or "")
    if role is not None and role.devices:
        return len(role.devices)
    return config.cluster.num_gpus


def is_gpu_role(config: Config, role: str) -> bool:
    r = config.roles.get(role)
    return r is not None and r.is_gpu


def stage_seconds(
    config: Config, stage: Stage, placement: Placement, work_scale: float = 1.0
) -> float:
    """Duration of a run or weight-sync op on ``placement`` per the cost model.

    The stage's work (:func:`stage_work_seconds`, times ``work_scale``: a
    rehearsal sleeps the work scaled) plus ``cluster.dispatch_s``, the
    executor's per-op overhead, which every ``run`` and ``weight_sync`` op pays
    unscaled. This is the one place the overhead is added: a plan records it
    (:attr:`rlplex.plan.model.Plan.dispatch_s`) and its ops give their work apart.
    """
    return stage_work_seconds(config, stage, placement) * work_scale + config.cluster.dispatch_s


def stage_seconds_bound(config: Config, stage: Stage, placement: Placement) -> float:
    """What the stage costs on ``placement`` at least: :func:`stage_seconds`, but for an
    in-flight engine's generation its steady state at full slots
    (:func:`~rlplex.estimate.generation.generate_bound_at`) instead of its loop, which the
    trainer's turn on each placement changes. A placement search ranks and prunes
    candidates with it: the loop is simulated only for the candidates it scores."""
    if (
        not stage.is_weight_sync
        and config.is_estimated(f"pipeline.stages.{stage.name}.seconds")
        and _in_flight(config, stage, placement)
    ):
        bound = _generate_bound(config, stage, placement)
        if bound is not None:
            return bound + config.cluster.dispatch_s
    return stage_seconds(config, stage, placement)


def split_op_seconds(duration_s: float, kind: OpKind, dispatch_s: float) -> tuple[float, float]:
    """(work, overhead) of a planned op's duration: the inverse of :func:`stage_seconds`.

    A ``run`` or ``weight_sync`` op's duration holds the plan's ``dispatch_s``
    (added once, by :func:`stage_seconds`); transfers hold none. The module that
    adds the overhead also takes it apart, so the executor receives the two
    figures and subtracts nothing itself.
    """
    overhead = dispatch_s if kind in COMPUTE_KINDS else 0.0
    return max(0.0, duration_s - overhead), overhead


def stage_work_seconds(config: Config, stage: Stage, placement: Placement) -> float:
    """The stage's own seconds on ``placement``, without the per-op ``dispatch_s``."""
    if stage.is_weight_sync:
        return weight_sync_seconds(config, stage, placement)
    seconds = float(stage.seconds or 0.0)
    role = stage.role or DRIVER
    if not is_gpu_role(config, role) or role not in placement:
        return seconds
    if config.is_estimated(f"pipeline.stages.{stage.name}.seconds"):
        # An engine streams only on GPUs of its own: where the candidate placement changes
        # that, or the engine's drain depends on the trainer's turn there (in-flight weight
        # updates), the estimator prices generation on it (not a scaling).
        again = _regenerated(config, stage, placement)
        if again is not None:
            return again
    d = len(placement[role])
    d0 = reference_devices(config, stage)
    if d == d0 or stage.scaling == 0:
        return seconds
    return seconds * (d0 / d) ** stage.scaling


def weight_sync_seconds(config: Config, stage: Stage, placement: Placement) -> float:
    """``gb / device_copy_gb_per_s`` on identical device sets, else ``gb / network_gb_per_s``.

    ``gb`` is the destination's ``weights`` per device; explicit ``seconds``
    (a replay of recorded timings) wins, except seconds the estimator filled for
    other devices than ``placement``'s, which it prices again for these.
    """
    if stage.seconds is not None:
        estimated = config.is_estimated(f"pipeline.stages.{stage.name}.seconds")
        if not (estimated and _moved(config, stage, placement)):
            return float(stage.seconds)
        # Filled by the estimator for the config's own devices: price these ones (or, where
        # the estimator cannot, by the link rule below rather than with the other devices').
        moved = _repriced(config, stage, placement)
        if moved is not None:
            return moved
    gb = weight_sync_gb(config, stage)
    src = tuple(sorted(placement.get(stage.from_role or "", ())))
    dst = tuple(sorted(placement.get(stage.to_role or "", ())))
    speed = config.cluster.device_copy_gb_per_s if src == dst else config.cluster.network_gb_per_s
    return gb / speed


_REPRICED: dict[tuple[int, str, tuple[int, ...], tuple[int, ...]], tuple[Config, float | None]] = {}
"""Re-priced syncs by (config, stage, source devices, destination devices): a placement search
asks for the same ones many times. The config itself is kept to check the id still names it."""


def _repriced(config: Config, stage: Stage, placement: Placement) -> float | None:
    from rlplex.estimate.weight_sync import weight_sync_seconds_at

    key = (
        id(config), stage.name,
        tuple(sorted(placement.get(stage.from_role or "", ()))),
        tuple(sorted(placement.get(stage.to_role or "", ()))),
    )  # fmt: skip
    hit = _REPRICED.get(key)
    if hit is not None and hit[0] is config:
        return hit[1]
    if len(_REPRICED) >= 4096:
        _REPRICED.clear()
    seconds = weight_sync_seconds_at(config, stage, placement)
    _REPRICED[key] = (config, seconds)
    return seconds


_LOOPS: dict[tuple[object, ...], tuple[Config, float | None]] = {}
"""In-flight generation priced per (config, stage, engine devices, trainer turn on its grid)."""

_RegenKey = tuple[int, str, tuple[tuple[str, tuple[int, ...]], ...]]
_REGENERATED: dict[_RegenKey, tuple[Config, float | None]] = {}
"""Generation priced again per (config, stage, placement), as :data:`_REPRICED`."""


def _regenerated(config: Config, stage: Stage, placement: Placement) -> float | None:
    """Generation priced on ``placement`` where a scaling would not do: an engine whose
    streaming the placement turns on or off, or one with in-flight weight updates (its
    drain depends on the trainer's turn, priced on the same placement)."""
    from rlplex.estimate.context import stage_kind, streaming_field
    from rlplex.estimate.generation import (
        generate_seconds_at,
        in_flight_at,
        in_flight_grid,
        in_flight_turn,
        streaming_flips,
        trainer_seconds,
    )

    role = config.roles.get(stage.role or "")
    if role is None or streaming_field(role) is None or stage_kind(stage, role) != "generate":
        return None
    key = (
        id(config), stage.name,
        tuple(sorted((n, tuple(sorted(d))) for n, d in placement.items())),
    )  # fmt: skip
    hit = _REGENERATED.get(key)
    if hit is not None and hit[0] is config:
        return hit[1]
    if len(_REGENERATED) >= 4096:
        _REGENERATED.clear()
    seconds = None
    if in_flight_at(config, stage, placement):
        turn = in_flight_turn(
            config.pipeline,
            stage,
            lambda s: (
                stage_work_seconds(config, s, placement)
                if trainer_seconds(config, s) is not None
                else None
            ),
        )
        # The loop depends on the engine's devices and the turn alone (on its grid): a search
        # meets the same ones under many trainer placements.
        loop_key = (
            id(config), stage.name, tuple(sorted(placement.get(stage.role or "", ()))),
            in_flight_grid(turn),
        )  # fmt: skip
        known = _LOOPS.get(loop_key)
        if known is not None and known[0] is config:
            seconds = known[1]
        else:
            if len(_LOOPS) >= 4096:
                _LOOPS.clear()
            seconds = generate_seconds_at(config, stage, placement, turn)
            _LOOPS[loop_key] = (config, seconds)
    elif streaming_flips(config, stage, placement):
        seconds = generate_seconds_at(config, stage, placement)
    _REGENERATED[key] = (config, seconds)
    return seconds


def _in_flight(config: Config, stage: Stage, placement: Placement) -> bool:
    from rlplex.estimate.context import stage_kind, streaming_field
    from rlplex.estimate.generation import in_flight_at

    role = config.roles.get(stage.role or "")
    if role is None or streaming_field(role) != "in_flight_weight_updates":
        return False
    if stage_kind(stage, role) != "generate":
        return False
    return stage.role in placement and in_flight_at(config, stage, placement)


_BOUNDS: dict[tuple[object, ...], tuple[Config, float | None]] = {}
"""In-flight generation's steady-state bound per (config, stage, engine devices)."""


def _generate_bound(config: Config, stage: Stage, placement: Placement) -> float | None:
    from rlplex.estimate.generation import generate_bound_at

    key = (id(config), stage.name, tuple(sorted(placement.get(stage.role or "", ()))))
    hit = _BOUNDS.get(key)
    if hit is not None and hit[0] is config:
        return hit[1]
    if len(_BOUNDS) >= 4096:
        _BOUNDS.clear()
    seconds = generate_bound_at(config, stage, placement)
    _BOUNDS[key] = (config, seconds)
    return seconds


def _moved(config: Config, stage: Stage, placement: Placement) -> bool:
    """Whether the sync's roles sit on other devices than the config gives them."""
    for name in (stage.from_role, stage.to_role):
        role = config.roles.get(name or "")
        if role is None or name not in placement:
            continue
        if tuple(sorted(placement[name])) != tuple(sorted(role.devices)):
            return True
    return False


def weight_sync_gb(config: Config, stage: Stage) -> float:
    """GB per device a weight sync writes: the destination's ``weights``."""
    role = config.roles.get(stage.to_role or "")
    return float(role.states.get("weights", 0.0)) if role is not None else 0.0


def transfer_seconds(config: Config, state: str, gb: float, *, free: bool) -> float:
    """Time of one offload or reload of ``gb`` per device; 0 when scratch or ``free``."""
    if free or state in SCRATCH_STATES or state not in COPIED_STATES:
        return 0.0
    return gb / config.cluster.host_gb_per_s


def stage_needs(config: Config, stage: Stage) -> tuple[tuple[str, str], ...]:
    """The (role, state) pairs that must be resident while ``stage`` runs.

    A run needs its ``needs`` (all of its role's states by default); a weight
    sync needs both roles' ``weights``.
    """
    if stage.is_weight_sync:
        pairs = []
        for role in (stage.from_role, stage.to_role):
            r = config.roles.get(role or "")
            if r is not None and "weights" in r.states:
                pairs.append((role or "", "weights"))
        return tuple(pairs)
    role = config.roles.get(stage.role or "")
    if role is None:
        return ()
    names = tuple(role.states) if stage.needs is None else tuple(stage.needs)
    return tuple((role.name, s) for s in role.states if s in names)


def stage_dirties(config: Config, stage: Stage) -> tuple[tuple[str, str], ...]:
    """The (role, state) pairs a stage leaves changed on the device.

    ``train`` stages dirty their role's weights and optimizer (those they
    need); a weight sync dirties the destination's weights.
    """
    if stage.is_weight_sync:
        role = config.roles.get(stage.to_role or "")
        if role is not None and "weights" in role.states:
            return ((role.name, "weights"),)
        return ()
    if stage.kind != "train":
        return ()
    return tuple(p for p in stage_needs(config, stage) if p[1] in COPIED_STATES)
