import json

import pytest

from clozeformer import BertConfig
from clozeformer.config import PRESETS
from clozeformer.errors import ClozeformerError


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
