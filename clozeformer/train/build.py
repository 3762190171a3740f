"""The model a run trains: from a checkpoint being resumed, --init-from, --model-config or a preset."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from clozeformer.data.manifest import Manifest
from clozeformer.hub import model_dir
from clozeformer.modeling.bert import BertForMaskedLM, BertForPreTraining, BertLMHeadModel
from clozeformer.modeling.config import BertConfig
from clozeformer.modeling.electra import ElectraForPreTraining, electra_generator_config
from clozeformer.train.pretrain_config import PretrainConfig
from clozeformer.utils.errors import ClozeformerError


def build_model(cfg: PretrainConfig, manifest: Manifest, data_dir: Path, ckpt: Path | None):
    """BertForMaskedLM (objective mlm), BertForPreTraining (mlm_nsp), BertLMHeadModel (clm) or ElectraForPreTraining
    (electra), from a checkpoint being resumed, --init-from, --model-config or a preset; its vocabulary must be the
    data's. ELECTRA from --init-from: the encoder from that directory, the generator from its generator/ (or fresh)."""
    over = {} if cfg.dropout is None else {"hidden_dropout_prob": cfg.dropout, "attention_probs_dropout_prob": cfg.dropout}
    cls = {"mlm_nsp": BertForPreTraining, "clm": BertLMHeadModel}.get(cfg.objective, BertForMaskedLM)
    vocab, seq_len = manifest.vocab_size, manifest.seq_len
    if ckpt is not None or cfg.init_from:
        source = Path(ckpt) if ckpt is not None else model_dir(cfg.init_from)
        if cfg.objective == "electra":
            kw = dict(rtd_weight=cfg.rtd_weight, generator_fraction=cfg.generator_fraction, generator_layers=cfg.generator_layers)
            model = ElectraForPreTraining.from_pretrained(source, **kw, **over)
        else:
            model = cls.from_pretrained(source, **over)
        theirs, ours = source / "vocab.txt", data_dir / "tokenizer" / "vocab.txt"
        if ckpt is None and theirs.is_file() and theirs.read_bytes() != ours.read_bytes():
            raise ClozeformerError(
                f"{theirs} differs from the data's {ours}: the model was trained "
                "with another vocabulary; prepare the data with its tokenizer"
            )
    else:
        if cfg.model_config:
            source = Path(cfg.model_config)
            config = BertConfig.from_json_file(source)
        else:
            source = Path(f"preset {cfg.model}")
            config = BertConfig.preset(
                cfg.model,
                vocab_size=vocab,
                pad_token_id=manifest.special_ids.pad,
                max_position_embeddings=max(512, seq_len),
                position_embedding_type=cfg.position_embedding_type or "absolute",
            )
        config = config.copy(**over)
        if cfg.objective == "electra":
            gen = electra_generator_config(config, cfg.generator_fraction, cfg.generator_layers)
            model = ElectraForPreTraining(config, gen, cfg.rtd_weight)
        else:
            model = cls(config)
    if ckpt is None and cfg.position_embedding_type and model.config.position_embedding_type != cfg.position_embedding_type:
        raise ClozeformerError(
            f"--position-embedding-type {cfg.position_embedding_type} does not match the "
            f"model's {model.config.position_embedding_type!r} ({source})"
        )
    if model.config.vocab_size != vocab:
        raise ClozeformerError(
            f"model vocab_size {model.config.vocab_size} ({source}) != data vocab_size "
            f"{vocab} ({data_dir / 'manifest.json'}); the model must use the data's tokenizer"
        )
    if seq_len > model.config.max_position_embeddings:
        raise ClozeformerError(
            f"data seq_len {seq_len} exceeds the model's max_position_embeddings "
            f"{model.config.max_position_embeddings} ({source})"
        )
    return model, str(source)


def save_random_init(reference: Path, out: Path, seed: int) -> Path:
    """A randomly initialised BertForMaskedLM with `reference`'s exact config and tokenizer files:
    the "from scratch" arm of a pretrained-vs-scratch comparison (same architecture, positions,
    dropout and vocabulary; only the weights differ)."""
    torch.manual_seed(seed)
    BertForMaskedLM(BertConfig.from_pretrained(reference)).save_pretrained(out)
    for name in ("vocab.txt", "tokenizer_config.json"):
        if (reference / name).is_file():
            shutil.copy(reference / name, out / name)
    return out
