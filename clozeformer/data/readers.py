"""Streaming corpus readers: files, directories and globs of text in the usual corpus formats.

Formats (auto-detected per file from its first 64 KB, or forced with `format=`):

    bert           one sentence per line, a blank line between documents (Google's
                   create_pretraining_data.py input)
    paragraph      paragraphs separated by blank lines, lines hard-wrapped (Gutenberg books);
                   a file is one document, cut at a paragraph boundary every `max_doc_chars`
    lines          one document per line (CLUECorpusSmall)
    jsonl          one JSON object per line with a `text` field; paragraphs split on "\\n"
                   (WikiExtractor --json, e.g. the Wikinews dump)
    wikiextractor  `<doc id=.. title=..>` ... `</doc>` blocks (WikiExtractor on a Wikipedia dump);
                   the title line is dropped, each remaining line is a paragraph
    wikitext       WikiText-2/103: ` = Title = ` lines start articles, ` = = Section = = `
                   headings are dropped, `@-@` style escapes undone, `<unk>` -> [UNK]

An input `hf:NAME[:CONFIG][@SPLIT]` is a Hugging Face dataset read by `datasets.load_dataset`
with `streaming=True` (memory stays bounded; the Hub, a local dataset directory or the offline
cache), one document per row from its `text` column, paragraphs split on "\\n" as for JSONL.

Any file may be gzip-compressed (detected from its magic bytes, not its name). Memory stays
bounded: files are read line by line, and only the current document is held. Invalid UTF-8
is replaced by U+FFFD and counted; binary files are refused. Documents shorter than
`min_doc_chars` and exact duplicates (a set of 16-byte hashes) are dropped and counted.
"""

from __future__ import annotations

import codecs
import glob
import gzip
import hashlib
import html
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import open_binary

FORMATS = ("auto", "bert", "paragraph", "lines", "jsonl", "wikiextractor", "wikitext")
SNIFF_BYTES = 1 << 16

# ----------------------------------------------------------------------------- invalid UTF-8
# One error handler for all readers: it replaces each invalid byte with U+FFFD (as
# errors="replace" does) and counts the bytes, so a stray Latin-1 byte is a statistic, not a crash.
_INVALID_BYTES = [0]


def _count_and_replace(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    _INVALID_BYTES[0] += exc.end - exc.start
    return "\ufffd", exc.end


codecs.register_error("clozeformer.count", _count_and_replace)


# ----------------------------------------------------------------------------- sentences
_ABBREVIATIONS = frozenset(
    """
mr mrs ms dr prof st jr sr rev hon gen col lt sgt capt cmdr adm maj gov sen rep pres supt insp
mt ft vs etc al cf viz approx ca inc ltd co corp bros dept univ assn est no nos vol vols pp
fig figs eq ch sec art jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
""".split()
)
# An English sentence ends at . ! ? (plus closing quotes/brackets) before whitespace and an
# uppercase letter or digit (possibly behind an opening quote/bracket).
_EN_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[]*[A-Z0-9\u00c0-\u00d6\u00d8-\u00de])")
# A Chinese/Japanese sentence ends at 。！？ (plus closing quotes); no whitespace follows in CJK text.
_ZH_END = re.compile(r"[\u3002\uff01\uff1f]+[\u201d\u2019\"'\u300d\u300f\uff09)]*")


#: how far back from a period the word before it is looked for (bounded: linear splitting)
_WORD_LOOKBACK = 64


def _is_abbreviation(text: str, dot: int) -> bool:
    i, lo = dot, max(0, dot - _WORD_LOOKBACK)
    while i > lo and not text[i - 1].isspace():  # the word before the period, scanned backwards
        i -= 1
    word = text[i:dot].lstrip("\"'\u201c\u2018([")
    initial = len(word) == 1 and word.isalpha() and word.isupper()  # "J. R. R. Tolkien"
    return "." in word or initial or word.lower() in _ABBREVIATIONS  # dotted: U.S, e.g, p.m


def split_sentences(text: str) -> list[str]:
    """Rule-based sentence splitter for English and Chinese paragraph text.

    English: split after . ! ? (and closing quotes) when whitespace and a capital or digit
    follow, except after common abbreviations (Mr., Dr., etc.), initials and dotted acronyms.
    Chinese: split after 。！？ (and closing quotes).
    """
    text = text.strip()
    cuts = {m.end() for m in _ZH_END.finditer(text)}
    for m in _EN_END.finditer(text):
        if not (m.group().startswith(".") and _is_abbreviation(text, m.start())):
            cuts.add(m.end())
    bounds = [0, *sorted(cuts), len(text)]
    pieces = (text[a:b].strip() for a, b in zip(bounds, bounds[1:]))
    return [p for p in pieces if p]


# ----------------------------------------------------------------------------- documents
@dataclass
class Document:
    """One document: `units` are paragraphs (sentence-split later) or, when `presplit`, sentences."""

    units: list[str]
    presplit: bool
    source: str

    def digest(self) -> bytes:
        return hashlib.blake2b("\n".join(self.units).encode("utf-8"), digest_size=16).digest()

    def sentences(self) -> list[str]:
        return list(self.units) if self.presplit else [s for u in self.units for s in split_sentences(u)]


@dataclass
class ReaderStats:
    """What a reader saw. `documents` counts every document parsed, before filtering."""

    files: int = 0
    files_skipped: int = 0  # empty or binary files met inside a directory or glob
    skipped_files: list = field(default_factory=list)  # their paths and why (first 20)
    documents_cut: int = 0  # documents (or single lines) over max_doc_chars, cut into pieces
    documents: int = 0
    kept: int = 0
    too_short: int = 0
    duplicates: int = 0
    malformed: int = 0  # unparseable records (bad JSON line, JSON without text), skipped
    invalid_bytes: int = 0  # invalid UTF-8 bytes replaced by U+FFFD
    bytes: int = 0  # uncompressed bytes read
    formats: dict = field(default_factory=dict)  # format -> number of files

    def summary(self) -> str:
        filtered = self.too_short + self.duplicates
        fmts = ", ".join(f"{k} {v}" for k, v in sorted(self.formats.items()))
        return (
            f"read {self.documents:,} documents from {self.files:,} files ({self.bytes / 1e6:,.1f} MB; {fmts}); "
            f"kept {self.kept:,}; filtered {filtered:,} ({self.too_short:,} too short, "
            f"{self.duplicates:,} duplicates); skipped {self.malformed:,} malformed records and "
            f"{self.files_skipped:,} files{self._skipped_names()}; replaced {self.invalid_bytes:,} invalid UTF-8 bytes"
            + (f"; cut {self.documents_cut:,} over-long documents" if self.documents_cut else "")
        )

    def _skipped_names(self) -> str:
        if not self.skipped_files:
            return ""
        more = self.files_skipped - len(self.skipped_files[:3])
        return " (" + "; ".join(self.skipped_files[:3]) + (f"; {more} more" if more > 0 else "") + ")"


@dataclass(frozen=True)
class InputFile:
    path: Path
    explicit: bool  # named on the command line (errors are fatal) vs found in a directory/glob


def check_corpus_args(input: str | list[str], out: str, format: str) -> list[str]:
    """The --input/--out/--format checks of `prepare` and `tokenizer train`; returns `input` as a list."""
    input = [input] if isinstance(input, str) else input
    if not input:
        raise ClozeformerError("--input: give at least one file, directory or glob")
    if not out:
        raise ClozeformerError("--out: give the output directory")
    if format not in FORMATS:
        raise ClozeformerError(f"--format {format!r}: expected one of {', '.join(FORMATS)}")
    return input


def expand_inputs(inputs: Sequence[str | os.PathLike]) -> list[InputFile]:
    """Files named, files under directories (recursively, sorted, hidden ones skipped), glob matches."""
    if not inputs:
        raise ClozeformerError("no input given (--input FILE|DIR|GLOB ...)")
    out: list[InputFile] = []
    for item in inputs:
        p = Path(item)
        if p.is_file():
            out.append(InputFile(p, True))
            continue
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and not any(s.startswith(".") for s in q.relative_to(p).parts))
            empty = f"{p}: directory has no files"
        elif any(c in str(item) for c in "*?["):  # a glob
            found = sorted(Path(q) for q in glob.glob(str(item), recursive=True) if Path(q).is_file())
            empty = f"{item}: no files match this pattern"
        else:
            raise ClozeformerError(f"{p}: no such file or directory")
        if not found:
            raise ClozeformerError(empty)
        out.extend(InputFile(q, False) for q in found)
    unique: dict[Path, InputFile] = {}
    for f in out:
        unique.setdefault(f.path.resolve(), f)  # the first mention of a file wins
    return list(unique.values())


def sniff(path: Path) -> bytes:
    """The first SNIFF_BYTES bytes of the decompressed file."""
    try:
        raw, stream = open_binary(path)
    except OSError as e:
        raise ClozeformerError(f"{path}: cannot open ({e.strerror})") from None
    try:
        return stream.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as e:
        raise ClozeformerError(f"{path}: corrupt gzip data ({e})") from None
    finally:
        stream.close()
        raw.close()


def why_not_text(sample: bytes) -> str | None:
    """None when `sample` looks like text, else why not (empty, binary)."""
    if not sample:
        return "file is empty"
    nul = sample.find(b"\x00")
    if nul >= 0:
        return f"looks like a binary file (NUL byte at offset {nul}), not text"
    body = sample[:-4] if len(sample) == SNIFF_BYTES else sample  # a cut multi-byte char is fine
    bad = len(body) - len(body.decode("utf-8", errors="ignore").encode("utf-8"))
    if body and bad > 0.3 * len(body):
        return f"looks like a binary file ({bad} of the first {len(body)} bytes are not UTF-8), not text"
    return None


_WIKITEXT_TITLE = re.compile(r"^ = [^=].* = ?$")
_WIKITEXT_HEADING = re.compile(r"^ (= )+.*( =)+ ?$")
_TERMINAL = tuple(".!?\"'\u201d\u2019)\u3002\uff01\uff1f\u300d\u300f")


def detect_format(sample: str) -> str:
    """Guess the format of a file from the start of its text (see module docstring)."""
    lines = sample.splitlines()
    if len(sample) >= SNIFF_BYTES - 4 and len(lines) > 1:
        lines = lines[:-1]  # probably cut
    nonblank = [ln.strip() for ln in lines if ln.strip()]
    if not nonblank:
        return "lines"
    first = nonblank[0]
    if first.startswith("<doc ") or first == "<doc>":
        return "wikiextractor"
    if first.startswith("{"):
        try:
            if isinstance(json.loads(first), dict):
                return "jsonl"
        except json.JSONDecodeError:
            pass
    if any(_WIKITEXT_TITLE.match(ln) for ln in lines):
        return "wikitext"
    if len(nonblank) == len(lines):
        return "lines"
    mean_len = sum(map(len, nonblank)) / len(nonblank)
    ends = sum(ln.endswith(_TERMINAL) for ln in nonblank) / len(nonblank)
    if mean_len > 200 or ends < 0.5:
        return "paragraph"  # long lines = one paragraph each; short unterminated ones = hard-wrapped
    return "bert"


# ----------------------------------------------------------------------------- per-format parsers
_TITLE_ATTR = re.compile(r'title="([^"]*)"')
_WIKITEXT_ESCAPE = re.compile(r" @(.)@ ")


def _parse_bert(lines: Iterable[str], source: str, max_chars: int, stats: ReaderStats) -> Iterator[Document]:
    units: list[str] = []
    size = 0
    for line in lines:
        s = line.strip()
        if s:
            units.append(s)
            size += len(s)
        if (not s and units) or size >= max_chars:
            yield Document(units, True, source)
            units, size = [], 0
    if units:
        yield Document(units, True, source)


def _parse_paragraph(lines: Iterable[str], source: str, max_chars: int, stats: ReaderStats) -> Iterator[Document]:
    paras: list[str] = []
    block: list[str] = []
    size = block_size = 0
    for line in lines:
        s = line.strip()
        if s:
            block.append(s)
            block_size += len(s)
        if (not s or block_size >= max_chars) and block:
            paras.append(" ".join(block))
            size += block_size
            block, block_size = [], 0
            if size >= max_chars:  # bounded memory: a huge book becomes several documents
                yield Document(paras, False, source)
                paras, size = [], 0
    if block:
        paras.append(" ".join(block))
    if paras:
        yield Document(paras, False, source)


def _parse_lines(lines: Iterable[str], source: str, max_chars: int, stats: ReaderStats) -> Iterator[Document]:
    for line in lines:
        s = line.strip()
        if s:
            yield Document([s], False, source)


def _parse_jsonl(lines: Iterable[str], source: str, max_chars: int, stats: ReaderStats) -> Iterator[Document]:
    good = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            obj = None
        text = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(text, str):
            if good == 0 and isinstance(obj, dict):
                # The very first record has no text: a wrong file or field, not a stray bad line.
                raise ClozeformerError(
                    f"{source}:{lineno}: JSON record has no string 'text' field (keys: {', '.join(sorted(obj)[:8])})"
                )
            stats.malformed += 1
            continue
        good += 1
        yield Document([p.strip() for p in text.split("\n") if p.strip()], False, source)  # empty: filtered as too short


def _parse_wikiextractor(lines: Iterable[str], source: str, max_chars: int, stats: ReaderStats) -> Iterator[Document]:
    paras: list[str] | None = None
    title = ""
    first = True
    for line in lines:
        s = line.strip()
        if s.startswith("<doc") and s.endswith(">"):
            if paras:  # an unclosed <doc>: keep what it had
                yield Document(paras, False, source)
            m = _TITLE_ATTR.search(s)
            title = html.unescape(m.group(1)).strip() if m else ""
            paras, first = [], True
        elif s == "</doc>":
            if paras is not None:
                yield Document(paras, False, source)  # empty: filtered as too short
            paras = None
        elif paras is not None and s:
            if not (first and s == title):  # WikiExtractor repeats the title as the first line
                paras.append(s)
            first = False
    if paras:
        yield Document(paras, False, source)


def _parse_wikitext(lines: Iterable[str], source: str, max_chars: int, stats: ReaderStats) -> Iterator[Document]:
    paras: list[str] = []
    for line in lines:
        line = line.rstrip("\n")
        if _WIKITEXT_TITLE.match(line):
            if paras:
                yield Document(paras, False, source)
            paras = []
        elif line.strip() and not _WIKITEXT_HEADING.match(line):
            paras.append(_WIKITEXT_ESCAPE.sub(r"\1", line.strip()).replace("<unk>", "[UNK]"))
    if paras:
        yield Document(paras, False, source)


_PARSERS = {
    "bert": _parse_bert,
    "paragraph": _parse_paragraph,
    "lines": _parse_lines,
    "jsonl": _parse_jsonl,
    "wikiextractor": _parse_wikiextractor,
    "wikitext": _parse_wikitext,
}


# ----------------------------------------------------------------------------- the reader
def _pieces(unit: str, max_chars: int) -> list[str]:
    """`unit` cut into pieces of at most `max_chars`, at the last whitespace before each limit
    (hard cuts only inside a run of max_chars non-space characters)."""
    out, start = [], 0
    while len(unit) - start > max_chars:
        end = start + max_chars
        cut = unit.rfind(" ", start + max_chars // 2, end)
        cut = end if cut < 0 else cut
        out.append(unit[start:cut])
        start = cut + (cut < end)  # skip the space cut at
    out.append(unit[start:])
    return out


def bounded(docs: Iterable[Document], max_chars: int, stats: ReaderStats) -> Iterator[Document]:
    """Every format's documents held near `max_chars`, as the paragraph reader cuts books: a
    document under 2 x max_chars whose units are too passes as it is; otherwise a unit (line,
    paragraph, JSON text) over 2 x max_chars is cut at spaces into pieces of max_chars (a 50 MB
    single line), and the document ends at each unit boundary at or past max_chars. Memory and
    the sentence splitter's work stay bounded whatever the input."""
    for doc in docs:
        total = sum(map(len, doc.units))
        if total < 2 * max_chars:
            yield doc  # within the rule (the readers that cut themselves produce these)
            continue
        stats.documents_cut += 1
        units: list[str] = []
        size = 0
        for unit in doc.units:
            for piece in _pieces(unit, max_chars) if len(unit) > 2 * max_chars else [unit]:
                units.append(piece)
                size += len(piece)
                if size >= max_chars:
                    yield Document(units, doc.presplit, doc.source)
                    units, size = [], 0
        if units:
            yield Document(units, doc.presplit, doc.source)


class CorpusReader:
    """Iterate the documents of `inputs` (files, directories, globs), filtered and counted.

    `reader.stats` fills in as iteration proceeds; `reader.disk_bytes_done()` and
    `reader.disk_bytes_total` give progress in on-disk (compressed) bytes.
    """

    def __init__(
        self,
        inputs: Sequence[str | os.PathLike],
        format: str = "auto",
        *,
        min_doc_chars: int = 0,
        dedupe: bool = True,
        max_doc_chars: int = 1_000_000,
    ) -> None:
        if format not in FORMATS:
            raise ClozeformerError(f"format={format!r}: expected one of {', '.join(FORMATS)}")
        self.format, self.dedupe, self.min_doc_chars, self.max_doc_chars = format, dedupe, int(min_doc_chars), int(max_doc_chars)
        inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
        self.datasets = [str(i) for i in inputs if str(i).startswith("hf:")]  # streamed Hugging Face datasets
        paths = [i for i in inputs if not str(i).startswith("hf:")]
        self.files = expand_inputs(paths) if paths or not self.datasets else []
        self.disk_bytes_total = sum(f.path.stat().st_size for f in self.files)
        self.stats = ReaderStats()
        self._done_bytes = 0
        self._raw = None

    def progress_bar(self, desc: str, enabled: bool, **kwargs):
        """A tqdm bar over the on-disk bytes; move it with `bar.update(reader.disk_bytes_done() - bar.n)`."""
        from clozeformer.utils.progress import progress_bar

        return progress_bar(self.disk_bytes_total, unit="B", unit_scale=True, desc=desc, enabled=enabled, **kwargs)

    def disk_bytes_done(self) -> int:
        try:
            pos = self._raw.tell() if self._raw is not None else 0
        except (OSError, ValueError):
            pos = 0
        return self._done_bytes + pos

    def _file_documents(self, f: InputFile) -> Iterator[Document]:
        sample = sniff(f.path)
        problem = why_not_text(sample)
        if problem:
            if f.explicit:
                raise ClozeformerError(f"{f.path}: {problem}")
            self.stats.files_skipped += 1
            if len(self.stats.skipped_files) < 20:
                self.stats.skipped_files.append(f"{f.path}: {problem}")
            print(f"warning: {f.path}: {problem}; skipped", file=sys.stderr)
            return
        fmt = self.format if self.format != "auto" else detect_format(sample.decode("utf-8", errors="replace"))
        self.stats.formats[fmt] = self.stats.formats.get(fmt, 0) + 1
        raw, stream = open_binary(f.path)
        self._raw = raw
        buffered = io.BufferedReader(stream, buffer_size=1 << 16)
        text: TextIO = io.TextIOWrapper(buffered, encoding="utf-8", errors="clozeformer.count")
        invalid0 = _INVALID_BYTES[0]
        try:
            yield from _PARSERS[fmt](text, str(f.path), self.max_doc_chars, self.stats)
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise ClozeformerError(f"{f.path}: corrupt gzip data ({e})") from None
        finally:
            self.stats.invalid_bytes += _INVALID_BYTES[0] - invalid0
            self.stats.bytes += stream.tell()  # the (decompressed) bytes read, for MB/s
            self._done_bytes += f.path.stat().st_size
            self._raw = None
            text.close()
            raw.close()

    def _dataset_documents(self, ref: str) -> Iterator[Document]:
        """Rows of a streamed Hugging Face dataset `hf:NAME[:CONFIG][@SPLIT]` (default split train)."""
        try:
            import datasets
        except ImportError:
            raise ClozeformerError(f"{ref}: reading a Hugging Face dataset needs `datasets` (pip install datasets)") from None
        spec, _, split = ref[3:].partition("@")
        name, _, config = spec.partition(":")
        try:
            rows = datasets.load_dataset(name, config or None, split=split or "train", streaming=True)
            for row in rows:
                text = row.get("text") if isinstance(row, dict) else None
                if not isinstance(text, str):
                    raise ClozeformerError(f"{ref}: rows need a string 'text' column (columns: {', '.join(sorted(row))})")
                self.stats.bytes += len(text.encode("utf-8"))
                yield Document([p.strip() for p in text.split("\n") if p.strip()], False, ref)  # empty: filtered as too short
        except (OSError, ValueError) as e:  # FileNotFoundError, ConnectionError, ...
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ClozeformerError(f"{ref}: cannot read the dataset ({first})") from None

    def __iter__(self) -> Iterator[Document]:
        seen: set[bytes] = set()
        sources = [*map(self._file_documents, self.files), *map(self._dataset_documents, self.datasets)]
        for documents in sources:
            self.stats.files += 1
            for doc in bounded(documents, self.max_doc_chars, self.stats):
                self.stats.documents += 1
                if not doc.units or sum(map(len, doc.units)) < self.min_doc_chars:  # an empty page is too short too
                    self.stats.too_short += 1
                    continue
                if self.dedupe:
                    d = doc.digest()
                    if d in seen:
                        self.stats.duplicates += 1
                        continue
                    seen.add(d)
                self.stats.kept += 1
                yield doc

    def require_documents(self) -> None:
        """Raise the 'nothing left' error after iteration when no document survived."""
        if self.stats.kept == 0:
            raise ClozeformerError(f"no documents left after reading and filtering the input: {self.stats.summary()}")
