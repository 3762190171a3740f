"""Optimizers and schedules: weight-decay groups, fused vs foreach AdamW, LAMB by hand, lr curves."""

from __future__ import annotations

import math

import pytest
import torch

from clozeformer.modeling.bert import BertForMaskedLM
from clozeformer.modeling.config import BertConfig
from clozeformer.train.core import Schedule, param_groups
from clozeformer.train.optim import TIME_ESTIMATE_MIN_STEPS, Budget, Lamb, build_optimizer, micro_batches_at, optimizer_kernel
from clozeformer.train.pretrain_config import PretrainConfig
from clozeformer.utils.errors import ClozeformerError


def tiny_model(seed: int = 0) -> BertForMaskedLM:
    torch.manual_seed(seed)
    return BertForMaskedLM(
        BertConfig.preset("tiny", vocab_size=50, num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    )


def cfg(**kw) -> PretrainConfig:
    return PretrainConfig(data="d", out="o", max_steps=1, **kw)


def test_param_groups_follow_bert_rule():
    model = tiny_model()
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    kept = {names[id(p)] for p in no_decay["params"]}
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(n.endswith(".bias") or "LayerNorm" in n for n in kept)
    assert "mlm.bias" in kept and "bert.embeddings.LayerNorm.weight" in kept
    assert all(not n.endswith("bias") and "LayerNorm" not in n for n in decayed)
    assert "bert.embeddings.word_embeddings.weight" in decayed  # BERT decays embeddings
    # the tied decoder weight is the word-embedding Parameter: listed once, not twice
    n_unique = len({id(p) for p in model.parameters()})
    assert len(decay["params"]) + len(no_decay["params"]) == n_unique


def test_auto_picks_fused_adamw_on_cpu():
    opt = build_optimizer(tiny_model(), cfg())
    assert optimizer_kernel(opt) == "fused"
    assert optimizer_kernel(build_optimizer(tiny_model(), cfg(optimizer_impl="foreach"))) == "foreach"


def _train(kernel: str, steps: int = 5) -> list[torch.Tensor]:
    model = tiny_model()
    opt = build_optimizer(model, cfg(optimizer_impl=kernel, lr=1e-2, weight_decay=0.1))
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        ids = torch.randint(5, 50, (4, 12), generator=gen)
        labels = torch.where(torch.rand(4, 12, generator=gen) < 0.3, ids, -100)
        model.eval()  # no dropout: both runs see identical gradients
        model(ids, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


def test_fused_adamw_matches_foreach():
    fused, foreach = _train("fused"), _train("foreach")
    moved = max((a - b).abs().max().item() for a, b in zip(fused, tiny_model().parameters()))
    assert moved > 1e-3  # the comparison is not vacuous
    for a, b in zip(fused, foreach):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_lamb_matches_hand_computed_update():
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-6, 0.01
    w0, g1, g2 = [1.0, -2.0], [0.5, 0.25], [-0.3, 0.1]
    p = torch.nn.Parameter(torch.tensor(w0, dtype=torch.float64))
    opt = Lamb([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)

    # the update written out with plain floats (You et al. 2020, Algorithm 2, with bias correction)
    w, m, v = list(w0), [0.0, 0.0], [0.0, 0.0]
    for t, g in ((1, g1), (2, g2)):
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
        v = [b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, g)]
        u = [(mi / (1 - b1**t)) / (math.sqrt(vi / (1 - b2**t)) + eps) + wd * wi for mi, vi, wi in zip(m, v, w)]
        ratio = math.sqrt(sum(x * x for x in w)) / math.sqrt(sum(x * x for x in u))
        w = [wi - lr * ratio * ui for wi, ui in zip(w, u)]
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
        assert p.detach().tolist() == pytest.approx(w, rel=1e-12, abs=1e-12)
    # step 1 by hand: u = g/|g| + wd*w = [1.00999.., 0.97999..], r = sqrt(5)/|u|
    assert w != w0


def test_lamb_without_adaptation_is_adam_and_zero_norm_falls_back():
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(3, 4))
    b = torch.nn.Parameter(a.detach().clone())
    lamb = Lamb([{"params": [a], "layer_adaptation": False, "weight_decay": 0.0}], lr=1e-2)
    adam = torch.optim.Adam([b], lr=1e-2, eps=1e-6)
    for _ in range(3):
        g = torch.randn(3, 4)
        a.grad, b.grad = g.clone(), g.clone()
        lamb.step()
        adam.step()
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    # a zero weight has no trust ratio: the step is the plain Adam direction (ratio 1)
    z = torch.nn.Parameter(torch.zeros(2))
    opt = Lamb([z], lr=0.5, weight_decay=0.0)
    z.grad = torch.tensor([1.0, -1.0])
    opt.step()
    assert z.detach().tolist() == pytest.approx([-0.5, 0.5], rel=1e-5)


def test_lamb_optimizer_groups_skip_adaptation_on_no_decay():
    opt = build_optimizer(tiny_model(), cfg(optimizer="lamb"))
    assert isinstance(opt, Lamb)
    assert [g["layer_adaptation"] for g in opt.param_groups] == [True, False]
    with pytest.raises(ClozeformerError, match="adamw only"):
        cfg(optimizer="lamb", optimizer_impl="fused")


def test_linear_warmup_then_decay():
    s = Schedule("linear", warmup_steps=4)
    assert [s.factor(i, 10) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s.factor(4, 10) == 1.0  # first decay step is at the peak
    assert s.factor(7, 10) == pytest.approx(0.5)
    assert 0 < s.factor(9, 10) < 0.2  # the last update still moves
    assert s.factor(50, 10) == 0.0


def test_cosine_constant_floor_and_unknown_horizon():
    c = Schedule("cosine", warmup_steps=0, min_ratio=0.1)
    assert c.factor(0, 10) == pytest.approx(1.0)
    assert c.factor(5, 10) == pytest.approx(0.1 + 0.9 * 0.5)  # half way: cos(pi/2) = 0
    assert c.factor(10, 10) == pytest.approx(0.1)
    k = Schedule("constant", warmup_steps=2)
    assert [k.factor(i, 5) for i in range(5)] == [0.5, 1, 1, 1, 1]
    assert Schedule("linear", 0).factor(3, None) == 1.0  # horizon not known yet (time budget)


def test_budget_horizons():
    assert Budget(100, None, None, 64).horizon(0, 0.0) == 100
    assert Budget(None, 1000, None, 64).horizon(0, 0.0) == 16  # ceil(1000 / 64)
    assert Budget(100, 1000, None, 64).horizon(0, 0.0) == 16  # the smaller wins
    t = Budget(None, None, 60.0, 64)
    assert t.horizon(TIME_ESTIMATE_MIN_STEPS - 1, 1.0) is None  # too few steps measured
    assert t.horizon(10, 5.0) == 120  # 0.5 s per step -> 120 steps in a minute
    assert t.horizon(10, 600.0) == 10  # over budget: the horizon is where we are
    assert t.done(1, 0, 60.0) and not t.done(1, 0, 59.9)
    assert Budget(None, 1000, None, 64).done(16, 1024, 0.0)


def test_batch_ramp_micro_batches_and_token_horizon():
    assert [micro_batches_at(i, 4, 6) for i in range(8)] == [1, 1, 2, 2, 3, 3, 4, 4]  # 1 + 3i // 6
    assert [micro_batches_at(i, 4, 0) for i in range(3)] == [4, 4, 4]  # no ramp
    b = Budget(None, 1000, None, 64, grad_accum=4, ramp_steps=6)  # 16 tokens per micro-batch
    assert [b.tokens_in(i) for i in range(7)] == [16, 16, 32, 32, 48, 48, 64]
    assert b.steps_for_tokens(100) == 5  # 16 + 16 + 32 + 32 = 96 < 100 <= 144
    assert b.horizon(0, 0.0) == 6 + 13  # 192 tokens in the ramp, then ceil(808 / 64)
    assert Budget(None, 1000, None, 64, grad_accum=4).horizon(0, 0.0) == 16  # without a ramp: ceil(1000 / 64)
    # a time budget projects tokens, not steps: 4 ramp steps (96 tokens) in 6 s of 60 -> 960 tokens
    t = Budget(None, None, 60.0, 64, grad_accum=4, ramp_steps=6)
    assert t.tokens_before(4) == 96 and t.tokens_before(8) == 192 + 2 * 64
    assert t.horizon(4, 6.0) == 6 + 12  # 192 in the ramp, then ceil(768 / 64); counting steps would say 40


def test_finetune_and_pretrain_share_one_warmup_convention():
    """Fine-tuning's schedule is the core's: the first update already has lr > 0, and the
    factors equal the pretraining Schedule over the same warmup and horizon."""
    from clozeformer.tasks.finetune import make_optimizer
    from clozeformer.tasks.task_config import FinetuneConfig

    model = tiny_model()
    opt, sched = make_optimizer(model, FinetuneConfig(task="sst2", lr=1e-3, warmup_ratio=0.1), total_steps=50)
    assert sched.warmup_steps == 5
    reference = Schedule("linear", warmup_steps=5)
    assert [sched.factor(s, 50) for s in range(50)] == [reference.factor(s, 50) for s in range(50)]
    assert sched.factor(0, 50) == pytest.approx(0.2) and sched.factor(49, 50) > 0
    assert optimizer_kernel(opt) == "fused"
    decayed, plain = opt.param_groups
    assert all(p.dim() == 1 for p in plain["params"]) and plain["weight_decay"] == 0.0


def test_warmup_as_a_fraction_of_the_run():
    """BERT's recipe warms up over 1% of the run (10k of 1M steps): the warmup follows the horizon;
    before a time budget's horizon is known the multiplier is 0 (no update on a guess)."""
    s = Schedule("linear", warmup_ratio=0.01)
    assert [s.factor(i, 1000) for i in (0, 4, 9)] == [0.1, 0.5, 1.0]  # 10 warmup steps of 1,000
    assert s.factor(10, 1000) == 1.0 and s.factor(999, 1000) == pytest.approx(1 / 990)
    assert s.factor(0, 200) == 0.5  # a shorter run: 2 warmup steps
    assert s.factor(0, None) == 0.0
    assert Schedule("linear", warmup_steps=3).factor(0, None) == pytest.approx(1 / 3)  # a fixed warmup needs no horizon


def test_pretraining_recipes_warm_up_and_validate_by_size():
    from clozeformer.train.pretrain_config import PretrainConfig

    base = PretrainConfig(data="d", out="o", model="base", max_steps=100_000)
    assert (base.warmup_steps, base.warmup_ratio, base.eval_every) == (None, 0.01, 2000)
    tiny = PretrainConfig(data="d", out="o", model="tiny", max_steps=100)
    assert (tiny.warmup_steps, tiny.warmup_ratio, tiny.eval_every) == (300, None, 0)
    mine = PretrainConfig(data="d", out="o", model="base", max_steps=100, warmup_steps=7, eval_every=0)
    assert (mine.warmup_steps, mine.warmup_ratio, mine.eval_every) == (7, None, 0)  # given values win
