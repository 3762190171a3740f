"""The one padding module: exact right padding, batch orders, and the collate of every user."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clozeformer.data.padding import batch_indices, pad_right
from clozeformer.tasks.features import collate


def test_pad_right_exact():
    ids, mask = pad_right([[5, 6, 7], [8], []], pad_value=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]] and ids.dtype == np.int64
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [0, 0, 0]]
    ids, mask = pad_right([np.array([1, 2])], pad_value=-100, length=4)
    assert ids.tolist() == [[1, 2, -100, -100]] and mask.tolist() == [[1, 1, 0, 0]]


def test_batch_orders():
    lengths = [3, 9, 1, 9, 5, 2, 7]
    # evaluation: longest first, ties in input order, every index once
    assert batch_indices(lengths, 3, shuffle=False) == [[1, 3, 6], [4, 0, 5], [2]]
    assert batch_indices(lengths, 3, shuffle=False, group_by_length=False) == [[0, 1, 2], [3, 4, 5], [6]]
    # training: a seeded permutation of every index, each batch sorted by length within its mega-batch
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 100, 1000).tolist()
    batches = batch_indices(lengths, 8, shuffle=True, seed=3, mega=10)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert batches == batch_indices(lengths, 8, shuffle=True, seed=3, mega=10)
    assert batches != batch_indices(lengths, 8, shuffle=True, seed=4, mega=10)
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches])
    assert spread < 15  # grouped: random batches of 8 would spread ~75
    with pytest.raises(ValueError):
        batch_indices(lengths, 0, shuffle=False)


def test_collate_pads_text_tokens_and_choices():
    feats = [
        {"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "labels": [-100, 1, -100]},
        {"input_ids": [2, 3], "token_type_ids": [0, 0], "labels": [-100, -100]},
    ]
    b = collate(feats, pad_id=0)
    assert b["input_ids"].tolist() == [[2, 5, 3], [2, 3, 0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert b["labels"].tolist() == [[-100, 1, -100], [-100, -100, -100]]
    choices = [
        {"input_ids": [[2, 5, 3], [2, 6, 7, 3]], "token_type_ids": [[0, 0, 1], [0, 0, 1, 1]], "labels": 1},
        {"input_ids": [[2, 3], [2, 8, 3]], "token_type_ids": [[0, 1], [0, 1, 1]], "labels": 0},
    ]
    b = collate(choices, pad_id=0)
    assert b["input_ids"].shape == (2, 2, 4) and b["input_ids"][0, 1].tolist() == [2, 6, 7, 3]
    assert b["input_ids"][1, 0].tolist() == [2, 3, 0, 0] and b["attention_mask"][1, 0].tolist() == [1, 1, 0, 0]
    assert b["token_type_ids"][1, 1].tolist() == [0, 1, 1, 0]
    assert torch.equal(b["labels"], torch.tensor([1, 0]))
