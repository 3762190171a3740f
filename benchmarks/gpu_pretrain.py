"""The pretraining recipe on one GPU: tokens/s and MFU of BERT-base (or any preset) in bf16.

    python benchmarks/gpu_pretrain.py --out /tmp/gpu-bench                       # base, rotary + absolute
    python benchmarks/gpu_pretrain.py --out /tmp/gpu-bench --models mini base --batch-size 256 --steps 200

Self-contained, so that it runs on a lent machine that has only this repository: it trains a
30,522-token WordPiece on the bundled corpus (clozeformer/assets/corpus), writes packed shards of
`--max-length` tokens, then runs `clozeformer.train.loop.pretrain` itself (bf16 autocast, fused AdamW,
sparse MLM head, `--compile` unless `--no-compile`) for `--steps` steps per (model, positions).
Throughput is the median tokens/s over the steps after the first `--skip` (compilation and
warm-up); model FLOP/s use `clozeformer.modeling.bert.mlm_flops_per_token` at 15% masking, MFU against
`--peak-tflops` (H100/H200 SXM dense bf16: 989). Prints a Markdown table and writes it to
OUT/gpu_pretrain.md. On a machine without CUDA it says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", nargs="+", default=["base"])
    ap.add_argument("--positions", nargs="+", default=["rotary", "absolute"], choices=["rotary", "absolute"])
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--skip", type=int, default=30, help="steps left out of the throughput (compile, warm-up)")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: no CUDA device: this benchmark measures the GPU recipe (run it where a GPU is)", file=sys.stderr)
        return 2

    from clozeformer.commands.quickstart import asset
    from clozeformer.commands.tokenizer import TokenizerTrainConfig, train_tokenizer
    from clozeformer.data.prepare import PrepareConfig, prepare
    from clozeformer.modeling.bert import mlm_flops_per_token
    from clozeformer.modeling.config import BertConfig
    from clozeformer.train.loop import pretrain
    from clozeformer.train.metrics_file import read_metrics
    from clozeformer.train.pretrain_config import PretrainConfig

    args.out.mkdir(parents=True, exist_ok=True)
    corpus = [str(asset("corpus", n)) for n in ("en_wikipedia.txt.gz", "en_books.txt.gz", "zh_xiyouji.txt.gz")]
    t0 = time.perf_counter()
    tok, _ = train_tokenizer(
        TokenizerTrainConfig(input=corpus, out=str(args.out / "tok"), vocab_size=30522, num_unused=0, progress=False)
    )
    tok.save(args.out / "tok")
    data = args.out / "data"
    manifest = prepare(
        PrepareConfig(
            input=corpus,
            tokenizer=str(args.out / "tok"),
            out=str(data),
            max_length=args.max_length,
            val_fraction=0.01,
            progress=False,
        )
    )
    print(f"data: {manifest.num_train} sequences of {args.max_length} ({time.perf_counter() - t0:.0f}s)")

    rows = []
    for preset in args.models:
        for positions in args.positions:
            run = args.out / f"{preset}-{positions}"
            summary = pretrain(
                PretrainConfig(
                    data=str(data),
                    out=str(run),
                    model=preset,
                    position_embedding_type=positions,  # type: ignore[arg-type]
                    batch_size=args.batch_size,
                    max_steps=args.steps,
                    dtype="bf16",
                    compile=args.compile,
                    lr=1e-4,
                    warmup_steps=10,
                    eval_batches=4,
                    keep_last=1,
                    progress=False,
                    report_to=["none"],
                    resume=False,
                )
            )
            recs = [r for r in read_metrics(run) if r["kind"] == "train"][args.skip :]
            tok_s = statistics.median(r["tokens_per_s"] for r in recs)
            cfg = BertConfig.preset(preset, vocab_size=manifest.vocab_size, position_embedding_type=positions)
            flops = tok_s * mlm_flops_per_token(cfg, args.max_length, masked_fraction=0.15)
            rows.append(
                {
                    "model": preset,
                    "positions": positions,
                    "batch": args.batch_size,
                    "tokens_per_s": tok_s,
                    "tflops": flops / 1e12,
                    "mfu": flops / (args.peak_tflops * 1e12),
                    "final_loss": recs[-1]["loss"] if recs else None,
                    "steps": summary.get("step"),
                    "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
                }
            )
            torch.cuda.reset_peak_memory_stats()
            print(json.dumps(rows[-1]), flush=True)
    gpu = torch.cuda.get_device_name()
    lines = [
        f"GPU: {gpu}; bf16 autocast, fused AdamW, sparse MLM head, compile={args.compile}, seq {args.max_length}",
        "",
        "| model | positions | batch | tokens/s | model TFLOP/s | MFU | peak GPU memory |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['positions']} | {r['batch']} | {r['tokens_per_s']:,.0f} | "
            f"{r['tflops']:.0f} | {r['mfu']:.1%} | {r['peak_mem_gib']:.1f} GiB |"
        )
    text = "\n".join(lines) + "\n"
    (args.out / "gpu_pretrain.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
