"""`BertConfig`: the architecture, with the field names of Hugging Face's `config.json`.

A clozeformer checkpoint's `config.json` is an HF BERT config (plus nothing HF would reject),
so `transformers.AutoConfig` reads ours and we read theirs. Keys we do not model are kept in
`extra` and written back unchanged, so a round trip loses nothing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_write_text

#: Activations the FFN supports, by their HF `hidden_act` names.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "silu", "swish")

#: How positions enter the model (see model.py): BERT's learned table, or RoFormer's rotary attention.
POSITION_TYPES = ("absolute", "rotary")

#: fields left out of config.json while they hold these defaults (keeps config.json as HF writes it)
#: the ways to turn token states into one sentence vector (`model.pool`), everywhere a pooling is chosen
Pooling = Literal["cls", "mean", "max", "last"]
POOLINGS: tuple[str, ...] = get_args(Pooling)
OMITTED_DEFAULTS = {"problem_type": None, "classifier_dropout": None, "classifier_pooling": "cls", "is_decoder": False}

#: (num_hidden_layers, hidden_size, num_attention_heads) of the named presets
#: (Turc et al. 2019, "Well-Read Students Learn Better", for tiny..medium; Devlin et al. for base/large).
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"  # one of ACTIVATIONS; "gelu" is the exact erf GELU
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02  # std of the normal init (see model.init_weights)
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    # "absolute" (BERT's learned table; every HF BERT checkpoint) or "rotary" (RoFormer: rotary
    # positions in attention, no table; saved with model_type "roformer")
    position_embedding_type: str = "absolute"
    classifier_dropout: float | None = None  # None -> hidden_dropout_prob
    # What the pooler reads (`model.pool`): "cls" (BERT, transformers), the "mean" or "max" of the real
    # tokens or the "last" one (clozeformer's options; transformers' BERT/RoFormer heads read [CLS])
    classifier_pooling: str = "cls"
    # Left-to-right attention (token t sees tokens <= t): a causal LM (`pretrain --objective clm`,
    # the MLM-vs-CLM baseline) and the models fine-tuned from one. HF BertConfig's flag.
    is_decoder: bool = False
    # Task heads (HF names). id2label keys are ints here, strings in config.json.
    num_labels: int = 2
    id2label: dict[int, str] | None = None
    label2id: dict[str, int] | None = None
    problem_type: str | None = None  # regression | single_label_classification | multi_label_classification
    # Keys of a config.json we do not model (architectures, torch_dtype, ...), kept for round trips.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._check_types()
        if self.id2label is not None:
            self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
            self.num_labels = len(self.id2label)
            if self.label2id is None:
                self.label2id = {v: k for k, v in self.id2label.items()}
        if self.label2id is not None:
            self.label2id = {str(k): int(v) for k, v in self.label2id.items()}
        self.validate()

    # ------------------------------------------------------------------ validation
    def _check_types(self) -> None:
        """Each field's JSON type, named in the error (config.json is user input)."""

        def bad(name: str, expected: str) -> ClozeformerError:
            return ClozeformerError(f"invalid BertConfig: {name} must be {expected}, got {getattr(self, name)!r}")

        for f in dataclasses.fields(self):
            v, tp = getattr(self, f.name), str(f.type)
            if f.name == "extra" or (v is None and "None" in tp):
                continue
            if tp.startswith("int") and (isinstance(v, bool) or not isinstance(v, int)):
                raise bad(f.name, "an integer")
            if tp.startswith("float") and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise bad(f.name, "a number")
            if tp.startswith("str") and not isinstance(v, str):
                raise bad(f.name, "a string")
            if tp.startswith("bool") and not isinstance(v, bool):
                raise bad(f.name, "true or false")
        for name in ("id2label", "label2id"):
            m = getattr(self, name)
            if m is not None and not isinstance(m, dict):
                raise bad(name, "an object")
        if self.id2label is not None:
            for k, v in self.id2label.items():
                if isinstance(k, bool) or not (isinstance(k, int) or (isinstance(k, str) and k.strip().isdigit())):
                    raise bad("id2label", "an object with integer keys")
                if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                    raise bad("id2label", "an object of label strings")
        if self.label2id is not None and any(isinstance(v, bool) or not isinstance(v, int) for v in self.label2id.values()):
            raise bad("label2id", "an object of integer ids")
        archs = self.extra.get("architectures")
        if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
            raise ClozeformerError(f"invalid BertConfig: architectures must be a list of class names, got {archs!r}")

    def validate(self) -> None:
        def bad(msg: str) -> ClozeformerError:
            return ClozeformerError(f"invalid BertConfig: {msg}")

        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise bad(f"{name} must be a positive integer, got {v!r}")
        if self.hidden_size % self.num_attention_heads:
            raise bad(f"hidden_size ({self.hidden_size}) is not divisible by num_attention_heads ({self.num_attention_heads})")
        if self.hidden_act not in ACTIVATIONS:
            raise bad(f"unknown hidden_act {self.hidden_act!r}; choose one of {', '.join(ACTIVATIONS)}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise bad(f"{name} must be in [0, 1), got {v!r}")
        if self.position_embedding_type not in POSITION_TYPES:
            raise bad(
                f"position_embedding_type {self.position_embedding_type!r} is not supported "
                f"(choose one of {', '.join(POSITION_TYPES)})"
            )
        if self.rotary and self.head_dim % 2:
            raise bad(f"rotary positions need an even head size, got {self.head_dim}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise bad(f"pad_token_id {self.pad_token_id} is outside the vocabulary (size {self.vocab_size})")
        if self.classifier_pooling not in POOLINGS:
            raise bad(f"classifier_pooling must be one of {', '.join(POOLINGS)}, got {self.classifier_pooling!r}")
        if self.num_labels < 1:
            raise bad(f"num_labels must be >= 1, got {self.num_labels}")
        if self.problem_type not in (None, "regression", "single_label_classification", "multi_label_classification"):
            raise bad(f"unknown problem_type {self.problem_type!r}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def rotary(self) -> bool:
        return self.position_embedding_type == "rotary"

    @property
    def model_type(self) -> str:
        """The HF model_type this config is saved as: "bert", or "roformer" for rotary positions."""
        return "roformer" if self.rotary else "bert"

    def hf_architecture(self, name: str) -> str:
        """Our class name ("BertForMaskedLM") as transformers names it for this config ("RoFormerForMaskedLM")."""
        if self.rotary and name == "BertLMHeadModel":
            return "RoFormerForCausalLM"
        return "RoFormer" + name[len("Bert") :] if self.rotary and name.startswith("Bert") else name

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> BertConfig:
        """A named size: tiny, mini, small, medium, base, large (FFN = 4 x hidden)."""
        if name not in PRESETS:
            raise ClozeformerError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        sizes = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden)
        return cls(**{**sizes, **overrides})

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """The HF `config.json` dict (model_type 'bert' or 'roformer', id2label keys as strings)."""
        d: dict[str, Any] = {"model_type": self.model_type, **self.extra}
        if isinstance(d.get("architectures"), list):
            d["architectures"] = [self.hf_architecture(a) if isinstance(a, str) else a for a in d["architectures"]]
        d.update((f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "extra")
        if self.id2label is None:  # HF writes explicit default labels; keep absent instead
            del d["id2label"], d["label2id"]
        else:
            d["id2label"] = {str(k): lab for k, lab in self.id2label.items()}
        for key, default in OMITTED_DEFAULTS.items():
            if d[key] == default:
                del d[key]
        if self.rotary:  # RoFormerConfig's spelling: no position_embedding_type, explicit rotary fields
            d.pop("position_embedding_type")
            d.update(embedding_size=self.hidden_size, rotary_value=False)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "config") -> BertConfig:
        d = dict(d)
        model_type = d.pop("model_type", "bert")
        if model_type not in ("bert", "roformer"):
            raise ClozeformerError(
                f"{source}: model_type {model_type!r} is not a BERT model (clozeformer reads model_type 'bert' and 'roformer')"
            )
        if model_type == "roformer":
            if d.pop("rotary_value", False):
                raise ClozeformerError(f"{source}: rotary_value true (rotary values) is not supported")
            emb = d.pop("embedding_size", None)
            if emb is not None and emb != d.get("hidden_size", 768):
                raise ClozeformerError(f"{source}: embedding_size {emb} != hidden_size is not supported")
            d["position_embedding_type"] = "rotary"
            if isinstance(d.get("architectures"), list):  # our class names are BERT's
                d["architectures"] = [
                    "BertLMHeadModel"
                    if a == "RoFormerForCausalLM"
                    else "Bert" + a[len("RoFormer") :]
                    if isinstance(a, str) and a.startswith("RoFormer")
                    else a
                    for a in d["architectures"]
                ]
        elif d.get("position_embedding_type", "absolute") != "absolute":
            raise ClozeformerError(
                f"{source}: position_embedding_type {d['position_embedding_type']!r} is not "
                "supported for model_type 'bert' (rotary models are model_type 'roformer')"
            )
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kw = {k: d.pop(k) for k in list(d) if k in names}
        extra = d.pop("extra", {}) if isinstance(d.get("extra"), dict) else {}
        extra.update(d)
        try:
            return cls(**kw, extra=extra)
        except (TypeError, ClozeformerError) as e:
            raise ClozeformerError(f"{source}: {e}") from None

    @classmethod
    def from_json_file(cls, path: str | Path) -> BertConfig:
        path = Path(path)
        if not path.is_file():
            raise ClozeformerError(f"{path}: no such config file")
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ClozeformerError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(d, dict):
            raise ClozeformerError(f"{path}: expected a JSON object")
        return cls.from_dict(d, source=str(path))

    @classmethod
    def from_pretrained(cls, path: str | Path) -> BertConfig:
        from clozeformer.hub import model_dir

        path = model_dir(path)
        return cls.from_json_file(path / "config.json" if path.is_dir() else path)

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def save_pretrained(self, directory: str | Path) -> None:
        atomic_write_text(Path(directory) / "config.json", self.to_json_string())

    def copy(self, **changes: Any) -> BertConfig:
        return dataclasses.replace(self, **changes)
