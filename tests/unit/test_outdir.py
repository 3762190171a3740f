"""Nothing the user owns is lost: one rule for every verb that writes a directory.

Missing or empty target: written. Non-empty: refused with one `error:` line unless --overwrite,
and --overwrite replaces only a directory clozeformer wrote. A killed writer leaves nothing a
later run trusts: stale temporaries are removed, and an unfinished fine-tune is not a model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from synthetic import train_tokenizer, write_corpus

from clozeformer.commands.cli import main as cli_main
from clozeformer.modeling.bert import BertModel
from clozeformer.modeling.config import BertConfig
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import OWNER_FILE, atomic_dir, check_complete, check_output_dir, mark_owned


def user_dir(root: Path) -> Path:
    """A directory full of the user's own things."""
    d = root / "mine"
    (d / "sub").mkdir(parents=True)
    (d / "thesis.tex").write_text("years of work", encoding="utf-8")
    (d / "sub" / "notes.txt").write_text("more", encoding="utf-8")
    return d


def intact(d: Path) -> bool:
    return (d / "thesis.tex").read_text() == "years of work" and (d / "sub" / "notes.txt").read_text() == "more"


def test_the_rule(tmp_path):
    assert check_output_dir(tmp_path / "new", False) == tmp_path / "new"
    (tmp_path / "empty").mkdir()
    check_output_dir(tmp_path / "empty", False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ClozeformerError, match="exists and is not a directory"):
        check_output_dir(tmp_path / "file", True)
    mine = user_dir(tmp_path)
    with pytest.raises(ClozeformerError, match="not empty.*--overwrite"):
        check_output_dir(mine, False)
    with pytest.raises(ClozeformerError, match="not written by clozeformer"):
        check_output_dir(mine, True)
    ours = tmp_path / "ours"
    ours.mkdir()
    mark_owned(ours, "prepare")
    with pytest.raises(ClozeformerError, match="not empty"):
        check_output_dir(ours, False)
    check_output_dir(ours, True)


def test_atomic_dir_marks_and_cleans_leftovers_of_a_killed_run(tmp_path, capsys):
    target = tmp_path / "data"
    stale = tmp_path / ".data.abc123.tmp"  # what a SIGKILLed writer leaves
    stale.mkdir()
    (stale / "shard_000.bin").write_bytes(b"x" * 100)
    unrelated = tmp_path / ".database.x.tmp"  # another target's: not ours to touch
    unrelated.mkdir()
    with atomic_dir(target, owner="prepare") as tmp:
        (tmp / "a.txt").write_text("a")
    assert not stale.exists() and unrelated.exists()
    assert "removed" in capsys.readouterr().err
    assert json.loads((target / OWNER_FILE).read_text())["written_by"] == "clozeformer prepare"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".database.x.tmp", "data"]


def test_unfinished_writer_is_not_a_model(tmp_path):
    d = tmp_path / "m"
    torch.manual_seed(0)
    BertModel(
        BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    ).save_pretrained(d)
    check_complete(d)  # no marker: an ordinary HF directory
    BertModel.from_pretrained(d)
    mark_owned(d, "finetune", complete=False)
    with pytest.raises(ClozeformerError, match="unfinished `clozeformer finetune` run"):
        BertModel.from_pretrained(d)
    mark_owned(d, "finetune")
    BertModel.from_pretrained(d)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("outdir")
    write_corpus(root / "corpus.txt", 120)
    train_tokenizer(root / "corpus.txt", root / "tok", vocab_size=100)
    return root


def verbs(corpus: Path, out: Path) -> dict[str, list[str]]:
    text = str(corpus / "corpus.txt")
    return {
        "prepare": [
            "prepare",
            "--input",
            text,
            "--tokenizer",
            str(corpus / "tok"),
            "--max-length",
            "32",
            "--no-progress",
            "--out",
            str(out),
        ],
        "tokenizer train": [
            "tokenizer",
            "train",
            "--input",
            text,
            "--vocab-size",
            "100",
            "--num-unused",
            "0",
            "--no-progress",
            "--out",
            str(out),
        ],
        "demo": ["demo", "--vocab-size", "100", "--out", str(out)],
    }


@pytest.mark.parametrize("verb", ["prepare", "tokenizer train", "demo"])
def test_verbs_refuse_user_directories_and_replace_their_own(corpus, tmp_path, capsys, verb):
    mine = user_dir(tmp_path)
    for extra in ([], ["--overwrite"]):
        assert cli_main(verbs(corpus, mine)[verb] + extra) == 2
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and str(mine) in err and "Traceback" not in err, err
        assert intact(mine) and sorted(p.name for p in mine.iterdir()) == ["sub", "thesis.tex"]
    out = tmp_path / "out"
    assert cli_main(verbs(corpus, out)[verb]) == 0
    assert (out / OWNER_FILE).is_file()
    capsys.readouterr()
    assert cli_main(verbs(corpus, out)[verb]) == 2  # its own output, but no --overwrite
    assert "--overwrite" in capsys.readouterr().err
    assert cli_main(verbs(corpus, out)[verb] + ["--overwrite"]) == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left behind


def test_embed_build_index_refuses_a_model_directory(corpus, tmp_path, capsys, infer_tok):
    from clozeformer.modeling.bert import BertModel

    model_dir = tmp_path / "model"
    torch.manual_seed(0)
    BertModel(
        BertConfig(vocab_size=220, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    ).save_pretrained(model_dir)
    infer_tok.save(model_dir)
    before = {p.name: p.read_bytes() for p in model_dir.iterdir()}
    texts = tmp_path / "texts.txt"
    texts.write_text("good movie\nthe cat sat\n", encoding="utf-8")
    cmd = ["embed", "--model", str(model_dir), "--input", str(texts), "--no-progress", "--build-index"]
    # pointing the index at the model itself: refused, with or without --overwrite; the model survives
    for extra in ([], ["--overwrite"]):
        assert cli_main([*cmd, str(model_dir), *extra]) == 2
        assert capsys.readouterr().err.count("error:") == 1
    assert {p.name: p.read_bytes() for p in model_dir.iterdir()} == before
    assert cli_main([*cmd, str(tmp_path / "idx")]) == 0
    assert cli_main([*cmd, str(tmp_path / "idx"), "--overwrite"]) == 0
    assert (tmp_path / "idx" / OWNER_FILE).is_file()
