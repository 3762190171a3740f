"""BERT WordPiece tokenizer: load Google's `vocab.txt`, train a new one, encode with offsets.

The work is done by the Rust `tokenizers` library, wired exactly as Google's
`tokenization.py` (and `transformers.BertTokenizerFast`) does it:

    BertNormalizer   clean control chars, put spaces around CJK characters (one token each),
                     lowercase + strip accents when uncased
    BertPreTokenizer split on whitespace and punctuation
    WordPiece        greedy longest-match-first with the `##` continuation prefix
    TemplateProcessing  [CLS] A [SEP]  /  [CLS] A [SEP] B [SEP] with token types 0 / 1

so the ids are identical to `BertTokenizerFast` for the same vocab and casing (tested on real
text for the three Google vocabularies). This class adds only what the rest of clozeformer needs:
casing read from `tokenizer_config.json` or inferred from the vocab, `save()` in the layout
`transformers` loads, plain-list `Encoding`s with character offsets and word ids, and `train()`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import read_json_object

#: The five special tokens every BERT vocab must contain, by role.
SPECIAL_TOKENS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
#: Google's `max_input_chars_per_word`: longer words become [UNK] whole.
MAX_INPUT_CHARS_PER_WORD = 100
CONTINUATION_PREFIX = "##"

Truncation = Literal["longest_first", "only_first", "only_second"] | bool | None


@dataclass
class Encoding:
    """One encoded text (or pair), as plain Python lists of equal length.

    `offsets[i]` is the (start, end) character span of token i in its own input string
    ((0, 0) for special tokens); `word_ids[i]` numbers the words of each sequence from 0
    (None for special tokens); `sequence_ids[i]` is 0 for A, 1 for B, None for specials.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    sequence_ids: list[int | None]
    special_tokens_mask: list[int]
    tokens: list[str]
    overflowing: list[Encoding] = field(default_factory=list, repr=False)

    def __len__(self) -> int:
        return len(self.input_ids)


def check_vocab_fits(vocab_size: int, model_vocab_size: int, where: str) -> None:
    """The one rule for a vocabulary against a model's embedding (`config.json` vocab_size).

    More tokens than embedding rows: an error (ids past the table). Fewer: allowed, as in
    checkpoints whose embedding is padded to a round size, with a note that the last ids are
    never produced (a vocab.txt cut short by mistake shows up here)."""
    if vocab_size > model_vocab_size:
        raise ClozeformerError(
            f"{where}: the vocab has {vocab_size} tokens but the model's vocab_size is {model_vocab_size}: "
            "mismatched vocab (use the model's own vocab.txt)"
        )
    if vocab_size < model_vocab_size:
        print(
            f"note: {where}: the vocab has {vocab_size} tokens, the model's embedding {model_vocab_size} rows: "
            f"ids {vocab_size}..{model_vocab_size - 1} are never produced",
            file=sys.stderr,
        )


def read_vocab(path: str | Path) -> list[str]:
    """Tokens of a `vocab.txt`, in id order (line i is id i), as transformers reads them."""
    path = Path(path)
    if not path.is_file():
        raise ClozeformerError(f"{path}: no such vocab file")
    try:
        # Universal newlines + rstrip("\n"): the same tokens transformers' load_vocab() sees.
        with open(path, encoding="utf-8") as f:
            tokens = [line.rstrip("\n") for line in f]
    except UnicodeDecodeError as e:
        raise ClozeformerError(f"{path}: not UTF-8 text (byte {e.start}); is this a vocab.txt?") from None
    if not tokens:
        raise ClozeformerError(f"{path}: vocab file is empty")
    seen: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok == "":
            raise ClozeformerError(f"{path}:{i + 1}: empty token in vocab")
        if tok in seen:
            raise ClozeformerError(f"{path}:{i + 1}: duplicate token {tok!r} (first at line {seen[tok] + 1})")
        seen[tok] = i
    for role, tok in SPECIAL_TOKENS.items():
        if tok not in seen:
            raise ClozeformerError(f"{path}: vocab lacks the special token {tok} ({role})")
    return tokens


def _model_max_length(cfg: dict) -> int:
    """`model_max_length` of a tokenizer_config.json; 512 when absent or "unbounded" (HF writes 1e30)."""
    max_len = cfg.get("model_max_length", 512)
    return max_len if isinstance(max_len, int) and max_len <= 10**6 else 512


def infer_lowercase(tokens: Sequence[str]) -> bool:
    """True when no vocab entry contains an uppercase letter.

    Markers such as `[CLS]`, `[unused0]` and bert-base-chinese's `<S>` / `<T>` are not words
    and are ignored.
    """
    return all(tok == tok.lower() for tok in tokens if (tok[0], tok[-1]) not in (("[", "]"), ("<", ">")))


def _bert_backend(vocab: dict[str, int] | None, lowercase: bool, chinese: bool = True, strip_accents: bool | None = None):
    """A `tokenizers.Tokenizer`: WordPiece over `vocab` (None: to be trained) behind BERT's normalizer and pre-tokenizer."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import models, normalizers, pre_tokenizers

    model = models.WordPiece(
        vocab,
        unk_token=SPECIAL_TOKENS["unk"],
        max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
        continuing_subword_prefix=CONTINUATION_PREFIX,
    )
    backend = Backend(model)
    backend.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=chinese, strip_accents=strip_accents, lowercase=lowercase
    )
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return backend


def _special_id(role: str) -> property:
    return property(lambda self: self._vocab[SPECIAL_TOKENS[role]], doc=f"The id of {SPECIAL_TOKENS[role]}.")


class Tokenizer:
    """A BERT WordPiece tokenizer over a fixed vocab (see module docstring)."""

    def __init__(
        self,
        vocab: Sequence[str],
        *,
        do_lower_case: bool = True,
        tokenize_chinese_chars: bool = True,
        strip_accents: bool | None = None,
        model_max_length: int = 512,
    ) -> None:
        from tokenizers import decoders, processors

        self._tokens: list[str] = list(vocab)
        self._vocab: dict[str, int] = {t: i for i, t in enumerate(self._tokens)}
        missing = [t for t in SPECIAL_TOKENS.values() if t not in self._vocab]
        if missing:
            raise ClozeformerError(f"vocab lacks the special token(s) {', '.join(missing)}")
        self.do_lower_case = bool(do_lower_case)
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.strip_accents = strip_accents  # None: follow do_lower_case, as Google does
        self.model_max_length = int(model_max_length)

        self._backend = backend = _bert_backend(self._vocab, self.do_lower_case, self.tokenize_chinese_chars, strip_accents)
        cls, sep = SPECIAL_TOKENS["cls"], SPECIAL_TOKENS["sep"]
        backend.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0 {sep}:0",
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
            special_tokens=[(cls, self._vocab[cls]), (sep, self._vocab[sep])],
        )
        backend.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX, cleanup=True)
        # Special tokens typed in the text ("[MASK]") stay whole, as in BertTokenizerFast.
        backend.add_special_tokens(list(SPECIAL_TOKENS.values()))
        self._truncation: tuple | None = None

    # ---------------------------------------------------------------- loading / saving
    @classmethod
    def from_pretrained(cls, path: str | Path) -> Tokenizer:
        """Load a directory holding `vocab.txt` (+ optional `tokenizer_config.json`), a vocab file, a
        directory with only the `tokenizers` library's `tokenizer.json` (as many Hub models ship), or
        a Hub model id.

        Casing comes from `tokenizer_config.json` (`do_lower_case`) when present; otherwise it is
        inferred from the vocab (no uppercase tokens -> uncased) and a line says so.
        """
        from clozeformer.hub import model_dir

        path = model_dir(path, "tokenizer")
        if path.is_dir():
            vocab_file, config_file = path / "vocab.txt", path / "tokenizer_config.json"
            if not vocab_file.is_file():
                if (path / "tokenizer.json").is_file():
                    return cls.from_tokenizer_json(path / "tokenizer.json")
                raise ClozeformerError(f"{path}: no vocab.txt or tokenizer.json in this directory")
        elif path.is_file():
            vocab_file, config_file = path, path.parent / "tokenizer_config.json"
        else:
            raise ClozeformerError(f"{path}: no such tokenizer directory or vocab file")
        tokens = read_vocab(vocab_file)
        cfg: dict = {}
        if config_file.is_file():
            cfg = read_json_object(config_file)
            for role, tok in SPECIAL_TOKENS.items():
                given = cfg.get(f"{role}_token")
                given = given.get("content") if isinstance(given, dict) else given
                if given is not None and given != tok:
                    raise ClozeformerError(f"{config_file}: {role}_token is {given!r}; clozeformer needs {tok}")
        if "do_lower_case" in cfg:
            lower = bool(cfg["do_lower_case"])
        else:
            lower = infer_lowercase(tokens)
            print(
                f"tokenizer: no do_lower_case in {config_file.name}; inferred {'uncased' if lower else 'cased'} "
                f"(do_lower_case={lower}) from {vocab_file.name}: it has {'no ' if lower else ''}uppercase tokens",
                file=sys.stderr,
            )
        return cls(
            tokens,
            do_lower_case=lower,
            tokenize_chinese_chars=bool(cfg.get("tokenize_chinese_chars", True)),
            strip_accents=cfg.get("strip_accents"),
            model_max_length=_model_max_length(cfg),
        )

    @classmethod
    def from_tokenizer_json(cls, path: Path) -> Tokenizer:
        """A BERT WordPiece `tokenizer.json` (the `tokenizers` library's format): its vocabulary and
        the casing, accent and CJK settings of its BertNormalizer, so ids equal transformers'
        `AutoTokenizer` on the same directory."""
        spec = read_json_object(path)
        model = spec.get("model") if isinstance(spec.get("model"), dict) else {}
        if model.get("type") != "WordPiece":
            raise ClozeformerError(f"{path}: a {model.get('type')!r} tokenizer; clozeformer reads BERT's WordPiece")
        if model.get("continuing_subword_prefix", CONTINUATION_PREFIX) != CONTINUATION_PREFIX:
            raise ClozeformerError(f"{path}: continuing_subword_prefix {model['continuing_subword_prefix']!r}; BERT uses ##")
        vocab = model.get("vocab")
        if not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))):
            raise ClozeformerError(f"{path}: model.vocab is not a token -> id map with ids 0..N-1")
        tokens = sorted(vocab, key=vocab.__getitem__)
        norm = spec.get("normalizer") if isinstance(spec.get("normalizer"), dict) else {}
        if norm.get("type") != "BertNormalizer":
            raise ClozeformerError(f"{path}: normalizer {norm.get('type')!r}; clozeformer reads BERT's BertNormalizer")
        config_file = path.parent / "tokenizer_config.json"
        cfg = read_json_object(config_file) if config_file.is_file() else {}
        return cls(
            tokens,
            do_lower_case=bool(norm.get("lowercase", True)),
            tokenize_chinese_chars=bool(norm.get("handle_chinese_chars", True)),
            strip_accents=norm.get("strip_accents"),
            model_max_length=_model_max_length(cfg),
        )

    def config(self) -> dict:
        """The `tokenizer_config.json` contents; `transformers.BertTokenizerFast` reads them too."""
        return {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.do_lower_case,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "strip_accents": self.strip_accents,
            "model_max_length": self.model_max_length,
            **{f"{role}_token": tok for role, tok in SPECIAL_TOKENS.items()},
            "clean_up_tokenization_spaces": True,
        }

    def save(self, directory: str | Path) -> Path:
        """Write `vocab.txt` + `tokenizer_config.json` (atomically) and return the directory."""
        from clozeformer.utils.io import atomic_write_json, atomic_write_text

        directory = Path(directory)
        atomic_write_text(directory / "vocab.txt", "".join(t + "\n" for t in self._tokens))
        atomic_write_json(directory / "tokenizer_config.json", self.config())
        return directory

    @property
    def fingerprint(self) -> str:
        """sha256 of the vocab and the casing settings: equal fingerprints encode identically."""
        h = hashlib.sha256()
        h.update("\n".join(self._tokens).encode("utf-8"))
        h.update(json.dumps([self.do_lower_case, self.tokenize_chinese_chars, self.strip_accents]).encode())
        return h.hexdigest()

    # ---------------------------------------------------------------- vocab
    @property
    def backend(self):
        """The underlying `tokenizers.Tokenizer` (batch encoding, overflow/stride windows)."""
        return self._backend

    @property
    def vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    pad_token_id = _special_id("pad")
    unk_token_id = _special_id("unk")
    cls_token_id = _special_id("cls")
    sep_token_id = _special_id("sep")
    mask_token_id = _special_id("mask")

    @property
    def special_ids(self) -> dict[str, int]:
        """{"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103} for Google's vocabs."""
        return {role: self._vocab[tok] for role, tok in SPECIAL_TOKENS.items()}

    def convert_ids_to_tokens(self, ids: int | Iterable[int]) -> str | list[str]:
        if isinstance(ids, int):
            return self._tokens[ids]
        return [self._tokens[i] for i in ids]

    def convert_tokens_to_ids(self, tokens: str | Iterable[str]) -> int | list[int]:
        unk = self.unk_token_id
        if isinstance(tokens, str):
            return self._vocab.get(tokens, unk)
        return [self._vocab.get(t, unk) for t in tokens]

    # ---------------------------------------------------------------- encoding
    def _set_truncation(self, max_length: int | None, truncation: Truncation, stride: int = 0) -> None:
        if truncation is True:
            truncation = "longest_first"
        off = max_length is None or truncation in (False, None, "do_not_truncate")
        want = None if off else (int(max_length), str(truncation), int(stride))
        if want == self._truncation:
            return
        if want is None:
            self._backend.no_truncation()
        elif want[1] not in ("longest_first", "only_first", "only_second"):
            raise ClozeformerError(f"truncation={truncation!r}: expected longest_first, only_first or only_second")
        else:
            self._backend.enable_truncation(want[0], stride=want[2], strategy=want[1])
        self._truncation = want

    @staticmethod
    def _convert(enc, overflowing: bool = False) -> Encoding:
        return Encoding(
            input_ids=list(enc.ids),
            token_type_ids=list(enc.type_ids),
            attention_mask=list(enc.attention_mask),
            offsets=[tuple(o) for o in enc.offsets],
            word_ids=list(enc.word_ids),
            sequence_ids=list(enc.sequence_ids),
            special_tokens_mask=list(enc.special_tokens_mask),
            tokens=list(enc.tokens),
            overflowing=[Tokenizer._convert(o) for o in enc.overflowing] if overflowing else [],
        )

    def encode(
        self,
        text: str,
        pair: str | None = None,
        max_length: int | None = None,
        truncation: Truncation = "longest_first",
        add_special_tokens: bool = True,
        stride: int = 0,
        return_overflowing: bool = False,
    ) -> Encoding:
        """Encode one text (or a pair: `[CLS] A [SEP] B [SEP]`).

        `max_length` counts the special tokens. With `return_overflowing`, the tokens cut off
        by truncation come back in `overflowing` as windows overlapping by `stride` tokens.
        """
        self._set_truncation(max_length, truncation, stride)
        enc = self._backend.encode(text, pair, add_special_tokens=add_special_tokens)
        return self._convert(enc, return_overflowing)

    def encode_batch(
        self,
        texts: Sequence[str],
        pairs: Sequence[str] | None = None,
        max_length: int | None = None,
        truncation: Truncation = "longest_first",
        add_special_tokens: bool = True,
        stride: int = 0,
        return_overflowing: bool = False,
    ) -> list[Encoding]:
        """`encode` over a batch, in parallel in Rust."""
        if pairs is not None and len(pairs) != len(texts):
            raise ClozeformerError(f"encode_batch: {len(texts)} texts but {len(pairs)} pairs")
        self._set_truncation(max_length, truncation, stride)
        inputs = list(texts) if pairs is None else list(zip(texts, pairs))
        encs = self._backend.encode_batch(inputs, add_special_tokens=add_special_tokens)
        return [self._convert(e, return_overflowing) for e in encs]

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of `text`, without [CLS]/[SEP]."""
        self._set_truncation(None, None)
        return list(self._backend.encode(text, add_special_tokens=False).tokens)

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Join pieces back into text (`##` pieces glued, spaces before punctuation removed)."""
        return self._backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    # ---------------------------------------------------------------- training
    @classmethod
    def train(
        cls,
        texts: Iterable[str] | Iterator[list[str]],
        vocab_size: int = 30522,
        *,
        do_lower_case: bool = True,
        min_frequency: int = 2,
        limit_alphabet: int = 1000,
        num_unused: int = 99,
        show_progress: bool = True,
    ) -> Tokenizer:
        """Learn a WordPiece vocab from `texts` (strings, or batches of strings).

        The layout follows Google's vocabs: `[PAD]` = 0, then `num_unused` `[unusedN]` slots
        (room for later domain tokens), then `[UNK] [CLS] [SEP] [MASK]`; with the default 99
        unused slots the ids are 0 / 100 / 101 / 102 / 103 exactly as in bert-base-*.
        """
        from tokenizers import trainers

        specials = (
            [SPECIAL_TOKENS["pad"]]
            + [f"[unused{i}]" for i in range(num_unused)]
            + [SPECIAL_TOKENS[r] for r in ("unk", "cls", "sep", "mask")]
        )
        if vocab_size < len(specials) + 2:
            raise ClozeformerError(f"vocab_size={vocab_size} is too small for {len(specials)} special tokens")
        backend = _bert_backend(None, do_lower_case)
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=specials,
            limit_alphabet=limit_alphabet,
            continuing_subword_prefix=CONTINUATION_PREFIX,
            show_progress=show_progress,
        )
        backend.train_from_iterator(texts, trainer=trainer)
        by_id = sorted(backend.get_vocab().items(), key=lambda kv: kv[1])
        tokens = [t for t, _ in by_id]
        if [i for _, i in by_id] != list(range(len(tokens))):
            raise RuntimeError("trained vocab ids are not contiguous")  # would be a tokenizers bug
        if len(tokens) <= len(specials):
            raise ClozeformerError("tokenizer training saw no text")
        return cls(tokens, do_lower_case=do_lower_case)
