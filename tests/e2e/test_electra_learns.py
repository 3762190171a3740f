"""ELECTRA's objective does what it is for: in 150 steps the discriminator finds replaced tokens better
than any constant answer could."""

from __future__ import annotations

import math

import pytest
from synthetic import make_data_dir

from clozeformer.train.loop import pretrain
from clozeformer.train.pretrain_config import PretrainConfig


@pytest.mark.e2e
def test_the_discriminator_learns_to_find_replacements(tmp_path):
    """Its loss beats the best constant answer (the entropy of the replaced fraction p), with the
    shared embeddings of a full-width one-layer generator (the sanity check of the objective)."""
    data = make_data_dir(tmp_path, fixed_vocab=True)
    cfg = PretrainConfig(
        data=str(data), out=str(tmp_path / "r"), model="tiny", objective="electra", batch_size=16, lr=2e-3,
        warmup_steps=5, max_steps=150, generator_fraction=1.0, generator_layers=1, progress=False,
        report_to=["none"], dtype="fp32",  # auto is bf16 on AMX CPUs; the threshold is for fp32
    )  # fmt: skip
    val = pretrain(cfg)["val"]
    p = val["val_rtd_replaced"]
    constant = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert val["val_rtd_loss"] < constant - 0.01, (val, constant)
