"""Cloze (masked-LM) masking over a whole batch at once, with counter-based randomness.

Choice of positions (among non-special tokens; [CLS], [SEP], [PAD] and [MASK] are never chosen):

    strategy="bernoulli"  every token (or word) independently with probability p
                          (transformers' DataCollatorForLanguageModeling)
    strategy="exact"      exactly min(max_predictions, max(1, round(n * p))) of the n candidate
                          tokens of each sequence (Google's create_pretraining_data.py)

then, per chosen token, 80 % -> [MASK], 10 % -> a random non-special token, 10 % unchanged;
`labels` hold the original id at chosen positions and -100 elsewhere. With `whole_word`,
all WordPiece pieces of a word (`un ##want ##ed`) are chosen together, and since the
tokenizer splits CJK text one character per token, a CJK character is a word.

WHY COUNTER-BASED RANDOMNESS: every random number is a hash (splitmix64) of (per-sequence
key, position, stream). The key is derived from (seed, epoch, sequence index) by the loader,
so a sequence's mask does not depend on which batch, rank or process it lands in, or on
how many batches came before: resuming and splitting across ranks reproduce the same masks
bit for bit, with no generator state to save.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from clozeformer.data.padding import pad_right
from clozeformer.utils.errors import ClozeformerError

IGNORE_INDEX = -100  # label value of unmasked positions (torch cross_entropy's ignore_index)

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class MaskingConfig:
    mlm_probability: float = 0.15  # fraction of non-special tokens to predict
    strategy: Literal["bernoulli", "exact"] = "bernoulli"
    max_predictions: int = 20  # cap per sequence for strategy="exact" (Google: 20 at seq 128, 80 at 512)
    whole_word: bool = False  # choose all pieces of a word together
    mask_token_prob: float = 0.8  # of the chosen: replaced by [MASK]
    random_token_prob: float = 0.1  # of the chosen: replaced by a random token (the rest stay unchanged)

    def __post_init__(self) -> None:
        if not 0.0 < self.mlm_probability < 1.0:
            raise ClozeformerError(f"mlm_probability={self.mlm_probability}: must be in (0, 1)")
        if self.strategy not in ("bernoulli", "exact"):
            raise ClozeformerError(f"masking strategy={self.strategy!r}: expected 'bernoulli' or 'exact'")
        if self.max_predictions < 1:
            raise ClozeformerError(f"max_predictions={self.max_predictions}: must be >= 1")
        if self.mask_token_prob < 0 or self.random_token_prob < 0 or self.mask_token_prob + self.random_token_prob > 1:
            raise ClozeformerError("mask_token_prob and random_token_prob must be >= 0 and sum to at most 1")


# ----------------------------------------------------------------------------- counter-based RNG
def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer (Steele et al. 2014), elementwise on uint64 arrays (wrapping)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def sample_keys(seed: int, epoch: int, indices: np.ndarray | Sequence[int]) -> np.ndarray:
    """One uint64 key per sequence, a function of (seed, epoch, sequence index) only.  (B,)"""
    base = splitmix64(splitmix64(np.array([seed & (2**64 - 1)], dtype=np.uint64)) ^ np.uint64(epoch & (2**64 - 1)))
    return splitmix64(base ^ splitmix64(np.asarray(indices, dtype=np.uint64)))


def uniform(keys: np.ndarray, length: int, stream: int) -> np.ndarray:
    """(B, length) floats in [0, 1): a hash of (key, position, stream)."""
    pos = splitmix64(np.arange(length, dtype=np.uint64) * np.uint64(8) + np.uint64(stream))  # (T,)
    bits = splitmix64(keys[:, None] ^ pos[None, :])  # (B, T)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


# ----------------------------------------------------------------------------- vocab tables
@dataclass
class TokenTable:
    """Per-vocab lookup tables the masker needs."""

    mask_id: int
    pad_id: int
    never_mask: np.ndarray  # (V,) bool: [PAD] [CLS] [SEP] [MASK] are never chosen
    is_continuation: np.ndarray  # (V,) bool: "##" pieces, which continue the previous word
    replacement_ids: np.ndarray  # ids a chosen token may be swapped for: no specials, no [unusedN]

    @classmethod
    def from_tokens(cls, tokens: Sequence[str], special_ids: dict[str, int]) -> TokenTable:
        v = len(tokens)
        never = np.zeros(v, dtype=bool)
        never[[special_ids["pad"], special_ids["cls"], special_ids["sep"], special_ids["mask"]]] = True
        cont = np.fromiter((t.startswith("##") for t in tokens), dtype=bool, count=v)
        bracketed = np.fromiter(((t[:1], t[-1:]) in (("[", "]"), ("<", ">")) for t in tokens), dtype=bool, count=v)
        repl = np.setdiff1d(np.flatnonzero(~bracketed & ~never), list(special_ids.values()))
        if repl.size == 0:
            raise ClozeformerError("vocab has no ordinary tokens to use as random replacements")
        return cls(special_ids["mask"], special_ids["pad"], never, cont, repl.astype(np.int64))

    @classmethod
    def from_tokenizer(cls, tok) -> TokenTable:
        return cls.from_tokens(tok.convert_ids_to_tokens(range(tok.vocab_size)), tok.special_ids)


# ----------------------------------------------------------------------------- masking
def mask_tokens(
    input_ids: np.ndarray, keys: np.ndarray, table: TokenTable, cfg: MaskingConfig, attention_mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mask a padded batch.  input_ids (B, T) ints, keys (B,) uint64 -> (masked ids, labels), both (B, T) int64.

    Vectorized over the batch: no Python loop over tokens or sequences.
    """
    ids = np.asarray(input_ids, dtype=np.int64)
    b, t = ids.shape
    if t == 0 or b == 0:
        return ids.copy(), np.full_like(ids, IGNORE_INDEX)
    cand = ~table.never_mask[ids]  # (B, T)
    if attention_mask is not None:
        cand &= np.asarray(attention_mask, dtype=bool)
    u_choose, u_action, u_token = (uniform(keys, t, stream) for stream in range(3))
    pos = np.broadcast_to(np.arange(t), (b, t))

    if cfg.whole_word:
        # A "##" piece continues a word only when the token before it is a candidate too.
        prev_cand = np.zeros_like(cand)
        prev_cand[:, 1:] = cand[:, :-1]
        starts = cand & ~(table.is_continuation[ids] & prev_cand)
        start_pos = np.maximum.accumulate(np.where(starts, pos, 0), axis=1)  # (B, T) where each word begins
        u_unit = np.take_along_axis(u_choose, start_pos, axis=1)  # one draw per word, shared by its pieces
    else:
        starts, start_pos, u_unit = cand, pos, u_choose

    if cfg.strategy == "bernoulli":
        chosen = cand & (u_unit < cfg.mlm_probability)
    else:
        n = cand.sum(axis=1)  # (B,)
        k = np.minimum(cfg.max_predictions, np.maximum(1, np.rint(n * cfg.mlm_probability))).astype(np.int64)
        k[n == 0] = 0
        # Sort candidates by their word's draw; a stable sort keeps each word's pieces adjacent
        # and in order (pieces share one float64 draw; two words tying is a 2^-53 event).
        score = np.where(cand, u_unit, 2.0)
        order = np.argsort(score, axis=1, kind="stable")  # (B, T)
        if not cfg.whole_word:
            rank = np.empty_like(order)
            np.put_along_axis(rank, order, pos, axis=1)
            chosen = cand & (rank < k[:, None])
        else:
            # Take words in random order while they fit whole within k (Google skips a word that
            # would overflow and tries the next; taking the prefix differs only at the boundary).
            word_id = np.cumsum(starts, axis=1) - 1  # (B, T)
            flat = (np.arange(b)[:, None] * t + np.maximum(word_id, 0))[cand]
            word_len = np.bincount(flat, minlength=b * t).reshape(b, t)
            tok_word_len = np.take_along_axis(word_len, np.maximum(word_id, 0), axis=1)  # (B, T)
            s_cand = np.take_along_axis(cand, order, axis=1)
            s_within = np.take_along_axis(pos - start_pos, order, axis=1)
            s_len = np.take_along_axis(tok_word_len, order, axis=1)
            s_count = np.cumsum(s_cand, axis=1)  # candidates up to and including this sorted slot
            s_chosen = s_cand & (s_count - s_within - 1 + s_len <= k[:, None])
            chosen = np.zeros_like(cand)
            np.put_along_axis(chosen, order, s_chosen, axis=1)

    to_mask = chosen & (u_action < cfg.mask_token_prob)
    to_random = chosen & (u_action >= cfg.mask_token_prob) & (u_action < cfg.mask_token_prob + cfg.random_token_prob)
    out = ids.copy()
    out[to_mask] = table.mask_id
    n_repl = table.replacement_ids.size
    picks = np.minimum((u_token * n_repl).astype(np.int64), n_repl - 1)
    out[to_random] = table.replacement_ids[picks[to_random]]
    labels = np.where(chosen, ids, IGNORE_INDEX)
    return out, labels


def next_token_labels(ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Causal-LM targets (`pretrain --objective clm`): labels[:, t] = ids[:, t + 1] where
    position t + 1 holds a real token, IGNORE_INDEX elsewhere (the last real token, padding)."""
    labels = np.full_like(ids, IGNORE_INDEX)  # (B, T)
    labels[:, :-1] = np.where(attention_mask[:, 1:] == 1, ids[:, 1:], IGNORE_INDEX)
    return labels


class ClozeCollator:
    """A `collate_fn` for a torch DataLoader: pad examples, mask them, return torch tensors.

    Examples are dicts with `input_ids` (and optionally `token_type_ids`, `next_sentence_label`,
    `labels` for statically masked data) or plain id sequences. The n-th call uses keys
    (seed, n, i), so a collator is deterministic for a given call order; the pretraining loader
    uses `mask_tokens` with per-sequence keys instead, which is also order-free.
    """

    def __init__(self, table: TokenTable, masking: MaskingConfig | None = None, seed: int = 0) -> None:
        self.table = table
        self.masking = masking or MaskingConfig()
        self.seed = seed
        self.calls = 0

    def __call__(self, examples: Sequence) -> dict:
        import torch

        rows = [ex["input_ids"] if isinstance(ex, dict) else ex for ex in examples]
        ids, attn = pad_right(rows, self.table.pad_id)
        keys = sample_keys(self.seed, self.calls, np.arange(len(rows)))
        self.calls += 1
        first = examples[0] if len(examples) and isinstance(examples[0], dict) else {}  # plain id sequences: no extras
        if "labels" in first:  # already masked (static masking)
            labels, _ = pad_right([ex["labels"] for ex in examples], IGNORE_INDEX, ids.shape[1])
            masked = ids
        else:
            masked, labels = mask_tokens(ids, keys, self.table, self.masking, attn)
        types = np.zeros_like(ids)
        if "token_type_ids" in first:
            types, _ = pad_right([ex["token_type_ids"] for ex in examples], 0, ids.shape[1])
        arrays = {"input_ids": masked, "attention_mask": attn, "labels": labels, "token_type_ids": types}
        out = {k: torch.from_numpy(v) for k, v in arrays.items()}
        if "next_sentence_label" in first:
            out["next_sentence_label"] = torch.tensor([int(ex["next_sentence_label"]) for ex in examples])
        return out
