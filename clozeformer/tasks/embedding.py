"""Sentence embeddings (bi-encoders): `clozeformer finetune --task sentence-embedding`.

Each text is encoded alone (BERT -> `model.pool` -> optionally unit length) and texts are compared
by the cosine of their vectors, as Sentence-BERT does (Reimers & Gurevych 2019). The columns of the
data choose the form and its loss (`--loss auto`):

| form         | columns        | losses (`auto`: the first)                          | dev metric            |
|--------------|----------------|-----------------------------------------------------|-----------------------|
| scored pairs | A, B, score    | cosine (MSE of cos vs score); cosent (Su 2022)      | Spearman of cos(A, B) |
| pairs        | A, B           | mnrl: in-batch negatives (each B the others' one)   | retrieval (below)     |
| triplets     | A, B, negative | mnrl, each row's negative added to the candidates; triplet | retrieval      |

For scored pairs the cosine loss is the default: on STS-B it beat CoSENT by 3-4 Spearman points, for
a random `tiny` and for all-MiniLM-L6-v2, as it did in sentence-transformers' own trainer on the
same data (docs/EXPERIMENTS.md, run 18).

A dev file is scored by its own form: scored pairs by the Spearman (and Pearson) correlation of
cos(A, B) with the score, pairs by retrieval over the dev set: each A is a query and each distinct B
a document, the relevant ones being the Bs written beside that A.

In-batch negatives: a text that appears twice in a batch (the same B for two As, or two Bs of the
same A) is masked, never counted as a negative. A batch needs two pairs (`--batch-size 1` is an
error), and an epoch's leftover single pair joins another batch.

The output directory is a sentence-transformers directory (`clozeformer.modeling.sbert`): the encoder in HF
format plus modules.json, 1_Pooling/config.json and sentence_bert_config.json, which
`SentenceTransformer(DIR)`, `clozeformer embed`, `search` and `serve` load as it is.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from clozeformer.data.padding import batch_indices, pad_right
from clozeformer.modeling.bert import BertModel, pool
from clozeformer.tasks import metrics
from clozeformer.tasks.common import Problems, Source, TextExample, iter_records
from clozeformer.tasks.custom import LABEL_NAMES, PAIR_NAMES, TEXT_NAMES, pick_column
from clozeformer.utils.errors import ClozeformerError

Form = Literal["scored", "pairs", "triplets"]
#: the losses each form of data can train with; the first is `--loss auto`'s choice (see docs/EXPERIMENTS.md)
LOSSES: dict[str, tuple[str, ...]] = {"scored": ("cosine", "cosent"), "pairs": ("mnrl",), "triplets": ("mnrl", "triplet")}
NEGATIVE_NAMES = ("negative", "hard_negative", "neg")
ANCHOR_NAMES = (*TEXT_NAMES, "anchor", "query")
POSITIVE_NAMES = (*PAIR_NAMES, "positive", "document", "passage")


# ----------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class PairColumns:
    """The user's column flags (None: find the usual names)."""

    text: str | None = None
    pair: str | None = None
    label: str | None = None
    negative: str | None = None
    id: str | None = None


def form_of(examples: list[TextExample]) -> Form:
    """The form of a file's examples (each file holds one form)."""
    if examples and examples[0].label is not None:
        return "scored"
    return "triplets" if examples and examples[0].negative is not None else "pairs"


def read_pairs(
    names: list[str], rows: Iterable[tuple[Source, dict]], where: str, problems: Problems, labeled: bool | None, cols: PairColumns
) -> list[TextExample]:
    """Pair examples from table rows ({column: value}): A, B, and a score or a negative when the
    file has one. An empty or missing text, or a missing score, is a malformed row (an error, or
    skipped and counted with --skip-bad-rows); a score that is not a number is an error."""
    a_col = pick_column(names, cols.text, ANCHOR_NAMES, "first text (A)", "--text-column", where)
    b_col = pick_column(names, cols.pair, POSITIVE_NAMES, "second text (B)", "--text-pair-column", where)
    given_label = cols.label is not None and labeled is not None  # predict reads files without scores
    label_col = pick_column(names, cols.label, LABEL_NAMES, "score", "--label-column", where, required=given_label)
    neg_col = pick_column(names, cols.negative, NEGATIVE_NAMES, "negative", "--negative-column", where, required=False)
    if cols.negative and neg_col is None:
        raise ClozeformerError(f"{where}:1: no column {cols.negative!r} for the negative (columns: {', '.join(names)})")
    if label_col is not None and neg_col is not None:
        raise ClozeformerError(f"{where}:1: both a score column ({label_col}) and a negative column ({neg_col}); give one")
    text_cols = [c for c in (a_col, b_col, neg_col) if c]
    if label_col in text_cols or len(set(text_cols)) < len(text_cols):
        raise ClozeformerError(f"{where}:1: the columns {', '.join(text_cols + [label_col or ''])} must differ")
    out: list[TextExample] = []
    for src, row in rows:
        texts = [row.get(c) for c in text_cols]
        bad = next((c for c, t in zip(text_cols, texts) if not isinstance(t, str) or not t.strip()), None)
        if bad is not None:
            problems.malformed(src, f"empty or missing text in column {bad!r}")
            continue
        score = None
        if label_col is not None and labeled is not False:
            raw = row.get(label_col)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                problems.malformed(src, f"no score in column {label_col!r}")
                continue
            try:
                score = float(raw)
            except (TypeError, ValueError):
                raise ClozeformerError(f"{src}: {label_col} {raw!r} is not a number (a score must be numeric)") from None
            if not math.isfinite(score):
                raise ClozeformerError(f"{src}: {label_col} {raw!r} is not a finite number")
        guid = str(row.get(cols.id)) if cols.id and row.get(cols.id) is not None else str(len(out))
        negative = texts[2] if neg_col else None
        out.append(TextExample(guid, texts[0], texts[1], score, src, negative=negative))
    if not out:
        raise ClozeformerError(f"{where}: no usable pairs")
    return out


def read_pair_table(path: str | Path, problems: Problems, labeled: bool | None = True, *, cols: PairColumns) -> list[TextExample]:
    """Pairs from a CSV, TSV or JSONL file with a header (keys)."""
    names, rows = iter_records(path, problems)
    return read_pairs(names, rows, str(path), problems, labeled, cols)


def check_scores(train: list[TextExample], others: Iterable[list[TextExample]]) -> tuple[float, float] | None:
    """The training scores' range; a scored dev example outside it is an error naming its line."""
    if form_of(train) != "scored":
        return None
    low, high = min(float(ex.label) for ex in train), max(float(ex.label) for ex in train)  # type: ignore[arg-type]
    if low == high:
        raise ClozeformerError(f"{train[0].source.file}: every score is {low:g}; scored pairs need different scores")
    for examples in others:
        for ex in examples:
            if ex.label is not None and not low <= float(ex.label) <= high:
                raise ClozeformerError(
                    f"{ex.source}: score {ex.label:g} is outside the range seen in training [{low:g}, {high:g}]"
                )
    return low, high


# ----------------------------------------------------------------------------- losses
# Each takes the batch's embeddings (B, H) and returns a scalar; cosine similarity throughout.


def cosent_loss(a: torch.Tensor, b: torch.Tensor, scores: torch.Tensor, scale: float = 20.0) -> torch.Tensor:
    """CoSENT: log(1 + sum over pairs (i, j) with score_i > score_j of exp(scale (cos_j - cos_i))).
    Only the order of the scores matters: any pair scored higher must have the higher cosine."""
    cos = scale * F.cosine_similarity(a.float(), b.float())  # (B,)
    higher = scores[:, None] > scores[None, :]  # (B, B): i should beat j
    diffs = (cos[None, :] - cos[:, None])[higher]  # cos_j - cos_i for each such pair
    return torch.logsumexp(torch.cat([diffs.new_zeros(1), diffs]), dim=0)


def cosine_loss(a: torch.Tensor, b: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Sentence-BERT's regression objective: mean squared error between cos(a, b) and the target in [0, 1]."""
    return F.mse_loss(F.cosine_similarity(a.float(), b.float()), targets.float())


def mnrl_loss(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    negative: torch.Tensor | None = None,
    *,
    anchor_key: torch.Tensor,
    positive_key: torch.Tensor,
    negative_key: torch.Tensor | None = None,
    scale: float = 20.0,
    symmetric: bool = False,
) -> torch.Tensor:
    """Multiple-negatives ranking (in-batch negatives, InfoNCE): anchor i must pick positive i among
    all the batch's positives (and negatives), by softmax over scale * cosine.

    The keys name each text (equal keys: equal texts). A candidate that is not row i's own positive
    but is relevant to it anyway (its text equals row i's positive, or it is a positive of another
    row with row i's anchor, or a negative whose text is row i's positive) is masked. `symmetric`
    also asks each positive to pick its anchor among the batch's anchors and averages the two."""
    B = anchor.shape[0]
    a, p = F.normalize(anchor.float(), dim=-1), F.normalize(positive.float(), dim=-1)  # (B, H)
    own = torch.eye(B, dtype=torch.bool, device=a.device)
    relevant = (positive_key[None, :] == positive_key[:, None]) | (anchor_key[None, :] == anchor_key[:, None])  # (B, B)
    candidates, masks = [p], [relevant & ~own]
    if negative is not None:
        assert negative_key is not None
        candidates.append(F.normalize(negative.float(), dim=-1))
        masks.append(negative_key[None, :] == positive_key[:, None])  # (B, B)
    logits = scale * a @ torch.cat(candidates).T  # (B, B) or (B, 2B)
    target = torch.arange(B, device=a.device)
    loss = F.cross_entropy(logits.masked_fill(torch.cat(masks, dim=1), float("-inf")), target)
    if symmetric:
        backward = (scale * p @ a.T).masked_fill(relevant & ~own, float("-inf"))  # (B, B): positive i -> anchors
        loss = (loss + F.cross_entropy(backward, target)) / 2
    return loss


def triplet_loss(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, margin: float = 0.5) -> torch.Tensor:
    """max(0, d(a, p) - d(a, n) + margin) with the cosine distance d = 1 - cos, averaged."""
    d_pos = 1 - F.cosine_similarity(anchor.float(), positive.float())
    d_neg = 1 - F.cosine_similarity(anchor.float(), negative.float())
    return F.relu(d_pos - d_neg + margin).mean()


# ----------------------------------------------------------------------------- the model


@dataclass
class Objective:
    """What a bi-encoder is trained with: the loss and its settings (scores scaled from `score_range` to [0, 1] for cosine)."""

    loss: str = "mnrl"
    scale: float = 20.0
    margin: float = 0.5
    symmetric: bool = False
    score_range: tuple[float, float] | None = None


@dataclass
class EmbeddingOutput:
    loss: torch.Tensor | None
    embeddings: dict[str, torch.Tensor] = field(default_factory=dict)  # column -> (B, H)


COLUMNS = ("anchor", "positive", "negative")


class SentenceEncoder(nn.Module):
    """A bi-encoder: texts -> BERT -> `pool` -> unit length (when `normalize`); the loss of `objective`."""

    def __init__(self, bert: BertModel, pooling: str = "mean", normalize: bool = True, max_seq_length: int = 256, objective=None):
        super().__init__()
        self.bert = bert
        self.pooling, self.normalize, self.max_seq_length = pooling, normalize, max_seq_length
        self.objective = objective or Objective()

    @property
    def config(self):
        return self.bert.config

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, H) sentence vectors."""
        v = pool(self.bert(input_ids, attention_mask).last_hidden_state, attention_mask, self.pooling)  # (B, H)
        return F.normalize(v, dim=-1) if self.normalize else v

    def forward(self, labels: torch.Tensor | None = None, **batch: torch.Tensor) -> EmbeddingOutput:
        """`batch`: `{column}_ids` / `{column}_mask` per text column, `{column}_key` text identities."""
        emb = {c: self.encode(batch[f"{c}_ids"], batch[f"{c}_mask"]) for c in COLUMNS if f"{c}_ids" in batch}
        obj, a, p, n = self.objective, emb["anchor"], emb["positive"], emb.get("negative")
        if obj.loss == "cosent":
            loss = cosent_loss(a, p, labels, obj.scale)
        elif obj.loss == "cosine":
            low, high = obj.score_range or (0.0, 1.0)
            loss = cosine_loss(a, p, (labels - low) / (high - low))
        elif obj.loss == "triplet":
            loss = triplet_loss(a, p, n, obj.margin)
        else:
            keys = {f"{c}_key": batch.get(f"{c}_key") for c in COLUMNS}
            loss = mnrl_loss(a, p, n, scale=obj.scale, symmetric=obj.symmetric, **keys)
        return EmbeddingOutput(loss, emb)

    def save_pretrained(self, directory) -> None:
        """The encoder (HF format) and the sentence-transformers files that say how it pools."""
        from clozeformer.modeling.sbert import write_modules

        self.bert.save_pretrained(directory)
        write_modules(
            directory,
            pooling=self.pooling,
            normalize=self.normalize,
            max_seq_length=self.max_seq_length,
            dim=self.config.hidden_size,
        )

    @classmethod
    def from_pretrained(cls, path, **kwargs) -> SentenceEncoder:
        """A directory's encoder with its own pooling (sentence-transformers files; else mean) and length."""
        from clozeformer.hub import model_dir
        from clozeformer.modeling.sbert import read_modules

        modules = read_modules(model_dir(path))
        bert = BertModel.from_pretrained(path, **kwargs)
        if modules is None:
            return cls(bert, max_seq_length=min(bert.config.max_position_embeddings, 512))
        length = min(modules.max_seq_length or 512, bert.config.max_position_embeddings)
        return cls(bert, modules.pooling, modules.normalize, length)


# ----------------------------------------------------------------------------- features and batches


def encode_pairs(tokenizer, examples: list[TextExample], max_len: int, problems: Problems) -> list[dict]:
    """Per example: the token ids of each text column and its key (texts are encoded once; equal
    texts share a key), and the score as `labels` when it has one."""
    from clozeformer.tasks.features import private_backend

    texts = list(dict.fromkeys(t for ex in examples for t in (ex.text_a, ex.text_b, ex.negative) if t is not None))
    key = {t: k for k, t in enumerate(texts)}
    encodings = private_backend(tokenizer, max_len).encode_batch(texts)
    feats = []
    for i, ex in enumerate(examples):
        f: dict = {"example_index": i}
        for column, text in zip(COLUMNS, (ex.text_a, ex.text_b, ex.negative)):
            if text is None:
                continue
            enc = encodings[key[text]]
            if enc.overflowing:
                problems.warn("truncated", ex.source, f"{column} text longer than max_length={max_len} tokens; truncated")
            f[column], f[f"{column}_key"] = enc.ids, key[text]
        if ex.label is not None:
            f["labels"] = float(ex.label)
        feats.append(f)
    return feats


def feature_length(f: dict) -> int:
    return max(len(f[c]) for c in COLUMNS if c in f)


def collate(feats: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Each text column padded on its own (a short query is not padded to a long passage)."""
    batch = {}
    for c in (c for c in COLUMNS if c in feats[0]):
        ids, mask = pad_right([f[c] for f in feats], pad_id)  # (B, T_c)
        batch[f"{c}_ids"], batch[f"{c}_mask"] = torch.from_numpy(ids), torch.from_numpy(mask)
        batch[f"{c}_key"] = torch.tensor([f[f"{c}_key"] for f in feats])
    if "labels" in feats[0]:
        batch["labels"] = torch.tensor([f["labels"] for f in feats], dtype=torch.float32)
    return batch


def training_batches(batches: list[list[int]], objective: Objective) -> list[list[int]]:
    """In-batch negatives need two rows: an epoch's one-row batch joins the previous batch."""
    if objective.loss != "mnrl" or len(batches) < 2:
        return batches
    out = [b for b in batches if len(b) > 1]
    for b in (b for b in batches if len(b) == 1):
        out[-1] = out[-1] + b
    return out


def resolve_objective(loss: str, form: Form, batch_size: int, n_train: int, **settings) -> Objective:
    """The loss for `form` (`auto`: its default), checked against the data and the batch size."""
    allowed = LOSSES[form]
    chosen = allowed[0] if loss == "auto" else loss
    if chosen not in allowed:
        needs = {"cosent": "scores (a --label-column)", "cosine": "scores (a --label-column)", "mnrl": "pairs without scores"}
        raise ClozeformerError(
            f"--loss {chosen} needs {needs.get(chosen, 'triplets (a --negative-column)')}; "
            f"the training data are {form} (losses: {', '.join(allowed)})"
        )
    if chosen == "mnrl" and batch_size < 2:
        raise ClozeformerError(
            "--batch-size 1 leaves in-batch negatives nothing to compare against; use >= 2 (32 or more is usual)"
        )
    if chosen == "mnrl" and n_train < 2:
        raise ClozeformerError("in-batch negatives need at least 2 training pairs")
    return Objective(chosen, **settings)


# ----------------------------------------------------------------------------- evaluation


@torch.no_grad()
def embed_texts(model: SentenceEncoder, ids: dict[int, list[int]], batch_size: int, device, pad_id: int) -> dict[int, np.ndarray]:
    """key -> unit vector (H,) for each text's token ids, in length-sorted batches."""
    model.eval()
    keys = list(ids)
    out: dict[int, np.ndarray] = {}
    for idx in batch_indices([len(ids[k]) for k in keys], batch_size, shuffle=False):
        tok, mask = (torch.from_numpy(x).to(device) for x in pad_right([ids[keys[i]] for i in idx], pad_id))  # (B, T)
        vecs = F.normalize(model.encode(tok, mask).float(), dim=-1).cpu().numpy()  # (B, H)
        out.update(zip((keys[i] for i in idx), vecs))
    return out


def evaluate(model: SentenceEncoder, examples: list[TextExample], feats: list[dict], batch_size: int, device, pad_id: int):
    """(cosine per pair, queries or None). A scored file's pairs are compared; a pairs file is
    searched: each distinct A is a query against every distinct B of the file, and `queries` holds,
    per A, its top 10 Bs and the Bs written beside it (text keys)."""
    ids = {f[f"{c}_key"]: f[c] for f in feats for c in ("anchor", "positive")}
    vec = embed_texts(model, ids, batch_size, device, pad_id)
    cosines = [float(vec[f["anchor_key"]] @ vec[f["positive_key"]]) for f in feats]
    if form_of(examples) == "scored":
        return cosines, None
    relevant: dict[int, set[int]] = defaultdict(set)
    for f in feats:
        relevant[f["anchor_key"]].add(f["positive_key"])
    docs = list(dict.fromkeys(f["positive_key"] for f in feats))
    scores = np.stack([vec[q] for q in relevant]) @ np.stack([vec[d] for d in docs]).T  # (Q, D)
    top = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    return cosines, [([docs[j] for j in row], rel) for row, rel in zip(top, relevant.values())]


def scores_of(examples: list[TextExample], cosines: list[float], queries) -> dict[str, float]:
    """Spearman/Pearson of the cosines for scored pairs; nDCG@10, MRR@10, recall@1/10 for retrieval."""
    if queries is None:
        gold = [float(ex.label) for ex in examples]  # type: ignore[arg-type]
        return {"spearman": metrics.spearman(cosines, gold), "pearson": metrics.pearson(cosines, gold)}
    return metrics.retrieval_metrics([ranked for ranked, _ in queries], [rel for _, rel in queries])


def metric_names(examples: list[TextExample]) -> tuple[str, ...]:
    return ("spearman", "pearson") if form_of(examples) == "scored" else ("ndcg@10", "mrr@10", "recall@1", "recall@10")


def describe(form: Form, objective: Objective, examples: list[TextExample]) -> Iterator[str]:
    what = {"scored": "scored pairs (A, B, score)", "pairs": "pairs (A, B)", "triplets": "triplets (A, B, negative)"}[form]
    detail = {
        "cosent": f"CoSENT, scale {objective.scale:g}",
        "cosine": "cosine similarity vs the score scaled to [0, 1]",
        "mnrl": f"in-batch negatives, scale {objective.scale:g}{', symmetric' if objective.symmetric else ''}",
        "triplet": f"triplet, cosine distance, margin {objective.margin:g}",
    }[objective.loss]
    yield f"sentence-embedding: {len(examples)} {what}; loss {objective.loss} ({detail})"
    if objective.score_range is not None:
        yield f"scores in [{objective.score_range[0]:g}, {objective.score_range[1]:g}]"
