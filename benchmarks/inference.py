"""Inference throughput: clozeformer pipelines vs `transformers.pipeline` on the same weights.

    python benchmarks/inference.py                      # mini model, 10k SST-2 + 1k fill-mask
    python benchmarks/inference.py --size base --n-classify 2000 --n-fill 500

A random-init BERT of the chosen size with the bert-base-uncased vocab (30,522) is saved once
as an HF-format directory; transformers loads that same directory (AutoModelFor... +
BertTokenizerFast.from_pretrained), so both sides run identical weights and token ids.
Workloads: sequence classification of the first N sentences of SST-2 train, and fill-mask
on N SST-2 sentences with one word replaced by [MASK] (top 5). Both sides use batch_size 32
and the same torch thread count; each is warmed up first, then both run over the inputs in
alternating chunks (see `interleaved`), and the table gives wall-clock throughput and the
ratio of CPU seconds (less sensitive to other jobs on a shared machine). It also reports how often
the two agree (same label / same top-1 token), which must be 100% (same weights).

Why ours is faster: length-sorted batches with dynamic padding (transformers pads each batch
of arrival-order inputs to its longest), the MLM head evaluated only at [MASK] rows (N x V
instead of B x T x V), and no per-item Python pipeline machinery.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DATA = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def read_sst2(path: Path, n: int) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    col = header.index("sentence")
    return [line.split("\t")[col] for line in lines[1:] if line.strip()][:n]


def mask_one_word(sentences: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for s in sentences:
        words = s.split()
        if not words:
            continue
        words[rng.randrange(len(words))] = "[MASK]"
        out.append(" ".join(words))
    return out


def build_models(root: Path, size: str, vocab_dir: Path) -> tuple[Path, Path]:
    import torch

    from clozeformer.config import BertConfig
    from clozeformer.model import BertForMaskedLM, BertForSequenceClassification
    from clozeformer.tokenizer import Tokenizer

    tok = Tokenizer.from_pretrained(vocab_dir)
    torch.manual_seed(0)
    cls_dir, mlm_dir = root / "cls", root / "mlm"
    BertForSequenceClassification(
        BertConfig.preset(size, vocab_size=tok.vocab_size, id2label={0: "negative", 1: "positive"})
    ).save_pretrained(cls_dir)
    BertForMaskedLM(BertConfig.preset(size, vocab_size=tok.vocab_size)).save_pretrained(mlm_dir)
    for d in (cls_dir, mlm_dir):
        tok.save(d)
    return cls_dir, mlm_dir


def interleaved(ours, theirs, inputs: list, chunk: int) -> tuple[list, list, float, float, float, float]:
    """Run both over `inputs` in chunks, alternating who goes first; sum wall and CPU seconds.

    The benchmark machine is shared: alternating chunks spreads load from other jobs over both
    sides evenly, instead of charging whichever side happened to run during a busy minute.
    """
    got, want = [], []
    wall = {"ours": 0.0, "theirs": 0.0}
    cpu = {"ours": 0.0, "theirs": 0.0}
    for k, start in enumerate(range(0, len(inputs), chunk)):
        part = inputs[start : start + chunk]
        order = (("ours", ours, got), ("theirs", theirs, want))
        for name, fn, sink in order if k % 2 == 0 else order[::-1]:
            t0, c0 = time.perf_counter(), time.process_time()
            sink.extend(fn(part))
            wall[name] += time.perf_counter() - t0
            cpu[name] += time.process_time() - c0
    return got, want, wall["ours"], wall["theirs"], cpu["ours"], cpu["theirs"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="mini", choices=["tiny", "mini", "small", "medium", "base"])
    ap.add_argument("--n-classify", type=int, default=10_000)
    ap.add_argument("--n-fill", type=int, default=1_000)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for both sides (1: on a shared machine, 2+ threads mostly measure waiting)",
    )
    ap.add_argument("--chunk", type=int, default=500, help="inputs per alternating timed chunk")
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, BertTokenizerFast

    from clozeformer.infer.pipelines import pipeline

    sst2 = args.data / "tasks" / "glue" / "SST-2" / "train.tsv"
    vocab = args.data / "vocab" / "bert-base-uncased"
    if not sst2.is_file() or not vocab.is_dir():
        print(f"needs {sst2} and {vocab} (set CLOZEFORMER_SHARED_DATA)", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    sentences = read_sst2(sst2, max(args.n_classify, args.n_fill))
    classify_inputs = sentences[: args.n_classify]
    fill_inputs = mask_one_word(sentences[: args.n_fill], seed=0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cls_dir, mlm_dir = build_models(Path(tmp), args.size, vocab)
        for task, directory, inputs in (("classify", cls_dir, classify_inputs), ("fill-mask", mlm_dir, fill_inputs)):
            ours = pipeline(task, directory, batch_size=args.batch_size, **({"top_k": 5} if task == "fill-mask" else {}))
            hf_tok = BertTokenizerFast.from_pretrained(str(directory))
            # transformers 5 ignores a bare vocab_file (a 5-token vocab): check it read the whole vocab.txt
            n_vocab = sum(1 for _ in open(vocab / "vocab.txt", encoding="utf-8"))
            assert hf_tok.vocab_size == n_vocab, (hf_tok.vocab_size, n_vocab)
            if task == "classify":
                hf_model = AutoModelForSequenceClassification.from_pretrained(str(directory)).eval()
                theirs = transformers.pipeline(
                    "text-classification", model=hf_model, tokenizer=hf_tok, device=-1, batch_size=args.batch_size
                )
            else:
                hf_model = AutoModelForMaskedLM.from_pretrained(str(directory)).eval()
                theirs = transformers.pipeline(
                    "fill-mask", model=hf_model, tokenizer=hf_tok, device=-1, batch_size=args.batch_size, top_k=5
                )
            ours(inputs[:64])  # warm-up: allocator, thread pool, first-call costs
            theirs(inputs[:64])
            got, want, t_ours, t_theirs, c_ours, c_theirs = interleaved(ours, theirs, inputs, args.chunk)
            if task == "classify":
                agree = sum(g["label"] == w["label"] for g, w in zip(got, want))
            else:
                agree = sum(g["masks"][0]["candidates"][0]["token_id"] == w[0]["token"] for g, w in zip(got, want))
            rows.append((task, len(inputs), t_ours, t_theirs, c_ours, c_theirs, agree / len(inputs)))
            print(f"{task}: ours {t_ours:.1f}s, transformers {t_theirs:.1f}s", file=sys.stderr, flush=True)

    print(
        f"\nModel: random-init BERT-{args.size} (bert-base-uncased vocab), batch size {args.batch_size}, "
        f"{args.threads} torch threads, fp32 CPU; torch {torch.__version__}, transformers {transformers.__version__}\n"
    )
    print(
        "| task | inputs | clozeformer (s) | clozeformer (seq/s) | transformers.pipeline (s) | "
        "transformers (seq/s) | speed-up (wall) | speed-up (CPU s) | agreement |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for task, n, a, b, ca, cb, agree in rows:
        print(f"| {task} | {n} | {a:.1f} | {n / a:.0f} | {b:.1f} | {n / b:.0f} | {b / a:.2f}x | {cb / ca:.2f}x | {agree:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
