"""Shared test helpers: generated text for the training tests (a tiny grammar, seeded, blank line
between documents), command lines, tiny saved models, and running the repository's scripts."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SUBJECTS = ["the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher", "the king"]
VERBS = ["sees", "likes", "finds", "wants", "takes", "hears", "paints", "follows"]
OBJECTS = ["the red ball", "a green tree", "the big house", "an old book", "the blue sea", "a cup of tea"]
TAILS = ["in the morning", "at night", "every day", "near the river", "with great care", ""]


def cli_args(*words: object, **flags: object) -> list[str]:
    """A command line for `cli.main`: the words, then each flag in order: `budget_steps=3` is
    `--budget-steps 3`, True a flag without a value, a list several values, None no flag."""
    argv = [str(w) for w in words]
    for name, value in flags.items():
        if value is None:
            continue
        argv.append("--" + name.replace("_", "-"))
        if value is not True:
            argv += [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return argv


def save_tiny(cls, tok, directory: Path, **config) -> Path:
    """A randomly initialised `tiny` preset `cls` on `tok`'s vocabulary, saved with `tok` as an
    HF-format model directory."""
    from clozeformer.modeling.config import BertConfig

    return save_model(cls(BertConfig.preset("tiny", vocab_size=tok.vocab_size, **config)), tok, directory)


def save_model(model, tok, directory: Path) -> Path:
    model.save_pretrained(directory)
    tok.save(directory)
    return directory


def write_corpus(path: Path, n_docs: int, seed: int = 0) -> None:
    """`n_docs` documents of 4-9 sentences, one sentence per line (the original BERT format)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n_docs):
            for _ in range(rng.randint(4, 9)):
                f.write(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}".strip() + " .\n")
            f.write("\n")


def train_tokenizer(inputs: list[Path] | Path, out: Path, vocab_size: int = 120) -> Path:
    """A WordPiece vocab (no [unused] slots) trained on `inputs` through the real CLI."""
    from clozeformer.commands.cli import main as cli_main

    paths = [str(p) for p in (inputs if isinstance(inputs, list) else [inputs])]
    argv = ["tokenizer", "train", "--input", *paths, "--vocab-size", str(vocab_size), "--num-unused", "0"]
    assert cli_main([*argv, "--out", str(out), "--no-progress"]) == 0
    return out


def prepare_data(corpus: Path, tokenizer: Path, out: Path, mode: str = "packed", seq_len: int = 32) -> Path:
    """Shards of `corpus` (5% validation) through the real `prepare` CLI."""
    from clozeformer.commands.cli import main as cli_main

    argv = ["prepare", "--input", str(corpus), "--tokenizer", str(tokenizer), "--out", str(out), "--max-length", str(seq_len)]
    assert cli_main([*argv, "--mode", mode, "--val-fraction", "0.05", "--no-progress"]) == 0
    return out


def make_data_dir(root: Path, n_docs: int = 300, fixed_vocab: bool = False) -> Path:
    """Corpus -> a 120-token WordPiece vocab -> packed shards of 32 tokens, via the real CLI.

    `tokenizers`' WordPiece trainer breaks ties differently from run to run (its hash maps are
    seeded per process), so a trained vocab, and every number downstream of it, varies between
    runs; `fixed_vocab` uses the committed fixture vocabulary instead, for tests that need the
    same data every time."""
    import shutil

    write_corpus(root / "corpus.txt", n_docs)
    if fixed_vocab:
        (root / "tok").mkdir(parents=True)
        shutil.copy(Path(__file__).parent / "fixtures" / "infer_vocab.txt", root / "tok" / "vocab.txt")
    else:
        train_tokenizer(root / "corpus.txt", root / "tok")
    return prepare_data(root / "corpus.txt", root / "tok", root / "data")


def run_script(script: Path, *args: str, env: dict | None = None, expect: int = 0) -> str:
    """Run one of the repository's scripts (benchmarks/, tools/probes/) on one thread with the
    package importable from the checkout; assert its exit code; return stdout + stderr."""
    r = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **(env or {})},
        cwd=REPO,
    )
    assert r.returncode == expect, f"{script.name}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout + r.stderr
