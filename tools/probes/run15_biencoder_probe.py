"""Run 15's probe: STS-B with a bi-encoder (each sentence encoded alone, mean-pooled, cosine),
against the cross-encoder that `clozeformer finetune` trains. Not part of the package.

    python tools/probes/run15_biencoder_probe.py STSB_DIR MODEL_DIR [MODEL_DIR ...] [--epochs 10] [--seeds 3]

It prints the dev Spearman of a word-overlap baseline (Jaccard of the lowercased word sets), then
for each model directory the zero-shot dev Spearman (no training) and, per seed, the
best dev Spearman over epochs of fine-tuning with Sentence-BERT's cosine-similarity loss
(MSE between cos(u, v) and score / 5): lr 5e-4, batch 32, 10% warmup then linear decay,
weight decay 0.01, clipping 1.0 (the recipe the experiments fine-tune `tiny` with), using the
package's training core (clozeformer.train.core) for the optimizer, schedule and update.
"""

from __future__ import annotations

import argparse
import re
import statistics

import numpy as np
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from clozeformer.data.padding import pad_right
from clozeformer.infer.embed import pool
from clozeformer.modeling.bert import BertModel
from clozeformer.modeling.hf_format import load_pretrained
from clozeformer.modeling.tokenizer import Tokenizer
from clozeformer.tasks.common import Problems
from clozeformer.tasks.glue import GLUE_TASKS, read_glue
from clozeformer.train.core import Schedule, adamw, guarded_step, param_groups, seed_everything


def read(path: str) -> tuple[list[str], list[str], np.ndarray]:
    """An STS-B file through the package's GLUE reader: (sentences 1, sentences 2, scores)."""
    examples = read_glue(GLUE_TASKS["stsb"], path, "train", Problems())
    return [e.text_a for e in examples], [e.text_b for e in examples], np.array([float(e.label) for e in examples])


def embed(model: BertModel, tok: Tokenizer, texts: list[str]) -> torch.Tensor:
    """(N,) texts -> (N, H) mean-pooled states, one padded batch."""
    encs = tok.encode_batch(texts, max_length=128)
    ids, mask = (torch.from_numpy(a) for a in pad_right([e.input_ids for e in encs], tok.pad_token_id))  # (N, T) each
    return pool(model(ids, attention_mask=mask).last_hidden_state, mask, "mean")


@torch.no_grad()
def dev_spearman(model: BertModel, tok: Tokenizer, dev) -> float:
    model.eval()
    a, b, gold = dev
    cos = torch.cat(
        [F.cosine_similarity(embed(model, tok, a[i : i + 128]), embed(model, tok, b[i : i + 128])) for i in range(0, len(a), 128)]
    )
    return float(spearmanr(cos.numpy(), gold)[0])


def finetune(model_dir: str, train, dev, seed: int, epochs: int) -> float:
    seed_everything(seed)
    tok = Tokenizer.from_pretrained(model_dir)
    model = load_pretrained(BertModel, model_dir)
    opt = adamw(param_groups(model, 0.01), lr=5e-4)
    a, b, score = train
    steps_per_epoch = (len(a) + 31) // 32
    total = steps_per_epoch * epochs
    schedule = Schedule("linear", warmup_steps=int(0.1 * total))
    best, step = -1.0, 0
    for _ in range(epochs):
        model.train()
        order = torch.randperm(len(a)).tolist()
        for i in range(0, len(a), 32):
            idx = order[i : i + 32]
            cos = F.cosine_similarity(embed(model, tok, [a[j] for j in idx]), embed(model, tok, [b[j] for j in idx]))
            loss = F.mse_loss(cos, torch.tensor(score[idx] / 5.0, dtype=cos.dtype))
            loss.backward()
            guarded_step(opt, None, list(model.parameters()), 1.0, loss.item(), 5e-4 * schedule.factor(step, total))
            step += 1
        best = max(best, dev_spearman(model, tok, dev))
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("stsb")
    p.add_argument("models", nargs="+")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    train, dev = read(f"{args.stsb}/train.tsv"), read(f"{args.stsb}/dev.tsv")
    words = [[set(re.findall(r"\w+", t.lower())) for t in side] for side in dev[:2]]
    jaccard = [len(x & y) / max(1, len(x | y)) for x, y in zip(*words)]
    print(f"word-overlap (Jaccard) baseline, no model: dev Spearman {spearmanr(jaccard, dev[2])[0]:.3f}", flush=True)
    for d in args.models:
        zero = dev_spearman(load_pretrained(BertModel, d), Tokenizer.from_pretrained(d), dev)
        runs = [finetune(d, train, dev, s, args.epochs) for s in range(args.seeds)]
        spread = statistics.stdev(runs) if len(runs) > 1 else 0.0
        each = ", ".join(f"{r:.3f}" for r in runs)
        print(f"{d}: zero-shot {zero:.3f}; fine-tuned {statistics.mean(runs):.3f} +- {spread:.3f} ({each})", flush=True)


if __name__ == "__main__":
    main()
