"""Examples -> model inputs (token ids), and batches with dynamic padding.

A *feature* is a dict of plain lists: `input_ids`, `token_type_ids`, optionally `labels` /
`start_positions` / `end_positions`, and bookkeeping (`example_index`, `word_ids`, `offsets`)
that the collator ignores. Padding happens per batch (`collate`), to the longest sequence in
that batch, and batches are built from examples of similar length (`clozeformer.data.padding`), so a
batch of short sentences is not padded to the longest sentence of the dataset.

Encoding runs on a private copy of the tokenizer's Rust backend (`tokenizers.Tokenizer`):
it batches in Rust, gives character offsets and word ids, encodes pre-split words
(`is_pretokenized`, for NER) and leaves the shared tokenizer's truncation settings alone.
"""

from __future__ import annotations

import torch

from clozeformer.data.padding import pad_right
from clozeformer.data.spans import token_stride
from clozeformer.tasks.common import ChoiceExample, Problems, TextExample, TokenExample

# features with labels equal to this are ignored by every loss (cross-entropy ignore_index)
IGNORE_INDEX = -100


def private_backend(tokenizer, max_length: int | None = None, stride: int = 0, strategy: str = "longest_first"):
    """A copy of `tokenizer.backend` with its own truncation settings and no padding."""
    from tokenizers import Tokenizer as Backend

    backend = Backend.from_str(tokenizer.backend.to_str())
    backend.no_padding()
    if max_length is None:
        backend.no_truncation()
    else:
        backend.enable_truncation(max_length, stride=stride, strategy=strategy)
    return backend


def encode_text(
    tokenizer, examples: list[TextExample], max_len: int, problems: Problems, label2id: dict[str, int] | None, regression: bool
) -> list[dict]:
    """Sentence / sentence-pair classification and regression features.

    Pairs are truncated longest-first (the longer text loses tokens first), as in BERT.
    """
    backend = private_backend(tokenizer, max_len)
    inputs = [ex.text_a if ex.text_b is None else (ex.text_a, ex.text_b) for ex in examples]
    feats = []
    for i, (enc, ex) in enumerate(zip(backend.encode_batch(inputs), examples)):
        if enc.overflowing:
            problems.warn("truncated", ex.source, f"input longer than max_length={max_len} tokens; truncated")
        f = {"input_ids": enc.ids, "token_type_ids": enc.type_ids, "example_index": i}
        if ex.label is not None:
            f["labels"] = float(ex.label) if regression else label2id[ex.label]
        feats.append(f)
    return feats


def encode_tokens(
    tokenizer,
    examples: list[TokenExample],
    max_len: int,
    problems: Problems,
    label2id: dict[str, int] | None,
    training: bool = True,
) -> list[dict]:
    """Token classification: each word's tag goes on its FIRST sub-token, -100 on the rest
    (and on [CLS]/[SEP]), as in the BERT paper's NER setup.

    Training truncates a sentence longer than `max_len` (its last words are not trained on, with
    a warning). Otherwise a long sentence becomes overlapping windows (`clozeformer.data.spans`), as
    the `ner` pipeline reads it, so every word is predicted."""
    backend = private_backend(tokenizer, max_len, stride=0 if training else token_stride(max_len))
    encodings = backend.encode_batch([ex.words for ex in examples], is_pretokenized=True)
    feats = []
    for i, (enc, ex) in enumerate(zip(encodings, examples)):
        if training and enc.overflowing:
            kept = max((w for w in enc.word_ids if w is not None), default=-1) + 1
            problems.warn(
                "truncated",
                ex.source,
                f"sentence of {len(ex.words)} words is longer than "
                f"max_length={max_len} tokens; the last {len(ex.words) - kept} words are not trained on",
            )
        for window in [enc] if training else [enc, *enc.overflowing]:
            word_ids = list(window.word_ids)
            f = {"input_ids": window.ids, "token_type_ids": window.type_ids, "example_index": i, "word_ids": word_ids}
            if ex.tags is not None and training:  # the tag on a word's first piece: the token after another word's
                previous = [None, *word_ids[:-1]]
                f["labels"] = [IGNORE_INDEX if w is None or w == p else label2id[ex.tags[w]] for w, p in zip(word_ids, previous)]
            feats.append(f)
    return feats


def encode_choices(tokenizer, examples: list[ChoiceExample], max_len: int, problems: Problems) -> list[dict]:
    """Multiple choice: C pairs (context, prefix + ending) per example -> input_ids of shape (C, T_i)."""
    backend = private_backend(tokenizer, max_len)
    flat = [(ex.context, f"{ex.prefix} {ending}".strip()) for ex in examples for ending in ex.endings]
    encodings = backend.encode_batch(flat)
    feats, k = [], 0
    for i, ex in enumerate(examples):
        encs = encodings[k : k + len(ex.endings)]
        k += len(ex.endings)
        if any(e.overflowing for e in encs):
            problems.warn("truncated", ex.source, f"a choice is longer than max_length={max_len} tokens; truncated")
        f = {"input_ids": [e.ids for e in encs], "token_type_ids": [e.type_ids for e in encs], "example_index": i}
        if ex.label is not None:
            f["labels"] = ex.label
        feats.append(f)
    return feats


# ----------------------------------------------------------------------------- batching


def feature_length(f: dict) -> int:
    ids = f["input_ids"]
    return max(len(x) for x in ids) if ids and isinstance(ids[0], list) else len(ids)


def collate(feats: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad a list of features to the longest one (`clozeformer.data.padding.pad_right`): (B, T)
    tensors, or (B, C, T) for multiple choice (C choices per example)."""
    choice = isinstance(feats[0]["input_ids"][0], list)
    T = max(feature_length(f) for f in feats)
    rows = [s for f in feats for s in f["input_ids"]] if choice else [f["input_ids"] for f in feats]
    type_rows = [s for f in feats for s in f["token_type_ids"]] if choice else [f["token_type_ids"] for f in feats]
    ids, mask = pad_right(rows, pad_id, T)  # (B*C or B, T)
    types, _ = pad_right(type_rows, 0, T)
    shape = (len(feats), -1, T) if choice else (len(feats), T)
    batch = {
        "input_ids": torch.from_numpy(ids).view(shape),
        "token_type_ids": torch.from_numpy(types).view(shape),
        "attention_mask": torch.from_numpy(mask).view(shape),
    }
    for key in ("labels", "start_positions", "end_positions"):
        if key in feats[0]:
            values = [f[key] for f in feats]
            if isinstance(values[0], list):  # token classification: (B, T), padding ignored by the loss
                batch[key] = torch.from_numpy(pad_right(values, IGNORE_INDEX, T)[0])
            else:  # float: regression
                batch[key] = torch.tensor(values, dtype=torch.float32 if isinstance(values[0], float) else torch.long)
    return batch
