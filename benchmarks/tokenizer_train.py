"""Training a 30,522-token WordPiece vocab on the whole English corpus: time, memory, quality.

    python benchmarks/tokenizer_train.py [--vocab-size 30522] [--out DIR]

Runs the same code as `clozeformer tokenizer train` (corpus readers -> tokenizers'
WordPieceTrainer) on ../shared/data/text (enwiki + wikinews + gutenberg + wikitext-2), uncased.
Reports wall time (reading + training), peak RSS of the process, and, as a sanity check of the
result, tokens per word on held-out text (SST-2 dev sentences, XQuAD contexts) next to Google's
bert-base-uncased vocab. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def heldout(root: Path) -> list[str]:
    lines = []
    sst = root / "tasks" / "glue" / "SST-2" / "dev.tsv"
    if sst.is_file():
        lines += [ln.split("\t")[0] for ln in sst.read_text(encoding="utf-8").splitlines()[1:] if "\t" in ln]
    xquad = root / "tasks" / "squad" / "xquad" / "xquad.en.json"
    if xquad.is_file():
        data = json.loads(xquad.read_text(encoding="utf-8"))["data"]
        lines += [p["context"] for art in data for p in art["paragraphs"]]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab-size", type=int, default=30522)
    ap.add_argument("--out", type=Path, default=None, help="keep the trained tokenizer here")
    args = ap.parse_args()
    from clozeformer.commands.tokenizer import TokenizerTrainConfig, train_tokenizer
    from clozeformer.modeling.tokenizer import Tokenizer

    text = SHARED / "text"
    if not text.is_dir():
        raise SystemExit(f"{text}: not found (set CLOZEFORMER_SHARED_DATA)")
    inputs = [
        str(text / "enwiki"),
        str(text / "wikinews"),
        str(text / "gutenberg"),
        str(text / "wikitext-2" / "valid.txt"),
        str(text / "wikitext-2" / "test.txt"),
    ]
    cfg = TokenizerTrainConfig(input=inputs, out=str(args.out or "unused"), vocab_size=args.vocab_size, progress=False)
    t0 = time.perf_counter()
    tok, summary = train_tokenizer(cfg)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.out is not None:
        tok.save(args.out)
    with tempfile.TemporaryDirectory() as d:
        tok.save(d)  # what `tokenizer train` writes; reload as a user would
        ours = Tokenizer.from_pretrained(d)
    google = Tokenizer.from_pretrained(SHARED / "vocab" / "bert-base-uncased")
    texts = heldout(SHARED)
    words = sum(len(t.split()) for t in texts)

    def per_word(t: Tokenizer) -> tuple[float, float]:
        encs = t.encode_batch(texts, add_special_tokens=False)
        n = sum(len(e) for e in encs)
        unk = sum(e.input_ids.count(t.unk_token_id) for e in encs)
        return n / max(words, 1), unk / max(n, 1)

    ours_fert, ours_unk = per_word(ours)
    g_fert, g_unk = per_word(google)
    print(summary["reader_summary"], file=sys.stderr)
    print(f"\nWordPiece training, uncased, {summary['input_bytes'] / 1e6:.0f} MB of English text, {os.cpu_count()} CPUs\n")
    print("| vocab size | wall s (read + train) | MB/s | peak RSS MB |")
    print("|---|---|---|---|")
    print(f"| {tok.vocab_size:,} | {wall:.1f} | {summary['input_bytes'] / 1e6 / wall:.2f} | {rss:.0f} |")
    print(f"\nHeld-out text ({len(texts):,} SST-2 dev sentences + XQuAD contexts, {words:,} words):\n")
    print("| vocab | tokens per word | [UNK] rate |")
    print("|---|---|---|")
    print(f"| trained here ({tok.vocab_size:,}) | {ours_fert:.3f} | {ours_unk:.4%} |")
    print(f"| Google bert-base-uncased ({google.vocab_size:,}) | {g_fert:.3f} | {g_unk:.4%} |")


if __name__ == "__main__":
    main()
