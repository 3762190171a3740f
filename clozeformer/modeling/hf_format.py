"""Hugging Face / Google BERT checkpoints, both ways, through ONE explicit key map.

`KEY_MAP` below is the only place where our parameter names meet theirs. Loading accepts the
variants real checkpoints carry: with or without the `bert.` prefix, TF-era `gamma`/`beta`
LayerNorm names, `cls.predictions.*` / `cls.seq_relationship.*` heads, `position_ids`
buffers, `model.safetensors` (also sharded) or `pytorch_model.bin` (read with
`torch.load(weights_only=True)`: never a full unpickle). Missing or mis-shaped tensors are an
error that names them; only a task head absent from the checkpoint is initialised fresh, and
reported as new.

Rotary models (`position_embedding_type="rotary"`) are saved as HF RoFormer directories: the same
layer names under a `roformer.` prefix, no position table (transformers' fixed sinusoid buffer
`encoder.embed_positions.weight` is written for it and ignored on load), and RoFormer's
sequence-classification head `classifier.dense` / `classifier.out_proj`, which is our rotary
`pooler.dense` / `classifier` (see `ROFORMER_POOLED_HEAD_MAP`).
"""

from __future__ import annotations

import json
import logging
import pickle
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from clozeformer.modeling.config import BertConfig
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_path, atomic_write_json, check_complete

log = logging.getLogger("clozeformer")

# THE KEY MAP. Ours -> HF, as prefix substitutions. Names absent from both tables are identical on
# both sides (embeddings.*, pooler.*, classifier.*, qa_outputs.*).
#   inside "encoder.layer.{i}.":
LAYER_KEY_MAP: dict[str, str] = {
    "attention.query.": "attention.self.query.",
    "attention.key.": "attention.self.key.",
    "attention.value.": "attention.self.value.",
    "attention.dense.": "attention.output.dense.",
    "attention.LayerNorm.": "attention.output.LayerNorm.",
    "ffn.intermediate.": "intermediate.dense.",
    "ffn.output.": "output.dense.",
    "ffn.LayerNorm.": "output.LayerNorm.",
}
#   at the top level (heads; HF puts the pretraining heads under "cls."):
HEAD_KEY_MAP: dict[str, str] = {
    "mlm.dense.": "cls.predictions.transform.dense.",
    "mlm.LayerNorm.": "cls.predictions.transform.LayerNorm.",
    "mlm.bias": "cls.predictions.bias",
    "mlm.decoder.weight": "cls.predictions.decoder.weight",
    "nsp.": "cls.seq_relationship.",
    "rtd.": "discriminator_predictions.",  # ELECTRA's replaced-token head
}

#   rotary models whose head reads the pooler (sequence classification, multiple choice): RoFormer
#   calls the pooler's dense layer part of its classifier
ROFORMER_POOLED_HEAD_MAP: dict[str, str] = {"pooler.dense.": "classifier.dense.", "classifier.": "classifier.out_proj."}
#: the backbone's prefix in HF checkpoints, by model_type
BACKBONE_PREFIX = {"bert": "bert.", "roformer": "roformer."}
ROFORMER_SINUSOID_KEY = "encoder.embed_positions.weight"

# parameters that belong to heads: may be initialised fresh when a checkpoint lacks them
HEAD_PREFIXES = ("mlm.", "nsp.", "rtd.", "classifier.", "qa_outputs.", "pooler.")
# HF keys that carry no weights of their own (buffers, tied copies)
IGNORED_HF = re.compile(
    r"(^|\.)(position_ids|token_type_ids)$|^cls\.predictions\.decoder\.bias$"
    r"|^encoder\.embed_positions\.weight$"
)
_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.*)$")


def _swap(key: str, table: dict[str, str]) -> str:
    return next((b + key[len(a) :] for a, b in table.items() if key.startswith(a)), key)


def _map(key: str, layer_table: dict[str, str], head_table: dict[str, str]) -> str:
    if m := _LAYER.match(key):
        return f"encoder.layer.{m.group(1)}." + _swap(m.group(2), layer_table)
    return _swap(key, head_table)


def head_map(rotary: bool = False, pooled_head: bool = False) -> dict[str, str]:
    """The top-level table: HEAD_KEY_MAP, plus RoFormer's classifier names for a rotary pooled head."""
    return {**ROFORMER_POOLED_HEAD_MAP, **HEAD_KEY_MAP} if rotary and pooled_head else HEAD_KEY_MAP


def to_hf_key(key: str, rotary: bool = False, pooled_head: bool = False) -> str:
    """Our parameter name (with or without the `bert.` prefix) -> the HF name (`roformer.` for rotary)."""
    prefix = ""
    if key.startswith("bert."):
        prefix, key = BACKBONE_PREFIX["roformer" if rotary else "bert"], key[len("bert.") :]
    new = _map(key, LAYER_KEY_MAP, head_map(rotary, pooled_head))
    return new if new.startswith(("cls.", "classifier.")) else prefix + new


def from_hf_key(key: str, rotary: bool = False) -> str:
    """HF name (without the backbone prefix; TF `gamma`/`beta` accepted) -> ours, backbone-relative."""
    key = re.sub(r"\.beta$", ".bias", re.sub(r"\.gamma$", ".weight", key))
    # inverted, longest HF prefix first: "classifier.out_proj." before a bare "classifier." would match
    heads = dict(sorted(((v, k) for k, v in head_map(rotary, pooled_head=rotary).items()), key=lambda kv: -len(kv[0])))
    return _map(key, {v: k for k, v in LAYER_KEY_MAP.items()}, heads)


# ----------------------------------------------------------------------------- reading weights


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise ClozeformerError(f"{path}: not a readable safetensors file ({e})") from None


def _read_bin(path: Path) -> dict[str, torch.Tensor]:
    try:
        sd = torch.load(str(path), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ClozeformerError(f"{path}: not a tensors-only PyTorch weights file ({msg})") from None
    if not isinstance(sd, dict) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise ClozeformerError(f"{path}: expected a dict of tensors")
    return sd


def read_weights(directory: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """All tensors of an HF directory, from safetensors (single or sharded) or .bin."""
    for index_name, reader in (("model.safetensors.index.json", _read_safetensors), ("pytorch_model.bin.index.json", _read_bin)):
        index = directory / index_name
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            except (json.JSONDecodeError, KeyError, UnicodeDecodeError) as e:
                raise ClozeformerError(f"{index}: not a valid shard index ({e})") from None
            sd: dict[str, torch.Tensor] = {}
            for shard in sorted(set(weight_map.values())):
                if not (directory / shard).is_file():
                    raise ClozeformerError(f"{index}: shard {shard} is missing")
                sd.update(reader(directory / shard))
            return sd, index
    for name, reader in (("model.safetensors", _read_safetensors), ("pytorch_model.bin", _read_bin)):
        if (directory / name).is_file():
            return reader(directory / name), directory / name
    raise ClozeformerError(f"{directory}: no model.safetensors or pytorch_model.bin found")


# ----------------------------------------------------------------------------- load


def load_pretrained(cls, path, strict_heads: bool = False, **config_overrides: Any):
    """Build `cls` from an HF-format directory. `config_overrides` (e.g. num_labels, id2label)
    change the saved config before the model is built; a task head whose shape then differs from
    the checkpoint's is initialised fresh (and reported) only when the override asked for it."""
    from clozeformer.hub import model_dir

    directory = model_dir(path)
    if not directory.is_dir():
        raise ClozeformerError(f"{directory}: expected a model directory (config.json + weights)")
    check_complete(directory)
    if not (directory / "config.json").is_file():
        raise ClozeformerError(f"{directory}: no config.json (is this an HF-format BERT directory?)")
    config = BertConfig.from_json_file(directory / "config.json")
    if config_overrides:
        d = config.to_dict()
        if "id2label" in config_overrides or "num_labels" in config_overrides:
            d.pop("id2label", None)
            d.pop("label2id", None)
        d.update(config_overrides)
        config = BertConfig.from_dict(d, source=str(directory / "config.json"))
    raw, weights_file = read_weights(directory)

    # HF name -> ours, backbone-relative; drop buffers and tied copies
    stripped = {k.removeprefix(BACKBONE_PREFIX[config.model_type]): t for k, t in raw.items()}
    theirs = {from_hf_key(k, config.rotary): t for k, t in stripped.items() if not IGNORED_HF.search(k)}

    model = cls(config)
    backbone = "bert." if hasattr(model, "bert") else ""  # our keys' backbone prefix; `theirs` has none
    own = model.state_dict()
    tied = {"mlm.decoder.weight"}
    new, mismatched_heads = [], []
    loaded: set[str] = set()
    with torch.no_grad():
        for full_key, param in own.items():
            rel = full_key.removeprefix(backbone)
            if rel in tied:
                continue
            src = theirs.get(rel)
            if src is None:
                if rel.startswith(HEAD_PREFIXES):
                    new.append(full_key)
                    continue
                rels = (k.removeprefix(backbone) for k in own)
                missing = [k for k in rels if k not in theirs and k not in tied and not k.startswith(HEAD_PREFIXES)]
                raise ClozeformerError(
                    f"{weights_file}: missing tensor {to_hf_key(full_key, config.rotary)!r} "
                    f"({len(missing)} backbone tensors missing in all; is this a BERT checkpoint "
                    f"of this architecture?)"
                )
            if tuple(src.shape) != tuple(param.shape):
                if rel.startswith(("classifier.", "qa_outputs.")) and config_overrides:
                    mismatched_heads.append(full_key)
                    new.append(full_key)
                    continue
                raise ClozeformerError(
                    f"{weights_file}: tensor {to_hf_key(full_key, config.rotary)!r} has shape {tuple(src.shape)}, "
                    f"the config ({directory / 'config.json'}) implies {tuple(param.shape)}"
                )
            param.copy_(src.to(param.dtype))
            loaded.add(rel)
    model.tie_weights()
    unused = sorted(to_hf_key(k, config.rotary) for k in theirs if k not in loaded and k not in tied)
    if strict_heads and new:
        raise ClozeformerError(f"{weights_file}: no weights for {', '.join(new)}")
    if new:
        log.warning("%s: newly initialised (not in the checkpoint): %s", directory, ", ".join(new))
    if unused:
        log.info("%s: checkpoint tensors not used by %s: %s", directory, cls.__name__, ", ".join(unused))
    model.loading_info = {"new": new, "unused": unused, "mismatched": mismatched_heads}
    return model


# ----------------------------------------------------------------------------- save


def roformer_sinusoid(num_positions: int, head_dim: int) -> torch.Tensor:
    """transformers' fixed RoFormer table (num_positions, D): sin in the first half, cos in the second.

    It carries no weights (`model.rotary_tables` computes the same angles); written so that
    transformers finds every tensor it expects."""
    from clozeformer.modeling.rotary import rotary_tables

    cos, sin = rotary_tables(num_positions, head_dim, torch.device("cpu"))
    return torch.cat([sin, cos], dim=-1).contiguous()


def hf_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Our state dict under HF names, tied copies dropped, contiguous (safetensors-ready)."""
    config = model.config
    pooled_head = hasattr(model, "classifier") and getattr(getattr(model, "bert", None), "pooler", None) is not None
    out: dict[str, torch.Tensor] = {}
    for key, tensor in model.state_dict().items():
        if key.endswith("mlm.decoder.weight"):
            continue  # tied to the word embeddings; HF re-ties on load
        out[to_hf_key(key, config.rotary, pooled_head)] = tensor.detach().contiguous().clone()
    if config.rotary:
        prefix = BACKBONE_PREFIX["roformer"] if hasattr(model, "bert") else ""
        out[prefix + ROFORMER_SINUSOID_KEY] = roformer_sinusoid(config.max_position_embeddings, config.head_dim)
    return out


def save_pretrained(model: torch.nn.Module, directory) -> None:
    """Write config.json + model.safetensors (each file atomically)."""
    architectures = [model.config.hf_architecture(type(model).hf_architecture)]
    atomic_write_json(Path(directory) / "config.json", {**model.config.to_dict(), "architectures": architectures})
    with atomic_path(Path(directory) / "model.safetensors") as tmp:
        save_file(hf_state_dict(model), str(tmp), metadata={"format": "pt"})
