"""sentence-transformers (Sentence-BERT) directories: what clozeformer reads of them and writes.

A sentence-transformers model is an HF-format encoder directory plus a few files that say how its
token states become one vector:

    modules.json                      the module chain: Transformer ("" = this directory) -> Pooling [-> Normalize]
    1_Pooling/config.json             cls, mean, max or last-token pooling
    sentence_bert_config.json         max_seq_length (tokens per text) and do_lower_case
    config_sentence_transformers.json the similarity function (cosine) and versions

`read_modules` understands the classic layout (sentence-transformers 2-5: `pooling_mode_*_tokens`
flags, `sentence_transformers.models.*` types) and the newer one (6: `"pooling_mode": "mean"`,
`sentence_transformers.*.modules.*` types, the length in tokenizer_config.json). A chain that holds
anything clozeformer does not compute (a Dense projection, weighted-mean pooling, ...) is refused
with one error line instead of giving different vectors. `write_modules` writes the classic layout,
which every sentence-transformers release since 2.0 loads (`SentenceTransformer(DIR)`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from clozeformer import __version__
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_write_json, read_json_object

#: sentence-transformers' pooling names -> ours (`model.pool`)
_POOLING_NAMES = {
    **{"cls": "cls", "mean": "mean", "max": "max", "lasttoken": "last"},  # sentence-transformers 6: "pooling_mode"
    **{"cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max"},  # 2-5: "pooling_mode_<name>": true
}
#: the modules of a chain clozeformer computes, by the last part of their type name
_KNOWN = ("Transformer", "Pooling", "Normalize")
POOLING_DIR = "1_Pooling"


@dataclass(frozen=True)
class SentenceModules:
    """How a sentence-transformers directory turns token states into one vector."""

    pooling: str  # cls | mean | max | last
    normalize: bool  # a Normalize module: unit-length vectors
    max_seq_length: int | None  # tokens per text (None: not stated)
    lowercase: bool = False  # sentence_bert_config's do_lower_case: the text is lower-cased before tokenizing


def is_sentence_transformers_dir(directory: str | Path | None) -> bool:
    return bool(directory) and (Path(directory) / "modules.json").is_file()


def read_modules(directory: str | Path | None) -> SentenceModules | None:
    """The module chain of a sentence-transformers directory, or None when it has no modules.json."""
    if not is_sentence_transformers_dir(directory):
        return None
    directory = Path(directory)  # type: ignore[arg-type]
    where = directory / "modules.json"
    try:
        modules = json.loads(where.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ClozeformerError(f"{where}: invalid JSON ({e})") from None
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ClozeformerError(f"{where}: expected a list of modules")
    kinds = {str(m.get("type", "")).rsplit(".", 1)[-1]: m for m in modules}
    unknown = [str(m.get("type")) for m in modules if str(m.get("type", "")).rsplit(".", 1)[-1] not in _KNOWN]
    if unknown:
        raise ClozeformerError(
            f"{where}: module {unknown[0]} is not computed by clozeformer (it reads Transformer, Pooling and Normalize)"
        )
    transformer = kinds.get("Transformer")
    if transformer is None or transformer.get("path", "") not in ("", "."):
        path = transformer.get("path") if transformer else None
        raise ClozeformerError(
            f"{where}: the encoder is not this directory itself"
            + (f" but {path}/; load {directory / path} instead" if path else " (no Transformer module)")
        )
    if "Pooling" not in kinds:
        raise ClozeformerError(f"{where}: no Pooling module")
    pooling = _read_pooling(directory / str(kinds["Pooling"].get("path", POOLING_DIR)) / "config.json")
    settings = directory / "sentence_bert_config.json"
    config = read_json_object(settings) if settings.is_file() else {}
    max_len = config.get("max_seq_length")
    if max_len is None and (directory / "tokenizer_config.json").is_file():  # sentence-transformers 6 keeps it there
        max_len = read_json_object(directory / "tokenizer_config.json").get("model_max_length")
    if max_len is not None and (not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1 or max_len > 10**6):
        max_len = None  # "unbounded" (transformers writes 1e30) or malformed: not a length
    return SentenceModules(pooling, "Normalize" in kinds, max_len, bool(config.get("do_lower_case", False)))


def _read_pooling(where: Path) -> str:
    if not where.is_file():
        raise ClozeformerError(f"{where}: missing (the Pooling module's config)")
    config = read_json_object(where)
    if isinstance(config.get("pooling_mode"), str):  # sentence-transformers 6
        modes = [config["pooling_mode"]]
    else:
        modes = [k.removeprefix("pooling_mode_") for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
    ours = [_POOLING_NAMES.get(m) for m in modes]
    if len(modes) != 1 or ours[0] is None:
        found = ", ".join(modes) or "none"
        raise ClozeformerError(f"{where}: pooling {found}; clozeformer pools one of cls, mean, max, lasttoken")
    return ours[0]


def write_modules(directory: str | Path, *, pooling: str, normalize: bool, max_seq_length: int, dim: int) -> list[Path]:
    """The sentence-transformers files beside an encoder already saved in `directory` (atomically, each)."""
    import torch

    directory = Path(directory)
    st_name = {"cls": "cls_token", "mean": "mean_tokens", "max": "max_tokens", "last": "lasttoken"}
    if pooling not in st_name:
        raise ValueError(f"pooling {pooling!r}")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": POOLING_DIR, "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    flags = {f"pooling_mode_{name}": pooling == ours for ours, name in st_name.items()}
    pooling_config = {"word_embedding_dimension": dim, **flags, "pooling_mode_mean_sqrt_len_tokens": False}
    files = {
        "modules.json": modules,
        "sentence_bert_config.json": {"max_seq_length": max_seq_length, "do_lower_case": False},
        f"{POOLING_DIR}/config.json": pooling_config | {"pooling_mode_weightedmean_tokens": False, "include_prompt": True},
        "config_sentence_transformers.json": {
            "__version__": {"clozeformer": __version__, "pytorch": torch.__version__},
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    }
    for name, obj in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(directory / name, obj)
    return [directory / name for name in files]
