"""The model a run trains: from a checkpoint being resumed, --init-from, --config or a preset."""

from __future__ import annotations

from pathlib import Path

from clozeformer.config import BertConfig
from clozeformer.errors import ClozeformerError
from clozeformer.model import BertForMaskedLM, BertForPreTraining
from clozeformer.train.config import PretrainConfig


def build_model(cfg: PretrainConfig, manifest: dict, data_dir: Path, ckpt: Path | None):
    """BertForMaskedLM (objective mlm) or BertForPreTraining (mlm_nsp), from a checkpoint being
    resumed, --init-from, --config or a preset; its vocabulary must be the data's."""
    cls = BertForPreTraining if cfg.objective == "mlm_nsp" else BertForMaskedLM
    over = {} if cfg.dropout is None else {"hidden_dropout_prob": cfg.dropout,
                                            "attention_probs_dropout_prob": cfg.dropout}
    vocab, seq_len = manifest["vocab_size"], manifest["seq_len"]
    if ckpt is not None or cfg.init_from:
        source = Path(ckpt or cfg.init_from)
        model = cls.from_pretrained(source, **over)
        theirs, ours = source / "vocab.txt", data_dir / "tokenizer" / "vocab.txt"
        if ckpt is None and theirs.is_file() and theirs.read_bytes() != ours.read_bytes():
            raise ClozeformerError(f"{theirs} differs from the data's {ours}: the model was trained "
                                   "with another vocabulary; prepare the data with its tokenizer")
    else:
        if cfg.model_config:
            source = Path(cfg.model_config)
            config = BertConfig.from_json_file(source)
        else:
            source = Path(f"preset {cfg.model}")
            config = BertConfig.preset(cfg.model, vocab_size=vocab, pad_token_id=manifest["special_ids"]["pad"],
                                       max_position_embeddings=max(512, seq_len))
        model = cls(config.copy(**over))
    if model.config.vocab_size != vocab:
        raise ClozeformerError(f"model vocab_size {model.config.vocab_size} ({source}) != data vocab_size "
                               f"{vocab} ({data_dir / 'manifest.json'}); the model must use the data's tokenizer")
    if seq_len > model.config.max_position_embeddings:
        raise ClozeformerError(f"data seq_len {seq_len} exceeds the model's max_position_embeddings "
                               f"{model.config.max_position_embeddings} ({source})")
    return model, str(source)
