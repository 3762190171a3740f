"""Rotary positions (RoFormer layout): parity with transformers' RoFormer both ways, and the math.

Tolerance as for BERT: max abs diff <= 1e-5 on every output and loss (fp32, CPU, eval mode).
"""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from test_hf_parity import ATOL, run_both  # noqa: E402

import clozeformer.modeling.bert as M  # noqa: E402
from clozeformer.modeling.config import BertConfig  # noqa: E402
from clozeformer.modeling.rotary import apply_rotary, rotary_tables  # noqa: E402
from clozeformer.utils.errors import ClozeformerError  # noqa: E402

CFG = dict(
    vocab_size=500, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, max_position_embeddings=64
)

# our class -> transformers' class. RoFormer has no pretraining (NSP) class, and its multiple-choice
# head summarises the LAST token (not [CLS]), so those two are clozeformer-only for rotary models.
HEADS = {
    "BertModel": (transformers.RoFormerModel, M.BertModel),
    "BertForMaskedLM": (transformers.RoFormerForMaskedLM, M.BertForMaskedLM),
    "BertForSequenceClassification": (transformers.RoFormerForSequenceClassification, M.BertForSequenceClassification),
    "BertForTokenClassification": (transformers.RoFormerForTokenClassification, M.BertForTokenClassification),
    "BertForQuestionAnswering": (transformers.RoFormerForQuestionAnswering, M.BertForQuestionAnswering),
}


class _NoPooler:
    """RoFormerModel has no pooler: compare the hidden states only."""

    def __init__(self, out):
        self.last_hidden_state = out.last_hidden_state


@pytest.mark.parametrize("act", ["gelu", "relu"])
@pytest.mark.parametrize("head", list(HEADS))
def test_roformer_to_clozeformer(tmp_path, head, act):
    hf_cls, our_cls = HEADS[head]
    torch.manual_seed(0)
    n = 2 if head == "BertForQuestionAnswering" else 3
    hf_model = hf_cls(transformers.RoFormerConfig(**CFG, hidden_act=act, num_labels=n)).eval()
    hf_model.save_pretrained(tmp_path)
    ours = our_cls.from_pretrained(tmp_path).eval()
    assert ours.config.position_embedding_type == "rotary"
    assert ours.bert.embeddings.position_embeddings is None if hasattr(ours, "bert") else True
    expect_new = ["pooler.dense.weight", "pooler.dense.bias"] if head == "BertModel" else []
    assert ours.loading_info["new"] == expect_new
    if head == "BertModel":
        ids = torch.randint(5, 500, (2, 9))
        with torch.no_grad():
            a, b = hf_model(input_ids=ids), ours(ids)
        torch.testing.assert_close(b.last_hidden_state, a.last_hidden_state, atol=ATOL, rtol=0)
        return
    run_both(head, hf_model, ours, CFG, with_labels=True)


@pytest.mark.parametrize("head", list(HEADS))
def test_clozeformer_to_roformer(tmp_path, head):
    hf_cls, our_cls = HEADS[head]
    torch.manual_seed(0)
    cfg = BertConfig(**CFG, position_embedding_type="rotary", num_labels=2 if head == "BertForQuestionAnswering" else 3)
    ours = (our_cls(cfg, add_pooling_layer=False) if head == "BertModel" else our_cls(cfg)).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    ours.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "roformer" and saved["architectures"] == [head.replace("Bert", "RoFormer")]
    hf_model, info = hf_cls.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    # AutoModel resolves the directory to the same class
    auto = transformers.AutoModel.from_pretrained(tmp_path)
    assert type(auto).__name__ == "RoFormerModel"
    if head == "BertModel":
        ids = torch.randint(5, 500, (2, 9))
        with torch.no_grad():
            a, b = hf_model.eval()(input_ids=ids), ours(ids)
        torch.testing.assert_close(b.last_hidden_state, a.last_hidden_state, atol=ATOL, rtol=0)
        return
    run_both(head, hf_model.eval(), ours, CFG, with_labels=True)
    # and back: our loader reads what we wrote, same outputs
    again = our_cls.from_pretrained(tmp_path).eval()
    assert again.loading_info["new"] == [] and again.loading_info["unused"] == []


def test_rotary_scores_depend_only_on_offset():
    """q.k after rotation is a function of (j - i): shifting both positions changes nothing."""
    torch.manual_seed(0)
    D, T = 16, 40
    q, k = torch.randn(D), torch.randn(D)
    cos, sin = rotary_tables(T, D, torch.device("cpu"))

    def rot(x, pos):
        return apply_rotary(x.view(1, 1, 1, D).expand(1, 1, T, D), cos, sin)[0, 0, pos]

    base = rot(q, 3) @ rot(k, 7)
    for shift in (1, 10, 30):
        torch.testing.assert_close(rot(q, 3 + shift) @ rot(k, 7 + shift), base, atol=1e-5, rtol=0)
    assert not torch.allclose(rot(q, 3) @ rot(k, 8), base, atol=1e-3)  # another offset, another score
    torch.testing.assert_close(rot(q, 0), q)  # position 0 is the identity


def test_rotary_model_is_order_sensitive_and_has_no_position_table():
    torch.manual_seed(0)
    model = M.BertForMaskedLM(BertConfig.preset("tiny", vocab_size=300, position_embedding_type="rotary")).eval()
    assert not any("position_embeddings" in k for k in model.state_dict())
    with torch.no_grad():  # sharp attention, so that where a token looks shows in the output
        for layer in model.bert.encoder.layer:
            layer.attention.query.weight.mul_(30)
            layer.attention.key.weight.mul_(30)
    ids = torch.randint(5, 300, (1, 10))
    out = model(ids).logits
    flipped = model(ids.flip(1)).logits.flip(1)
    assert (out - flipped).abs().max() > 1e-2  # positions matter without a table (no-position: ~1e-7)


def test_rotary_sparse_mlm_matches_dense():
    torch.manual_seed(0)
    model = M.BertForMaskedLM(BertConfig(**CFG, position_embedding_type="rotary")).eval()  # no dropout
    ids = torch.randint(5, 500, (3, 12))
    labels = torch.full_like(ids, -100)
    labels[:, ::4] = ids[:, ::4]
    model.sparse_mlm = False
    dense = model(ids, labels=labels).loss
    g_dense = torch.autograd.grad(dense, model.bert.encoder.layer[0].attention.query.weight)[0]
    model.sparse_mlm = True
    sparse = model(ids, labels=labels).loss
    g_sparse = torch.autograd.grad(sparse, model.bert.encoder.layer[0].attention.query.weight)[0]
    torch.testing.assert_close(sparse, dense, atol=1e-6, rtol=0)
    torch.testing.assert_close(g_sparse, g_dense, atol=1e-6, rtol=1e-5)


def test_rotary_config_round_trip_and_errors():
    cfg = BertConfig(**CFG, position_embedding_type="rotary")
    d = cfg.to_dict()
    assert d["model_type"] == "roformer" and "position_embedding_type" not in d and d["rotary_value"] is False
    assert BertConfig.from_dict(d) == cfg
    with pytest.raises(ClozeformerError, match="rotary_value"):
        BertConfig.from_dict({**d, "rotary_value": True})
    with pytest.raises(ClozeformerError, match="embedding_size"):
        BertConfig.from_dict({**d, "embedding_size": 16})
    with pytest.raises(ClozeformerError, match="even head size"):
        BertConfig(vocab_size=50, hidden_size=15, num_attention_heads=5, position_embedding_type="rotary")
    with pytest.raises(ClozeformerError, match="model_type 'roformer'"):
        BertConfig.from_dict({"model_type": "bert", "position_embedding_type": "rotary"})
