"""Pretraining on this CPU: clozeformer's trainer vs the equivalent plain `transformers` loop.

    python benchmarks/pretrain.py --data /work/prepared/en-packed                   # tokens/s, MFU: mini, base
    python benchmarks/pretrain.py --data /work/prepared/en-packed --wallclock 20    # val MLM loss after 20 min each

Both sides get the same prepared data through the same `PretrainLoader` (same batches, same
masks), the same batch size, fp32, AdamW (lr, betas, eps, weight decay off for bias/LayerNorm),
gradient clipping at 1.0 and the same warmup + linear-decay schedule.

* ours: `clozeformer.train.loop.pretrain` itself (BertForMaskedLM with the sparse MLM head,
  fused AdamW, metrics/progress bookkeeping included), timed from its metrics.jsonl.
* HF: `transformers.BertForPreTraining` (dense logits over all B x T positions, its default
  attention), `torch.optim.AdamW(foreach=True)`, a plain loop.

Throughput: tokens/s over `--steps` steps after `--warmup` untimed ones; model FLOP/s use
`clozeformer.modeling.bert.mlm_flops_per_token` at the measured masked fraction for BOTH sides (the work
the objective needs; HF's dense head does more), MFU against benchmarks/matmul_ceiling.py's
fp32 ceiling measured at the start. Wall-clock mode: each side trains `mini` for the same
minutes (the lr horizon follows the clock, see Budget), then both are scored by one evaluator on
the same validation batches. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_ceiling import measure as measure_ceiling  # noqa: E402

from clozeformer.data.loader import MaskingConfig, PretrainLoader  # noqa: E402
from clozeformer.data.manifest import Manifest  # noqa: E402
from clozeformer.modeling.bert import BertForMaskedLM, mlm_flops_per_token  # noqa: E402
from clozeformer.modeling.config import BertConfig  # noqa: E402
from clozeformer.train.core import Schedule  # noqa: E402
from clozeformer.train.loop import pretrain  # noqa: E402
from clozeformer.train.metrics_file import read_metrics  # noqa: E402
from clozeformer.train.optim import Budget  # noqa: E402
from clozeformer.train.pretrain_config import PretrainConfig  # noqa: E402


def model_config(preset: str, manifest: Manifest) -> BertConfig:
    return BertConfig.preset(
        preset,
        vocab_size=manifest.vocab_size,
        pad_token_id=manifest.special_ids.pad,
        max_position_embeddings=max(512, manifest.seq_len),
    )


def masked_fraction(data: Path, batch_size: int) -> float:
    loader = PretrainLoader(data, "train", batch_size=batch_size, seed=0, masking=MaskingConfig())
    it = iter(loader)
    masked = real = 0
    for _ in range(5):
        b = next(it)
        masked += int((b["labels"] != -100).sum())
        real += int(b["attention_mask"].sum())
    return masked / real


# ----------------------------------------------------------------------------- ours


def run_ours(args, preset: str, out: Path, steps: int, batch: int, max_time: float | None = None) -> dict:
    cfg = PretrainConfig(
        data=str(args.data),
        out=str(out),
        model=preset,
        batch_size=batch,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        max_steps=steps if max_time is None else None,
        max_time=max_time,
        threads=args.threads,
        eval_batches=1,
        keep_last=1,
        progress=False,
        report_to=["none"],
        seed=args.seed,
    )
    summary = pretrain(cfg)
    recs = [r for r in read_metrics(out) if r["kind"] == "train"]
    return {"summary": summary, "records": recs}


# ----------------------------------------------------------------------------- the transformers loop


def hf_model(preset: str, manifest: Manifest):
    import transformers

    c = model_config(preset, manifest)
    hf_cfg = transformers.BertConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        max_position_embeddings=c.max_position_embeddings,
        pad_token_id=c.pad_token_id,
    )
    return transformers.BertForPreTraining(hf_cfg)


def run_hf(args, preset: str, steps: int | None, batch: int, max_time: float | None = None) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    manifest = Manifest.read(args.data)
    model = hf_model(preset, manifest).train()
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.999),
        eps=1e-6,
        foreach=True,
    )
    loader = PretrainLoader(args.data, "train", batch_size=batch, seed=args.seed, masking=MaskingConfig())
    tokens_per_step = batch * manifest.seq_len
    budget = Budget(steps, None, max_time * 60 if max_time else None, tokens_per_step)
    sched = Schedule("linear", args.warmup_steps)
    it, step, elapsed, times, losses = iter(loader), 0, 0.0, [], []
    start = time.monotonic()
    while not budget.done(step, step * tokens_per_step, elapsed):
        t0 = time.monotonic()
        b = next(it)
        for g in opt.param_groups:
            g["lr"] = args.lr * sched.factor(step, budget.horizon(step, elapsed))
        out = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"])
        # HF's BertForPreTraining computes a loss only when NSP labels are given too; this is its
        # masked_lm_loss line: cross-entropy over the dense (B*T, V) logits, -100 ignored
        logits = out.prediction_logits  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), b["labels"].view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        times.append(time.monotonic() - t0)
        step += 1
        elapsed = time.monotonic() - start
    return {
        "model": model,
        "times": times,
        "losses": losses,
        "steps": step,
        "tokens": step * tokens_per_step,
        "elapsed_s": elapsed,
    }


# ----------------------------------------------------------------------------- one evaluator for both


@torch.no_grad()
def val_mlm(forward, data: Path, batch: int, max_batches: int) -> dict:
    """Mean cross-entropy / accuracy over all masked tokens of the first val batches (fixed masks)."""
    ce, n, correct = 0.0, 0, 0
    for i, b in enumerate(
        PretrainLoader(data, "val", batch_size=batch, seed=0, masking=MaskingConfig(), shuffle=False, drop_last=False)
    ):
        if i >= max_batches:
            break
        logits = forward(b)  # (B, T, V)
        keep = b["labels"] != -100
        target, picked = b["labels"][keep], logits[keep]  # (N,), (N, V)
        ce += torch.nn.functional.cross_entropy(picked.float(), target, reduction="sum").item()
        correct += int((picked.argmax(-1) == target).sum())
        n += target.numel()
    return {"loss": ce / n, "acc": correct / n, "ppl": math.exp(ce / n), "tokens": n}


# ----------------------------------------------------------------------------- modes


def throughput(args) -> None:
    manifest = Manifest.read(args.data)
    seq = manifest.seq_len
    ceiling, _ = measure_ceiling(args.threads, (512, 1024, 2048), torch.float32, 1.0)
    print(
        f"fp32 matmul ceiling ({args.threads} threads): {ceiling:.1f} GFLOP/s; data {args.data} "
        f"(seq_len {seq}, vocab {manifest.vocab_size})\n",
        flush=True,
    )
    rows = []
    for preset in args.models:
        batch = args.batch_size or (32 if preset in ("tiny", "mini") else 8)
        frac = masked_fraction(args.data, batch)
        flops_tok = mlm_flops_per_token(model_config(preset, manifest), seq, masked_fraction=frac)
        with tempfile.TemporaryDirectory() as tmp:
            ours = run_ours(args, preset, Path(tmp) / "run", args.warmup + args.steps, batch)
        timed = ours["records"][args.warmup :]
        ours_tps = len(timed) * batch * seq / sum(batch * seq / r["tokens_per_s"] for r in timed)  # tokens / time
        hf = run_hf(args, preset, args.warmup + args.steps, batch)
        hf_tps = batch * seq * args.steps / sum(hf["times"][args.warmup :])
        for name, tps in (("clozeformer", ours_tps), ("transformers", hf_tps)):
            flops = tps * flops_tok
            rows.append((preset, name, batch, tps, flops / 1e9, 100 * flops / 1e9 / ceiling))
        print(f"  {preset}: ours {ours_tps:,.0f} tok/s, HF {hf_tps:,.0f} tok/s", file=sys.stderr, flush=True)
    print(f"| model | trainer | batch x seq | tokens/s | model GFLOP/s | MFU (of {ceiling:.0f} GFLOP/s) |")
    print("|---|---|---|---:|---:|---:|")
    for preset, name, batch, tps, gf, mfu in rows:
        print(f"| {preset} | {name} | {batch} x {seq} | {tps:,.0f} | {gf:.1f} | {mfu:.1f}% |")
    for preset in args.models:
        ours_tps, hf_tps = [r[3] for r in rows if r[0] == preset]
        print(f"\n{preset}: clozeformer / transformers = {ours_tps / hf_tps:.2f}x", end="")
    print(f"\n\nfp32, {args.threads} threads, {args.steps} timed steps after {args.warmup} warm-up steps.")


def wallclock(args) -> None:
    preset, minutes = args.models[0], args.wallclock
    batch = args.batch_size or 32
    manifest = Manifest.read(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_ours(args, preset, Path(tmp) / "run", 0, batch, max_time=minutes)
        ours_model = BertForMaskedLM.from_pretrained(ours["summary"]["checkpoint"]).eval()
    hf = run_hf(args, preset, None, batch, max_time=minutes)
    hf_model_ = hf["model"].eval()

    def fwd_ours(b):
        return ours_model(b["input_ids"], b["attention_mask"], b["token_type_ids"]).logits

    def fwd_hf(b):
        return hf_model_(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"]
        ).prediction_logits

    rows = []
    s = ours["summary"]
    rows.append(("clozeformer", s["step"], s["tokens"], s["elapsed_s"], val_mlm(fwd_ours, args.data, batch, args.eval_batches)))
    rows.append(
        ("transformers", hf["steps"], hf["tokens"], hf["elapsed_s"], val_mlm(fwd_hf, args.data, batch, args.eval_batches))
    )
    print(
        f"\n{preset}, {minutes:g} min each, batch {batch} x {manifest.seq_len}, lr {args.lr} "
        f"(warmup {args.warmup_steps} steps, linear decay to the deadline), fp32, {args.threads} threads\n"
    )
    print("| trainer | steps | tokens | tokens/s | val MLM loss | val MLM acc | val ppl |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, steps, tokens, secs, v in rows:
        print(f"| {name} | {steps:,} | {tokens:,} | {tokens / secs:,.0f} | {v['loss']:.4f} | {v['acc']:.4f} | {v['ppl']:.1f} |")
    print(
        f"\nvalidation: the first {args.eval_batches} val batches ({rows[0][4]['tokens']:,} masked tokens), same masks for both."
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="a prepared packed DATA_DIR")
    p.add_argument("--models", nargs="+", default=None, help="presets (default: mini base; wall-clock: mini)")
    p.add_argument("--batch-size", type=int, default=None, help="default 32 (tiny/mini) or 8 (larger)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (throughput mode)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (throughput mode)")
    p.add_argument("--wallclock", type=float, default=None, help="minutes per trainer: compare val MLM loss")
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup-steps", type=int, default=50, help="lr warmup (both trainers)")
    p.add_argument("--eval-batches", type=int, default=20, help="val batches scored (wall-clock mode)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.models is None:
        args.models = ["mini"] if args.wallclock else ["mini", "base"]
    (wallclock if args.wallclock else throughput)(args)


if __name__ == "__main__":
    main()
