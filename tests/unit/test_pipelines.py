"""Pipelines (fill-mask, classify, embed, qa, ner), the embedding index and the prediction verbs.

Tiny models are built here and saved as HF-format directories (config.json + safetensors +
vocab.txt from tests/fixtures/infer_vocab.txt). For exact QA and NER spans, the QA and NER
models are wired by hand: every residual branch of the encoder is zeroed, so a token's final
state is the LayerNorm of its own embedding; chosen words get embeddings along orthonormal
directions, and the head's weights read those directions. The model then provably answers
"Paris" or tags "John" B-PER, and the tests check the span and offset logic end to end.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from synthetic import save_model, save_tiny

import clozeformer
from clozeformer.commands.cli import main as cli_main
from clozeformer.data.spans import max_context_pieces
from clozeformer.infer.index import EmbeddingIndex
from clozeformer.infer.ner import group_entities
from clozeformer.infer.pipelines import InputError, pipeline
from clozeformer.modeling.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from clozeformer.modeling.config import BertConfig
from clozeformer.utils.errors import ClozeformerError

FIXTURES = Path(__file__).parents[1] / "fixtures"
NER_LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
ZH = "我昨天去了[MASK][MASK]，买了一件红色的外套。"


pytestmark = pytest.mark.usefixtures("one_thread")


def zero_mean_directions(n: int, dim: int, seed: int) -> torch.Tensor:
    """(n, dim) orthonormal rows with zero mean, so LayerNorm keeps their direction."""
    x = torch.randn(dim, n, generator=torch.Generator().manual_seed(seed))
    x = x - x.mean(0)
    q, _ = torch.linalg.qr(x)
    return q.T.contiguous()


def transparent_encoder(model) -> None:
    """Zero every residual branch: each layer becomes LayerNorm(x) = x (x already normalised)."""
    for layer in model.bert.encoder.layer:
        for lin in (layer.attention.dense, layer.ffn.output):
            lin.weight.zero_()
            lin.bias.zero_()


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, infer_tok) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("infer_models")
    V = infer_tok.vocab_size
    out = {}
    torch.manual_seed(0)
    out["mlm"] = save_tiny(BertForMaskedLM, infer_tok, root / "mlm")
    out["pretrain"] = save_tiny(BertForPreTraining, infer_tok, root / "pretrain")
    out["cls"] = save_tiny(BertForSequenceClassification, infer_tok, root / "cls", id2label={0: "neg", 1: "pos"})
    out["reg"] = save_tiny(BertForSequenceClassification, infer_tok, root / "reg", num_labels=1, problem_type="regression")
    multi = {"id2label": {0: "a", 1: "b", 2: "c"}, "problem_type": "multi_label_classification"}
    out["multi"] = save_tiny(BertForSequenceClassification, infer_tok, root / "multi", **multi)
    out["base"] = save_tiny(BertModel, infer_tok, root / "base")
    ids = infer_tok.vocab
    with torch.no_grad():
        # QA: "paris" is both start and end; "new" starts and "city" ends a span.
        qa = BertForQuestionAnswering(BertConfig.preset("tiny", vocab_size=V))
        transparent_encoder(qa)
        u = zero_mean_directions(2, 128, seed=1)
        emb = qa.bert.embeddings.word_embeddings.weight
        emb[ids["paris"]] = 50 * (u[0] + u[1]) / math.sqrt(2)
        emb[ids["new"]] = 50 * u[0]
        emb[ids["city"]] = 50 * u[1]
        qa.qa_outputs.weight.copy_(u)  # row 0 = start, row 1 = end
        qa.qa_outputs.bias.zero_()
        out["qa"] = save_model(qa, infer_tok, root / "qa")
        # NER: john B-PER, smith I-PER, new/paris B-LOC, york I-LOC, everything else O (bias 5).
        ner = BertForTokenClassification(BertConfig.preset("tiny", vocab_size=V, id2label=NER_LABELS))
        transparent_encoder(ner)
        u = zero_mean_directions(4, 128, seed=2)
        emb = ner.bert.embeddings.word_embeddings.weight
        for word, k in (("john", 0), ("smith", 1), ("new", 2), ("paris", 2), ("york", 3)):
            emb[ids[word]] = 50 * u[k]
        ner.classifier.weight.zero_()
        ner.classifier.weight[1:] = u
        ner.classifier.bias.copy_(torch.tensor([5.0, 0, 0, 0, 0]))
        out["ner"] = save_model(ner, infer_tok, root / "ner")
    return out


def read_jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines() if line]


# ----------------------------------------------------------------------------- fill-mask


def test_fill_mask_matches_the_model(dirs, infer_tok):
    pipe = clozeformer.pipeline("fill-mask", model=dirs["mlm"], top_k=4)
    model = BertForMaskedLM.from_pretrained(dirs["mlm"]).eval()
    texts = ["The cat sat on the [MASK].", "a [MASK] dog read the book [MASK] the long night", ZH]
    results = pipe(texts)
    for text, res in zip(texts, results):
        enc = infer_tok.encode(text)
        with torch.no_grad():
            logits = model(torch.tensor([enc.input_ids])).logits[0]  # (T, V) dense
        positions = [i for i, t in enumerate(enc.input_ids) if t == infer_tok.mask_token_id]
        assert len(res["masks"]) == len(positions) == text.count("[MASK]")
        for pos, m in zip(positions, res["masks"]):
            assert text[m["start"] : m["end"]] == "[MASK]"
            want_p, want_i = logits[pos].softmax(-1).topk(4)
            assert [c["token_id"] for c in m["candidates"]] == want_i.tolist()
            np.testing.assert_allclose([c["score"] for c in m["candidates"]], want_p.numpy(), rtol=1e-5, atol=1e-6)
            assert [c["token"] for c in m["candidates"]] == infer_tok.convert_ids_to_tokens(want_i.tolist())
        assert "[MASK]" not in res["sequence"] and res["truncated"] is False


def test_fill_mask_probabilities_sum_to_one_and_chinese(dirs, infer_tok):
    pipe = pipeline("fill-mask", dirs["pretrain"], top_k=infer_tok.vocab_size)  # BertForPreTraining works too
    res = pipe(ZH)
    assert [(m["start"], m["end"]) for m in res["masks"]] == [(5, 11), (11, 17)]
    for m in res["masks"]:
        scores = [c["score"] for c in m["candidates"]]
        assert abs(sum(scores) - 1.0) < 1e-4
        assert scores == sorted(scores, reverse=True)
    tops = [m["candidates"][0]["token"].removeprefix("##") for m in res["masks"]]
    assert res["sequence"] == "我昨天去了" + tops[0] + tops[1] + "，买了一件红色的外套。"


def test_fill_mask_errors(dirs):
    pipe = pipeline("fill-mask", dirs["mlm"], max_length=16)
    with pytest.raises(ClozeformerError, match=r"no \[MASK\]"):
        pipe("no mask in here")
    with pytest.raises(InputError, match=r"input 1: no \[MASK\]") as e:
        pipe(["a [MASK]", "none"])
    assert e.value.index == 1
    with pytest.raises(ClozeformerError, match="empty"):
        pipe("   ")
    long = " ".join(["the"] * 30)
    with pytest.raises(ClozeformerError, match="past the first 16 tokens"):
        pipe(long + " [MASK]")
    res = pipe("[MASK] " + long + " [MASK]")
    assert res["truncated"] and len(res["masks"]) == 1 and res["dropped_masks"] == 1
    with pytest.raises(ClozeformerError, match="longer than the maximum of 16 tokens"):
        pipeline("fill-mask", dirs["mlm"], max_length=16, overlong="reject")("[MASK] " + long)
    with pytest.raises(ClozeformerError, match="no head for fill-mask.*BertForMaskedLM"):
        pipeline("fill-mask", dirs["cls"])
    with pytest.raises(ClozeformerError, match="unknown task"):
        pipeline("translate", dirs["mlm"])
    # transformers' task names are aliases of ours
    for theirs, ours, d in [("text-classification", "classify", "cls"), ("feature-extraction", "embed", "base"),
                            ("question-answering", "qa", "qa"), ("token-classification", "ner", "ner")]:  # fmt: skip
        assert pipeline(theirs, dirs[d]).task == ours
    with pytest.raises(ClozeformerError, match="no such model directory"):
        pipeline("fill-mask", dirs["mlm"].parent / "missing")


# ----------------------------------------------------------------------------- classify


def test_classify_probabilities_pairs_and_padding_invariance(dirs, infer_tok):
    pipe = pipeline("classify", dirs["cls"], batch_size=3)
    model = BertForSequenceClassification.from_pretrained(dirs["cls"]).eval()
    items = [
        "good movie",
        ("a good movie", "it was very bad"),
        {"text": "bad", "text_pair": "not good"},
        "the film was long and really boring but the book was fun to read",
        "nice",
    ]
    results = pipe(items)
    for item, res in zip(items, results):
        assert set(res["scores"]) == {"neg", "pos"}
        assert abs(sum(res["scores"].values()) - 1.0) < 1e-6
        assert res["label"] == max(res["scores"], key=res["scores"].get) and res["score"] == res["scores"][res["label"]]
        a, b = (item, None) if isinstance(item, str) else (item if isinstance(item, tuple) else (item["text"], item["text_pair"]))
        enc = infer_tok.encode(a, b)
        assert (b is not None) == (1 in enc.token_type_ids)
        with torch.no_grad():  # one unpadded row: batching and padding must not change the result
            p = model(torch.tensor([enc.input_ids]), token_type_ids=torch.tensor([enc.token_type_ids])).logits.softmax(-1)[0]
        assert res["scores"]["neg"] == pytest.approx(float(p[0]), abs=1e-5)
    alone = pipe("good movie")  # the same answer alone as in a padded batch (to float rounding: kernels differ by shape)
    assert (alone["label"], alone["truncated"]) == (results[0]["label"], results[0]["truncated"])
    assert alone["scores"] == pytest.approx(results[0]["scores"], abs=1e-6) and set(alone) == set(results[0])


def test_classify_regression_and_multilabel(dirs):
    reg = pipeline("classify", dirs["reg"])(["good", "bad movie"])
    assert all(set(r) == {"value", "truncated"} and isinstance(r["value"], float) for r in reg)
    multi = pipeline("classify", dirs["multi"])("good")
    assert set(multi["scores"]) == {"a", "b", "c"}
    assert multi["labels"] == [k for k, p in multi["scores"].items() if p >= 0.5]
    assert all(0 < p < 1 for p in multi["scores"].values())


def test_classify_bad_inputs(dirs):
    pipe = pipeline("classify", dirs["cls"])
    with pytest.raises(InputError, match="input 0: text_pair is empty"):
        pipe([("good", "")])
    with pytest.raises(InputError, match="input 1: expected a text"):
        pipe(["good", 3])
    long = " ".join(["good"] * 600)
    assert pipe(long)["truncated"] is True
    with pytest.raises(ClozeformerError, match="longer than the maximum of 512"):
        pipeline("classify", dirs["cls"], overlong="reject")(long)
    # a huge single text is cut by characters before tokenizing (a window can hold at most
    # 101 characters a token), with the same prediction as the text cut to its first window
    huge = "good film . " * 20_000  # 240,000 characters, far past 16 x 101
    small = pipeline("classify", dirs["cls"], max_length=16)
    cut = small(huge)
    assert cut["truncated"] is True and cut["label"] == small("good film . " * 10)["label"]
    assert cut["scores"] == pytest.approx(small("good film . " * 10)["scores"])
    with pytest.raises(InputError, match="input 0: 240,000 characters, more than 16 tokens take"):
        pipeline("classify", dirs["cls"], max_length=16, overlong="reject")([huge])
    assert pipeline("embed", dirs["cls"], max_length=16)(huge)["truncated"] is True


# ----------------------------------------------------------------------------- embed + index


def test_embed_pooling_normalisation_and_batching(dirs, infer_tok):
    texts = ["good movie", "the cat sat on the mat", "我昨天去了商店", "john"]
    model = BertModel.from_pretrained(dirs["base"]).eval()
    for pooling in ("cls", "mean", "max"):
        pipe = pipeline("embed", dirs["base"], pooling=pooling, batch_size=2)
        vecs = pipe.embed(texts)
        assert vecs.shape == (4, 128) and vecs.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        for text, v in zip(texts, vecs):
            with torch.no_grad():
                h = model(torch.tensor([infer_tok.encode(text).input_ids])).last_hidden_state[0]  # (T, H)
            want = {"cls": h[0], "mean": h.mean(0), "max": h.amax(0)}[pooling]
            np.testing.assert_allclose(v, (want / want.norm()).numpy(), atol=1e-5)
        single = pipe(texts[1])
        np.testing.assert_allclose(single["embedding"], vecs[1], atol=1e-6)
        assert json.loads(json.dumps(pipe.to_json(single)))["embedding"][0] == pytest.approx(float(vecs[1][0]), abs=1e-6)
    # any head class embeds with its encoder
    assert pipeline("embed", dirs["cls"]).embed(["good"]).shape == (1, 128)


def test_embed_uses_a_sentence_transformers_directorys_pooling(dirs, tmp_path):
    """modules.json + 1_Pooling/config.json (sentence-transformers' layout) choose the pooling, a
    Normalize module the unit length, sentence_bert_config.json the text length."""
    import shutil

    st = tmp_path / "st"
    shutil.copytree(dirs["base"], st)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (st / "modules.json").write_text(json.dumps(modules))
    (st / "1_Pooling").mkdir()
    modes = {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False}
    (st / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 128, **modes}))
    texts = ["good movie", "the cat sat on the mat"]
    pipe = pipeline("embed", st)
    assert (pipe.pooling, pipe.normalize) == ("mean", False)  # no Normalize module: raw vectors
    want = pipeline("embed", dirs["base"], pooling="mean", normalize=False).embed(texts)
    np.testing.assert_allclose(pipe.embed(texts), want, atol=1e-6)
    assert pipeline("embed", st, pooling="cls").pooling == "cls"  # an explicit choice wins
    assert pipeline("embed", dirs["base"]).pooling == "cls"  # no sentence-transformers files: [CLS]
    # a Normalize module, a length, the newer layout (sentence-transformers 6: "pooling_mode", long type names)
    normalize = "sentence_transformers.base.modules.normalize.Normalize"
    modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": normalize})
    modules[1]["type"] = "sentence_transformers.sentence_transformer.modules.pooling.Pooling"
    (st / "modules.json").write_text(json.dumps(modules))
    (st / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 128, "pooling_mode": "max"}))
    (st / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": False}))
    pipe = pipeline("embed", st)
    assert (pipe.pooling, pipe.normalize, pipe.max_length) == ("max", True, 16)
    assert pipeline("embed", st, max_length=32).max_length == 32
    # what clozeformer does not compute is refused, not ignored
    (st / "1_Pooling" / "config.json").write_text(json.dumps({**modes, "pooling_mode_mean_sqrt_len_tokens": True}))
    with pytest.raises(ClozeformerError, match="pooling mean_tokens, mean_sqrt_len_tokens"):
        pipeline("embed", st)
    (st / "1_Pooling" / "config.json").write_text(json.dumps(modes))
    modules.append({"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    (st / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ClozeformerError, match="module sentence_transformers.models.Dense is not computed by clozeformer"):
        pipeline("embed", st)


def test_index_build_save_load_search(dirs, tmp_path):
    pipe = pipeline("embed", dirs["base"], pooling="mean")
    corpus = ["good movie", "the cat sat on the mat", "john lives in paris", "我昨天去了商店", "a very bad film"]
    index = EmbeddingIndex.build(pipe, corpus, ids=[f"d{i}" for i in range(5)])
    index.save(tmp_path / "idx")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [
        ".clozeformer.json",
        "embeddings.npy",
        "index.json",
        "texts.jsonl",
    ]
    loaded = EmbeddingIndex.load(tmp_path / "idx")
    assert loaded.texts == corpus and loaded.ids == [f"d{i}" for i in range(5)]
    hits = loaded.query(pipe, corpus, top_k=3)
    for i, row in enumerate(hits):
        assert row[0]["text"] == corpus[i] and row[0]["score"] == pytest.approx(1.0, abs=1e-5)
        assert [h["rank"] for h in row] == [1, 2, 3]
        assert all(row[k]["score"] >= row[k + 1]["score"] for k in range(2))
    vecs = pipe.embed(["cat"])
    brute = np.argsort(-(pipe.embed(corpus) @ vecs[0]))[:5]
    assert [corpus.index(h["text"]) for h in loaded.query(pipe, ["cat"], top_k=5)[0]] == brute.tolist()
    with pytest.raises(ClozeformerError, match="cls pooling|mean pooling"):
        loaded.query(pipeline("embed", dirs["base"], pooling="cls"), ["cat"])
    with pytest.raises(ClozeformerError, match="no such index directory"):
        EmbeddingIndex.load(tmp_path / "nope")


# ----------------------------------------------------------------------------- qa


def test_qa_exact_offsets_on_fixtures(dirs):
    pipe = pipeline("qa", dirs["qa"])
    cases = read_jsonl("infer_qa.jsonl")
    results = pipe([{"question": c["question"], "context": c["context"]} for c in cases])
    for case, res in zip(cases, results):
        assert (res["answer"], res["start"], res["end"]) == (case["answer"], case["start"], case["end"])
        assert case["context"][res["start"] : res["end"]] == res["answer"]
        assert 0.5 < res["score"] <= 1.0 and res["windows"] == 1 and res["truncated"] is False


def test_qa_sliding_windows_and_question_limits(dirs):
    filler = "he works as a baker and reads a book every day . "
    context = filler * 12 + "In 1999 he moved to Paris from London. " + filler * 3
    pipe = pipeline("qa", dirs["qa"], max_length=32, doc_stride=8, max_question_length=10)
    res = pipe(("Where did he move?", context))
    assert res["windows"] > 5
    assert (res["answer"], res["start"]) == ("Paris", context.index("Paris"))
    long_q = "where did he move " * 5
    assert pipe({"question": long_q, "context": context})["truncated"] is True
    strict = pipeline("qa", dirs["qa"], max_length=32, doc_stride=8, max_question_length=10, overlong="reject")
    with pytest.raises(ClozeformerError, match="question is longer than 10 tokens"):
        strict({"question": long_q, "context": context})
    with pytest.raises(InputError, match="input 0: missing field 'context'"):
        pipe([{"question": "x"}])
    # the one stride rule (clozeformer.data.spans.effective_stride, as fine-tuning): too wide a stride is
    # lowered to half the context room of a window, 32 - 10 - 3 = 19 tokens; no room is an error
    assert pipeline("qa", dirs["qa"], max_length=32, doc_stride=30, max_question_length=10).doc_stride == 9
    with pytest.raises(ClozeformerError, match="leaves no room for a context"):
        pipeline("qa", dirs["qa"], max_length=32, max_question_length=28)
    with pytest.raises(ClozeformerError, match="no head for qa"):
        pipeline("qa", dirs["cls"])


def test_qa_no_answer_when_cls_beats_every_span(dirs, infer_tok, tmp_path, capsys):
    """[CLS] made to point at itself (a v2.0-style model): no answer unless the context has one."""
    model = BertForQuestionAnswering.from_pretrained(dirs["qa"])
    with torch.no_grad():
        u = model.qa_outputs.weight  # rows: the start and end directions
        v = torch.randn(128, generator=torch.Generator().manual_seed(3))
        v = v - v.mean()
        v = v - (u @ v) @ u  # orthogonal to both (they are orthonormal and zero-mean)
        cls = 0.6 * (u[0] + u[1]) / math.sqrt(2) + 0.8 * v / v.norm()  # weaker on start/end than "paris"
        model.bert.embeddings.word_embeddings.weight[infer_tok.cls_token_id] = 50 * cls
    qa_dir = save_model(model, infer_tok, tmp_path / "qa-v2")
    question = "Where does he live?"
    no_answer = "He works as a baker and reads a book every day."
    strict = pipeline("qa", qa_dir, allow_no_answer=True)
    assert strict((question, "He lives in Paris.")) | {"score": 0} == {
        "answer": "Paris",
        "start": 12,
        "end": 17,
        "score": 0,
        "windows": 1,
        "truncated": False,
    }
    res = strict((question, no_answer))
    assert (res["answer"], res["start"], res["end"]) == ("", 0, 0) and res["score"] > 0.5
    assert pipeline("qa", qa_dir)((question, no_answer))["answer"] != ""  # the default always answers
    windowed = pipeline("qa", qa_dir, allow_no_answer=True, max_length=32, doc_stride=8, max_question_length=10)
    res = windowed((question, no_answer * 6 + "Then he moved to Paris. " + no_answer * 2))
    assert res["answer"] == "Paris" and res["windows"] > 3  # an answer in one window beats [CLS] in all
    code, out, _ = run_cli(
        ["qa", "--model", str(qa_dir), "--question", question, "--context", no_answer, "--allow-no-answer"], capsys
    )
    assert code == 0 and out.startswith("(no answer)")


# ----------------------------------------------------------------------------- ner


def test_ner_long_texts_are_windowed_not_truncated(dirs):
    sentence = "John Smith met Johnson in New York and Paris. "
    text = sentence * 6
    whole = pipeline("ner", dirs["ner"])(text)
    assert whole["windows"] == 1
    expected = [
        (e["type"], e["text"], e["start"] + k * len(sentence), e["end"] + k * len(sentence))
        for k in range(6)
        for e in read_jsonl("infer_ner.jsonl")[0]["entities"]
    ]
    assert [(e["type"], e["text"], e["start"], e["end"]) for e in whole["entities"]] == expected
    for stride in (0, 3, 7):
        res = pipeline("ner", dirs["ner"], max_length=16, stride=stride)(text)
        assert res["windows"] > 5 and res["truncated"] is False
        assert [(e["type"], e["text"], e["start"], e["end"]) for e in res["entities"]] == expected, stride
    with pytest.raises(ClozeformerError, match="longer than the maximum of 16 tokens"):
        pipeline("ner", dirs["ner"], max_length=16, overlong="reject")(text)
    with pytest.raises(ClozeformerError, match="stride=8: must be between 0 and half"):
        pipeline("ner", dirs["ner"], max_length=16, stride=8)


def test_ner_reads_each_word_in_its_max_context_window():
    w0, w1 = [None, 0, 1, 2, 3, 4, None], [None, 2, 3, 4, 5, 6, None]
    got = max_context_pieces([w0, w1])
    assert got == {0: (0, [1]), 1: (0, [2]), 2: (0, [3]), 3: (0, [4]), 4: (1, [3]), 5: (1, [4]), 6: (1, [5])}
    # word 1 is cut at the end of window 0 (2 of its 3 pieces): window 1 has it whole
    assert max_context_pieces([[None, 0, 1, 1, None], [None, 1, 1, 1, 2, None]])[1] == (1, [1, 2, 3])


def test_ner_exact_entities_on_fixtures(dirs):
    pipe = pipeline("ner", dirs["ner"])
    cases = read_jsonl("infer_ner.jsonl")
    results = pipe([c["text"] for c in cases])
    for case, res in zip(cases, results):
        got = [{k: e[k] for k in ("type", "text", "start", "end")} for e in res["entities"]]
        assert got == case["entities"], case["text"]
        assert all(0.9 < e["score"] <= 1.0 for e in res["entities"])
    average = pipeline("ner", dirs["ner"], aggregation="average")("John Smith lives in Paris.")
    assert [e["text"] for e in average["entities"]] == ["John Smith", "Paris"]


def test_iob2_grouping_rules():
    words = [
        ("B-PER", 0.9, 0, 4),
        ("I-PER", 0.7, 5, 10),
        ("B-PER", 0.8, 11, 15),
        ("I-LOC", 0.6, 16, 20),
        ("O", 0.99, 21, 22),
        ("I-LOC", 0.5, 23, 25),
        ("I-LOC", 0.7, 26, 28),
        ("MISC", 0.4, 29, 30),
    ]
    got = [(e["type"], e["start"], e["end"], round(e["score"], 3)) for e in group_entities(words)]
    assert got == [("PER", 0, 10, 0.8), ("PER", 11, 15, 0.8), ("LOC", 16, 20, 0.6), ("LOC", 23, 28, 0.6), ("MISC", 29, 30, 0.4)]


# ----------------------------------------------------------------------------- CLI verbs


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_fill_mask_and_classify(dirs, tmp_path, capsys):
    code, out, err = run_cli(
        ["fill-mask", "--model", str(dirs["mlm"]), "--json", "--top-k", "2", "The cat sat on the [MASK].", ZH, "--verbose"],
        capsys,
    )
    assert code == 0 and "FillMaskConfig" in err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in rows] == ["The cat sat on the [MASK].", ZH]
    assert [len(r["masks"]) for r in rows] == [1, 2] and len(rows[1]["masks"][0]["candidates"]) == 2

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 7, "text": "good movie"}\n\n{"text": "bad", "text_pair": "film"}\n', encoding="utf-8")
    dest = tmp_path / "out.jsonl"
    code, out, err = run_cli(
        ["classify", "--model", str(dirs["cls"]), "--input", str(src), "--json", "--out", str(dest), "--no-progress"], capsys
    )
    assert code == 0 and out == ""
    rows = [json.loads(line) for line in dest.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["id"] == 7 and rows[1]["text_pair"] == "film" and {"label", "scores"} <= set(rows[0])
    assert json.loads((tmp_path / "out.jsonl.config.json").read_text())["model"] == str(dirs["cls"])

    code, out, _ = run_cli(["classify", "--model", str(dirs["cls"]), "good movie", "--pair", "bad"], capsys)
    assert code == 0 and out.split()[0] in ("neg", "pos")


def test_cli_qa_ner_embed_search(dirs, tmp_path, capsys):
    case = read_jsonl("infer_qa.jsonl")[0]
    code, out, _ = run_cli(
        ["qa", "--model", str(dirs["qa"]), "--question", case["question"], "--context", case["context"], "--json"], capsys
    )
    assert code == 0 and json.loads(out)["answer"] == "Paris"
    code, out, _ = run_cli(["ner", "--model", str(dirs["ner"]), "John Smith lives in Paris."], capsys)
    assert code == 0 and "PER\tJohn Smith" in out and "LOC\tParis" in out

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("good movie\nthe cat sat on the mat\njohn lives in paris\n", encoding="utf-8")
    code, out, _ = run_cli(
        [
            "embed",
            "--model",
            str(dirs["base"]),
            "--build-index",
            str(tmp_path / "idx"),
            "--input",
            str(corpus),
            "--pooling",
            "mean",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0 and "indexed 3 texts" in out
    code, out, _ = run_cli(
        ["search", "--index", str(tmp_path / "idx"), "--json", "--top-k", "2", "the cat sat on the mat"], capsys
    )
    row = json.loads(out)
    assert code == 0 and row["hits"][0]["text"] == "the cat sat on the mat" and len(row["hits"]) == 2
    code, out, _ = run_cli(["embed", "--model", str(dirs["base"]), "--json", "hello"], capsys)
    assert code == 0 and len(json.loads(out)["embedding"]) == 128


def test_search_rerank_orders_the_bi_encoders_hits_by_the_cross_encoder(dirs, tmp_path, capsys, infer_tok):
    corpus = tmp_path / "corpus.txt"
    texts = ["good movie", "the cat sat on the mat", "john lives in paris", "a very bad film", "new york city"]
    corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
    build = ["embed", "--model", str(dirs["base"]), "--build-index", str(tmp_path / "idx"), "--input", str(corpus)]
    assert run_cli([*build, "--pooling", "mean", "--no-progress"], capsys)[0] == 0
    search = ["search", "--index", str(tmp_path / "idx"), "--json", "--top-k", "3", "cat movie"]
    for reranker, candidates in ((dirs["cls"], 5), (dirs["reg"], 4)):
        code, out, _ = run_cli([*search, "--rerank", str(reranker), "--candidates", str(candidates)], capsys)
        hits = json.loads(out)["hits"]
        assert code == 0 and len(hits) == 3 and [h["rank"] for h in hits] == [1, 2, 3]
        cross = pipeline("classify", reranker)
        want = {t: cross.relevance(cross(("cat movie", t))) for t in texts}
        assert [h["score"] for h in hits] == pytest.approx(sorted([want[h["text"]] for h in hits], reverse=True), abs=1e-6)
        bi = {h["text"]: h["score"] for h in json.loads(run_cli([*search, "--top-k", "5"], capsys)[1])["hits"]}
        assert all(h["retrieval_score"] == pytest.approx(bi[h["text"]], abs=1e-6) for h in hits)
        if candidates == 5:  # every text is a candidate: the top 3 are the cross-encoder's best 3 of all
            assert [h["text"] for h in hits] == sorted(texts, key=lambda t: -want[t])[:3]
        else:  # only the bi-encoder's best 4 are re-scored: its worst hit never comes back
            assert min(bi, key=bi.get) not in [h["text"] for h in hits]
    assert pipeline("classify", dirs["cls"]).relevant == "pos"  # the last label of a binary classifier
    nli = save_tiny(BertForSequenceClassification, infer_tok, tmp_path / "nli", id2label={0: "entailment", 1: "not_entailment"})
    assert pipeline("classify", nli).relevant == "entailment"  # QNLI's relevant label sorts first


def test_cli_reads_stdin(dirs, capsys, monkeypatch):
    import io
    import sys

    stdin = io.TextIOWrapper(io.BytesIO(b"good movie\n\nbad film\tvery long\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, _ = run_cli(["classify", "--model", str(dirs["cls"]), "--json", "--no-progress"], capsys)
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["text"] for r in rows] == ["good movie", "bad film"]
    assert rows[1]["text_pair"] == "very long"  # a TAB in a text line separates the pair


def test_cli_user_errors(dirs, tmp_path, capsys):
    bad_utf8 = tmp_path / "latin1.txt"
    bad_utf8.write_bytes("good\ncaf\xe9\n".encode("latin-1"))
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"ab\x00cd")
    no_field = tmp_path / "x.jsonl"
    no_field.write_text('{"text": "ok"}\n{"txt": "oops"}\n', encoding="utf-8")
    no_mask = tmp_path / "m.txt"
    no_mask.write_text("a [MASK] here\n\nnone here\n", encoding="utf-8")
    cases = [
        (["classify", "--model", str(dirs["cls"]), "--input", str(bad_utf8)], f"{bad_utf8}:2: not UTF-8"),
        (["classify", "--model", str(dirs["cls"]), "--input", str(binary)], "looks binary"),
        (["classify", "--model", str(dirs["cls"]), "--input", str(no_field)], f"{no_field}:2: missing field 'text'"),
        (["classify", "--model", str(dirs["cls"]), "--input", str(tmp_path / "none.txt")], "no such input file"),
        (["fill-mask", "--model", str(dirs["mlm"]), "--input", str(no_mask)], rf"{no_mask}:3: no [MASK]"),
        (["qa", "--model", str(dirs["cls"]), "--question", "a", "--context", "b"], "no head for qa"),
        (["ner", "--model", str(dirs["ner"]), " "], "argument 1: text is empty"),
        (["classify", "--model", str(tmp_path / "nomodel"), "x"], "no such model directory"),
        (["qa", "--model", str(dirs["qa"]), "--question", "a"], "give both --question and --context"),
    ]
    for argv, message in cases:
        code, out, err = run_cli(argv, capsys)
        assert code == 2, argv
        assert "error: " in err and message in err, (argv, err)
        assert "Traceback" not in err


def test_precision_and_device_choices(dirs):
    from clozeformer.infer.backends import native_bf16, resolve_device, resolve_dtype

    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32  # never bf16 on a CPU unless asked
    if native_bf16(cpu):
        assert resolve_dtype("bf16", cpu) == torch.bfloat16
    else:
        with pytest.raises(ClozeformerError, match="no native bf16"):
            pipeline("embed", dirs["base"], dtype="bf16")
    with pytest.raises(ClozeformerError, match="not a torch device"):
        resolve_device("gpu7")
    if not torch.cuda.is_available():
        with pytest.raises(ClozeformerError, match="CUDA is not available"):
            pipeline("embed", dirs["base"], device="cuda")
    assert pipeline("embed", dirs["base"], dtype="fp32").describe()["dtype"] == "float32"


def test_prediction_verbs_print_their_config_only_with_verbose(dirs, tmp_path, capsys):
    code, out, err = run_cli(["classify", "--model", str(dirs["cls"]), "good movie"], capsys)
    assert code == 0 and "model" not in err and out.count("\n") == 1
    code, out, err = run_cli(["classify", "--model", str(dirs["cls"]), "good movie", "--verbose"], capsys)
    assert code == 0 and "batch_size" in err and out.count("\n") == 1  # the config on stderr, results alone on stdout
    code, _, _ = run_cli(["classify", "--model", str(dirs["cls"]), "good movie", "--out", str(tmp_path / "o.txt")], capsys)
    assert code == 0 and (tmp_path / "o.txt.config.json").is_file()  # saved either way
