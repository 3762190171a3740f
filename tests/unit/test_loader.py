"""PretrainLoader: batches, dynamic padding, epochs, exact resume, rank splits, manifest errors."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from clozeformer.data.loader import MaskingConfig, PretrainDataset, PretrainLoader, read_manifest
from clozeformer.data.prepare import PrepareConfig, prepare
from clozeformer.utils.errors import ClozeformerError

_SYL = [c + v for c in "bdfgklmnprst" for v in "aeiou"]
WORDS = sorted({a + b for a in _SYL for b in _SYL})[::12]
VOCAB = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "##ing", "##ed", *WORDS]
PAD, CLS, SEP, MASK = 0, 3, 4, 5


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("loader")
    tok = root / "tok"
    tok.mkdir()
    (tok / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    rng = random.Random(0)
    docs = []
    for _ in range(300):
        sents = [
            " ".join(rng.choice(WORDS) + rng.choice(["", "", "ing", "ed"]) for _ in range(rng.randint(2, 9))) + "."
            for _ in range(rng.randint(1, 10))
        ]
        docs.append("\n".join(sents))
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(docs) + "\n")
    out = {}
    for name, kw in {"packed": {}, "nsp": {"mode": "nsp"}, "static": {"static_masking": True, "dupe_factor": 2}}.items():
        out[name] = root / name
        prepare(
            PrepareConfig(
                input=[str(corpus)],
                tokenizer=str(tok),
                out=str(out[name]),
                max_length=24,
                workers=0,
                min_doc_chars=0,
                val_fraction=0.1,
                progress=False,
                **kw,
            )
        )
    return out


def take(loader, n):
    it = iter(loader)
    return [next(it) for _ in range(n)]


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def rows(batch: dict) -> list[tuple]:
    """Each sequence of a batch without its padding, as comparable tuples."""
    out = []
    for i in range(batch["input_ids"].shape[0]):
        n = int(batch["attention_mask"][i].sum())
        out.append(tuple(tuple(batch[k][i, :n].tolist()) for k in ("input_ids", "token_type_ids", "labels")))
    return out


def test_read_manifest(data, tmp_path):
    m = read_manifest(data["nsp"])
    assert m.mode == "nsp" and m.seq_len == 24 and m.vocab_size == len(VOCAB)
    assert m.num_train > 100 and m.num_val > 0
    assert m.special_ids.as_dict() == {"pad": 0, "unk": 2, "cls": 3, "sep": 4, "mask": 5}
    assert json.loads((data["nsp"] / "manifest.json").read_text())["mask_token_id"] == 5
    with pytest.raises(ClozeformerError, match="no such data directory"):
        read_manifest(tmp_path / "nope")
    with pytest.raises(ClozeformerError, match="manifest.json: missing"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ClozeformerError, match="corrupt manifest"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"mode": "packed"}))
    with pytest.raises(ClozeformerError, match="missing seq_len"):
        read_manifest(tmp_path)


def test_packed_batches(data):
    loader = PretrainLoader(data["packed"], batch_size=8, seed=1)
    assert loader.tokens_per_epoch == read_manifest(data["packed"]).train_tokens
    for batch in take(loader, 5):
        assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
        ids, attn, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
        assert all(t.dtype == torch.int64 for t in batch.values())
        assert ids.shape[0] == 8 and ids.shape[1] == int(attn.sum(1).max()) <= 24  # padded to the longest
        assert (ids[attn == 0] == PAD).all() and (labels[attn == 0] == -100).all()
        assert (batch["token_type_ids"] == 0).all()
        assert (labels[:, 0] == -100).all() and (ids[:, 0] == CLS).all()
        chosen = labels != -100
        assert chosen.any() and not (labels[chosen] == SEP).any()


def test_nsp_batches_have_labels_and_segments(data):
    loader = PretrainLoader(data["nsp"], batch_size=16, seed=0)
    ds = PretrainDataset(data["nsp"])
    seen = []
    for step, batch in enumerate(take(loader, 6)):
        assert batch["next_sentence_label"].shape == (16,) and batch["next_sentence_label"].dtype == torch.int64
        idx = loader.batch_indices(0, step)
        for i, row in enumerate(ds.gather(idx)):
            n = len(row["input_ids"])
            types = batch["token_type_ids"][i]
            assert types[: row["b_start"]].sum() == 0 and (types[row["b_start"] : n] == 1).all() and (types[n:] == 0).all()
            assert batch["next_sentence_label"][i] == row["next_sentence_label"]
            unmasked = batch["labels"][i, :n] == -100
            assert torch.equal(batch["input_ids"][i, :n][unmasked], torch.from_numpy(row["input_ids"])[unmasked])
        seen += batch["next_sentence_label"].tolist()
    assert 0.25 < np.mean(seen) < 0.75


def test_epochs_are_endless_and_reshuffled(data):
    loader = PretrainLoader(data["packed"], batch_size=16, seed=3)
    steps = len(loader)
    n = len(loader.dataset)
    assert steps == n // 16
    it = iter(loader)
    for _ in range(steps):
        next(it)
    assert loader.epoch == 0 and loader.position == steps
    next(it)
    assert loader.epoch == 1 and loader.position == steps + 1
    e0 = np.concatenate([loader.batch_indices(0, s) for s in range(steps)])
    e1 = np.concatenate([loader.batch_indices(1, s) for s in range(steps)])
    assert len(set(e0.tolist())) == steps * 16 and not np.array_equal(e0, e1)  # each epoch a new order
    # Masks differ between epochs too (same sequence, new epoch -> new mask).
    first = loader.collate(np.arange(16), 0)["labels"]
    assert not torch.equal(first, loader.collate(np.arange(16), 1)["labels"])


def test_val_is_one_finite_repeatable_pass(data):
    val = PretrainLoader(data["packed"], split="val", batch_size=4, shuffle=False, drop_last=False)
    a, b = list(val), list(val)
    n = read_manifest(data["packed"]).num_val
    assert len(a) == len(val) == -(-n // 4) and sum(x["input_ids"].shape[0] for x in a) == n
    assert all(same(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("name,stop", [("packed", 3), ("nsp", 7), ("packed", None)])
def test_resume_is_bitwise_exact(data, name, stop):
    cfg = MaskingConfig(strategy="exact", whole_word=True)
    ref = PretrainLoader(data[name], batch_size=8, seed=11, masking=cfg)
    stop = stop if stop is not None else len(ref) + 2  # also across an epoch boundary
    reference = take(ref, stop + 4)
    first = PretrainLoader(data[name], batch_size=8, seed=11, masking=cfg)
    take(first, stop)
    state = json.loads(json.dumps(first.state_dict()))  # JSON-serialisable
    assert state["position"] == stop and state["epoch"] == (1 if stop > len(ref) else 0)
    resumed = PretrainLoader(data[name], batch_size=8, seed=11, masking=cfg)
    resumed.load_state_dict(state)
    for want, got in zip(reference[stop:], take(resumed, 4)):
        assert same(want, got)
    assert resumed.position == stop + 4


def test_resume_rejects_a_different_setup(data):
    loader = PretrainLoader(data["packed"], batch_size=8, seed=1)
    take(loader, 2)
    state = loader.state_dict()
    with pytest.raises(ClozeformerError, match="seed"):
        PretrainLoader(data["packed"], batch_size=8, seed=2).load_state_dict(state)
    with pytest.raises(ClozeformerError, match="global_batch_size"):
        PretrainLoader(data["packed"], batch_size=4, seed=1).load_state_dict(state)
    # The same global batch over two ranks resumes fine.
    r0 = PretrainLoader(data["packed"], batch_size=4, seed=1, rank=0, world_size=2)
    r0.load_state_dict(state)
    assert r0.position == 2


def test_rank_split_matches_one_process(data):
    """The ranks of step k together hold exactly the batch of a world_size=1 loader with W*b."""
    for name in ("packed", "nsp"):
        single = PretrainLoader(data[name], batch_size=8, seed=5)
        ranks = [PretrainLoader(data[name], batch_size=4, seed=5, rank=r, world_size=2) for r in range(2)]
        steps = len(single) + 3  # into the second epoch
        singles = take(single, steps)
        per_rank = [take(r, steps) for r in ranks]
        for k in range(steps):
            assert rows(per_rank[0][k]) + rows(per_rank[1][k]) == rows(singles[k])  # masks included
        # Within an epoch the ranks are disjoint and together cover the epoch's sequences.
        idx = [np.concatenate([r.batch_indices(0, s) for s in range(len(single))]) for r in ranks]
        assert not set(idx[0].tolist()) & set(idx[1].tolist())
        union = np.concatenate([single.batch_indices(0, s) for s in range(len(single))])
        assert sorted(np.concatenate(idx).tolist()) == sorted(union.tolist())
        assert len(union) == len(single) * 8


def test_static_masks_come_from_the_shards(data):
    loader = PretrainLoader(data["static"], batch_size=8, seed=0)
    ds = loader.dataset
    assert ds.static
    batch = next(iter(loader))
    for i, row in enumerate(ds.gather(loader.batch_indices(0, 0))):
        n = len(row["input_ids"])
        assert batch["input_ids"][i, :n].tolist() == row["input_ids"].tolist()
        assert batch["labels"][i, :n].tolist() == row["labels"].tolist()
    again = PretrainLoader(data["static"], batch_size=8, seed=0).collate(loader.batch_indices(0, 0), epoch=5)
    assert torch.equal(again["labels"], batch["labels"])  # fixed at prepare time, whatever the epoch


def test_bad_loader_arguments_and_damaged_shards(data, tmp_path):
    with pytest.raises(ClozeformerError, match="fewer than one global batch"):
        PretrainLoader(data["packed"], split="val", batch_size=10_000)
    with pytest.raises(ClozeformerError, match="rank"):
        PretrainLoader(data["packed"], rank=2, world_size=2)
    with pytest.raises(ClozeformerError, match="split"):
        PretrainLoader(data["packed"], split="test")
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(data["packed"], broken)
    shard = broken / "train-00000.tokens.npy"
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(ClozeformerError, match="train-00000.tokens.npy"):
        PretrainLoader(broken)
    (broken / "train-00000.tokens.npy").unlink()
    with pytest.raises(ClozeformerError, match="missing or corrupt"):
        PretrainLoader(broken)


@pytest.mark.parametrize(
    "key,value,expected",
    [
        ("seq_len", "128", "seq_len must be an integer >= 8"),
        ("vocab_size", -3, "vocab_size must be an integer >= 1"),
        ("num_train", 1.5, "num_train must be an integer >= 0"),
        ("splits", [], "splits must be an object"),
        ("token_dtype", "float16", "token_dtype must be uint16, int32, uint32 or int64"),
        ("special_ids", {"pad": 0, "cls": 3, "sep": 4, "mask": 10**9}, "special_ids.mask must be an id below vocab_size"),
    ],
)
def test_a_mistyped_manifest_field_is_named(data, tmp_path, key, value, expected):
    m = json.loads((data["packed"] / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**m, key: value}))
    with pytest.raises(ClozeformerError, match=f"manifest.json: {re.escape(expected)}"):
        read_manifest(tmp_path)


def test_a_token_id_beyond_the_vocabulary_is_named(data, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(data["packed"], broken)
    shard = broken / "train-00000.tokens.npy"
    tokens = np.load(shard)
    tokens[5] = np.iinfo(tokens.dtype).max  # one damaged id in the first sequence
    np.save(shard, tokens)
    loader = PretrainLoader(broken, batch_size=len(PretrainDataset(broken)), shuffle=False)
    with pytest.raises(
        ClozeformerError, match=r"sequence 0 of the train split holds token id \d+, not below the manifest's vocab_size"
    ):
        next(iter(loader))
