"""The token layout every stage shares, and helpers to pad and split it.

A rollout batch holds B sequences laid out as ``[prompt | response]``:
prompts are left-padded to P columns and responses right-padded to R
columns, so response token j of every row sits at column ``P + j`` and the
logits that predict it at column ``P + j - 1``. Stages pass plain
``dict[str, Tensor]`` batches (cheap to pickle between Ray workers):

- ``prompt_ids``, ``prompt_mask``: ``[B, P]``
- ``response_ids``, ``response_mask``: ``[B, R]`` (mask is 1 up to and
  including the first eos)
- ``group``: ``[B]`` index of the prompt a sample answers (GRPO groups)

and later stages add ``[B, R]`` tensors (``old_logprobs``, ``ref_logprobs``,
``values``, ``advantages``, ``returns``) or ``[B]`` ones (``scores``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

Batch = dict[str, "torch.Tensor"]


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids and mask of ``seqs`` left-padded to the longest."""
    import torch

    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s) :] = torch.as_tensor(list(s), dtype=torch.long)
            mask[i, width - len(s) :] = 1
    return ids, mask


def response_mask(response_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """1 on every token up to and including the first eos of each row, 0 after it."""
    is_eos = (response_ids == eos_id).long()
    # Tokens after the first eos have at least one eos strictly before them.
    eos_before = is_eos.cumsum(-1) - is_eos
    return (eos_before == 0).long()


def sequence(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``input_ids``, ``attention_mask`` and ``position_ids`` of ``[prompt | response]``."""
    import torch

    input_ids = torch.cat([batch["prompt_ids"], batch["response_ids"]], dim=1)
    attention_mask = torch.cat([batch["prompt_mask"], batch["response_mask"]], dim=1)
    # Left padding shifts positions; count only real tokens so every row starts at 0.
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return input_ids, attention_mask, position_ids


def batch_size(batch: Batch) -> int:
    return int(batch["response_ids"].shape[0])


def select(batch: Batch, index: torch.Tensor | slice) -> Batch:
    """Rows ``index`` of every ``[B, ...]`` tensor."""
    return {k: v[index] for k, v in batch.items()}


def split(batch: Batch, size: int) -> list[Batch]:
    """Consecutive chunks of at most ``size`` rows."""
    n = batch_size(batch)
    return [select(batch, slice(i, i + size)) for i in range(0, n, size)]


def concat(batches: Sequence[Batch]) -> Batch:
    """Rows of several batches with the same keys, in order (widths must agree)."""
    import torch

    return {k: torch.cat([b[k] for b in batches], dim=0) for k in batches[0]}


def merge(*parts: Batch) -> Batch:
    """One batch with the keys of all ``parts`` (later parts win)."""
    out: Batch = {}
    for part in parts:
        out.update(part)
    return out
