import json

import pytest

from clozeformer import BertConfig
from clozeformer.modeling.config import PRESETS
from clozeformer.utils.errors import ClozeformerError


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_have_the_published_shapes(name):
    cfg = BertConfig.preset(name)
    layers, hidden, heads = PRESETS[name]
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (layers, hidden, heads)
    assert cfg.intermediate_size == 4 * hidden
    assert cfg.head_dim * cfg.num_attention_heads == hidden


def test_preset_sizes_match_the_issue():
    assert PRESETS["tiny"] == (2, 128, 2)
    assert PRESETS["mini"] == (4, 256, 4)
    assert PRESETS["small"] == (4, 512, 8)
    assert PRESETS["medium"] == (8, 512, 8)
    assert PRESETS["base"] == (12, 768, 12)
    assert PRESETS["large"] == (24, 1024, 16)


def test_validation_errors_are_clear():
    with pytest.raises(ClozeformerError, match="not divisible by num_attention_heads"):
        BertConfig(hidden_size=100, num_attention_heads=3)
    with pytest.raises(ClozeformerError, match="unknown hidden_act 'mish'"):
        BertConfig(hidden_act="mish")
    with pytest.raises(ClozeformerError, match="unknown model preset 'huge'"):
        BertConfig.preset("huge")
    with pytest.raises(ClozeformerError, match="position_embedding_type"):
        BertConfig(position_embedding_type="relative_key")


def test_hf_config_json_round_trip(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = BertConfig.preset("tiny", vocab_size=1000, id2label={0: "neg", 1: "pos"}, hidden_act="gelu_new")
    cfg.save_pretrained(tmp_path)
    hf = transformers.AutoConfig.from_pretrained(tmp_path)
    assert hf.model_type == "bert"
    assert hf.hidden_size == 128 and hf.num_hidden_layers == 2 and hf.vocab_size == 1000
    assert hf.id2label == {0: "neg", 1: "pos"} and hf.label2id == {"neg": 0, "pos": 1}
    assert hf.hidden_act == "gelu_new"
    hf.save_pretrained(tmp_path / "back")
    back = BertConfig.from_pretrained(tmp_path / "back")
    assert back.id2label == {0: "neg", 1: "pos"} and back.hidden_size == 128
    assert "transformers_version" in back.extra  # unknown keys survive the round trip
    again = json.loads(back.to_json_string())
    assert again["transformers_version"] == back.extra["transformers_version"]


def test_bad_config_files(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{not json", encoding="utf-8")
    with pytest.raises(ClozeformerError, match="config.json: not valid JSON"):
        BertConfig.from_json_file(p)
    p.write_text(json.dumps({"model_type": "gpt2"}), encoding="utf-8")
    with pytest.raises(ClozeformerError, match="model_type 'gpt2' is not a BERT model"):
        BertConfig.from_json_file(p)
    p.write_text(json.dumps({"model_type": "bert", "hidden_size": 30, "num_attention_heads": 4}))
    with pytest.raises(ClozeformerError, match=r"config.json: .*not divisible"):
        BertConfig.from_json_file(p)


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("layer_norm_eps", "tiny", "layer_norm_eps must be a number"),
        ("hidden_dropout_prob", "0.1", "hidden_dropout_prob must be a number"),
        ("num_labels", "two", "num_labels must be an integer"),
        ("vocab_size", 12.5, "vocab_size must be an integer"),
        ("num_hidden_layers", True, "num_hidden_layers must be an integer"),
        ("hidden_act", 3, "hidden_act must be a string"),
        ("architectures", [{}], "architectures must be a list of class names"),
        ("id2label", ["neg", "pos"], "id2label must be an object"),
        ("id2label", {"zero": "neg"}, "id2label must be an object with integer keys"),
        ("id2label", {"0": ["a"]}, "id2label must be an object of label strings"),
        ("label2id", {"neg": "0"}, "label2id must be an object of integer ids"),
    ],
)
def test_config_json_with_wrong_types_names_the_field(tmp_path, field, value, expected):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "bert", "hidden_size": 32, "num_attention_heads": 2, field: value}))
    with pytest.raises(ClozeformerError, match=f"config.json: invalid BertConfig: {expected}"):
        BertConfig.from_json_file(p)


def test_flags_and_config_file_values_are_type_checked(tmp_path, capsys):
    from clozeformer.commands.cli import main as cli_main

    base = ["pretrain", "--data", str(tmp_path), "--out", str(tmp_path / "r"), "--max-steps", "1"]
    for flag, value in (("--lr", "nan"), ("--lr", "inf"), ("--max-time", "-inf"), ("--seed", "1e20")):
        with pytest.raises(SystemExit) as e:  # argparse: usage + one `error:` line, exit 2
            cli_main(base + [flag, value])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"argument {flag}" in err and "Traceback" not in err
    for key, value, expected in (
        ("lr", "fast", "lr must be a finite number"),
        ("max_steps", 2.7, "max_steps must be an integer"),
        ("objective", "gpt", "objective must be one of 'mlm', 'mlm_nsp', 'electra', 'clm'"),
        ("progress", "yes", "progress must be true or false"),
    ):
        cfg_file = tmp_path / "run.json"
        cfg_file.write_text(json.dumps({key: value}))
        assert cli_main(base + ["--config", str(cfg_file)]) == 2
        err = capsys.readouterr().err
        assert f"error: config file: {expected}, got {value!r}" in err and err.count("\n") == 1, err


def test_seed_bounds_for_flags_and_config_files(tmp_path, capsys):
    """Every seed is checked at the boundary (NumPy takes 32 bits): -1 or 1e20 is one error line,
    from a flag or from a --config file, before any work."""
    from clozeformer.commands.cli import main as cli_main

    cfg_file = tmp_path / "run.json"
    cfg_file.write_text(json.dumps({"seed": -1}))
    for argv in (
        ["finetune", "--task", "sst2", "--model", "tiny", "--seed", "-1"],
        ["pretrain", "--data", str(tmp_path), "--seed", str(2**70)],
        ["pretrain", "--data", str(tmp_path), "--config", str(cfg_file)],
        ["prepare", "--input", "x", "--tokenizer", "y", "--out", str(tmp_path / "o"), "--seed", "-5"],
    ):
        assert cli_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: --seed must be in [0, 4294967295]") and err.count("\n") == 1, err
