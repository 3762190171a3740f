"""manifest.json: what `prepare` wrote into a DATA_DIR, as one typed, checked `Manifest`.

`prepare` builds a Manifest and `write`s it; the loader, `pretrain`, the experiments and the
benchmarks `read` it and use its attributes. Each fact is held once. The file (format_version 1)
also carries copies of some for readers of the raw JSON: `to_json` derives them and `from_json`
checks them against the facts:

    num_train, num_val, train_tokens, val_tokens   the splits' totals
    splits.{split}.num_sequences, num_tokens       sums over the split's shards
    splits.{split}.mean_length                     num_tokens / num_sequences, 2 decimals
    {role}_token_id                                special_ids.{role}
    tokenizer_hash                                 tokenizer.hash

A manifest written by an earlier clozeformer reads the same: only mode, seq_len, vocab_size,
num_train, num_val, special_ids, splits and token_dtype are required; the other fields take
their defaults (None: not recorded, and not written back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

from clozeformer.data.readers import ReaderStats
from clozeformer.utils.errors import ClozeformerError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
MODES = ("packed", "nsp")
TOKEN_DTYPES = ("uint16", "int32", "uint32", "int64")
ROLES = ("pad", "unk", "cls", "sep", "mask")  # the order of special_ids in the file
REQUIRED = ("mode", "seq_len", "vocab_size", "num_train", "num_val", "special_ids", "splits", "token_dtype")
HINT = "; a corrupt manifest: rerun `clozeformer prepare`"
_MISSING: Any = object()


# ----------------------------------------------------------------------------- the facts
def _set(d: dict[str, Any]) -> dict[str, Any]:
    """`d` less its None values (not recorded, so not written)."""
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class Shard:
    """One shard's files (names inside DATA_DIR; see prepare.py for their layout) and counts."""

    tokens: str
    offsets: str
    num_sequences: int
    num_tokens: int
    b_start: str | None = None  # nsp only
    nsp: str | None = None  # nsp only
    labels: str | None = None  # static masking only

    def to_json(self) -> dict[str, Any]:
        return _set(asdict(self))

    @classmethod
    def from_json(cls, r: _Fields) -> Shard:
        files = {k: r.text(k, default=None) for k in ("b_start", "nsp", "labels")}
        return cls(r.text("tokens"), r.text("offsets"), r.count("num_sequences"), r.count("num_tokens"), **files)


@dataclass(frozen=True)
class Split:
    """One split: its shards in order, and what only the sequences themselves could tell."""

    shards: tuple[Shard, ...]
    max_length: int | None = None  # the longest sequence; None for an empty split
    random_next_fraction: float | None = None  # nsp only: share of pairs whose B is random

    @property
    def num_sequences(self) -> int:
        return sum(s.num_sequences for s in self.shards)

    @property
    def num_tokens(self) -> int:
        return sum(s.num_tokens for s in self.shards)

    @property
    def mean_length(self) -> float | None:
        return round(self.num_tokens / self.num_sequences, 2) if self.num_sequences else None

    def to_json(self) -> dict[str, Any]:
        return _set(
            {
                "num_sequences": self.num_sequences,
                "num_tokens": self.num_tokens,
                "shards": [s.to_json() for s in self.shards],
                "random_next_fraction": self.random_next_fraction,
                "mean_length": self.mean_length,
                "max_length": self.max_length,
            }
        )

    @classmethod
    def from_json(cls, r: _Fields) -> Split:
        shards = tuple(Shard.from_json(s) for s in r.objects("shards"))
        split = cls(shards, r.count("max_length", default=None), r.fraction("random_next_fraction", default=None))
        for key in ("num_sequences", "num_tokens"):
            r.same(key, r.count(key, default=None), getattr(split, key), "the sum over its shards")
        r.same("mean_length", r.number("mean_length", default=None), split.mean_length, "num_tokens / num_sequences")
        return split


EMPTY_SPLIT = Split(())


@dataclass(frozen=True, kw_only=True)
class SpecialIds:
    pad: int
    unk: int | None = None
    cls: int
    sep: int
    mask: int

    def as_dict(self) -> dict[str, int]:
        return {role: getattr(self, role) for role in ROLES if getattr(self, role) is not None}

    @classmethod
    def from_json(cls, r: _Fields, vocab_size: int) -> SpecialIds:
        def an_id(role: str, default: Any = _MISSING) -> int:
            return r.get(role, lambda v: _is_int(v) and 0 <= v < vocab_size, "an id below vocab_size", default)

        required = {role: an_id(role) for role in ("pad", "cls", "sep", "mask")}
        return cls(**required, unk=an_id("unk", None))


@dataclass(frozen=True)
class TokenizerInfo:
    dir: str = "tokenizer"  # inside DATA_DIR: vocab.txt + tokenizer_config.json
    hash: str | None = None  # Tokenizer.fingerprint
    do_lower_case: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return _set(asdict(self))

    @classmethod
    def from_json(cls, r: _Fields) -> TokenizerInfo:
        return cls(r.text("dir", default="tokenizer"), r.text("hash", default=None), r.flag("do_lower_case", default=None))


@dataclass(frozen=True)
class DocumentCounts:
    train: int
    val: int
    empty_after_tokenization: int  # documents without a single token (dropped)

    @classmethod
    def from_json(cls, r: _Fields) -> DocumentCounts:
        return cls(*(r.count(f.name) for f in fields(cls)))


@dataclass(frozen=True)
class Manifest:
    """A prepared DATA_DIR: its sequences (shards per split), their tokenizer, how they were made."""

    mode: str  # packed or nsp
    seq_len: int
    vocab_size: int
    token_dtype: str  # of the .tokens.npy files
    special_ids: SpecialIds
    splits: dict[str, Split]  # train, val
    static_masking: bool = False  # the shards hold masks (labels files)
    dupe_factor: int = 1
    format_version: int = FORMAT_VERSION
    tokenizer: TokenizerInfo | None = None
    documents: DocumentCounts | None = None
    sentences: int | None = None
    corpus_tokens: int | None = None  # the documents' tokens, before [CLS]/[SEP] and copies
    reader: ReaderStats | None = None
    settings: dict[str, Any] | None = None  # prepare's configuration, less paths and workers

    @property
    def nsp(self) -> bool:
        return self.mode == "nsp"

    num_train = property(lambda self: self.splits.get("train", EMPTY_SPLIT).num_sequences)
    num_val = property(lambda self: self.splits.get("val", EMPTY_SPLIT).num_sequences)
    train_tokens = property(lambda self: self.splits.get("train", EMPTY_SPLIT).num_tokens)
    val_tokens = property(lambda self: self.splits.get("val", EMPTY_SPLIT).num_tokens)

    @property
    def tokenizer_dir(self) -> str:
        return self.tokenizer.dir if self.tokenizer is not None else "tokenizer"

    # ------------------------------------------------------------------ the file
    def to_json(self) -> dict[str, Any]:
        """The manifest.json object, the derived copies included (keys in the order of format 1)."""
        sp, tok = self.special_ids.as_dict(), self.tokenizer
        return _set(
            {
                "format_version": self.format_version,
                "mode": self.mode,
                "seq_len": self.seq_len,
                "vocab_size": self.vocab_size,
                "token_dtype": self.token_dtype,
                "static_masking": self.static_masking,
                "dupe_factor": self.dupe_factor,
                "num_train": self.num_train,
                "num_val": self.num_val,
                "train_tokens": self.train_tokens,
                "val_tokens": self.val_tokens,
                "special_ids": sp,
                **{f"{role}_token_id": i for role, i in sp.items()},
                "tokenizer": tok.to_json() if tok else None,
                "tokenizer_hash": tok.hash if tok else None,
                "documents": asdict(self.documents) if self.documents else None,
                "sentences": self.sentences,
                "corpus_tokens": self.corpus_tokens,
                "reader": asdict(self.reader) if self.reader else None,
                "settings": self.settings,
                "splits": {name: split.to_json() for name, split in self.splits.items()},
            }
        )

    def write(self, directory: str | Path) -> None:
        from clozeformer.utils.io import atomic_write_json

        atomic_write_json(Path(directory) / MANIFEST, self.to_json())

    @classmethod
    def read(cls, data_dir: str | Path) -> Manifest:
        """The manifest of a prepared DATA_DIR; ClozeformerError when it is missing or corrupt."""
        from clozeformer.utils.io import read_json_object

        path = Path(data_dir) / MANIFEST
        if not Path(data_dir).is_dir():
            raise ClozeformerError(f"{data_dir}: no such data directory (run `clozeformer prepare` first)")
        if not path.is_file():
            raise ClozeformerError(f"{path}: missing; is {data_dir} a directory written by `clozeformer prepare`?")
        return cls.from_json(read_json_object(path, HINT), path)

    @classmethod
    def from_json(cls, obj: dict[str, Any], path: str | Path = MANIFEST) -> Manifest:
        """Check every field's type (and the copies) once; errors name `path` and the field."""
        missing = [k for k in REQUIRED if k not in obj]
        if missing:
            raise ClozeformerError(f"{path}: corrupt manifest (missing {', '.join(missing)})")
        r = _Fields(obj, str(path))
        version = r.count("format_version", default=FORMAT_VERSION)
        if version > FORMAT_VERSION:
            raise ClozeformerError(f"{path}: format_version {version} is newer than this clozeformer reads")
        seq_len, vocab_size = r.count("seq_len", 8), r.count("vocab_size", 1)
        for key in ("num_train", "num_val", "train_tokens", "val_tokens"):
            r.count(key, default=None)  # copies: typed here, compared below
        tokenizer, documents, reader = (r.child(k) for k in ("tokenizer", "documents", "reader"))
        m = cls(
            mode=r.text("mode", MODES),
            seq_len=seq_len,
            vocab_size=vocab_size,
            token_dtype=r.text("token_dtype", TOKEN_DTYPES),
            special_ids=SpecialIds.from_json(r.child("special_ids", required=True), vocab_size),
            splits={name: Split.from_json(s) for name, s in r.child("splits", required=True).children()},
            static_masking=r.flag("static_masking", default=False),
            dupe_factor=r.count("dupe_factor", 1, default=1),
            format_version=version,
            tokenizer=TokenizerInfo.from_json(tokenizer) if tokenizer else None,
            documents=DocumentCounts.from_json(documents) if documents else None,
            sentences=r.count("sentences", default=None),
            corpus_tokens=r.count("corpus_tokens", default=None),
            reader=_reader_stats(reader) if reader else None,
            settings=r.plain("settings", dict, "an object", None),
        )
        m._check_copies(r, obj)
        return m

    def _check_copies(self, r: _Fields, obj: dict[str, Any]) -> None:
        """The stored copies equal the facts; each nsp (static) shard names its b_start and nsp (labels) files."""
        for split in ("train", "val"):
            total = self.splits.get(split, EMPTY_SPLIT)
            r.same(f"num_{split}", obj.get(f"num_{split}"), total.num_sequences, f"the sum over the {split} shards")
            r.same(f"{split}_tokens", obj.get(f"{split}_tokens"), total.num_tokens, f"the sum over the {split} shards")
        if self.tokenizer is not None:
            r.same("tokenizer_hash", obj.get("tokenizer_hash"), self.tokenizer.hash, "tokenizer.hash")
        for role, i in self.special_ids.as_dict().items():
            r.same(f"{role}_token_id", obj.get(f"{role}_token_id"), i, f"special_ids.{role}")
        needs = [k for k, needed in (("b_start", self.nsp), ("nsp", self.nsp), ("labels", self.static_masking)) if needed]
        for name, split in self.splits.items():
            for i, shard in enumerate(split.shards):
                for key in (k for k in needs if getattr(shard, k) is None):
                    raise ClozeformerError(
                        f"{r.file}: splits.{name}.shards[{i}].{key} is missing (mode {self.mode}, "
                        f"static_masking {str(self.static_masking).lower()}){HINT}"
                    )


# ----------------------------------------------------------------------------- typed reading
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Fields:
    """The fields of one JSON object of a manifest, read typed; the first wrong one raises,
    naming the file and the field's path (`splits.train.shards[3].num_tokens`)."""

    def __init__(self, obj: dict[str, Any], file: str, prefix: str = "") -> None:
        self.obj, self.file, self.prefix = obj, file, prefix

    def fail(self, key: str, expected: str, value: Any) -> NoReturn:
        raise ClozeformerError(f"{self.file}: {self.prefix}{key} must be {expected}, got {value!r}{HINT}")

    def get(self, key: str, ok: Callable[[Any], bool], expected: str, default: Any = _MISSING) -> Any:
        if key not in self.obj:
            if default is _MISSING:
                raise ClozeformerError(f"{self.file}: {self.prefix}{key} is missing{HINT}")
            return default
        if not ok(self.obj[key]):
            self.fail(key, expected, self.obj[key])
        return self.obj[key]

    def count(self, key: str, low: int = 0, default: Any = _MISSING) -> int:
        return self.get(key, lambda v: _is_int(v) and v >= low, f"an integer >= {low}", default)

    def text(self, key: str, options: tuple[str, ...] = (), default: Any = _MISSING) -> str:
        ok = (lambda v: v in options) if options else (lambda v: isinstance(v, str) and v != "")
        return self.get(key, ok, f"{', '.join(options[:-1])} or {options[-1]}" if options else "a non-empty string", default)

    def flag(self, key: str, default: Any = _MISSING) -> bool:
        return self.get(key, lambda v: isinstance(v, bool), "true or false", default)

    def number(self, key: str, default: Any = _MISSING) -> float:
        return self.get(key, _is_number, "a number", default)

    def fraction(self, key: str, default: Any = _MISSING) -> float:
        return self.get(key, lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]", default)

    def plain(self, key: str, kind: type, expected: str, default: Any = _MISSING) -> Any:
        """A list or an object kept as it is (the reader's file list, the settings)."""
        return self.get(key, lambda v: isinstance(v, kind), expected, default)

    def child(self, key: str, required: bool = False) -> _Fields | None:
        """The object under `key` (None when absent and not `required`)."""
        obj = self.get(key, lambda v: isinstance(v, dict), "an object", _MISSING if required else None)
        return None if obj is None else _Fields(obj, self.file, f"{self.prefix}{key}.")

    def children(self) -> list[tuple[str, _Fields]]:
        """Every field, each an object (the splits; the shards, via `objects`)."""
        return [(key, self.child(key, required=True)) for key in self.obj]

    def objects(self, key: str) -> list[_Fields]:
        """The list of objects under `key` (the shards)."""
        items = self.get(key, lambda v: isinstance(v, list), "a list")
        indexed = _Fields({f"{key}[{i}]": item for i, item in enumerate(items)}, self.file, self.prefix)  # shards[3]
        return [shard for _, shard in indexed.children()]

    def same(self, key: str, stored: Any, derived: Any, source: str) -> None:
        """A stored copy (None: absent) must equal what it is a copy of."""
        if stored is not None and stored != derived:
            raise ClozeformerError(f"{self.file}: {self.prefix}{key} is {stored!r} but {source} is {derived!r}{HINT}")


def _reader_stats(r: _Fields) -> ReaderStats:
    """ReaderStats from its JSON (fields absent there keep their defaults)."""

    def typed(key: str) -> Any:
        if key == "skipped_files":
            return r.plain(key, list, "a list")
        if key == "formats":
            return r.plain(key, dict, "an object")
        return r.count(key)

    return ReaderStats(**{f.name: typed(f.name) for f in fields(ReaderStats) if f.name in r.obj})
