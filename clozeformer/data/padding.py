"""Padding and length-grouped batching: one module for pretraining, fine-tuning and inference.

A padded batch costs B x T_max whatever its rows hold. Grouping rows of similar length and
padding each batch only to its own longest row (not to the model's 512) spends almost no
compute on [PAD].

* `pad_right`: sequences -> a (B, T) int64 array padded on the right + its attention mask.
* `batch_indices`: training order (shuffled, length-grouped within mega-batches, as Hugging
  Face's LengthGroupedSampler) or evaluation order (longest first; callers restore theirs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pad_right(
    seqs: Sequence[Sequence[int] | np.ndarray], pad_value: int, length: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, attention_mask), both (B, T) int64: each sequence then `pad_value`; T = the
    longest sequence (or `length`); the mask is 1 on the sequences' own positions."""
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    t = int(lens.max(initial=0)) if length is None else int(length)
    ids = np.full((len(seqs), t), pad_value, dtype=np.int64)  # (B, T)
    for i, s in enumerate(seqs):  # one copy per sequence (not per token)
        ids[i, : lens[i]] = s
    mask = (np.arange(t)[None, :] < lens[:, None]).astype(np.int64)  # (B, T)
    return ids, mask


def batch_indices(
    lengths: Sequence[int], batch_size: int, *, shuffle: bool, seed: int = 0, group_by_length: bool = True, mega: int = 50
) -> list[list[int]]:
    """Indices of each batch.

    Training (`shuffle`): shuffle, cut into mega-batches of `mega` batches, sort each by length,
    split into batches and shuffle the batch order: batches are random but each holds similar
    lengths. Evaluation: sorted by length, longest first (a batch that does not fit in memory
    fails at once, and a progress bar's first estimate is pessimistic); the sort is stable, so
    equal lengths keep their input order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n, lens = len(lengths), np.asarray(lengths, dtype=np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(n) if shuffle else np.arange(n)
    if group_by_length:  # longest first within each mega-batch (within all of it when evaluating)
        step = batch_size * mega if shuffle else max(n, 1)
        order = np.concatenate([c[np.argsort(-lens[c], kind="stable")] for c in np.split(order, range(step, n, step))])
    batches = [order[i : i + batch_size].tolist() for i in range(0, n, batch_size)]
    return [batches[j] for j in rng.permutation(len(batches))] if shuffle and group_by_length else batches
