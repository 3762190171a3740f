"""End-to-end fine-tuning: one trivially learnable task per head family, through the CLI.

Each test writes a synthetic dataset whose label is a keyword rule (so a 2-layer, 32-wide BERT
learns it in seconds), fine-tunes from random init with `clozeformer finetune`, checks the dev
score, reloads the output directory in `transformers` and compares logits (1e-5), and runs
`evaluate` / `predict` on it.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
import torch
from synthetic import cli_args

from clozeformer.commands.cli import main as cli_main
from clozeformer.utils.io import OWNER_FILE

FILLER = "the a of and to in is was it on for with as at by this that from or".split()
TAGS_WORDS = {"paris": "LOC", "london": "LOC", "alice": "PER", "bob": "PER"}
COLORS = ["red", "blue", "green"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
FIXTURES = Path(__file__).parents[1] / "fixtures"
WORDS = sorted(set(FILLER + list(TAGS_WORDS) + COLORS + ["good", "bad", "up", "what", "color", "?", "yes", "no"]))

# hidden 32, 2 layers, 2 heads: small enough to learn a keyword rule in ~100 steps on 1 core
TINY = ["--model", "tiny", "--seed", "0", "--batch-size", "16", "--lr", "2e-3", "--warmup-ratio", "0.1", "--threads", "1"]


@pytest.fixture(autouse=True)
def _tiny_preset(monkeypatch):
    """Shrink the `tiny` preset for speed: (layers, hidden, heads) = (2, 32, 2)."""
    from clozeformer.modeling import config

    monkeypatch.setitem(config.PRESETS, "tiny", (2, 32, 2))


def write_vocab(tmp_path: Path) -> Path:
    d = tmp_path / "vocab"
    d.mkdir()
    (d / "vocab.txt").write_text("\n".join(SPECIALS + WORDS) + "\n", encoding="utf-8")
    (d / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}), encoding="utf-8")
    return d


def sentence(rng: random.Random, n: int = 6) -> list[str]:
    return [rng.choice(FILLER) for _ in range(n)]


def run(argv: list[str]) -> None:
    assert cli_main(argv) == 0


def finetune(task: str, data: Path, vocab: Path, out: Path, **flags) -> None:
    """`finetune --task --data --tokenizer --out`, then `flags` (as `cli_args` writes them) and TINY: must succeed."""
    run(cli_args("finetune", task=task, data=data, tokenizer=vocab, out=out, **flags) + TINY)


def write_keyword_csv(data: Path, rng: random.Random, splits: tuple, columns: list[str], n_words: int = 6) -> Path:
    """CSV splits of `n_words` filler words and "good" (label pos) or "bad" (neg) at a random place."""
    data.mkdir()
    for split, n in splits:
        with open(data / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(columns)
            for _ in range(n):
                words, label = sentence(rng, n_words), rng.choice(["pos", "neg"])
                words.insert(rng.randrange(len(words)), "good" if label == "pos" else "bad")
                w.writerow([" ".join(words), label])
    return data


def metrics_of(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def hf_logits_match(out: Path, auto_cls: str, ours_cls, inputs: dict) -> None:
    import transformers

    ours = ours_cls.from_pretrained(out).eval()
    theirs = getattr(transformers, auto_cls).from_pretrained(out).eval()
    with torch.no_grad():
        a, b = ours(**inputs), theirs(**inputs)
    for name in ("logits", "start_logits", "end_logits"):
        if hasattr(b, name) and getattr(b, name) is not None and hasattr(a, name):
            torch.testing.assert_close(getattr(a, name), getattr(b, name), atol=1e-5, rtol=1e-5)


def hf_tokenizer_matches(out: Path, text: str) -> None:
    import transformers

    from clozeformer.modeling.tokenizer import Tokenizer

    theirs = transformers.AutoTokenizer.from_pretrained(out)
    assert theirs(text)["input_ids"] == Tokenizer.from_pretrained(out).encode(text).input_ids


def test_sequence_classification_end_to_end(tmp_path):
    from clozeformer.modeling.bert import BertForSequenceClassification

    rng = random.Random(0)
    vocab = write_vocab(tmp_path)
    data = write_keyword_csv(tmp_path / "data", rng, (("train", 320), ("dev", 64), ("test", 16)), ["review", "sentiment"])
    out = tmp_path / "out"
    finetune("classification", data, vocab, out, text_column="review", label_column="sentiment", epochs=3)
    m = metrics_of(out)
    assert m["best"]["scores"]["dev"]["accuracy"] >= 0.95
    assert m["labels"] == ["neg", "pos"]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["id2label"] == {"0": "neg", "1": "pos"} and cfg["label2id"] == {"neg": 0, "pos": 1}
    for name in ("model.safetensors", "vocab.txt", "tokenizer_config.json", "finetune_config.json"):
        assert (out / name).is_file()

    ids = torch.tensor([[2, 5, 6, 7, 8, 3, 0, 0], [2, 9, 10, 3, 0, 0, 0, 0]])
    hf_logits_match(
        out,
        "AutoModelForSequenceClassification",
        BertForSequenceClassification,
        {"input_ids": ids, "attention_mask": (ids != 0).long()},
    )
    hf_tokenizer_matches(out, "the movie was good")

    # evaluate reuses the saved task and columns; predict writes index<TAB>label
    run(["evaluate", "--data", str(data / "dev.csv"), "--model", str(out), "--threads", "1"])
    assert json.loads((out / "eval" / "metrics.json").read_text())["scores"]["dev"]["accuracy"] >= 0.95
    run(["predict", "--data", str(data), "--model", str(out), "--out", str(tmp_path / "pred"), "--threads", "1"])
    rows = (tmp_path / "pred" / "predictions_test.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and len(rows) == 17
    assert {r.split("\t")[1] for r in rows[1:]} <= {"pos", "neg"}
    # an unlabelled test file (no `sentiment` column at all): labels are optional at prediction time
    unlabeled = tmp_path / "unlabeled"
    unlabeled.mkdir()
    (unlabeled / "test.csv").write_text("review\nthe movie was good\nit was bad\n", encoding="utf-8")
    run(["predict", "--data", str(unlabeled), "--model", str(out), "--out", str(tmp_path / "pred2"), "--threads", "1"])
    rows = (tmp_path / "pred2" / "predictions_test.tsv").read_text().splitlines()
    assert rows == ["index\tprediction", "0\tpos", "1\tneg"]


def test_glue_regression_stsb_format(tmp_path):
    """STS-B layout (10 columns, float score): score = 5 * fraction of 'up' words."""
    from clozeformer.modeling.bert import BertForSequenceClassification

    rng = random.Random(1)
    vocab = write_vocab(tmp_path)
    data = tmp_path / "STS-B"
    data.mkdir()
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    for split, n in (("train", 400), ("dev", 80)):
        lines = [header]
        for i in range(n):
            k = rng.randrange(5)
            s1 = sentence(rng, 4) + ["up"] * k
            rng.shuffle(s1)
            lines.append(
                f"{i}\tmain-captions\tMSRvid\t2012test\t{i:04d}\tnone\tnone\t{' '.join(s1)}\t"
                f"{' '.join(sentence(rng, 3))}\t{5 * k / 4:.3f}"
            )
        (data / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    (data / "test.tsv").write_text(
        header.rsplit("\t", 1)[0] + "\n0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tup up the\ta of\n"
    )
    out = tmp_path / "out"
    finetune("sts-b", data, vocab, out, epochs=4)
    scores = metrics_of(out)["best"]["scores"]["dev"]
    assert scores["pearson"] > 0.85 and scores["spearman"] > 0.8, scores
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["num_labels"] == 1 and cfg["problem_type"] == "regression"
    ids = torch.tensor([[2, 5, 6, 3]])
    hf_logits_match(out, "AutoModelForSequenceClassification", BertForSequenceClassification, {"input_ids": ids})
    run(["predict", "--model", str(out), "--data", str(data), "--out", str(tmp_path / "sub"), "--threads", "1"])
    rows = (tmp_path / "sub" / "STS-B.tsv").read_text().splitlines()
    assert rows[0] == "index\tprediction" and rows[1].startswith("0\t") and 0.0 <= float(rows[1].split("\t")[1]) <= 5


def test_token_classification_end_to_end(tmp_path):
    from clozeformer.modeling.bert import BertForTokenClassification

    rng = random.Random(2)
    vocab = write_vocab(tmp_path)
    data = tmp_path / "ner"
    data.mkdir()
    for split, n in (("train", 300), ("dev", 60)):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(n):
            words = sentence(rng, 5)
            tags = ["O"] * len(words)
            for _ in range(rng.randrange(1, 3)):
                pos = rng.randrange(len(words) + 1)
                name = rng.choice(sorted(TAGS_WORDS))
                words.insert(pos, name)
                tags.insert(pos, "B-" + TAGS_WORDS[name])
            lines += [f"{w} NN O {t}" for w, t in zip(words, tags)] + [""]
        (data / ("train.txt" if split == "train" else "valid.txt")).write_text("\n".join(lines))
    out = tmp_path / "out"
    finetune("conll2003", data, vocab, out, epochs=3, max_length=32)
    scores = metrics_of(out)["best"]["scores"]["dev"]
    assert scores["f1"] >= 0.95, scores
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["id2label"]["0"] == "O" and cfg["num_labels"] == 9
    ids = torch.tensor([[2, 5, 6, 7, 3]])
    hf_logits_match(out, "AutoModelForTokenClassification", BertForTokenClassification, {"input_ids": ids})
    # predict on a one-column file: the word plus its predicted tag
    (data / "test.txt").write_text("alice\nwas\nin\nparis\n\nbob\n")
    run(["predict", "--model", str(out), "--data", str(data), "--out", str(tmp_path / "p"), "--threads", "1"])
    got = (tmp_path / "p" / "predictions_test.txt").read_text().split("\n")
    assert got[:5] == ["alice B-PER", "was O", "in O", "paris B-LOC", ""]
    # a sentence three windows long (max_length 32): predict reads it in the `ner` pipeline's
    # windows and labels every word (no truncation to O), the same labels as the pipeline
    from clozeformer.infer.pipelines import pipeline

    long_words = [w for _ in range(8) for w in ("alice", "met", "bob", "in", "london", "and", "paris", "the")]
    (data / "test.txt").write_text("\n".join(long_words) + "\n")
    run(["predict", "--model", str(out), "--data", str(data), "--out", str(tmp_path / "p2"), "--threads", "1"])
    tags = [line.split()[1] for line in (tmp_path / "p2" / "predictions_test.txt").read_text().split("\n") if line]
    assert len(tags) == len(long_words)
    want = {"alice": "B-PER", "bob": "B-PER", "london": "B-LOC", "paris": "B-LOC"}
    assert tags == [want.get(w, "O") for w in long_words]  # the last words too
    pipe = pipeline("ner", out, threads=1)
    assert pipe.max_length == 32  # the windows evaluation used
    res = pipe(" ".join(long_words))
    assert res["windows"] > 2
    assert [(e["type"], e["text"]) for e in res["entities"]] == [(want[w][2:], w) for w in long_words if w in want]


def _qa_article(rng: random.Random, n: int, impossible_every: int = 0) -> list[dict]:
    """Contexts of ~30 filler words with one color word; the answer is the color."""
    paragraphs = []
    for i in range(n):
        words = sentence(rng, 30)
        qa: dict = {"id": f"q{i}", "question": "what color ?"}
        if impossible_every and i % impossible_every == 0:
            qa.update(answers=[], is_impossible=True)
        else:
            pos = rng.randrange(len(words))
            color = rng.choice(COLORS)
            words.insert(pos, color)
            start = len(" ".join(words[:pos])) + (1 if pos else 0)
            qa["answers"] = [{"text": color, "answer_start": start}]
            if impossible_every:
                qa["is_impossible"] = False
        paragraphs.append({"context": " ".join(words), "qas": [qa]})
    return [{"title": "synthetic", "paragraphs": paragraphs}]


@pytest.mark.parametrize("version", ["v1.1", "v2.0"])
def test_question_answering_end_to_end(tmp_path, version):
    """Contexts longer than the window (max_length 24): exercises windows + n-best + offsets."""
    from clozeformer.modeling.bert import BertForQuestionAnswering

    rng = random.Random(3)
    vocab = write_vocab(tmp_path)
    data = tmp_path / "squad"
    data.mkdir()
    every = 4 if version == "v2.0" else 0
    task = "squad" if version == "v1.1" else "squad_v2"
    for split, n in (("train", 200), ("dev", 40)):
        doc = {"version": version, "data": _qa_article(rng, n, every)}
        (data / f"{split}-{version}.json").write_text(json.dumps(doc))
    out = tmp_path / "out"
    finetune(task, data, vocab, out, epochs=4, max_length=24, doc_stride=8, max_question_length=8)
    m = metrics_of(out)
    assert m["train_features"] > 2 * m["train_examples"]  # contexts span several windows
    scores = m["best"]["scores"]["dev"]
    em = scores["exact_match"] if version == "v1.1" else scores["exact"]
    assert em >= 80.0, scores
    ids = torch.tensor([[2, 5, 6, 3, 7, 8, 9, 3]])
    hf_logits_match(
        out,
        "AutoModelForQuestionAnswering",
        BertForQuestionAnswering,
        {"input_ids": ids, "token_type_ids": torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1]])},
    )
    run(cli_args("predict", model=out, data=f"dev={data / f'dev-{version}.json'}", split="dev", out=tmp_path / "p", threads=1))
    preds = json.loads((tmp_path / "p" / "predictions_dev.json").read_text())
    assert len(preds) == 40 and all(p in COLORS + [""] for p in preds.values())
    nbest = json.loads((tmp_path / "p" / "nbest_predictions_dev.json").read_text())
    assert abs(sum(e["probability"] for e in nbest["q1"]) - 1) < 1e-6
    assert (tmp_path / "p" / "null_odds_dev.json").is_file() == (version == "v2.0")
    # serving decodes as evaluation scored: `qa` with no options takes the model's own window and
    # decoding settings (config.json qa_*) and the one decoder (clozeformer.data.spans)
    from clozeformer.infer.pipelines import pipeline

    dev = json.loads((data / f"dev-{version}.json").read_text())["data"][0]["paragraphs"]
    pipe = pipeline("qa", out, threads=1)
    assert (pipe.max_length, pipe.doc_stride, pipe.max_question_length) == (24, 8, 8)
    assert pipe.allow_no_answer == (version == "v2.0")
    served = {p["qas"][0]["id"]: pipe({"question": p["qas"][0]["question"], "context": p["context"]}) for p in dev}
    assert all(r["windows"] > 1 for r in served.values())
    assert {qid: r["answer"] for qid, r in served.items()} == preds
    best = {qid: entries[0] for qid, entries in nbest.items()}
    for qid, r in served.items():
        if r["answer"] == best[qid]["text"]:
            assert r["score"] == pytest.approx(best[qid]["probability"], abs=1e-6)
    first = dev[0]
    code = cli_main(["qa", "--model", str(out), "--question", "what color ?", "--context", first["context"], "--threads", "1"])
    assert code == 0


def test_multiple_choice_swag_end_to_end(tmp_path):
    from clozeformer.modeling.bert import BertForMultipleChoice

    rng = random.Random(4)
    vocab = write_vocab(tmp_path)
    data = tmp_path / "swag"
    data.mkdir()
    header = [
        "",
        "video-id",
        "fold-ind",
        "startphrase",
        "sent1",
        "sent2",
        "gold-source",
        "ending0",
        "ending1",
        "ending2",
        "ending3",
        "label",
    ]
    for name, n in (("train.csv", 240), ("val.csv", 48)):
        with open(data / name, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(header)
            for i in range(n):
                label = rng.randrange(4)
                endings = [" ".join(sentence(rng, 3) + (["yes"] if j == label else ["no"])) for j in range(4)]
                s1, s2 = " ".join(sentence(rng, 4)), "it"
                w.writerow([i, f"anetv_{i}", i, f"{s1} {s2}", s1, s2, "gold", *endings, label])
    out = tmp_path / "out"
    finetune("swag", data, vocab, out, epochs=4, max_length=24)
    assert metrics_of(out)["best"]["scores"]["dev"]["accuracy"] >= 0.9
    ids = torch.tensor([[[2, 5, 3, 6, 3], [2, 5, 3, 7, 3]]])  # (B=1, C=2, T=5)
    hf_logits_match(out, "AutoModelForMultipleChoice", BertForMultipleChoice, {"input_ids": ids})


def test_from_transformers_saved_directory(tmp_path):
    """A randomly initialised transformers BertForPreTraining + vocab: the --model DIR path."""
    import transformers

    vocab = write_vocab(tmp_path)
    hf_dir = tmp_path / "hf"
    cfg = transformers.BertConfig(
        vocab_size=len(SPECIALS) + len(WORDS), hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128
    )
    torch.manual_seed(0)
    transformers.BertForPreTraining(cfg).save_pretrained(hf_dir)
    (hf_dir / "vocab.txt").write_text((vocab / "vocab.txt").read_text())
    rng = random.Random(5)
    data = tmp_path / "d"
    data.mkdir()
    for split, n in (("train", 320), ("dev", 40)):
        rows = []
        for _ in range(n):
            words = sentence(rng)
            label = rng.choice(["0", "1"])
            words.insert(2, "good" if label == "1" else "bad")
            rows.append(json.dumps({"text": " ".join(words), "label": int(label)}))
        (data / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    argv = cli_args("finetune", task="classification", data=data, model=hf_dir, out=out, epochs=4)
    run(argv + cli_args(seed=0, batch_size=16, lr="2e-3", threads=1))
    m = metrics_of(out)
    assert m["best"]["scores"]["dev"]["accuracy"] >= 0.95 and m["labels"] == ["0", "1"]


def write_random_sst2(data: Path, rng: random.Random, n_train: int = 200, n_dev: int = 30) -> Path:
    """SST-2-layout train/dev TSVs of random sentences with random labels (nothing to learn)."""
    data.mkdir()
    for split, n in (("train", n_train), ("dev", n_dev)):
        lines = ["sentence\tlabel"] + [f"{' '.join(sentence(rng))}\t{rng.randrange(2)}" for _ in range(n)]
        (data / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return data


def test_max_time_and_caps(tmp_path):
    """--max-train-examples caps the data; --max-time stops early and still saves + evaluates."""
    vocab = write_vocab(tmp_path)
    data = write_random_sst2(tmp_path / "d", random.Random(6), n_dev=30)
    out = tmp_path / "out"
    finetune("sst2", data, vocab, out, max_train_examples=50, max_eval_examples=10, max_time="1e-9", epochs=5)
    m = metrics_of(out)
    assert m["train_examples"] == 50 and m["eval_examples"] == {"dev": 10}
    assert m["stopped_early"] and m["steps"] == 1 and m["best"] is not None
    assert (out / "model.safetensors").is_file()
    assert json.loads((out / OWNER_FILE).read_text())["complete"] is True  # written last
    # the same --out again without --overwrite is refused; a directory of the user's, even with it
    again = ["finetune", "--task", "sst2", "--data", str(data), "--tokenizer", str(vocab), *TINY]
    assert cli_main([*again, "--out", str(out)]) == 2
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert cli_main([*again, "--out", str(mine), "--overwrite"]) == 2
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_unset_lr_is_the_default_for_the_model_size(tmp_path, capsys):
    """Without --lr, small models (hidden <= 256) fine-tune at 5e-4, larger ones at BERT's 3e-5; the
    rate used is printed and saved in finetune_config.json."""
    from clozeformer.tasks.task_config import default_finetune_lr

    assert [default_finetune_lr(h) for h in (128, 256, 512, 768)] == [5e-4, 5e-4, 3e-5, 3e-5]
    vocab = write_vocab(tmp_path)
    data = write_random_sst2(tmp_path / "d", random.Random(6), n_dev=10)
    out = tmp_path / "out"
    no_lr = [f for i, f in enumerate(TINY) if f != "--lr" and (i == 0 or TINY[i - 1] != "--lr")]
    run(cli_args("finetune", task="sst2", data=data, tokenizer=vocab, out=out, max_train_examples=16, max_time="1e-9") + no_lr)
    assert json.loads((out / "finetune_config.json").read_text())["lr"] == 5e-4
    assert "lr 0.0005 (--lr unset: the default for hidden size 32)" in capsys.readouterr().out


def test_mnli_two_dev_sets_submissions_and_config_file(tmp_path):
    """MNLI: matched + mismatched dev scores each epoch; predict writes MNLI-m / MNLI-mm / AX."""
    conf = tmp_path / "ft.json"
    conf.write_text(json.dumps({"epochs": 1, "batch_size": 2, "max_seq_len": 48}))
    out, mnli = tmp_path / "out", FIXTURES / "task_glue" / "MNLI"
    argv = cli_args("finetune", config=conf, task="MNLI", data=mnli, tokenizer=FIXTURES / "task_vocab.txt", out=out, model="tiny")
    run(argv + cli_args(threads=1, epochs=2))  # the flag wins over the file
    m = metrics_of(out)
    assert m["epochs"] == 2 and set(m["best"]["scores"]) == {"dev_matched", "dev_mismatched"}
    saved = json.loads((out / "finetune_config.json").read_text())
    assert saved["batch_size"] == 2 and saved["max_length"] == 48 and saved["epochs"] == 2
    run(cli_args("predict", model=out, data=mnli, out=tmp_path / "p", threads=1))
    for name in ("MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"):
        rows = (tmp_path / "p" / name).read_text().splitlines()
        assert rows[0] == "index\tprediction" and rows[1].split("\t")[1] in ("contradiction", "entailment", "neutral")


def test_custom_qa_with_unanswerable_rows_uses_squad_v2(tmp_path):
    out = tmp_path / "out"
    qa = FIXTURES / "task_custom" / "qa.jsonl"
    argv = cli_args("finetune", task="qa", data=[f"train={qa}", f"dev={qa}"], tokenizer=FIXTURES / "task_vocab.txt", out=out)
    run(argv + cli_args(model="tiny", epochs=1, max_length=64, max_question_length=16, threads=1))
    assert json.loads((out / "config.json").read_text())["qa_version_2"] is True
    scores = metrics_of(out)["best"]["scores"]["dev"]
    assert {"exact", "f1", "HasAns_exact", "NoAns_exact"} <= set(scores)
    run(["evaluate", "--model", str(out), "--data", str(qa), "--threads", "1"])
    assert "best_f1_thresh" in json.loads((out / "eval" / "metrics.json").read_text())["scores"]["dev"]


def test_rotary_model_with_mean_pooling_and_dropout(tmp_path):
    """Fine-tune a rotary (RoFormer) directory with --pooling mean --dropout 0.2: both are saved in the
    config, the keyword rule is learned, and the directory classifies through the pipeline."""
    from clozeformer.infer.pipelines import pipeline
    from clozeformer.modeling.bert import BertForMaskedLM
    from clozeformer.modeling.config import BertConfig

    rng = random.Random(1)
    vocab = write_vocab(tmp_path)
    n_vocab = len((vocab / "vocab.txt").read_text().splitlines())
    base = tmp_path / "rotary-base"
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig.preset("tiny", vocab_size=n_vocab, position_embedding_type="rotary")).save_pretrained(base)
    for name in ("vocab.txt", "tokenizer_config.json"):
        (base / name).write_bytes((vocab / name).read_bytes())
    data = write_keyword_csv(tmp_path / "data", rng, (("train", 320), ("dev", 64)), ["text", "label"], n_words=8)
    out = tmp_path / "out"
    argv = cli_args("finetune", task="classification", data=data, model=base, out=out, text_column="text", label_column="label")
    run(argv + cli_args(epochs=3, pooling="mean", dropout="0.2") + [a for a in TINY if a not in ("--model", "tiny")])
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_type"] == "roformer" and cfg["architectures"] == ["RoFormerForSequenceClassification"]
    assert cfg["classifier_pooling"] == "mean" and cfg["hidden_dropout_prob"] == 0.2
    assert metrics_of(out)["best"]["scores"]["dev"]["accuracy"] >= 0.95
    clf = pipeline("classify", str(out))
    assert [r["label"] for r in clf(["the movie was good", "it was bad"])] == ["pos", "neg"]
    assert cli_main(cli_args("finetune", task="classification", data=data, model=base, out=tmp_path / "x", dropout="1.5")) == 2


def test_nan_loss_stops_with_one_error_line_and_no_finished_model(tmp_path, capsys):
    """The core's NaN guard in fine-tuning: non-finite steps are skipped, a streak of them is
    one `error:` line (exit 2), and the directory is never marked a finished model."""
    vocab = write_vocab(tmp_path)
    data = write_random_sst2(tmp_path / "d", random.Random(7), n_dev=20)
    out = tmp_path / "out"
    flags = [*TINY[:-6], "--threads", "1", "--lr", "1e30", "--warmup-ratio", "0"]
    argv = ["finetune", "--task", "sst2", "--data", str(data), "--tokenizer", str(vocab), "--out", str(out), *flags]
    assert cli_main(argv) == 2
    cap = capsys.readouterr()
    err = [line for line in cap.err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "consecutive steps with a NaN/Inf loss" in err[0], err
    assert json.loads((out / OWNER_FILE).read_text())["complete"] is False
