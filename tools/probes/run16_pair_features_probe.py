"""Run 16's probe: GLUE pair tasks with the two segments pooled apart. Not part of the package.

    python tools/probes/run16_pair_features_probe.py GLUE_DIR TASK MODE MODEL_DIR SEED [--epochs 10]

TASK is stsb, mrpc, rte or qnli (GLUE_DIR/STS-B, ... as `clozeformer finetune` reads them).
The pair is encoded as `finetune` encodes it (`[CLS] A [SEP] B [SEP]`, token types 0 / 1,
128 tokens at most); MODE chooses what the head sees:

    mean   the mean of all token states (`finetune --pooling mean`: the experiments' protocol)
    pair   full attention, then u = mean over segment A, v = mean over segment B, and the head
           reads [u, v, |u - v|, u * v] (Sentence-BERT's classification features)
    sep    as pair, but attention is block-diagonal by segment: A attends only to A and B only
           to B, so u and v are each sentence encoded alone (a bi-encoder in one pass)

The head is dropout -> dense -> tanh -> dropout -> linear (1 output and MSE for STS-B, 2 and
cross-entropy otherwise), trained with the experiments' recipe: lr 5e-4, batch 32, 10% warmup
then linear decay, weight decay 0.01, clipping 1.0, 10,000 / 2,000 train / dev examples at most,
through the package's training core. It prints the task's main metric (Spearman, F1 or
accuracy) after each epoch and the best one. With --mixing it trains nothing and prints, over
the dev pairs, the mean cosine between A's mean state with full attention and with A alone.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from clozeformer.data.padding import pad_right
from clozeformer.infer.embed import pool
from clozeformer.modeling.bert import BertModel
from clozeformer.modeling.hf_format import load_pretrained
from clozeformer.modeling.tokenizer import Tokenizer
from clozeformer.tasks.common import Problems
from clozeformer.tasks.glue import GLUE_TASKS, read_glue
from clozeformer.tasks.metrics import accuracy, f1_binary, spearman
from clozeformer.train.core import Schedule, adamw, guarded_step, param_groups, seed_everything


def read(glue: str, task: str, split: str, limit: int) -> tuple[list[str], list[str], np.ndarray]:
    """(sentences A, sentences B, labels: scores for STS-B, class indices otherwise)."""
    t = GLUE_TASKS[task]
    examples = read_glue(t, f"{glue}/{t.title}/{split}.tsv", split, Problems())[:limit]
    y = [float(e.label) if t.labels is None else t.labels.index(e.label) for e in examples]
    return [e.text_a for e in examples], [e.text_b for e in examples], np.array(y)


class PairHead(nn.Module):
    def __init__(self, encoder: BertModel, mode: str, num_outputs: int):
        super().__init__()
        h = encoder.config.hidden_size
        self.encoder, self.mode = encoder, mode
        self.dropout = nn.Dropout(0.1)
        self.dense = nn.Linear(h if mode == "mean" else 4 * h, h)
        self.out = nn.Linear(h, num_outputs)

    def states(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        x = self.encoder.embeddings(ids, types)  # (B, T) -> (B, T, H)
        keys = mask.bool()[:, None, :]  # (B, 1, T)
        if self.mode == "sep":
            keys = keys & (types[:, :, None] == types[:, None, :])  # (B, T, T): same segment only
        return self.encoder.encoder(x, keys[:, None])  # (B, T, H)

    def segment_means(self, ids, mask, types) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.states(ids, mask, types)  # (B, T, H)
        return pool(x, mask * (types == 0), "mean"), pool(x, mask * (types == 1), "mean")  # (B, H) x 2

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        if self.mode == "mean":
            f = pool(self.states(ids, mask, types), mask, "mean")  # (B, H)
        else:
            u, v = self.segment_means(ids, mask, types)
            f = torch.cat([u, v, (u - v).abs(), u * v], -1)  # (B, 4H)
        return self.out(self.dropout(torch.tanh(self.dense(self.dropout(f)))))  # (B, K)


@torch.no_grad()
def mixing(encoder: BertModel, tok: Tokenizer, dev) -> float:
    """Mean cosine between sentence A's mean state with full attention and with A alone."""
    a, b, _ = dev
    full, alone = PairHead(encoder, "pair", 1).eval(), PairHead(encoder, "sep", 1).eval()
    cos = []
    for i in range(0, len(a), 128):
        batch = encode(tok, a, b, list(range(i, min(i + 128, len(a)))))
        cos.append(F.cosine_similarity(full.segment_means(*batch)[0], alone.segment_means(*batch)[0]))
    return float(torch.cat(cos).mean())


def encode(tok: Tokenizer, a: list[str], b: list[str], idx: list[int]) -> tuple[torch.Tensor, ...]:
    encs = tok.encode_batch([a[j] for j in idx], [b[j] for j in idx], max_length=128)
    ids, mask = pad_right([e.input_ids for e in encs], tok.pad_token_id)  # (B, T) each
    types, _ = pad_right([e.token_type_ids for e in encs], 0)  # (B, T)
    return torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types)


@torch.no_grad()
def score(head: PairHead, tok: Tokenizer, dev, task: str) -> float:
    head.eval()
    a, b, y = dev
    out = torch.cat([head(*encode(tok, a, b, list(range(i, min(i + 128, len(a)))))) for i in range(0, len(a), 128)])
    if task == "stsb":
        return spearman(out[:, 0].numpy(), y)
    pred = out.argmax(-1).numpy()
    return f1_binary(pred, y) if task == "mrpc" else accuracy(pred, y)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("glue")
    p.add_argument("task", choices=("stsb", "mrpc", "rte", "qnli"))
    p.add_argument("mode", choices=("mean", "pair", "sep"))
    p.add_argument("model")
    p.add_argument("seed", type=int)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--mixing", action="store_true", help="only print how much attention mixes B into A's mean state")
    args = p.parse_args()
    torch.set_num_threads(1)
    seed_everything(args.seed)
    tok = Tokenizer.from_pretrained(args.model)
    train, dev = read(args.glue, args.task, "train", 10_000), read(args.glue, args.task, "dev", 2_000)
    encoder = load_pretrained(BertModel, args.model)
    if args.mixing:
        print(f"{args.task} {args.model}: cos(u with full attention, u with A alone) {mixing(encoder.eval(), tok, dev):.4f}")
        return
    head = PairHead(encoder, args.mode, 1 if args.task == "stsb" else 2)
    opt = adamw(param_groups(head, 0.01), lr=5e-4)
    a, b, y = train
    total = (len(a) + 31) // 32 * args.epochs
    schedule = Schedule("linear", warmup_steps=int(0.1 * total))
    step, curve = 0, []
    for _ in range(args.epochs):
        head.train()
        order = torch.randperm(len(a)).tolist()
        for i in range(0, len(a), 32):
            idx = order[i : i + 32]
            out = head(*encode(tok, a, b, idx))  # (B, K)
            if args.task == "stsb":
                loss = F.mse_loss(out[:, 0], torch.tensor(y[idx], dtype=out.dtype))
            else:
                loss = F.cross_entropy(out, torch.tensor(y[idx], dtype=torch.long))
            loss.backward()
            guarded_step(opt, None, list(head.parameters()), 1.0, loss.item(), 5e-4 * schedule.factor(step, total))
            step += 1
        curve.append(score(head, tok, dev, args.task))
    each = ", ".join(f"{s:.3f}" for s in curve)
    print(f"{args.task} {args.mode} {args.model} seed {args.seed}: best {max(curve):.3f} (per epoch: {each})", flush=True)


if __name__ == "__main__":
    main()
