"""Your own data: sentence (pair) classification and regression from CSV, TSV or JSONL.

The file needs a header row (CSV/TSV) or keys (JSONL). Columns are chosen with
`--text-column`, `--text-pair-column` and `--label-column`; when not given, the first of the
usual names present is used (`text`/`sentence`/`text_a`/`sentence1`, `text_b`/`sentence2`/
`text_pair`, `label`). TSV is read without quote handling (like GLUE), CSV with standard `"`
quoting. Class labels are strings as written in the file; the label set is discovered from
the training file and saved as `id2label`/`label2id` in the fine-tuned `config.json`.
"""

from __future__ import annotations

from pathlib import Path

from clozeformer.tasks.common import Problems, TextExample, iter_records
from clozeformer.utils.errors import ClozeformerError

TEXT_NAMES = ("text", "sentence", "text_a", "sentence1", "question", "content", "review")
PAIR_NAMES = ("text_b", "sentence2", "text_pair", "pair", "hypothesis")
LABEL_NAMES = ("label", "labels", "score", "target", "class")


def pick_column(
    columns: list[str],
    given: str | None,
    defaults: tuple[str, ...],
    what: str,
    flag: str,
    path: str | Path,
    required: bool = True,
) -> str | None:
    if given is not None:
        if given in columns:
            return given
        if not required:  # e.g. the label column of an unlabelled test file at prediction time
            return None
        raise ClozeformerError(f"{path}:1: no column {given!r} for the {what} (columns: {', '.join(columns)})")
    found = next((name for name in defaults if name in columns), None)
    if found is None and required:
        raise ClozeformerError(
            f"{path}:1: cannot tell which column holds the {what} (columns: {', '.join(columns)}); pass {flag}"
        )
    return found


def read_text_table(
    path: str | Path,
    problems: Problems,
    labeled: bool | None = True,
    *,
    text_column: str | None,
    pair_column: str | None,
    label_column: str | None,
    pair: bool,
    regression: bool,
    id_column: str | None = None,
) -> list[TextExample]:
    columns, rows = iter_records(path, problems)
    text_col = pick_column(columns, text_column, TEXT_NAMES, "text", "--text-column", path)
    pair_col = pick_column(columns, pair_column, PAIR_NAMES, "second text", "--text-pair-column", path) if pair else None
    label_col = pick_column(columns, label_column, LABEL_NAMES, "label", "--label-column", path, required=bool(labeled))
    if label_col is not None and label_col in (text_col, pair_col):
        raise ClozeformerError(f"{path}:1: the label column {label_col!r} is also a text column")
    read_label = label_col is not None and labeled is not False
    examples: list[TextExample] = []
    for src, row in rows:
        text_a = row.get(text_col)
        text_b = row.get(pair_col) if pair_col else None
        if not isinstance(text_a, str) or (pair_col and not isinstance(text_b, str)):
            problems.malformed(src, "missing or non-text value in a text column")
            continue
        label: str | float | None = None
        if read_label:
            raw = row.get(label_col)
            if raw is None or (isinstance(raw, str) and raw.strip() == ""):
                if labeled:
                    problems.warn("missing_label", src, f"empty {label_col!r}; row skipped")
                    continue
            elif regression:
                try:
                    label = float(raw)
                except (TypeError, ValueError):
                    raise ClozeformerError(
                        f"{src}: {label_col} {raw!r} is not a number (regression needs numeric labels)"
                    ) from None
            else:
                if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                    raise ClozeformerError(
                        f"{src}: {label_col} is {type(raw).__name__} {raw!r}; a label must be a string or a number"
                    )
                if isinstance(raw, float) and raw.is_integer():
                    raw = int(raw)
                label = str(raw).strip()
        guid = str(row.get(id_column)) if id_column and row.get(id_column) is not None else str(len(examples))
        examples.append(TextExample(guid, text_a, text_b, label, src))
    if not examples:
        raise ClozeformerError(f"{path}: no usable rows")
    return examples
