"""One task's data around one model: examples -> features -> logits -> predictions -> scores / files.

`TaskRunner` is shared by `finetune` (per-epoch evaluation), `evaluate` and `predict`, so all
three encode, decode and score identically. It branches on the task family
(classification, regression, token, qa, choice) in one place.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clozeformer.data import spans
from clozeformer.data.padding import batch_indices
from clozeformer.tasks import embedding, glue, metrics, squad_post
from clozeformer.tasks import features as F
from clozeformer.tasks.common import Problems, TokenExample, sort_labels
from clozeformer.tasks.conll import format_conll
from clozeformer.tasks.spec import TaskSpec
from clozeformer.tasks.task_config import TaskDataConfig
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_write_json, atomic_write_text


@dataclass
class SplitData:
    """One split: its name, its examples and their features."""

    name: str
    examples: list
    features: list[dict] = field(default_factory=list)


@dataclass
class Decoded:
    """Per-example predictions of one split (+ QA's n-best lists and null odds)."""

    predictions: list
    nbest: dict[str, list[dict]] | None = None
    null_odds: dict[str, float] | None = None
    queries: list[tuple[list[int], set[int]]] | None = None  # sentence embeddings, a pairs file: per distinct A, its
    # top 10 Bs and its relevant Bs (text keys)


def gold_labels(spec: TaskSpec, examples: list) -> list:
    """The label (class) values present in examples; tags for token tasks."""
    if spec.family == "token":
        return [t for ex in examples if ex.tags for t in ex.tags]
    return [ex.label for ex in examples if getattr(ex, "label", None) is not None]


def discover_labels(spec: TaskSpec, train_examples: list) -> list[str] | None:
    """The label list: the task's fixed one, else the training file's (sorted; 'O' first for tags)."""
    if spec.family in ("regression", "qa", "choice", "embedding"):
        return None
    if spec.labels is not None:
        return list(spec.labels)
    found = sort_labels(gold_labels(spec, train_examples))
    if spec.family == "token" and "O" in found:
        found = ["O"] + [t for t in found if t != "O"]
    if spec.family == "classification" and len(found) < 2:
        raise ClozeformerError(
            f"{train_examples[0].source.file}: the training data has "
            f"{len(found)} distinct label(s) ({', '.join(found)}); classification needs >= 2"
        )
    return found


def check_labels(spec: TaskSpec, examples: list, labels: list[str] | None) -> None:
    """Every gold label of `examples` must be one the model knows (else: file:line error)."""
    if labels is None:
        return
    known = set(labels)
    for ex in examples:
        values = (ex.tags or []) if isinstance(ex, TokenExample) else [getattr(ex, "label", None)]
        for v in values:
            if v is not None and v not in known:
                shown = ", ".join(labels[:20]) + (" ..." if len(labels) > 20 else "")
                if spec.labels is not None:  # a fixed label set (GLUE, CoNLL-2003, ...)
                    own = "token-classification" if spec.family == "token" else "classification"
                    raise ClozeformerError(
                        f"{ex.source}: label {v!r} is not one of {spec.title}'s labels "
                        f"({shown}); for another label set use --task {own}"
                    )
                raise ClozeformerError(f"{ex.source}: label {v!r} was not seen in the training data (known labels: {shown})")


class TaskRunner:
    def __init__(self, spec: TaskSpec, cfg: TaskDataConfig, tokenizer, labels: list[str] | None, version_2: bool = False) -> None:
        self.spec = spec
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.labels = labels
        self.label2id = {lab: i for i, lab in enumerate(labels)} if labels else None
        self.version_2 = version_2
        self.max_len = cfg.max_length or spec.default_max_seq_len

    def check_fits(self, config) -> None:
        """The model (`config`) must have a position for every token of an input."""
        if self.max_len > config.max_position_embeddings:
            raise ClozeformerError(
                f"--max-seq-len {self.max_len} exceeds the model's max_position_embeddings ({config.max_position_embeddings})"
            )

    # ------------------------------------------------------------------ encode
    def featurize(self, examples: list, problems: Problems, training: bool) -> list[dict]:
        fam = self.spec.family
        if fam in ("classification", "regression"):
            return F.encode_text(self.tokenizer, examples, self.max_len, problems, self.label2id, regression=fam == "regression")
        if fam == "token":
            return F.encode_tokens(self.tokenizer, examples, self.max_len, problems, self.label2id, training)
        if fam == "choice":
            return F.encode_choices(self.tokenizer, examples, self.max_len, problems)
        if fam == "embedding":
            return embedding.encode_pairs(self.tokenizer, examples, self.max_len, problems)
        return squad_post.make_windows(
            self.tokenizer,
            examples,
            max_seq_len=self.max_len,
            doc_stride=self.cfg.doc_stride,
            max_query_len=self.cfg.max_question_length,
            training=training,
            problems=problems,
        )

    # ------------------------------------------------------------------ run the model
    @torch.no_grad()
    def infer(self, model, feats: list[dict], batch_size: int, device: torch.device, progress: bool = False) -> list[Any]:
        """Per-feature outputs: logits (K,) / (C,) / (T, K), or QA (start (T,), end (T,))."""
        from clozeformer.utils.progress import progress_bar

        model.eval()
        pad_id = self.tokenizer.pad_token_id
        lengths = [F.feature_length(f) for f in feats]
        out: list[Any] = [None] * len(feats)
        batches = batch_indices(lengths, batch_size, shuffle=False)
        for idx in progress_bar(desc="eval", leave=False, enabled=progress, iterable=batches):
            batch = F.collate([feats[i] for i in idx], pad_id)
            res = model(**{k: batch[k].to(device) for k in ("input_ids", "token_type_ids", "attention_mask")})
            if self.spec.family == "qa":
                s, e = res.start_logits.float().cpu().numpy(), res.end_logits.float().cpu().numpy()
                for b, i in enumerate(idx):
                    out[i] = (s[b, : lengths[i]], e[b, : lengths[i]])
            else:
                logits = res.logits.float().cpu().numpy()
                for b, i in enumerate(idx):
                    out[i] = logits[b, : lengths[i]] if self.spec.family == "token" else logits[b]
        return out

    def collate(self, feats: list[dict]) -> dict[str, torch.Tensor]:
        """A training batch of features, padded."""
        if self.spec.family == "embedding":
            return embedding.collate(feats, self.tokenizer.pad_token_id)
        return F.collate(feats, self.tokenizer.pad_token_id)

    def feature_length(self, f: dict) -> int:
        return embedding.feature_length(f) if self.spec.family == "embedding" else F.feature_length(f)

    def predict(self, model, split: SplitData, batch_size: int, device: torch.device, progress: bool = False) -> Decoded:
        """The model's outputs on `split`, decoded into the task's predictions."""
        if self.spec.family == "embedding":  # texts embedded once each: pairs compared, or each A searched among the Bs
            pad_id = self.tokenizer.pad_token_id
            cosines, queries = embedding.evaluate(model, split.examples, split.features, batch_size, device, pad_id)
            return Decoded(cosines, queries=queries)
        return self.decode(split.examples, split.features, self.infer(model, split.features, batch_size, device, progress))

    # ------------------------------------------------------------------ logits -> predictions
    def decode(self, examples: list, feats: list[dict], outputs: list[Any]) -> Decoded:
        fam = self.spec.family
        if fam == "qa":
            preds, nbest, null_odds = squad_post.postprocess(
                examples,
                feats,
                [o[0] for o in outputs],
                [o[1] for o in outputs],
                n_best=self.cfg.n_best,
                max_answer_len=self.cfg.max_answer_length,
                version_2=self.version_2,
                null_threshold=self.cfg.null_threshold,
            )
            return Decoded([preds[ex.qid] for ex in examples], nbest, null_odds if self.version_2 else None)
        if fam == "regression":
            return Decoded([float(o[0]) for o in outputs])
        if fam == "choice":
            return Decoded([int(np.argmax(o)) for o in outputs])
        assert self.labels is not None
        if fam == "classification":
            return Decoded([self.labels[int(np.argmax(o))] for o in outputs])
        # token: the windows of each example decoded as the `ner` pipeline does (clozeformer.data.spans);
        # words that tokenized to nothing get the outside tag
        outside = "O" if "O" in self.labels else self.labels[0]
        by_example: dict[int, list[int]] = defaultdict(list)
        for j, f in enumerate(feats):
            by_example[f["example_index"]].append(j)
        preds = []
        for i, ex in enumerate(examples):
            tags, rows = [outside] * len(ex.words), by_example[i]
            words = spans.word_predictions([feats[j]["word_ids"] for j in rows], [spans.softmax(outputs[j]) for j in rows])
            for word, k, _, _, _ in words:
                tags[word] = self.labels[k]
            preds.append(tags)
        return Decoded(preds)

    # ------------------------------------------------------------------ scores
    def score(self, examples: list, decoded: Decoded) -> dict[str, float]:
        fam = self.spec.family
        preds = decoded.predictions
        if fam == "embedding":
            return embedding.scores_of(examples, preds, decoded.queries)
        if fam == "qa":
            golds = {ex.qid: [a.text for a in ex.answers] for ex in examples}
            pred_map = {ex.qid: p for ex, p in zip(examples, preds)}
            kind = self.spec.qa_metric
            if kind == "cmrc":
                return metrics.cmrc_evaluate(golds, pred_map)
            if kind == "squad_v1" or (kind == "auto" and not self.version_2):
                return metrics.squad_v1_evaluate(golds, pred_map)
            return metrics.squad_v2_evaluate(golds, pred_map, decoded.null_odds)
        if fam == "token":
            gold = [ex.tags for ex in examples]
            if not all(t == "O" or t[:2] in ("B-", "I-", "E-", "S-") for tags in gold for t in tags):  # not IOB: no entities
                return {"accuracy": metrics.accuracy([t for p in preds for t in p], [t for g in gold for t in g])}
            return metrics.entity_scores(gold, preds)
        if fam == "choice":
            return {"accuracy": metrics.accuracy(preds, [ex.label for ex in examples])}
        gold = [ex.label for ex in examples]
        names = list(self.spec.metrics)
        if self.spec.glue is None and fam == "classification" and set(self.labels or ()) == {"0", "1"}:
            names.append("f1")
        return metrics.classification_metrics(names, preds, gold)

    def main_score(self, scores: dict[str, float]) -> float:
        key = self.spec.main_metric
        return scores.get(key, scores.get("f1", next(iter(scores.values()), 0.0)))

    # ------------------------------------------------------------------ files
    def write_predictions(self, out_dir: Path, split: str, examples: list, decoded: Decoded) -> list[Path]:
        g, preds = self.spec.glue, decoded.predictions
        if g is None and self.spec.family == "qa":
            files = {"predictions": {ex.qid: p for ex, p in zip(examples, preds)}, "nbest_predictions": decoded.nbest or {}}
            files["null_odds"] = decoded.null_odds
            written = {out_dir / f"{name}_{split}.json": obj for name, obj in files.items() if obj is not None}
            for path, obj in written.items():
                atomic_write_json(path, obj)
            return list(written)
        if g is not None:
            name, text = g.submission_file(split), glue.format_submission(g, examples, preds)
        elif self.spec.family == "token":
            name, text = f"predictions_{split}.txt", format_conll(examples, preds)
        else:
            rows = [f"{ex.guid}\t{format(p, '.6g') if isinstance(p, float) else p}" for ex, p in zip(examples, preds)]
            name, text = f"predictions_{split}.tsv", "\n".join(["index\tprediction", *rows]) + "\n"
        atomic_write_text(out_dir / name, text)
        return [out_dir / name]


def format_scores(scores: dict[str, float]) -> str:
    return "  ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in scores.items())
