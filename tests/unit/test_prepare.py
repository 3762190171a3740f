"""`prepare`: packed and NSP shards, determinism across workers, splits, static masks, CLI errors."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from synthetic import cli_args

from clozeformer.commands.cli import main as cli_main
from clozeformer.data.manifest import Manifest, SpecialIds
from clozeformer.data.prepare import NspBuilder, PackedBuilder, PrepareConfig, _is_val, _val_threshold, prepare
from clozeformer.modeling.tokenizer import Tokenizer
from clozeformer.utils.errors import ClozeformerError

FIXTURES = Path(__file__).parents[1] / "fixtures"

# A synthetic language: 4-letter words, some with "##ing" / "##ed" pieces, BERT-format documents.
_SYL = [c + v for c in "bdfgklmnprst" for v in "aeiou"]
WORDS = sorted({a + b for a in _SYL for b in _SYL})[::12]
VOCAB = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "##ing", "##ed", *WORDS]


def write_corpus(path: Path, n_docs: int, seed: int = 0) -> list[list[str]]:
    """Write `n_docs` documents in BERT format (gzip'd) and return them."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        sents = []
        for _ in range(rng.choice([1, 2, 3, 5, 6, 8, 10, 12])):
            words = [rng.choice(WORDS) + rng.choice(["", "", "", "ing", "ed"]) for _ in range(rng.randint(2, 7))]
            sents.append(" ".join(words).capitalize() + ".")
        docs.append(sents)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in docs) + "\n")
    return docs


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("prep")
    tok_dir = root / "tok"
    tok_dir.mkdir()
    (tok_dir / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    (tok_dir / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    big = root / "big.txt.gz"
    small = root / "small.txt.gz"
    return {
        "root": root,
        "tok": tok_dir,
        "big": big,
        "big_docs": write_corpus(big, 6000),
        "small": small,
        "small_docs": write_corpus(small, 500, seed=1),
    }


def run(env, out: str, **kw) -> tuple[Path, Manifest]:
    cfg = dict(
        input=[str(env["small"])],
        tokenizer=str(env["tok"]),
        out=str(env["root"] / out),
        max_length=32,
        workers=0,
        min_doc_chars=0,
        val_fraction=0.1,
        progress=False,
    )
    cfg.update(kw)
    manifest = prepare(PrepareConfig(**cfg))
    assert Manifest.read(cfg["out"]) == manifest  # what prepare returns is what it wrote
    return Path(cfg["out"]), manifest


def prepare_all(text: Path, tokenizer: Path, out: Path) -> Manifest:
    """`prepare` into 16-token sequences, every document kept, no validation split."""
    settings = dict(max_length=16, workers=0, min_doc_chars=0, val_fraction=0.0, progress=False)
    return prepare(PrepareConfig(input=[str(text)], tokenizer=str(tokenizer), out=str(out), **settings))


def sequences(data_dir: Path, split: str, key: str = "tokens") -> list[np.ndarray]:
    out = []
    for sh in Manifest.read(data_dir).splits[split].shards:
        toks = np.load(data_dir / getattr(sh, key))
        offs = np.load(data_dir / sh.offsets)
        out.extend(toks[offs[i] : offs[i + 1]] for i in range(len(offs) - 1))
    return out


def doc_ids(tok: Tokenizer, docs: list[list[str]]) -> list[list[list[int]]]:
    return [[e.input_ids for e in tok.encode_batch(d, add_special_tokens=False)] for d in docs]


# ----------------------------------------------------------------------------- builders
def _arr(*x):
    return np.array(x, dtype=np.uint32)


def test_packed_builder_exact():
    b = PackedBuilder(seq_len=8, cls_id=1, sep_id=2)  # room for 6 tokens between [CLS] and [SEP]
    out = list(b.add_document([_arr(10, 11), _arr(12, 13, 14)]))
    out += b.add_document([_arr(20), _arr(21, 22, 23)])  # no room for the boundary [SEP]: new sequence
    out += b.add_document([_arr(30, 31, 32, 33, 34, 35, 36, 37, 38)])  # [SEP] joins documents; too long: cut
    out += b.finish()
    assert [o.tokens.tolist() for o in out] == [
        [1, 10, 11, 12, 13, 14, 2],
        [1, 20, 21, 22, 23, 2, 30, 2],
        [1, 31, 32, 33, 34, 35, 36, 2],
        [1, 37, 38, 2],
    ]
    b = PackedBuilder(seq_len=8, cls_id=1, sep_id=2)
    out = list(b.add_document([_arr(10, 11, 12, 13), _arr(14, 15, 16)])) + list(b.finish())
    assert [o.tokens.tolist() for o in out] == [[1, 10, 11, 12, 13, 2], [1, 14, 15, 16, 2]]  # whole sentences move


def test_nsp_builder_pairs_come_from_the_right_documents():
    rng = random.Random(0)
    b = NspBuilder(seq_len=24, cls_id=1, sep_id=2, rng=rng, short_seq_prob=0.1, pool_tokens=10_000)
    instances = []
    for d in range(2000):
        # Document d: sentences of 2..6 tokens with ids d*1000 + running position, so order is visible.
        lens = [rng.randint(2, 6) for _ in range(rng.randint(1, 9))]
        flat = np.arange(sum(lens), dtype=np.uint32) + 1000 * (d + 1)
        doc = np.split(flat, np.cumsum(lens)[:-1])
        for inst in b.add_document(doc):
            instances.append((d, inst))
    labels = np.array([inst.nsp_label for _, inst in instances])
    assert len(instances) > 3000 and abs(labels.mean() - 0.5) < 0.04
    for d, inst in instances:
        t = inst.tokens.astype(np.int64)
        assert t[0] == 1 and t[-1] == 2 and t[inst.b_start - 1] == 2 and len(t) <= 24
        a, bb = t[1 : inst.b_start - 1], t[inst.b_start : -1]
        assert len(a) >= 1 and len(bb) >= 1 and (t[1:-1] != 2).sum() == len(t) - 3
        assert (a // 1000 == d + 1).all()  # A always from the current document, in order
        assert (np.diff(a) == 1).all()
        if inst.nsp_label == 0:
            assert (bb // 1000 == d + 1).all() and bb[0] > a[-1]  # B follows A in the same document
        else:
            assert (bb // 1000 != d + 1).all() or d == 0  # B from another document


def test_nsp_short_seq_prob():
    def short_fraction(p: float) -> float:
        rng = random.Random(1)
        b = NspBuilder(seq_len=64, cls_id=1, sep_id=2, rng=rng, short_seq_prob=p, pool_tokens=100_000)
        lengths = []
        for _d in range(60):  # long documents, so document ends rarely cut a pair short
            lens = [rng.randint(3, 12) for _ in range(80)]
            doc = np.split(np.arange(sum(lens), dtype=np.uint32) + 10, np.cumsum(lens)[:-1])
            lengths += [len(i.tokens) for i in b.add_document(doc)]
        return float(np.mean(np.array(lengths) < 48))

    assert short_fraction(0.0) < 0.1
    assert 0.15 < short_fraction(0.2) < 0.45


# ----------------------------------------------------------------------------- prepare end to end
def test_packed_keeps_every_token_in_order(env):
    out, m = run(env, "packed")
    tok = Tokenizer.from_pretrained(env["tok"])
    assert m.mode == "packed" and m.seq_len == 32 and m.vocab_size == len(VOCAB)
    assert m.token_dtype == "uint16" and m.special_ids == SpecialIds(pad=0, unk=3, cls=4, sep=5, mask=6)
    assert m.tokenizer.hash == tok.fingerprint
    assert (out / "tokenizer" / "vocab.txt").read_text() == (env["tok"] / "vocab.txt").read_text()
    assert json.loads((out / "tokenizer" / "tokenizer_config.json").read_text())["do_lower_case"] is True
    assert json.loads((out / "prepare_config.json").read_text())["max_length"] == 32
    ids = doc_ids(tok, env["small_docs"])
    threshold = _val_threshold(0.1)
    from clozeformer.data.readers import Document

    is_val = [_is_val(Document(d, True, "").digest(), 12345, threshold) for d in env["small_docs"]]
    assert 0.05 < np.mean(is_val) < 0.15
    for split, flag in (("train", False), ("val", True)):
        seqs = sequences(out, split)
        assert len(seqs) == m.splits[split].num_sequences and sum(map(len, seqs)) == m.splits[split].num_tokens
        assert all(s[0] == 4 and s[-1] == 5 and len(s) <= 32 for s in seqs)
        assert all(s[1] != 5 and s[-2] != 5 for s in seqs if len(s) > 2)  # no dangling boundary [SEP]
        got = np.concatenate([s[1:-1] for s in seqs])
        got = got[got != 5]
        want = np.concatenate([np.array(x, dtype=np.int64) for d, v in zip(ids, is_val) if v == flag for x in d])
        assert np.array_equal(got, want)  # nothing lost, nothing reordered
    assert m.documents.train + m.documents.val == len(env["small_docs"])
    assert m.splits["train"].mean_length > 25  # packed sequences are nearly full


def test_nsp_mode_labels_and_structure(env):
    out, m = run(env, "nsp", input=[str(env["big"])], mode="nsp", val_fraction=0.01)
    assert m.mode == "nsp" and m.num_train > 9000
    nsp = np.concatenate([np.load(out / sh.nsp) for sh in m.splits["train"].shards])
    b_start = np.concatenate([np.load(out / sh.b_start) for sh in m.splits["train"].shards])
    assert abs(nsp.mean() - 0.5) < 0.02 and m.splits["train"].random_next_fraction == pytest.approx(nsp.mean())
    seqs = sequences(out, "train")
    for s, bs in zip(seqs[:3000], b_start[:3000]):
        assert s[0] == 4 and s[-1] == 5 and s[bs - 1] == 5 and len(s) <= 32
        assert (s[1:-1] == 5).sum() == 1  # exactly [CLS] A [SEP] B [SEP]
    lengths = np.array([len(s) for s in seqs])
    assert 0.05 < np.mean(lengths < 24) < 0.4  # short_seq_prob=0.1 targets + document ends


def test_same_seed_same_bytes_whatever_the_workers(env):
    outs = [run(env, f"det{w}", workers=w, mode="nsp", shard_tokens=4000)[0] for w in (0, 1, 2)]
    files = sorted(p.name for p in outs[0].iterdir() if p.suffix == ".npy")
    assert len(files) > 8  # several shards per split
    for other in outs[1:]:
        assert sorted(p.name for p in other.iterdir() if p.suffix == ".npy") == files
        for name in files + ["manifest.json"]:
            assert (outs[0] / name).read_bytes() == (other / name).read_bytes(), name
    changed, _ = run(env, "det_seed", seed=7, mode="nsp", shard_tokens=4000)
    assert (changed / "train-00000.tokens.npy").read_bytes() != (outs[0] / "train-00000.tokens.npy").read_bytes()


def test_static_masking_with_dupe_factor(env):
    out1, m1 = run(env, "nodupe", val_fraction=0.0)
    out, m = run(env, "static", val_fraction=0.0, static_masking=True, dupe_factor=3, max_predictions=4)
    assert m.static_masking is True and m.num_train == 3 * m1.num_train and m.num_val == 0
    seqs, labels = sequences(out, "train"), sequences(out, "train", "labels")
    plain = sequences(out1, "train")
    for i in range(0, 60):
        copies = [seqs[3 * i + k] for k in range(3)]
        labs = [labels[3 * i + k] for k in range(3)]
        orig = plain[i]
        for c, lab in zip(copies, labs):
            chosen = lab != -100
            n = int(((orig != 4) & (orig != 5)).sum())
            assert chosen.sum() == min(4, max(1, round(n * 0.15)))
            assert np.array_equal(lab[chosen], orig[chosen]) and np.array_equal(c[~chosen], orig[~chosen])
        assert not all(np.array_equal(labs[0], x) for x in labs[1:])  # each copy masked differently


def test_uint32_for_large_vocabs(tmp_path, env):
    tok_dir = tmp_path / "bigtok"
    tok_dir.mkdir()
    extra = [f"x{i}" for i in range(70_000 - len(VOCAB))]
    (tok_dir / "vocab.txt").write_text("\n".join(VOCAB + extra) + "\n")
    text = tmp_path / "t.txt"
    text.write_text("x69000 x10 bala.\nx5 x6.\n\nx7 x65600.\n")
    m = prepare_all(text, tok_dir, tmp_path / "o")
    assert m.token_dtype == "uint32"
    seq = sequences(tmp_path / "o", "train")[0]
    ids = (len(VOCAB) + 69000, len(VOCAB) + 65600)  # ids past 65,535 survive
    assert seq.dtype == np.uint32 and all(i in seq.tolist() for i in ids)


def test_all_formats_through_prepare(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    for p in FIXTURES.glob("corpus_*"):
        shutil.copy(p, corpus / p.name)
    shutil.copy(FIXTURES / "tok_vocab.txt", tmp_path / "vocab.txt")
    m = prepare_all(corpus, tmp_path / "vocab.txt", tmp_path / "o")
    assert m.reader.formats == {"bert": 1, "jsonl": 1, "lines": 1, "paragraph": 1, "wikiextractor": 1, "wikitext": 1}
    assert m.num_train > 5 and m.documents.train == m.reader.kept == 12


# ----------------------------------------------------------------------------- CLI and bad input
def test_cli_prepare_and_flags(env, capsys):
    out = env["root"] / "cli"
    argv = cli_args("prepare", input=env["small"], tokenizer=env["tok"], out=out, max_length=32, nsp=True, workers=0)
    rc = cli_main(argv + cli_args(min_doc_chars=0, val_fraction=0.2, seed=3, no_progress=True))
    assert rc == 0
    text = capsys.readouterr().out
    assert "== PrepareConfig ==" in text and "mode" in text and "wrote" in text
    m = Manifest.read(out)
    assert m.mode == "nsp" and m.settings["seed"] == 3 and m.num_val > 0


@pytest.mark.parametrize(
    "setup,args,message",
    [
        (None, ["--input", "{tmp}/missing.txt"], "missing.txt: no such file or directory"),
        ("empty", ["--input", "{tmp}/empty.txt"], "empty.txt: file is empty"),
        ("binary", ["--input", "{tmp}/data.bin"], "data.bin: looks like a binary file"),
        ("short", ["--input", "{tmp}/short.txt", "--min-doc-chars", "1000"], "no documents left after reading and filtering"),
        ("short", ["--input", "{tmp}/short.txt", "--dupe-factor", "3"], "--dupe-factor only makes sense with --static-masking"),
        ("short", ["--input", "{tmp}/short.txt", "--val-fraction", "1.5"], "--val-fraction 1.5"),
        ("short", ["--input", "{tmp}/short.txt", "--tokenizer", "{tmp}"], "no vocab.txt or tokenizer.json in this directory"),
    ],
)
def test_cli_bad_input(env, tmp_path, capsys, setup, args, message):
    if setup == "empty":
        (tmp_path / "empty.txt").write_text("")
    elif setup == "binary":
        (tmp_path / "data.bin").write_bytes(bytes(range(256)) * 8)
    elif setup == "short":
        (tmp_path / "short.txt").write_text("A short doc.\n")
    argv = ["prepare", "--tokenizer", str(env["tok"]), "--out", str(tmp_path / "out"), "--workers", "0", "--no-progress"] + [
        a.format(tmp=tmp_path) for a in args
    ]
    rc = cli_main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and message in err, err
    assert len(err.strip().splitlines()) <= 2  # one clear line (plus the tokenizer's casing note at most)
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_config_validation():
    with pytest.raises(ClozeformerError, match="--input"):
        PrepareConfig(tokenizer="t", out="o")
    with pytest.raises(ClozeformerError, match="--max-length"):
        PrepareConfig(input=["x"], tokenizer="t", out="o", max_length=4)


def test_a_worker_whose_parent_died_while_it_started_ends_itself():
    """The race PR_SET_PDEATHSIG leaves open: the parent dies before the child asks for the signal.
    die_with_parent(parent=...) notices the re-parenting and ends the child at once."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signals are Linux's")
    code = (
        "import os, signal; from clozeformer.utils.procs import die_with_parent\n"
        "die_with_parent(signal.SIGKILL, parent=os.getppid() + 1_000_000)  # not our parent: it 'died'\n"
        "print('still alive')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == -9 and "still alive" not in out.stdout
    ok = subprocess.run([sys.executable, "-c", code.replace(" + 1_000_000", "")], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "still alive" in ok.stdout
