"""Span QA around the model: contexts -> overlapping windows, and logits -> answer texts.

Windows. A context longer than the model's window is split into overlapping windows, each
encoded as `[CLS] question [SEP] context-piece [SEP]`. The tokenizer backend does the splitting
(`only_second` truncation with overflow): `doc_stride` is the number of context tokens two
neighbouring windows share (Hugging Face's `run_qa.py` meaning; Google's `run_squad.py` counts
the step between window starts instead). Questions are cut to `max_query_len` tokens first.
Every context token keeps its character span (`offsets`), so a predicted span maps back to the
original context text exactly, whatever the normalisation (lower-casing, accents, CJK spacing).

Training targets. The answer's character span is mapped to the first and last token it covers
in each window; a window that does not contain the whole answer (and every window of a v2.0
no-answer question) targets [CLS] (index 0), as in BERT.

Answers (n-best search). For each window, the `n_best` highest start and end logits are paired;
a pair is a candidate if both tokens are in the context, end >= start, and the span has at most
`max_answer_len` tokens. Candidates of all windows of a question are ranked by start + end logit.
For SQuAD v2.0 the "null" score (start + end logit at [CLS]; the minimum over windows) competes:
the answer is empty when `null - best_span > null_threshold` (BERT's `null_score_diff_threshold`).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from clozeformer.errors import ClozeformerError
from clozeformer.tasks.common import Problems, QAExample
from clozeformer.tasks.features import private_backend

#: special tokens around a question/context pair: [CLS] q [SEP] c [SEP]
NUM_SPECIAL = 3


def effective_stride(max_seq_len: int, max_query_len: int, doc_stride: int) -> int:
    """`doc_stride`, lowered when it would not leave a new context token per window.

    The tokenizers library requires overlap < room for context; with the smallest room a
    window can have (the longest allowed question) half the room is used instead.
    """
    room = max_seq_len - max_query_len - NUM_SPECIAL
    if room < 2:
        raise ClozeformerError(
            f"max_seq_len={max_seq_len} leaves no room for a context after a question of "
            f"up to max_query_len={max_query_len} tokens; raise --max-seq-len or lower "
            "--max-query-len"
        )
    return doc_stride if doc_stride < room else room // 2


def _truncate_questions(tokenizer, examples: list[QAExample], max_query_len: int, problems: Problems) -> list[str]:
    backend = private_backend(tokenizer)
    encs = backend.encode_batch([ex.question for ex in examples], add_special_tokens=False)
    out = []
    for ex, enc in zip(examples, encs):
        q = ex.question
        if len(enc.ids) > max_query_len:
            q = q[: enc.offsets[max_query_len - 1][1]]
            problems.warn(
                "question_truncated",
                ex.source,
                f"question {ex.qid!r} has {len(enc.ids)} tokens; cut to max_query_len={max_query_len}",
            )
        out.append(q)
    return out


def make_windows(
    tokenizer,
    examples: list[QAExample],
    *,
    max_seq_len: int,
    doc_stride: int,
    max_query_len: int,
    training: bool,
    problems: Problems,
) -> list[dict]:
    """Features for every window of every example.

    Each feature: input_ids, token_type_ids, example_index, offsets (a (start, end) character
    span in the context per token; None outside the context), and when `training`
    start_positions / end_positions (token indices; 0 = [CLS] = no answer in this window).
    """
    stride = effective_stride(max_seq_len, max_query_len, doc_stride)
    questions = _truncate_questions(tokenizer, examples, max_query_len, problems)
    backend = private_backend(tokenizer, max_seq_len, stride=stride, strategy="only_second")
    encodings = backend.encode_batch(list(zip(questions, [ex.context for ex in examples])))
    feats: list[dict] = []
    for i, (ex, enc) in enumerate(zip(examples, encodings)):
        answer = None
        if training and not ex.is_impossible:
            answer = next((a for a in ex.answers if a.start >= 0), None)
            if answer is None:
                problems.warn(
                    "no_trainable_answer",
                    ex.source,
                    f"question {ex.qid!r}: no answer located in the context; not used for training",
                )
                continue
        for window in [enc, *enc.overflowing]:
            seq_ids = window.sequence_ids
            offsets = [tuple(o) if s == 1 else None for o, s in zip(window.offsets, seq_ids)]
            f = {"input_ids": window.ids, "token_type_ids": window.type_ids, "example_index": i, "offsets": offsets}
            if training:
                f["start_positions"], f["end_positions"] = _target(offsets, answer)
            feats.append(f)
    return feats


def _target(offsets: list, answer) -> tuple[int, int]:
    """(start token, end token) of the answer in this window, or (0, 0) when not fully inside."""
    if answer is None:
        return 0, 0
    start_char, end_char = answer.start, answer.start + len(answer.text)
    ctx = [t for t, o in enumerate(offsets) if o is not None]
    if not ctx or offsets[ctx[0]][0] > start_char or offsets[ctx[-1]][1] < end_char:
        return 0, 0
    start_tok = next(t for t in ctx if offsets[t][1] > start_char)  # first token ending after the answer starts
    end_tok = next(t for t in reversed(ctx) if offsets[t][0] < end_char)  # last token starting before it ends
    return start_tok, max(end_tok, start_tok)


def postprocess(
    examples: list[QAExample],
    features: list[dict],
    start_logits: list[np.ndarray],
    end_logits: list[np.ndarray],
    *,
    n_best: int = 20,
    max_answer_len: int = 30,
    version_2: bool = False,
    null_threshold: float = 0.0,
) -> tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]:
    """(predictions {qid: text}, n-best lists {qid: [...]}, null odds {qid: null - best span})."""
    by_example: dict[int, list[int]] = defaultdict(list)
    for j, f in enumerate(features):
        by_example[f["example_index"]].append(j)
    predictions: dict[str, str] = {}
    nbest_out: dict[str, list[dict]] = {}
    null_odds: dict[str, float] = {}
    for i, ex in enumerate(examples):
        candidates = []
        null_score = None
        for j in by_example.get(i, []):
            offsets = features[j]["offsets"]
            s_log, e_log = start_logits[j][: len(offsets)], end_logits[j][: len(offsets)]
            feat_null = float(s_log[0] + e_log[0])
            null_score = feat_null if null_score is None else min(null_score, feat_null)
            starts = np.argsort(s_log)[::-1][:n_best]
            ends = np.argsort(e_log)[::-1][:n_best]
            for s in starts:
                if offsets[s] is None:
                    continue
                for e in ends:
                    if offsets[e] is None or e < s or e - s + 1 > max_answer_len:
                        continue
                    text = ex.context[offsets[s][0] : offsets[e][1]]
                    candidates.append((float(s_log[s] + e_log[e]), float(s_log[s]), float(e_log[e]), text))
        candidates.sort(key=lambda c: c[0], reverse=True)
        # keep the best-scoring occurrence of each distinct text (windows overlap)
        seen, best = set(), []
        for c in candidates:
            if c[3] not in seen:
                seen.add(c[3])
                best.append(c)
            if len(best) == n_best:
                break
        entries = [{"text": t, "score": sc, "start_logit": sl, "end_logit": el} for sc, sl, el, t in best]
        if version_2 and null_score is not None:
            entries.append({"text": "", "score": null_score, "start_logit": None, "end_logit": None})
            entries.sort(key=lambda d: d["score"], reverse=True)
        if entries:
            scores = np.array([d["score"] for d in entries])
            probs = np.exp(scores - scores.max())
            probs /= probs.sum()
            for d, p in zip(entries, probs):
                d["probability"] = float(p)
        nbest_out[ex.qid] = entries
        best_text = best[0][3] if best else ""
        if version_2:
            diff = (null_score if null_score is not None else 0.0) - (best[0][0] if best else -np.inf)
            diff = float(diff) if np.isfinite(diff) else 1e9
            null_odds[ex.qid] = diff
            predictions[ex.qid] = "" if diff > null_threshold else best_text
        else:
            predictions[ex.qid] = best_text
    return predictions, nbest_out, null_odds
