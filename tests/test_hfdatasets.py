"""Hugging Face `datasets` as data, offline: datasets built here in the Hub's shapes (nyu-mll/glue's
ClassLabel columns and -1 test labels, SQuAD's answers struct), saved with save_to_disk or written
as a local dataset directory for `hf:DIR`, read by finetune / evaluate / prepare / tokenizer train."""

from __future__ import annotations

import json

import pytest

datasets = pytest.importorskip("datasets")

from clozeformer.cli import main as cli_main  # noqa: E402
from clozeformer.data.manifest import Manifest  # noqa: E402
from clozeformer.data.readers import CorpusReader  # noqa: E402
from clozeformer.errors import ClozeformerError  # noqa: E402
from clozeformer.tasks.common import Problems  # noqa: E402
from clozeformer.tasks.config import TaskDataConfig  # noqa: E402
from clozeformer.tasks.spec import get_task, read_examples, resolve_files  # noqa: E402

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
    tok = tmp_path / "tok"
    infer_tok.save(tok)
    out = tmp_path / "ft"
    argv = ["finetune", "--task", "sst2", "--data", str(sst2), "--model", "tiny", "--tokenizer", str(tok)]
    assert cli_main([*argv, "--epochs", "1", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
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
    argv = ["prepare", "--input", f"hf:{corpus}", "--tokenizer", str(tok), "--out", str(tmp_path / "data"), "--seq-len", "32"]
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
