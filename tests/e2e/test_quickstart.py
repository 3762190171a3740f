"""End-to-end smoke run of `clozeformer quickstart` on the bundled corpus (seconds-long budgets)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e  # subprocesses, kills, servers: the full suite, not the fast one


@pytest.mark.slow
def test_quickstart_runs_end_to_end_and_writes_only_under_out(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = tmp_path / "qs"
    env = dict(os.environ, HOME=str(tmp_path / "home"), OMP_NUM_THREADS="2")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "clozeformer",
            "quickstart",
            "--out",
            str(out),
            "--minutes",
            "0.15",
            "--finetune-minutes",
            "0.1",
            "--vocab-size",
            "6000",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "cloze test with a random" in r.stdout and "from pretrained: dev accuracy" in r.stdout
    assert "from scratch: dev accuracy" in r.stdout
    report = (out / "report.md").read_text(encoding="utf-8")
    for section in ("## Pretraining", "## Cloze test", "## Fine-tuning on QNLI", "齐天大"):
        assert section in report
    for png in ("loss.png", "mlm_accuracy.png", "finetune.png"):
        assert (out / png).stat().st_size > 1000
    assert (out / "tokenizer" / "vocab.txt").is_file() and (out / "data" / "manifest.json").is_file()
    assert list(cwd.iterdir()) == []  # nothing outside --out (the cwd stays empty)
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*"))


def test_quickstart_without_matplotlib_fails_before_any_work(tmp_path, monkeypatch, capsys):
    import importlib.util

    from clozeformer.commands.cli import main as cli_main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert cli_main(["quickstart", "--out", str(tmp_path / "qs")]) == 2
    assert "pip install 'clozeformer[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "qs").exists()  # nothing was done


def test_quickstart_refuses_a_directory_it_did_not_write(tmp_path, capsys):
    from clozeformer.commands.cli import main as cli_main

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        assert cli_main(["quickstart", "--out", str(mine), *extra]) == 2
        assert capsys.readouterr().err.count("error:") == 1
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
