"""Hugging Face `datasets` as task data: `--data hf:NAME[:CONFIG]` or a `save_to_disk` directory.

    clozeformer finetune --task sst2 --data hf:nyu-mll/glue:sst2 --model bert-base-uncased ...
    clozeformer finetune --task squad --data hf:rajpurkar/squad ...
    clozeformer evaluate --model my-clf --data ./my_dataset_saved_with_save_to_disk

`hf:NAME[:CONFIG]` goes through `datasets.load_dataset` (the Hub, a local dataset directory, the
standard cache, and offline mode with HF_HUB_OFFLINE=1 / HF_DATASETS_OFFLINE=1); a directory
holding `dataset_dict.json` or `state.json` through `datasets.load_from_disk`. Splits map to
ours (validation -> dev, validation_matched -> dev_matched, ...). Rows become the same examples
the file readers make: the GLUE tasks and SQuAD read their Hub columns with no flags, other data
reads the same column flags as CSV/TSV/JSONL; a ClassLabel column gives label names (or the
GLUE files' "0"/"1" where the task's labels are those); a label of -1 (GLUE's test splits) means
unlabelled. Each example's source is `DATASET[split]:ROW` (row numbers from 1), as a file's line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clozeformer.errors import ClozeformerError
from clozeformer.tasks.common import Answer, Problems, QAExample, Source, TextExample

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
SPLIT_NAMES.update({"test_matched": "test_matched", "test_mismatched": "test_mismatched"})


def is_dataset_ref(item: str) -> bool:
    """`hf:NAME[:CONFIG]`, or a directory written by `save_to_disk`."""
    path = Path(item)
    saved = (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()
    return item.startswith("hf:") or (path.is_dir() and saved)


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
    except ClozeformerError:
        raise
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as e:
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

    def __str__(self) -> str:
        return f"{self.ref}[{self.split}] ({len(self.data):,} rows)"

    def read(self, spec, problems: Problems, labeled: bool | None, columns: dict[str, str | None]) -> list:
        """The split's examples for `spec`; `columns`: the user's text/text_pair/label column flags."""
        names = set(self.data.column_names)
        where = f"{self.ref}[{self.split}]"

        def need(column: str | None, what: str) -> str:
            if column not in names:
                raise ClozeformerError(f"{where}: no {what} column {column!r} (columns: {', '.join(sorted(names))})")
            return column

        if spec.family == "qa":
            q, c = need(columns.get("text") or "question", "question"), need(columns.get("text_pair") or "context", "context")
            a = columns.get("label") or "answers"
            out = []
            for i, row in enumerate(self.data):
                src = Source(where, i + 1)
                problems.row(src)
                answers = row.get(a) or {"text": [], "answer_start": []}
                got = [Answer(t, int(s)) for t, s in zip(answers.get("text", []), answers.get("answer_start", []))]
                if labeled and a not in names:
                    raise ClozeformerError(f"{where}: no answers column {a!r}")
                qid = str(row.get("id", i))
                out.append(QAExample(qid, row[q], row[c], got, not got, src, str(row.get("title", ""))))
            return out
        if spec.family not in ("classification", "regression"):
            raise ClozeformerError(f"--data {self.ref}: task {spec.name} ({spec.family}) reads files, not datasets, for now")
        a, b = GLUE_COLUMNS.get(spec.name, (None, None))
        a = need(columns.get("text") or a or _first(names, ("text", "sentence", "sentence1")), "text")
        b_col = columns.get("text_pair") or b
        b = need(b_col, "second text") if b_col else None
        label = columns.get("label") or "label"
        if labeled and label not in names:
            raise ClozeformerError(f"{where}: no label column {label!r} (columns: {', '.join(sorted(names))})")
        feature = self.data.features.get(label) if label in names else None
        class_names = list(getattr(feature, "names", None) or [])
        fixed = set(spec.labels or ())
        use_names = bool(class_names) and (not fixed or set(class_names) <= fixed)
        out = []
        for i, row in enumerate(self.data):
            src = Source(where, i + 1)
            problems.row(src)
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


def _first(names: set[str], candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if c in names), None)


def dataset_splits(ref: str, wanted: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, DatasetSplit]:
    splits = load(ref)
    missing = [s for s in wanted if s not in splits and s not in optional]
    if missing:
        raise ClozeformerError(f"--data {ref}: no {', '.join(missing)} split (it has {', '.join(splits)})")
    return {s: DatasetSplit(ref, s, splits[s]) for s in wanted if s in splits}
