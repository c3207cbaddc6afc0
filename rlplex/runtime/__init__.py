"""The Ray executor: run a Plan on a Ray cluster exactly as planned, and record it.

``execute(plan, config, steps=N, setups=..., ...)`` is the entry point (see
:mod:`rlplex.runtime.executor`). Stage callables read the state that the roles'
``setups`` build on the workers; ``rlplex run`` takes them from the pipeline
module's ``setups()`` function when the config says
``pipeline: {python: "module:function"}`` (:mod:`~rlplex.reports.run`).
Modules, one idea each:

- :mod:`~rlplex.runtime.schedule`: unroll a plan into a run's ops with complete deps;
- :mod:`~rlplex.runtime.cluster`: connect to Ray, fit check, placement groups;
- :mod:`~rlplex.runtime.worker`: the role worker actor and the stage calling convention;
- :mod:`~rlplex.runtime.groups`: a role's workers, created and started;
- :mod:`~rlplex.runtime.dispatcher`: the plan-following event loop;
- :mod:`~rlplex.runtime.recorder`: the Timeline record, flushed step by step;
- :mod:`~rlplex.runtime.data`: splitting batches across workers and gathering results;

Importing this package does not import Ray or torch.
"""

from __future__ import annotations

from rlplex.runtime.errors import (
    ClusterFitError,
    ExecutionError,
    OpTimeoutError,
    PlanScheduleError,
    RayMissingError,
    RunInterrupted,
    StageFailedError,
    WorkerDiedError,
)
from rlplex.runtime.executor import execute

__all__ = [
    "ClusterFitError",
    "ExecutionError",
    "OpTimeoutError",
    "PlanScheduleError",
    "RayMissingError",
    "RunInterrupted",
    "StageFailedError",
    "WorkerDiedError",
    "execute",
]
