"""Hugging Face Hub model ids, offline: a cache in the Hub's own layout (refs/main -> snapshots/<sha>)
in a temporary HF_HOME, proved readable by transformers (the positive control), then resolved by
every verb family. Nothing here touches the network: HF_HUB_OFFLINE=1 throughout, and the online
failures (unknown, gated, missing revision) come from a stand-in for huggingface_hub's download."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from synthetic import prepare_data, write_corpus

from clozeformer import hub
from clozeformer.commands.cli import main as cli_main
from clozeformer.modeling.bert import BertForMaskedLM
from clozeformer.modeling.config import BertConfig
from clozeformer.modeling.tokenizer import Tokenizer
from clozeformer.utils.errors import ClozeformerError

pytest.importorskip("huggingface_hub")

REPO = "testorg/tiny-bert"
SHA = "0123456789abcdef0123456789abcdef01234567"


def hub_cache(home: Path, repo: str, files: Path) -> Path:
    """Put the files of `files` into HF_HOME/hub as huggingface_hub lays out a downloaded repo."""
    storage = home / "hub" / ("models--" + repo.replace("/", "--"))
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "main").write_text(SHA)
    shutil.copytree(files, storage / "snapshots" / SHA)
    return storage / "snapshots" / SHA


@pytest.fixture(scope="module")
def model_files(tmp_path_factory, infer_tok) -> Path:
    root = tmp_path_factory.mktemp("hub_model")
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig.preset("tiny", vocab_size=infer_tok.vocab_size))
    model.save_pretrained(root / "model")
    infer_tok.save(root / "model")
    return root / "model"


@pytest.fixture
def offline_hub(tmp_path, model_files, monkeypatch) -> Path:
    home = tmp_path / "hf"
    hub_cache(home, REPO, model_files)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # a local directory named like the id would win
    return home


def test_transformers_reads_the_test_cache(offline_hub):
    """Positive control: the layout built here is one transformers itself resolves, offline."""
    pytest.importorskip("transformers")
    code = (
        "from transformers import AutoModelForMaskedLM, AutoTokenizer\n"
        f"m = AutoModelForMaskedLM.from_pretrained({REPO!r}); t = AutoTokenizer.from_pretrained({REPO!r})\n"
        "print(type(m).__name__, len(t))"
    )
    env = dict(os.environ, HF_HOME=str(offline_hub), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["BertForMaskedLM", str(Tokenizer.from_pretrained(REPO).vocab_size)]


def test_ids_resolve_to_the_cached_snapshot(offline_hub, model_files):
    snap = hub.model_dir(REPO)
    assert snap.name == SHA and (snap / "model.safetensors").is_file()
    assert hub.model_dir(f"{REPO}@main") == snap
    a, b = BertForMaskedLM.from_pretrained(REPO), BertForMaskedLM.from_pretrained(model_files)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert Tokenizer.from_pretrained(REPO).vocab == Tokenizer.from_pretrained(model_files).vocab
    # a local directory of the same name wins
    local = Path(REPO)
    shutil.copytree(model_files, local)
    assert hub.model_dir(REPO) == local


def test_hub_id_grammar():
    assert hub.parse_hub_id("bert-base-uncased") == ("bert-base-uncased", None)
    assert hub.parse_hub_id("google-bert/bert-base-chinese@v1.0") == ("google-bert/bert-base-chinese", "v1.0")
    for not_an_id in ("/abs/path", "./rel", "a/b/c", "../up", "x--y/z", "with space", ""):
        assert hub.parse_hub_id(not_an_id) is None, not_an_id


def test_every_verb_family_takes_a_hub_id(offline_hub, tmp_path, capsys, infer_tok):
    assert cli_main(["info", REPO]) == 0
    assert "BertForMaskedLM" in capsys.readouterr().out
    assert cli_main(["fill-mask", "--model", REPO, "--json", "--top-k", "2", "the cat sat on the [MASK] ."]) == 0
    assert len(json.loads(capsys.readouterr().out.strip().splitlines()[-1])["masks"][0]["candidates"]) == 2
    # finetune (a classification head on the Hub model), then predict from the result
    glue = tmp_path / "SST-2"
    glue.mkdir()
    rows = "".join(f"{s}\t{y}\n" for s, y in [("the cat sat .", 1), ("the dog ran .", 0)] * 8)
    for split in ("train", "dev"):
        (glue / f"{split}.tsv").write_text("sentence\tlabel\n" + rows)
    ft = tmp_path / "ft"
    argv = ["finetune", "--task", "sst2", "--data", str(glue), "--model", REPO, "--epochs", "1", "--out", str(ft)]
    assert cli_main(argv) == 0
    assert json.loads((ft / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    card = (ft / "README.md").read_text()  # the model card names the Hub base model and the task
    assert f"base_model: {REPO}" in card and "pipeline_tag: text-classification" in card and "sst2 (" in card
    # a bi-encoder from the Hub model's encoder: a sentence-transformers directory
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("query\tpassage\n" + "".join(f"the {w}\ta {w} sat .\n" for w in ("cat", "dog", "man", "city") * 4))
    emb = tmp_path / "emb"
    argv = ["finetune", "--task", "sentence-embedding", "--data", f"train={pairs}", f"dev={pairs}", "--model", REPO]
    assert cli_main([*argv, "--epochs", "1", "--batch-size", "4", "--out", str(emb)]) == 0
    assert (emb / "modules.json").is_file() and "pipeline_tag: sentence-similarity" in (emb / "README.md").read_text()
    # serve's pipelines
    from clozeformer.infer.server import ServeConfig, build_pipelines

    pytest.importorskip("fastapi")
    pipes = build_pipelines(ServeConfig(model=REPO, tasks=["fill-mask"], threads=1))
    assert pipes["fill-mask"]("a [MASK] .")["masks"][0]["candidates"][0]["token"] in infer_tok.vocab
    # pretrain --init-from a Hub id, on data prepared with its tokenizer
    corpus = tmp_path / "corpus.txt"
    write_corpus(corpus, 60)
    data = prepare_data(corpus, hub.model_dir(REPO), tmp_path / "data")
    run = tmp_path / "run"
    argv = ["pretrain", "--data", str(data), "--init-from", REPO, "--max-steps", "2", "--batch-size", "4", "--out", str(run)]
    assert cli_main(argv) == 0
    assert (run / "checkpoints" / "step-000002" / "model.safetensors").is_file()
    card = (run / "checkpoints" / "step-000002" / "README.md").read_text()
    assert "pipeline_tag: fill-mask" in card and "2 steps" in card and f"initialised from**: {REPO}" in card


def test_hub_failures_are_one_line(offline_hub, monkeypatch, capsys):
    assert cli_main(["info", "testorg/not-cached"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not in the Hub cache" in err and "HF_HUB_OFFLINE is set" in err
    assert cli_main(["fill-mask", "--model", f"{REPO}@no-such-branch", "a [MASK] ."]) == 2
    assert "not in the Hub cache" in capsys.readouterr().err
    assert cli_main(["info", "./missing-dir"]) == 2
    assert "no such model directory (and not a Hugging Face Hub model id)" in capsys.readouterr().err

    import httpx
    import huggingface_hub
    from huggingface_hub import errors

    response = httpx.Response(404, request=httpx.Request("GET", "https://huggingface.co/api/models/x"))
    for exc, message in (
        (errors.RepositoryNotFoundError("404", response=response), "no such model on the Hugging Face Hub"),
        (errors.GatedRepoError("403", response=response), "a gated model on the Hugging Face Hub"),
        (errors.RevisionNotFoundError("404", response=response), "has no revision"),
    ):

        def fail(*args, exc=exc, **kwargs):
            raise exc

        monkeypatch.setattr(huggingface_hub, "snapshot_download", fail)
        hub._snapshot.cache_clear()
        with pytest.raises(ClozeformerError, match=message):
            hub.model_dir("someorg/some-model@v2")


def test_a_directory_with_only_tokenizer_json_matches_autotokenizer(tmp_path, model_files):
    """Many Hub models ship tokenizer.json and no vocab.txt: same ids as transformers' AutoTokenizer."""
    transformers = pytest.importorskip("transformers")
    ref = transformers.BertTokenizerFast.from_pretrained(model_files)
    assert len(ref) == Tokenizer.from_pretrained(model_files).vocab_size  # the reference read the vocab
    only_json = tmp_path / "only-json"
    ref.save_pretrained(only_json)
    (only_json / "vocab.txt").unlink(missing_ok=True)
    assert (only_json / "tokenizer.json").is_file()
    ours = Tokenizer.from_pretrained(only_json)
    auto = transformers.AutoTokenizer.from_pretrained(only_json)
    for text in ("The cat sat on the mat.", "Héllo wörld, 我昨天去了北京!", "unaffable [MASK] tokens"):
        assert ours.encode(text).input_ids == auto(text)["input_ids"], text
    spec = json.loads((only_json / "tokenizer.json").read_text())
    spec["model"]["type"] = "BPE"
    (only_json / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ClozeformerError, match="'BPE' tokenizer; clozeformer reads BERT's WordPiece"):
        Tokenizer.from_pretrained(only_json)


def test_push_uploads_the_model_files_and_a_card_in_one_commit(model_files, tmp_path, monkeypatch, capsys):
    """`clozeformer push` against a stand-in for the Hub API: which files, which repo, which card."""
    huggingface_hub = pytest.importorskip("huggingface_hub")
    calls: dict = {}

    class Commit:
        commit_url = "https://huggingface.co/me/tiny/commit/abc"

    def create_repo(self, repo_id, private=False, exist_ok=False, **kw):
        calls["repo"] = (repo_id, private, exist_ok)

    def create_commit(self, repo_id, operations, commit_message, revision=None, **kw):
        calls["commit"] = {op.path_in_repo: op.path_or_fileobj for op in operations}
        calls["revision"] = revision
        return Commit()

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "create_commit", create_commit)
    model = tmp_path / "model"
    shutil.copytree(model_files, model)
    (model / "optimizer.pt").write_bytes(b"training state stays home")
    (model / ".clozeformer.json").write_text("{}")
    assert cli_main(["push", "--model", str(model), "--repo", "me/tiny", "--private"]) == 0
    assert calls["repo"] == ("me/tiny", True, True) and calls["revision"] is None
    assert sorted(calls["commit"]) == ["README.md", "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    card = calls["commit"]["README.md"].decode()
    assert "pipeline_tag: fill-mask" in card and "# me/tiny" in card
    assert "commit/abc" in capsys.readouterr().out
    # a directory's own README.md (the card finetune/pretrain write) is uploaded as it is
    (model / "README.md").write_text("# my card\n")
    assert cli_main(["push", "--model", str(model), "--repo", "me/tiny"]) == 0
    assert calls["commit"]["README.md"] == str(model / "README.md")
    # a sentence-transformers directory's pooling files go with it (as loading fetches them)
    (model / "1_Pooling").mkdir()
    for name in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        (model / name).write_text("{}")
    assert cli_main(["push", "--model", str(model), "--repo", "me/tiny"]) == 0
    assert {"modules.json", "sentence_bert_config.json", "1_Pooling/config.json"} <= set(calls["commit"])
    assert cli_main(["push", "--model", str(model), "--repo", "not a repo"]) == 2
    assert "give a Hub repository as org/name" in capsys.readouterr().err
    assert cli_main(["push", "--model", str(tmp_path), "--repo", "me/tiny"]) == 2
    assert "not a model directory" in capsys.readouterr().err
