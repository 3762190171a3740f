"""Smoke tests: every `benchmarks/*.py` runs end to end on a tiny size and prints its table, so
the scripts that produce BENCHMARKS.md keep working. They do not judge speed (that is what the
scripts measure, on a quiet machine). Scripts that read the shared data get a miniature copy of
its layout (`mini_shared`), built from the synthetic corpus and the test fixtures."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest
import torch
from synthetic import REPO, make_data_dir, run_script, write_corpus

FIXTURES = Path(__file__).parents[1] / "fixtures"

pytestmark = pytest.mark.e2e


def run_bench(name: str, *args: str, shared: Path | None = None, expect: int = 0) -> str:
    env = {} if shared is None else {"CLOZEFORMER_SHARED_DATA": str(shared)}
    return run_script(REPO / "benchmarks" / f"{name}.py", *args, env=env, expect=expect)


@pytest.fixture(scope="module")
def mini_shared(tmp_path_factory) -> Path:
    """../shared/data's layout in miniature: text/{enwiki,wikinews,gutenberg,wikitext-2},
    vocab/bert-base-uncased, tasks/glue/SST-2."""
    root = tmp_path_factory.mktemp("shared")
    corpus = root / "corpus.txt"
    write_corpus(corpus, 400)
    docs = [d for d in corpus.read_text(encoding="utf-8").split("\n\n") if d.strip()]
    text = root / "text"
    for sub in ("enwiki", "wikinews", "gutenberg", "wikitext-2"):
        (text / sub).mkdir(parents=True)
    (text / "enwiki" / "wiki_00").write_text(
        "".join(f'<doc id="{i}" url="?curid={i}" title="T{i}">\nT{i}\n\n{d}\n</doc>\n' for i, d in enumerate(docs[:100])),
        encoding="utf-8",
    )
    (text / "wikinews" / "news.jsonl").write_text(
        "".join(json.dumps({"text": d}) + "\n" for d in docs[100:200]), encoding="utf-8"
    )
    (text / "gutenberg" / "book.txt").write_text("\n\n".join(docs[200:300]) + "\n", encoding="utf-8")
    for split, part in (("valid", docs[300:350]), ("test", docs[350:])):
        (text / "wikitext-2" / f"{split}.txt").write_text("\n\n".join(part) + "\n", encoding="utf-8")
    vocab = root / "vocab" / "bert-base-uncased"
    vocab.mkdir(parents=True)
    shutil.copy(FIXTURES / "infer_vocab.txt", vocab / "vocab.txt")
    sst = root / "tasks" / "glue" / "SST-2"
    sst.mkdir(parents=True)
    rng = random.Random(0)
    words = "good bad film story the a was is it".split()
    for split, n in (("train", 64), ("dev", 32)):
        rows = [f"{' '.join(rng.choices(words, k=6))}\t{rng.randrange(2)}" for _ in range(n)]
        (sst / f"{split}.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    sts = root / "tasks" / "glue" / "STS-B"
    sts.mkdir(parents=True)
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    rows = [f"{i}\tg\tf\ty\t{i}\tnone\tnone\t{' '.join(rng.choices(words, k=5))}\t{' '.join(rng.choices(words, k=5))}\t{i % 6}.0"
            for i in range(24)]  # fmt: skip
    (sts / "dev.tsv").write_text(header + "\n".join(rows) + "\n", encoding="utf-8")
    write_squad(root / "tasks" / "squad" / "xquad" / "xquad.en.json", rng)
    corpus.unlink()
    return root


def write_squad(path: Path, rng: random.Random) -> None:
    """A SQuAD-format file of 8 articles, 2 passages each, 3 questions per passage, built from the
    inference vocabulary (each question shares a word with its passage)."""
    words = [w for w in (FIXTURES / "infer_vocab.txt").read_text(encoding="utf-8").split() if w.isalpha() and len(w) > 2]
    data = []
    for a in range(8):
        paragraphs = []
        for p in range(2):
            key = words[(a * 2 + p) % len(words)]
            context = " ".join(rng.choices(words, k=20) + [key] + rng.choices(words, k=10))
            start = context.index(key)
            qas = [
                {"id": f"{a}-{p}-{q}", "question": f"what {key} {rng.choice(words)}",
                 "answers": [{"text": key, "answer_start": start}]}
                for q in range(3)
            ]  # fmt: skip
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": f"article {a}", "paragraphs": paragraphs})
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": "1.1", "data": data}), encoding="utf-8")


def test_matmul_ceiling():
    out = run_bench("matmul_ceiling", "--sizes", "64", "--seconds", "0.02", "--threads", "1")
    assert "| fp32 |" in out and "GFLOP/s" in out


def test_train_step():
    out = run_bench("train_step", "--models", "tiny", "--max-length", "32", "--repeats", "1", "--warmup", "1", "--threads", "1")
    assert "tiny" in out and "|" in out


def test_collator_and_pretrain(mini_shared, tmp_path):
    data = make_data_dir(tmp_path)
    args = ["--batch", "4", "--max-length", "32", "--seconds", "0.05", "--data", str(data)]
    out = run_bench("collator", *args, shared=mini_shared)  # its vocab: the shared layout's bert-base-uncased
    assert "|" in out
    out = run_bench("pretrain", "--data", str(data), "--models", "tiny", "--batch-size", "4", "--steps", "2", "--warmup", "1")
    assert "tiny" in out and "|" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pretrain_memory(tmp_path):
    data = make_data_dir(tmp_path)
    out = run_bench("pretrain_memory", "--data", str(data), "--steps", "20", "--batch-size", "4", "--every", "0.2")
    assert "| glibc default |" in out and "| bounded_heap (the CLI) |" in out


def test_serve_load():
    pytest.importorskip("uvicorn")
    out = run_bench("serve_load", "--size", "tiny", "--requests", "6", "--clients", "1", "2", "--threads", "1")
    assert "|" in out


def test_shared_data_benchmarks(mini_shared, tmp_path):
    args = ["--data", str(mini_shared), "--workers", "1", "--max-length", "32", "--modes", "packed", "--single-line-mb", "0.05"]
    out = run_bench("prepare", *args)
    assert "| packed |" in out and "One line of" in out
    out = run_bench("tokenizer_train", "--vocab-size", "300", shared=mini_shared)
    assert "tokens per word" in out
    out = run_bench(
        "inference", "--size", "tiny", "--n-classify", "8", "--n-fill", "4", "--chunk", "4", "--data", str(mini_shared)
    )
    assert "classify" in out and "fill-mask" in out
    out = run_bench(
        "finetune_quality",
        "--tasks",
        "sst2",
        "--inits",
        "random",
        "--size",
        "tiny",
        "--data",
        str(mini_shared),
        "--epochs",
        "1",
        "--max-time",
        "0.2",
        "--threads",
        "1",
        "--work",
        str(tmp_path / "ft"),
    )
    assert "| sst2 | random |" in out


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory, infer_tok) -> Path:
    """A random tiny encoder as a sentence-transformers directory (mean pooling, unit length)."""
    from synthetic import save_tiny

    from clozeformer.modeling.bert import BertModel
    from clozeformer.modeling.sbert import write_modules

    directory = save_tiny(BertModel, infer_tok, tmp_path_factory.mktemp("st") / "tiny-st")
    write_modules(directory, pooling="mean", normalize=True, max_seq_length=64, dim=128)
    return directory


def test_embedding_inference_suite(mini_shared, tiny_st):
    pytest.importorskip("sentence_transformers")
    out = run_bench(
        "inference", "--suite", "embeddings", "--model", str(tiny_st), "--rounds", "1", "--n-latency", "2", "--threads", "1",
        "--data", str(mini_shared),
    )  # fmt: skip
    for arm in (
        "sentence-transformers (torch)",
        "ONNX Runtime by hand (fp32)",
        "clozeformer torch fp32",
        "clozeformer onnx int8",
    ):
        assert f"| {arm} |" in out
    spearman = [float(line.rsplit("|", 2)[1]) for line in out.splitlines() if line.startswith("| clozeformer torch fp32")]
    st = [float(line.rsplit("|", 2)[1]) for line in out.splitlines() if line.startswith("| sentence-transformers (torch)")]
    assert spearman == pytest.approx(st, abs=1e-4)  # the same model gives the same quality in both


def test_retrieval(mini_shared, tiny_st, tmp_path):
    pytest.importorskip("bm25s")
    pytest.importorskip("sentence_transformers")
    out = run_bench(
        "retrieval", "--models", str(tiny_st), "--epochs", "1", "--batch-size", "4", "--max-length", "48",
        "--candidates", "5", "--threads", "1", "--work", str(tmp_path / "work"), "--data", str(mini_shared),
    )  # fmt: skip
    for arm in ("bm25", "zero-shot", "trained", "+ rerank top 5", "st-trained"):
        assert f"| {arm} |" in out, out
    assert "training time ratio" in out
    assert (tmp_path / "work" / "bi-tiny-st" / "modules.json").is_file()


def test_gpu_pretrain_needs_a_gpu(tmp_path):
    if torch.cuda.is_available():
        args = ["--out", str(tmp_path / "gpu"), "--models", "tiny", "--steps", "3", "--skip", "1", "--batch-size", "8"]
        assert "|" in run_bench("gpu_pretrain", *args, "--no-compile")
    else:
        assert "error: no CUDA device" in run_bench("gpu_pretrain", "--out", str(tmp_path / "gpu"), expect=2)
