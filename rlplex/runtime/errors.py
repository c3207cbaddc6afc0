"""Errors the Ray executor raises, each naming what failed and where.

A run fails for one of four reasons: a stage raised (:class:`StageFailedError`,
naming stage, step, role and worker rank), a worker process died
(:class:`WorkerDiedError`), a remote call did not finish in time
(:class:`OpTimeoutError`), or the plan does not fit the Ray cluster
(:class:`ClusterFitError`, raised before anything starts). All derive from
:class:`~rlplex.errors.RlplexError`, so the CLI prints the message and exits 2;
the remote traceback goes to the log. :class:`RunInterrupted` is Ctrl-C.

:class:`RemoteStageError` travels from a worker to the driver (it pickles its
fields), so the driver can build the message without parsing text.
"""

from __future__ import annotations

from rlplex.errors import RlplexError


class ExecutionError(RlplexError):
    """Base class of run failures.

    Attributes:
        op: the plan op id being executed (``s3/train``), when known.
        step: the RL step, when known.
    """

    def __init__(self, message: str, *, op: str | None = None, step: int | None = None) -> None:
        self.op = op
        self.step = step
        super().__init__(message)


class StageFailedError(ExecutionError):
    """A stage implementation raised.

    Attributes:
        stage: the stage's name.
        role: the role whose worker raised (``driver`` for driver stages).
        rank: the worker's rank within the role.
        remote_traceback: the formatted traceback from the worker.
    """

    def __init__(
        self,
        *,
        stage: str,
        step: int,
        role: str,
        rank: int,
        op: str,
        error: str,
        remote_traceback: str = "",
    ) -> None:
        self.stage = stage
        self.role = role
        self.rank = rank
        self.remote_traceback = remote_traceback
        super().__init__(
            f"stage {stage!r} failed at step {step} on role {role!r} worker rank {rank}: {error}",
            op=op,
            step=step,
        )


class WorkerDiedError(ExecutionError):
    """A worker actor died (killed, out of memory, node lost) while running an op."""


class OpTimeoutError(ExecutionError):
    """A remote call did not finish within the timeout; names the ops in flight."""


class ClusterFitError(ExecutionError):
    """The plan needs more GPUs or nodes than the Ray cluster offers; gives the numbers."""


class PlanScheduleError(ExecutionError):
    """The plan cannot be followed (a dependency cycle, an unknown dependency)."""


class RayMissingError(ExecutionError):
    """Ray, which only the ``[run]`` extra installs, cannot be imported (before anything
    starts)."""


class RunInterrupted(ExecutionError):
    """The run was stopped by Ctrl-C after the ops in flight; the record is flushed."""


class RemoteStageError(Exception):
    """Raised inside a worker when user code fails; carries where and the traceback."""

    def __init__(self, stage: str, step: int, role: str, rank: int, error: str, tb: str) -> None:
        self.stage = stage
        self.step = step
        self.role = role
        self.rank = rank
        self.error = error
        self.tb = tb
        super().__init__(stage, step, role, rank, error, tb)

    def __str__(self) -> str:
        where = f"stage {self.stage!r} step {self.step} role {self.role!r} rank {self.rank}"
        return f"{where}: {self.error}"
