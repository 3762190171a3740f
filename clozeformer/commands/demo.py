"""`clozeformer demo`: the interop round trip in one command.

Builds a small BERT, saves it in HF format, reloads it in clozeformer and (when installed) in
`transformers`, and prints both outputs side by side with their max difference.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from clozeformer.utils.io import check_output_dir, mark_owned


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="tiny", help="preset: tiny|mini|small|medium|base|large")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--out", default=None, help="where to save the model, new or empty (default: a temp dir)")
    parser.add_argument("--overwrite", action="store_true", help="replace a demo directory that clozeformer wrote before")
    parser.add_argument("--seed", type=int, default=0)


def main(args: argparse.Namespace) -> int:
    import torch

    from clozeformer.modeling.bert import BertForPreTraining
    from clozeformer.modeling.config import BertConfig

    if args.out:
        check_output_dir(args.out, args.overwrite)
    torch.manual_seed(args.seed)
    cfg = BertConfig.preset(args.model, vocab_size=args.vocab_size)
    model = BertForPreTraining(cfg).eval()
    print(f"built BertForPreTraining ({args.model}): {model.num_parameters() / 1e6:.2f}M parameters")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="clozeformer-demo-"))
    model.save_pretrained(out)
    mark_owned(out, "demo")
    print(f"saved {out}/config.json and {out}/model.safetensors")

    ids = torch.tensor([[2, 1996, 4937, 2938, 2006, 1996, 4, 1012, 3]]) % cfg.vocab_size
    reloaded = BertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        ours = reloaded(ids).prediction_logits[0, :, :5]
    print("clozeformer logits [token 0..8, vocab 0..4]:", ours, sep="\n")
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: skipped the cross-check (pip install transformers)")
        return 0
    hf = transformers.BertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        theirs = hf(input_ids=ids).prediction_logits[0, :, :5]
    print("transformers logits:", theirs, sep="\n")
    diff = (ours - theirs).abs().max().item()
    print(f"max |clozeformer - transformers| = {diff:.2e}  ({'OK' if diff <= 1e-5 else 'MISMATCH'})")
    return 0 if diff <= 1e-5 else 1
