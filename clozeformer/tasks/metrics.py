"""The tasks' official metrics: scikit-learn and scipy for classification and correlation, the
tasks' own evaluation scripts for span QA and NER.

| metric      | definition                                                                        |
|-------------|-----------------------------------------------------------------------------------|
| accuracy    | mean(pred == gold)                                                                |
| f1          | binary F1 of the positive class "1" (MRPC, QQP)        sklearn f1_score            |
| macro_f1    | unweighted mean of the per-class F1                    sklearn f1_score            |
| mcc         | Matthews correlation, multi-class form (CoLA)          sklearn matthews_corrcoef   |
| pearson     | Pearson r (STS-B)                                      scipy.stats.pearsonr        |
| spearman    | Spearman rho, ties at their average rank (STS-B)       scipy.stats.spearmanr       |
| SQuAD EM/F1 | the official v1.1 and v2.0 evaluation scripts, normalisation and all              |
| CMRC EM/F1  | CMRC 2018's evaluate script: mixed segmentation, punctuation removal, LCS-based F1 |
| entity P/R/F1 | CoNLL `conlleval` chunking, micro-averaged over entities (seqeval's default mode) |
| ndcg@k      | retrieval: binary-relevance nDCG of the top k, 1 / log2(rank + 1) gains       |
| mrr@k       | retrieval: mean of 1 / rank of the first relevant document in the top k (else 0) |
| recall@k    | retrieval: fraction of a query's relevant documents found in its top k        |

Every score is a fraction in [0, 1] except the SQuAD/CMRC ones, which, as their scripts do,
report percentages. Scores that are undefined (a correlation with a constant side, F1 with no
true or predicted positives, MCC of a constant prediction) are reported as 0.0, without a
warning, so a metrics JSON stays valid JSON and a log stays readable.
"""

from __future__ import annotations

import math
import re
import string
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher

import numpy as np

# ----------------------------------------------------------------------------- classification


def accuracy(preds: Sequence, labels: Sequence) -> float:
    preds, labels = np.asarray(preds), np.asarray(labels)
    return float((preds == labels).mean()) if len(labels) else 0.0


def f1_binary(preds: Sequence, labels: Sequence, positive=1) -> float:
    """F1 of the `positive` class (MRPC, QQP)."""
    from sklearn.metrics import f1_score

    p, y = np.asarray(preds) == positive, np.asarray(labels) == positive
    return float(f1_score(y, p, zero_division=0.0))


def macro_f1(preds: Sequence, labels: Sequence) -> float:
    """Unweighted mean of the per-class F1 over the classes present in labels or predictions."""
    from sklearn.metrics import f1_score

    return float(f1_score(np.asarray(labels), np.asarray(preds), average="macro", zero_division=0.0)) if len(labels) else 0.0


def matthews_corrcoef(preds: Sequence, labels: Sequence) -> float:
    from sklearn.metrics import matthews_corrcoef as mcc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a constant side: sklearn answers 0.0
        return float(mcc(np.asarray(labels), np.asarray(preds)))


def _correlation(fn, x: Sequence[float], y: Sequence[float]) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0  # undefined (scipy: nan and a warning)
    return float(fn(x, y)[0])


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import pearsonr

    return _correlation(pearsonr, x, y)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    return _correlation(spearmanr, x, y)


def classification_metrics(names: Iterable[str], preds: Sequence, labels: Sequence) -> dict[str, float]:
    """The named metrics for class predictions (strings) or, for pearson/spearman/mse, scores."""
    fns = {
        "accuracy": lambda: accuracy(preds, labels),
        "f1": lambda: f1_binary(preds, labels, "1"),
        "macro_f1": lambda: macro_f1(preds, labels),
        "mcc": lambda: matthews_corrcoef(preds, labels),
        "pearson": lambda: pearson(preds, labels),
        "spearman": lambda: spearman(preds, labels),
        "mse": lambda: float(np.mean((np.asarray(preds, float) - np.asarray(labels, float)) ** 2)),
    }
    return {n: fns[n]() for n in names}


# ----------------------------------------------------------------------------- SQuAD (official scripts)


def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (SQuAD's evaluate script)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_exact(gold: str, pred: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(pred))


def squad_f1(gold: str, pred: str, v2: bool = True) -> float:
    """Token-overlap F1 after normalisation. v2.0's script scores an empty side as exact equality;
    v1.1's gives 0 whenever nothing overlaps (`v2=False`)."""
    gold_toks, pred_toks = normalize_answer(gold).split(), normalize_answer(pred).split()
    if v2 and (not gold_toks or not pred_toks):
        return float(gold_toks == pred_toks)
    return _f1(sum((Counter(gold_toks) & Counter(pred_toks)).values()), len(pred_toks), len(gold_toks))


def _f1(overlap: int, n_pred: int, n_gold: int) -> float:
    """F1 of a prediction of `n_pred` items sharing `overlap` with a gold of `n_gold` (0 when none)."""
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_pred, overlap / n_gold
    return 2 * precision * recall / (precision + recall)


def squad_v1_evaluate(golds: dict[str, list[str]], preds: dict[str, str]) -> dict[str, float]:
    """SQuAD v1.1's `evaluate-v1.1.py`: max over gold answers; unanswered questions score 0."""
    answered = [(answers, preds[qid]) for qid, answers in golds.items() if qid in preds]
    em = sum(max(squad_exact(a, pred) for a in answers) for answers, pred in answered)
    f1 = sum(max(squad_f1(a, pred, v2=False) for a in answers) for answers, pred in answered)
    n = len(golds)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n}


def squad_v2_evaluate(
    golds: dict[str, list[str]], preds: dict[str, str], na_probs: dict[str, float] | None = None, na_prob_thresh: float = 1.0
) -> dict[str, float]:
    """SQuAD v2.0's `evaluate-v2.0.py`: overall / HasAns / NoAns EM and F1; with `na_probs` (the
    script's --na-prob-file; here null score minus best span score) also the best threshold."""
    has_ans: dict[str, bool] = {}
    raw_exact: dict[str, float] = {}
    raw_f1: dict[str, float] = {}
    for qid, answers in golds.items():
        answers = [a for a in answers if normalize_answer(a)] or [""]  # no-answer gold = ""
        has_ans[qid] = answers != [""]
        if qid not in preds:
            continue
        raw_exact[qid] = max(squad_exact(a, preds[qid]) for a in answers)
        raw_f1[qid] = max(squad_f1(a, preds[qid]) for a in answers)
    probs = na_probs if na_probs is not None else {k: 0.0 for k in preds}

    def thresholded(raw: dict[str, float]) -> dict[str, float]:
        # apply_no_ans_threshold: a question whose na_prob exceeds the threshold counts as "no answer"
        return {q: (float(not has_ans[q]) if probs.get(q, 0.0) > na_prob_thresh else v) for q, v in raw.items()}

    exact, f1 = thresholded(raw_exact), thresholded(raw_f1)

    def mean(scores: dict[str, float], keep: bool | None = None) -> tuple[float, int]:
        vals = [v for k, v in scores.items() if keep is None or has_ans[k] == keep]
        return (100.0 * sum(vals) / len(vals), len(vals)) if vals else (0.0, 0)

    out: dict[str, float] = {}
    out["exact"], out["total"] = mean(exact)
    out["f1"] = mean(f1)[0]
    for tag, keep in (("HasAns", True), ("NoAns", False)):
        e, n = mean(exact, keep)
        if n:
            out[f"{tag}_exact"], out[f"{tag}_f1"], out[f"{tag}_total"] = e, mean(f1, keep)[0], n
    if na_probs is not None and raw_exact:
        for name, raw in (("exact", raw_exact), ("f1", raw_f1)):
            out[f"best_{name}"], out[f"best_{name}_thresh"] = _best_threshold(preds, raw, na_probs, has_ans)
    return out


def _best_threshold(preds, scores, na_probs, has_ans) -> tuple[float, float]:
    """`find_best_thresh` of evaluate-v2.0.py: sweep the threshold over the sorted na_probs."""
    cur = best = float(sum(1 for k in scores if not has_ans[k]))
    best_thresh = 0.0
    for qid in sorted(scores, key=lambda k: na_probs.get(k, 0.0)):
        cur += scores[qid] if has_ans[qid] else (-1 if preds[qid] else 0)
        if cur > best:
            best, best_thresh = cur, na_probs.get(qid, 0.0)
    return 100.0 * best / len(scores), best_thresh


# ----------------------------------------------------------------------------- CMRC 2018 (Chinese span QA)

#: The CMRC 2018 script's `sp_char` list: punctuation it splits on and (with rm_punc) removes.
#: ("……" is one entry of that list: compared with single characters, as the script does, it never matches.)
CMRC_PUNCT = frozenset([*"-:_*^/\\~`+=，。：？！“”；’《》", "……", *"·、「」（）－～『』"])
_CJK = re.compile(r"[\u4e00-\u9fa5]")


def _word_tokenize(text: str) -> list[str]:
    """A Treebank-style stand-in for `nltk.word_tokenize`, which the CMRC script calls on the
    non-Chinese runs (nltk is not a dependency): split on whitespace and split off punctuation,
    keeping decimal/thousands separators inside numbers and English contractions apart."""
    text = re.sub(r'([;@#$%&?!\[\](){}<>"])', r" \1 ", text)
    text = re.sub(r"([:,])([^\d])", r" \1 \2", text)
    text = re.sub(r"([:,])$", r" \1 ", text)
    text = re.sub(r"\.\.\.", " ... ", text)
    text = re.sub(r"([^.])(\.)([\])}>\"']*)\s*$", r"\1 \2 \3 ", text)
    text = re.sub(r"(?i)([^' ])('s|'m|'d|'ll|'re|'ve|n't)\b", r"\1 \2", text)
    return text.split()


def mixed_segmentation(text: str, rm_punc: bool = False) -> list[str]:
    """CMRC's segmentation: each Chinese character (and listed punctuation mark) alone, runs of
    other characters word-tokenized."""
    text = str(text).lower().strip()
    segs: list[str] = []
    buf = ""
    for ch in text:
        if rm_punc and ch in CMRC_PUNCT:
            continue
        if _CJK.search(ch) or ch in CMRC_PUNCT:
            if buf:
                segs.extend(_word_tokenize(buf))
                buf = ""
            segs.append(ch)
        else:
            buf += ch
    if buf:
        segs.extend(_word_tokenize(buf))
    return segs


def remove_punctuation(text: str) -> str:
    return "".join(ch for ch in str(text).lower().strip() if ch not in CMRC_PUNCT)


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common *substring* (contiguous), as the script's `find_lcs`."""
    return SequenceMatcher(None, a, b, autojunk=False).find_longest_match().size


def cmrc_f1(answers: Sequence[str], prediction: str) -> float:
    pred = mixed_segmentation(prediction, rm_punc=True)
    golds = [mixed_segmentation(ans, rm_punc=True) for ans in answers]
    return max((_f1(_lcs_length(gold, pred), len(pred), len(gold)) for gold in golds), default=0.0)


def cmrc_em(answers: Sequence[str], prediction: str) -> int:
    pred = remove_punctuation(prediction)
    return int(any(remove_punctuation(a) == pred for a in answers))


def cmrc_evaluate(golds: dict[str, list[str]], preds: dict[str, str]) -> dict[str, float]:
    """CMRC 2018's `evaluate()`: F1, EM (percent, unanswered count as 0) and their AVERAGE."""
    answered = [(answers, preds[qid]) for qid, answers in golds.items() if qid in preds]
    n = max(len(golds), 1)
    f1 = 100.0 * sum(cmrc_f1(answers, pred) for answers, pred in answered) / n
    em = 100.0 * sum(cmrc_em(answers, pred) for answers, pred in answered) / n
    return {"f1": f1, "exact_match": em, "average": (f1 + em) / 2}


# ----------------------------------------------------------------------------- NER (entity level)


def _split_tag(tag: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', '_') as seqeval types the outside tag."""
    return tag[0], (tag[1:].split("-", maxsplit=1)[-1] or "_")


def _chunk_end(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's endOfChunk: IOB1, IOB2, IOE and IOBES tags all work."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _chunk_start(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's startOfChunk."""
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def get_entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """(type, first, last) of each entity in one sentence's tags (inclusive word indices)."""
    chunks = []
    prev_tag, prev_type, begin = "O", "", 0
    for i, full in enumerate([*tags, "O"]):
        tag, type_ = _split_tag(full)
        if _chunk_end(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, begin, i - 1))
        if _chunk_start(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return chunks


def entity_scores(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """Entity-level micro precision / recall / F1 (an entity counts when type and span match
    exactly), per-type F1 as `f1_<TYPE>`, and token accuracy."""
    true_set, pred_set = set(), set()
    correct = total = 0
    for s, (g, p) in enumerate(zip(gold, pred)):
        true_set.update((s, *e) for e in get_entities(g))
        pred_set.update((s, *e) for e in get_entities(p))
        correct += sum(a == b for a, b in zip(g, p))
        total += len(g)

    def prf(t: set, p: set) -> tuple[float, float, float]:
        tp = len(t & p)
        prec = tp / len(p) if p else 0.0
        rec = tp / len(t) if t else 0.0
        return prec, rec, (2 * prec * rec / (prec + rec) if prec + rec else 0.0)

    precision, recall, f1 = prf(true_set, pred_set)
    out = {"f1": f1, "precision": precision, "recall": recall, "accuracy": correct / total if total else 0.0}
    for type_ in sorted({e[1] for e in true_set}):
        out[f"f1_{type_}"] = prf({e for e in true_set if e[1] == type_}, {e for e in pred_set if e[1] == type_})[2]
    return out


# ----------------------------------------------------------------------------- retrieval


def retrieval_metrics(ranked: Sequence[Sequence], relevant: Sequence[set], ks: Sequence[int] = (1, 10)) -> dict[str, float]:
    """nDCG@10, MRR@10 and recall@k (each k of `ks`) averaged over queries, as sentence-transformers'
    InformationRetrievalEvaluator and the BEIR/MS MARCO scripts define them (binary relevance).
    `ranked[q]`: query q's documents, best first (at least the top max(10, max(ks))); `relevant[q]`:
    the documents that answer it (non-empty)."""
    n = len(ranked)
    if n == 0:
        return {"ndcg@10": 0.0, "mrr@10": 0.0, **{f"recall@{k}": 0.0 for k in ks}}
    ndcg = mrr = 0.0
    recall = dict.fromkeys(ks, 0.0)
    for docs, rel in zip(ranked, relevant):
        hits = [d in rel for d in docs]
        dcg = sum(1.0 / math.log2(r + 2) for r, hit in enumerate(hits[:10]) if hit)
        ideal = sum(1.0 / math.log2(r + 2) for r in range(min(len(rel), 10)))
        ndcg += dcg / ideal
        mrr += next((1.0 / (r + 1) for r, hit in enumerate(hits[:10]) if hit), 0.0)
        for k in ks:
            recall[k] += sum(hits[:k]) / len(rel)
    return {"ndcg@10": ndcg / n, "mrr@10": mrr / n, **{f"recall@{k}": v / n for k, v in recall.items()}}
