"""Property-based fuzzing of the boundaries (hypothesis): whatever a user writes in a config.json,
a flag or a task file, clozeformer either accepts it or answers one `error:` line (exit 2),
never a traceback. Bounded: a few hundred cases per property, no training."""

from __future__ import annotations

import json

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clozeformer.commands.cli import main as cli_main  # noqa: E402
from clozeformer.modeling.config import BertConfig  # noqa: E402
from clozeformer.tasks.common import Problems  # noqa: E402
from clozeformer.tasks.spec import get_task  # noqa: E402
from clozeformer.tasks.task_config import TaskDataConfig  # noqa: E402
from clozeformer.utils.errors import ClozeformerError  # noqa: E402

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
CONFIG_KEYS = [
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "layer_norm_eps",
    "max_position_embeddings",
    "type_vocab_size",
    "pad_token_id",
    "position_embedding_type",
    "classifier_pooling",
    "is_decoder",
    "id2label",
    "label2id",
    "num_labels",
    "architectures",
    "model_type",
]
BASE = {"vocab_size": 50, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}


@SETTINGS
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), json_values, max_size=4))
def test_any_config_json_loads_or_is_one_clear_error(changes):
    try:
        BertConfig.from_dict({**BASE, **changes}, "config.json")
    except ClozeformerError as e:
        assert str(e) and "\n" not in str(e)


FLAG_VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1e20", "2.7", "", "fast", "99999999999999999999999"]),
    st.text(alphabet="0123456789.-e", min_size=1, max_size=8),
)


@SETTINGS
@given(
    st.sampled_from(["--lr", "--epochs", "--seed", "--batch-size", "--warmup-ratio", "--max-length", "--dropout", "--report-to"]),
    FLAG_VALUES,
)
def test_any_finetune_flag_value_is_accepted_or_one_error_line(capsys, flag, value):
    """No --data: a value that passes every check still stops at the first missing input, so
    every case ends in exit 2 before any work; argparse's own rejections exit 2 as well."""
    try:
        code = cli_main(["finetune", "--task", "sst2", "--model", "tiny", flag, value])
    except SystemExit as e:  # argparse: usage line + one error line
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert sum("error:" in line for line in err.splitlines()) == 1, err


@SETTINGS
@given(st.lists(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8), max_size=4), max_size=6))
def test_any_task_file_reads_or_is_one_clear_error(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("fuzz") / "rows.tsv"
    path.write_text("sentence\tlabel\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    spec = get_task("sst2", TaskDataConfig(task="sst2"))
    try:
        spec.read(path, Problems(show=0), True)
    except ClozeformerError as e:
        assert str(e) and "\n" not in str(e)
    jsonl = path.with_suffix(".jsonl")
    jsonl.write_text(
        "".join(json.dumps({"text": r[0] if r else "", "label": r[1:] or None}) + "\n" for r in rows), encoding="utf-8"
    )
    try:
        get_task("classification", TaskDataConfig(task="classification")).read(jsonl, Problems(show=0), True)
    except ClozeformerError as e:
        assert str(e) and "\n" not in str(e)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    verb=st.sampled_from(["classify", "embed", "export", "evaluate", "pretrain", "plot", "tokenizer", "prepare"]),
    shape=st.sampled_from(["existing-dir", "under-a-file", "under-a-file-deeper"]),
    name=st.text(alphabet="abc_-.", min_size=1, max_size=6).filter(lambda s: s not in (".", "..")),
)
def test_unwritable_outputs_are_one_error_line(tmp_path_factory, verb, shape, name, capsys):
    """Every verb's output flag, pointed at a directory where a file goes or below a file: one
    `error:` line and exit 2, never a traceback (docs/BAD_INPUT.md)."""
    root = tmp_path_factory.mktemp("out")
    (root / "a-file").write_text("x")
    target = {"existing-dir": root, "under-a-file": root / "a-file" / name, "under-a-file-deeper": root / "a-file" / name / "x"}[
        shape
    ]
    argv = {
        "classify": ["classify", "--model", str(root), "hi", "--out", str(target)],
        "embed": ["embed", "--model", str(root), "hi", "--build-index", str(target)],
        "export": ["export", "--model", str(root), "--onnx", str(target)],
        "evaluate": ["evaluate", "--model", str(root), "--data", str(root), "--out", str(target)],
        "pretrain": ["pretrain", "--data", str(root), "--out", str(target), "--max-steps", "1"],
        "plot": ["plot", str(root), "--out", str(target)],
        "tokenizer": ["tokenizer", "train", "--input", str(root / "a-file"), "--out", str(target)],
        "prepare": ["prepare", "--input", str(root / "a-file"), "--tokenizer", str(root), "--out", str(target)],
    }[verb]
    if shape == "existing-dir" and verb not in ("classify", "export"):
        argv = [a if a != str(target) else str(root / "a-file" / "x") for a in argv]  # a directory flag: use a blocked path
    assert cli_main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "internal error" not in err[0], (argv, err)
