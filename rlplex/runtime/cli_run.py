"""The body of ``rlplex run``: plan, execute with a progress bar, compare with the prediction.

Kept out of :mod:`rlplex.cli` so the CLI module stays a thin list of commands
and importing it never touches Ray.

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
from pathlib import Path
from typing import Any

import structlog
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlplex.config import Config, import_pipeline_module
from rlplex.errors import ConfigError
from rlplex.plan.ids import op_name

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
    from rlplex.plan.costs import stage_work_seconds

    placement = {r: tuple(d) for r, d in plan.placement.items()}
    # A rehearsal sleeps the stage's work times the scale; the executor's overhead is not scaled.
    overhead = config.cluster.dispatch_s
    scaled = {
        s.name: stage_work_seconds(config, s, placement) * (1.0 if s.fn is not None else time_scale)
        + overhead
        for s in config.pipeline.stages
    }
    return _simulated_period(plan, config, steps, lambda _step, stage: scaled.get(stage))


def run_plan(
    config: Config,
    *,
    steps: int,
    record: Path,
    time_scale: float,
    address: str | None,
    timeout_s: float,
    console: Console,
    setups: Mapping[str, Callable[[Any], Any]] | None = None,
) -> dict[str, Any]:
    """Plan ``config``, run it with the roles' ``setups``, return measured vs predicted figures.

    Raises:
        RecordError: the record cannot be written or is in use by another run
            (checked before Ray starts), or writing it failed mid-run.
    """
    from rlplex.runtime.recorder import claim_record

    # The record is checked and locked before anything starts (Ray, workers).
    with claim_record(record):
        return _run_claimed(
            config, steps=steps, record=record, time_scale=time_scale, address=address,
            timeout_s=timeout_s, console=console, setups=setups,
        )  # fmt: skip


def _run_claimed(
    config: Config,
    *,
    steps: int,
    record: Path,
    time_scale: float,
    address: str | None,
    timeout_s: float,
    console: Console,
    setups: Mapping[str, Callable[[Any], Any]] | None,
) -> dict[str, Any]:
    from rlplex.plan import make_plan
    from rlplex.runtime import execute
    from rlplex.runtime.report import measured_period, stage_durations

    plan = make_plan(config)
    log.debug("plan", mode=plan.mode, period_s=plan.period_s, ops=len(plan.ops), steps=steps)
    progress = Progress(
        TextColumn("[bold]step"),
        MofNCompleteColumn(),
        BarColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=False,
    )
    with progress:
        task = progress.add_task("starting workers", total=steps)

        def on_step(step: int, metrics: dict[str, Any]) -> None:
            # One figure per step on the bar, both on the run's time scale; the full
            # metrics go to the record and, with RLPLEX_LOG=debug, to the log.
            progress.advance(task)
            measured, planned = metrics.get("step_s"), metrics.get("planned_step_s")
            if isinstance(measured, float) and isinstance(planned, float):
                progress.update(
                    task, description=f"last step {measured:.3g} s (plan {planned:.3g} s)"
                )
            log.debug(
                "step",
                step=step,
                **{k: v for k, v in metrics.items() if isinstance(v, (int, float))},
            )

        def on_ops(running: list[str]) -> None:
            stages = sorted({op_name(op) for op in running})
            progress.update(
                task, description=", ".join(stages[:4]) + (" ..." if len(stages) > 4 else "")
            )

        timeline = execute(
            plan,
            config,
            steps=steps,
            record=record,
            time_scale=time_scale,
            address=address,
            timeout_s=timeout_s,
            on_step=on_step,
            on_ops=on_ops,
            setups=setups,
            meta={"config": config.source},
        )
    measured = measured_period(timeline)
    return {
        "steps": steps,
        "measured_period_s": measured,
        "predicted_period_s": predicted_period(plan, config, steps, time_scale),
        "replayed_period_s": _simulated_period(plan, config, steps, stage_durations(timeline)),
        "dispatch_median_ms": timeline.meta.get("dispatch_median_ms"),
        "record": str(record),
    }
