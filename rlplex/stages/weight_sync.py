"""Move the trainer's weights into the rollout engine without a trip through host memory.

The problem: after each train step the inference role must take the new
weights. Through Ray's object store that is a device->host copy, a
serialisation and a host->device copy (0.74 s for 0.41 GB on an H100), while
the cost model (DESIGN.md) says ``gb / device_copy_gb_per_s`` for colocated
roles and ``gb / network_gb_per_s`` otherwise. This module is the data path
that matches the model:

- the weights are packed, in name order, into flat ``uint8`` *buckets* of at
  most ``bucket_bytes`` (a tensor larger than that gets a bucket of its own),
  each slot aligned so that a typed view of it is valid; the layout
  (:class:`Bucket`) is plain data computed once from names, dtypes and shapes;
- colocated roles (same devices): the producer packs one bucket on its device
  and hands a :class:`SharedBucket` to the consumer: a CUDA IPC handle
  (``torch.multiprocessing.reductions.reduce_tensor``) on a GPU, a file in
  ``/dev/shm`` mapped by both processes on CPU. The consumer maps it and
  copies the slots into its own tensors on the same device; the producer
  frees the bucket before packing the next, so the extra memory is one bucket;
- disjoint device sets: the same buckets are broadcast over a process group
  (NCCL on GPUs, gloo on CPU), see :func:`broadcast_buckets`.

The consumer loads through its engine's own API: a ``load_weights(items)``
(vLLM's ``model.load_weights`` takes ``(name, tensor)`` pairs; the HF
generator copies by name in place), or, for a plain model, an in-place copy
into its named tensors (:func:`copy_into`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

DEFAULT_BUCKET_BYTES = 512 * 2**20
"""Largest bucket, in bytes (512 MiB): bounds the extra device memory a sync needs."""
ALIGN = 256
"""Byte alignment of every slot (a typed view needs its offset to be a multiple of its size)."""

Loader = Callable[[Iterable[tuple[str, "torch.Tensor"]]], Any]
"""Takes ``(name, tensor)`` pairs and loads them into the engine (vLLM ``load_weights``)."""


@dataclass(frozen=True)
class Slot:
    """Where one named tensor lies in its bucket."""

    name: str
    """The weight's name (the producer's ``named_weights`` key)."""
    dtype: str
    """``torch`` dtype name (``float32``, ``bfloat16``...)."""
    shape: tuple[int, ...]
    """The tensor's shape."""
    offset: int
    """Byte offset in the bucket (a multiple of :data:`ALIGN`)."""
    nbytes: int
    """Bytes of the tensor."""


@dataclass(frozen=True)
class Bucket:
    """One flat buffer's layout."""

    slots: tuple[Slot, ...]
    """The tensors it holds, in name order."""
    nbytes: int
    """Size of the buffer in bytes (slots plus alignment padding)."""

    @property
    def payload_bytes(self) -> int:
        """Bytes of weights it carries (without padding)."""
        return sum(s.nbytes for s in self.slots)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _dtype(name: str) -> torch.dtype:
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r} in a weight bucket")
    return dtype


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def plan_buckets(
    specs: Iterable[tuple[str, str, tuple[int, ...], int]],
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
) -> list[Bucket]:
    """Pack ``(name, dtype, shape, nbytes)`` specs, in name order, into buckets.

    A bucket holds as many consecutive tensors as fit in ``bucket_bytes``; a
    tensor larger than that has a bucket of its own.

    Raises:
        ValueError: ``bucket_bytes`` is not positive, or a name repeats.
    """
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes must be positive (got {bucket_bytes})")
    ordered = sorted(specs, key=lambda s: s[0])
    names = [s[0] for s in ordered]
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"weight names repeat: {', '.join(repeated)}")
    buckets: list[Bucket] = []
    slots: list[Slot] = []
    used = 0
    for name, dtype, shape, nbytes in ordered:
        if slots and used + nbytes > bucket_bytes:
            buckets.append(Bucket(tuple(slots), used))
            slots, used = [], 0
        slots.append(Slot(name, dtype, tuple(shape), used, nbytes))
        used = _aligned(used + nbytes)
    if slots:
        buckets.append(Bucket(tuple(slots), used))
    return buckets


def buckets_of(
    named: Mapping[str, torch.Tensor], bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> list[Bucket]:
    """The bucket layout of ``named`` tensors."""
    return plan_buckets(
        (
            (name, _dtype_name(t.dtype), tuple(t.shape), t.numel() * t.element_size())
            for name, t in named.items()
        ),
        bucket_bytes,
    )


def pack(
    named: Mapping[str, torch.Tensor], bucket: Bucket, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Copy ``bucket``'s tensors from ``named`` into a flat ``uint8`` tensor (``out`` or new)."""
    import torch

    if out is None:
        first = named[bucket.slots[0].name] if bucket.slots else None
        device = first.device if first is not None else torch.device("cpu")
        out = torch.empty(bucket.nbytes, dtype=torch.uint8, device=device)
    with torch.no_grad():
        for slot in bucket.slots:
            if slot.nbytes == 0:
                continue
            src = named[slot.name].detach().reshape(-1)
            out[slot.offset : slot.offset + slot.nbytes].copy_(src.view(torch.uint8))
    return out


def unpack(flat: torch.Tensor, bucket: Bucket) -> list[tuple[str, torch.Tensor]]:
    """Typed views of ``flat`` (a packed bucket), one per slot, by name (no copy)."""

    out = []
    for slot in bucket.slots:
        raw = flat[slot.offset : slot.offset + slot.nbytes]
        out.append((slot.name, raw.view(_dtype(slot.dtype)).view(slot.shape)))
    return out


def copy_into(named: Mapping[str, torch.Tensor]) -> Loader:
    """A loader that copies each ``(name, tensor)`` into the same-named tensor in place.

    Raises (when called):
        KeyError: a name the destination does not have, named.
    """
    import torch

    def load(items: Iterable[tuple[str, torch.Tensor]]) -> int:
        moved = 0
        with torch.no_grad():
            for name, tensor in items:
                dst = named.get(name)
                if dst is None:
                    raise KeyError(f"the destination has no weight named {name!r}")
                dst.copy_(tensor, non_blocking=True)
                moved += dst.numel() * dst.element_size()
        return moved

    return load


# -- sharing one bucket between two processes on the same device --------------


@dataclass(frozen=True)
class SharedBucket:
    """A packed bucket that another process on the same device can map.

    Picklable (it travels through Ray): ``kind`` ``cuda`` carries the
    ``reduce_tensor`` rebuild arguments and the producer's physical GPU id;
    ``shm`` a file in shared memory.
    """

    kind: str
    """``cuda`` (CUDA IPC handle) or ``shm`` (host shared memory, CPU runs)."""
    bucket: Bucket
    """The layout of the bytes."""
    args: tuple[Any, ...] = ()
    """``cuda``: ``rebuild_cuda_tensor``'s arguments."""
    physical_gpu: str = ""
    """``cuda``: the producer's GPU as ``CUDA_VISIBLE_DEVICES`` names it ('' if unset)."""
    path: str = ""
    """``shm``: the file both processes map."""


_counter = itertools.count()


def _shm_dir() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def _visible_gpus() -> list[str]:
    return [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]


def share_packed(
    named: Mapping[str, torch.Tensor], bucket: Bucket
) -> tuple[SharedBucket, torch.Tensor]:
    """Pack ``bucket`` where another process on the same device can map it.

    Returns the handle and the buffer, which the caller must keep alive until
    every consumer has copied it (then drop it and call :func:`release`).
    """
    import torch

    first = named[bucket.slots[0].name] if bucket.slots else None
    if first is not None and first.is_cuda:
        from torch.multiprocessing.reductions import reduce_tensor

        flat = pack(named, bucket)
        # The consumer reads on another stream in another process: finish the copy first.
        torch.cuda.current_stream(flat.device).synchronize()
        _, args = reduce_tensor(flat)
        visible = _visible_gpus()
        index = flat.device.index or 0
        physical = visible[index] if index < len(visible) else str(index)
        return SharedBucket("cuda", bucket, tuple(args), physical_gpu=physical), flat
    path = os.path.join(_shm_dir(), f"rlplex-weights-{os.getpid()}-{next(_counter)}")
    storage = torch.UntypedStorage.from_file(path, shared=True, nbytes=max(bucket.nbytes, 1))
    flat = torch.empty(0, dtype=torch.uint8).set_(storage)[: bucket.nbytes]
    pack(named, bucket, out=flat)
    return SharedBucket("shm", bucket, path=path), flat


def open_shared(shared: SharedBucket) -> torch.Tensor:
    """The bucket's bytes in this process (same memory as the producer's, no copy).

    Raises:
        RuntimeError: a CUDA bucket whose GPU this process cannot see.
    """
    import torch

    if shared.kind == "cuda":
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        args = list(shared.args)
        visible = _visible_gpus()
        if shared.physical_gpu and visible:
            if shared.physical_gpu not in visible:
                raise RuntimeError(
                    f"weight bucket lives on GPU {shared.physical_gpu}, which this worker"
                    f" cannot see (CUDA_VISIBLE_DEVICES={','.join(visible)})"
                )
            args[6] = visible.index(shared.physical_gpu)
        return rebuild_cuda_tensor(*args)
    storage = torch.UntypedStorage.from_file(
        shared.path, shared=True, nbytes=max(shared.bucket.nbytes, 1)
    )
    return torch.empty(0, dtype=torch.uint8).set_(storage)[: shared.bucket.nbytes]


def load_shared(shared: SharedBucket, loader: Loader) -> int:
    """Map ``shared``, hand its tensors to ``loader`` and wait for the copies; returns bytes."""
    import torch

    flat = open_shared(shared)
    loader(unpack(flat, shared.bucket))
    if flat.is_cuda:
        # The producer frees the bucket once this returns: the copies must be done.
        torch.cuda.current_stream(flat.device).synchronize()
    del flat
    return shared.bucket.payload_bytes


def release(shared: SharedBucket) -> None:
    """Forget a shared bucket on the producer side (remove its shared-memory file)."""
    if shared.kind == "shm":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(shared.path)


# -- broadcasting buckets between device sets ----------------------------------


def broadcast_buckets(
    group: Any,
    buckets: Sequence[Bucket],
    *,
    source: Mapping[str, torch.Tensor] | None,
    loader: Loader | None,
    device: torch.device,
) -> int:
    """Broadcast every bucket from group rank 0 over ``group`` (a torch ProcessGroup).

    The source (``source`` given) packs and sends; receivers (``loader``
    given) receive into a buffer of one bucket on ``device`` and load it.
    Returns the weight bytes sent or received.
    """
    import torch
    import torch.distributed as dist

    moved = 0
    buffer: torch.Tensor | None = None
    for bucket in buckets:
        if buffer is None or buffer.numel() < bucket.nbytes:
            buffer = torch.empty(bucket.nbytes, dtype=torch.uint8, device=device)
        flat = buffer[: bucket.nbytes]
        if source is not None:
            pack(source, bucket, out=flat)
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        group.broadcast([flat], opts).wait()
        if loader is not None:
            loader(unpack(flat, bucket))
        if flat.is_cuda:
            torch.cuda.current_stream(flat.device).synchronize()
        moved += bucket.payload_bytes
    return moved
