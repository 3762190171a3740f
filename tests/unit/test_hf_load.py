"""Loading real-world checkpoint variants, and clear errors for bad ones."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from safetensors.torch import load_file, save_file

import clozeformer.modeling.bert as M
from clozeformer.modeling.config import BertConfig
from clozeformer.modeling.hf_format import HEAD_KEY_MAP, LAYER_KEY_MAP, from_hf_key, hf_state_dict, to_hf_key
from clozeformer.utils.errors import ClozeformerError


def saved_pretraining(tmp_path, **kw):
    torch.manual_seed(0)
    model = M.BertForPreTraining(BertConfig.preset("tiny", vocab_size=120, **kw)).eval()
    model.save_pretrained(tmp_path)
    return model


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return all(torch.equal(sa[k], sb[k]) for k in sa if k in sb)


def test_key_map_round_trips_every_parameter():
    model = M.BertForPreTraining(BertConfig.preset("tiny", vocab_size=50))
    for key in model.state_dict():
        hf = to_hf_key(key)
        rel = hf[len("bert.") :] if hf.startswith("bert.") else hf
        assert from_hf_key(rel) == (key[len("bert.") :] if key.startswith("bert.") else key)
    assert "attention.self.query." in LAYER_KEY_MAP.values()
    assert HEAD_KEY_MAP["nsp."] == "cls.seq_relationship."


def test_tf_era_names_no_prefix_and_pytorch_bin(tmp_path):
    model = saved_pretraining(tmp_path / "a")
    sd = load_file(str(tmp_path / "a" / "model.safetensors"))
    # Old Google conversions: LayerNorm gamma/beta, a position_ids buffer, decoder.bias copy, .bin file
    old = {}
    for k, v in sd.items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        old[k] = v
    old["bert.embeddings.position_ids"] = torch.arange(512)[None]
    old["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"].clone()
    old["cls.predictions.decoder.weight"] = sd["bert.embeddings.word_embeddings.weight"].clone()
    (tmp_path / "b").mkdir()
    torch.save(old, tmp_path / "b" / "pytorch_model.bin")
    (tmp_path / "b" / "config.json").write_text((tmp_path / "a" / "config.json").read_text())
    loaded = M.BertForPreTraining.from_pretrained(tmp_path / "b")
    assert same_weights(model, loaded) and loaded.loading_info["new"] == []

    # A BertModel checkpoint (no "bert." prefix) loads into a task model; the head is new
    base = {k[len("bert.") :]: v for k, v in sd.items() if k.startswith("bert.")}
    (tmp_path / "c").mkdir()
    save_file(base, str(tmp_path / "c" / "model.safetensors"), metadata={"format": "pt"})
    (tmp_path / "c" / "config.json").write_text((tmp_path / "a" / "config.json").read_text())
    clf = M.BertForSequenceClassification.from_pretrained(tmp_path / "c", num_labels=4)
    assert clf.loading_info["new"] == ["classifier.weight", "classifier.bias"]
    assert torch.equal(clf.bert.encoder.layer[1].ffn.output.weight, model.bert.encoder.layer[1].ffn.output.weight)
    # and the pretraining checkpoint loads into a backbone, its heads reported unused
    bm = M.BertModel.from_pretrained(tmp_path / "a")
    assert "cls.seq_relationship.weight" in bm.loading_info["unused"]


def test_sharded_safetensors(tmp_path):
    model = saved_pretraining(tmp_path / "a")
    sd = hf_state_dict(model)
    keys = sorted(sd)
    half = len(keys) // 2
    d = tmp_path / "sharded"
    d.mkdir()
    weight_map = {}
    for i, part in enumerate((keys[:half], keys[half:])):
        name = f"model-0000{i + 1}-of-00002.safetensors"
        save_file({k: sd[k] for k in part}, str(d / name), metadata={"format": "pt"})
        weight_map.update({k: name for k in part})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (d / "config.json").write_text((tmp_path / "a" / "config.json").read_text())
    assert same_weights(model, M.BertForPreTraining.from_pretrained(d))


def test_new_head_is_reported(tmp_path, caplog):
    saved_pretraining(tmp_path)
    with caplog.at_level(logging.WARNING, logger="clozeformer"):
        qa = M.BertForQuestionAnswering.from_pretrained(tmp_path)
    assert qa.loading_info["new"] == ["qa_outputs.weight", "qa_outputs.bias"]
    assert "newly initialised" in caplog.text and "qa_outputs.weight" in caplog.text


def test_bad_directories_give_one_clear_error(tmp_path):
    with pytest.raises(ClozeformerError, match="no such model directory"):
        M.BertModel.from_pretrained(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ClozeformerError, match="no config.json"):
        M.BertModel.from_pretrained(tmp_path / "empty")

    saved_pretraining(tmp_path / "gpt")
    cfg = json.loads((tmp_path / "gpt" / "config.json").read_text())
    cfg["model_type"] = "gpt2"
    (tmp_path / "gpt" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ClozeformerError, match="model_type 'gpt2' is not a BERT model"):
        M.BertModel.from_pretrained(tmp_path / "gpt")


def test_shape_mismatch_names_the_tensor(tmp_path):
    saved_pretraining(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["intermediate_size"] = 256
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ClozeformerError, match=r"'bert.encoder.layer.0.intermediate.dense.weight' has shape \(512, 128\)"):
        M.BertForPreTraining.from_pretrained(tmp_path)


def test_missing_backbone_tensor_is_an_error_not_random_init(tmp_path):
    saved_pretraining(tmp_path)
    sd = load_file(str(tmp_path / "model.safetensors"))
    del sd["bert.encoder.layer.1.attention.self.key.weight"]
    save_file(sd, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ClozeformerError, match="missing tensor 'bert.encoder.layer.1.attention.self.key.weight'"):
        M.BertForPreTraining.from_pretrained(tmp_path)


def test_corrupted_and_non_tensor_weights(tmp_path):
    saved_pretraining(tmp_path)
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 3])
    with pytest.raises(ClozeformerError, match="model.safetensors: not a readable safetensors file"):
        M.BertForPreTraining.from_pretrained(tmp_path)

    (tmp_path / "model.safetensors").unlink()
    torch.save({"weights": [1, 2, 3], "note": "not tensors"}, tmp_path / "pytorch_model.bin")
    with pytest.raises(ClozeformerError, match="pytorch_model.bin: expected a dict of tensors"):
        M.BertForPreTraining.from_pretrained(tmp_path)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    import pickle

    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps({"x": Evil()}))
    with pytest.raises(ClozeformerError, match="not a tensors-only PyTorch weights file"):
        M.BertForPreTraining.from_pretrained(tmp_path)


@pytest.mark.shared
def test_real_google_configs_load(shared_data):
    for name, vocab in (("bert-base-uncased", 30522), ("bert-base-cased", 28996), ("bert-base-chinese", 21128)):
        cfg = BertConfig.from_pretrained(shared_data / "vocab" / name)
        assert cfg.vocab_size == vocab and cfg.hidden_size == 768 and cfg.num_hidden_layers == 12
        assert sum(1 for _ in (shared_data / "vocab" / name / "vocab.txt").open(encoding="utf-8")) == vocab
