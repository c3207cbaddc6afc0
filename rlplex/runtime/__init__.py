"""The Ray executor: run a Plan on a Ray cluster exactly as planned, and record it.

``execute(plan, config, steps=N, ...)`` is the entry point (see
:mod:`rlplex.runtime.execute`). Modules, one idea each:

- :mod:`~rlplex.runtime.schedule`: unroll a plan into a run's ops with complete deps;
- :mod:`~rlplex.runtime.cluster`: connect to Ray, fit check, placement groups;
- :mod:`~rlplex.runtime.worker`: the role worker actor and the stage calling convention;
- :mod:`~rlplex.runtime.groups`: a role's workers, created and started;
- :mod:`~rlplex.runtime.dispatcher`: the plan-following event loop;
- :mod:`~rlplex.runtime.recorder`: the Timeline record, flushed step by step;
- :mod:`~rlplex.runtime.data`: splitting batches across workers and gathering results.

Importing this package does not import Ray or torch.
"""

from __future__ import annotations

from typing import Any

from rlplex.runtime.errors import (
    ClusterFitError,
    ExecutionError,
    OpTimeoutError,
    PlanScheduleError,
    RunInterrupted,
    StageFailedError,
    WorkerDiedError,
)

__all__ = [
    "ClusterFitError",
    "ExecutionError",
    "OpTimeoutError",
    "PlanScheduleError",
    "RunInterrupted",
    "StageFailedError",
    "WorkerDiedError",
    "execute",
]


def execute(*args: Any, **kwargs: Any) -> Any:
    """Run a plan on Ray; see :func:`rlplex.runtime.execute.execute`."""
    from rlplex.runtime.execute import execute as _execute

    return _execute(*args, **kwargs)
