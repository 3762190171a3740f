"""Task readers on hand-written fixtures in the official formats, and user mistakes -> one-line errors.

Fixtures (tests/fixtures/task_*): all nine GLUE tasks with their quirks (CoLA without header,
MRPC's BOM and bare quotes, QQP rows with missing fields, MNLI's 12/16/10-column files and
matched/mismatched dev sets), SQuAD v1.1 (one-line JSON) and v2.0, CMRC 2018 (misaligned
answer_start), CoNLL-2003 columns, SWAG csv (leading unnamed index column), custom CSV/TSV/JSONL.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from clozeformer.commands.cli import main as cli_main
from clozeformer.tasks import features
from clozeformer.tasks.common import Problems, read_text
from clozeformer.tasks.conll import format_conll, read_conll
from clozeformer.tasks.glue import GLUE_TASKS, format_submission
from clozeformer.tasks.spec import get_task, resolve_files
from clozeformer.tasks.squad import read_squad
from clozeformer.tasks.swag import read_swag
from clozeformer.tasks.task_config import TaskDataConfig
from clozeformer.tasks.task_runner import check_labels, discover_labels
from clozeformer.utils.errors import ClozeformerError

FIX = Path(__file__).parents[1] / "fixtures"
GLUE = FIX / "task_glue"
VOCAB = FIX / "task_vocab.txt"


def spec_of(name: str, **kw):
    return get_task(name, TaskDataConfig(task=name, **kw))


def read_split(name: str, data: str | Path, split: str, labeled=True, problems=None, **kw):
    spec = spec_of(name, **kw)
    files = resolve_files(spec, [str(data)], (split,))
    return spec.read(files[split], problems or Problems(), labeled)


# ----------------------------------------------------------------------------- GLUE


@pytest.mark.parametrize(
    "task,dirname,n_train,n_dev,labels",
    [
        ("cola", "CoLA", 3, 2, {"0", "1"}),
        ("sst2", "SST-2", 3, 2, {"0", "1"}),
        ("mrpc", "MRPC", 3, 2, {"0", "1"}),
        ("qqp", "QQP", 3, 2, {"0", "1"}),
        ("qnli", "QNLI", 2, 1, {"entailment", "not_entailment"}),
        ("rte", "RTE", 2, 1, {"entailment", "not_entailment"}),
        ("wnli", "WNLI", 1, 1, {"0", "1"}),
    ],
)
def test_glue_classification_readers(task, dirname, n_train, n_dev, labels):
    train = read_split(task, GLUE / dirname, "train")
    dev = read_split(task, GLUE / dirname, "dev")
    assert (len(train), len(dev)) == (n_train, n_dev)
    assert {ex.label for ex in train + dev} <= labels
    test = read_split(task, GLUE / dirname, "test", labeled=None)
    assert all(ex.label is None for ex in test) and test[0].guid == "0"
    pair = GLUE_TASKS[task].text_b is not None
    assert all((ex.text_b is not None) == pair for ex in train + dev + test)


def test_cola_headerless_and_no_final_newline():
    train = read_split("cola", GLUE / "CoLA", "train")
    assert [ex.label for ex in train] == ["1", "0", "1"]
    assert train[1].text_a == "The cat the mat on sat." and train[1].source.line == 2
    dev = read_split("cola", GLUE / "CoLA", "dev")  # last line has no newline
    assert dev[-1].text_a == "Fly birds winter south in."


def test_mrpc_bom_and_bare_quotes():
    train = read_split("mrpc", GLUE / "MRPC", "train")
    # no BOM glued to the first header name; quotes are text, not CSV quoting
    assert train[0].text_a == 'He said "yes" to the plan.'
    assert train[2].text_a == '"The talks went well, she said.' and train[2].label == "1"
    dev = read_split("mrpc", GLUE / "MRPC", "dev")
    assert dev[0].text_b.startswith('"The pie business')


def test_qqp_rows_with_missing_fields_are_counted_and_skipped(capsys):
    problems = Problems()
    train = read_split("qqp", GLUE / "QQP", "train", problems=problems)
    assert [ex.guid for ex in train] == ["0", "1", "3"]
    assert problems.counts["malformed_row"] == 2
    err = capsys.readouterr().err
    assert "train.tsv:4" in err and "train.tsv:5" in err


def test_stsb_scores_are_floats():
    train = read_split("stsb", GLUE / "STS-B", "train")
    assert [ex.label for ex in train] == [5.0, 0.8]
    assert train[0].text_b == "An air plane is taking off."
    assert spec_of("sts-b").family == "regression"


def test_mnli_matched_mismatched_and_test_files():
    spec = spec_of("mnli")
    assert spec.eval_splits == ("dev_matched", "dev_mismatched")
    files = resolve_files(spec, [str(GLUE / "MNLI")], ("train", *spec.eval_splits))
    assert files["dev_mismatched"].name == "dev_mismatched.tsv"
    p = Problems()
    train = spec.read(files["train"], p, True)
    assert [ex.label for ex in train] == ["entailment", "contradiction", "neutral"]
    dev = spec.read(files["dev_matched"], p, True)
    assert [ex.label for ex in dev] == ["entailment", "contradiction"]  # gold_label, not label1
    assert dev[0].text_a == "Taxes were cut." and dev[0].text_b == "Taxes went down."
    tests = resolve_files(spec, [str(GLUE / "MNLI")], spec.test_splits)
    assert set(tests) == {"test_matched", "test_mismatched", "diagnostic"}
    assert not p.counts


def test_glue_submission_format():
    mnli, stsb = GLUE_TASKS["mnli"], GLUE_TASKS["stsb"]
    test = read_split("mnli", GLUE / "MNLI", "test_matched", labeled=None)
    assert format_submission(mnli, test, ["neutral"]) == "index\tprediction\n0\tneutral\n"
    test = read_split("stsb", GLUE / "STS-B", "test", labeled=None)
    assert format_submission(stsb, test, [5.7]) == "index\tprediction\n0\t5.000\n"
    assert mnli.submission == {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv", "diagnostic": "AX.tsv"}


def test_glue_unknown_label_names_file_and_line(tmp_path):
    (tmp_path / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tc\td\tmaybe\n")
    with pytest.raises(ClozeformerError, match=r"dev.tsv:3: label 'maybe' is not one of RTE's labels"):
        read_split("rte", tmp_path, "dev")


def test_glue_test_file_given_as_dev_is_a_clear_error():
    with pytest.raises(ClozeformerError, match=r"test.tsv:1: no 'label' column"):
        spec_of("sst2").read(GLUE / "SST-2" / "test.tsv", Problems(), True)


# ----------------------------------------------------------------------------- SQuAD / CMRC


def test_squad_v1_reader():
    train = read_split("squad", FIX / "task_squad", "train")
    assert [ex.qid for ex in train] == ["56ddde6b9a695914005b9628", "56ddde6b9a695914005b9629", "5a1"]
    a = train[0].answers[0]
    assert train[0].context[a.start : a.start + len(a.text)] == "France" and not train[0].is_impossible
    dev = read_split("squad", FIX / "task_squad", "dev")
    assert [x.text for x in dev[1].answers] == ["King's College, Cambridge", "King's College", "Cambridge"]
    assert train[2].title == "Alan_Turing"


def test_squad_v2_reader_no_answer_questions():
    dev = read_split("squad_v2", FIX / "task_squad", "dev")
    assert [ex.is_impossible for ex in dev] == [False, True]
    assert dev[1].answers == []  # plausible_answers are not answers
    assert dev[1].source.line > 1  # multi-line JSON: the id's line is reported


def test_cmrc_misaligned_answer_start_is_repaired_and_missing_answer_kept(capsys):
    p = Problems()
    dev = read_split("cmrc2018", FIX / "task_squad", "dev", problems=p)
    q1 = dev[1]
    assert [(a.text, q1.context[a.start : a.start + len(a.text)]) for a in q1.answers] == [("2010年", "2010年"), ("2010", "2010")]
    assert p.counts["answer_start_repaired"] == 1
    assert p.counts["answer_not_in_context"] == 1 and dev[2].answers[0].start == -1
    assert "cmrc2018_dev.json:" in capsys.readouterr().err


def test_squad_errors(tmp_path):
    bad = tmp_path / "train.json"
    bad.write_text('{"data": [{"paragraphs": [{"context": "x", "qas": [{"id": "1", "question": "q"}]}]}]}')
    with pytest.raises(ClozeformerError, match="has no 'answers'"):
        read_squad(bad, Problems(), True)
    assert read_squad(bad, Problems(), None)[0].answers == []  # a test file needs none
    bad.write_text('{"data": [\n{"paragraphs": [}\n')
    with pytest.raises(ClozeformerError, match=r"train.json:2: invalid JSON"):
        read_squad(bad, Problems(), True)
    bad.write_text('{"version": "1.1"}')
    with pytest.raises(ClozeformerError, match="not SQuAD-format JSON"):
        read_squad(bad, Problems(), True)


# ----------------------------------------------------------------------------- CoNLL / SWAG


def test_conll_reader_and_output_format():
    ex = read_conll(FIX / "task_conll" / "train.txt", Problems())
    assert len(ex) == 3
    assert ex[0].words[:3] == ["EU", "rejects", "German"] and ex[0].tags[:3] == ["B-ORG", "O", "B-MISC"]
    assert ex[1].tags == ["B-PER", "I-PER"] and ex[1].source.line == 13
    words = read_conll(FIX / "task_conll" / "words.txt", Problems(), labeled=None)
    assert [e.words for e in words] == [["Peter", "visited", "Brussels"], ["Hello"]] and words[0].tags is None
    out = format_conll(ex[1:2], [["B-PER", "O"]])
    assert out == "Peter NNP B-NP B-PER B-PER\nBlackburn NNP I-NP I-PER O\n\n"
    with pytest.raises(ClozeformerError, match="one column only"):
        read_conll(FIX / "task_conll" / "words.txt", Problems(), labeled=True)


def test_conll_column_mismatch(tmp_path):
    (tmp_path / "train.txt").write_text("EU NNP B-NP B-ORG\nrejects O\n")
    with pytest.raises(ClozeformerError, match=r"train.txt:2: 2 columns where earlier lines have 4"):
        read_conll(tmp_path / "train.txt", Problems())


def test_swag_reader():
    train = read_swag(FIX / "task_swag" / "train.csv", Problems())
    assert [ex.label for ex in train] == [2, 0]
    assert train[0].context == "Students lower their eyes nervously." and train[0].prefix == "She"
    assert train[0].endings[0] == "pats her shoulder, then saunters toward someone."
    assert train[1].endings[1] == 'stops, and says "hello".'
    test = read_swag(FIX / "task_swag" / "test.csv", Problems(), labeled=None)
    assert test[0].label is None and len(test[0].endings) == 4
    with pytest.raises(ClozeformerError, match="no 'label' column"):
        read_swag(FIX / "task_swag" / "test.csv", Problems(), labeled=True)


# ----------------------------------------------------------------------------- custom data


def test_custom_csv_columns_labels_and_line_numbers():
    spec = spec_of("classification", text_column="review", label_column="sentiment", id_column="id")
    ex = spec.read(FIX / "task_custom" / "reviews.csv", Problems(), True)
    assert ex[0].text_a == 'Great phone, "best" purchase,\nwould buy again' and ex[0].guid == "r1"
    assert [e.source.line for e in ex] == [2, 4, 5]  # a quoted field spans lines 2-3
    assert discover_labels(spec, ex) == ["negative", "neutral", "positive"]
    reg = spec_of("regression", text_column="review", label_column="stars")
    assert [e.label for e in reg.read(FIX / "task_custom" / "reviews.csv", Problems(), True)] == [5.0, 1.0, 3.0]


def test_custom_pairs_tokens_and_qa():
    pairs = spec_of("pair-classification", text_column="premise").read(FIX / "task_custom" / "pairs.tsv", Problems())
    assert pairs[0].text_b == "An animal moves." and pairs[1].label == "no"  # 'hypothesis' found by default
    ner = spec_of("token-classification")
    ex = ner.read(FIX / "task_custom" / "ner.jsonl", Problems())
    assert ex[0].tags == ["B-PER", "I-PER", "O", "O", "B-LOC"]
    assert discover_labels(ner, ex) == ["O", "B-LOC", "B-PER", "I-PER"]
    qa = spec_of("qa").read(FIX / "task_custom" / "qa.jsonl", Problems())
    assert [(a.text, a.start) for a in qa[0].answers] == [("Mary Shelley", 18)]
    assert [(a.text, a.start) for a in qa[1].answers] == [("1818", 34)]  # located in the context
    assert qa[2].is_impossible and qa[2].answers == []


def test_unseen_dev_label_names_file_and_line(tmp_path):
    spec = spec_of("classification")
    (tmp_path / "train.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    (tmp_path / "dev.csv").write_text("text,label\nfine,pos\nmeh,neutral\n")
    labels = discover_labels(spec, spec.read(tmp_path / "train.csv", Problems()))
    with pytest.raises(ClozeformerError, match=r"dev.csv:3: label 'neutral' was not seen in the training data"):
        check_labels(spec, spec.read(tmp_path / "dev.csv", Problems()), labels)


def test_resolve_files_dir_split_equals_and_bare_files(tmp_path):
    spec = spec_of("classification")
    for name in ("train.csv", "validation.jsonl", "extra.csv"):
        (tmp_path / name).write_text("text,label\na,b\n")
    assert resolve_files(spec, [str(tmp_path)], ("train", "dev")) == {
        "train": tmp_path / "train.csv",
        "dev": tmp_path / "validation.jsonl",
    }
    got = resolve_files(spec, [str(tmp_path), f"dev={tmp_path / 'extra.csv'}"], ("train", "dev"))
    assert got["dev"] == tmp_path / "extra.csv"
    got = resolve_files(spec, [str(tmp_path / "extra.csv"), str(tmp_path / "train.csv")], ("train", "dev"))
    assert got == {"train": tmp_path / "extra.csv", "dev": tmp_path / "train.csv"}
    with pytest.raises(ClozeformerError, match="no test file for task classification"):
        resolve_files(spec, [str(tmp_path)], ("test",))
    with pytest.raises(ClozeformerError, match="unknown split 'valid'"):
        resolve_files(spec, [f"valid={tmp_path / 'extra.csv'}"], ("dev",))


def test_read_text_errors_and_gzip(tmp_path):
    (tmp_path / "empty.tsv").write_text("\n\n")
    with pytest.raises(ClozeformerError, match="empty file"):
        read_text(tmp_path / "empty.tsv")
    (tmp_path / "latin.tsv").write_bytes(b"sentence\tlabel\nok\t1\ncaf\xe9\t0\n")
    with pytest.raises(ClozeformerError, match=r"latin.tsv:3: not UTF-8"):
        read_text(tmp_path / "latin.tsv")
    (tmp_path / "bin.tsv").write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ClozeformerError, match="looks binary"):
        read_text(tmp_path / "bin.tsv")
    (tmp_path / "train.tsv.gz").write_bytes(gzip.compress(b"sentence\tlabel\nfine\t1\n"))
    assert read_text(tmp_path / "train.tsv.gz") == "sentence\tlabel\nfine\t1\n"


def test_overlong_inputs_are_truncated_and_counted(capsys):
    from clozeformer.modeling.tokenizer import Tokenizer

    tok = Tokenizer.from_pretrained(VOCAB)
    ex = read_split("sst2", GLUE / "SST-2", "train")
    p = Problems()
    feats = features.encode_text(tok, ex, 6, p, {"0": 0, "1": 1}, regression=False)
    assert max(len(f["input_ids"]) for f in feats) == 6 and p.counts["truncated"] == 2
    assert "train.tsv:2: input longer than max_length=6" in capsys.readouterr().err


# ----------------------------------------------------------------------------- user mistakes via the CLI


def cli_error(argv: list[str], capsys) -> str:
    code = cli_main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    last = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert last and "Traceback" not in err
    return last[-1]


def test_cli_errors_are_one_line(tmp_path, capsys):
    base = ["--model", "tiny", "--tokenizer", str(VOCAB), "--out", str(tmp_path / "out"), "--threads", "1"]
    d = tmp_path / "d"
    d.mkdir()
    (d / "train.csv").write_text("text,label\ngood,pos\nbad,neg\n")
    (d / "dev.csv").write_text("text,label\nfine,pos\nmeh,neutral\n")
    msg = cli_error(["finetune", "--task", "classification", "--data", str(d), *base], capsys)
    assert "dev.csv:3: label 'neutral' was not seen in the training data" in msg
    assert not (tmp_path / "out").exists()  # nothing left behind on a data error

    (d / "dev.csv").write_text("")
    assert "dev.csv: empty file" in cli_error(["finetune", "--task", "classification", "--data", str(d), *base], capsys)

    (d / "dev.csv").write_text("sentence,target\nfine,pos\n")
    msg = cli_error(["finetune", "--task", "classification", "--data", str(d), "--text-column", "text", *base], capsys)
    assert "dev.csv:1: no column 'text'" in msg

    msg = cli_error(["finetune", "--task", "glue-9", "--data", str(d), *base], capsys)
    assert "unknown task 'glue-9'" in msg
    msg = cli_error(["finetune", "--task", "sst2", "--data", str(tmp_path / "nowhere"), *base], capsys)
    assert "nowhere: no such file or directory" in msg
    msg = cli_error(
        ["finetune", "--task", "sst2", "--data", str(GLUE / "SST-2"), "--model", "tiny", "--out", str(tmp_path / "o2")], capsys
    )
    assert "pass --tokenizer" in msg
    msg = cli_error(["finetune", "--task", "sst2", "--data", str(GLUE / "SST-2"), *base, "--lr", "-1"], capsys)
    assert "--lr must be > 0" in msg
    if not __import__("torch").cuda.is_available():
        msg = cli_error(["finetune", "--task", "sst2", "--data", str(GLUE / "SST-2"), *base, "--dtype", "fp16"], capsys)
        assert "fp16 needs a CUDA GPU" in msg
    msg = cli_error(["evaluate", "--task", "sst2", "--data", str(GLUE / "SST-2"), "--model", str(tmp_path)], capsys)
    assert "config.json: no such config file" in msg


# ----------------------------------------------------------------------------- the real files (opt-in)


@pytest.mark.shared
def test_real_task_files(shared_data):
    t = shared_data / "tasks"
    counts = {
        ("cola", "glue/CoLA"): (8551, 1043, 1063),
        ("sst2", "glue/SST-2"): (67349, 872, None),
        ("mrpc", "glue/MRPC"): (3668, 408, 1725),
        ("stsb", "glue/STS-B"): (5749, 1500, 1379),
        ("rte", "glue/RTE"): (2490, 277, 3000),
        ("wnli", "glue/WNLI"): (635, 71, 146),
        ("qnli", "glue/QNLI"): (None, 5463, 5463),
        ("chnsenticorp", "zh/chnsenticorp"): (9600, 1200, 1200),
        ("conll2003", "conll2003"): (14041, 3250, 3453),
    }
    for (task, sub), expected in counts.items():
        p = Problems()
        for split, n in zip(("train", "dev", "test"), expected):
            if n is not None:
                assert len(read_split(task, t / sub, split, labeled=None if split == "test" else True, problems=p)) == n, (
                    task,
                    split,
                )
        assert not p.counts, (task, dict(p.counts))
    p = Problems()
    assert len(read_squad(t / "squad/xquad/xquad.en.json", p)) == 1190 and not p.counts
    cmrc = read_squad(t / "zh/cmrc2018/dev.json", p)
    # ~200 answers in CMRC's dev set do not point at their text: 7 sit one character off, 193 are
    # free-text answers (answer_start -1) that never occur in the context
    assert len(cmrc) == 3219
    assert (p.counts["answer_start_repaired"], p.counts["answer_not_in_context"]) == (7, 193)
    for ex in cmrc:
        for a in ex.answers:
            assert a.start == -1 or ex.context[a.start : a.start + len(a.text)] == a.text


def test_csv_unbalanced_quote_is_an_error_not_a_quiet_skip(tmp_path):
    from clozeformer.tasks.common import iter_csv

    good = ["text,label"] + [f"row {i},{i % 2}" for i in range(1, 200)]
    ok = tmp_path / "ok.csv"
    ok.write_text("\n".join(good[:3] + ['"a quoted, multi-line\ntext",1'] + good[3:]) + "\n", encoding="utf-8")
    rows = list(iter_csv(ok))
    assert len(rows) == 201 and rows[3] == (4, ["a quoted, multi-line\ntext", "1"]) and rows[4][0] == 6
    bad = tmp_path / "bad.csv"
    lines = good[:30] + ['"an unterminated quote,1'] + good[30:]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ClozeformerError, match=r"bad\.csv:31: a quoted field opened on this line runs to line"):
        list(iter_csv(bad))


# ----------------------------------------------------------------------------- malformed rows


@pytest.mark.parametrize(
    "name,text,line",
    [
        ("bad.tsv", "text\tlabel\ngood one\tpos\na tab\tinside\tneg\nfine\tneg\n", 3),
        ("bad.csv", "text,label\ngood one,pos\nno label field\nfine,neg\n", 3),
        (
            "bad.jsonl",
            '{"text": "good", "label": "pos"}\n{"text": ["a", "list"], "label": "neg"}\n{"text": "x", "label": "neg"}\n',
            2,
        ),
    ],
)
def test_a_malformed_row_is_an_error_unless_skipped_and_counted(tmp_path, capsys, name, text, line):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    spec = spec_of("classification")
    with pytest.raises(ClozeformerError, match=rf"{name}:{line}: .*--skip-bad-rows"):
        spec.read(path, Problems(), True)
    problems = Problems(skip_bad_rows=True)
    kept = spec.read(path, problems, True)
    assert len(kept) == 2 and problems.rows_skipped[str(path)] == 1
    assert f"{path}: kept 2 of 3 rows (1 malformed rows skipped)" in problems.summary()
    capsys.readouterr()


def test_a_glue_row_with_wrong_fields_is_an_error_outside_qqp(tmp_path):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\nfine\t1\ntab\tin the\t0\n", encoding="utf-8")
    with pytest.raises(ClozeformerError, match=r"train.tsv:3: 3 tab-separated fields, expected 2"):
        read_split("sst2", tmp_path, "train")
    assert len(read_split("sst2", tmp_path, "train", problems=Problems(skip_bad_rows=True))) == 1


def test_a_label_that_is_not_a_string_or_number_is_an_error(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "good", "label": "pos"}\n{"text": "bad", "label": ["neg"]}\n', encoding="utf-8")
    with pytest.raises(ClozeformerError, match=r"rows.jsonl:2: label is list \['neg'\]; a label must be a string or a number"):
        spec_of("classification").read(path, Problems(), True)


def test_finetune_cli_skip_bad_rows_flag(tmp_path, capsys):
    data = tmp_path / "d"
    data.mkdir()
    rows = ["text,label", *(f"row number {i},{'pos' if i % 2 else 'neg'}" for i in range(20)), "broken row without label"]
    (data / "train.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    base = ["finetune", "--task", "classification", "--data", f"train={data / 'train.csv'}", "--model", "tiny"]
    base += ["--tokenizer", str(VOCAB), "--epochs", "1", "--threads", "1", "--batch-size", "8"]
    assert cli_main([*base, "--out", str(tmp_path / "a")]) == 2
    assert "train.csv:22:" in capsys.readouterr().err
    assert cli_main([*base, "--out", str(tmp_path / "b"), "--skip-bad-rows"]) == 0
    assert "kept 20 of 21 rows" in capsys.readouterr().err


def test_unlabeled_text_is_each_examples_text_without_its_label():
    """What task-adaptive pretraining reads: one line per example, labels gone, pairs joined."""
    from clozeformer.tasks.common import unlabeled_text

    mrpc = list(unlabeled_text(read_split("mrpc", GLUE / "MRPC", "train")))
    assert mrpc[0] == 'He said "yes" to the plan. The plan got a "yes" from him.'
    cola = list(unlabeled_text(read_split("cola", GLUE / "CoLA", "train")))
    assert cola[:2] == ["The cat sat on the mat.", "The cat the mat on sat."]
    assert not any("\t" in line or "*" == line.split()[0] for line in cola)
    conll = read_conll(FIX / "task_conll" / "train.txt", Problems())
    assert list(unlabeled_text(conll))[0] == " ".join(conll[0].words)
    squad = read_squad(FIX / "task_squad" / "train-v1.1.json", Problems())
    lines = list(unlabeled_text(squad))
    contexts = {ex.context for ex in squad}
    assert sum(line in {" ".join(c.split()) for c in contexts} for line in lines) == len(contexts)  # each context once
    assert len(lines) == len(contexts) + len(squad)  # and every question
    assert all("\n" not in line and line for line in lines)
