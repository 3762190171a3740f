"""The nine GLUE tasks (Wang et al. 2019) from the standard GLUE TSV files, quirks included.

| task  | files (train / dev / test)                          | text columns           | label          |
|-------|-----------------------------------------------------|------------------------|----------------|
| CoLA  | train/dev: NO header (source, label, *, sentence)   | sentence               | 0 / 1          |
| SST-2 | header `sentence label`                             | sentence               | 0 / 1          |
| MRPC  | header `Quality #1 ID #2 ID #1 String #2 String`, BOM | #1 String, #2 String | Quality 0 / 1  |
| STS-B | header `index genre ... sentence1 sentence2 score`  | sentence1, sentence2   | score 0..5     |
| QQP   | header `id qid1 qid2 question1 question2 is_duplicate`, rows with missing fields | question1, question2 | 0 / 1 |
| MNLI  | dev_matched.tsv + dev_mismatched.tsv, 12/16 columns | sentence1, sentence2   | gold_label (3 strings) |
| QNLI  | header `index question sentence label`              | question, sentence     | entailment / not_entailment |
| RTE   | header `index sentence1 sentence2 label`            | sentence1, sentence2   | entailment / not_entailment |
| WNLI  | header `index sentence1 sentence2 label`            | sentence1, sentence2   | 0 / 1          |

Test files have a header with an `index` (QQP: `id`) column and no label; predictions for them
are written as the GLUE server's submission files (`CoLA.tsv`, `MNLI-m.tsv`, ...: a header
`index<TAB>prediction`, then one row per test example, labels as the task spells them).
Files are read without quote handling (see `common.iter_tsv`). A row with a wrong number of
fields is an error naming its line (`--skip-bad-rows` skips and counts such rows), except in
QQP, whose published train.tsv has a few (Google's processors skip them with `except
IndexError: continue`): there they are skipped and counted by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from clozeformer.tasks.common import Problems, Source, TextExample, first_row, iter_tsv
from clozeformer.utils.errors import ClozeformerError

_BIN = ("0", "1")
_NLI2 = ("entailment", "not_entailment")


@dataclass(frozen=True)
class GlueTask:
    name: str  # canonical lower-case name: "cola", "sst2", ...
    title: str  # GLUE's spelling: "CoLA", "SST-2", ...
    labels: tuple[str, ...] | None  # None: regression (STS-B)
    text_a: str
    text_b: str | None
    label: str
    metrics: tuple[str, ...]  # first = the task's main metric
    # split -> file name; more than one eval split for MNLI (matched / mismatched)
    files: dict[str, str] = field(default_factory=lambda: {s: f"{s}.tsv" for s in ("train", "dev", "test")})
    # test split -> GLUE submission file name; None: {"test": "<title>.tsv"}
    submission: dict[str, str] | None = None
    # CoLA: train/dev have no header; columns are (source, label, original mark, sentence)
    headerless: dict[str, int] | None = None
    # splits whose absence is not an error (MNLI's diagnostic set AX)
    optional_splits: tuple[str, ...] = ()

    @property
    def eval_splits(self) -> tuple[str, ...]:
        return tuple(s for s in self.files if s.startswith("dev"))

    @property
    def test_splits(self) -> tuple[str, ...]:
        return tuple(s for s in self.files if s.startswith("test") or s == "diagnostic")

    def submission_file(self, split: str) -> str:
        """The GLUE server's file name for the predictions of `split`."""
        return (self.submission or {"test": f"{self.title}.tsv"}).get(split, f"{self.title}-{split}.tsv")


GLUE_TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask("cola", "CoLA", _BIN, "sentence", None, "label", ("mcc", "accuracy"), headerless={"sentence": 3, "label": 1}),
        GlueTask("sst2", "SST-2", _BIN, "sentence", None, "label", ("accuracy",)),
        GlueTask("mrpc", "MRPC", _BIN, "#1 String", "#2 String", "Quality", ("f1", "accuracy")),
        GlueTask("stsb", "STS-B", None, "sentence1", "sentence2", "score", ("spearman", "pearson")),
        GlueTask("qqp", "QQP", _BIN, "question1", "question2", "is_duplicate", ("f1", "accuracy")),
        GlueTask(
            "mnli",
            "MNLI",
            ("contradiction", "entailment", "neutral"),
            "sentence1",
            "sentence2",
            "gold_label",
            ("accuracy",),
            {s: f"{s}.tsv" for s in ("train", "dev_matched", "dev_mismatched", "test_matched", "test_mismatched", "diagnostic")},
            {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv", "diagnostic": "AX.tsv"},
            optional_splits=("diagnostic",),
        ),
        GlueTask("qnli", "QNLI", _NLI2, "question", "sentence", "label", ("accuracy",)),
        GlueTask("rte", "RTE", _NLI2, "sentence1", "sentence2", "label", ("accuracy",)),
        GlueTask("wnli", "WNLI", _BIN, "sentence1", "sentence2", "label", ("accuracy",)),
    )
}


def read_glue(task: GlueTask, path: str | Path, split: str, problems: Problems, labeled: bool | None = True) -> list[TextExample]:
    """Examples of one GLUE file. `labeled`: True requires labels, False ignores them, None reads
    them when the file has them (test files do not)."""
    name = str(path)
    rows = iter_tsv(path)
    line0, fields0 = first_row(rows, path)
    header = [f.strip() for f in fields0]
    if task.headerless and header != ["index", "sentence"]:
        # CoLA train/dev: no header at all, 4 fixed columns
        columns, index_col, n_fields = dict(task.headerless), None, 4
        rows_all = [(line0, fields0), *rows]
    else:
        columns = {c: i for i, c in enumerate(header)}
        index_col = columns.get("index", columns.get("id"))
        n_fields = len(header)
        rows_all = list(rows)
        for col in (task.text_a, task.text_b):
            if col and col not in columns:
                raise ClozeformerError(
                    f"{path}:{line0}: no column {col!r} in the header ({', '.join(header)}); is this a {task.title} file?"
                )
    has_label = task.label in columns
    if labeled and not has_label:
        raise ClozeformerError(
            f"{path}:{line0}: no {task.label!r} column: a {split} file needs labels (columns: {', '.join(columns)})"
        )
    read_label = has_label and labeled is not False

    examples: list[TextExample] = []
    for line, fields in rows_all:
        src = Source(name, line)
        problems.row(src)
        if len(fields) != n_fields:
            # QQP's train.tsv ships such rows (Google's processors skip them): a known quirk of the
            # published files, skipped and counted; any other GLUE file stops with the line
            problems.malformed(src, f"{len(fields)} tab-separated fields, expected {n_fields}", known_quirk=task.name == "qqp")
            continue
        text_a = fields[columns[task.text_a]]
        text_b = fields[columns[task.text_b]] if task.text_b else None
        label = _parse_label(task, fields[columns[task.label]].strip(), src) if read_label else None
        guid = fields[index_col].strip() if index_col is not None else f"{split}-{len(examples)}"
        examples.append(TextExample(guid, text_a, text_b, label, src))
    if not examples:
        raise ClozeformerError(f"{path}: no usable rows")
    return examples


def _parse_label(task: GlueTask, raw: str, src: Source) -> str | float:
    if task.labels is None:
        try:
            return float(raw)
        except ValueError:
            raise ClozeformerError(f"{src}: {task.label} {raw!r} is not a number") from None
    if raw not in task.labels:
        raise ClozeformerError(f"{src}: label {raw!r} is not one of {task.title}'s labels ({', '.join(task.labels)})")
    return raw


def format_submission(task: GlueTask, examples: list[TextExample], predictions: list) -> str:
    """The GLUE server's TSV: `index<TAB>prediction`; STS-B scores clipped to [0, 5]."""
    values = [f"{min(max(float(p), 0.0), 5.0):.3f}" if task.labels is None else str(p) for p in predictions]
    return "\n".join(["index\tprediction", *(f"{ex.guid}\t{v}" for ex, v in zip(examples, values))]) + "\n"
