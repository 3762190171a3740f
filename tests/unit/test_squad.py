"""SQuAD machinery: sliding windows with offsets, answer targets, and the n-best answer search."""

from __future__ import annotations

import numpy as np
import pytest

from clozeformer.tasks.common import Answer, Problems, QAExample, Source
from clozeformer.tasks.squad_post import effective_stride, make_windows, postprocess
from clozeformer.utils.errors import ClozeformerError

WORDS = "the a of in was born city river north south bank alan turing london 1912 who where when is what".split()


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from clozeformer.modeling.tokenizer import Tokenizer

    d = tmp_path_factory.mktemp("vocab")
    chinese = list(dict.fromkeys("光荣和开发的游戏于年发售是由哪两个公司"))
    (d / "vocab.txt").write_text(
        "\n".join(
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *chinese, "##force", "force", "-", ",", ".", "?", "2010"]
        )
        + "\n"
    )
    (d / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    return Tokenizer.from_pretrained(d)


def example(context: str, answer: str | None, question: str = "where was alan turing born ?", qid: str = "q"):
    answers = [] if answer is None else [Answer(answer, context.index(answer))]
    return QAExample(qid, question, context, answers, answer is None, Source("x.json", 1))


LONG = (
    "the city of the river bank was in the north . " * 6
    + "alan turing was born in London in 1912 . "
    + "the south bank of the river was a city . " * 6
)


def test_windows_cover_the_context_with_overlap(tok):
    ex = example(LONG, "London")
    feats = make_windows(tok, [ex], max_seq_len=32, doc_stride=8, max_query_len=16, training=True, problems=Problems())
    assert len(feats) > 5
    spans = []
    for f in feats:
        assert len(f["input_ids"]) <= 32
        ctx = [o for o in f["offsets"] if o is not None]
        spans.append(ctx)
        for s, e in ctx:  # every context token maps back to its text
            assert LONG[s:e].strip() and LONG[s:e].lower() == LONG[s:e].lower().strip()
    # consecutive windows share exactly doc_stride context tokens (except possibly the last)
    for a, b in zip(spans, spans[1:]):
        assert a[-8:] == b[:8]
    # union of windows = all context tokens
    assert spans[0][0][0] == 0 and spans[-1][-1][1] == len(LONG.rstrip())


def test_answer_targets_map_back_to_the_answer_text(tok):
    ex = example(LONG, "London in 1912")
    feats = make_windows(tok, [ex], max_seq_len=32, doc_stride=8, max_query_len=16, training=True, problems=Problems())
    hits = [f for f in feats if f["start_positions"] > 0]
    assert hits, "some window must contain the answer"
    for f in hits:
        s, e = f["start_positions"], f["end_positions"]
        assert LONG[f["offsets"][s][0] : f["offsets"][e][1]] == "London in 1912"
    for f in feats:
        if f["start_positions"] == 0:
            assert f["end_positions"] == 0  # windows without the whole answer point at [CLS]


def test_no_answer_and_unlocatable_answers(tok):
    p = Problems()
    impossible = example("the city was in the north .", None)
    lost = QAExample("lost", "who ?", "the city .", [Answer("river", -1)], False, Source("x.json", 9))
    feats = make_windows(tok, [impossible, lost], max_seq_len=32, doc_stride=8, max_query_len=16, training=True, problems=p)
    assert [(f["start_positions"], f["end_positions"]) for f in feats] == [(0, 0)]
    assert p.counts["no_trainable_answer"] == 1
    # at evaluation time the unlocatable example still gets windows (it is scored on its text)
    feats = make_windows(tok, [impossible, lost], max_seq_len=32, doc_stride=8, max_query_len=16, training=False, problems=p)
    assert [f["example_index"] for f in feats] == [0, 1]


def test_long_questions_are_cut_and_stride_clamped(tok):
    p = Problems()
    q = " ".join(["where"] * 40)
    feats = make_windows(
        tok, [example(LONG, "London", question=q)], max_seq_len=40, doc_stride=30, max_query_len=10, training=False, problems=p
    )
    assert p.counts["question_truncated"] == 1
    assert all(f["token_type_ids"].count(0) == 10 + 2 for f in feats)  # [CLS] q*10 [SEP]
    assert effective_stride(40, 10, 30) == 13  # 27 context slots -> overlap must be < 27
    assert effective_stride(384, 64, 128) == 128
    with pytest.raises(ClozeformerError, match="no room for a context"):
        effective_stride(20, 18, 4)


def test_chinese_offsets_are_character_exact(tok):
    ctx = "《战国无双3》是由光荣和ω-force开发的动作游戏，于2010年发售。"
    ex = example(ctx, "光荣和ω-force", question="是由哪两个公司开发的？")
    feats = make_windows(tok, [ex], max_seq_len=24, doc_stride=4, max_query_len=12, training=True, problems=Problems())
    f = next(f for f in feats if f["start_positions"] > 0)
    assert ctx[f["offsets"][f["start_positions"]][0] : f["offsets"][f["end_positions"]][1]] == "光荣和ω-force"


# ----------------------------------------------------------------------------- n-best search


def _feature(offsets, example_index=0):
    return {"offsets": offsets, "example_index": example_index, "input_ids": [0] * len(offsets)}


CTX = "alan turing was born in london"
#          [CLS] q    [SEP] alan    turing    was       born       in         london     [SEP]
OFFS = [None, None, None, (0, 4), (5, 11), (12, 15), (16, 20), (21, 23), (24, 30), None]


def test_best_span_respects_context_order_and_max_length():
    ex = example(CTX, "london")
    s = np.full(10, -10.0)
    e = np.full(10, -10.0)
    s[1], e[1] = 9.0, 9.0  # a question token scores highest: not in the context, never chosen
    s[8], e[8] = 5.0, 5.0  # "london"
    s[3], e[4] = 4.0, 4.5  # "alan turing" 8.5; "alan ... london" 4 + 5 = 9
    e[2] = 8.0  # end before start in the context is not allowed either
    preds, nbest, _ = postprocess([ex], [_feature(OFFS)], [s], [e], n_best=5, max_answer_len=30)
    assert preds == {"q": "london"}
    assert [d["text"] for d in nbest["q"]][:3] == ["london", "alan turing was born in london", "alan turing"]
    assert abs(sum(d["probability"] for d in nbest["q"]) - 1) < 1e-9
    # a long span loses to max_answer_len
    s2, e2 = np.full(10, -10.0), np.full(10, -10.0)
    s2[3], e2[8], s2[7] = 6.0, 6.0, 1.0
    preds, _, _ = postprocess([ex], [_feature(OFFS)], [s2], [e2], n_best=5, max_answer_len=3)
    assert preds["q"] == "in london"  # alan..london is 6 tokens


def test_best_span_across_windows_and_duplicates():
    ex = example(CTX, "born")
    w1 = [None, None, (0, 4), (5, 11), (12, 15), None]
    w2 = [None, None, (12, 15), (16, 20), (21, 23), None]
    s1, e1 = np.array([0, 0, 1.0, 2.0, 3.0, 0]), np.array([0, 0, 1.0, 2.0, 3.0, 0])
    s2, e2 = np.array([0, 0, 1.0, 4.0, 0.5, 0]), np.array([0, 0, 1.0, 4.0, 0.5, 0])
    preds, nbest, _ = postprocess([ex], [_feature(w1), _feature(w2)], [s1, s2], [e1, e2], n_best=4, max_answer_len=5)
    assert preds["q"] == "born"
    texts = [d["text"] for d in nbest["q"]]
    assert len(texts) == len(set(texts))  # "was" appears in both windows, listed once


def test_v2_null_answer_threshold():
    ex = example(CTX, None)
    s, e = np.full(10, -5.0), np.full(10, -5.0)
    s[0], e[0] = 2.0, 2.0  # null score 4
    s[8], e[8] = 1.5, 1.5  # best span 3
    preds, nbest, odds = postprocess(
        [ex], [_feature(OFFS)], [s], [e], n_best=5, max_answer_len=30, version_2=True, null_threshold=0.0
    )
    assert preds["q"] == "" and odds["q"] == pytest.approx(1.0)
    assert nbest["q"][0]["text"] == ""
    preds, _, _ = postprocess([ex], [_feature(OFFS)], [s], [e], n_best=5, max_answer_len=30, version_2=True, null_threshold=1.5)
    assert preds["q"] == "london"
    # v1.1 never answers empty
    preds, _, odds = postprocess([ex], [_feature(OFFS)], [s], [e], n_best=5, max_answer_len=30)
    assert preds["q"] == "london" and odds == {}


def test_decode_question_ranks_windows_by_logits_not_per_window_probabilities():
    """Two windows: A's best span is alone in its window (a peaked softmax) but has lower logits
    than B's, whose window holds a close rival. Per-window probabilities (serving's old rule)
    would pick A; the one decoder ranks by start + end logit, as evaluation does, and picks B."""
    from clozeformer.data.spans import decode_question

    context = "red blue green"
    # token 0 = [CLS], 1 = the question, then context tokens with their character spans
    offsets_a = [None, None, (0, 3)]
    offsets_b = [None, None, (4, 8), (9, 14)]
    a = (offsets_a, np.array([-5.0, -5.0, 2.0]), np.array([-5.0, -5.0, 2.0]))
    b = (offsets_b, np.array([-5.0, -5.0, 3.0, 2.9]), np.array([-5.0, -5.0, 3.0, 2.9]))
    ans = decode_question(context, [a, b], max_answer_len=1)
    assert (ans.text, ans.start, ans.end) == ("blue", 4, 8)
    assert [e["text"] for e in ans.nbest] == ["blue", "green", "red"]
    assert ans.probability == pytest.approx(ans.nbest[0]["probability"]) and ans.null_odds is None
    # v2.0: [CLS] at 4 + 4 in every window beats the best span (6): no answer, with its probability
    cls_high = [(o, np.r_[4.0, s[1:]], np.r_[4.0, e[1:]]) for o, s, e in (a, b)]
    none = decode_question(context, cls_high, max_answer_len=1, version_2=True)
    assert (none.text, none.start, none.end) == ("", 0, 0) and none.null_odds == pytest.approx(2.0)
    assert none.probability == pytest.approx(max(e["probability"] for e in none.nbest))
    # a threshold above the odds keeps the span
    assert decode_question(context, cls_high, max_answer_len=1, version_2=True, null_threshold=2.5).text == "blue"
