"""`clozeformer pretrain` end to end on a generated corpus: learning, objectives, budgets,
guard rails (NaN/Inf steps), config files, resume rules, precision choice and `plot`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from synthetic import prepare_data, train_tokenizer, write_corpus

from clozeformer.commands.cli import main as cli_main
from clozeformer.modeling.bert import BertForMaskedLM
from clozeformer.modeling.config import BertConfig
from clozeformer.train import checkpoint as ckpt_io
from clozeformer.train import precision
from clozeformer.train.loop import pretrain
from clozeformer.train.metrics_file import read_metrics
from clozeformer.train.pretrain_config import PretrainConfig
from clozeformer.utils.errors import ClozeformerError


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """A tiny WordPiece vocab trained on generated text, then packed and NSP shards (seq 32)."""
    root = tmp_path_factory.mktemp("pretrain_data")
    write_corpus(root / "corpus.txt", 300)
    train_tokenizer(root / "corpus.txt", root / "tok")
    return {mode: prepare_data(root / "corpus.txt", root / "tok", root / mode, mode) for mode in ("packed", "nsp")}


def cfg_for(data_dir: Path, out: Path, **kw) -> PretrainConfig:
    # fp32 unless a test asks otherwise: `auto` is bf16 on CPUs with AMX, and these tests compare losses closely
    base = dict(data=str(data_dir), out=str(out), model="tiny", batch_size=8, lr=1e-3, progress=False, report_to=["none"])
    base["dtype"] = "fp32"
    return PretrainConfig(**{**base, **kw})


def train_records(run: Path) -> list[dict]:
    return [r for r in read_metrics(run) if r["kind"] == "train"]


# ----------------------------------------------------------------------------- end to end


@pytest.mark.parametrize("positions", ["rotary", "absolute"])
def test_cli_learns_logs_and_saves_an_hf_checkpoint(data, tmp_path, capsys, positions):
    out = tmp_path / "run"
    rc = cli_main(
        [
            "pretrain",
            "--data",
            str(data["packed"]),
            "--model",
            "tiny",
            "--out",
            str(out),
            "--max-steps",
            "40",
            "--batch-size",
            "16",
            "--lr",
            "3e-3",
            "--warmup-steps",
            "5",
            "--eval-every",
            "20",
            "--save-every",
            "20",
            "--no-progress",
            "--report-to",
            "none",
            "--position-embedding-type",
            positions,
        ]
    )
    assert rc == 0
    stdout = capsys.readouterr().out
    assert "== PretrainConfig (resolved) ==" in stdout and re.search(r"^  max_steps += 40$", stdout, re.M)
    assert "parameters" in stdout and "512 tokens/step" in stdout and "new run in" in stdout
    assert json.loads((out / "pretrain_config.json").read_text())["max_steps"] == 40
    recs = train_records(out)
    assert [r["step"] for r in recs] == list(range(1, 41))
    first, last = sum(r["loss"] for r in recs[:5]) / 5, sum(r["loss"] for r in recs[-5:]) / 5
    assert last < first - 0.5  # the generated grammar is easy to learn
    assert recs[4]["lr"] == pytest.approx(3e-3) and recs[-1]["lr"] < 1e-4  # warmup peak, then linear decay
    evals = [r for r in read_metrics(out) if r["kind"] == "eval"]
    assert [e["step"] for e in evals] == [20, 40]
    assert evals[1]["val_mlm_loss"] < evals[0]["val_mlm_loss"]
    assert evals[1]["val_ppl"] == pytest.approx(torch.tensor(evals[1]["val_mlm_loss"]).exp().item(), rel=1e-6)
    assert 0 < evals[1]["val_mlm_acc"] <= 1

    ckpt = out / "checkpoints" / "step-000040"
    assert [s for s, _ in ckpt_io.list_checkpoints(out)] == [20, 40]
    ours = BertForMaskedLM.from_pretrained(ckpt).eval()
    assert ours.config.position_embedding_type == positions
    from transformers import AutoModelForMaskedLM, BertTokenizerFast

    hf = AutoModelForMaskedLM.from_pretrained(str(ckpt)).eval()
    assert type(hf).__name__ == ("RoFormerForMaskedLM" if positions == "rotary" else "BertForMaskedLM")
    tok = BertTokenizerFast.from_pretrained(str(ckpt))
    assert tok.vocab_size == 120
    ids = torch.tensor([tok("the cat sees the red ball .")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(ours(ids).logits, hf(ids).logits, rtol=1e-4, atol=1e-4)


def test_recipe_fills_what_the_user_left_unset():
    def resolved(**kw):
        c = PretrainConfig(data="d", out="o", max_steps=1, **kw)
        return c.lr, c.warmup_steps, c.dropout, c.position_embedding_type

    assert resolved(model="tiny") == (2e-3, 300, 0.0, "rotary")  # the small-budget recipe (issue 11)
    assert resolved(model="mini") == (2e-3, 300, 0.0, "rotary")
    assert resolved(model="base") == (1e-4, None, None, "absolute")  # BERT's (warmup: 1% of the run)
    assert resolved(model="tiny", init_from="ckpt") == (1e-4, None, None, None)  # the checkpoint decides
    assert resolved(model="tiny", lr=5e-4, warmup_steps=7, dropout=0.1, position_embedding_type="absolute") == (
        5e-4,
        7,
        0.1,
        "absolute",
    )  # what the user sets wins
    with pytest.raises(ClozeformerError, match="position-embedding-type"):
        PretrainConfig(data="d", out="o", max_steps=1, position_embedding_type="relative")


def test_masking_flags_reach_the_loader(data, tmp_path):
    """--mlm-probability 0.4 with [MASK]-only replacement (Wettig et al. 2022): what the batches hold."""
    from clozeformer.train import distributed
    from clozeformer.train.loop import Trainer

    cfg = cfg_for(data["packed"], tmp_path / "run", max_steps=1, mlm_probability=0.4, mask_token_prob=1.0, random_token_prob=0.0)
    trainer = Trainer(cfg, distributed.DistInfo())
    chosen = shown_mask = 0
    for _, batch in zip(range(5), trainer.loader):
        picked = batch["labels"] != -100
        chosen += int(picked.sum())
        shown_mask += int((batch["input_ids"][picked] == trainer.manifest.special_ids.mask).sum())
        real = int(batch["attention_mask"].sum())
    assert shown_mask == chosen  # every chosen token is shown as [MASK]
    assert 0.3 < chosen / (5 * real) < 0.5
    with pytest.raises(ClozeformerError, match="mask-token-prob"):
        cfg_for(data["packed"], tmp_path / "x", max_steps=1, mask_token_prob=0.95, random_token_prob=0.1)


def test_position_type_must_match_an_init_checkpoint(data, tmp_path):
    pretrain(cfg_for(data["packed"], tmp_path / "a", max_steps=1, position_embedding_type="absolute"))
    ckpt = tmp_path / "a" / "checkpoints" / "step-000001"
    with pytest.raises(ClozeformerError, match="does not match"):
        pretrain(cfg_for(data["packed"], tmp_path / "b", max_steps=1, init_from=str(ckpt), position_embedding_type="rotary"))


def test_mlm_nsp_objective_on_nsp_data(data, tmp_path):
    out = tmp_path / "run"
    summary = pretrain(cfg_for(data["nsp"], out, objective="mlm_nsp", max_steps=4, eval_every=2))
    rec = train_records(out)[-1]
    assert rec["loss"] == pytest.approx(rec["mlm_loss"] + rec["nsp_loss"])
    assert 0 <= rec["nsp_acc"] <= 1
    assert "val_nsp_acc" in summary["val"] and "val_nsp_loss" in summary["val"]
    config = json.loads((out / "checkpoints" / "step-000004" / "config.json").read_text())
    # tiny defaults to rotary: saved as RoFormer (transformers has no RoFormer NSP class; AutoModel loads
    # the encoder), read back by clozeformer as its BertForPreTraining
    assert config["architectures"] == ["RoFormerForPreTraining"] and config["model_type"] == "roformer"
    assert BertConfig.from_json_file(out / "checkpoints" / "step-000004" / "config.json").extra["architectures"] == [
        "BertForPreTraining"
    ]


def test_grad_accum_matches_one_big_batch(data, tmp_path):
    runs = {}
    for name, (b, a) in {"big": (8, 1), "accum": (4, 2)}.items():
        pretrain(cfg_for(data["packed"], tmp_path / name, batch_size=b, grad_accum=a, max_steps=5, dropout=0.0))
        runs[name] = [r["loss"] for r in train_records(tmp_path / name)]
    assert runs["big"] == pytest.approx(runs["accum"], abs=1e-5)
    assert len(set(runs["big"])) == 5  # the weights really moved between steps


def test_batch_ramp_grows_the_batch_counts_its_tokens_and_resumes_exactly(data, tmp_path):
    """--batch-ramp-steps 6 with 3 x 4 sequences: steps 1-3 take one micro-batch, 4-6 two, then three.
    Its first step is a plain 4-sequence step; a run stopped and resumed mid-ramp is the same run."""
    ramp = dict(batch_size=4, grad_accum=3, batch_ramp_steps=6, schedule="constant", warmup_steps=0, dropout=0.0)
    pretrain(cfg_for(data["packed"], tmp_path / "full", max_steps=10, **ramp))
    full = train_records(tmp_path / "full")
    per_step = [b["tokens"] - a["tokens"] for a, b in zip([{"tokens": 0}] + full, full)]
    assert per_step == [128, 128, 128, 256, 256, 256, 384, 384, 384, 384]  # x 4 sequences x 32 tokens
    pretrain(cfg_for(data["packed"], tmp_path / "plain", max_steps=1, batch_size=4, schedule="constant", dropout=0.0))
    assert train_records(tmp_path / "plain")[0]["loss"] == pytest.approx(full[0]["loss"], rel=1e-6)
    pretrain(cfg_for(data["packed"], tmp_path / "split", max_steps=5, **ramp))
    pretrain(cfg_for(data["packed"], tmp_path / "split", max_steps=10, **ramp))
    assert [r["loss"] for r in train_records(tmp_path / "split")] == [r["loss"] for r in full]
    # a token budget counts the ramp's smaller steps: 6 steps hold 1,152 tokens, 7 hold 1,536
    summary = pretrain(cfg_for(data["packed"], tmp_path / "tokens", max_tokens=1500, **ramp))
    assert (summary["step"], summary["tokens"]) == (7, 1536)
    with pytest.raises(ClozeformerError, match="--grad-accum >= 2"):
        cfg_for(data["packed"], tmp_path / "bad", max_steps=2, batch_ramp_steps=5)


# ----------------------------------------------------------------------------- user errors


def test_clear_errors_for_bad_setups(data, tmp_path, capsys):
    base = ["pretrain", "--data", str(data["packed"]), "--out", str(tmp_path / "r"), "--no-progress"]
    assert cli_main(base + ["--max-steps", "2", "--objective", "mlm_nsp"]) == 2
    assert "needs NSP data" in capsys.readouterr().err
    model_json = tmp_path / "model.json"
    model_json.write_text(
        json.dumps(
            {
                "model_type": "bert",
                "vocab_size": 999,
                "hidden_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 64,
            }
        )
    )
    assert cli_main(base + ["--max-steps", "2", "--model-config", str(model_json)]) == 2
    err = capsys.readouterr().err
    assert "model vocab_size 999" in err and "data vocab_size 120" in err and str(model_json) in err
    assert cli_main(base) == 2
    assert "set a budget" in capsys.readouterr().err
    assert cli_main(["pretrain", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "r"), "--max-steps", "1"]) == 2
    assert "no such data directory" in capsys.readouterr().err


def test_config_file_and_flags(data, tmp_path):
    run_cfg = tmp_path / "run.yaml"
    run_cfg.write_text(f"data: {data['packed']}\nmax_steps: 2\nbatch_size: 4\nlr: 0.002\n")
    out = tmp_path / "run"
    assert cli_main(["pretrain", "--config", str(run_cfg), "--out", str(out), "--batch-size", "8", "--no-progress"]) == 0
    saved = json.loads((out / "pretrain_config.json").read_text())
    assert (saved["max_steps"], saved["batch_size"], saved["lr"]) == (2, 8, 0.002)  # flags win over the file


def test_auto_resume_and_no_resume(data, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["pretrain", "--data", str(data["packed"]), "--out", str(out), "--no-progress", "--batch-size", "8"]
    assert cli_main(args + ["--max-steps", "2"]) == 0
    assert cli_main(args + ["--max-steps", "4"]) == 0
    stdout = capsys.readouterr().out
    assert f"resuming from {out / 'checkpoints' / 'step-000002'} (step 2" in stdout
    assert "max_steps 2 -> 4" in stdout  # the schedule horizon changed: said, not hidden
    assert [r["step"] for r in train_records(out)] == [1, 2, 3, 4]
    assert cli_main(args + ["--max-steps", "6", "--no-resume"]) == 2
    assert "already holds checkpoint step-000004" in capsys.readouterr().err


# ----------------------------------------------------------------------------- budgets


def test_token_budget(data, tmp_path):
    summary = pretrain(cfg_for(data["packed"], tmp_path / "run", max_tokens=1000))  # 256 tokens/step
    assert summary["step"] == 4 and summary["tokens"] == 1024


def test_time_budget_estimates_the_horizon_and_saves_by_the_clock(data, tmp_path):
    out = tmp_path / "run"
    summary = pretrain(
        cfg_for(
            data["packed"],
            out,
            max_time=0.04,
            eval_every=0,
            warmup_steps=0,  # 2.4 s
            save_every_minutes=0.01,
            keep_last=100,
        )
    )  # a checkpoint every 0.6 s
    recs = train_records(out)
    assert summary["stopped_by"] == "budget" and summary["elapsed_s"] >= 2.4
    assert len(recs) > 10
    assert recs[0]["lr"] == pytest.approx(1e-3)  # horizon unknown at first: constant
    assert recs[-1]["lr"] < 0.5e-3  # the estimated horizon makes it decay toward the deadline
    reasons = [ckpt_io.load_trainer_state(p)["reason"] for _, p in ckpt_io.list_checkpoints(out)]
    assert reasons.count("periodic") >= 2 and reasons[-1] == "budget"


# ----------------------------------------------------------------------------- NaN / Inf guard


def poison(monkeypatch, bad_calls: set[int], where: str = "loss") -> None:
    """Make the training forward's loss NaN (or one gradient Inf) on the given call numbers."""
    real = BertForMaskedLM.forward
    calls = [0]

    def forward(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        if self.training:
            calls[0] += 1
            if calls[0] in bad_calls:
                if where == "loss":
                    out.loss = out.loss * float("nan")
                else:  # finite value (sqrt(0) = 0), infinite gradient
                    w = self.bert.embeddings.LayerNorm.weight
                    out.loss = out.loss + torch.sqrt(w - w.detach()).sum()
        return out

    monkeypatch.setattr(BertForMaskedLM, "forward", forward)


@pytest.mark.parametrize("where", ["loss", "grad"])
def test_bad_steps_are_skipped_and_counted(data, tmp_path, monkeypatch, where):
    out = tmp_path / "run"
    poison(monkeypatch, {3, 4}, where)
    summary = pretrain(cfg_for(data["packed"], out, max_steps=6, max_bad_steps=3))
    recs = train_records(out)
    assert [r["skipped"] for r in recs] == [False, False, True, True, False, False]
    assert summary["bad_steps"] == 2 and recs[-1]["bad_steps"] == 2
    text = (out / "metrics.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON: a diverged value is null
    if where == "grad":
        assert all(isinstance(r["loss"], float) for r in recs)  # the loss itself stayed finite
        assert recs[2]["grad_norm"] is None
    else:
        assert recs[2]["loss"] is None
    osd = torch.load(out / "checkpoints" / "step-000006" / "optimizer.pt", weights_only=True)
    steps = {float(s["step"]) for s in osd["state"].values()}
    assert steps == {4.0}  # 6 steps, 2 skipped: the optimizer updated 4 times


def test_consecutive_bad_steps_stop_with_last_good_checkpoint(data, tmp_path, monkeypatch):
    out = tmp_path / "run"
    poison(monkeypatch, set(range(3, 100)))
    with pytest.raises(ClozeformerError, match=r"3 consecutive steps with a NaN/Inf loss.*step-000002"):
        pretrain(cfg_for(data["packed"], out, max_steps=10, save_every=2, max_bad_steps=3))
    assert [s for s, _ in ckpt_io.list_checkpoints(out)] == [2]  # nothing saved during the streak
    BertForMaskedLM.from_pretrained(out / "checkpoints" / "step-000002")


# ----------------------------------------------------------------------------- precision, init, plot


def test_precision_choice(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "avx512_bf16"}))
    assert precision.resolve_precision("auto", cpu).name == "fp32"  # AVX512-BF16 alone: stay fp32
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512_bf16", "amx_bf16", "amx_tile"}))
    assert precision.resolve_precision("auto", cpu).name == "bf16"
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset())
    assert precision.resolve_precision("auto", cpu).dtype is None
    assert precision.resolve_precision("bf16", cpu).dtype is torch.bfloat16
    with pytest.raises(ClozeformerError, match="fp16 needs a CUDA GPU"):
        precision.resolve_precision("fp16", cpu)


def test_bf16_autocast_runs_on_cpu_and_init_from(data, tmp_path):
    first = tmp_path / "first"
    pretrain(cfg_for(data["packed"], first, max_steps=2, dtype="bf16"))
    assert all(r["loss"] == r["loss"] for r in train_records(first))
    ckpt = first / "checkpoints" / "step-000002"
    out = tmp_path / "continued"
    pretrain(cfg_for(data["packed"], out, max_steps=1, init_from=str(ckpt), lr=1e-9))
    a = BertForMaskedLM.from_pretrained(ckpt).state_dict()
    b = BertForMaskedLM.from_pretrained(out / "checkpoints" / "step-000001").state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)  # started from those weights


def test_plot_writes_pngs(data, tmp_path, capsys):
    out = tmp_path / "run"
    pretrain(cfg_for(data["packed"], out, max_steps=6, eval_every=3))
    assert cli_main(["plot", str(out), "--out", str(tmp_path / "png"), "--prefix", "pretrain-"]) == 0
    for name in ("loss", "mlm_accuracy", "lr", "throughput"):
        png = tmp_path / "png" / f"pretrain-{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert not (tmp_path / "png" / "pretrain-replaced_token.png").exists()  # an ELECTRA run's panel only
    assert cli_main(["plot", str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    # --compare: validation curves of several runs against wall-clock minutes
    other = tmp_path / "other"
    pretrain(cfg_for(data["packed"], other, max_steps=4, eval_every=2, position_embedding_type="absolute"))
    from clozeformer.commands.plot import validation_curve

    pts = validation_curve(other)
    assert [round(p[1], 6) for p in pts] == [round(r["val_mlm_loss"], 6) for r in read_metrics(other) if r["kind"] == "eval"]
    assert all(0 < a[0] <= b[0] for a, b in zip(pts, pts[1:]))  # minutes increase with the step
    tokens = validation_curve(other, "tokens")  # the tokens seen at the evaluations (steps 2 and 4)
    seen = {r["step"]: r["tokens"] for r in train_records(other)}
    assert [p[0] for p in tokens] == [seen[2] / 1e6, seen[4] / 1e6]
    assert [p[1:] for p in tokens] == [p[1:] for p in pts]
    assert cli_main(["plot", str(out), "--compare", str(other), "--x", "steps"]) == 2
    assert "--x 'steps': choose minutes or tokens" in capsys.readouterr().err
    assert cli_main(["plot", str(out), "--compare", str(other), "--out", str(tmp_path / "cmp")]) == 0
    for name in ("val_loss", "val_acc"):
        assert (tmp_path / "cmp" / f"compare-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli_main(["plot", str(out), "--compare", str(tmp_path / "nope")]) == 2


def test_mlm_objective_on_nsp_data_trains_and_evaluates(tmp_path):
    """MLM-only on NSP-prepared data (the NSP ablation's second arm) ignores the NSP labels."""
    import json as _json

    from clozeformer.commands.cli import main as cli_main

    corpus = tmp_path / "corpus.txt"
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    rng = __import__("random").Random(0)
    docs = []
    for _d in range(40):
        sents = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 12))) + " ." for _ in range(8)]
        docs.append("\n".join(sents))
    corpus.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    vocab = train_tokenizer(corpus, tmp_path / "tok")
    data = tmp_path / "data"
    assert (
        cli_main(
            [
                "prepare",
                "--input",
                str(corpus),
                "--format",
                "bert",
                "--tokenizer",
                str(vocab),
                "--out",
                str(data),
                "--max-length",
                "32",
                "--mode",
                "nsp",
                "--val-fraction",
                "0.1",
                "--min-doc-chars",
                "0",
                "--workers",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    run = tmp_path / "run"
    assert (
        cli_main(
            [
                "pretrain",
                "--data",
                str(data),
                "--model",
                "tiny",
                "--out",
                str(run),
                "--max-steps",
                "3",
                "--batch-size",
                "4",
                "--eval-every",
                "3",
                "--no-progress",
                "--report-to",
                "none",
            ]
        )
        == 0
    )
    evals = [r for r in map(_json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "val_mlm_acc" in r]
    assert evals and "val_nsp_acc" not in evals[-1]
