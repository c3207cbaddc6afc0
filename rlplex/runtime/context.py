"""What a stage callable and a setup function receive: ``ctx`` and ``info``.

One definition serves both runners of stage callables, the Ray workers
(:mod:`rlplex.runtime.worker`) and the in-process runner
(:mod:`rlplex.pipelines.local`), so a stage behaves the same under both. This
module imports neither Ray nor torch.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WorkerInfo:
    """Where a worker is and what it is; given to setup functions and in ``ctx``."""

    role: str
    """The role's name."""
    rank: int = 0
    """Rank within the role, 0 .. world_size - 1."""
    world_size: int = 1
    """Number of workers of the role."""
    devices: tuple[int, ...] = ()
    """Planned global GPU ranks of this worker."""
    node: int = 0
    """Planned node index."""
    gpu_ids: tuple[str, ...] = ()
    """Physical GPU ids on the node (``CUDA_VISIBLE_DEVICES`` of the worker)."""
    state_gb: Mapping[str, float] = field(default_factory=dict)
    """Planned GB per device of the role's states."""
    initial_residency: tuple[str, ...] = ()
    """States resident when the run starts."""
    group: Any = field(default=None, compare=False, repr=False)
    """The role's data-parallel process group (a torch ``ProcessGroup``, set on the worker
    before setup when the role has several workers; None otherwise). Train stages
    all-reduce their gradients over it."""


@dataclass
class StageContext:
    """What a stage callable receives as ``ctx``."""

    step: int
    """The RL step."""
    stage: str
    """The stage's name."""
    info: WorkerInfo
    """The worker: role, rank, world size, devices."""
    state: Any = None
    """What the role's setup returned (the model, the engine...)."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Step metrics logged with :meth:`log` (rank 0's win)."""

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    @property
    def role(self) -> str:
        return self.info.role

    def log(self, **metrics: Any) -> None:
        """Record step metrics (``reward/mean=0.6``); they land in the record's metrics line."""
        self.metrics.update(metrics)


def call_stage(fn: Callable[..., Any], ctx: StageContext, upstream: Mapping[str, Any]) -> Any:
    """Call ``fn`` with ``ctx`` and the upstream values its signature names."""
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in upstream.items() if takes_all or k in params}
    if "ctx" in params:
        kwargs["ctx"] = ctx
    result = fn(**kwargs)
    wait_for_device()
    return result


def wait_for_device() -> None:
    """Wait until the GPU work this thread queued has run.

    CUDA calls return when the work is queued, so without this a stage's seconds
    would be its launches' and its kernels' time would land in whichever later
    stage first waits on them (the next one reading a result, an offload's copy).
    Only this thread's current stream is waited on: a transfer the executor runs
    beside the stage on its side stream keeps going. Torch is not imported here:
    a process that never imported it queued nothing.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return
    torch.cuda.current_stream().synchronize()
