"""The left-to-right baseline (`pretrain --objective clm`): next-token labels, the causal
BertLMHeadModel against transformers, the trainer's objective, and fine-tuning that stays
left to right with last-token pooling."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from synthetic import make_data_dir

from clozeformer.data.loader import PretrainLoader
from clozeformer.data.masking import IGNORE_INDEX, next_token_labels
from clozeformer.modeling.bert import BertForSequenceClassification, BertLMHeadModel
from clozeformer.modeling.config import BertConfig
from clozeformer.train.loop import pretrain
from clozeformer.train.metrics_file import read_metrics
from clozeformer.train.pretrain_config import PretrainConfig

CFG = dict(
    vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64
)


def test_next_token_labels_exact():
    ids = np.array([[2, 10, 11, 12, 3], [2, 20, 3, 0, 0]])
    attn = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    I = IGNORE_INDEX  # noqa: E741
    assert next_token_labels(ids, attn).tolist() == [[10, 11, 12, 3, I], [20, 3, I, I, I]]


@pytest.mark.parametrize("position", ["absolute", "rotary"])
def test_lm_head_model_matches_transformers_and_is_causal(tmp_path, position):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = BertLMHeadModel(BertConfig(**CFG, position_embedding_type=position)).eval()
    assert model.config.is_decoder
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["is_decoder"] is True
    assert saved["architectures"] == ["BertLMHeadModel" if position == "absolute" else "RoFormerForCausalLM"]
    ref = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(ref).__name__ == saved["architectures"][0]
    ids = torch.randint(5, 60, (2, 10), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    with torch.no_grad():
        ours = model(ids, mask).logits  # (B, T, V): no labels, dense
        theirs = ref(input_ids=ids, attention_mask=mask).logits
        torch.testing.assert_close(ours[mask.bool()], theirs[mask.bool()], atol=1e-5, rtol=1e-5)
        # causal: a later token changes nothing before it
        other = ids.clone()
        other[:, 6] = 7
        torch.testing.assert_close(model(other, mask).logits[:, :6], ours[:, :6])
        assert not torch.allclose(model(other, mask).logits[0, 6:], ours[0, 6:])
    # the sparse loss (labels = next tokens) equals transformers' loss (unshifted labels, shifted inside)
    labels = torch.from_numpy(next_token_labels(ids.numpy(), mask.numpy()))
    hf_labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, mask, labels=labels).loss, ref(input_ids=ids, attention_mask=mask, labels=hf_labels).loss
        )
    # round trip through our loader
    again = BertLMHeadModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(again(ids, mask).logits, ours)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("clm_data"))


def test_causal_loader_gives_the_text_and_next_tokens(data):
    batch = next(iter(PretrainLoader(data, "train", batch_size=4, seed=0, causal=True)))
    ids, attn, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    plain = next(iter(PretrainLoader(data, "train", batch_size=4, seed=0)))
    restored = torch.where(plain["labels"] != IGNORE_INDEX, plain["labels"], plain["input_ids"])
    assert torch.equal(ids, restored)  # the same sequences, unmasked
    assert torch.equal(labels[:, :-1][attn[:, 1:] == 1], ids[:, 1:][attn[:, 1:] == 1])
    assert int((labels != IGNORE_INDEX).sum()) == int(attn.sum()) - len(ids)  # every real token but the last


def test_pretrain_clm_learns_resumes_exactly_and_finetunes_left_to_right(data, tmp_path):
    def cfg(out: Path, **kw) -> PretrainConfig:
        base = dict(data=str(data), out=str(out), model="tiny", objective="clm", batch_size=8, warmup_steps=5)
        return PretrainConfig(**{**base, "progress": False, "report_to": ["none"], "schedule": "constant", **kw})

    full = pretrain(cfg(tmp_path / "full", max_steps=40, eval_every=20))
    train = [r for r in read_metrics(tmp_path / "full") if r["kind"] == "train"]
    first, last = (sum(r["loss"] for r in rs) / 5 for rs in (train[:5], train[-5:]))
    assert last < first - 0.3, (first, last)
    ckpt = Path(full["checkpoint"])
    config = BertConfig.from_pretrained(ckpt)
    assert config.is_decoder and config.extra["architectures"][0] in ("BertLMHeadModel", "RoFormerForCausalLM")
    # the validation loss is the next-token loss: far below the uniform guess over the vocabulary
    assert full["val"]["val_mlm_loss"] < np.log(config.vocab_size) - 0.5
    pretrain(cfg(tmp_path / "split", max_steps=20))
    pretrain(cfg(tmp_path / "split", max_steps=40))
    a = [r["loss"] for r in read_metrics(tmp_path / "full") if r["kind"] == "train"]
    b = [r["loss"] for r in read_metrics(tmp_path / "split") if r["kind"] == "train"]
    assert a == b
    # a classifier from it stays left to right and pools the last real token
    clf = BertForSequenceClassification.from_pretrained(ckpt, classifier_pooling="last", num_labels=2).eval()
    assert clf.config.is_decoder
    ids = torch.tensor([[2, 10, 11, 12, 3, 0], [2, 10, 11, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        h = clf.bert(ids, mask).last_hidden_state
        pooled = clf.bert.pooler(h, mask)
        want = clf.bert.pooler.act(clf.bert.pooler.dense(clf.bert.pooler.dropout(h[[0, 1], [4, 3]])))
        torch.testing.assert_close(pooled, want)


def test_is_decoder_is_typed_in_config_json():
    from clozeformer.utils.errors import ClozeformerError

    with pytest.raises(ClozeformerError, match="is_decoder must be true or false"):
        BertConfig(**CFG, is_decoder="yes")
    assert "is_decoder" not in BertConfig(**CFG).to_dict()  # the default stays out of config.json, as HF's BERT dirs
