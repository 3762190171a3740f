"""Windows and decoders of span QA and token classification (NER): the one path for
`finetune`/`evaluate`/`predict` (clozeformer.tasks) and for the `qa`/`ner` pipelines, verbs
and server (clozeformer.infer).

Windows. A context longer than the model's window is split into overlapping windows, each
`[CLS] question [SEP] context-piece [SEP]`, by the tokenizer backend (`only_second` truncation
with overflow). `doc_stride` is the number of context tokens two neighbouring windows share
(Hugging Face's `run_qa.py` meaning; Google's `run_squad.py` counts the step between window
starts instead). Questions are cut to `max_query_len` tokens first. `effective_stride` is the
one validation of these numbers.

Answers (n-best search, as BERT's `run_squad.py`). For each window, the `n_best` highest start
and end logits are paired; a pair is a candidate if both tokens are in the context, end >=
start, and the span has at most `max_answer_len` tokens. Candidates of all windows of a
question are ranked by start + end logit (logits, not per-window probabilities, so windows
compare on one scale). With `version_2` (SQuAD v2.0-style models, trained to point at [CLS]
when there is no answer) the null score, start + end logit at [CLS] and its minimum over the
windows, competes: the answer is "" when `null - best_span > null_threshold`. Each n-best entry
gets a probability (softmax over the entries' scores); a served answer's score is its own.

Fine-tuning stores the window and decoding settings in the model's config (`qa_*` keys), so
`clozeformer qa` / `serve` decode a fine-tuned model exactly as `evaluate` scored it.

Token classification. A text longer than the window is cut into overlapping windows sharing
`stride` tokens (`token_stride`: by default a quarter of a window, at most 32), so no word
goes unlabelled; each word is read in the window where it is whole and farthest from an edge
(`max_context_pieces`, BERT's "max context" rule), and takes the label of its first piece
(`first`, how CoNLL models are trained and scored) or the argmax of its pieces' mean
probabilities (`average`): `word_predictions`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from clozeformer.utils.errors import ClozeformerError

#: special tokens around a question/context pair: [CLS] q [SEP] c [SEP]
NUM_SPECIAL = 3

#: (config.extra key, default): the QA settings a fine-tuned model carries for serving
QA_SETTINGS = {
    "qa_doc_stride": 128,
    "qa_max_query_len": 64,
    "qa_max_answer_len": 30,
    "qa_n_best": 20,
    "qa_null_threshold": 0.0,
    "qa_version_2": False,
}


def effective_stride(max_seq_len: int, max_query_len: int, doc_stride: int) -> int:
    """`doc_stride`, lowered when it would not leave a new context token per window.

    The tokenizers library requires overlap < room for context; with the smallest room a
    window can have (the longest allowed question) half the room is used instead.
    """
    if max_query_len < 1 or doc_stride < 0:
        raise ClozeformerError(f"max_query_len must be >= 1 and doc_stride >= 0, got {max_query_len} and {doc_stride}")
    room = max_seq_len - max_query_len - NUM_SPECIAL
    if room < 2:
        raise ClozeformerError(
            f"max_seq_len={max_seq_len} leaves no room for a context after a question of up to max_query_len={max_query_len} "
            "tokens; raise the sequence length or lower the question length"
        )
    return doc_stride if doc_stride < room else room // 2


@dataclass
class SpanAnswer:
    """The decoded answer of one question: text and character span in the context ("" and
    0, 0 for no answer), its probability among the n-best, the n-best list, and (v2.0) the
    null odds, null score - best span score."""

    text: str
    start: int
    end: int
    probability: float
    nbest: list[dict] = field(default_factory=list)
    null_odds: float | None = None


def decode_question(
    context: str,
    windows: Iterable[tuple[Sequence, np.ndarray, np.ndarray]],
    *,
    n_best: int = 20,
    max_answer_len: int = 30,
    version_2: bool = False,
    null_threshold: float = 0.0,
) -> SpanAnswer:
    """The answer of one question from its windows: (offsets, start logits, end logits) each.

    offsets: per token of the window, its (start, end) character span in `context`, or None
    outside the context ([CLS], the question, [SEP], padding); logits have at least that length.
    """
    candidates = []
    null_score = None
    for offsets, start_logits, end_logits in windows:
        s_log, e_log = np.asarray(start_logits)[: len(offsets)], np.asarray(end_logits)[: len(offsets)]
        window_null = float(s_log[0] + e_log[0])
        null_score = window_null if null_score is None else min(null_score, window_null)
        starts = np.argsort(s_log, kind="stable")[::-1][:n_best]
        ends = np.argsort(e_log, kind="stable")[::-1][:n_best]
        for s in starts:
            if offsets[s] is None:
                continue
            for e in ends:
                if offsets[e] is None or e < s or e - s + 1 > max_answer_len:
                    continue
                candidates.append((float(s_log[s] + e_log[e]), float(s_log[s]), float(e_log[e]), offsets[s][0], offsets[e][1]))
    candidates.sort(key=lambda c: c[0], reverse=True)
    entries, seen = [], set()  # the best-scoring occurrence of each distinct text (windows overlap)
    for score, sl, el, a, b in candidates:
        if (text := context[a:b]) not in seen:
            seen.add(text)
            entries.append({"text": text, "score": score, "start_logit": sl, "end_logit": el, "start": a, "end": b})
        if len(entries) == n_best:
            break
    if version_2 and null_score is not None:
        entries.append({"text": "", "score": null_score, "start_logit": None, "end_logit": None, "start": 0, "end": 0})
        entries.sort(key=lambda d: d["score"], reverse=True)
    for d, p in zip(entries, softmax(np.array([d["score"] for d in entries])) if entries else []):
        d["probability"] = float(p)
    answer = next((d for d in entries if d["text"]), None)  # the best span
    null_odds = None
    if version_2:
        diff = (null_score if null_score is not None else 0.0) - (answer["score"] if answer else -np.inf)
        null_odds = float(diff) if np.isfinite(diff) else 1e9
        if null_odds > null_threshold:
            answer = next((d for d in entries if not d["text"]), None)
    answer = answer or {"text": "", "start": 0, "end": 0, "probability": 0.0}
    return SpanAnswer(answer["text"], answer["start"], answer["end"], answer["probability"], entries, null_odds)


# ----------------------------------------------------------------------------- token classification


def token_stride(max_len: int, stride: int | None = None) -> int:
    """Tokens shared by consecutive windows of a long text: checked, or the default (a quarter
    of a window's text tokens, at most 32)."""
    text_tokens = max_len - 2  # [CLS] ... [SEP]
    if stride is None:
        return min(32, text_tokens // 4)
    if not 0 <= stride <= text_tokens // 2:
        raise ClozeformerError(
            f"stride={stride}: must be between 0 and half a window's text tokens ({text_tokens // 2} for max_length {max_len})"
        )
    return stride


def max_context_pieces(windows: Sequence[Sequence[int | None]]) -> dict[int, tuple[int, list[int]]]:
    """word -> (window, the word's token indices there), from each window's word ids.

    A word at a window's edge may be cut (its other pieces in the neighbouring window), so the
    chosen window is one where the word has all its pieces (the most any window has), and among
    those the one with the most tokens between the word and the nearer edge of the window's text.
    """
    seen: dict[int, list[tuple[int, int, list[int]]]] = {}  # word -> [(window, context, tokens)]
    for w, word_ids in enumerate(windows):
        real = [t for t, word in enumerate(word_ids) if word is not None]
        pieces: dict[int, list[int]] = {}
        for t in real:
            pieces.setdefault(word_ids[t], []).append(t)
        for word, tokens in pieces.items():
            seen.setdefault(word, []).append((w, min(tokens[0] - real[0], real[-1] - tokens[-1]), tokens))
    best = {word: max(options, key=lambda o: (len(o[2]), o[1])) for word, options in seen.items()}  # most pieces, then context
    return {word: (w, tokens) for word, (w, _, tokens) in best.items()}


def word_predictions(
    windows: Sequence[Sequence[int | None]], probs: Sequence[np.ndarray], aggregation: str = "first"
) -> list[tuple[int, int, float, int, list[int]]]:
    """(word, label index, probability, window, token indices) per word, in word order.

    windows: each window's word ids (None for special tokens); probs: each window's (T, K)
    label probabilities. Words that tokenized to nothing are absent."""
    out = []
    for word, (w, tokens) in sorted(max_context_pieces(windows).items()):
        p = probs[w][tokens[0]] if aggregation == "first" else probs[w][tokens].mean(0)
        k = int(np.argmax(p))
        out.append((word, k, float(p[k]), w, tokens))
    return out


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in float64 (stable)."""
    z = np.asarray(logits, dtype=np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)
