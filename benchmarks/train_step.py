"""One pretraining step (forward + backward + AdamW), clozeformer vs transformers.BertForPreTraining.

Same config, same batch (seq 128, 15% of tokens masked, NSP labels), fp32, same thread count,
eager (no torch.compile on either side). The two step functions alternate inside one process;
the figure is the median over the repeats. Identical math is proven by tests/test_hf_parity.py.

clozeformer's step: sparse MLM head (logits only at masked positions) + fused AdamW.
transformers' step: BertForPreTraining (its default SDPA attention, dense B x T x V logits) +
torch.optim.AdamW with its default (foreach) implementation.

    python benchmarks/train_step.py                 # tiny (b32), mini (b32), base (b8)
    python benchmarks/train_step.py --models tiny --repeats 9
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

SETTINGS = {"tiny": 32, "mini": 32, "small": 16, "medium": 16, "base": 8, "large": 4}
TARGETS = {"tiny": 3.0, "mini": 2.0, "base": 1.15}


def make_batch(B: int, T: int, V: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, V, (B, T), generator=g)
    ids[:, 0], ids[:, T // 2], ids[:, -1] = 101, 102, 102
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, T // 2 + 1 :] = 1
    masked = torch.rand(B, T, generator=g) < 0.15
    masked[:, [0, T // 2, T - 1]] = False
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    ids = torch.where(masked, torch.full_like(ids, 103), ids)
    return dict(
        input_ids=ids,
        token_type_ids=types,
        attention_mask=torch.ones(B, T, dtype=torch.long),
        labels=labels,
        next_sentence_label=torch.randint(0, 2, (B,), generator=g),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["tiny", "mini", "base"])
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import transformers

    from clozeformer.modeling.bert import BertForPreTraining
    from clozeformer.modeling.config import BertConfig

    torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, threads {args.threads}, "
        f"seq {args.max_length}, fp32, median of {args.repeats}"
    )
    rows = []
    for name in args.models:
        B = SETTINGS[name]
        cfg = BertConfig.preset(name, vocab_size=30522)
        torch.manual_seed(0)
        ours = BertForPreTraining(cfg).train()
        hf = transformers.BertForPreTraining(
            transformers.BertConfig(**{k: v for k, v in cfg.to_dict().items() if k not in ("model_type",)})
        ).train()
        opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4, fused=True)
        opt_hf = torch.optim.AdamW(hf.parameters(), lr=1e-4)
        batch = make_batch(B, args.max_length, cfg.vocab_size)

        def step(model, opt, batch=batch):
            t0 = time.perf_counter()
            loss = model(**batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return time.perf_counter() - t0

        times = {"ours": [], "hf": []}
        for i in range(args.warmup + args.repeats):
            a = step(ours, opt_ours)
            b = step(hf, opt_hf)
            if i >= args.warmup:
                times["ours"].append(a)
                times["hf"].append(b)
        tok = B * args.max_length
        t_ours, t_hf = statistics.median(times["ours"]), statistics.median(times["hf"])
        rows.append((name, B, tok / t_ours, tok / t_hf, t_hf / t_ours))
        print(f"  {name}: ours {tok / t_ours:,.0f} tok/s, transformers {tok / t_hf:,.0f} tok/s", flush=True)

    print()
    print("| model | batch | clozeformer tok/s | transformers tok/s | ratio | target |")
    print("|---|---|---|---|---|---|")
    for name, B, a, b, r in rows:
        target = f">= {TARGETS[name]}x" if name in TARGETS else "-"
        print(f"| {name} | {B} | {a:,.0f} | {b:,.0f} | {r:.2f}x | {target} |")


if __name__ == "__main__":
    main()
