"""``rlplex run`` as a library call: plan, execute, compare with the prediction.

:class:`RunOptions` holds the run's settings in one object and
:func:`run_plan` returns a :class:`RunReport`; the CLI draws the progress bar
from its callbacks and renders the report. Importing it never touches Ray.

Role state for a YAML config. A config whose pipeline comes from Python
(``pipeline: {python: "module:function"}``) names stage callables that read
``ctx.state``, which the roles' setup functions build. The convention: if that
module also has a function ``setups()`` returning ``{role: setup(info) -> state}``
(as :mod:`rlplex.pipelines.grpo` and :mod:`rlplex.pipelines.ppo` do),
``rlplex run`` calls it and passes the result to
:func:`~rlplex.runtime.executor.execute` (:func:`python_setups`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import structlog

from rlplex.config import Config, import_pipeline_module
from rlplex.errors import ConfigError

log = structlog.get_logger("rlplex.run")


def python_setups(config: Config) -> dict[str, Callable[[Any], Any]] | None:
    """The role setups of a config whose pipeline comes from Python, if its module has them.

    For ``pipeline: {python: "module:function"}`` (as the config holds it, ``--set``
    included) this takes the module the config loader imported and returns
    ``module.setups()``; None when the pipeline is written in YAML or the module
    has no ``setups``.

    Raises:
        ConfigError: ``setups()`` failed or returned something other than a
            mapping of role names to callables (naming ``pipeline.python``).
    """
    ref = config.pipeline_python
    if not ref:
        return None
    module = import_pipeline_module(ref, Path(config.base_dir or "."), config.source)
    factory = getattr(module, "setups", None)
    if not callable(factory):
        return None
    try:
        setups = factory()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's function failed (or sys.exit): name it
        raise ConfigError(
            f"the module's setups() failed: {type(exc).__name__}: {exc}",
            field="pipeline.python",
            value=ref,
            file=config.source,
        ) from None
    if not isinstance(setups, Mapping) or not all(
        isinstance(k, str) and callable(v) for k, v in setups.items()
    ):
        raise ConfigError(
            "the module's setups() must return a mapping of role name -> setup(info)",
            field="pipeline.python",
            value=ref,
            file=config.source,
        )
    return dict(setups)


def _simulated_period(plan: Any, config: Config, steps: int, durations: Any) -> float:
    from rlplex.sim import simulate

    return float(simulate(plan, config, steps=steps, durations=durations).meta["period_s"])


def predicted_period(plan: Any, config: Config, steps: int, time_scale: float) -> float:
    """The simulator's period for ``steps`` steps, rehearsed stages scaled by ``time_scale``."""
    from rlplex.dag.stubs import has_code
    from rlplex.plan.costs import stage_seconds

    placement = {r: tuple(d) for r, d in plan.placement.items()}
    # A rehearsal sleeps the stage's work times the scale; the executor's overhead is not scaled.
    scaled = {
        s.name: stage_seconds(config, s, placement, 1.0 if has_code(s) else time_scale)
        for s in config.pipeline.stages
    }
    return _simulated_period(plan, config, steps, lambda _step, stage: scaled.get(stage))


@dataclass(frozen=True)
class RunOptions:
    """How ``rlplex run`` runs a plan: the settings that travel from the CLI to the executor."""

    steps: int = 1
    """RL steps to run."""
    record: Path = Path("run.jsonl")
    """Where the run's timeline is written, step by step (locked while the run lasts)."""
    time_scale: float = 1.0
    """Rehearsed stages and transfers sleep their planned seconds times this."""
    address: str | None = None
    """Ray cluster to join (None: ``RAY_ADDRESS`` or a local Ray)."""
    timeout_s: float = 600.0
    """Longest one op may run before the run stops (a hung op is noticed sooner, from
    its planned duration)."""


@dataclass(frozen=True)
class RunReport:
    """What one run measured, next to what the plan predicted (``rlplex run --json``)."""

    steps: int
    """RL steps run (``--steps``); the predicted and replayed periods are over as many."""
    measured_period_s: float | None
    """Steady-state seconds per step, measured."""
    predicted_period_s: float | None
    """The simulator's period for the plan, rehearsed stages scaled by the time scale."""
    replayed_period_s: float | None
    """The plan replayed with the measured stage times (what the schedule itself costs)."""
    dispatch_median_ms: float | None
    """Median delay from an op's dependencies ending to its start."""
    record: str
    """The record written."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_plan(
    config: Config,
    options: RunOptions,
    *,
    setups: Mapping[str, Callable[[Any], Any]] | None = None,
    on_start: Callable[[Any], None] | None = None,
    on_step: Callable[[int, dict[str, Any]], None] | None = None,
    on_ops: Callable[[list[str]], None] | None = None,
) -> RunReport:
    """Plan ``config``, run it with the roles' ``setups``, return measured vs predicted figures.

    ``on_start(plan)``, ``on_step(step, metrics)`` and ``on_ops(running op ids)``
    report progress (the CLI draws its bar with them).

    Raises:
        RayMissingError: Ray is not installed (the ``[run]`` extra), said before anything.
        RecordError: the record cannot be written or is in use by another run
            (checked before Ray starts), or writing it failed mid-run.
    """
    from rlplex.plan import plan_with_config
    from rlplex.runtime import execute
    from rlplex.runtime.cluster import require_ray
    from rlplex.runtime.recorder import claim_record
    from rlplex.runtime.report import stage_durations
    from rlplex.timeline.periods import measured_period

    require_ray()  # before the record is claimed and the progress bar drawn
    # The record is checked and locked before anything starts (Ray, workers).
    with claim_record(options.record):
        # The config the plan was made from (a searched placement is estimated there): the
        # executor and the predicted period price the plan's stages from it.
        config, plan = plan_with_config(config)
        log.debug("plan", mode=plan.mode, period_s=plan.period_s, ops=len(plan.ops),
                  steps=options.steps)  # fmt: skip
        if on_start is not None:
            on_start(plan)
        timeline = execute(
            plan,
            config,
            steps=options.steps,
            record=options.record,
            time_scale=options.time_scale,
            address=options.address,
            timeout_s=options.timeout_s,
            on_step=on_step,
            on_ops=on_ops,
            setups=setups,
            meta={"config": config.source},
        )
    steps = options.steps
    return RunReport(
        steps=steps,
        measured_period_s=measured_period(timeline),
        predicted_period_s=predicted_period(plan, config, steps, options.time_scale),
        replayed_period_s=_simulated_period(plan, config, steps, stage_durations(timeline)),
        dispatch_median_ms=timeline.meta.get("dispatch_median_ms"),
        record=str(options.record),
    )
