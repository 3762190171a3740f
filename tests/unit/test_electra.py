"""ELECTRA's replaced-token detection (`pretrain --objective electra`): the corruption and the loss,
gradients, save/load (the encoder as a directory transformers loads, the generator in generator/),
training end to end with exact resume, and fine-tuning from the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from synthetic import make_data_dir

from clozeformer.commands.cli import main as cli_main
from clozeformer.modeling.bert import BertForMaskedLM, BertForSequenceClassification
from clozeformer.modeling.config import BertConfig
from clozeformer.modeling.electra import ElectraForPreTraining, electra_generator_config, sample_tokens
from clozeformer.train.loop import pretrain
from clozeformer.train.metrics_file import read_metrics
from clozeformer.train.pretrain_config import PretrainConfig

CFG = dict(
    vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64
)


def batch(seed: int = 0, B: int = 3, T: int = 12):
    g = torch.Generator().manual_seed(seed)
    original = torch.randint(5, 60, (B, T), generator=g)
    chosen = torch.rand(B, T, generator=g) < 0.3
    chosen[:, 0] = True  # at least one per row
    labels = torch.where(chosen, original, torch.full_like(original, -100))
    inputs = torch.where(chosen, torch.full_like(original, 4), original)  # [MASK] = 4
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -3:] = 0  # padding in the last row
    return original, inputs, labels, mask


def test_sample_tokens_draws_from_each_rows_distribution():
    torch.manual_seed(0)
    probs = torch.tensor([[0.2, 0.5, 0.0, 0.3], [0.0, 0.0, 1.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
    n = 40_000
    draws = sample_tokens(probs.repeat(n, 1)).view(n, 3)  # (n, rows)
    for row in range(3):
        freq = torch.bincount(draws[:, row], minlength=4).double() / n
        # 4.5 standard errors of a frequency; a zero-probability token is never drawn
        tol = 4.5 * (probs[row].double() * (1 - probs[row].double()) / n).sqrt() + 1e-12
        assert ((freq - probs[row].double()).abs() <= tol).all(), (row, freq)
    # rows that do not sum to 1 (a bf16 softmax) are sampled in proportion
    many = sample_tokens(torch.tensor([[1.0, 3.0]]).repeat(n, 1))
    assert abs(many.double().mean().item() - 0.75) < 4.5 * (0.75 * 0.25 / n) ** 0.5
    assert sample_tokens(torch.zeros(0, 5)).shape == (0,)


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_corruption_labels_and_loss(positions):
    torch.manual_seed(0)
    model = ElectraForPreTraining(BertConfig(**CFG, position_embedding_type=positions))
    original, inputs, labels, mask = batch()
    out = model(inputs, mask, torch.zeros_like(inputs), labels)
    keep = labels != -100
    # unmasked positions are never "replaced"; a masked one is replaced exactly when the sample differs
    assert out.rtd_labels[~keep].sum() == 0
    assert out.rtd_labels.shape == out.rtd_logits.shape == inputs.shape
    # the loss: generator MLM + weight x mean BCE over the real (non-pad) tokens
    bce = F.binary_cross_entropy_with_logits(out.rtd_logits, out.rtd_labels, reduction="none")
    expect_rtd = bce[mask.bool()].mean()
    torch.testing.assert_close(out.rtd_loss, expect_rtd)
    torch.testing.assert_close(out.loss, out.mlm_loss + 50.0 * out.rtd_loss)
    assert out.logits.shape == (int(keep.sum()), CFG["vocab_size"])


def test_a_sure_generator_replaces_nothing_and_a_wrong_one_everything():
    torch.manual_seed(0)
    model = ElectraForPreTraining(BertConfig(**CFG))
    original, inputs, labels, mask = batch()
    keep = labels != -100
    gen_bias = model.generator.mlm.bias
    with torch.no_grad():  # the generator always predicts token 7
        gen_bias.fill_(-1e4)
        gen_bias[7] = 1e4
    out = model(inputs, mask, None, labels)
    expect = (keep & (original != 7)).float()
    assert torch.equal(out.rtd_labels, expect)


def test_gradients_reach_both_models_but_not_through_sampling():
    torch.manual_seed(0)
    model = ElectraForPreTraining(BertConfig(**CFG))
    original, inputs, labels, mask = batch()
    torch.manual_seed(1)
    out = model(inputs, mask, None, labels)
    out.rtd_loss.backward()
    # the discriminator's loss does not reach the generator (sampling is not differentiable)
    assert all(p.grad is None for p in model.generator.parameters())
    assert model.discriminator.rtd.dense_prediction.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    model(inputs, mask, None, labels).loss.backward()
    assert model.generator.mlm.dense.weight.grad.abs().sum() > 0
    assert model.discriminator.bert.encoder.layer[0].attention.query.weight.grad.abs().sum() > 0


def test_generator_size():
    cfg = BertConfig.preset("tiny", vocab_size=100)  # hidden 128, 2 heads of 64
    gen = electra_generator_config(cfg, 0.25)
    assert (gen.hidden_size, gen.num_attention_heads, gen.intermediate_size, gen.num_hidden_layers) == (32, 1, 128, 2)
    gen = electra_generator_config(BertConfig.preset("base", vocab_size=100), 1 / 3)
    assert (gen.hidden_size, gen.num_attention_heads) == (256, 4)  # ELECTRA-Base's generator


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_save_load_and_transformers_reads_the_encoder(tmp_path, positions):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = ElectraForPreTraining(BertConfig(**CFG, position_embedding_type=positions)).eval()
    model.save_pretrained(tmp_path)
    back = ElectraForPreTraining.from_pretrained(tmp_path)
    for (k, a), (k2, b) in zip(model.state_dict().items(), back.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b), k
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["architectures"] == ["RoFormerModel" if positions == "rotary" else "BertModel"]
    ids = torch.randint(5, 60, (2, 10))
    hf = transformers.AutoModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(
            hf(input_ids=ids).last_hidden_state, model.discriminator.bert(ids).last_hidden_state, atol=1e-5, rtol=0
        )
        hf_gen = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "generator").eval()
        torch.testing.assert_close(hf_gen(input_ids=ids).logits, model.generator(ids).logits, atol=1e-5, rtol=0)
    # a fine-tuning head starts from the encoder: every backbone tensor loaded, the RTD head unused
    clf = BertForSequenceClassification.from_pretrained(tmp_path, num_labels=2)
    assert all(k.startswith(("bert.pooler.", "classifier.")) for k in clf.loading_info["new"])
    assert any(k.startswith("discriminator_predictions.") for k in clf.loading_info["unused"])


def test_electra_from_a_bert_directory_gets_a_fresh_generator(tmp_path):
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(**CFG)).save_pretrained(tmp_path)
    model = ElectraForPreTraining.from_pretrained(tmp_path, generator_fraction=0.5)
    assert model.generator.config.hidden_size == 16
    assert model.discriminator.loading_info["new"] == [
        "rtd.dense.weight",
        "rtd.dense.bias",
        "rtd.dense_prediction.weight",
        "rtd.dense_prediction.bias",
    ]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("electra_data"), fixed_vocab=True)  # the same data every run


def cfg_for(data_dir: Path, out: Path, **kw) -> PretrainConfig:
    base = dict(
        data=str(data_dir),
        out=str(out),
        model="tiny",
        objective="electra",
        batch_size=8,
        warmup_steps=5,
        progress=False,
        report_to=["none"],
        dtype="fp32",  # auto is bf16 on AMX CPUs; the thresholds below are for fp32
    )
    return PretrainConfig(**{**base, **kw})


def test_pretrain_electra_learns_resumes_exactly_and_finetunes(data, tmp_path, capsys):
    full = pretrain(cfg_for(data, tmp_path / "full", max_steps=40, eval_every=20, schedule="constant"))
    assert full["stopped_by"] == "budget"
    train = [r for r in read_metrics(tmp_path / "full") if r["kind"] == "train"]
    assert {"rtd_loss", "rtd_acc", "mlm_loss"} <= set(train[0])
    first, last = (sum(r["mlm_loss"] for r in rs) / 5 for rs in (train[:5], train[-5:]))
    assert last < first - 0.1, (first, last)
    assert 0.0 < full["val"]["val_rtd_replaced"] < 0.15 and "val_mlm_acc" in full["val"]
    ckpt = Path(full["checkpoint"])
    assert (ckpt / "generator" / "config.json").is_file() and (ckpt / "generator" / "vocab.txt").is_file()
    # `plot` draws the discriminator's accuracy beside the all-"original" answer's
    pytest.importorskip("matplotlib")
    assert cli_main(["plot", str(tmp_path / "full"), "--out", str(tmp_path / "png")]) == 0
    assert (tmp_path / "png" / "replaced_token.png").stat().st_size > 1000

    # exact resume: 20 steps, stop, 20 more == 40 in one go (a constant lr: the horizon does not matter)
    pretrain(cfg_for(data, tmp_path / "split", max_steps=20, schedule="constant"))
    pretrain(cfg_for(data, tmp_path / "split", max_steps=40, schedule="constant"))
    a = [r["loss"] for r in read_metrics(tmp_path / "full") if r["kind"] == "train"]
    b = [r["loss"] for r in read_metrics(tmp_path / "split") if r["kind"] == "train"]
    assert a == b

    # the CLI flags, and fine-tuning the encoder on a task
    rc = cli_main(
        [
            "pretrain",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "cli"),
            "--objective",
            "electra",
            "--generator-fraction",
            "0.5",
            "--rtd-weight",
            "20",
            "--max-steps",
            "3",
            "--batch-size",
            "4",
            "--no-progress",
            "--report-to",
            "none",
        ]
    )
    assert rc == 0
    saved = json.loads((tmp_path / "cli" / "pretrain_config.json").read_text())
    assert (saved["objective"], saved["generator_fraction"], saved["rtd_weight"]) == ("electra", 0.5, 20.0)
    capsys.readouterr()
    # fill-mask: the encoder has no MLM head and says where the generator is; the generator answers
    assert cli_main(["fill-mask", "--model", str(ckpt), "the cat [MASK] the ball ."]) == 2
    assert "generator" in capsys.readouterr().err
    assert cli_main(["fill-mask", "--model", str(ckpt / "generator"), "--json", "the cat [MASK] the ball ."]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["masks"][0]["candidates"]
    clf = BertForSequenceClassification.from_pretrained(ckpt, num_labels=2)
    ours = ElectraForPreTraining.from_pretrained(ckpt)
    ids = torch.randint(5, 100, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(clf.bert(ids).last_hidden_state, ours.discriminator.bert(ids).last_hidden_state)


def test_bad_electra_flags(data, tmp_path, capsys):
    for flag, value in (("--generator-fraction", "0"), ("--generator-fraction", "1.5"), ("--rtd-weight", "-1")):
        rc = cli_main(
            [
                "pretrain",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "x"),
                "--objective",
                "electra",
                flag,
                value,
                "--max-steps",
                "1",
            ]
        )
        err = capsys.readouterr().err
        assert rc == 2 and err.count("error:") == 1 and flag in err, err


def test_a_full_width_generator_shares_the_embeddings(tmp_path):
    torch.manual_seed(0)
    cfg = BertConfig(**CFG, position_embedding_type="rotary")
    model = ElectraForPreTraining(cfg, electra_generator_config(cfg, 1.0, layers=1))
    assert model.shares_embeddings and model.generator.config.num_hidden_layers == 1
    word = model.discriminator.bert.embeddings.word_embeddings.weight
    assert model.generator.bert.embeddings.word_embeddings.weight is word
    assert model.generator.mlm.decoder.weight is word
    assert sum(p.numel() for p in model.parameters()) < sum(p.numel() for p in model.state_dict().values())
    original, inputs, labels, mask = batch()
    model(inputs, mask, None, labels).mlm_loss.backward()  # the generator's loss alone ...
    assert word.grad.abs().sum() > 0  # ... trains the embeddings the discriminator reads
    model.save_pretrained(tmp_path)
    back = ElectraForPreTraining.from_pretrained(tmp_path)
    assert back.generator.bert.embeddings.word_embeddings.weight is back.discriminator.bert.embeddings.word_embeddings.weight
    assert back.generator.mlm.decoder.weight is back.discriminator.bert.embeddings.word_embeddings.weight
    torch.testing.assert_close(back.generator.bert.embeddings.word_embeddings.weight, word.detach())
    # a narrower generator keeps its own embeddings
    narrow = ElectraForPreTraining(cfg, electra_generator_config(cfg, 0.5))
    assert not narrow.shares_embeddings
    assert narrow.generator.bert.embeddings is not narrow.discriminator.bert.embeddings
