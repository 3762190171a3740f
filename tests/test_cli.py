"""The CLI shell: help, version, the demo round trip, one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clozeformer import __version__
from clozeformer.cli import COMMANDS, main
from clozeformer.config import BertConfig
from clozeformer.model import BertForSequenceClassification


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
    import clozeformer.info as info

    def boom(args):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(info, "main", boom)
    assert main(["info", "anything"]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: simulated bug" in err and "internal error in `clozeformer info`" in err
    assert "please report it" in err.splitlines()[-1]
