"""Which tasks exist: name -> `TaskSpec` (head family, reader, file names, labels, metrics).

A task is one of five *families*, each with its model class:

| family         | model                          | tasks                                              |
|----------------|--------------------------------|----------------------------------------------------|
| classification | BertForSequenceClassification  | GLUE (not STS-B), ChnSentiCorp, classification, pair-classification |
| regression     | BertForSequenceClassification (num_labels=1) | STS-B, regression                    |
| token          | BertForTokenClassification     | conll2003, token-classification                    |
| qa             | BertForQuestionAnswering       | squad, squad_v2, xquad, cmrc2018, qa               |
| choice         | BertForMultipleChoice          | swag                                               |
| embedding      | BertModel + pooling (a sentence-transformers directory) | sentence-embedding (tasks/embedding.py) |

`resolve_files` maps `--data` (a directory with standard file names, SPLIT=FILE items, or bare
files in split order) to one file per split.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from clozeformer.tasks import conll, custom, embedding, glue, squad, swag
from clozeformer.tasks.common import Problems, read_text
from clozeformer.tasks.task_config import TaskDataConfig
from clozeformer.utils.errors import ClozeformerError

Family = Literal["classification", "regression", "token", "qa", "choice", "embedding"]

MODEL_CLASS: dict[str, str] = {
    "classification": "BertForSequenceClassification",
    "regression": "BertForSequenceClassification",
    "token": "BertForTokenClassification",
    "qa": "BertForQuestionAnswering",
    "choice": "BertForMultipleChoice",
    "embedding": "BertModel",
}


@dataclass
class TaskSpec:
    name: str
    family: Family
    title: str
    # read(path, problems, labeled) -> examples; labeled: True (required) / None (if present)
    read: Callable
    # split -> candidate file names in a --data directory, first match wins (globs allowed)
    splits: dict[str, tuple[str, ...]]
    eval_splits: tuple[str, ...] = ("dev",)
    test_splits: tuple[str, ...] = ("test",)
    optional_splits: tuple[str, ...] = ()
    labels: tuple[str, ...] | None = None  # fixed label set; None: discovered from the training file
    metrics: tuple[str, ...] = ("accuracy",)  # the first is the main metric (best checkpoint, benchmarks)
    default_max_seq_len: int = 128
    qa_metric: Literal["squad_v1", "squad_v2", "cmrc", "auto"] | None = None
    glue: glue.GlueTask | None = None

    @property
    def main_metric(self) -> str:
        return self.metrics[0]

    @property
    def model_class_name(self) -> str:
        return MODEL_CLASS[self.family]

    def split_group(self, which: str) -> tuple[str, ...]:
        """'dev' -> the eval splits (MNLI: matched + mismatched), 'test' -> the test splits."""
        if which == "dev":
            return self.eval_splits
        if which == "test":
            return self.test_splits
        if which in self.splits:
            return (which,)
        raise ClozeformerError(
            f"unknown split {which!r} for task {self.name}; choose dev, test or one of {', '.join(self.splits)}"
        )


CUSTOM_TASKS = ("classification", "pair-classification", "regression", "token-classification", "qa", "sentence-embedding")
_TABLE_EXT = ("tsv", "csv", "jsonl", "json", "tsv.gz", "csv.gz", "jsonl.gz", "json.gz")
_STEMS = {"train": ("train",), "dev": ("dev", "valid", "validation", "val"), "test": ("test",)}
_CUSTOM_SPLITS = {s: tuple(f"{stem}.{e}" for stem in stems for e in _TABLE_EXT) for s, stems in _STEMS.items()}
_TOKEN_SPLITS = {
    s: tuple(f"{stem}.{e}" for stem in stems for e in ("txt", "conll", "txt.gz", *_TABLE_EXT)) for s, stems in _STEMS.items()
}
_NER_METRICS = ("f1", "precision", "recall", "accuracy")

#: span QA task -> (title, train file, dev file, metric)
_QA_TASKS = {
    "squad": ("SQuAD v1.1", "train-v1.1.json", "dev-v1.1.json", "squad_v1"),
    "squad_v2": ("SQuAD v2.0", "train-v2.0.json", "dev-v2.0.json", "squad_v2"),
    "xquad": ("XQuAD", "train.json", "xquad.en.json", "squad_v1"),
    "cmrc2018": ("CMRC 2018", "cmrc2018_train.json", "cmrc2018_dev.json", "cmrc"),
}
_TASK_NAMES = (*glue.GLUE_TASKS, *_QA_TASKS, "conll2003", "swag", "chnsenticorp", *CUSTOM_TASKS)
#: other spellings of task names; names are compared by their letters and digits (`_key`)
_ALIASES = {
    "squad": ("squadv1", "squadv11", "squad11"),
    "squad_v2": ("squadv20", "squad2", "squad20"),
    "xquad": ("xquaden",),
    "cmrc2018": ("cmrc",),
    "conll2003": ("conll",),
    "token-classification": ("ner",),
    "qa": ("questionanswering",),
    "sentence-embedding": ("sentenceembeddings", "embedding", "embeddings", "biencoder", "sentencesimilarity"),
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _canonical(name: str) -> str:
    aliases = {_key(n): n for n in _TASK_NAMES}
    aliases.update((alias, n) for n, spellings in _ALIASES.items() for alias in spellings)
    if _key(name) not in aliases:
        raise ClozeformerError(f"unknown task {name!r}; choose one of: {', '.join(_TASK_NAMES)}")
    return aliases[_key(name)]


def get_task(name: str | None, cfg: TaskDataConfig) -> TaskSpec:
    """The spec of task `name`; custom tasks take their columns from `cfg`."""
    if not name:
        raise ClozeformerError("--task is required (e.g. --task sst2, or --task classification for your data)")
    canon = _canonical(name)
    if canon in glue.GLUE_TASKS:
        g = glue.GLUE_TASKS[canon]
        family: Family = "regression" if g.labels is None else "classification"
        return TaskSpec(
            canon,
            family,
            g.title,
            partial(_read_glue, g),
            {s: (f,) for s, f in g.files.items()},
            g.eval_splits,
            g.test_splits,
            g.optional_splits,
            g.labels,
            g.metrics,
            glue=g,
        )
    if canon in _QA_TASKS:
        title, train, dev, metric = _QA_TASKS[canon]
        splits = {
            "train": (train, "train.json", "*train*.json"),
            "dev": (dev, "dev.json", "*dev*.json"),
            "test": ("test.json", "*test*.json"),
        }
        return TaskSpec(
            canon, "qa", title, squad.read_squad, splits, metrics=("f1", "exact_match"), default_max_seq_len=384, qa_metric=metric
        )
    if canon == "conll2003":
        splits = {
            "train": ("train.txt", "eng.train"),
            "dev": ("valid.txt", "dev.txt", "eng.testa"),
            "test": ("test.txt", "eng.testb"),
        }
        return TaskSpec(
            canon, "token", "CoNLL-2003 NER", conll.read_conll, splits, labels=conll.CONLL2003_TAGS, metrics=_NER_METRICS
        )
    if canon == "swag":
        splits = {"train": ("train.csv",), "dev": ("val.csv", "dev.csv"), "test": ("test.csv",)}
        return TaskSpec(canon, "choice", "SWAG", swag.read_swag, splits)
    if canon == "chnsenticorp":
        read = partial(
            custom.read_text_table, text_column="text_a", pair_column=None, label_column="label", pair=False, regression=False
        )
        splits = {s: (f"{s}.tsv",) for s in ("train", "dev", "test")}
        return TaskSpec(canon, "classification", "ChnSentiCorp", read, splits, labels=("0", "1"))
    return _custom_task(canon, cfg)


def read_examples(
    spec: TaskSpec, source: Any, problems: Problems, labeled: bool | None, cfg: TaskDataConfig | None = None
) -> list:
    """The examples of one split: a file through the task's reader, or a dataset split through its
    columns (the GLUE/SQuAD/CoNLL-2003/SWAG ones, else cfg's --text-column/--text-pair-column/
    --label-column; --id-column for token and choice tasks)."""
    from clozeformer.tasks.hfdatasets import DatasetSplit

    if isinstance(source, DatasetSplit):
        columns = {k: getattr(cfg, f"{k}_column", None) for k in ("text", "text_pair", "label", "negative", "id")}
        return source.read(spec, problems, labeled, columns)
    return spec.read(source, problems, labeled)


def _read_glue(task: glue.GlueTask, path, problems, labeled=True):
    return glue.read_glue(task, path, Path(path).stem, problems, labeled)


def _custom_task(canon: str, cfg: TaskDataConfig) -> TaskSpec:
    if canon in ("classification", "pair-classification", "regression"):
        regression = canon == "regression"
        read = partial(
            custom.read_text_table,
            text_column=cfg.text_column,
            pair_column=cfg.text_pair_column,
            label_column=cfg.label_column,
            pair=canon == "pair-classification" or (regression and cfg.text_pair_column is not None),
            regression=regression,
            id_column=cfg.id_column,
        )
        family: Family = "regression" if regression else "classification"
        metrics = ("pearson", "spearman", "mse") if regression else ("accuracy", "macro_f1")
        return TaskSpec(canon, family, canon, read, dict(_CUSTOM_SPLITS), metrics=metrics)
    if canon == "token-classification":

        def read_tokens(path, problems, labeled=True):
            if Path(path).name.lower().removesuffix(".gz").endswith((".txt", ".conll", ".iob", ".bio")):
                return conll.read_conll(path, problems, labeled)
            return conll.read_token_table(
                path, problems, words_column=cfg.text_column or "tokens", tags_column=cfg.label_column or "tags", labeled=labeled
            )

        return TaskSpec(canon, "token", canon, read_tokens, dict(_TOKEN_SPLITS), metrics=_NER_METRICS)
    if canon == "sentence-embedding":
        read = partial(embedding.read_pair_table, cols=pair_columns(cfg))
        title = "sentence embeddings"
        return TaskSpec(
            canon, "embedding", title, read, dict(_CUSTOM_SPLITS), metrics=("spearman", "pearson"), default_max_seq_len=256
        )

    # qa
    def read_qa(path, problems, labeled=True):
        if Path(path).name.lower().removesuffix(".gz").endswith(".json") and _looks_like_squad(path):
            return squad.read_squad(path, problems, labeled)
        return squad.read_qa_table(
            path,
            problems,
            question=cfg.text_column or "question",
            context=cfg.text_pair_column or "context",
            answer=cfg.label_column or "answers",
            answer_start=cfg.answer_start_column,
            id_column=cfg.id_column or "id",
            labeled=labeled,
        )

    return TaskSpec(
        canon, "qa", "span QA", read_qa, dict(_CUSTOM_SPLITS), metrics=("f1",), default_max_seq_len=384, qa_metric="auto"
    )


def pair_columns(cfg: TaskDataConfig) -> embedding.PairColumns:
    return embedding.PairColumns(cfg.text_column, cfg.text_pair_column, cfg.label_column, cfg.negative_column, cfg.id_column)


def _looks_like_squad(path) -> bool:
    text = read_text(path)
    return text.lstrip().startswith("{") and '"data"' in text[: 1 << 20]


# ----------------------------------------------------------------------------- --data -> files


def _find(directory: Path, candidates: tuple[str, ...]) -> Path | None:
    for pattern in candidates:
        if any(ch in pattern for ch in "*?["):
            hits = sorted(p for p in directory.glob(pattern) if p.is_file())
            if len(hits) > 1:
                raise ClozeformerError(
                    f"{directory}: several files match {pattern!r} ({', '.join(p.name for p in hits)}); pass SPLIT=FILE in --data"
                )
            if hits:
                return hits[0]
        elif (directory / pattern).is_file():
            return directory / pattern
    return None


def resolve_files(spec: TaskSpec, data: list[str], wanted: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """One file per wanted split from `--data` items: DIR, SPLIT=FILE, or FILE (in split order);
    or one Hugging Face dataset (`hf:NAME[:CONFIG]` or a save_to_disk directory), whose splits
    stand in for files (hfdatasets.DatasetSplit; read them with `read_examples`)."""
    if not data:
        raise ClozeformerError("--data is required: a directory, or files (SPLIT=FILE or FILE ...)")
    from clozeformer.tasks import hfdatasets

    if any(hfdatasets.is_dataset_ref(item) for item in data):
        if len(data) != 1:
            raise ClozeformerError("--data: give one Hugging Face dataset (hf:NAME[:CONFIG] or a save_to_disk dir) alone")
        return hfdatasets.dataset_splits(data[0], wanted, optional)
    explicit: dict[str, Path] = {}
    dirs: list[Path] = []
    bare: list[Path] = []
    for item in data:
        split, sep, rest = item.partition("=")
        if sep and not Path(item).exists():
            if split not in spec.splits:
                raise ClozeformerError(
                    f"--data {item}: unknown split {split!r} for task {spec.name} (splits: {', '.join(spec.splits)})"
                )
            path = Path(rest)
            if not path.is_file():
                raise ClozeformerError(f"{path}: no such file (from --data {item})")
            explicit[split] = path
            continue
        path = Path(item)
        if path.is_dir():
            dirs.append(path)
        elif path.is_file():
            bare.append(path)
        else:
            raise ClozeformerError(f"{path}: no such file or directory (from --data)")
    files = {s: explicit[s] for s in wanted if s in explicit}
    free = [s for s in wanted if s not in files]
    if len(bare) > len(free):
        raise ClozeformerError(
            f"--data: {len(bare)} files given but only {len(free)} split(s) to fill "
            f"({', '.join(free) or 'none'}); name them as SPLIT=FILE"
        )
    files.update(zip(free, bare))
    for split in (s for s in wanted if s not in files):  # the first directory holding one of its names
        found = next((f for d in dirs if (f := _find(d, spec.splits[split])) is not None), None)
        if found is not None:
            files[split] = found
    missing = [s for s in wanted if s not in files and s not in optional]
    if missing:
        where = ", ".join(str(d) for d in dirs) or "the files given"
        looked = "; ".join(f"{s}: {' or '.join(spec.splits[s][:3])}" for s in missing)
        raise ClozeformerError(
            f"no {', '.join(missing)} file for task {spec.name} in {where} (looked for {looked}); pass --data SPLIT=FILE"
        )
    return {s: files[s] for s in wanted if s in files}
