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

Answers: `clozeformer.data.spans.decode_question`, the decoder `qa` and `serve` use too.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from clozeformer.data.spans import decode_question, effective_stride
from clozeformer.tasks.common import Problems, QAExample
from clozeformer.tasks.features import private_backend


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
    """(predictions {qid: text}, n-best lists {qid: [...]}, null odds {qid: null - best span}),
    each question decoded by `clozeformer.data.spans.decode_question` (the decoder serving uses)."""
    by_example: dict[int, list[int]] = defaultdict(list)
    for j, f in enumerate(features):
        by_example[f["example_index"]].append(j)
    predictions: dict[str, str] = {}
    nbest_out: dict[str, list[dict]] = {}
    null_odds: dict[str, float] = {}
    for i, ex in enumerate(examples):
        windows = [(features[j]["offsets"], start_logits[j], end_logits[j]) for j in by_example.get(i, [])]
        answer = decode_question(
            ex.context, windows, n_best=n_best, max_answer_len=max_answer_len, version_2=version_2, null_threshold=null_threshold
        )
        predictions[ex.qid] = answer.text
        nbest_out[ex.qid] = answer.nbest
        if answer.null_odds is not None:
            null_odds[ex.qid] = answer.null_odds
    return predictions, nbest_out, null_odds
