"""Metrics on hand cases, entity scores against seqeval, and the official SQuAD / CMRC definitions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from clozeformer.tasks import metrics as M


def test_classification_metrics_on_hand_cases():
    # string labels as the readers produce them; the positive class of GLUE's binary tasks is "1"
    got = M.classification_metrics(["accuracy", "f1", "mcc", "macro_f1"], ["1", "0", "1", "1"], ["1", "0", "0", "1"])
    # TP 2, TN 1, FP 1, FN 0: F1 = 2*2 / (2*2 + 1) = 0.8; MCC = (2*1 - 1*0) / sqrt(3*2*1*2)
    assert got["accuracy"] == 0.75 and got["f1"] == pytest.approx(0.8)
    assert got["mcc"] == pytest.approx(2 / 12**0.5)
    assert got["macro_f1"] == pytest.approx((0.8 + 2 / 3) / 2)  # class "0": P 1, R 1/2
    # three classes (CoLA-style MCC is multi-class in general): the Gorodkin form by hand
    y, p = [0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 2, 0]
    c, s, t, pk = 4, 6, np.array([2, 2, 2]), np.array([2, 3, 1])
    assert M.matthews_corrcoef(p, y) == pytest.approx((c * s - t @ pk) / np.sqrt((s * s - pk @ pk) * (s * s - t @ t)))


def test_degenerate_cases_are_zero_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert M.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0
        assert M.f1_binary([0, 0], [0, 0]) == 0.0
        assert M.pearson([1, 1, 1], [1, 2, 3]) == 0.0  # undefined (scipy: nan) -> 0.0
        assert M.spearman([1, 2, 3], [4, 4, 4]) == 0.0
        assert M.accuracy([], []) == 0.0


def test_correlations_on_hand_cases():
    # x - mean = (-1, 0, 1), y - mean = (-4/3, -1/3, 5/3): r = 3 / sqrt(2 * 42/9)
    assert M.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(3 / np.sqrt(2 * 42 / 9))
    # ties share their average rank: x ranks (1, 2.5, 2.5, 4), y ranks (1, 3, 2, 4)
    assert M.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / np.sqrt(4.5 * 5))
    assert M.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)


# ----------------------------------------------------------------------------- SQuAD


def test_squad_normalisation_and_hand_cases():
    assert M.normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert M.normalize_answer("an apple, a pear & the end.") == "apple pear end"
    assert M.normalize_answer("theory") == "theory"  # articles only as whole words
    assert M.squad_exact("Denver Broncos", "the Denver Broncos") == 1
    assert M.squad_f1("Saint Bernadette Soubirous", "Bernadette") == pytest.approx(0.5)  # P=1, R=1/3
    assert M.squad_f1("x b c d", "c d e") == pytest.approx(2 * (2 / 3) * (2 / 4) / (2 / 3 + 2 / 4))
    assert M.squad_f1("a b c d", "c d e") == pytest.approx(2 / 3)  # "a" is an article: gold is "b c d"
    assert M.squad_f1("", "") == 1.0 and M.squad_f1("the", "") == 1.0  # v2.0: both normalise to empty
    assert M.squad_f1("the", "", v2=False) == 0.0  # v1.1: no overlap -> 0


def test_squad_v1_aggregation_max_over_answers():
    golds = {"q1": ["Denver Broncos", "Broncos"], "q2": ["1912"], "q3": ["London"]}
    preds = {"q1": "Broncos", "q2": "in 1912", "q3": "Paris"}
    r = M.squad_v1_evaluate(golds, preds)
    assert r["exact_match"] == pytest.approx(100 / 3)
    assert r["f1"] == pytest.approx(100 * (1 + 2 / 3 + 0) / 3)  # "in 1912" vs "1912": P=1/2, R=1


def test_squad_v2_has_ans_no_ans_and_best_threshold():
    golds = {"a": ["Paris"], "b": [""], "c": ["red car"], "d": []}
    preds = {"a": "Paris", "b": "", "c": "car", "d": "blue"}
    r = M.squad_v2_evaluate(golds, preds)
    assert r["exact"] == pytest.approx(50.0) and r["total"] == 4
    assert r["HasAns_exact"] == pytest.approx(50.0) and r["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert r["NoAns_exact"] == pytest.approx(50.0) and r["NoAns_total"] == 2
    # with null odds (evaluate-v2.0.py find_best_thresh): answering only "a" (odds <= -5) already
    # scores 3 of 4; the sweep keeps the first threshold reaching the best score
    na = {"a": -5.0, "b": 1.0, "c": -1.0, "d": 2.0}
    r = M.squad_v2_evaluate(golds, preds, na)
    assert r["best_exact"] == pytest.approx(75.0) and r["best_exact_thresh"] == pytest.approx(-5.0)
    # a threshold applied: questions with na_prob above it count as answered "no answer"
    r = M.squad_v2_evaluate(golds, preds, na, na_prob_thresh=0.5)
    assert r["exact"] == pytest.approx(75.0)


# ----------------------------------------------------------------------------- CMRC 2018


def test_cmrc_segmentation_and_scores():
    assert M.mixed_segmentation("光荣和ω-force", rm_punc=True) == ["光", "荣", "和", "ωforce"]
    assert M.mixed_segmentation("2010年") == ["2010", "年"]
    assert M.mixed_segmentation("《战国无双3》") == ["《", "战", "国", "无", "双", "3", "》"]
    assert M.mixed_segmentation("Hello, World. 你好") == ["hello", ",", "world", ".", "你", "好"]
    assert M.remove_punctuation("《光荣》，") == "光荣"
    # F1 on the longest common substring of segments: gold 4 segments, prediction 2 -> P=1, R=1/2
    assert M.cmrc_f1(["光荣和ω-force"], "光荣") == pytest.approx(2 / 3)
    assert M.cmrc_f1(["光荣和ω-force", "光荣"], "光荣") == 1.0  # max over answers
    assert M.cmrc_f1(["北京"], "上海") == 0.0
    assert M.cmrc_em(["2010年"], "2010年。") == 1  # punctuation removed before comparing
    r = M.cmrc_evaluate({"a": ["2010年"], "b": ["北京"], "c": ["上海"]}, {"a": "2010年", "b": "北京市"})
    assert r["exact_match"] == pytest.approx(100 / 3)
    assert r["f1"] == pytest.approx(100 * (1 + 0.8) / 3)  # "北京" vs "北京市": P=2/3, R=1 -> 0.8
    assert r["average"] == pytest.approx((r["f1"] + r["exact_match"]) / 2)


# ----------------------------------------------------------------------------- NER


def _random_tags(rng, n, scheme):
    types = ["PER", "LOC", "ORG"]
    prefixes = {"iob2": "BI", "iob1": "BI", "iobes": "BIES"}[scheme]
    out = []
    for _ in range(n):
        r = rng.random()
        out.append("O" if r < 0.45 else f"{rng.choice(list(prefixes))}-{rng.choice(types)}")
    return out


@pytest.mark.parametrize("scheme", ["iob2", "iob1", "iobes"])
def test_entities_match_seqeval(scheme):
    from seqeval.metrics import accuracy_score, f1_score, precision_score, recall_score
    from seqeval.metrics.sequence_labeling import get_entities

    rng = np.random.default_rng({"iob2": 0, "iob1": 1, "iobes": 2}[scheme])
    gold = [_random_tags(rng, int(rng.integers(1, 12)), scheme) for _ in range(60)]
    pred = [[t if rng.random() < 0.7 else _random_tags(rng, 1, scheme)[0] for t in s] for s in gold]
    for seq in gold[:20]:
        assert M.get_entities(seq) == get_entities(seq)
    r = M.entity_scores(gold, pred)
    assert r["f1"] == pytest.approx(f1_score(gold, pred))
    assert r["precision"] == pytest.approx(precision_score(gold, pred))
    assert r["recall"] == pytest.approx(recall_score(gold, pred))
    assert r["accuracy"] == pytest.approx(accuracy_score(gold, pred))


def test_entity_scores_hand_case():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG"]]
    r = M.entity_scores(gold, pred)
    assert r["precision"] == pytest.approx(2 / 3) and r["recall"] == pytest.approx(2 / 3)
    assert r["f1_PER"] == 1.0 and r["f1_LOC"] == 0.0
