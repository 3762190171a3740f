"""An embedding index on disk, exact cosine search over it, and the `search` verb.

    INDEX/embeddings.npy   (N, H) float32, unit rows: cosine similarity = dot product
    INDEX/texts.jsonl      line i: {"id": ..., "text": ...} for row i
    INDEX/index.json       model directory, pooling, max_length, N, H, and the config that built it

The directory is written whole and atomically (`io.atomic_dir`): a reader sees the old index or
the new one, never a mix. Search is exact (one matrix-vector product per query, then
`argpartition` for the top k); the matrix is memory-mapped, so N x H may exceed RAM's comfort.
Exact search stays fast up to a few million rows on a CPU; beyond that use an ANN library.

    clozeformer embed --model DIR --build-index INDEX --input corpus.txt
    clozeformer search --index INDEX "a query" --top-k 5
    clozeformer search --index INDEX "a query" --rerank CROSS_ENCODER --candidates 50

`--rerank` re-scores the bi-encoder's best `--candidates` hits with a cross-encoder (a pair
classifier or regressor from `finetune --task pair-classification|regression`, or any such
BERT directory; `ClassifyPipeline.relevance`) and keeps the top k of the new order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clozeformer import __version__
from clozeformer.infer import options
from clozeformer.utils.errors import ClozeformerError

FORMAT = "clozeformer-embedding-index"
FORMAT_VERSION = 1


class EmbeddingIndex:
    def __init__(self, embeddings: np.ndarray, texts: list[str], ids: list[Any], meta: dict) -> None:
        if embeddings.ndim != 2 or embeddings.shape[0] != len(texts) or len(texts) != len(ids):
            raise ValueError(f"embeddings {embeddings.shape} do not match {len(texts)} texts / {len(ids)} ids")
        self.embeddings = embeddings  # (N, H)
        self.texts = texts
        self.ids = ids
        self.meta = meta

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def build(cls, pipe, texts: Sequence[str], ids: Sequence[Any] | None = None, progress: bool = False) -> EmbeddingIndex:
        """Embed `texts` with an EmbedPipeline (normalised vectors) and hold them with their ids."""
        if not pipe.normalize:
            raise ClozeformerError("an index needs L2-normalised embeddings (normalize=True)")
        texts = list(texts)
        if not texts:
            raise ClozeformerError("cannot build an index of no texts")
        ids = list(range(len(texts))) if ids is None else list(ids)
        matrix = pipe.embed(texts, progress=progress)
        meta = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "clozeformer": __version__,
            "model": pipe.runner.source,
            "architecture": pipe.runner.architecture,
            "pooling": pipe.pooling,
            "max_length": pipe.max_length,
            "count": len(texts),
            "dim": int(matrix.shape[1]),
        }
        return cls(matrix, texts, ids, meta)

    def save(self, directory: str | Path, config: dict | None = None) -> Path:
        from clozeformer.utils.io import atomic_dir

        directory = Path(directory)
        meta = dict(self.meta, count=len(self), dim=int(self.embeddings.shape[1]))
        if config is not None:
            meta["config"] = config
        with atomic_dir(directory, owner="embed --build-index") as tmp:
            np.save(tmp / "embeddings.npy", np.ascontiguousarray(self.embeddings, dtype=np.float32))
            with open(tmp / "texts.jsonl", "w", encoding="utf-8") as f:
                for i, t in zip(self.ids, self.texts):
                    f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
            (tmp / "index.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> EmbeddingIndex:
        directory = Path(directory)
        if not directory.is_dir():
            raise ClozeformerError(
                f"{directory}: no such index directory (build one with "
                f"`clozeformer embed --build-index {directory} --input FILE`)"
            )
        for name in ("index.json", "embeddings.npy", "texts.jsonl"):
            if not (directory / name).is_file():
                raise ClozeformerError(f"{directory}: missing {name}; not a clozeformer index")
        try:
            meta = json.loads((directory / "index.json").read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ClozeformerError(f"{directory / 'index.json'}: invalid JSON ({e})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ClozeformerError(f"{directory / 'index.json'}: not a {FORMAT} file")
        if meta.get("version") != FORMAT_VERSION:
            raise ClozeformerError(
                f"{directory / 'index.json'}: index version {meta.get('version')} "
                f"(this clozeformer reads {FORMAT_VERSION}); rebuild the index"
            )
        try:
            matrix = np.load(directory / "embeddings.npy", mmap_mode="r", allow_pickle=False)
        except ValueError as e:
            raise ClozeformerError(f"{directory / 'embeddings.npy'}: unreadable ({e})") from None
        texts, ids = [], []
        for n, line in options.read_numbered_lines(str(directory / "texts.jsonl")):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                ids.append(obj["id"])
                texts.append(obj["text"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ClozeformerError(f'{directory / "texts.jsonl"}:{n}: expected {{"id": ..., "text": ...}}') from None
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or matrix.dtype != np.float32:
            raise ClozeformerError(
                f"{directory}: embeddings.npy is {matrix.dtype} {matrix.shape} but "
                f"texts.jsonl has {len(texts)} rows; rebuild the index"
            )
        return cls(matrix, texts, ids, meta)

    def search(self, queries: np.ndarray, top_k: int = 5) -> list[list[tuple[int, float]]]:
        """(Q, H) unit query vectors -> per query, [(row, cosine)] best first."""
        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        if queries.shape[1] != self.embeddings.shape[1]:
            raise ClozeformerError(
                f"query vectors have {queries.shape[1]} dims, the index {self.embeddings.shape[1]}; "
                "embed queries with the model that built the index"
            )
        k = min(top_k, len(self))
        scores = np.asarray(self.embeddings @ queries.T)  # (N, Q)
        out = []
        for q in range(scores.shape[1]):
            col = scores[:, q]
            top = np.argpartition(-col, k - 1)[:k] if k < len(col) else np.arange(len(col))
            top = top[np.argsort(-col[top], kind="stable")]
            out.append([(int(i), float(col[i])) for i in top])
        return out

    def query(self, pipe, texts: Sequence[str], top_k: int = 5, reranker=None, candidates: int = 50) -> list[list[dict]]:
        """Embed `texts` with `pipe` and return their hits: {"rank", "score", "id", "text"}. With a
        `reranker` (a classify pipeline), its relevance of the best `candidates` hits orders them
        and is the score (the bi-encoder's cosine stays as "retrieval_score")."""
        if pipe.pooling != self.meta.get("pooling", pipe.pooling):
            raise ClozeformerError(
                f"the index was built with {self.meta['pooling']} pooling; the query pipeline uses {pipe.pooling}"
            )
        hits = self.search(pipe.embed(list(texts)), max(top_k, candidates) if reranker else top_k)
        out = []
        for query, row in zip(texts, hits):  # row: [(index row, cosine)], best first
            if reranker is not None:  # [(position in row, relevance)], most relevant first
                rescored = reranker.rerank(query, [self.texts[i] for i, _ in row])[:top_k]
                ranked = [(row[j][0], score, {"retrieval_score": row[j][1]}) for j, score in rescored]
            else:
                ranked = [(i, score, {}) for i, score in row]
            out.append(
                [
                    {"rank": r + 1, "score": s, **extra, "id": self.ids[i], "text": self.texts[i]}
                    for r, (i, s, extra) in enumerate(ranked)
                ]
            )
        return out


# ----------------------------------------------------------------------------- `search` verb


@dataclass
class SearchConfig(options.PipelineConfig):
    index: str = field(
        default="", metadata={"help": "index directory (from `clozeformer embed --build-index`)", "required": True}
    )
    top_k: int = field(default=5, metadata={"help": "hits per query"})
    rerank: str | None = field(
        default=None, metadata={"help": "cross-encoder directory (a pair classifier/regressor) that re-scores the hits"}
    )
    candidates: int = field(default=50, metadata={"help": "with --rerank: the bi-encoder's best N hits are re-scored"})

    def __post_init__(self) -> None:
        if not self.index:
            raise ClozeformerError("--index DIR is required")
        if not self.model:  # default: the model that built the index
            meta_file = Path(self.index) / "index.json"
            try:
                self.model = json.loads(meta_file.read_text(encoding="utf-8")).get("model", "")
            except (OSError, json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                raise ClozeformerError(f"{meta_file}: unreadable; is {self.index} an index directory?") from None
        if self.top_k < 1:
            raise ClozeformerError(f"--top-k must be >= 1, got {self.top_k}")
        if self.candidates < 1:
            raise ClozeformerError(f"--candidates must be >= 1, got {self.candidates}")
        super().__post_init__()


CONFIG, POSITIONAL = SearchConfig, ("inputs",)


def main(cfg: SearchConfig) -> int:
    from clozeformer.infer.pipelines import pipeline

    options.show_config(cfg)
    index = EmbeddingIndex.load(cfg.index)
    records = options.read_records(cfg)
    pipe = pipeline("embed", cfg.model, **cfg.pipeline_kwargs(), pooling=index.meta["pooling"], normalize=True)
    reranker = None
    if cfg.rerank:
        reranker = pipeline("classify", cfg.rerank, **(cfg.pipeline_kwargs() | {"max_length": None, "onnx": None}))
    hits = options.run_predictions(records, lambda texts: index.query(pipe, texts, cfg.top_k, reranker, cfg.candidates))
    lines = []
    for r, row in zip(records, hits):
        if cfg.json:
            lines.append(json.dumps({**r.echo, "hits": row}, ensure_ascii=False))
        else:
            lines.append(f"query: {r.value}")
            lines += [f"  {h['rank']:>3}. {h['score']:.4f}  {h['text']}" for h in row]
    options.write_lines(cfg, lines)
    return 0
