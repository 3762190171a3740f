"""The CLI shell: help, version, the demo round trip, one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clozeformer import __version__
from clozeformer.commands.cli import COMMANDS, main
from clozeformer.modeling.bert import BertForSequenceClassification
from clozeformer.modeling.config import BertConfig


def test_help_lists_every_verb(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for verb in COMMANDS:
        assert verb in out


def test_version_and_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "clozeformer", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"clozeformer {__version__}"


def test_unknown_verb_fails(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown verb 'frobnicate'" in capsys.readouterr().err


def test_demo_round_trip_through_transformers(tmp_path, capsys):
    pytest.importorskip("transformers")
    assert main(["demo", "--vocab-size", "500", "--out", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "OK" in out and (tmp_path / "m" / "model.safetensors").is_file()


def test_info_reports_a_model_and_errors_cleanly(tmp_path, capsys):
    cfg = BertConfig.preset("tiny", vocab_size=64, id2label={0: "neg", 1: "pos"})
    BertForSequenceClassification(cfg).save_pretrained(tmp_path / "clf")
    assert main(["info", str(tmp_path / "clf")]) == 0
    out = capsys.readouterr().out
    assert "BertForSequenceClassification" in out and "labels: neg, pos" in out

    (tmp_path / "bad").mkdir()
    assert main(["info", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no config.json" in err and len(err.strip().splitlines()) == 1

    cfg_json = json.loads((tmp_path / "clf" / "config.json").read_text())
    cfg_json["hidden_size"] = 64
    (tmp_path / "clf" / "config.json").write_text(json.dumps(cfg_json))
    assert main(["info", str(tmp_path / "clf")]) == 2
    assert "has shape" in capsys.readouterr().err


def test_an_internal_bug_is_reported_as_one(monkeypatch, capsys):
    import clozeformer.commands.info as info

    def boom(args):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(info, "main", boom)
    assert main(["info", "anything"]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: simulated bug" in err and "internal error in `clozeformer info`" in err
    assert "please report it" in err.splitlines()[-1]


def test_output_paths_that_cannot_be_written_are_one_error_line(tmp_path, capsys, infer_tok):
    """The two shapes of an unwritable output, for every verb's file and directory flags: a file flag
    given an existing directory, and any output under a path whose parent is a file. Each is one
    `error:` line naming the flag, exit status 2, before any work (docs/BAD_INPUT.md)."""
    from synthetic import save_tiny

    model = save_tiny(BertForSequenceClassification, infer_tok, tmp_path / "m", id2label={0: "a", 1: "b"})
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    under = str(blocker / "sub")
    corpus = tmp_path / "c.txt"
    corpus.write_text("some text here\n")
    cases = {
        "classify --out DIR": ["classify", "--model", model, "hi", "--out", tmp_path],
        "embed --out under a file": ["embed", "--model", model, "hi", "--out", under],
        "embed --build-index under a file": ["embed", "--model", model, "hi", "--build-index", under],
        "export --onnx DIR": ["export", "--model", model, "--onnx", tmp_path],
        "export --onnx under a file": ["export", "--model", model, "--onnx", under],
        "finetune --out": ["finetune", "--task", "sst2", "--data", tmp_path, "--model", model, "--out", under],
        "evaluate --out": ["evaluate", "--model", model, "--data", tmp_path, "--out", under],
        "predict --out": ["predict", "--model", model, "--data", tmp_path, "--out", under],
        "pretrain --out": ["pretrain", "--data", tmp_path, "--out", under],
        "prepare --out": ["prepare", "--input", corpus, "--tokenizer", model, "--out", under],
        "tokenizer train --out": ["tokenizer", "train", "--input", corpus, "--out", under],
        "plot --out": ["plot", tmp_path, "--out", under],
        "quickstart --out": ["quickstart", "--out", under],
        "demo --out": ["demo", "--out", under],
    }
    for name, argv in cases.items():
        assert main([str(a) for a in argv]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:"), (name, err)
        assert "is a directory" in err[0] or f"{blocker} is a file" in err[0], (name, err)


def test_importing_the_package_loads_nothing_heavy_and_exports_the_public_names():
    code = (
        "import sys, clozeformer; heavy = [m for m in ('torch', 'tokenizers', 'numpy') if m in sys.modules]; "
        "assert not heavy, heavy; "
        "from clozeformer import Tokenizer, pipeline, BertConfig, BertForMaskedLM, ClozeformerError; "
        "assert Tokenizer.__module__ == 'clozeformer.modeling.tokenizer' and callable(pipeline); print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_old_flag_names_still_work_for_one_release(tmp_path, capsys):
    """One name per concept (--max-length, --threads, --dtype, --out, --max-question-length,
    --max-answer-length); the old names are hidden aliases that say what they became, in flags,
    config files and a fine-tuned model's saved settings alike."""
    import argparse

    from clozeformer.commands.flags import add_config_args, config_from_args
    from clozeformer.tasks.loading import inherited_values
    from clozeformer.tasks.task_config import FinetuneConfig
    from clozeformer.train.pretrain_config import PretrainConfig

    parser = argparse.ArgumentParser()
    add_config_args(parser, FinetuneConfig)
    args = parser.parse_args(["--max-seq-len", "64", "--precision", "fp32", "--max-query-len", "9", "--max-answer-len", "7"])
    cfg = config_from_args(FinetuneConfig, args)
    assert (cfg.max_length, cfg.dtype, cfg.max_question_length, cfg.max_answer_length) == (64, "fp32", 9, 7)
    err = capsys.readouterr().err
    assert "note: --max-seq-len is now --max-length" in err and "note: --precision is now --dtype" in err
    assert "--max-seq-len" not in parser.format_help()  # hidden
    parser = argparse.ArgumentParser()
    add_config_args(parser, PretrainConfig)
    conf = tmp_path / "c.json"
    conf.write_text(json.dumps({"num_threads": 2, "precision": "fp32"}))  # an old config file
    cfg = config_from_args(
        PretrainConfig,
        parser.parse_args(["--config", str(conf), "--data", "d", "--out", str(tmp_path / "o"), "--max-steps", "1"]),
    )
    assert (cfg.threads, cfg.dtype) == (2, "fp32")
    model = tmp_path / "m"
    model.mkdir()
    (model / "finetune_config.json").write_text(json.dumps({"task": "sst2", "max_seq_len": 48, "max_query_len": 20}))
    assert inherited_values(str(model)) == {"task": "sst2", "max_length": 48, "max_question_length": 20}
    assert main(["prepare", "--seq-len", "4", "--input", "x", "--tokenizer", "t", "--out", str(tmp_path / "p")]) == 2
    assert "--max-length 4: must be between 8 and 65535" in capsys.readouterr().err
