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
                f.write(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                        f"{rng.choice(TAILS)}".strip() + " .\n")
            f.write("\n")
