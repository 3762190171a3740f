"""`clozeformer tokenizer train`: learn a WordPiece vocab from corpora.

    clozeformer tokenizer train --input corpus/ --vocab-size 30522 [--cased] --out tok/

Reads text with the corpus readers (gzip, directories, globs, JSONL, WikiExtractor, ...),
trains with `tokenizers`' WordPieceTrainer behind BERT's normalizer and pre-tokenizer, and
writes `vocab.txt` + `tokenizer_config.json`, which both `Tokenizer.from_pretrained` and
`transformers.BertTokenizerFast.from_pretrained` load.

Training twice on the same text can give two vocabularies that differ in the order of the `##`
pieces and, on count ties, in a few merges: `tokenizers` numbers the `##` pieces in hash-map order
(huggingface/tokenizers#1794, open in 0.23). Keep the vocab you trained: `prepare` copies it
into the data, and `pretrain --init-from` refuses data prepared with another vocabulary.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from clozeformer.commands.flags import add_config_args
from clozeformer.data.readers import FORMATS, CorpusReader, check_corpus_args
from clozeformer.modeling.tokenizer import Tokenizer
from clozeformer.utils.configs import flag_help, save_config
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import check_output_dir, mark_owned

BATCH_TEXTS = 1000


@dataclass
class TokenizerTrainConfig:
    input: list[str] = field(default_factory=list, metadata=flag_help("text files, directories or globs (gz ok)", required=True))
    out: str = field(
        default="", metadata=flag_help("directory for vocab.txt + tokenizer_config.json (new or empty)", required=True)
    )
    overwrite: bool = field(default=False, metadata={"help": "replace a tokenizer directory that clozeformer wrote before"})
    vocab_size: int = field(default=30522, metadata={"help": "vocab size, special and [unused] tokens included"})
    cased: bool = field(default=False, metadata={"help": "keep case and accents (default: lowercase + strip accents)"})
    format: str = field(default="auto", metadata={"help": "input format", "choices": list(FORMATS)})
    min_frequency: int = field(default=2, metadata={"help": "ignore pieces seen fewer times"})
    limit_alphabet: int = field(default=1000, metadata={"help": "keep this many most frequent characters"})
    num_unused: int = field(default=99, metadata={"help": "[unusedN] slots after [PAD] (99: Google's ids)"})
    min_doc_chars: int = field(default=0, metadata={"help": "drop documents shorter than this"})
    dedupe: bool = field(default=True, metadata={"help": "drop exact duplicate documents"})
    progress: bool = field(default=True, metadata={"help": "show progress bars"})

    def __post_init__(self) -> None:
        self.input = check_corpus_args(self.input, self.out, self.format)
        if self.num_unused < 0:
            raise ClozeformerError(f"--num-unused {self.num_unused}: must be >= 0")
        if self.vocab_size < self.num_unused + 5 + 2:
            raise ClozeformerError(f"--vocab-size {self.vocab_size}: too small for {self.num_unused} unused + 5 special tokens")


def train_tokenizer(cfg: TokenizerTrainConfig) -> tuple[Tokenizer, dict]:
    """Train on the corpus; returns the tokenizer and a summary dict (nothing written)."""
    reader = CorpusReader(cfg.input, cfg.format, min_doc_chars=cfg.min_doc_chars, dedupe=cfg.dedupe)
    bar = reader.progress_bar("reading", cfg.progress)

    finished = False

    def batches() -> Iterator[list[str]]:
        nonlocal finished
        batch: list[str] = []
        for doc in reader:
            batch.extend(doc.units)
            if len(batch) >= BATCH_TEXTS:
                yield batch
                batch = []
                bar.update(reader.disk_bytes_done() - bar.n)
        if batch:
            yield batch
        bar.update(reader.disk_bytes_done() - bar.n)
        bar.close()
        finished = True

    t0 = time.perf_counter()
    try:
        tok = Tokenizer.train(
            batches(),
            cfg.vocab_size,
            do_lower_case=not cfg.cased,
            min_frequency=cfg.min_frequency,
            limit_alphabet=cfg.limit_alphabet,
            num_unused=cfg.num_unused,
            show_progress=cfg.progress,
        )
    except ClozeformerError:
        if finished:
            reader.require_documents()  # "nothing left after filtering" is the clearer error
        raise
    summary = {
        "seconds": round(time.perf_counter() - t0, 2),
        "vocab_size": tok.vocab_size,
        "input_bytes": reader.stats.bytes,
        "reader": asdict(reader.stats),
        "reader_summary": reader.stats.summary(),
    }
    return tok, summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the metavar names the actions, so a bare `clozeformer tokenizer` says which there are
    sub = parser.add_subparsers(dest="action", metavar="{train}", title="actions", required=True)
    train = sub.add_parser("train", help="learn a WordPiece vocab from corpora (--input CORPUS --out DIR)")
    add_config_args(train, TokenizerTrainConfig)


CONFIG, SHOW_CONFIG = TokenizerTrainConfig, True


def main(cfg: TokenizerTrainConfig) -> int:
    check_output_dir(cfg.out, cfg.overwrite)  # before the (long) training
    tok, summary = train_tokenizer(cfg)
    out = tok.save(cfg.out)
    save_config(cfg, Path(out) / "tokenizer_train_config.json")
    mark_owned(out, "tokenizer train")
    print(summary["reader_summary"], file=sys.stderr)
    if tok.vocab_size < cfg.vocab_size:
        print(f"note: the corpus supported only {tok.vocab_size:,} of the {cfg.vocab_size:,} requested tokens", file=sys.stderr)
    sp = tok.special_ids
    print(
        f"wrote {out / 'vocab.txt'} ({tok.vocab_size:,} tokens, {'cased' if cfg.cased else 'uncased'}; "
        f"[PAD]={sp['pad']} [UNK]={sp['unk']} [CLS]={sp['cls']} [SEP]={sp['sep']} [MASK]={sp['mask']}) "
        f"in {summary['seconds']:.1f} s"
    )
    return 0
