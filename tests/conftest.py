"""Shared test fixtures: seeded, hermetic, offline."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: ../shared/data next to the repository (as CI lays it out), or CLOZEFORMER_SHARED_DATA
SHARED_DATA = Path(os.environ.get("CLOZEFORMER_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@pytest.fixture(autouse=True)
def _seed_everything():
    import torch

    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(dtype)


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"optional data folder {SHARED_DATA} is absent (set CLOZEFORMER_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture
def one_thread():
    """Run a test with 1 torch thread (timing-free tests of batching and padding stay deterministic)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def infer_tok():
    """The 220-token vocabulary the inference tests build their tiny models on."""
    from clozeformer.modeling.tokenizer import Tokenizer

    words = (Path(__file__).parent / "fixtures" / "infer_vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    tok = Tokenizer(words, do_lower_case=True)
    assert tok.vocab_size == 220
    return tok
