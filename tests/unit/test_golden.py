"""A golden loss trace: the first losses of a fixed-seed tiny pretraining run on fixed data
(a committed vocabulary, a seeded corpus), compared with the stored ones. Any change to the
numerics (init, masking, data order, optimizer, schedule, the tiny recipe) shows up here; when
the change is intended, regenerate with `python tests/test_golden.py` and say why in the commit.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from synthetic import write_corpus

from clozeformer.commands.cli import main as cli_main
from clozeformer.train.loop import pretrain
from clozeformer.train.metrics_file import read_metrics
from clozeformer.train.pretrain_config import PretrainConfig

FIXTURES = Path(__file__).parents[1] / "fixtures"
GOLDEN = FIXTURES / "golden_losses.json"
STEPS = 12


def trace(root: Path) -> list[float]:
    """Corpus (seed 0) + the fixture vocabulary -> packed 32-token shards -> 12 steps of tiny."""
    write_corpus(root / "corpus.txt", 300)
    (root / "tok").mkdir()
    shutil.copy(FIXTURES / "infer_vocab.txt", root / "tok" / "vocab.txt")  # a trained vocab is not reproducible
    argv = ["prepare", "--input", str(root / "corpus.txt"), "--tokenizer", str(root / "tok"), "--out", str(root / "data")]
    assert cli_main([*argv, "--max-length", "32", "--val-fraction", "0.05", "--no-progress"]) == 0
    cfg = PretrainConfig(
        data=str(root / "data"),
        out=str(root / "run"),
        model="tiny",
        batch_size=8,
        max_steps=STEPS,
        warmup_steps=3,
        seed=0,
        threads=1,
        dtype="fp32",  # the trace is fp32's; `auto` would be bf16 on CPUs with AMX
        eval_every=0,
        progress=False,
        report_to=["none"],
    )
    pretrain(cfg)
    return [r["loss"] for r in read_metrics(root / "run") if r["kind"] == "train"]


def test_golden_loss_trace(tmp_path):
    want = json.loads(GOLDEN.read_text())
    got = trace(tmp_path)
    assert len(got) == STEPS
    # 1e-4: far below what any real change moves (>= 1e-2 by step 3), above kernel-order noise
    assert got == pytest.approx(want["losses"], abs=1e-4), "the numerics changed; see this file's docstring"


if __name__ == "__main__":  # regenerate the stored trace
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        losses = trace(Path(d))
    GOLDEN.write_text(json.dumps({"steps": STEPS, "losses": losses}, indent=1) + "\n")
    print(f"wrote {GOLDEN}: {losses}", file=sys.stderr)
