"""`clozeformer prepare` on the whole English corpus: throughput and peak memory, packed and NSP.

    python benchmarks/prepare.py [--out-root DIR] [--workers 2] [--modes packed nsp]

Runs `python -m clozeformer prepare` once per mode on ../shared/data/text (enwiki + wikinews +
gutenberg + wikitext-2; the gzip'd files are read as they are) with the bert-base-uncased vocab,
max-length 128, val-fraction 0.005. Peak RSS is measured two ways: the kernel's high-water marks
(getrusage, reported by prepare for itself and its largest worker) and by sampling the whole
process tree every 0.1 s here (the sum over processes, i.e. what the machine had to hold).
MB/s counts uncompressed input bytes. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from clozeformer.data.manifest import Manifest

SHARED = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def english_inputs(text: Path) -> list[str]:
    return [
        str(text / "enwiki"),
        str(text / "wikinews"),
        str(text / "gutenberg"),
        str(text / "wikitext-2" / "valid.txt"),
        str(text / "wikitext-2" / "test.txt"),
    ]


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_peak_rss(proc: subprocess.Popen, stop: threading.Event, result: dict) -> None:
    """Sample the summed RSS of `proc` and its descendants until `stop` is set."""
    peak = 0
    while not stop.is_set():
        pids, todo = [], [proc.pid]
        while todo:
            p = todo.pop()
            pids.append(p)
            todo += _children(p)
        peak = max(peak, sum(_rss_kib(p) for p in pids))
        time.sleep(0.1)
    result["tree_peak_mb"] = peak / 1024


def run_mode(mode: str, inputs: list[str], vocab: Path, out: Path, workers: int, seq_len: int) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "clozeformer",
        "prepare",
        "--input",
        *inputs,
        "--tokenizer",
        str(vocab),
        "--out",
        str(out),
        "--max-length",
        str(seq_len),
        "--mode",
        mode,
        "--workers",
        str(workers),
        "--val-fraction",
        "0.005",
        "--no-progress",
    ]
    stop, sampled = threading.Event(), {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = threading.Thread(target=tree_peak_rss, args=(proc, stop, sampled), daemon=True)
    sampler.start()
    log, _ = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"prepare failed ({proc.returncode}):\n{log}")
    summary = json.loads((out / "prepare_summary.json").read_text())
    manifest = Manifest.read(out)
    return {"mode": mode, "wall_s": wall, "summary": summary, "manifest": manifest, **sampled, "log": log}


def single_line_file(sources: list[Path], out: Path, mb: float) -> Path:
    """Up to `mb` MB of the text of `sources` (plain or .gz files, in order) with every newline
    turned into a space: one line, no repeated text (dedupe would drop repeats)."""
    want = int(mb * 1e6)
    written = 0
    with open(out, "w", encoding="utf-8") as f:
        for src in sources:
            opener = gzip.open if src.suffix == ".gz" else open
            with opener(src, "rt", encoding="utf-8", errors="replace") as g:
                text = " ".join(g.read().split())
            piece = text.encode("utf-8")[: want - written].decode("utf-8", errors="ignore")
            f.write(piece + " ")
            written += len(piece.encode("utf-8")) + 1
            if written >= want:
                break
        f.write("\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=SHARED)
    ap.add_argument("--out-root", type=Path, default=None, help="keep the shards in OUT_ROOT/en-{mode}")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--modes", nargs="+", default=["packed", "nsp"], choices=["packed", "nsp"])
    ap.add_argument(
        "--single-line-mb",
        type=float,
        default=0,
        help="also time packed mode on one file of this many MB on a single line (the corpus' text joined)",
    )
    args = ap.parse_args()
    text = args.data / "text"
    if not text.is_dir():
        raise SystemExit(f"{text}: not found (set CLOZEFORMER_SHARED_DATA)")
    vocab = args.data / "vocab" / "bert-base-uncased"
    inputs = english_inputs(text)
    tmp = None
    root = args.out_root
    if root is None:
        tmp = tempfile.TemporaryDirectory(prefix="prepare-bench-")
        root = Path(tmp.name)
    rows = []
    for mode in args.modes:
        r = run_mode(mode, inputs, vocab, root / f"en-{mode}", args.workers, args.max_length)
        rows.append(r)
        print(r["log"].strip().splitlines()[-3], file=sys.stderr)
    print(
        f"\n`clozeformer prepare`, English corpus ({rows[0]['summary']['input_bytes'] / 1e6:.0f} MB uncompressed "
        f"text), bert-base-uncased vocab, max-length {args.max_length}, {args.workers} workers, {os.cpu_count()} CPUs\n"
    )
    print(
        "| mode | wall s | MB/s | tokens/s | corpus tokens | train seqs | val seqs | mean len | "
        "peak RSS main MB | peak RSS largest worker MB | peak RSS process tree MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s, m = r["summary"], r["manifest"]
        print(
            f"| {r['mode']} | {r['wall_s']:.1f} | {s['input_bytes'] / 1e6 / r['wall_s']:.2f} | "
            f"{m.corpus_tokens / r['wall_s']:,.0f} | {m.corpus_tokens:,} | {m.num_train:,} | "
            f"{m.num_val:,} | {m.splits['train'].mean_length} | {s['peak_rss_main_mb']:.0f} | "
            f"{s['peak_rss_worker_mb']:.0f} | {r['tree_peak_mb']:.0f} |"
        )
    if args.single_line_mb:
        books = sorted(p for p in (text / "gutenberg").rglob("*") if p.is_file())
        line = single_line_file(books, root / "one-line.txt", args.single_line_mb)
        r = run_mode("packed", [str(line)], vocab, root / "en-one-line", args.workers, args.max_length)
        s, m = r["summary"], r["manifest"]
        print(
            f"\nOne line of {s['input_bytes'] / 1e6:.0f} MB (`--format lines`'s worst case; cut into documents of "
            f"--max-doc-chars): {r['wall_s']:.1f} s, {s['input_bytes'] / 1e6 / r['wall_s']:.2f} MB/s, "
            f"{m.num_train:,} train sequences, peak RSS of the process tree {r['tree_peak_mb']:.0f} MB"
        )
    reader = rows[0]["summary"]["reader_summary"]
    print(f"\nreader: {reader}")
    if any(r["mode"] == "nsp" for r in rows):
        m = next(r["manifest"] for r in rows if r["mode"] == "nsp")
        print(f"nsp: random-next fraction {m.splits['train'].random_next_fraction:.4f}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
