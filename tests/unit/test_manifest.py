"""Manifest: manifest.json of format 1 reads back unchanged, write -> read round trips, one error per bad field."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from clozeformer.data.manifest import HINT, Manifest, Shard, SpecialIds, Split
from clozeformer.utils.errors import ClozeformerError

# Written by `prepare` before the Manifest class existed (commit b16cf88): nsp, static masking,
# dupe factor 2, 4 train shards and 1 val shard.
FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest_v1.json"


@pytest.fixture
def raw() -> dict:
    return json.loads(FIXTURE.read_text())


def dumped(m: Manifest) -> str:
    return json.dumps(m.to_json(), indent=2, ensure_ascii=False) + "\n"  # as clozeformer.utils.io.atomic_write_json


def test_a_format_1_manifest_reads_and_writes_back_byte_for_byte(raw, tmp_path):
    m = Manifest.from_json(raw, FIXTURE)
    assert dumped(m) == FIXTURE.read_text()
    assert (m.mode, m.seq_len, m.vocab_size, m.token_dtype) == ("nsp", 32, 311, "uint16")
    assert m.nsp and m.static_masking and m.dupe_factor == 2
    assert (m.num_train, m.num_val, m.train_tokens, m.val_tokens) == (66, 14, 1872, 422)
    assert m.special_ids == SpecialIds(pad=0, unk=3, cls=4, sep=5, mask=6)
    assert m.tokenizer.hash == raw["tokenizer_hash"] and m.tokenizer_dir == "tokenizer" and m.tokenizer.do_lower_case
    train = m.splits["train"]
    assert len(train.shards) == 4 and train.shards[0].b_start == "train-00000.b_start.npy"
    assert train.shards[3].labels == "train-00003.labels.npy" and train.mean_length == raw["splits"]["train"]["mean_length"]
    assert train.random_next_fraction == raw["splits"]["train"]["random_next_fraction"] and train.max_length == 32
    assert (m.documents.train, m.documents.val, m.reader.duplicates, m.reader.formats) == (33, 7, 2, {"bert": 1})
    assert m.settings["shard_tokens"] == 600 and m.sentences == raw["sentences"]
    m.write(tmp_path)
    assert (tmp_path / "manifest.json").read_text() == FIXTURE.read_text()
    assert Manifest.read(tmp_path) == m


def test_write_read_round_trip_of_a_minimal_manifest(tmp_path):
    m = Manifest(
        mode="packed",
        seq_len=8,
        vocab_size=10,
        token_dtype="uint16",
        special_ids=SpecialIds(pad=0, cls=1, sep=2, mask=3),
        splits={
            "train": Split((Shard("t.npy", "o.npy", 2, 11), Shard("t1.npy", "o1.npy", 1, 5)), max_length=6),
            "val": Split(()),
        },
    )
    m.write(tmp_path)
    back = Manifest.read(tmp_path)
    assert back == m and (back.num_train, back.train_tokens, back.num_val, back.splits["train"].mean_length) == (3, 16, 0, 5.33)
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert "unk_token_id" not in written and "tokenizer" not in written and "reader" not in written  # None: not written
    assert written["splits"]["val"] == {"num_sequences": 0, "num_tokens": 0, "shards": []}


def test_only_the_first_readers_required_fields_are_required(raw):
    required = ("mode", "seq_len", "vocab_size", "num_train", "num_val", "special_ids", "splits", "token_dtype")
    m = Manifest.from_json({k: raw[k] for k in required})
    assert not m.static_masking and m.dupe_factor == 1 and m.format_version == 1 and m.tokenizer_dir == "tokenizer"
    assert m.tokenizer is m.documents is m.reader is m.settings is None
    assert m.num_train == 66 and m.splits["val"].num_tokens == 422


def _set(obj: dict, path: tuple, value) -> dict:
    obj = copy.deepcopy(obj)
    *parents, last = path
    node = obj
    for key in parents:
        node = node[key]
    node[last] = value
    return obj


@pytest.mark.parametrize(
    "path,value,expected",
    [
        (("format_version",), "1", "format_version must be an integer >= 0"),
        (("mode",), "mlm", "mode must be packed or nsp"),
        (("seq_len",), 4, "seq_len must be an integer >= 8"),
        (("num_val",), -1, "num_val must be an integer >= 0"),
        (("train_tokens",), "many", "train_tokens must be an integer >= 0"),
        (("static_masking",), "yes", "static_masking must be true or false"),
        (("dupe_factor",), 0, "dupe_factor must be an integer >= 1"),
        (("special_ids", "cls"), "4", "special_ids.cls must be an id below vocab_size"),
        (("special_ids", "unk"), -1, "special_ids.unk must be an id below vocab_size"),
        (("tokenizer",), "tokenizer", "tokenizer must be an object"),
        (("tokenizer", "dir"), 3, "tokenizer.dir must be a non-empty string"),
        (("tokenizer", "do_lower_case"), 1, "tokenizer.do_lower_case must be true or false"),
        (("documents", "val"), None, "documents.val must be an integer >= 0"),
        (("sentences",), 2.5, "sentences must be an integer >= 0"),
        (("reader", "kept"), "40", "reader.kept must be an integer >= 0"),
        (("reader", "formats"), [], "reader.formats must be an object"),
        (("settings",), "seed=1", "settings must be an object"),
        (("splits", "train"), [], "splits.train must be an object"),
        (("splits", "train", "shards"), {}, "splits.train.shards must be a list"),
        (("splits", "train", "shards", 1), "train-00001", "splits.train.shards[1] must be an object"),
        (("splits", "train", "shards", 1, "num_tokens"), -5, "splits.train.shards[1].num_tokens must be an integer >= 0"),
        (("splits", "val", "shards", 0, "labels"), 7, "splits.val.shards[0].labels must be a non-empty string"),
        (("splits", "train", "random_next_fraction"), 1.5, "splits.train.random_next_fraction must be a number in [0, 1]"),
        (("splits", "train", "max_length"), "32", "splits.train.max_length must be an integer >= 0"),
        (("splits", "train", "mean_length"), "x", "splits.train.mean_length must be a number"),
    ],
)
def test_a_mistyped_field_is_one_error_naming_it(raw, tmp_path, path, value, expected):
    (tmp_path / "manifest.json").write_text(json.dumps(_set(raw, path, value)))
    with pytest.raises(ClozeformerError) as e:
        Manifest.read(tmp_path)
    assert str(e.value) == f"{tmp_path / 'manifest.json'}: {expected}, got {value!r}{HINT}"


@pytest.mark.parametrize(
    "path,value,expected",
    [
        (("num_train",), 67, "num_train is 67 but the sum over the train shards is 66"),
        (("val_tokens",), 1, "val_tokens is 1 but the sum over the val shards is 422"),
        (("splits", "train", "num_sequences"), 65, "splits.train.num_sequences is 65 but the sum over its shards is 66"),
        (("splits", "train", "mean_length"), 20.0, "splits.train.mean_length is 20.0 but num_tokens / num_sequences is 28.36"),
        (("mask_token_id",), 5, "mask_token_id is 5 but special_ids.mask is 6"),
        (("tokenizer_hash",), "abc", "tokenizer_hash is 'abc' but tokenizer.hash is '"),
    ],
)
def test_a_copy_that_disagrees_with_its_fact_is_named(raw, path, value, expected):
    with pytest.raises(ClozeformerError, match=f"manifest.json: {re.escape(expected)}"):
        Manifest.from_json(_set(raw, path, value))


def test_missing_and_newer(raw):
    del raw["splits"]["train"]["shards"][2]["b_start"]
    with pytest.raises(ClozeformerError, match=r"splits\.train\.shards\[2\]\.b_start is missing \(mode nsp"):
        Manifest.from_json(raw)
    with pytest.raises(ClozeformerError, match=r"splits\.train\.shards\[0\]\.offsets is missing"):
        Manifest.from_json(_set(raw, ("splits", "train", "shards"), [{"tokens": "t.npy"}]))
    with pytest.raises(ClozeformerError, match="special_ids.pad is missing"):
        Manifest.from_json(_set(raw, ("special_ids",), {"cls": 4, "sep": 5, "mask": 6}))
    with pytest.raises(ClozeformerError, match="format_version 2 is newer than this clozeformer reads"):
        Manifest.from_json(_set(raw, ("format_version",), 2))
