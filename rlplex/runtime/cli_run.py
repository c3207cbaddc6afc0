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
from rlplex.resources.yaml_io import load_yaml_file

log = structlog.get_logger("rlplex.run")


def python_setups(config_file: str | Path) -> dict[str, Callable[[Any], Any]] | None:
    """The role setups of a config whose pipeline comes from Python, if its module has them.

    For ``pipeline: {python: "module:function"}`` this imports ``module`` (a
    ``.py`` file is read relative to the config, as the config loader does) and
    returns ``module.setups()``; None when the pipeline is written in YAML or the
    module has no ``setups``.

    Raises:
        ConfigError: ``setups()`` failed or returned something other than a
            mapping of role names to callables (naming ``pipeline.python``).
    """
    config_file = Path(config_file)
    data = load_yaml_file(config_file)
    pipeline = data.get("pipeline") if isinstance(data, dict) else None
    ref = pipeline.get("python") if isinstance(pipeline, dict) else None
    if not isinstance(ref, str):
        return None
    module = import_pipeline_module(ref, config_file.parent, str(config_file))
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
            file=str(config_file),
        ) from None
    if not isinstance(setups, Mapping) or not all(
        isinstance(k, str) and callable(v) for k, v in setups.items()
    ):
        raise ConfigError(
            "the module's setups() must return a mapping of role name -> setup(info)",
            field="pipeline.python",
            value=ref,
            file=str(config_file),
        )
    return dict(setups)


def _simulated_period(plan: Any, config: Config, steps: int, durations: Any) -> float:
    from rlplex.sim import simulate

    return float(simulate(plan, config, steps=steps, durations=durations).meta["period_s"])


def predicted_period(plan: Any, config: Config, steps: int, time_scale: float) -> float:
    """The simulator's period for ``steps`` steps, rehearsed stages scaled by ``time_scale``."""
    from rlplex.plan.costs import stage_seconds

    placement = {r: tuple(d) for r, d in plan.placement.items()}
    scaled = {
        s.name: stage_seconds(config, s, placement) * (1.0 if s.fn is not None else time_scale)
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
    log.info("plan", mode=plan.mode, period_s=plan.period_s, ops=len(plan.ops), steps=steps)
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
            progress.advance(task)
            log.info(
                "step",
                step=step,
                **{k: v for k, v in metrics.items() if isinstance(v, (int, float))},
            )

        def on_ops(running: list[str]) -> None:
            stages = sorted({op.split("/", 1)[-1] for op in running})
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
