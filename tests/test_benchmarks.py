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

FIXTURES = Path(__file__).parent / "fixtures"

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
    corpus.unlink()
    return root


def test_matmul_ceiling():
    out = run_bench("matmul_ceiling", "--sizes", "64", "--seconds", "0.02", "--threads", "1")
    assert "| fp32 |" in out and "GFLOP/s" in out


def test_train_step():
    out = run_bench("train_step", "--models", "tiny", "--seq-len", "32", "--repeats", "1", "--warmup", "1", "--threads", "1")
    assert "tiny" in out and "|" in out


def test_collator_and_pretrain(mini_shared, tmp_path):
    data = make_data_dir(tmp_path)
    args = ["--batch", "4", "--seq-len", "32", "--seconds", "0.05", "--data", str(data)]
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
    args = ["--data", str(mini_shared), "--workers", "1", "--seq-len", "32", "--modes", "packed", "--single-line-mb", "0.05"]
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


def test_gpu_pretrain_needs_a_gpu(tmp_path):
    if torch.cuda.is_available():
        args = ["--out", str(tmp_path / "gpu"), "--models", "tiny", "--steps", "3", "--skip", "1", "--batch-size", "8"]
        assert "|" in run_bench("gpu_pretrain", *args, "--no-compile")
    else:
        assert "error: no CUDA device" in run_bench("gpu_pretrain", "--out", str(tmp_path / "gpu"), expect=2)
