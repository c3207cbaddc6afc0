"""The machines and the roles placed on them.

A :class:`Cluster` is a set of identical nodes of GPUs plus the copy speeds the
cost model needs. A :class:`Role` is a group of workers holding model state
(weights, optimizer, gradients, KV cache) on a set of global GPU ranks, or a
CPU-only group (rule rewards, code sandboxes). Both are frozen plain data; the
planner reads them and never changes them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

from rlplex.resources.devices import MAX_GPUS
from rlplex.resources.inputs import Lora, OptimizerName, Parallel, Precision, Rollout

StateKind = Literal["weights", "optimizer", "grads", "kv_cache"]
STATE_KINDS: tuple[StateKind, ...] = ("weights", "optimizer", "grads", "kv_cache")
COPIED_STATES: frozenset[str] = frozenset({"weights", "optimizer"})
"""States copied to host memory on offload and back on reload."""
SCRATCH_STATES: frozenset[str] = frozenset({"grads", "kv_cache"})
"""States dropped on offload and re-allocated on reload, both free."""

BYTES_PER_GB = 1e9
"""The config's GB (states, memory, link speeds in GB/s): 10^9 bytes, as the estimator counts
and the GPU presets hold what the driver reports. A record's ``bytes`` are bytes: every
conversion between the two goes through this."""

DRIVER = "driver"
"""The built-in CPU role of the controller process (advantage, bookkeeping)."""


class Cluster(BaseModel):
    """Identical nodes of GPUs and the copy speeds between host and devices.

    Numbers are strict (a boolean is not a count, NaN and infinity are not
    speeds) and bounded: at most :data:`~rlplex.resources.devices.MAX_GPUS`
    GPUs in all, so that ``devices: all`` never builds an absurd rank list.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    nodes: StrictInt = Field(1, ge=1, le=MAX_GPUS)
    """Number of nodes."""
    gpus_per_node: StrictInt = Field(8, ge=1, le=MAX_GPUS)
    """GPUs per node; global rank r is GPU ``r % gpus_per_node`` of node ``r // gpus_per_node``."""
    gpu_memory_gb: StrictFloat = Field(80.0, gt=0, le=1e6)
    """Usable memory of one GPU, in GB."""
    host_gb_per_s: StrictFloat = Field(25.0, gt=0, le=1e6)
    """Pinned host<->device copy speed per GPU, in GB/s (offload and reload)."""
    device_copy_gb_per_s: StrictFloat = Field(200.0, gt=0, le=1e6)
    """On-device copy speed, in GB/s (weight sync between colocated roles)."""
    network_gb_per_s: StrictFloat = Field(25.0, gt=0, le=1e6)
    """Speed between devices, in GB/s (weight sync between disjoint device sets)."""
    host_memory_gb: StrictFloat = Field(2048.0, gt=0, le=1e9)
    """Host memory of one node, in GB: what offloaded copies of states may hold (default: a
    DGX-class node's 2 TB; a ``gpu`` preset fills its usual node's figure)."""
    dispatch_s: StrictFloat = Field(0.0, ge=0, le=3600)
    """Executor overhead added to every ``run`` and ``weight_sync`` op (``rlplex calibrate``)."""
    gpu: str | None = None
    """A GPU preset (``h100``, ``a100``, ``cpu`` ...) for estimates and unset speeds/memory."""
    nvlink_gpus: StrictInt | None = Field(None, ge=1, le=MAX_GPUS)
    """GPUs one NVLink fabric joins, when it spans several nodes (a GB200 NVL72 rack joins 72
    GPUs of 18 four-GPU nodes); default: one node. Collectives among GPUs of one fabric run at
    ``device_copy_gb_per_s`` and count as inside a node (a ``gpu`` preset fills its figure)."""

    @model_validator(mode="after")
    def _bounded_size(self) -> Cluster:
        if self.nodes * self.gpus_per_node > MAX_GPUS:
            raise ValueError(
                f"nodes x gpus_per_node = {self.nodes * self.gpus_per_node:,} GPUs,"
                f" more than the {MAX_GPUS:,} rlplex plans for"
            )
        return self

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def fabric_gpus(self) -> int:
        """GPUs of one NVLink fabric: ``nvlink_gpus`` where it joins more than a node."""
        return max(self.gpus_per_node, self.nvlink_gpus or 0)

    def fabric_of(self, rank: int) -> int:
        """The NVLink fabric that holds global GPU ``rank`` (its node, or its NVL72 rack)."""
        return rank // self.fabric_gpus

    def node_of(self, rank: int) -> int:
        """The node that holds global GPU ``rank``."""
        return rank // self.gpus_per_node

    def local_gpu(self, rank: int) -> int:
        """The index of global GPU ``rank`` within its node."""
        return rank % self.gpus_per_node


class Role(BaseModel):
    """A group of workers that holds model state on a device set, or a CPU role.

    Built by the config loader (which checks it against the cluster) or directly
    in Python; ``devices`` are already-parsed global ranks.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str
    """The role's name, e.g. ``actor_train``."""
    devices: tuple[int, ...] = ()
    """Global GPU ranks the role occupies; empty for a CPU role."""
    num_gpus_per_worker: int = Field(1, ge=1)
    """GPUs one worker drives (tensor x pipeline parallel size of an inference engine)."""
    world_size: int = Field(1, ge=1)
    """Number of workers: ``len(devices) // num_gpus_per_worker`` for a GPU role."""
    states: dict[str, float] = Field(default_factory=dict)
    """GB per device of each state the role holds (weights, optimizer, grads, kv_cache)."""
    host_states: dict[str, float] = Field(default_factory=dict)
    """GB per device the role keeps in host memory the whole step, never on a GPU (a CPU
    optimizer's state; given, or filled by the estimate): every step, each node's host
    memory holds it times the role's devices on the node, beside the plan's host copies."""
    auto: bool = False
    """True when the planner's placement search chooses ``devices``."""
    model: str | None = None
    """The role's model (preset name or local HF path); default: the config's ``model``."""
    parallel: Parallel | None = None
    """Tensor / pipeline / data parallel sizes, ZeRO or FSDP, recomputation (estimates)."""
    precision: Precision = "bf16"
    """Precision of weights and compute (estimates)."""
    optimizer: OptimizerName = "adamw"
    """Optimizer of a trained role: AdamW keeps fp32 master weights and two moments."""
    rollout: Rollout | None = None
    """Inference-engine settings of a generating role (estimates): max_num_seqs, memory share,
    CUDA graphs."""
    lora: Lora | None = None
    """LoRA adapters on the role's frozen model (estimates): a trained role trains the
    adapters only; an engine applies them at run time and receives only them."""

    @property
    def is_gpu(self) -> bool:
        return bool(self.devices) or self.auto

    @property
    def memory_gb(self) -> float:
        """GB per device with every state resident."""
        return sum(self.states.values())

    def nodes(self, cluster: Cluster) -> tuple[int, ...]:
        """The nodes the role's devices sit on, ascending."""
        return tuple(sorted({cluster.node_of(d) for d in self.devices}))

    def with_devices(self, devices: tuple[int, ...]) -> Role:
        """The same role placed on ``devices`` (world size recomputed)."""
        return self.model_copy(
            update={
                "devices": tuple(devices),
                "world_size": max(1, len(devices) // self.num_gpus_per_worker),
                "auto": False,
            }
        )


def driver_role() -> Role:
    """The built-in ``driver`` role: the controller's one CPU process."""
    return Role(name=DRIVER, world_size=1)
