"""Generated text for the training tests: a tiny grammar, seeded, blank line between documents."""

from __future__ import annotations

import random
from pathlib import Path

SUBJECTS = ["the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher", "the king"]
VERBS = ["sees", "likes", "finds", "wants", "takes", "hears", "paints", "follows"]
OBJECTS = ["the red ball", "a green tree", "the big house", "an old book", "the blue sea", "a cup of tea"]
TAILS = ["in the morning", "at night", "every day", "near the river", "with great care", ""]


def write_corpus(path: Path, n_docs: int, seed: int = 0) -> None:
    """`n_docs` documents of 4-9 sentences, one sentence per line (the original BERT format)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n_docs):
            for _ in range(rng.randint(4, 9)):
                f.write(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}".strip() + " .\n")
            f.write("\n")


def make_data_dir(root: Path, n_docs: int = 300) -> Path:
    """Corpus -> a 120-token WordPiece vocab -> packed shards of 32 tokens, via the real CLI."""
    from clozeformer.cli import main as cli_main

    write_corpus(root / "corpus.txt", n_docs)
    assert (
        cli_main(
            [
                "tokenizer",
                "train",
                "--input",
                str(root / "corpus.txt"),
                "--vocab-size",
                "120",
                "--num-unused",
                "0",
                "--out",
                str(root / "tok"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert (
        cli_main(
            [
                "prepare",
                "--input",
                str(root / "corpus.txt"),
                "--tokenizer",
                str(root / "tok"),
                "--out",
                str(root / "data"),
                "--seq-len",
                "32",
                "--val-fraction",
                "0.05",
                "--no-progress",
            ]
        )
        == 0
    )
    return root / "data"
