"""Masking collator throughput: clozeformer vs transformers.DataCollatorForLanguageModeling.

    python benchmarks/collator.py [--batch 32] [--max-length 128] [--seconds 2] [--data /work/prepared/en-packed]

Both sides get the same batches of real token ids (the first lines of English Wikipedia from
../shared/data, tokenized with bert-base-uncased, cut/padded to ~max-length; random ids when
the data folder is absent). Rows:

* transformers list-of-dicts: `DataCollatorForLanguageModeling(tok)(examples)` on
  `[{"input_ids": [...]}, ...]` (its usual path: tokenizer.pad + torch.bernoulli masking)
* clozeformer list-of-dicts: `ClozeCollator(table)(examples)` on the same input
* clozeformer padded array: `mask_tokens` on an already padded (B, T) array, as PretrainLoader
  does after gathering from the memory-mapped shards
* with --data: `PretrainLoader` end to end (gather from shards + pad + mask + tensors)

Whole-word variants use `whole_word_mask=True` on the transformers side (its examples carry
`offset_mapping`, which it needs; ours finds words from the `##` prefix). One thread each
(torch.set_num_threads(1)); the best of 3 timed runs of >= `--seconds` each. Prints a
Markdown table of sequences/s.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from pathlib import Path

import numpy as np

SHARED = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def examples(n: int, seq_len: int, tok) -> list[dict]:
    """{"input_ids", "offset_mapping"} rows (transformers' whole-word masking needs the offsets)."""
    wiki = sorted((SHARED / "text" / "enwiki").glob("wiki_*.gz"))
    rows: list[dict] = []
    if wiki:
        lines = []
        with gzip.open(wiki[0], "rt", encoding="utf-8") as f:
            for line in f:
                if len(line) > 200 and not line.startswith("<"):
                    lines.append(line.strip())
                if len(lines) >= n:
                    break
        for enc in tok.encode_batch(lines, max_length=seq_len):
            rows.append({"input_ids": enc.input_ids, "offset_mapping": enc.offsets})
    rng = np.random.default_rng(0)
    while len(rows) < n:  # no data folder: random ordinary ids
        body = rng.integers(
            min(1000, tok.vocab_size // 2), tok.vocab_size, size=int(rng.integers(seq_len // 2, seq_len - 1))
        ).tolist()
        ids = [tok.cls_token_id, *body, tok.sep_token_id]
        rows.append({"input_ids": ids, "offset_mapping": [(0, 0)] + [(i, i + 1) for i in range(len(body))] + [(0, 0)]})
    return rows


def rate(fn, batches, seconds: float) -> float:
    best = 0.0
    for _ in range(3):
        done, t0 = 0, time.perf_counter()
        while True:
            for b in batches:
                fn(b)
                done += len(b) if not isinstance(b, np.ndarray) else b.shape[0]
            dt = time.perf_counter() - t0
            if dt >= seconds:
                break
        best = max(best, done / dt)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--data", type=Path, default=None, help="a prepared DATA_DIR for the PretrainLoader row")
    args = ap.parse_args()

    import torch
    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

    from clozeformer.data.masking import ClozeCollator, MaskingConfig, TokenTable, mask_tokens, sample_keys
    from clozeformer.data.padding import pad_right
    from clozeformer.modeling.tokenizer import Tokenizer

    torch.set_num_threads(1)
    vocab = SHARED / "vocab" / "bert-base-uncased"
    tok = Tokenizer.from_pretrained(vocab)
    hf_tok = BertTokenizerFast.from_pretrained(str(vocab))
    rows = examples(args.batch * 16, args.max_length, tok)
    plain = [[{"input_ids": r["input_ids"]} for r in rows[i : i + args.batch]] for i in range(0, len(rows), args.batch)]
    # transformers cannot pad ragged offset_mapping lists: its whole-word rows come pre-padded to max-length.
    full = [
        {
            "input_ids": r["input_ids"] + [0] * (args.max_length - len(r["input_ids"])),
            "offset_mapping": r["offset_mapping"] + [(0, 0)] * (args.max_length - len(r["input_ids"])),
        }
        for r in rows
    ]
    with_offsets = [full[i : i + args.batch] for i in range(0, len(full), args.batch)]
    table = TokenTable.from_tokenizer(tok)
    results = []
    for ww in (False, True):
        hf = DataCollatorForLanguageModeling(hf_tok, mlm_probability=0.15, whole_word_mask=ww, seed=0)
        ours = ClozeCollator(table, MaskingConfig(whole_word=ww), seed=0)
        batches = with_offsets if ww else plain
        padded = [pad_right([e["input_ids"] for e in b], 0) for b in batches]
        arrays = [p[0] for p in padded]
        attn = {id(p[0]): p[1] for p in padded}
        cfg = MaskingConfig(whole_word=ww)

        def array_path(ids, cfg=cfg, attn=attn):
            m, lab = mask_tokens(ids, sample_keys(0, 0, np.arange(ids.shape[0])), table, cfg, attn[id(ids)])
            return torch.from_numpy(m), torch.from_numpy(lab)

        name = " (whole word)" if ww else ""
        r_hf = rate(hf, batches, args.seconds)
        r_ours = rate(ours, batches, args.seconds)
        r_arr = rate(array_path, arrays, args.seconds)
        results += [
            (f"transformers DataCollatorForLanguageModeling{name}, list of dicts", r_hf, 1.0),
            (f"clozeformer ClozeCollator{name}, list of dicts", r_ours, r_ours / r_hf),
            (f"clozeformer mask_tokens{name}, padded (B, T) array", r_arr, r_arr / r_hf),
        ]
    if args.data is not None:
        from clozeformer.data.loader import PretrainLoader

        loader = PretrainLoader(args.data, batch_size=args.batch, seed=0)
        it = iter(loader)
        next(it)
        best = 0.0
        for _ in range(3):
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < args.seconds:
                n += next(it)["input_ids"].shape[0]
            best = max(best, n / (time.perf_counter() - t0))
        base = results[0][1]
        results.append(
            (f"clozeformer PretrainLoader end to end ({args.data.name}: memmap gather + pad + mask)", best, best / base)
        )
    print(f"\nMasking collators, batch {args.batch}, max-length <= {args.max_length}, 1 thread, best of 3\n")
    print("| collator | sequences/s | vs transformers |")
    print("|---|---|---|")
    for name, r, x in results:
        print(f"| {name} | {r:,.0f} | {x:.1f}x |")


if __name__ == "__main__":
    main()
