"""`clozeformer info DIR`: what a model directory holds, and whether it loads.

Reads config.json, builds the class named in "architectures" (or BertModel), loads every
tensor through the key map, and prints the shape of the model, its heads, and any tensors
that were new or unused. Exit status 2 with one line when the directory is not loadable.
"""

from __future__ import annotations

import argparse

from clozeformer.hub import model_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="an HF-format BERT directory (config.json + model.safetensors) or a Hub model id")


def main(args: argparse.Namespace) -> int:
    from clozeformer.modeling.bert import MODEL_CLASSES, BertModel
    from clozeformer.modeling.config import BertConfig

    directory = model_dir(args.model)
    cfg = BertConfig.from_pretrained(directory) if (directory / "config.json").is_file() else None
    arch = (cfg.extra.get("architectures") or ["BertModel"])[0] if cfg else "BertModel"
    cls = MODEL_CLASSES.get(arch, BertModel)
    model = cls.from_pretrained(directory)
    c = model.config
    print(f"{directory}: {cls.__name__} ({c.hf_architecture(arch)} in config.json, model_type {c.model_type})")
    print(
        f"  layers {c.num_hidden_layers}, hidden {c.hidden_size}, heads {c.num_attention_heads}, "
        f"ffn {c.intermediate_size}, vocab {c.vocab_size}, max positions {c.max_position_embeddings} "
        f"({c.position_embedding_type}), act {c.hidden_act}"
    )
    print(f"  parameters: {model.num_parameters():,}")
    if c.id2label:
        print(f"  labels: {', '.join(c.id2label[i] for i in sorted(c.id2label))}")
    vocab = directory / "vocab.txt"
    if vocab.is_file():
        n, note = sum(1 for _ in vocab.open(encoding="utf-8", errors="replace")), ""
        if n > c.vocab_size:
            note = f"  (MISMATCH: config vocab_size is {c.vocab_size}; loading it is refused)"
        elif n < c.vocab_size:
            note = f"  (fewer than the {c.vocab_size} embedding rows: ids {n}.. are never produced)"
        print(f"  vocab.txt: {n} tokens{note}")
    else:
        print("  vocab.txt: absent")
    for kind in ("new", "unused"):
        if model.loading_info[kind]:
            print(f"  {kind}: {', '.join(model.loading_info[kind])}")
    return 0
