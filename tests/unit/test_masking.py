"""Cloze masking: rates, 80/10/10, specials never masked, exact counts, whole words, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from clozeformer.data.masking import (
    IGNORE_INDEX,
    ClozeCollator,
    MaskingConfig,
    TokenTable,
    mask_tokens,
    sample_keys,
    uniform,
)
from clozeformer.data.padding import pad_right
from clozeformer.utils.errors import ClozeformerError

# A toy vocab: specials, [unused], whole words, "##" pieces and CJK characters.
TOKENS = (
    ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + [f"w{i}" for i in range(300)]
    + [f"##p{i}" for i in range(100)]
    + list("中文字你好")
)
SPECIAL = {"pad": 0, "unk": 3, "cls": 4, "sep": 5, "mask": 6}
WORDS = np.arange(7, 307)
PIECES = np.arange(307, 407)
CJK = np.arange(407, 412)


@pytest.fixture(scope="module")
def table() -> TokenTable:
    return TokenTable.from_tokens(TOKENS, SPECIAL)


def make_batch(rng: np.random.Generator, b: int, t: int, piece_prob: float = 0.0):
    """[CLS] tokens [SEP] tokens [SEP] [PAD]...: rows of random length, some '##' pieces and CJK."""
    ids = rng.choice(WORDS, size=(b, t))
    if piece_prob:
        pieces = rng.random((b, t)) < piece_prob
        ids[pieces] = rng.choice(PIECES, size=pieces.sum())
        cjk = rng.random((b, t)) < 0.05
        ids[cjk] = rng.choice(CJK, size=cjk.sum())
    lens = rng.integers(t // 2, t + 1, size=b)
    ids[:, 0] = SPECIAL["cls"]
    ids[np.arange(b), lens - 1] = SPECIAL["sep"]
    ids[np.arange(b), lens // 2] = SPECIAL["sep"]
    attn = np.arange(t)[None, :] < lens[:, None]
    ids[~attn] = SPECIAL["pad"]
    return ids, attn.astype(np.int64)


def candidates(ids, attn):
    return attn.astype(bool) & ~np.isin(ids, [0, 4, 5, 6])


@pytest.mark.parametrize("strategy", ["bernoulli", "exact"])
def test_rates_and_80_10_10(table, strategy):
    rng = np.random.default_rng(1)
    ids, attn = make_batch(rng, 1200, 128)
    cfg = MaskingConfig(strategy=strategy, max_predictions=128)
    masked, labels = mask_tokens(ids, sample_keys(7, 0, np.arange(len(ids))), table, cfg, attn)
    cand = candidates(ids, attn)
    chosen = labels != IGNORE_INDEX
    assert cand.sum() > 100_000
    assert abs(chosen.sum() / cand.sum() - 0.15) < 0.005
    assert np.array_equal(labels[chosen], ids[chosen])
    as_mask = (masked[chosen] == SPECIAL["mask"]).mean()
    unchanged = (masked[chosen] == ids[chosen]).mean()
    random_tok = 1 - as_mask - unchanged
    assert abs(as_mask - 0.8) < 0.01 and abs(random_tok - 0.1) < 0.01 and abs(unchanged - 0.1) < 0.01
    # Outside the chosen positions nothing changes; specials and padding are never chosen.
    assert np.array_equal(masked[~chosen], ids[~chosen])
    assert not (chosen & ~cand).any()
    assert (labels[ids == SPECIAL["pad"]] == IGNORE_INDEX).all()
    # Random replacements are ordinary tokens: never special, never [unusedN].
    swapped = chosen & (masked != ids) & (masked != SPECIAL["mask"])
    assert swapped.sum() > 1000
    assert np.isin(masked[swapped], np.concatenate([WORDS, PIECES, CJK])).all()


def test_exact_count_per_sequence_and_cap(table):
    rng = np.random.default_rng(2)
    ids, attn = make_batch(rng, 300, 128)
    n = candidates(ids, attn).sum(1)
    for cap in (20, 1000):
        cfg = MaskingConfig(strategy="exact", max_predictions=cap)
        _, labels = mask_tokens(ids, sample_keys(0, 0, np.arange(300)), table, cfg, attn)
        expected = np.minimum(cap, np.maximum(1, np.rint(n * 0.15))).astype(int)
        assert np.array_equal((labels != IGNORE_INDEX).sum(1), expected)
    # A sequence with no candidates gets no labels (and no crash).
    empty = np.array([[4, 5, 0, 0]])
    m, l = mask_tokens(empty, sample_keys(0, 0, [0]), table, MaskingConfig(strategy="exact"), empty != 0)
    assert (l == IGNORE_INDEX).all() and np.array_equal(m, empty)


@pytest.mark.parametrize("strategy", ["bernoulli", "exact"])
def test_whole_word_masking(table, strategy):
    rng = np.random.default_rng(3)
    ids, attn = make_batch(rng, 800, 64, piece_prob=0.35)
    cfg = MaskingConfig(strategy=strategy, whole_word=True, max_predictions=64)
    _, labels = mask_tokens(ids, sample_keys(1, 0, np.arange(len(ids))), table, cfg, attn)
    cand = candidates(ids, attn)
    chosen = labels != IGNORE_INDEX
    # Rebuild words: a '##' piece right after a candidate continues its word.
    is_piece = np.isin(ids, PIECES)
    prev_cand = np.zeros_like(cand)
    prev_cand[:, 1:] = cand[:, :-1]
    cont = cand & is_piece & prev_cand
    word = np.cumsum(cand & ~cont, axis=1)
    pairs = cont[:, 1:]  # token j+1 continues the word of token j
    assert (chosen[:, 1:][pairs] == chosen[:, :-1][pairs]).all()  # all pieces of a word or none
    assert pairs.sum() > 5000
    # CJK characters are words of their own: they are chosen independently of their neighbours.
    starts = cand & ~cont
    words_chosen = (chosen & starts).sum() / starts.sum()
    assert abs(words_chosen - 0.15) < 0.02
    assert word.max() > 10


def test_masks_depend_only_on_key_and_position(table):
    rng = np.random.default_rng(4)
    ids, attn = make_batch(rng, 16, 96)
    keys = sample_keys(5, 2, np.arange(100, 116))
    for cfg in (MaskingConfig(), MaskingConfig(strategy="exact"), MaskingConfig(whole_word=True)):
        batch_m, batch_l = mask_tokens(ids, keys, table, cfg, attn)
        again = mask_tokens(ids, keys, table, cfg, attn)
        assert np.array_equal(batch_m, again[0]) and np.array_equal(batch_l, again[1])
        for i in (0, 7, 15):  # alone, padded to its own length: the same mask
            n = int(attn[i].sum())
            m, l = mask_tokens(ids[i : i + 1, :n], keys[i : i + 1], table, cfg, attn[i : i + 1, :n])
            assert np.array_equal(m[0], batch_m[i, :n]) and np.array_equal(l[0], batch_l[i, :n])
    other = mask_tokens(ids, sample_keys(5, 3, np.arange(100, 116)), table, MaskingConfig(), attn)[1]
    assert not np.array_equal(other, mask_tokens(ids, keys, table, MaskingConfig(), attn)[1])


def test_counter_rng_is_uniform_and_distinct():
    keys = sample_keys(0, 0, np.arange(2000))
    assert len(np.unique(keys)) == 2000
    others = [sample_keys(0, 1, np.arange(2000)), sample_keys(1, 0, np.arange(2000))]
    assert len(np.unique(np.concatenate([keys, *others]))) == 6000
    u = uniform(keys, 128, 0)
    assert u.shape == (2000, 128) and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.std() - np.sqrt(1 / 12)) < 0.005
    hist = np.histogram(u, bins=10, range=(0, 1))[0] / u.size
    assert np.abs(hist - 0.1).max() < 0.005
    assert abs(np.corrcoef(u.ravel(), uniform(keys, 128, 1).ravel())[0, 1]) < 0.01


def test_config_validation():
    with pytest.raises(ClozeformerError):
        MaskingConfig(mlm_probability=0)
    with pytest.raises(ClozeformerError):
        MaskingConfig(strategy="random")
    with pytest.raises(ClozeformerError):
        MaskingConfig(mask_token_prob=0.9, random_token_prob=0.2)


def test_collator_pads_masks_and_returns_tensors(table):
    coll = ClozeCollator(table, MaskingConfig(), seed=3)
    examples = [
        {"input_ids": [4, 10, 11, 12, 5], "token_type_ids": [0] * 5, "next_sentence_label": 1},
        {"input_ids": [4, 20, 5], "token_type_ids": [0, 0, 0], "next_sentence_label": 0},
    ]
    batch = coll(examples)
    assert batch["input_ids"].shape == (2, 5) and batch["input_ids"].dtype == torch.int64
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["input_ids"][1, 3:].tolist() == [0, 0] and (batch["labels"][1, 3:] == -100).all()
    assert batch["token_type_ids"].shape == (2, 5)
    assert batch["next_sentence_label"].tolist() == [1, 0]
    static = coll([{"input_ids": [4, 6, 5], "labels": [-100, 9, -100]}])
    assert static["labels"].tolist() == [[-100, 9, -100]] and static["input_ids"].tolist() == [[4, 6, 5]]
    ids, attn = pad_right([[1, 2], [3]], 0)
    assert ids.tolist() == [[1, 2], [3, 0]] and attn.tolist() == [[1, 1], [1, 0]]
