"""Hugging Face `datasets` as task data: `--data hf:NAME[:CONFIG]` or a `save_to_disk` directory.

    clozeformer finetune --task sst2 --data hf:nyu-mll/glue:sst2 --model bert-base-uncased ...
    clozeformer finetune --task squad --data hf:rajpurkar/squad ...
    clozeformer finetune --task swag --data hf:allenai/swag:regular ...
    clozeformer evaluate --model my-clf --data ./my_dataset_saved_with_save_to_disk

`hf:NAME[:CONFIG]` goes through `datasets.load_dataset` (the Hub, a local dataset directory, the
standard cache, and offline mode with HF_HUB_OFFLINE=1 / HF_DATASETS_OFFLINE=1); a directory
holding `dataset_dict.json` or `state.json` through `datasets.load_from_disk`. Splits map to
ours (validation -> dev, validation_matched -> dev_matched, ...). Rows become the same examples
the file readers make, for every task family. The GLUE tasks, SQuAD, CoNLL-2003 (`tokens`,
`ner_tags`, and `pos_tags`/`chunk_tags` for the echoed CoNLL lines) and SWAG (`sent1`, `sent2`,
`ending0`..`ending3`, `label`) read their Hub columns with no flags; other data reads the same
column flags as CSV/TSV/JSONL (token classification: --text-column the words, --label-column the
tags). A ClassLabel column, or a sequence of them for tags, gives label names (or the GLUE files'
"0"/"1" where the task's labels are those); a label of -1 (GLUE's and SWAG's test splits) means
unlabelled. Each example's source is `DATASET[split]:ROW` (row numbers from 1), as a file's line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clozeformer.tasks.common import Answer, ChoiceExample, Problems, QAExample, Source, TextExample, TokenExample
from clozeformer.tasks.conll import as_list
from clozeformer.tasks.embedding import PairColumns, read_pairs
from clozeformer.tasks.swag import ENDINGS
from clozeformer.utils.errors import ClozeformerError

#: GLUE task -> (first text column, second text column or None) in the Hub's nyu-mll/glue
GLUE_COLUMNS = {
    "sst2": ("sentence", None),
    "cola": ("sentence", None),
    "mrpc": ("sentence1", "sentence2"),
    "stsb": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"),
    "wnli": ("sentence1", "sentence2"),
}
#: the Hub's split names -> ours
SPLIT_NAMES = {"validation": "dev", "validation_matched": "dev_matched", "validation_mismatched": "dev_mismatched"}


def is_dataset_ref(item: str) -> bool:
    """`hf:NAME[:CONFIG]`, or a directory written by `save_to_disk`."""
    return item.startswith("hf:") or any((Path(item) / name).is_file() for name in ("dataset_dict.json", "state.json"))


def load(ref: str) -> dict[str, Any]:
    """Our split name -> datasets.Dataset, for a `--data` item."""
    try:
        import datasets
    except ImportError:
        raise ClozeformerError(f"--data {ref}: reading a Hugging Face dataset needs `datasets` (pip install datasets)") from None
    try:
        if ref.startswith("hf:"):
            name, _, config = ref[3:].partition(":")
            if not name:
                raise ClozeformerError(f"--data {ref}: give hf:NAME or hf:NAME:CONFIG")
            loaded = datasets.load_dataset(name, config or None)
        else:
            loaded = datasets.load_from_disk(ref)
    except (OSError, ValueError) as e:  # OSError: FileNotFoundError, ConnectionError, ...
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ClozeformerError(f"--data {ref}: cannot load the dataset ({first})") from None
    if isinstance(loaded, datasets.Dataset):
        return {"train": loaded}
    return {SPLIT_NAMES.get(split, split): ds for split, ds in loaded.items()}


@dataclass
class DatasetSplit:
    """One split of a dataset, standing where a task file would (printed as its name)."""

    ref: str
    split: str
    data: Any  # datasets.Dataset

    @property
    def where(self) -> str:
        return f"{self.ref}[{self.split}]"

    def __str__(self) -> str:
        return f"{self.where} ({len(self.data):,} rows)"

    def _rows(self, problems: Problems) -> Iterator[tuple[int, Source, dict]]:
        """(index, source, row) of every row, each counted as read."""
        for i, row in enumerate(self.data):
            src = Source(self.where, i + 1)
            problems.row(src)
            yield i, src, row

    def _id_column(self, given: str | None, default: str | None) -> str | None:
        """The --id-column (checked to exist), else `default`."""
        if given and given not in self.data.column_names:
            raise ClozeformerError(f"{self.where}: no id column {given!r} (columns: {', '.join(sorted(self.data.column_names))})")
        return given or default

    def read(self, spec, problems: Problems, labeled: bool | None, columns: dict[str, str | None]) -> list:
        """The split's examples for `spec`; `columns`: the user's text/text_pair/label/id column flags."""
        names, where = set(self.data.column_names), self.where

        def need(column: str | None, what: str) -> str:
            if column not in names:
                raise ClozeformerError(f"{where}: no {what} column {column!r} (columns: {', '.join(sorted(names))})")
            return column

        if spec.family == "qa":
            q, c = need(columns.get("text") or "question", "question"), need(columns.get("text_pair") or "context", "context")
            a = columns.get("label") or "answers"
            out = []
            for i, src, row in self._rows(problems):
                answers = row.get(a) or {}
                got = [Answer(t, int(s)) for t, s in zip(answers.get("text", []), answers.get("answer_start", []))]
                if labeled and a not in names:
                    raise ClozeformerError(f"{where}: no answers column {a!r}")
                out.append(QAExample(str(row.get("id", i)), row[q], row[c], got, not got, src, str(row.get("title", ""))))
            return out
        if spec.family == "token":
            return self._read_tokens(spec, problems, labeled, columns)
        if spec.family == "choice":
            return self._read_choice(problems, labeled, columns)
        if spec.family == "embedding":
            cols = PairColumns(*(columns.get(k) for k in ("text", "text_pair", "label", "negative", "id")))
            rows = ((src, row) for _, src, row in self._rows(problems))
            return read_pairs(list(self.data.column_names), rows, where, problems, labeled, cols)
        a, b = GLUE_COLUMNS.get(spec.name, (None, None))
        a = need(columns.get("text") or a or _first(names, ("text", "sentence", "sentence1")), "text")
        b_col = columns.get("text_pair") or b
        b = need(b_col, "second text") if b_col else None
        label = columns.get("label") or "label"
        if labeled:
            need(label, "label")
        class_names = _class_names(self.data.features.get(label)) if label in names else []
        fixed = set(spec.labels or ())
        use_names = bool(class_names) and (not fixed or set(class_names) <= fixed)
        out = []
        for i, src, row in self._rows(problems):
            raw = row.get(label) if label in names else None
            value: str | float | None
            if raw is None or (isinstance(raw, int) and not isinstance(raw, bool) and raw < 0 and class_names):
                value = None  # GLUE's test splits: -1
            elif spec.family == "regression":
                value = float(raw)
            elif class_names and isinstance(raw, int):
                value = class_names[raw] if use_names else str(raw)
            else:
                value = str(raw)
            if labeled and value is None:
                raise ClozeformerError(f"{src}: no label in column {label!r}")
            out.append(TextExample(str(row.get("idx", i)), str(row[a]), None if b is None else str(row[b]), value, src))
        return out

    def _read_tokens(self, spec, problems: Problems, labeled: bool | None, columns: dict[str, str | None]) -> list:
        """CoNLL-2003 as the Hub has it (`id`, `tokens`, `pos_tags`, `chunk_tags`, `ner_tags` of
        ClassLabel ids), or --text-column / --label-column: the TokenExamples `read_conll` makes of
        the same sentences in a column file, its lines (word, POS, chunk, tag) included."""
        names, where = list(self.data.column_names), self.where
        present = ", ".join(sorted(names))
        words_col = columns.get("text") or "tokens"
        if words_col not in names:
            raise ClozeformerError(f"{where}: no words column {words_col!r} (columns: {present}); pass --text-column")
        tags_col = columns.get("label") or _first(set(names), ("ner_tags", "tags")) or "ner_tags"
        has_tags = tags_col in names
        if labeled and not has_tags:
            raise ClozeformerError(f"{where}: no tag column {tags_col!r} (columns: {present}); pass --label-column")
        id_col = self._id_column(columns.get("id"), "id" if "id" in names else None)
        # the columns between word and tag in a CoNLL-2003 file
        middle = [c for c in ("pos_tags", "chunk_tags") if c in names and c not in (words_col, tags_col)]
        # ClassLabel ids -> names; plain ids under --task conll2003 are the Hub's numbering of its tags
        vocab = {c: _class_names(self.data.features[c]) for c in middle}
        vocab[tags_col] = (_class_names(self.data.features[tags_col]) if has_tags else []) or list(spec.labels or ())
        out: list[TokenExample] = []
        for _, src, row in self._rows(problems):
            words = as_list(row[words_col], src, words_col)
            if not words:
                problems.warn("empty_row", src, "no words; row skipped")
                continue
            if words[0] == "-DOCSTART-":  # a document separator, as read_conll skips it
                continue
            cols = {c: _names_of(row[c], vocab[c], src, c) for c in (*middle, *([tags_col] if has_tags else []))}
            bad = next((c for c, v in cols.items() if len(v) != len(words)), None)
            if bad is not None:
                problems.malformed(src, f"{len(words)} words ({words_col}) but {len(cols[bad])} {bad}")
                continue
            lines = [" ".join(parts) for parts in zip(words, *cols.values())]
            tags = cols[tags_col] if has_tags and labeled is not False else None
            guid = str(row[id_col]) if id_col else str(len(out))
            out.append(TokenExample(guid, words, tags, src, lines))
        if not out:
            raise ClozeformerError(f"{where}: no usable rows")
        return out

    def _read_choice(self, problems: Problems, labeled: bool | None, columns: dict[str, str | None]) -> list:
        """SWAG as the Hub has it (`swag`, config `regular`: sent1, sent2, ending0..3, label; -1 in
        the test split): the ChoiceExamples `read_swag` makes of the same rows in a CSV."""
        names, where = set(self.data.column_names), self.where
        missing = [c for c in ("sent1", "sent2", *ENDINGS) if c not in names]
        if missing:
            raise ClozeformerError(
                f"{where}: no column {', '.join(map(repr, missing))} (columns: {', '.join(sorted(names))}); "
                "expected SWAG's video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0..3,label"
            )
        has_label = "label" in names
        if labeled and not has_label:
            raise ClozeformerError(f"{where}: no 'label' column: a train/dev split needs labels")
        id_col = self._id_column(columns.get("id"), _first(names, ("", "Unnamed: 0")))  # the released CSVs' unnamed index
        out: list[ChoiceExample] = []
        for _, src, row in self._rows(problems):
            label = None
            if has_label and labeled is not False:
                raw = row["label"]
                if raw is None or raw == -1:  # the Hub's test split: unlabelled
                    if labeled:
                        raise ClozeformerError(f"{src}: no label (-1) in column 'label'; a train/dev split needs labels")
                elif str(raw) not in ("0", "1", "2", "3"):
                    raise ClozeformerError(f"{src}: label {raw!r} is not 0, 1, 2 or 3")
                else:
                    label = int(raw)
            guid = str(row[id_col]) if id_col is not None else str(len(out))
            text = ["" if row[c] is None else str(row[c]) for c in ("sent1", "sent2", *ENDINGS)]
            out.append(ChoiceExample(guid, text[0], text[1], text[2:], label, src))
        if not out:
            raise ClozeformerError(f"{where}: no usable rows")
        return out


def _class_names(feature) -> list[str]:
    """The names of a ClassLabel column, or of a sequence (List/Sequence) of ClassLabel; else []."""
    inner = getattr(feature, "feature", feature)
    return list(getattr(inner, "names", None) or [])


def _names_of(value, names: list[str], src: Source, what: str) -> list[str]:
    """One row's tags: ClassLabel ids through `names`, else as the token table reader takes them."""
    if isinstance(value, list) and names and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        bad = next((x for x in value if not 0 <= x < len(names)), None)
        if bad is not None:
            raise ClozeformerError(f"{src}: {what} has id {bad}, outside its {len(names)} names ({', '.join(names[:12])})")
        return [names[x] for x in value]
    return as_list(value, src, what)


def _first(names: set[str], candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if c in names), None)


def dataset_splits(ref: str, wanted: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, DatasetSplit]:
    splits = load(ref)
    missing = [s for s in wanted if s not in splits and s not in optional]
    if missing:
        raise ClozeformerError(f"--data {ref}: no {', '.join(missing)} split (it has {', '.join(splits)})")
    return {s: DatasetSplit(ref, s, splits[s]) for s in wanted if s in splits}
