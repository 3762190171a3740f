"""Length-sorted batches with dynamic padding.

A padded batch costs B x T_max whatever its rows hold. Sorting the rows by length before
cutting batches puts similar lengths together, and padding each batch only to its own
longest row (not to the model's 512) spends almost no compute on [PAD]. On SST-2-like
inputs (5 to 60 tokens) this alone is most of the speed-up over padding in arrival order;
results come back in the caller's order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from clozeformer.infer.runners import Batch


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Row indices grouped into batches of `batch_size`, longest rows first.

    Longest first: a batch that does not fit in memory fails at once rather than at the end,
    and a progress bar's first estimate is pessimistic, not optimistic. The sort is stable, so
    equal lengths keep their input order (reproducible batches).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def pad_batch(rows: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int) -> Batch:
    """(input_ids, token_type_ids) rows -> one Batch padded on the right to the longest row."""
    T = max(len(ids) for ids, _ in rows)
    ids = np.full((len(rows), T), pad_id, dtype=np.int64)  # (B, T)
    types = np.zeros((len(rows), T), dtype=np.int64)
    mask = np.zeros((len(rows), T), dtype=np.int64)
    for i, (row_ids, row_types) in enumerate(rows):
        n = len(row_ids)
        ids[i, :n] = row_ids
        types[i, :n] = row_types
        mask[i, :n] = 1
    return Batch(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))
