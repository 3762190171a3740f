"""Tokenizer: exact WordPiece cases, special tokens, CJK, casing, offsets, training, HF parity."""

from __future__ import annotations

import functools
import gzip
import json
import shutil
from pathlib import Path

import pytest

from clozeformer.commands.cli import main as cli_main
from clozeformer.modeling.tokenizer import Tokenizer, check_vocab_fits, infer_lowercase
from clozeformer.utils.errors import ClozeformerError

FIXTURES = Path(__file__).parents[1] / "fixtures"
UNCASED = FIXTURES / "tok_vocab.txt"
CASED = FIXTURES / "tok_vocab_cased.txt"


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.from_pretrained(UNCASED)


def hf_from_dir(directory: Path, **kw):
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(str(directory), **kw)


def test_google_wordpiece_case(tok):
    # google-research/bert tokenization_test.py: "UNwant\u00E9d,running" -> un ##want ##ed , runn ##ing
    assert tok.tokenize("UNwant\u00e9d,running") == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tok.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]  # no piece for "x": the word is [UNK]
    assert tok.tokenize("") == []


def test_casing_inferred_and_reported(capsys):
    t = Tokenizer.from_pretrained(UNCASED)
    assert t.do_lower_case is True
    err = capsys.readouterr().err
    assert "inferred uncased" in err and "no uppercase tokens" in err
    c = Tokenizer.from_pretrained(CASED)
    assert c.do_lower_case is False
    assert "inferred cased" in capsys.readouterr().err
    # Cased: no lowercasing, no accent stripping.
    assert c.tokenize("UNwant Hello café naïve") == ["UN", "##want", "Hello", "café", "naïve"]
    assert t.tokenize("Hello CAFÉ Naïve") == ["hello", "cafe", "naive"]
    assert infer_lowercase(["[PAD]", "<S>", "<T>", "abc", "##d"]) is True
    assert infer_lowercase(["[PAD]", "abc", "Abc"]) is False


def test_tokenizer_config_overrides_inference(tmp_path, capsys):
    shutil.copy(CASED, tmp_path / "vocab.txt")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    t = Tokenizer.from_pretrained(tmp_path)
    assert t.do_lower_case is True
    assert "inferred" not in capsys.readouterr().err
    assert t.tokenize("HELLO World") == ["hello", "world"]


def test_cjk_characters_are_single_tokens(tok):
    assert tok.tokenize("你好中文字") == ["你", "好", "中", "文", "字"]
    assert tok.tokenize("hello中文world") == ["hello", "中", "文", "world"]
    enc = tok.encode("你好world")
    assert enc.word_ids == [None, 0, 1, 2, None]  # each CJK character is its own word


def test_special_tokens_and_pairs(tok):
    enc = tok.encode("hello world", "lowest low")
    assert enc.tokens == ["[CLS]", "hello", "world", "[SEP]", "lowest", "low", "[SEP]"]
    assert enc.input_ids[0] == tok.cls_token_id and enc.input_ids[3] == tok.sep_token_id == enc.input_ids[-1]
    assert enc.token_type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert enc.attention_mask == [1] * 7
    assert enc.special_tokens_mask == [1, 0, 0, 1, 0, 0, 1]
    assert enc.sequence_ids == [None, 0, 0, None, 1, 1, None]
    single = tok.encode("hello")
    assert single.tokens == ["[CLS]", "hello", "[SEP]"] and single.token_type_ids == [0, 0, 0]
    assert tok.encode("hello", add_special_tokens=False).tokens == ["hello"]
    # A special token typed in the text stays whole.
    assert tok.tokenize("the [MASK] is") == ["the", "[MASK]", "is"]
    assert (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id) == (0, 1, 2, 3, 4)
    assert tok.special_ids == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert tok.vocab_size == len(tok) == 37


def test_offsets_and_word_ids(tok):
    text = "Unwanted, running"
    enc = tok.encode(text)
    assert enc.tokens == ["[CLS]", "un", "##want", "##ed", ",", "runn", "##ing", "[SEP]"]
    assert enc.offsets == [(0, 0), (0, 2), (2, 6), (6, 8), (8, 9), (10, 14), (14, 17), (0, 0)]
    assert [text[a:b] for a, b in enc.offsets[1:-1]] == ["Un", "want", "ed", ",", "runn", "ing"]
    assert enc.word_ids == [None, 0, 0, 0, 1, 2, 2, None]


def test_truncation_longest_first_and_overflow(tok):
    a, b = "hello world the a is", "low lowest the"
    enc = tok.encode(a, b, max_length=8)  # longest first: A 5 -> 3 tokens, B 3 -> 2
    assert enc.tokens == ["[CLS]", "hello", "world", "the", "[SEP]", "low", "lowest", "[SEP]"]
    only_first = tok.encode(a, b, max_length=8, truncation="only_first")
    assert only_first.tokens == ["[CLS]", "hello", "world", "[SEP]", "low", "lowest", "the", "[SEP]"]
    assert len(tok.encode(a, b, max_length=8, truncation=False)) == 11
    windows = tok.encode("hello world the a is low", max_length=5, stride=1, return_overflowing=True)
    assert windows.tokens == ["[CLS]", "hello", "world", "the", "[SEP]"]
    assert [w.tokens[1:-1] for w in windows.overflowing] == [["the", "a", "is"], ["is", "low"]]
    with pytest.raises(ClozeformerError):
        tok.encode("hello", max_length=4, truncation="sideways")


def test_encode_batch_decode_and_conversions(tok):
    batch = tok.encode_batch(["hello world", "running"], pairs=["low", "the"])
    assert [e.tokens for e in batch] == [
        ["[CLS]", "hello", "world", "[SEP]", "low", "[SEP]"],
        ["[CLS]", "runn", "##ing", "[SEP]", "the", "[SEP]"],
    ]
    assert batch[0].input_ids == tok.encode("hello world", "low").input_ids
    ids = tok.encode("unwanted, running").input_ids
    assert tok.decode(ids) == "unwanted, running"
    assert tok.decode(ids, skip_special_tokens=False).startswith("[CLS] unwanted")
    assert tok.convert_ids_to_tokens(ids[1:4]) == ["un", "##want", "##ed"]
    assert tok.convert_tokens_to_ids(["un", "nope"]) == [tok.vocab["un"], tok.unk_token_id]
    assert tok.convert_ids_to_tokens(0) == "[PAD]"
    with pytest.raises(ClozeformerError, match="pairs"):
        tok.encode_batch(["a", "b"], pairs=["c"])


@pytest.mark.parametrize("vocab", [UNCASED, CASED])
def test_parity_with_bert_tokenizer_fast(tmp_path, vocab):
    ours = Tokenizer.from_pretrained(vocab)
    ours.save(tmp_path)
    hf = hf_from_dir(tmp_path)
    assert len(hf) == ours.vocab_size
    texts = [
        "UNwant\u00e9d,running",
        "Hello World café naïve!",
        "你好, 中文字 hello",
        "it's don't \t\n lowest",
        "the [MASK] is low",
        "\u00e9\u0301 \u200b weird\x00 chars",
        "a" * 150,
    ]
    for a in texts:
        assert ours.encode(a).input_ids == hf(a)["input_ids"], a
        for b in texts[:3]:
            enc, ref = ours.encode(a, b), hf(a, b)
            assert enc.input_ids == ref["input_ids"] and enc.token_type_ids == ref["token_type_ids"]


def test_save_roundtrip(tmp_path, tok):
    tok.save(tmp_path / "t")
    again = Tokenizer.from_pretrained(tmp_path / "t")
    assert again.fingerprint == tok.fingerprint
    assert json.loads((tmp_path / "t" / "tokenizer_config.json").read_text())["do_lower_case"] is True
    assert (tmp_path / "t" / "vocab.txt").read_text(encoding="utf-8") == UNCASED.read_text(encoding="utf-8")


def test_bad_vocab_files(tmp_path):
    with pytest.raises(ClozeformerError, match="no such tokenizer"):
        Tokenizer.from_pretrained(tmp_path / "missing")
    with pytest.raises(ClozeformerError, match="no vocab.txt"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    with pytest.raises(ClozeformerError, match=r"\[MASK\]"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nhello\n")
    with pytest.raises(ClozeformerError, match="vocab.txt:7: duplicate"):
        Tokenizer.from_pretrained(tmp_path)
    (tmp_path / "vocab.txt").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ClozeformerError, match="not UTF-8"):
        Tokenizer.from_pretrained(tmp_path)


# ----------------------------------------------------------------------------- training
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Unwanted running foxes were jumping quickly over lazy dogs!",
    "Dogs and foxes are running; the fox is quicker than the dog.",
    "A lazy afternoon: nobody wanted to run, jump or walk.",
    "Walking, running and jumping are the unwanted chores of dogs.",
]


def _corpus(tmp_path: Path) -> Path:
    d = tmp_path / "corpus"
    d.mkdir()
    # Two formats in one directory: a gzip'd BERT-format file and a JSONL file.
    docs = [SENTENCES[i:] + SENTENCES[:i] for i in range(5)]
    with gzip.open(d / "a.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(doc) for doc in docs * 20) + "\n")
    with open(d / "b.jsonl", "w", encoding="utf-8") as f:
        for i in range(40):
            f.write(json.dumps({"id": i, "text": " ".join(SENTENCES[i % 5 :]) + f" Item number {i}."}) + "\n")
    return d


def test_train_layout_and_hf_loads_it(tmp_path):
    corpus = _corpus(tmp_path)
    out = tmp_path / "tok"
    rc = cli_main(
        [
            "tokenizer",
            "train",
            "--input",
            str(corpus),
            "--vocab-size",
            "260",
            "--out",
            str(out),
            "--no-progress",
            "--min-frequency",
            "1",
        ]
    )
    assert rc == 0
    lines = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert lines[0] == "[PAD]" and lines[1] == "[unused0]" and lines[99] == "[unused98]"
    assert lines[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(lines) == 260 and len(set(lines)) == 260
    assert any(t.startswith("##") for t in lines)
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is True
    ours = Tokenizer.from_pretrained(out)
    assert ours.special_ids == {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}
    hf = hf_from_dir(out)
    assert len(hf) == 260
    for text in SENTENCES + ["Completely UNSEEN words: zebra, xylophone.", "中文 text"]:
        assert ours.encode(text).input_ids == hf(text)["input_ids"], text
        assert ours.encode(text, "the fox").input_ids == hf(text, "the fox")["input_ids"]
    assert "fox" in ours.vocab and ours.tokenize("The fox") == ["the", "fox"]


def test_train_cased_compact(tmp_path):
    corpus = _corpus(tmp_path)
    out = tmp_path / "tok"
    assert (
        cli_main(
            [
                "tokenizer",
                "train",
                "--input",
                str(corpus / "b.jsonl"),
                "--vocab-size",
                "200",
                "--cased",
                "--num-unused",
                "0",
                "--out",
                str(out),
                "--no-progress",
                "--min-frequency",
                "1",
            ]
        )
        == 0
    )
    ours = Tokenizer.from_pretrained(out)
    assert ours.do_lower_case is False
    assert ours.special_ids == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    hf = hf_from_dir(out)
    for text in SENTENCES:
        assert ours.encode(text).input_ids == hf(text)["input_ids"]
    assert "The" in ours.vocab


def test_train_cli_errors(tmp_path, capsys):
    rc = cli_main(["tokenizer", "train", "--input", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "nope.txt: no such file" in err
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert cli_main(["tokenizer", "train", "--input", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "empty.txt: file is empty" in capsys.readouterr().err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n   \n")
    assert cli_main(["tokenizer", "train", "--input", str(blank), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "no documents left" in capsys.readouterr().err
    assert not (tmp_path / "o" / "vocab.txt").exists()


# ----------------------------------------------------------------------------- opt-in: real data parity
@functools.lru_cache(maxsize=1)
def _shared_lines(root: Path, n: int = 2000) -> dict[str, list[str]]:
    def take(paths, parse=lambda s: s, limit=n):
        out = []
        for p in paths:
            opener = gzip.open if p.suffix == ".gz" else open
            with opener(p, "rt", encoding="utf-8", errors="replace") as f:
                for line in f:
                    line = parse(line.strip())
                    if line and not line.startswith("<"):
                        out.append(line)
                        if len(out) >= limit:
                            return out
        return out

    text = root / "text"
    sst = take([root / "tasks" / "glue" / "SST-2" / "train.tsv"], lambda s: s.split("\t")[0] if "\t" in s else "")
    zh = (
        take([text / "zh" / "CLUECorpusSmall_sampled.txt"], limit=n // 2)
        + take(sorted((text / "zh" / "classic_novels").rglob("*.txt")), limit=n // 2)
        + take([text / "zh" / "zhwiki" / "wiki_00"], limit=200)
    )
    return {
        "enwiki": take(sorted((text / "enwiki").glob("wiki_*.gz"))),
        "gutenberg": take(sorted((text / "gutenberg").glob("*.txt.gz"))),
        "sst2": sst[1:],  # drop the header
        "chinese": zh,
    }


@pytest.mark.shared
@pytest.mark.parametrize("name,lower", [("bert-base-uncased", True), ("bert-base-cased", False), ("bert-base-chinese", True)])
def test_shared_parity_google_vocabs(shared_data, name, lower):
    from transformers import BertTokenizerFast

    vocab_dir = shared_data / "vocab" / name
    ours = Tokenizer.from_pretrained(vocab_dir)
    assert ours.do_lower_case is lower  # inferred from the vocab (no tokenizer_config.json there)
    hf = BertTokenizerFast.from_pretrained(str(vocab_dir), do_lower_case=lower)
    assert len(hf) == ours.vocab_size
    for source, lines in _shared_lines(shared_data).items():
        assert len(lines) >= 1900, (source, len(lines))
        ref = hf(lines)["input_ids"]
        got = [e.input_ids for e in ours.encode_batch(lines)]
        bad = [i for i in range(len(lines)) if got[i] != ref[i]]
        assert not bad, f"{name}/{source}: {len(bad)} mismatches, first: {lines[bad[0]][:200]!r}"
        # Pairs with truncation (cut to 500 characters: the overflow windows tokenizers builds for
        # long pairs make both sides slow).
        firsts = [s[:500] for s in lines]
        pairs = firsts[1:] + firsts[:1]
        ref = hf(firsts, pairs, truncation=True, max_length=128)
        got = ours.encode_batch(firsts, pairs, max_length=128)
        assert [e.input_ids for e in got] == ref["input_ids"], f"{name}/{source} pairs"
        assert [e.token_type_ids for e in got] == ref["token_type_ids"]


def test_a_vocab_against_the_model_embedding(capsys):
    """One rule (finetune, evaluate, pipelines): more tokens than rows is an error; fewer is
    allowed (padded embeddings) with a note naming the ids that are never produced."""
    check_vocab_fits(10, 10, "m")
    assert capsys.readouterr().err == ""
    with pytest.raises(ClozeformerError, match="m: the vocab has 11 tokens but the model's vocab_size is 10"):
        check_vocab_fits(11, 10, "m")
    check_vocab_fits(8, 10, "m")
    assert (
        capsys.readouterr().err == "note: m: the vocab has 8 tokens, the model's embedding 10 rows: ids 8..9 are never produced\n"
    )
