"""Memory of a long pretraining run: glibc's heap as it is vs trimmed by `procs.bounded_heap` (Linux).

    python benchmarks/pretrain_memory.py --data en8k-packed --steps 1500            # tiny, 1 thread

Runs `clozeformer.train.loop.pretrain` twice in fresh processes on the same data and seed, once
with the C library's allocator as it is and once after `bounded_heap()` (a thread that returns
freed memory every 10 s; what the CLI does). Samples each process's anonymous resident memory
(RssAnon) every `--every` seconds and prints a Markdown table: RssAnon after the first 10% of the
steps, at the end and its peak, with the run's tokens/s. Run it alone on the machine: the
tokens/s column compares the two settings.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, sys
from clozeformer.utils.procs import bounded_heap
from clozeformer.train.pretrain_config import PretrainConfig
from clozeformer.train.loop import pretrain
args = json.loads(sys.argv[1])
if args.pop("bounded"):
    assert bounded_heap(), "bounded_heap did not apply (no glibc, or MALLOC_*/LD_PRELOAD set)"
pretrain(PretrainConfig(**args))
"""


def rss_anon_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def train_rows(out: Path) -> list[dict]:
    """The training rows of the run's metrics.jsonl so far."""
    path = out / "metrics.jsonl"
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # the line being written
            continue
        if row.get("kind") == "train":
            rows.append(row)
    return rows


def run(args: argparse.Namespace, bounded: bool, out: Path) -> dict:
    cfg = dict(
        data=args.data,
        out=str(out),
        model=args.model,
        max_steps=args.steps,
        batch_size=args.batch_size,
        threads=args.threads,
        eval_every=0,
        save_every=0,
        progress=False,
        report_to=["none"],
        dtype=args.dtype,
        bounded=bounded,
    )
    proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(cfg)], stdout=subprocess.DEVNULL)
    samples: list[tuple[int, float]] = []
    while proc.poll() is None:
        mb = rss_anon_mb(proc.pid)
        if mb is not None:
            rows = train_rows(out)
            samples.append((rows[-1]["step"] if rows else 0, mb))
        time.sleep(args.every)
    if proc.returncode != 0:
        raise SystemExit(f"error: the {'bounded' if bounded else 'default'} run failed (exit {proc.returncode})")
    rows = train_rows(out)
    first = rows[len(rows) // 10]  # after the first 10% of the steps: start-up and warm-up left out
    tokens_per_s = (rows[-1]["tokens"] - first["tokens"]) / max(rows[-1]["elapsed_s"] - first["elapsed_s"], 1e-9)
    early = [mb for step, mb in samples if step <= args.steps // 10] or [samples[0][1]]
    return {"early": max(early), "end": samples[-1][1], "peak": max(mb for _, mb in samples), "tokens_per_s": tokens_per_s}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="prepared data dir (clozeformer prepare)")
    p.add_argument("--model", default="tiny")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default="fp32", choices=("auto", "fp32", "bf16"))
    p.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    args = p.parse_args(argv)
    if not sys.platform.startswith("linux"):
        raise SystemExit("error: this benchmark reads /proc (Linux only)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bounded in (False, True):
            r = run(args, bounded, Path(tmp) / ("bounded" if bounded else "default"))
            rows.append(("bounded_heap (the CLI)" if bounded else "glibc default", r))
    print(f"\n{args.model}, {args.steps} steps, batch {args.batch_size}, {args.threads} thread(s), {args.dtype}\n")
    print(f"| allocator | RssAnon MB at {args.steps // 10} steps | at the end | peak | tokens/s |")
    print("|---|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r['early']:,.0f} | {r['end']:,.0f} | {r['peak']:,.0f} | {r['tokens_per_s']:,.0f} |")


if __name__ == "__main__":
    main()
