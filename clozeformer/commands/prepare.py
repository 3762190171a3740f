"""`clozeformer prepare`: corpora -> pretraining shards (see clozeformer.data.prepare).

    clozeformer prepare --input corpus/ --tokenizer vocab/bert-base-uncased --out data/en \
        --seq-len 128 [--nsp | --packed] [--static-masking --dupe-factor 5] [--workers 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clozeformer.commands.flags import add_config_args
from clozeformer.data.prepare import PrepareConfig, prepare

CONFIG, SHOW_CONFIG = PrepareConfig, True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, PrepareConfig)
    # Shorthands for --mode, as in the original scripts' vocabulary.
    group = parser.add_mutually_exclusive_group()
    for mode, what in (("nsp", "BERT sentence pairs + next-sentence labels"), ("packed", "RoBERTa FULL-SENTENCES, the default")):
        text = f"same as --mode {mode} ({what})"
        group.add_argument(f"--{mode}", dest="mode", action="store_const", const=mode, default=argparse.SUPPRESS, help=text)


def main(cfg: PrepareConfig) -> int:
    manifest = prepare(cfg)
    print(
        f"wrote {Path(cfg.out) / 'manifest.json'}: mode={manifest.mode} seq_len={manifest.seq_len} "
        f"train={manifest.num_train:,} val={manifest.num_val:,} sequences"
    )
    return 0
