"""What every task reader shares: example records, file reading with line numbers, counted warnings.

Readers turn files into *examples* (the text as the dataset states it, plus where it came
from); `features.py` / `squad_post.py` turn examples into model inputs. Every example keeps a
`Source` (file, line) so a problem found later (an unseen label, a truncated input) can still
name the line a user has to look at.

User mistakes follow one rule: a problem that makes the whole file unusable (missing, empty,
binary, not UTF-8, a required column absent) raises `ClozeformerError`; a problem confined to
one row (too few fields, an answer not in its context) skips or repairs that row and is
*counted* by `Problems`, which prints the first few with file:line and a total at the end.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import decode_text, json_object

# ----------------------------------------------------------------------------- provenance + warnings


@dataclass(frozen=True)
class Source:
    """Where an example came from: a file and a 1-based line number (0 = the file as a whole)."""

    file: str
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


class Problems:
    """Counted warnings: the first `show` of each kind are printed with file:line, all are counted.

    `kind` is a short stable key ("skipped_row", "truncated", ...) so the totals can be saved
    in a metrics JSON and compared between runs.
    """

    def __init__(self, show: int = 3, stream=None, skip_bad_rows: bool = False) -> None:
        self.show = show
        self.stream = stream
        self.skip_bad_rows = skip_bad_rows
        self.counts: Counter[str] = Counter()
        self.first: dict[str, str] = {}
        self.rows_read: Counter[str] = Counter()  # file -> data rows read
        self.rows_skipped: Counter[str] = Counter()  # file -> malformed rows skipped

    def row(self, where: Source) -> None:
        """Count a data row read from `where.file` (for the kept-of-read summary)."""
        self.rows_read[where.file] += 1

    def malformed(self, where: Source, message: str, known_quirk: bool = False) -> None:
        """A row that cannot be read as it stands: an error naming file and line, unless the
        user asked for --skip-bad-rows (or `known_quirk`: a published dataset's documented
        defect, e.g. QQP's short rows); a skipped row is counted per file and reported."""
        if not (self.skip_bad_rows or known_quirk):
            raise ClozeformerError(f"{where}: {message}; fix the row, or pass --skip-bad-rows to skip such rows (counted)")
        self.rows_skipped[where.file] += 1
        self.warn("malformed_row", where, f"{message}; row skipped")

    def warn(self, kind: str, where: Source | str, message: str) -> None:
        self.counts[kind] += 1
        line = f"warning: {where}: {message}"
        self.first.setdefault(kind, line)
        if self.counts[kind] <= self.show:
            print(line, file=self.stream or sys.stderr)

    def summary(self) -> str:
        """One line per kind that occurred more often than was printed, and per file with
        skipped rows how many of the rows read were kept."""
        lines = [
            f"warning: {n} rows in all had problem '{kind}' (first: {self.first[kind]})"
            for kind, n in sorted(self.counts.items())
            if n > self.show
        ]
        for file, skipped in sorted(self.rows_skipped.items()):
            read = max(self.rows_read[file], skipped)
            lines.append(f"warning: {file}: kept {read - skipped:,} of {read:,} rows ({skipped:,} malformed rows skipped)")
        return "\n".join(lines)

    def report(self) -> None:
        if text := self.summary():
            print(text, file=self.stream or sys.stderr)


# ----------------------------------------------------------------------------- examples


@dataclass
class TextExample:
    """One sentence or sentence pair with a class label (str) or a score (float); a sentence-embedding
    triplet also has its `negative` text."""

    guid: str
    text_a: str
    text_b: str | None
    label: str | float | None
    source: Source
    negative: str | None = None


@dataclass
class TokenExample:
    """One sentence of pre-split words with one tag per word (None when unlabelled)."""

    guid: str
    words: list[str]
    tags: list[str] | None
    source: Source
    lines: list[str] = field(default_factory=list, repr=False)  # raw input lines (CoNLL output echoes them)


@dataclass
class Answer:
    text: str
    start: int  # character offset in the context; -1 when unknown (then only `text` is scored)


@dataclass
class QAExample:
    """A question about a context; `answers` empty + `is_impossible` for SQuAD v2.0 no-answer."""

    qid: str
    question: str
    context: str
    answers: list[Answer]
    is_impossible: bool
    source: Source
    title: str = ""


@dataclass
class ChoiceExample:
    """A context with C candidate continuations; each choice is encoded as (context, prefix + ending)."""

    guid: str
    context: str
    prefix: str
    endings: list[str]
    label: int | None
    source: Source


Example = TextExample | TokenExample | QAExample | ChoiceExample


def unlabeled_text(examples: list[Example]) -> Iterator[str]:
    """The text of `examples` without their labels, one document per example on one line: what
    task-adaptive pretraining (Gururangan et al. 2020) continues the masked LM on. A pair is one
    document (A then B); QA yields each distinct context and each question; multiple choice its
    context and prefix (the endings are mostly wrong continuations). Newlines become spaces."""
    seen: set[str] = set()
    for ex in examples:
        if isinstance(ex, TextExample):
            parts = [ex.text_a if ex.text_b is None else f"{ex.text_a} {ex.text_b}"]
        elif isinstance(ex, TokenExample):
            parts = [" ".join(ex.words)]
        elif isinstance(ex, QAExample):
            parts = ([] if ex.context in seen else [ex.context]) + [ex.question]
            seen.add(ex.context)
        else:
            parts = [f"{ex.context} {ex.prefix}"]
        yield from filter(None, (" ".join(part.split()) for part in parts))


# ----------------------------------------------------------------------------- reading files


def read_text(path: str | Path) -> str:
    """The whole file as text (`utils.io.decode_text`: gzip by its magic bytes, UTF-8, a BOM dropped).

    Raises a one-line `ClozeformerError` for a missing, empty, binary or non-UTF-8 file,
    naming the line of the first undecodable byte.
    """
    path = Path(path)
    if not path.exists():
        raise ClozeformerError(f"{path}: no such file")
    if path.is_dir():
        raise ClozeformerError(f"{path}: is a directory, expected a data file")
    return decode_text(path.read_bytes(), str(path))


def read_lines(path: str | Path) -> list[str]:
    """Lines without their newline characters (\\n, \\r\\n); no trailing empty line."""
    lines = read_text(path).split("\n")
    return [ln.removesuffix("\r") for ln in (lines[:-1] if lines[-1] == "" else lines)]


def iter_tsv(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a tab-separated file, NO quoting (as GLUE's files need).

    GLUE's TSVs are written without quoting and contain bare `"` characters (MRPC: `"The
    foodservice pie business...`); a CSV-style reader would glue lines together at them. This
    is what Google's `run_classifier.py` does (`csv.reader(f, delimiter="\\t", quotechar=None)`).
    """
    yield from ((i, line.split("\t")) for i, line in enumerate(read_lines(path), start=1) if line.strip())


def iter_csv(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(first line number, fields) of a comma-separated file with standard `"` quoting.

    A quoted field may span lines, so each row reports the line it *starts* on.
    A row that spans lines AND has another field count than the header is an unbalanced quote
    swallowing the rows after it: an error naming the line it opens on, never a quiet skip.
    """
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    start, width = 1, None
    try:
        for row in reader:
            end = reader.line_num
            if any(cell.strip() for cell in row):
                if width is None:
                    width = len(row)
                elif end > start and len(row) != width:
                    raise ClozeformerError(
                        f"{path}:{start}: a quoted field opened on this line runs to line {end} (an unbalanced "
                        f'`"`?): {len(row)} fields where the header has {width}; fix the quoting'
                    )
                yield start, row
            start = end + 1
    except csv.Error as e:
        raise ClozeformerError(f"{path}:{start}: malformed CSV ({e})") from None


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) of a JSON-lines file; a `.json` file holding one list of objects works too."""
    text = read_text(path)
    if Path(path).suffix in (".json", ".gz") and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise ClozeformerError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
        for i, obj in enumerate(rows):
            if not isinstance(obj, dict):
                raise ClozeformerError(f"{path}: item {i} of the JSON list is not an object")
            yield 0, obj
        return
    for i, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        yield i, json_object(line, f"{path}:{i}", "; expected one object per line")


def first_row(rows: Iterator[tuple[int, list[str]]], path: str | Path) -> tuple[int, list[str]]:
    """The first (line number, fields) of a table's `rows`, its header; a file without rows is an error."""
    if (first := next(rows, None)) is None:
        raise ClozeformerError(f"{path}: empty file")
    return first


#: file name ending -> table format
_TABLE_FORMATS = {".tsv": "tsv", ".tab": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


def table_format(path: str | Path) -> str:
    """'tsv', 'csv' or 'jsonl' from the file name (`.gz` looked through)."""
    name = Path(path).name.lower().removesuffix(".gz")
    if kind := _TABLE_FORMATS.get(name[name.rfind(".") :]):  # the last .suffix
        return kind
    raise ClozeformerError(f"{path}: unknown table format; use .tsv, .csv, .jsonl or .json")


def iter_records(path: str | Path, problems: Problems) -> tuple[list[str], Iterator[tuple[Source, dict]]]:
    """(column names, rows as {column: value}) of a TSV/CSV with a header row, or of JSONL.

    A row with a different number of fields than the header (a missing tab, a tab inside a
    text) is `Problems.malformed`: an error naming its line, or skipped and counted with
    --skip-bad-rows.
    """
    kind, name = table_format(path), str(path)
    if kind == "jsonl":
        rows = list(iter_jsonl(path))
        if not rows:
            raise ClozeformerError(f"{path}: no rows")
        columns = list(dict.fromkeys(k for _, obj in rows for k in obj))
    else:
        rows = iter_tsv(path) if kind == "tsv" else iter_csv(path)
        columns = [h.strip() for h in first_row(rows, path)[1]]

    def records() -> Iterator[tuple[Source, dict]]:
        for i, (line, row) in enumerate(rows):  # line 0: an item of a JSON list
            src = Source(name, line) if line else Source(f"{name} (item {i} of the JSON list)")
            problems.row(src)
            if isinstance(row, dict):
                yield src, row
            elif len(row) != len(columns):
                problems.malformed(src, f"{len(row)} fields where the header has {len(columns)}")
            else:
                yield src, dict(zip(columns, row))

    return columns, records()


def json_line_index(text: str, key: str = "id") -> dict[str, int]:
    """{value: line number} for every `"key": "value"` in a JSON text (to name lines in errors)."""
    index: dict[str, int] = {}
    pattern = re.compile(r'"' + re.escape(key) + r'"\s*:\s*"((?:[^"\\]|\\.)*)"')
    for m in pattern.finditer(text):
        index.setdefault(m.group(1), text.count("\n", 0, m.start()) + 1)
    return index


def sort_labels(labels) -> list[str]:
    """Labels in a stable order: numerically when all look like numbers, else alphabetically."""
    labels = sorted(set(labels))
    try:
        return sorted(labels, key=float)
    except ValueError:
        return labels
