"""Parity with the reference implementation (`transformers`), both directions.

Tolerance: max abs diff <= 1e-5 on every output (fp32, CPU, eval mode), losses <= 1e-5.
Random-init HF models for several configs -> saved -> loaded by clozeformer (and back).
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

import clozeformer.modeling.bert as M  # noqa: E402
from clozeformer.modeling.config import BertConfig  # noqa: E402

ATOL = 1e-5

# (name, HF config kwargs): bert-base-chinese's vocab, a cased vocab, hidden_act variants, 1 and 3 layers
CONFIGS = {
    "chinese-vocab-1layer": dict(
        vocab_size=21128, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64
    ),
    "cased-vocab-3layers": dict(
        vocab_size=28996, hidden_size=48, num_hidden_layers=3, num_attention_heads=4, intermediate_size=96
    ),
    "gelu_new": dict(
        vocab_size=500, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, hidden_act="gelu_new"
    ),
    "relu": dict(
        vocab_size=500, hidden_size=32, num_hidden_layers=2, num_attention_heads=8, intermediate_size=48, hidden_act="relu"
    ),
}

HEADS = {
    "BertModel": (transformers.BertModel, M.BertModel),
    "BertForPreTraining": (transformers.BertForPreTraining, M.BertForPreTraining),
    "BertForMaskedLM": (transformers.BertForMaskedLM, M.BertForMaskedLM),
    "BertForSequenceClassification": (transformers.BertForSequenceClassification, M.BertForSequenceClassification),
    "BertForTokenClassification": (transformers.BertForTokenClassification, M.BertForTokenClassification),
    "BertForQuestionAnswering": (transformers.BertForQuestionAnswering, M.BertForQuestionAnswering),
    "BertForMultipleChoice": (transformers.BertForMultipleChoice, M.BertForMultipleChoice),
}


def make_inputs(vocab_size: int, B: int = 3, T: int = 12, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab_size, (B, T), generator=g)
    ids[:, 0] = 2
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 8:] = 0  # a padded row
    mask[2, 5:] = 0
    ids[mask == 0] = 0
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, 6:] = 1
    types[mask == 0] = 0
    return ids, mask, types


def labels_for(head: str, ids, num_labels: int, vocab_size: int):
    g = torch.Generator().manual_seed(1)
    B, T = ids.shape
    if head in ("BertForPreTraining", "BertForMaskedLM"):
        labels = torch.full_like(ids, -100)
        pick = torch.rand(B, T, generator=g) < 0.3
        pick[:, 0] = True
        labels[pick] = torch.randint(0, vocab_size, (int(pick.sum()),), generator=g)
        kw = {"labels": labels}
        if head == "BertForPreTraining":
            kw["next_sentence_label"] = torch.tensor([0, 1, 1])
        return kw
    if head == "BertForSequenceClassification":
        return {"labels": torch.randint(0, num_labels, (B,), generator=g)}
    if head == "BertForTokenClassification":
        labels = torch.randint(0, num_labels, (B, T), generator=g)
        labels[:, 0] = -100
        return {"labels": labels}
    if head == "BertForQuestionAnswering":
        return {"start_positions": torch.tensor([1, 3, 40]), "end_positions": torch.tensor([2, 5, 41])}
    if head == "BertForMultipleChoice":
        return {"labels": torch.tensor([1, 0, 2])}
    return {}


def compare(head: str, a, b):
    """a: HF output, b: ours (dense logits)."""
    pairs = {
        "BertModel": [("last_hidden_state", "last_hidden_state"), ("pooler_output", "pooler_output")],
        "BertForPreTraining": [
            ("prediction_logits", "prediction_logits"),
            ("seq_relationship_logits", "seq_relationship_logits"),
        ],
        "BertForMaskedLM": [("logits", "logits")],
        "BertForSequenceClassification": [("logits", "logits")],
        "BertForTokenClassification": [("logits", "logits")],
        "BertForQuestionAnswering": [("start_logits", "start_logits"), ("end_logits", "end_logits")],
        "BertForMultipleChoice": [("logits", "logits")],
    }[head]
    for x, y in pairs:
        torch.testing.assert_close(getattr(b, y), getattr(a, x), atol=ATOL, rtol=0, msg=f"{head}.{x}")


def run_both(head, hf_model, our_model, cfg_kw, num_labels=3, with_labels=False):
    ids, mask, types = make_inputs(cfg_kw["vocab_size"])
    if head == "BertForMultipleChoice":  # (B, C=3, T)
        ids, mask, types = (t.unsqueeze(1).expand(-1, 3, -1).clone() for t in (ids, mask, types))
        ids[:, 1, 3] = 7
        ids[:, 2, 4] = 9
    kw = labels_for(head, ids if ids.dim() == 2 else ids[:, 0], num_labels, cfg_kw["vocab_size"]) if with_labels else {}
    with torch.no_grad():
        a = hf_model(input_ids=ids, attention_mask=mask, token_type_ids=types, **kw)
        if hasattr(our_model, "sparse_mlm"):
            our_model.sparse_mlm = False
        b = our_model(input_ids=ids, attention_mask=mask, token_type_ids=types, **kw)
        if with_labels and head != "BertModel":
            torch.testing.assert_close(b.loss, a.loss, atol=ATOL, rtol=0, msg=f"{head}.loss")
            if hasattr(our_model, "sparse_mlm"):
                our_model.sparse_mlm = True
                c = our_model(input_ids=ids, attention_mask=mask, token_type_ids=types, **kw)
                torch.testing.assert_close(c.loss, a.loss, atol=ATOL, rtol=0, msg=f"{head}.sparse loss")
    compare(head, a, b)


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
@pytest.mark.parametrize("head", list(HEADS))
def test_hf_to_clozeformer(tmp_path, cfg_name, head):
    cfg_kw = CONFIGS[cfg_name]
    hf_cls, our_cls = HEADS[head]
    torch.manual_seed(0)
    # QA heads have 2 outputs (start, end); HF sizes them by num_labels, so keep it 2 there
    n = 2 if head == "BertForQuestionAnswering" else 3
    hf_model = hf_cls(transformers.BertConfig(**cfg_kw, num_labels=n)).eval()
    hf_model.save_pretrained(tmp_path)
    ours = our_cls.from_pretrained(tmp_path).eval()
    assert ours.loading_info["new"] == []
    run_both(head, hf_model, ours, cfg_kw, with_labels=True)


@pytest.mark.parametrize("cfg_name", ["cased-vocab-3layers", "gelu_new"])
@pytest.mark.parametrize("head", list(HEADS))
def test_clozeformer_to_hf(tmp_path, cfg_name, head):
    cfg_kw = CONFIGS[cfg_name]
    hf_cls, our_cls = HEADS[head]
    torch.manual_seed(0)
    ours = our_cls(BertConfig(**cfg_kw, num_labels=2 if head == "BertForQuestionAnswering" else 3)).eval()
    with torch.no_grad():  # non-trivial values everywhere (LayerNorms, biases are 1/0 at init)
        for p in ours.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    ours.save_pretrained(tmp_path)
    hf_model, info = hf_cls.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    run_both(head, hf_model.eval(), ours, cfg_kw, with_labels=True)


def test_regression_head_matches_hf(tmp_path):
    torch.manual_seed(0)
    kw = CONFIGS["gelu_new"]
    hf_model = transformers.BertForSequenceClassification(transformers.BertConfig(**kw, num_labels=1)).eval()
    hf_model.save_pretrained(tmp_path)
    ours = M.BertForSequenceClassification.from_pretrained(tmp_path).eval()
    ids, mask, types = make_inputs(kw["vocab_size"])
    y = torch.tensor([0.5, 2.0, 4.5])
    with torch.no_grad():
        a = hf_model(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=y)
        b = ours(ids, mask, types, labels=y)
    torch.testing.assert_close(b.logits, a.logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(b.loss, a.loss, atol=ATOL, rtol=0)


def test_padding_does_not_change_real_tokens():
    torch.manual_seed(0)
    model = M.BertForPreTraining(BertConfig.preset("tiny", vocab_size=300)).eval()
    model.sparse_mlm = False
    ids = torch.randint(5, 300, (1, 9))
    short = model(ids, torch.ones_like(ids))
    for pad_len, pad_id in ((3, 0), (20, 0), (5, 17)):  # even a non-[PAD] id under mask 0 is ignored
        padded = torch.cat([ids, torch.full((1, pad_len), pad_id)], dim=1)
        mask = torch.cat([torch.ones(1, 9), torch.zeros(1, pad_len)], dim=1).long()
        long = model(padded, mask)
        torch.testing.assert_close(long.prediction_logits[:, :9], short.prediction_logits, atol=ATOL, rtol=0)
        torch.testing.assert_close(long.seq_relationship_logits, short.seq_relationship_logits, atol=ATOL, rtol=0)
