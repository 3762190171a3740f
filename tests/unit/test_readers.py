"""Corpus readers: formats, detection, gzip, dirs/globs, filters, bad input, sentence splitting."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from clozeformer.data.readers import CorpusReader, detect_format, expand_inputs, split_sentences
from clozeformer.utils.errors import ClozeformerError

FIXTURES = Path(__file__).parents[1] / "fixtures"


def docs_of(path, **kw) -> tuple[list[list[str]], CorpusReader]:
    r = CorpusReader([path], **kw)
    return [d.sentences() for d in r], r


# ----------------------------------------------------------------------------- sentence splitting
@pytest.mark.parametrize(
    "text,expected",
    [
        ("Hello there. How are you? Fine!", ["Hello there.", "How are you?", "Fine!"]),
        ("Mr. Smith met Dr. Jones. They talked.", ["Mr. Smith met Dr. Jones.", "They talked."]),
        ("J. R. R. Tolkien wrote it. It sold.", ["J. R. R. Tolkien wrote it.", "It sold."]),
        ("The U.S. Army came. It left at 3 p.m. Then rain.", ["The U.S. Army came.", "It left at 3 p.m. Then rain."]),
        ('"Is it?" she asked. "Yes." He nodded.', ['"Is it?" she asked.', '"Yes."', "He nodded."]),
        (
            "It was No. 5 on the list. Version 2.0 shipped in 2019. Good.",
            ["It was No. 5 on the list.", "Version 2.0 shipped in 2019.", "Good."],
        ),
        ("Wait... what? no way.", ["Wait... what? no way."]),  # lowercase after ? : not a boundary
        ("He paid $3.50 for it (a lot). Then he left.", ["He paid $3.50 for it (a lot).", "Then he left."]),
        ("今天天气很好。我们去公园吧！你呢？", ["今天天气很好。", "我们去公园吧！", "你呢？"]),
        ("他说：“好的。”然后走了。", ["他说：“好的。”", "然后走了。"]),
        ("  ", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


# ----------------------------------------------------------------------------- formats
@pytest.mark.parametrize(
    "name,fmt",
    [
        ("corpus_bert.txt", "bert"),
        ("corpus_gutenberg.txt", "paragraph"),
        ("corpus_wiki.txt", "wikiextractor"),
        ("corpus_news.jsonl", "jsonl"),
        ("corpus_wikitext.txt", "wikitext"),
        ("corpus_lines_zh.txt", "lines"),
    ],
)
def test_detect_format(name, fmt):
    assert detect_format((FIXTURES / name).read_text(encoding="utf-8")) == fmt


def test_bert_format():
    docs, r = docs_of(FIXTURES / "corpus_bert.txt")
    assert docs == [
        ["The first document starts here.", "It has three sentences.", "This is the last one of document one."],
        ["Document two is short but has two lines.", "Here is its second sentence."],
        ["Third document, a single sentence."],
    ]
    assert r.stats.formats == {"bert": 1} and r.stats.documents == 3 == r.stats.kept


def test_paragraph_format_joins_wrapped_lines():
    docs, _ = docs_of(FIXTURES / "corpus_gutenberg.txt")
    assert len(docs) == 1  # a book is one document
    sents = docs[0]
    assert sents[0] == "CHAPTER I."
    assert sents[1].startswith("Mr. Sherlock Holmes, who was usually very late in the mornings, save upon those")
    assert sents[1].endswith("was seated at the breakfast table.")
    assert sents[2] == (
        "I stood upon the hearth-rug and picked up the stick which our visitor had left behind him the night before."
    )
    assert sents[3] == '"Well, Watson, what do you make of it?"'
    assert sents[-2] == "He turned to Dr. Mortimer, who had arrived at 10 a.m. on the 3rd."
    assert sents[-1] == "Then he spoke."


def test_paragraph_documents_are_capped():
    whole = list(CorpusReader([FIXTURES / "corpus_gutenberg.txt"]))[0].units
    assert [len(u) for u in whole] == [10, 273, 206]
    docs = list(CorpusReader([FIXTURES / "corpus_gutenberg.txt"], max_doc_chars=250))
    assert [d.units for d in docs] == [whole[:2], whole[2:]]  # cut at a paragraph boundary past 250 chars
    # A single paragraph longer than the cap is cut too (memory stays bounded on unbroken text).
    docs = list(CorpusReader([FIXTURES / "corpus_gutenberg.txt"], max_doc_chars=100))
    assert all(sum(map(len, d.units)) < 100 + 80 for d in docs) and len(docs) == 4


def test_wikiextractor_format():
    docs, r = docs_of(FIXTURES / "corpus_wiki.txt")
    assert docs == [
        [
            "Alpha is the first letter of the Greek alphabet.",
            "It has a value of one.",
            "History.",
            "The letter was derived from the Phoenician aleph.",
        ],
        ["Beta is the second letter.", "Gamma is the third letter."],
    ]  # titles dropped (unescaped &amp;)
    assert r.stats.documents == 3 and r.stats.too_short == 1  # the empty stub


def test_jsonl_format_skips_malformed_and_duplicates():
    docs, r = docs_of(FIXTURES / "corpus_news.jsonl")
    assert docs == [
        ["Elections will be held on Sunday.", "Officials said so today.", "Turnout is expected to be high."],
        ["Stocks rose on Monday.", "Oil prices fell by 2 percent."],
    ]
    s = r.stats
    assert (s.documents, s.kept, s.too_short, s.duplicates, s.malformed) == (4, 2, 1, 1, 1)
    assert "skipped 1 malformed" in s.summary() and "1 duplicates" in s.summary()


def test_jsonl_without_text_field_is_an_error(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"body": "hello"}\n{"body": "again"}\n')
    with pytest.raises(ClozeformerError, match=r"x.jsonl:1: JSON record has no string 'text' field \(keys: body\)"):
        list(CorpusReader([p], format="jsonl"))


def test_wikitext_format():
    docs, _ = docs_of(FIXTURES / "corpus_wikitext.txt")
    assert docs == [
        [
            "Homarus gammarus , known as the European lobster , is a species of [UNK] lobster .",
            "It may weigh 6,000 grams .",
            "The lobster is blue-green .",
            "It has two claws .",
        ],
        ["This is the second article .", "It is short ."],
    ]


def test_lines_format_chinese():
    docs, _ = docs_of(FIXTURES / "corpus_lines_zh.txt")
    assert docs == [["今天天气很好。", "我们去公园散步吧！", "你觉得怎么样？", "“好的。”", "他说。"], ["第二个文档只有一句话。"]]


def test_format_override():
    docs, _ = docs_of(FIXTURES / "corpus_bert.txt", format="lines")
    assert len(docs) == 6 and docs[0] == ["The first document starts here."]
    with pytest.raises(ClozeformerError, match="format='xml'"):
        CorpusReader([FIXTURES / "corpus_bert.txt"], format="xml")


# ----------------------------------------------------------------------------- gzip, dirs, globs
def test_gzip_is_transparent(tmp_path):
    for name in ("corpus_wiki.txt", "corpus_news.jsonl", "corpus_gutenberg.txt"):
        gz = tmp_path / (name + ".gz")
        gz.write_bytes(gzip.compress((FIXTURES / name).read_bytes()))
        renamed = tmp_path / ("no_suffix_" + name)  # detected by magic bytes, not the name
        shutil.copy(gz, renamed)
        plain, _ = docs_of(FIXTURES / name)
        assert docs_of(gz)[0] == plain == docs_of(renamed)[0]
        r = CorpusReader([gz])
        list(r)
        assert r.stats.bytes == (FIXTURES / name).stat().st_size  # uncompressed bytes counted
        assert r.disk_bytes_done() == gz.stat().st_size


def test_directories_and_globs(tmp_path):
    d = tmp_path / "corpus"
    (d / "sub").mkdir(parents=True)
    shutil.copy(FIXTURES / "corpus_bert.txt", d / "a.txt")
    shutil.copy(FIXTURES / "corpus_wiki.txt", d / "sub" / "b.txt")
    (d / ".hidden").write_text("ignored\n")
    (d / "sub" / "empty.txt").write_text("")
    (d / "sub" / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    r = CorpusReader([d])
    docs = list(r)
    assert len(docs) == 5
    assert r.stats.files == 4 and r.stats.files_skipped == 2  # empty + binary inside a directory: skipped
    # ... and named, each with why, in a warning and in the summary
    summary = r.stats.summary()
    assert "blob.bin: looks like a binary file" in summary and "empty.txt: file is empty" in summary
    assert r.stats.formats == {"bert": 1, "wikiextractor": 1}
    files = expand_inputs([str(d / "**" / "*.txt")])
    assert [f.path.name for f in files] == ["a.txt", "b.txt", "empty.txt"]
    # The same file twice is read once; exact duplicate documents across files are dropped.
    shutil.copy(d / "a.txt", tmp_path / "copy.txt")
    r = CorpusReader([d / "a.txt", str(d / "a.txt"), tmp_path / "copy.txt"])
    assert len(list(r)) == 3 and r.stats.duplicates == 3 and r.stats.files == 2


def test_min_doc_chars_filter():
    docs, r = docs_of(FIXTURES / "corpus_bert.txt", min_doc_chars=40)
    assert len(docs) == 2 and r.stats.too_short == 1
    assert "kept 2" in r.stats.summary() and "1 too short" in r.stats.summary()
    r = CorpusReader([FIXTURES / "corpus_bert.txt"], min_doc_chars=10_000)
    assert list(r) == []
    with pytest.raises(ClozeformerError, match="no documents left"):
        r.require_documents()


# ----------------------------------------------------------------------------- bad input
def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes("Caf\u00e9 society met.\nIt was fine.\n\nSecond doc here.\n".encode("latin-1"))
    r = CorpusReader([p])
    docs = [d.sentences() for d in r]
    assert docs[0][0] == "Caf\ufffd society met."
    assert r.stats.invalid_bytes == 1 and "replaced 1 invalid UTF-8 bytes" in r.stats.summary()


def test_missing_empty_binary_and_corrupt_files(tmp_path):
    with pytest.raises(ClozeformerError, match="nope.txt: no such file or directory"):
        CorpusReader([tmp_path / "nope.txt"])
    with pytest.raises(ClozeformerError, match="no files match"):
        CorpusReader([str(tmp_path / "*.zzz")])
    empty_dir = tmp_path / "d"
    empty_dir.mkdir()
    with pytest.raises(ClozeformerError, match="directory has no files"):
        CorpusReader([empty_dir])
    with pytest.raises(ClozeformerError, match="no input"):
        CorpusReader([])
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ClozeformerError, match="empty.txt: file is empty"):
        list(CorpusReader([empty]))
    empty_gz = tmp_path / "empty.txt.gz"
    empty_gz.write_bytes(gzip.compress(b""))
    with pytest.raises(ClozeformerError, match="file is empty"):
        list(CorpusReader([empty_gz]))
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(ClozeformerError, match=r"model.bin: looks like a binary file \(NUL byte at offset 0\)"):
        list(CorpusReader([binary]))
    noise = tmp_path / "noise.dat"
    noise.write_bytes(bytes(range(128, 256)) * 40)
    with pytest.raises(ClozeformerError, match="noise.dat: looks like a binary file"):
        list(CorpusReader([noise]))
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress((FIXTURES / "corpus_bert.txt").read_bytes() * 200)[:300])
    with pytest.raises(ClozeformerError, match="cut.txt.gz: corrupt gzip data"):
        list(CorpusReader([truncated]))


@pytest.mark.parametrize("fmt", ["lines", "jsonl", "bert", "paragraph"])
def test_every_format_caps_documents_and_single_lines(tmp_path, fmt):
    """A 3,000-character single line (a 50 MB one, in small) becomes documents of at most
    max_doc_chars, cut at spaces, losing no word: memory and sentence splitting stay bounded."""
    words = [f"w{i}" for i in range(600)]
    line = " ".join(words)
    p = tmp_path / "big.txt"
    p.write_text((json.dumps({"text": line}) if fmt == "jsonl" else line) + "\n", encoding="utf-8")
    r = CorpusReader([p], format=fmt, max_doc_chars=1000, dedupe=False)
    docs = list(r)
    assert len(docs) >= 2 and all(max(map(len, d.units)) <= 1000 and sum(map(len, d.units)) < 2000 for d in docs)
    assert " ".join(u for d in docs for u in d.units).split() == words
    assert r.stats.documents_cut == 1 and "cut 1 over-long documents" in r.stats.summary()


def test_sentence_splitting_keeps_abbreviations_after_a_long_text():
    """The word before each period is looked up locally (linear splitting), with the same answers."""
    text = "x " * 50_000 + "Mr. Smith arrived. He sat down. The U.S. team won."
    out = split_sentences(text)
    assert len(out) == 3 and out[0].endswith("x Mr. Smith arrived.")
    assert out[1:] == ["He sat down.", "The U.S. team won."]
