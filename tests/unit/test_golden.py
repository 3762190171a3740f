"""Golden loss traces: the first losses of fixed-seed tiny runs on fixed data (a committed
vocabulary, a seeded corpus), compared with the stored ones, for each pretraining objective (MLM,
MLM+NSP, ELECTRA, left-to-right) and for one fine-tuning run. Any change to the numerics (init,
masking, data order, optimizer, schedule, the tiny recipe, the fine-tuning loop) shows up here;
when the change is intended, regenerate with `python tests/unit/test_golden.py NAME ...` and say
why in the commit.
"""

from __future__ import annotations

import csv
import json
import random
import shutil
import sys
from pathlib import Path

import pytest
from synthetic import write_corpus

from clozeformer.commands.cli import main as cli_main
from clozeformer.tasks.finetune import finetune
from clozeformer.tasks.task_config import FinetuneConfig
from clozeformer.train.loop import pretrain
from clozeformer.train.metrics_file import read_metrics
from clozeformer.train.pretrain_config import PretrainConfig

FIXTURES = Path(__file__).parents[1] / "fixtures"
GOLDEN = FIXTURES / "golden_losses.json"
STEPS = 12
#: trace name -> (prepare mode, pretraining objective); "finetune" is the fine-tuning run
PRETRAINING = {
    "mlm": ("packed", "mlm"),
    "mlm_nsp": ("nsp", "mlm_nsp"),
    "electra": ("packed", "electra"),
    "clm": ("packed", "clm"),
}
NAMES = (*PRETRAINING, "finetune")


def pretraining_trace(root: Path, name: str) -> list[float]:
    """Corpus (seed 0) + the fixture vocabulary -> 32-token shards -> 12 steps of tiny."""
    mode, objective = PRETRAINING[name]
    write_corpus(root / "corpus.txt", 300)
    (root / "tok").mkdir()
    shutil.copy(FIXTURES / "infer_vocab.txt", root / "tok" / "vocab.txt")  # a trained vocab is not reproducible
    argv = ["prepare", "--input", str(root / "corpus.txt"), "--tokenizer", str(root / "tok"), "--out", str(root / "data")]
    assert cli_main([*argv, "--max-length", "32", "--val-fraction", "0.05", "--mode", mode, "--no-progress"]) == 0
    cfg = PretrainConfig(
        data=str(root / "data"),
        out=str(root / "run"),
        model="tiny",
        objective=objective,
        batch_size=8,
        max_steps=STEPS,
        warmup_steps=3,
        seed=0,
        threads=1,
        dtype="fp32",  # the traces are fp32's; `auto` would be bf16 on CPUs with AMX
        eval_every=0,
        progress=False,
        report_to=["none"],
    )
    pretrain(cfg)
    return [r["loss"] for r in read_metrics(root / "run") if r["kind"] == "train"]


def finetune_trace(root: Path) -> list[float]:
    """`tiny` at random init fine-tuned on a seeded keyword task: the mean training loss between
    evaluations (every 4 steps) and each evaluation's dev accuracy."""
    rng = random.Random(0)
    words = "the a of and to in is was it on for with as at by this that from or".split()
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 96), ("dev", 32)):
        with open(root / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            for _ in range(n):
                label = rng.choice(["pos", "neg"])
                sentence = rng.sample(words, 6)
                sentence.insert(rng.randrange(7), "good" if label == "pos" else "bad")
                w.writerow([" ".join(sentence), label])
    (root / "tok").mkdir()
    shutil.copy(FIXTURES / "infer_vocab.txt", root / "tok" / "vocab.txt")
    cfg = FinetuneConfig(
        task="classification",
        data=[f"train={root / 'train.csv'}", f"dev={root / 'dev.csv'}"],
        model="tiny",
        tokenizer=str(root / "tok"),
        out=str(root / "out"),
        epochs=2,
        batch_size=16,
        lr=2e-3,
        eval_every=4,
        seed=0,
        threads=1,
        dtype="fp32",
        report_to=["none"],
    )
    history = finetune(cfg)["history"]
    return [x for h in history for x in (h["train_loss"], h["scores"]["dev"]["accuracy"])]


def trace(root: Path, name: str) -> list[float]:
    return finetune_trace(root) if name == "finetune" else pretraining_trace(root, name)


@pytest.mark.parametrize("name", NAMES)
def test_golden_trace(tmp_path, name):
    want = json.loads(GOLDEN.read_text())[name]
    got = trace(tmp_path, name)
    assert len(got) == len(want)
    # 1e-4: far below what any real change moves (>= 1e-2 by step 3), above kernel-order noise
    assert got == pytest.approx(want, abs=1e-4), "the numerics changed; see this file's docstring"


if __name__ == "__main__":  # regenerate the named traces: python tests/unit/test_golden.py mlm_nsp electra ...
    import tempfile

    stored = json.loads(GOLDEN.read_text())
    for name in sys.argv[1:] or NAMES:
        with tempfile.TemporaryDirectory() as d:
            stored[name] = trace(Path(d), name)
        print(f"{name}: {stored[name]}", file=sys.stderr)
    GOLDEN.write_text(json.dumps(stored, indent=1) + "\n")
