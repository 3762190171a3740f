"""Hugging Face `datasets` as data, offline: datasets built here in the Hub's shapes (nyu-mll/glue's
ClassLabel columns and -1 test labels, SQuAD's answers struct, conll2003's ClassLabel tag sequences,
swag's `regular` columns), saved with save_to_disk or written as a local dataset directory for
`hf:DIR`, read by finetune / evaluate / predict / prepare / tokenizer train."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")

from clozeformer.commands.cli import main as cli_main  # noqa: E402
from clozeformer.data.manifest import Manifest  # noqa: E402
from clozeformer.data.readers import CorpusReader  # noqa: E402
from clozeformer.tasks.common import Problems  # noqa: E402
from clozeformer.tasks.conll import CONLL2003_TAGS  # noqa: E402
from clozeformer.tasks.spec import get_task, read_examples, resolve_files  # noqa: E402
from clozeformer.tasks.task_config import TaskDataConfig  # noqa: E402
from clozeformer.utils.errors import ClozeformerError  # noqa: E402

ROWS = [("the cat likes the red ball .", 1), ("the dog hears a green tree .", 0)] * 12


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds-cache"))


def glue_sst2(path):
    """nyu-mll/glue's sst2 layout: sentence, ClassLabel(negative, positive), idx; test labels -1."""
    features = datasets.Features(
        {
            "sentence": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["negative", "positive"]),
            "idx": datasets.Value("int32"),
        }
    )

    def split(rows, labeled=True):
        return datasets.Dataset.from_dict(
            {"sentence": [s for s, _ in rows], "label": [y if labeled else -1 for _, y in rows], "idx": list(range(len(rows)))},
            features=features,
        )

    datasets.DatasetDict({"train": split(ROWS), "validation": split(ROWS[:8]), "test": split(ROWS[:4], False)}).save_to_disk(
        str(path)
    )
    return path


def finetune(tmp_path: Path, infer_tok, task: str, data: Path, *flags: str) -> tuple[Path, dict]:
    """`finetune` a tiny model on the inference vocabulary into tmp_path/ft: that directory and its metrics."""
    infer_tok.save(tmp_path / "tok")
    out = tmp_path / "ft"
    argv = ["finetune", "--task", task, "--data", str(data), "--model", "tiny", "--tokenizer", str(tmp_path / "tok")]
    assert cli_main([*argv, *flags, "--out", str(out)]) == 0
    return out, json.loads((out / "metrics.json").read_text())


def test_glue_and_squad_shapes_read_without_column_flags(tmp_path):
    sst2 = glue_sst2(tmp_path / "sst2")
    spec = get_task("sst2", TaskDataConfig())
    files = resolve_files(spec, [str(sst2)], ("train", "dev"))
    train = read_examples(spec, files["train"], Problems(), True)
    assert [(e.text_a, e.label) for e in train[:2]] == [(ROWS[0][0], "1"), (ROWS[1][0], "0")]  # the GLUE files' labels
    assert str(train[0].source) == f"{sst2}[train]:1"
    test = read_examples(spec, resolve_files(spec, [str(sst2)], ("test",))["test"], Problems(), None)
    assert all(e.label is None for e in test)  # -1: unlabelled
    # MNLI: premise/hypothesis, named labels, validation_matched -> dev_matched
    names = ["entailment", "neutral", "contradiction"]
    feats = datasets.Features(
        {"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"), "label": datasets.ClassLabel(names=names)}
    )
    pair = {"premise": ["a man sleeps ."] * 3, "hypothesis": ["a man rests .", "it rains .", "a man runs ."], "label": [0, 1, 2]}
    mnli = datasets.DatasetDict(
        {s: datasets.Dataset.from_dict(pair, features=feats) for s in ("train", "validation_matched", "validation_mismatched")}
    )
    mnli.save_to_disk(str(tmp_path / "mnli"))
    spec = get_task("mnli", TaskDataConfig())
    files = resolve_files(spec, [str(tmp_path / "mnli")], ("train", *spec.eval_splits))
    assert sorted(files) == sorted(("train", *spec.eval_splits))
    ex = read_examples(spec, files["dev_matched"], Problems(), True)
    assert [(e.text_b, e.label) for e in ex] == list(zip(pair["hypothesis"], names))
    # SQuAD: id, title, context, question, answers {text, answer_start}
    squad = datasets.Dataset.from_dict(
        {
            "id": ["q1"],
            "title": ["t"],
            "context": ["John lives in Paris."],
            "question": ["Where does John live?"],
            "answers": [{"text": ["Paris"], "answer_start": [14]}],
        }
    )
    squad.save_to_disk(str(tmp_path / "squad"))
    spec = get_task("squad", TaskDataConfig())
    (qa,) = read_examples(spec, resolve_files(spec, [str(tmp_path / "squad")], ("train",))["train"], Problems(), True)
    assert (qa.qid, qa.answers[0].text, qa.answers[0].start, qa.is_impossible) == ("q1", "Paris", 14, False)


def test_finetune_and_evaluate_from_a_dataset(tmp_path, infer_tok):
    sst2 = glue_sst2(tmp_path / "sst2")
    out, metrics = finetune(tmp_path, infer_tok, "sst2", sst2, "--epochs", "1")
    assert metrics["train_examples"] == len(ROWS) and metrics["labels"] == ["0", "1"]
    assert cli_main(["evaluate", "--model", str(out), "--data", str(sst2), "--out", str(tmp_path / "ev")]) == 0


def test_hf_prefix_loads_a_local_dataset_with_column_flags(tmp_path, infer_tok, capsys):
    """`hf:NAME` goes through datasets.load_dataset; a local directory of JSON Lines stands in for
    the Hub offline. Custom columns use the same flags as CSV/TSV/JSONL."""
    data = tmp_path / "reviews"
    data.mkdir()
    for split, rows in (("train", ROWS), ("validation", ROWS[:6])):
        records = [{"review": s, "stars": "good" if y else "bad"} for s, y in rows]
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    tok = tmp_path / "tok"
    infer_tok.save(tok)
    argv = ["finetune", "--task", "classification", "--data", f"hf:{data}", "--model", "tiny", "--tokenizer", str(tok)]
    argv += ["--text-column", "review", "--label-column", "stars", "--epochs", "1", "--out", str(tmp_path / "ft")]
    assert cli_main(argv) == 0
    assert json.loads((tmp_path / "ft" / "metrics.json").read_text())["labels"] == ["bad", "good"]
    assert cli_main([*argv[:-1], str(tmp_path / "ft2"), "--label-column", "nope"]) == 2
    assert "no label column 'nope'" in capsys.readouterr().err
    assert cli_main([*argv[:4], "hf:", *argv[5:-1], str(tmp_path / "ft3")]) == 2
    assert "give hf:NAME" in capsys.readouterr().err
    assert cli_main([*argv[:4], f"hf:{tmp_path / 'missing'}", *argv[5:-1], str(tmp_path / "ft4")]) == 2
    assert "cannot load the dataset" in capsys.readouterr().err


def test_prepare_and_tokenizer_train_stream_a_dataset(tmp_path, infer_tok):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = [json.dumps({"text": f"document {i} about a cat .\nit sat on the mat number {i} ."}) for i in range(40)]
    (corpus / "train.jsonl").write_text("\n".join(lines) + "\n")
    reader = CorpusReader([f"hf:{corpus}"])
    docs = list(reader)
    assert len(docs) == 40 and docs[0].units == ["document 0 about a cat .", "it sat on the mat number 0 ."]
    tok = tmp_path / "tok"
    infer_tok.save(tok)
    argv = ["prepare", "--input", f"hf:{corpus}", "--tokenizer", str(tok), "--out", str(tmp_path / "data"), "--max-length", "32"]
    assert cli_main([*argv, "--min-doc-chars", "0", "--val-fraction", "0"]) == 0
    manifest = Manifest.read(tmp_path / "data")
    assert manifest.documents.train == 40 and manifest.num_train > 0
    argv = ["tokenizer", "train", "--input", f"hf:{corpus}", "--vocab-size", "120", "--out", str(tmp_path / "tok2")]
    assert cli_main([*argv, "--min-doc-chars", "0"]) == 0
    assert (tmp_path / "tok2" / "vocab.txt").is_file()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.jsonl").write_text(json.dumps({"body": "no text column"}) + "\n")
    with pytest.raises(ClozeformerError, match="rows need a string 'text' column"):
        list(CorpusReader([f"hf:{bad}"]))


# ----------------------------------------------------------------------------- CoNLL-2003 and SWAG

POS = ["NNP", "VBZ", "VBD", "IN", "TO", "DT", "NN", "."]
CHUNK = ["O", "B-NP", "I-NP", "B-VP", "B-PP"]
#: (words, POS, chunk, NER) per sentence, as in a CoNLL-2003 file
SENTENCES = [
    ("john lives in paris .", "NNP VBZ IN NNP .", "B-NP B-VP B-PP B-NP O", "B-PER O O B-LOC O"),
    ("mary moved to london .", "NNP VBD TO NNP .", "B-NP B-VP B-PP B-NP O", "B-PER O O B-LOC O"),
    ("the cat sat on the mat .", "DT NN VBD IN DT NN .", "B-NP I-NP B-VP B-PP B-NP I-NP O", "O O O O O O O"),
    ("john smith works in new york", "NNP NNP VBZ IN NNP NNP", "B-NP I-NP B-VP B-PP B-NP I-NP", "B-PER I-PER O O B-LOC I-LOC"),
]
NER_SPLITS = {"train": SENTENCES * 6, "validation": SENTENCES, "test": SENTENCES[:2]}


def conll2003(path, splits=NER_SPLITS):
    """The Hub's conll2003 layout: id (str), tokens, and ClassLabel sequences pos/chunk/ner_tags."""
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "tokens": datasets.Sequence(datasets.Value("string")),
            "pos_tags": datasets.Sequence(datasets.ClassLabel(names=POS)),
            "chunk_tags": datasets.Sequence(datasets.ClassLabel(names=CHUNK)),
            "ner_tags": datasets.Sequence(datasets.ClassLabel(names=list(CONLL2003_TAGS))),
        }
    )

    def split(rows):
        ids = {"pos_tags": POS, "chunk_tags": CHUNK, "ner_tags": list(CONLL2003_TAGS)}
        cols = {"id": [str(i) for i in range(len(rows))], "tokens": [r[0].split() for r in rows]}
        for k, (name, names) in enumerate(ids.items(), start=1):
            cols[name] = [[names.index(t) for t in r[k].split()] for r in rows]
        return datasets.Dataset.from_dict(cols, features=features)

    datasets.DatasetDict({s: split(rows) for s, rows in splits.items()}).save_to_disk(str(path))
    return path


def conll2003_files(path, splits=NER_SPLITS):
    """The same sentences as CoNLL-2003 column files (word POS chunk NER), -DOCSTART- lines included."""
    path.mkdir()
    names = {"train": "train.txt", "validation": "valid.txt", "test": "test.txt"}
    for split, rows in splits.items():
        lines = ["-DOCSTART- -X- -X- O", ""]
        for row in rows:
            lines += [" ".join(cols) for cols in zip(*(c.split() for c in row))] + [""]
        (path / names[split]).write_text("\n".join(lines) + "\n")
    return path


SWAG_COLUMNS = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1"]
SWAG_COLUMNS += ["ending2", "ending3", "label"]


def swag_rows(n, labeled=True):
    """Rows whose right ending is the one saying "yes" (learnable), in the Hub's column order."""
    rows = []
    for i in range(n):
        label = i % 4
        s1, s2 = ["the cat sat on the mat .", "john went to the store ."][i % 2], "she"
        endings = [f"reads a book {'yes' if j == label else 'no'} ." for j in range(4)]
        rows.append([f"anetv_{i}", str(i), f"{s1} {s2}", s1, s2, "gold" if i % 3 else "gen", *endings, label if labeled else -1])
    return rows


SWAG_SPLITS = {"train": swag_rows(24), "validation": swag_rows(8), "test": swag_rows(4, labeled=False)}


def swag(path, splits=SWAG_SPLITS):
    """The Hub's swag `regular` layout: strings, and an int label (-1 in the test split)."""
    features = datasets.Features({c: datasets.Value("int32" if c == "label" else "string") for c in SWAG_COLUMNS})
    dd = {
        s: datasets.Dataset.from_dict({c: [r[k] for r in rows] for k, c in enumerate(SWAG_COLUMNS)}, features=features)
        for s, rows in splits.items()
    }
    datasets.DatasetDict(dd).save_to_disk(str(path))
    return path


def swag_files(path, splits=SWAG_SPLITS):
    """The same rows as SWAG's CSVs: train.csv / val.csv, and test.csv without a label column."""
    path.mkdir()
    for split, rows in splits.items():
        name = {"train": "train.csv", "validation": "val.csv", "test": "test.csv"}[split]
        cut = -1 if split == "test" else None
        with open(path / name, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(SWAG_COLUMNS[:cut])
            w.writerows(r[:cut] for r in rows)
    return path


def read_split(task, data, split, labeled=True, cfg=None):
    cfg = cfg or TaskDataConfig()
    spec = get_task(task, cfg)
    return read_examples(spec, resolve_files(spec, [str(data)], (split,))[split], Problems(), labeled, cfg)


def unsourced(examples):
    return [replace(e, source=None) for e in examples]


def test_conll2003_and_swag_datasets_read_as_their_files(tmp_path):
    """The examples from a dataset are the file readers' examples of the same data, ids, tags and
    CoNLL lines (which predict echoes) included; only the source differs: DATASET[split]:ROW."""
    ner, ner_files = conll2003(tmp_path / "ner"), conll2003_files(tmp_path / "ner-files")
    for split, labeled in (("train", True), ("dev", True), ("test", None)):
        got = read_split("conll2003", ner, split, labeled)
        assert unsourced(got) == unsourced(read_split("conll2003", ner_files, split, labeled))
    train = read_split("conll2003", ner, "train")
    assert train[3].tags == ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC"]
    assert train[0].lines[0] == "john NNP B-NP B-PER" and str(train[1].source) == f"{ner}[train]:2"
    assert [e.tags for e in read_split("conll2003", ner, "test", False)] == [None, None]  # lines kept, tags not
    # token-classification: plain string sequences under the user's column flags, as a 2-column file
    words = [r[0].split() for r in SENTENCES]
    tags = [r[3].split() for r in SENTENCES]
    datasets.Dataset.from_dict({"words": words, "labels": tags}).save_to_disk(str(tmp_path / "plain"))
    two_col = tmp_path / "plain-files"
    two_col.mkdir()
    (two_col / "train.conll").write_text("".join("".join(f"{w} {t}\n" for w, t in zip(*wt)) + "\n" for wt in zip(words, tags)))
    cfg = TaskDataConfig(text_column="words", label_column="labels")
    got = read_split("token-classification", tmp_path / "plain", "train", cfg=cfg)
    assert unsourced(got) == unsourced(read_split("token-classification", two_col, "train", cfg=cfg))
    assert [e.tags for e in got] == tags
    # SWAG: the Hub's regular config against the released CSV layout; -1 in the test split
    sw, sw_files = swag(tmp_path / "swag"), swag_files(tmp_path / "swag-files")
    for split, labeled in (("train", True), ("dev", True), ("test", None)):
        got = read_split("swag", sw, split, labeled)
        assert unsourced(got) == unsourced(read_split("swag", sw_files, split, labeled))
    train = read_split("swag", sw, "train")
    assert (train[1].guid, train[1].context, train[1].prefix, train[1].label) == ("1", "john went to the store .", "she", 1)
    assert train[1].endings[1] == "reads a book yes ." and str(train[1].source) == f"{sw}[train]:2"
    assert all(e.label is None for e in read_split("swag", sw, "test", None))


def test_ner_and_swag_dataset_errors(tmp_path, capsys, infer_tok):
    """Mismatched words/tags: one error naming DATASET[split]:ROW; missing columns: the columns present."""
    bad = [*SENTENCES[:1], ("mary moved to london .", "NNP VBD TO NNP .", "B-NP B-VP B-PP B-NP O", "B-PER O O B-LOC")]
    ner = conll2003(tmp_path / "ner", {"train": bad, "validation": bad})
    with pytest.raises(ClozeformerError, match=rf"{ner}\[train\]:2: 5 words \(tokens\) but 4 ner_tags"):
        read_split("conll2003", ner, "train")
    infer_tok.save(tmp_path / "tok")
    capsys.readouterr()
    argv = ["finetune", "--task", "conll2003", "--data", str(ner), "--model", "tiny", "--tokenizer", str(tmp_path / "tok")]
    assert cli_main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {ner}[train]:2: 5 words") and "--skip-bad-rows" in err[0]
    spec = get_task("conll2003", TaskDataConfig())
    problems = Problems(skip_bad_rows=True, stream=io.StringIO())
    kept = read_examples(spec, resolve_files(spec, [str(ner)], ("train",))["train"], problems, True)
    assert len(kept) == 1 and problems.rows_skipped == {f"{ner}[train]": 1}
    datasets.Dataset.from_dict({"tokens": [["a"]], "labels": [["O"]]}).save_to_disk(str(tmp_path / "cols"))
    with pytest.raises(ClozeformerError, match=r"\[train\]: no tag column 'ner_tags' \(columns: labels, tokens\); pass --label"):
        read_split("conll2003", tmp_path / "cols", "train")
    with pytest.raises(ClozeformerError, match=r"\[train\]: no words column 'words' \(columns: labels, tokens\)"):
        read_split("token-classification", tmp_path / "cols", "train", cfg=TaskDataConfig(text_column="words"))
    rows = swag_rows(2)
    sw = swag(tmp_path / "swag", {"train": rows, "test": swag_rows(1, labeled=False)})
    ds = datasets.load_from_disk(str(sw))["train"].remove_columns("ending3")
    ds.save_to_disk(str(tmp_path / "swag3"))
    with pytest.raises(ClozeformerError, match=r"swag3\[train\]: no column 'ending3' \(columns: .*\); expected SWAG's"):
        read_split("swag", tmp_path / "swag3", "train")
    with pytest.raises(ClozeformerError, match=rf"{sw}\[test\]:1: no label \(-1\)"):
        read_split("swag", sw, "test", True)


def test_finetune_evaluate_predict_conll2003_from_a_dataset(tmp_path, infer_tok):
    ner = conll2003(tmp_path / "ner")
    out, metrics = finetune(tmp_path, infer_tok, "conll2003", ner, "--epochs", "2", "--max-length", "32", "--batch-size", "8")
    assert metrics["train_examples"] == len(NER_SPLITS["train"]) and metrics["steps"] == 6
    assert metrics["labels"] == list(CONLL2003_TAGS)  # the task's fixed tag set, in the Hub's numbering
    dev = metrics["best"]["scores"]["dev"]
    assert set(dev) >= {"f1", "precision", "recall", "accuracy"}
    assert cli_main(["evaluate", "--model", str(out), "--data", str(ner), "--out", str(tmp_path / "ev")]) == 0
    scores = json.loads((tmp_path / "ev" / "metrics.json").read_text())["scores"]["dev"]
    assert scores["f1"] == pytest.approx(dev["f1"]) and scores["accuracy"] == pytest.approx(dev["accuracy"])
    assert cli_main(["predict", "--model", str(out), "--data", str(ner), "--out", str(tmp_path / "p")]) == 0
    lines = (tmp_path / "p" / "predictions_test.txt").read_text().split("\n")
    # conlleval's layout, as from test.txt: word POS chunk gold predicted
    assert [ln.rsplit(" ", 1)[0] for ln in lines[:6]] == ["john NNP B-NP B-PER", "lives VBZ B-VP O", "in IN B-PP O"] + [
        "paris NNP B-NP B-LOC",
        ". . O O",
        "",
    ]
    assert all(ln.rsplit(" ", 1)[1] in CONLL2003_TAGS for ln in lines[:5])


def test_finetune_and_evaluate_swag_from_a_dataset(tmp_path, infer_tok):
    sw = swag(tmp_path / "swag")
    out, metrics = finetune(tmp_path, infer_tok, "swag", sw, "--epochs", "1", "--max-length", "24", "--batch-size", "8")
    assert metrics["train_examples"] == 24 and metrics["steps"] == 3 and metrics["labels"] is None
    dev = metrics["best"]["scores"]["dev"]
    assert 0 <= dev["accuracy"] <= 1 and metrics["eval_examples"] == {"dev": 8}
    assert cli_main(["evaluate", "--model", str(out), "--data", str(sw), "--out", str(tmp_path / "ev")]) == 0
    scores = json.loads((tmp_path / "ev" / "metrics.json").read_text())["scores"]["dev"]
    assert scores["accuracy"] == pytest.approx(dev["accuracy"])
    assert cli_main(["predict", "--model", str(out), "--data", str(sw), "--out", str(tmp_path / "p")]) == 0
    assert len((tmp_path / "p" / "predictions_test.tsv").read_text().strip().split("\n")) == 1 + 4  # header + rows
