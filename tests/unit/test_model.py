"""Model behaviour: sparse MLM == dense MLM, init statistics, tying, shapes."""

from __future__ import annotations

import pytest
import torch

import clozeformer.modeling.bert as M
from clozeformer.modeling.config import BertConfig
from clozeformer.utils.errors import ClozeformerError


def tiny(**kw) -> BertConfig:
    return BertConfig.preset("tiny", vocab_size=200, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw)


def batch(B=4, T=16, V=200, p=0.15, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[0, 10:] = 0
    labels = torch.where(torch.rand(B, T, generator=g) < p, ids, torch.full_like(ids, -100))
    labels[mask == 0] = -100
    labels[1, 2] = ids[1, 2]  # at least one target
    return ids, mask, labels


@pytest.mark.parametrize("cls", [M.BertForPreTraining, M.BertForMaskedLM])
def test_sparse_mlm_matches_dense_loss_and_gradients(cls):
    torch.manual_seed(0)
    model = cls(tiny())
    ids, mask, labels = batch()
    grads = {}
    losses = {}
    for sparse in (False, True):
        model.zero_grad()
        model.sparse_mlm = sparse
        out = model(ids, mask, labels=labels)
        out.loss.backward()
        losses[sparse] = out.loss.detach()
        grads[sparse] = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        logits = out.logits
        n_masked = int((labels != -100).sum())
        assert logits.shape == ((n_masked, 200) if sparse else (4, 16, 200))
    torch.testing.assert_close(losses[True], losses[False], atol=1e-6, rtol=0)
    assert grads[True].keys() == grads[False].keys()
    for name in grads[False]:
        torch.testing.assert_close(grads[True][name], grads[False][name], atol=1e-6, rtol=1e-5, msg=name)


def test_sparse_logits_are_the_dense_logits_at_masked_positions():
    model = M.BertForMaskedLM(tiny()).eval()
    ids, mask, labels = batch()
    with torch.no_grad():
        dense = model(ids, mask).logits  # no labels: dense (B, T, V)
        sparse = model(ids, mask, labels=labels).logits
    torch.testing.assert_close(sparse, dense[labels != -100], atol=1e-5, rtol=0)


def test_decoder_is_tied_to_word_embeddings():
    model = M.BertForPreTraining(tiny())
    assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight
    n_unique = sum(p.numel() for p in model.parameters())
    assert n_unique == model.num_parameters()
    assert "mlm.decoder.weight" in model.state_dict()


def test_init_statistics():
    torch.manual_seed(0)
    cfg = BertConfig.preset("mini", vocab_size=3000)
    model = M.BertForPreTraining(cfg)
    w = model.bert.encoder.layer[0].ffn.intermediate.weight
    assert abs(w.std().item() - cfg.initializer_range) < 0.001 and abs(w.mean().item()) < 0.001
    emb = model.bert.embeddings.word_embeddings.weight
    assert torch.all(emb[cfg.pad_token_id] == 0)  # padding row stays zero despite the tied decoder
    assert abs(emb[1:].std().item() - 0.02) < 0.001
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert torch.all(p == 0), name
        if "LayerNorm.weight" in name:
            assert torch.all(p == 1), name


def test_output_shapes_of_every_head():
    cfg = tiny(num_labels=5)
    ids, mask, _ = batch(B=2, T=7)
    out = M.BertModel(cfg)(ids, mask)
    assert out.last_hidden_state.shape == (2, 7, 128) and out.pooler_output.shape == (2, 128)
    assert M.BertForSequenceClassification(cfg)(ids, mask).logits.shape == (2, 5)
    assert M.BertForTokenClassification(cfg)(ids, mask).logits.shape == (2, 7, 5)
    qa = M.BertForQuestionAnswering(cfg)(ids, mask)
    assert qa.start_logits.shape == qa.end_logits.shape == (2, 7)
    mc = M.BertForMultipleChoice(cfg)(ids[:, None].expand(2, 4, 7), mask[:, None].expand(2, 4, 7))
    assert mc.logits.shape == (2, 4)
    pt = M.BertForPreTraining(cfg)(ids, mask)
    assert pt.prediction_logits.shape == (2, 7, 200) and pt.seq_relationship_logits.shape == (2, 2)
    assert pt.loss is None


def test_sequence_longer_than_positions_is_rejected():
    cfg = tiny(max_position_embeddings=8)
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 8"):
        M.BertModel(cfg)(torch.ones(1, 9, dtype=torch.long))


def test_mlm_loss_learns_a_fixed_batch():
    torch.manual_seed(0)
    model = M.BertForPreTraining(tiny())
    ids, mask, labels = batch()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    first = None
    for _ in range(30):
        loss = model(ids, mask, labels=labels, next_sentence_label=torch.tensor([0, 1, 0, 1])).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.5 * first


def test_causal_mode_ignores_future_tokens_and_respects_padding():
    model = M.BertModel(tiny()).eval()
    ids = torch.randint(5, 200, (2, 10))
    other = ids.clone()
    other[:, 6:] = torch.randint(5, 200, (2, 4))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 8:] = 0
    with torch.no_grad():
        a = model(ids, mask, causal=True).last_hidden_state
        b = model(other, mask, causal=True).last_hidden_state
        c = model(ids, torch.ones_like(mask), causal=True).last_hidden_state
        bidir = model(ids, mask).last_hidden_state
    torch.testing.assert_close(a[:, :6], b[:, :6], atol=1e-6, rtol=0)  # past unchanged by future edits
    torch.testing.assert_close(a[:, :8], c[:, :8], atol=1e-6, rtol=0)  # the explicit-mask path == is_causal path
    assert not torch.allclose(a[:, :6], bidir[:, :6], atol=1e-3)  # bidirectional does see the future


@pytest.mark.parametrize("extra", [{}, {"position_embedding_type": "rotary", "classifier_pooling": "mean"}])
def test_encoder_traces_as_one_graph_for_torch_compile(extra):
    """fullgraph=True fails on any graph break (e.g. a data-dependent check on the padding mask)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = M.BertForSequenceClassification(tiny(num_labels=3, **extra)).eval()
    ids, mask = torch.randint(5, 200, (3, 12)), torch.ones(3, 12, dtype=torch.long)
    mask[1, 7:] = 0
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with torch.no_grad():
        for m in (mask, torch.ones_like(mask)):  # padded and unpadded batches
            torch.testing.assert_close(compiled(ids, m).logits, model(ids, m).logits, atol=1e-6, rtol=1e-5)
    torch._dynamo.reset()


def test_mean_pooling_ignores_padding_and_differs_from_cls():
    torch.manual_seed(0)
    cls_cfg = BertConfig.preset("tiny", vocab_size=300)
    mean_model = M.BertModel(cls_cfg.copy(classifier_pooling="mean")).eval()
    cls_model = M.BertModel(cls_cfg).eval()
    cls_model.load_state_dict(mean_model.state_dict())
    ids = torch.randint(5, 300, (1, 9))
    short = mean_model(ids, torch.ones_like(ids))
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)
    long = mean_model(padded, torch.cat([torch.ones(1, 9), torch.zeros(1, 4)], dim=1).long())
    torch.testing.assert_close(long.pooler_output, short.pooler_output, atol=1e-5, rtol=0)
    h = short.last_hidden_state.mean(dim=1)  # by hand: tanh(dense(mean of the states))
    torch.testing.assert_close(short.pooler_output, torch.tanh(mean_model.pooler.dense(h)), atol=1e-6, rtol=0)
    assert not torch.allclose(cls_model(ids).pooler_output, short.pooler_output, atol=1e-3)
    with pytest.raises(ClozeformerError, match="classifier_pooling"):
        BertConfig.preset("tiny", vocab_size=300, classifier_pooling="sum")
