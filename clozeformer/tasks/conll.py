"""CoNLL-2003 style column files (NER), and word/tag rows from CSV/TSV/JSONL.

    -DOCSTART- -X- -X- O          <- document separator, skipped
                                  <- blank line: end of sentence
    EU NNP B-NP B-ORG             <- word, POS, chunk, NER tag: the word is the FIRST column,
    rejects VBZ B-VP O               the tag the LAST one (so 2-column files work as well)

A file whose lines have a single column is read as unlabelled text (for `predict`).
Predictions are written back in the same layout with the predicted tag appended as a new last
column, the format `conlleval` reads (word ... gold predicted).
"""

from __future__ import annotations

import json
from pathlib import Path

from clozeformer.tasks.common import Problems, Source, TokenExample, iter_records, read_lines
from clozeformer.utils.errors import ClozeformerError

#: CoNLL-2003's tags in the order Hugging Face's `conll2003` dataset numbers them.
CONLL2003_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")


def read_conll(path: str | Path, problems: Problems, labeled: bool | None = True) -> list[TokenExample]:
    name = str(path)
    sentences: list[list[tuple[int, str, str, str]]] = [[]]  # per sentence: (line number, line, word, tag) per word
    n_cols: int | None = None
    for i, line in enumerate(read_lines(path), start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":  # a blank line or a document separator ends a sentence
            sentences.append([])
            continue
        if n_cols is None:
            n_cols = len(fields)
            if labeled and n_cols < 2:
                raise ClozeformerError(f"{name}:{i}: one column only; a train/dev file needs 'word ... tag' columns")
        elif len(fields) != n_cols:
            raise ClozeformerError(f"{name}:{i}: {len(fields)} columns where earlier lines have {n_cols}")
        sentences[-1].append((i, line, fields[0], fields[-1]))
    has_tags = n_cols is not None and n_cols > 1 and labeled is not False
    examples = [
        TokenExample(str(k), list(words), list(tags) if has_tags else None, Source(name, starts[0]), list(lines))
        for k, (starts, lines, words, tags) in enumerate(zip(*s) for s in sentences if s)
    ]
    if not examples:
        raise ClozeformerError(f"{path}: no sentences found")
    return examples


def read_token_table(
    path: str | Path, problems: Problems, *, words_column: str, tags_column: str, labeled: bool | None = True
) -> list[TokenExample]:
    """Word/tag rows: in JSONL lists (`{"tokens": [...], "tags": [...]}`), in CSV/TSV
    whitespace-separated strings (`"EU rejects German call"`, `"B-ORG O B-MISC O"`)."""
    columns, rows = iter_records(path, problems)
    if words_column not in columns:
        raise ClozeformerError(f"{path}:1: no column {words_column!r} (columns: {', '.join(columns)}); pass --text-column")
    has_tags = tags_column in columns and labeled is not False
    if labeled and tags_column not in columns:
        raise ClozeformerError(f"{path}:1: no tag column {tags_column!r} (columns: {', '.join(columns)}); pass --label-column")

    examples: list[TokenExample] = []
    for src, row in rows:
        words = as_list(row.get(words_column), src, words_column)
        tags = as_list(row.get(tags_column), src, tags_column) if has_tags else None
        if not words:
            problems.warn("empty_row", src, "no words; row skipped")
            continue
        if tags is not None and len(tags) != len(words):
            problems.malformed(src, f"{len(words)} words but {len(tags)} tags")
            continue
        examples.append(TokenExample(str(len(examples)), words, tags, src, []))
    if not examples:
        raise ClozeformerError(f"{path}: no usable rows")
    return examples


def as_list(v, src: Source, what: str) -> list[str]:
    """Words or tags of one row: a list, a JSON list in a string, or a whitespace-separated string."""
    if isinstance(v, list):
        return [str(x) for x in v]
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):  # a JSON list inside a CSV cell
            try:
                return [str(x) for x in json.loads(s)]
            except json.JSONDecodeError:
                pass
        return s.split()
    raise ClozeformerError(f"{src}: {what} must be a list or a whitespace-separated string")


def format_conll(examples: list[TokenExample], predictions: list[list[str]]) -> str:
    """Input lines with the predicted tag appended, a blank line after each sentence."""
    out = []
    for ex, tags in zip(examples, predictions):
        out.extend(f"{line} {tag}" for line, tag in zip(ex.lines or ex.words, tags))
        out.append("")
    return "\n".join(out) + "\n"
