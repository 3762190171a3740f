"""`prepare`: text corpora -> tokenized, memory-mappable pretraining shards.

    reader (this process)      files -> documents, filtered, deduplicated, train/val by hash
      -> workers (processes)   sentence split + WordPiece, chunks of ~1 MB of text, in order
      -> builder (this process) packed (RoBERTa FULL-SENTENCES) or NSP (BERT) sequences
      -> writer                numpy shards + offsets, manifest.json

Determinism: the reader and the builders run in this process in file order, the workers only
map chunks to token ids and their results are consumed in submission order, and every random
choice comes from generators seeded by (seed, split). So the same input and seed give
byte-identical shards whatever `--workers` is. Memory is bounded: a fixed number of chunks is
in flight, NSP's random-next pool is capped in tokens, shards are flushed every `shard_tokens`.

Layout of DATA_DIR:

    manifest.json                   counts, settings, special ids, shard list (manifest.py: Manifest)
    tokenizer/                      vocab.txt + tokenizer_config.json of the tokenizer used
    {split}-00000.tokens.npy        all sequences of the shard back to back, uint16 (uint32 if V > 65536);
                                    each is complete: [CLS] ... [SEP]
    {split}-00000.offsets.npy       int64 (n + 1,): sequence i is tokens[offsets[i]:offsets[i+1]]
    {split}-00000.b_start.npy       nsp only, int32 (n,): index of B's first token (token type 1 from here)
    {split}-00000.nsp.npy           nsp only, uint8 (n,): 1 = B is a random segment, 0 = B follows A
    {split}-00000.labels.npy        static masking only, int32 like tokens: original id or -100
    prepare_config.json, prepare_summary.json   the resolved config; timings, throughput, peak RSS
"""

from __future__ import annotations

import collections
import hashlib
import os
import random
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from clozeformer.data.manifest import DocumentCounts, Manifest, Shard, SpecialIds, Split, TokenizerInfo
from clozeformer.data.masking import MaskingConfig, TokenTable, mask_tokens, sample_keys
from clozeformer.data.padding import pad_right
from clozeformer.data.readers import FORMATS, CorpusReader, Document, ReaderStats, check_corpus_args
from clozeformer.utils.configs import SEED_RANGE, check_ranges, config_dict, flag_help
from clozeformer.utils.errors import ClozeformerError

SPLITS = ("train", "val")
STATIC_MASK_EPOCH = 1 << 40  # keys of prepare-time masks never collide with a loader epoch's
CHUNK_CHARS = 1 << 20  # text per worker task
NSP_RANDOM_NEXT_PROB = 0.5


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ClozeformerError(message)


@dataclass
class PrepareConfig:
    input: list[str] = field(
        default_factory=list, metadata=flag_help("corpus files, directories or globs (gz ok)", required=True)
    )
    tokenizer: str = field(
        default="", metadata=flag_help("tokenizer directory (vocab.txt, tokenizer_config.json)", required=True)
    )
    out: str = field(
        default="", metadata={"help": "output DATA_DIR (written atomically; must be new or empty)", "required": True}
    )
    overwrite: bool = field(default=False, metadata={"help": "replace a DATA_DIR that clozeformer wrote before"})
    max_length: int = field(
        default=128, metadata={"help": "tokens per sequence, [CLS] and [SEP]s included", "aliases": ("seq_len",)}
    )
    mode: Literal["packed", "nsp"] = field(
        default="packed", metadata={"help": "packed: RoBERTa FULL-SENTENCES; nsp: BERT sentence pairs with next-sentence labels"}
    )
    format: str = field(default="auto", metadata={"help": "input format", "choices": list(FORMATS)})
    static_masking: bool = field(default=False, metadata={"help": "store masks in the shards (original recipe)"})
    dupe_factor: int = field(default=1, metadata={"help": "copies of the data, each masked differently (static)"})
    mlm_probability: float = field(default=0.15, metadata={"help": "static masking: fraction masked"})
    max_predictions: int = field(default=20, metadata={"help": "static masking: cap per sequence"})
    masking_strategy: Literal["exact", "bernoulli"] = field(
        default="exact", metadata={"help": "static masking: exact count (Google) or per-token Bernoulli"}
    )
    whole_word: bool = field(default=False, metadata={"help": "static masking: whole-word masking"})
    short_seq_prob: float = field(default=0.1, metadata={"help": "nsp: probability of a shorter target length"})
    val_fraction: float = field(default=0.005, metadata={"help": "fraction of documents held out for validation"})
    seed: int = field(default=12345, metadata={"help": "seed for splits, pairing and static masks", **SEED_RANGE})
    workers: int = field(default=2, metadata={"help": "tokenizer processes (0: tokenize in this process)"})
    min_doc_chars: int = field(default=200, metadata={"help": "drop documents shorter than this"})
    dedupe: bool = field(default=True, metadata={"help": "drop exact duplicate documents"})
    max_doc_chars: int = field(default=1_000_000, metadata={"help": "cut longer documents (books) at paragraphs"})
    shard_tokens: int = field(default=1 << 24, metadata={"help": "tokens per shard file"})
    nsp_pool_tokens: int = field(default=1 << 22, metadata={"help": "nsp: tokens of recent documents kept for random B"})
    progress: bool = field(default=True, metadata={"help": "show a progress bar"})

    def __post_init__(self) -> None:
        # In this order: the first problem is the one reported.
        check_ranges(self)
        self.input = check_corpus_args(self.input, self.out, self.format)
        _require(bool(self.tokenizer), "--tokenizer: give the tokenizer directory (with vocab.txt)")
        _require(self.mode in ("packed", "nsp"), f"--mode {self.mode!r}: expected packed or nsp")
        _require(8 <= self.max_length <= 65535, f"--max-length {self.max_length}: must be between 8 and 65535")
        _require(self.dupe_factor >= 1, f"--dupe-factor {self.dupe_factor}: must be >= 1")
        _require(
            self.dupe_factor <= 1 or self.static_masking,
            "--dupe-factor only makes sense with --static-masking (dynamic masking draws new masks every epoch)",
        )
        _require(0.0 <= self.val_fraction < 1.0, f"--val-fraction {self.val_fraction}: must be in [0, 1)")
        _require(0.0 <= self.short_seq_prob <= 1.0, f"--short-seq-prob {self.short_seq_prob}: must be in [0, 1]")
        _require(self.workers >= 0, f"--workers {self.workers}: must be >= 0")
        _require(self.shard_tokens >= self.max_length, f"--shard-tokens {self.shard_tokens}: must be at least --max-length")
        self.masking()  # validates the static masking fields

    def masking(self) -> MaskingConfig:
        return MaskingConfig(
            mlm_probability=self.mlm_probability,
            strategy=self.masking_strategy,
            max_predictions=self.max_predictions,
            whole_word=self.whole_word,
        )


# ----------------------------------------------------------------------------- tokenization workers
_WORKER_BACKEND = None


def _init_worker(tokenizer_json: str, parent: int) -> None:
    import signal

    from clozeformer.utils.procs import die_with_parent

    die_with_parent(signal.SIGKILL, parent)  # a killed `prepare` leaves no tokenizer workers behind
    # One process per core does the parallelism; tokenizers' own thread pool would oversubscribe.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    global _WORKER_BACKEND
    from tokenizers import Tokenizer as Backend

    _WORKER_BACKEND = Backend.from_str(tokenizer_json)


def _tokenize_docs(docs: list[Document], backend=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Sentence-split and tokenize documents -> per document (flat ids uint32, sentence lengths int64)."""
    backend = backend or _WORKER_BACKEND
    per_doc = [doc.sentences() for doc in docs]
    sentences = [s for sents in per_doc for s in sents]
    encs = backend.encode_batch_fast(sentences, add_special_tokens=False) if sentences else []
    out, k = [], 0
    for sents in per_doc:
        ids = [e.ids for e in encs[k : k + len(sents)]]
        k += len(sents)
        lens = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter((i for x in ids for i in x), dtype=np.uint32, count=int(lens.sum()))
        out.append((flat, lens[lens > 0]))
    return out


class _TokenizerPool:
    """Ordered map of chunks -> token ids over worker processes, with a bounded number in flight."""

    def __init__(self, tokenizer_json: str, workers: int) -> None:
        self.pending: collections.deque = collections.deque()
        self.pool, self.max_inflight = None, 2 * workers + 1
        if workers > 0:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            # spawn, not fork: forking after the Rust thread pool (or torch's) started can deadlock.
            # ProcessPoolExecutor, not Pool: a worker that dies is an error here, not a silent respawn.
            self.pool = ProcessPoolExecutor(
                workers, mp_context=mp.get_context("spawn"), initializer=_init_worker, initargs=(tokenizer_json, os.getpid())
            )
        else:
            from tokenizers import Tokenizer as Backend

            self.backend = Backend.from_str(tokenizer_json)

    def map(self, chunks: Iterator[tuple[list[str], list[Document]]]) -> Iterator:
        """(meta, token ids) for each (meta, documents) chunk, in order; at most `max_inflight` queued."""
        for meta, docs in chunks:
            job = _tokenize_docs(docs, self.backend) if self.pool is None else self.pool.submit(_tokenize_docs, docs)
            self.pending.append((meta, job))
            while len(self.pending) >= self.max_inflight:
                yield self._pop()
        while self.pending:
            yield self._pop()

    def _pop(self):
        from concurrent.futures.process import BrokenProcessPool

        meta, res = self.pending.popleft()
        try:
            return meta, res if self.pool is None else res.result()
        except BrokenProcessPool:
            raise ClozeformerError(
                "a tokenizer worker process died (out of memory? killed?); retry, or use --workers 0 to tokenize in this process"
            ) from None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def terminate(self) -> None:
        if self.pool is not None:
            procs = list((getattr(self.pool, "_processes", None) or {}).values())
            self.pool.shutdown(wait=False, cancel_futures=True)
            for p in procs:  # the workers this pool started, and only those
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=5)


# ----------------------------------------------------------------------------- sequence builders
@dataclass
class Instance:
    tokens: np.ndarray  # complete sequence, [CLS] ... [SEP]
    b_start: int = 0  # nsp: first index of segment B
    nsp_label: int = 0  # nsp: 1 = random next


class PackedBuilder:
    """RoBERTa FULL-SENTENCES: whole sentences packed up to seq_len, documents joined by [SEP].

    A sentence that does not fit starts the next sequence; one longer than a whole sequence is
    cut. Sequences are [CLS] s1 s2 ... [SEP] (with [SEP] between documents inside).
    """

    def __init__(self, seq_len: int, cls_id: int, sep_id: int) -> None:
        self.max_tokens = seq_len - 2
        self.cls = np.array([cls_id], dtype=np.uint32)
        self.sep = np.array([sep_id], dtype=np.uint32)
        self.parts: list[np.ndarray] = []
        self.n = 0

    def _emit(self) -> Instance:
        if self.parts and self.parts[-1] is self.sep:  # a document boundary at the very end
            self.parts.pop()
        inst = Instance(np.concatenate([self.cls, *self.parts, self.sep]))
        self.parts, self.n = [], 0
        return inst

    def add_document(self, sentences: list[np.ndarray]) -> Iterator[Instance]:
        if self.n > 0:
            if self.n + 1 >= self.max_tokens:
                yield self._emit()
            else:
                self.parts.append(self.sep)
                self.n += 1
        for s in sentences:
            while len(s):
                room = self.max_tokens - self.n
                if len(s) <= room:
                    self.parts.append(s)
                    self.n += len(s)
                    break
                if self.n > 0 and len(s) <= self.max_tokens:
                    yield self._emit()  # the sentence starts the next sequence whole
                    continue
                self.parts.append(s[:room])  # longer than a sequence: cut
                self.n += room
                s = s[room:]
                yield self._emit()

    def finish(self) -> Iterator[Instance]:
        if self.n > 0:
            yield self._emit()


class NspBuilder:
    """Google's create_instances_from_document, streaming.

    Sentences accumulate to a target length (`short_seq_prob` of targets uniform in
    [2, max]); A ends at a random sentence boundary; half of the time B is a random segment of
    another document (label 1), otherwise the rest of the chunk (label 0); the longer segment
    is trimmed one token at a time from a random end. Three deliberate differences: the random
    document comes from a pool of recent documents capped at `pool_tokens` (Google holds the
    whole corpus in memory); the target length is drawn per pair rather than per document,
    so books cut into long documents get the same share of short sequences as articles; and a
    one-sentence chunk drawn "not random" takes the next sentence as B (or, at the end of a
    document, is cut in two) instead of being forced random, so labels stay at 50/50 (Google's
    rule gives ~53% random on Wikipedia).
    """

    def __init__(
        self, seq_len: int, cls_id: int, sep_id: int, rng: random.Random, short_seq_prob: float, pool_tokens: int
    ) -> None:
        self.max_num_tokens = seq_len - 3
        self.cls, self.sep, self.rng, self.short_seq_prob = cls_id, sep_id, rng, short_seq_prob
        self.pool: collections.deque[list[np.ndarray]] = collections.deque()  # recent documents, for random B
        self.pool_size, self.pool_tokens = 0, pool_tokens

    def _target(self) -> int:
        if self.rng.random() < self.short_seq_prob:
            return self.rng.randint(2, self.max_num_tokens)
        return self.max_num_tokens

    def _truncate(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # Google's truncate_seq_pair, with counters instead of list deletions.
        af, ab, bf, bb = 0, len(a), 0, len(b)
        while (ab - af) + (bb - bf) > self.max_num_tokens:
            front = self.rng.random() < 0.5  # trim the longer segment at its front or its back
            if ab - af > bb - bf:
                af, ab = (af + 1, ab) if front else (af, ab - 1)
            else:
                bf, bb = (bf + 1, bb) if front else (bf, bb - 1)
        return a[af:ab], b[bf:bb]

    def _instance(self, a: np.ndarray, b: np.ndarray, is_random: bool) -> Instance:
        a, b = self._truncate(a, b)
        tokens = np.concatenate([[self.cls], a, [self.sep], b, [self.sep]]).astype(np.uint32)
        return Instance(tokens, b_start=len(a) + 2, nsp_label=int(is_random))

    def add_document(self, doc: list[np.ndarray], dupe_factor: int = 1) -> Iterator[Instance]:
        rng = self.rng
        for _ in range(dupe_factor):
            target = self._target()
            chunk: list[np.ndarray] = []
            length = 0
            i = 0
            while i < len(doc):
                chunk.append(doc[i])
                length += len(doc[i])
                if i == len(doc) - 1 or length >= target:
                    is_random = rng.random() < NSP_RANDOM_NEXT_PROB
                    if not is_random and len(chunk) == 1:
                        # Google forces a random B here (no sentence boundary in the chunk), which
                        # pushes the random share above 50%; take the next sentence as B instead,
                        # or, at the end of the document, cut the last sentence in two.
                        if i + 1 < len(doc):
                            i += 1
                            chunk.append(doc[i])
                        elif len(chunk[0]) >= 2:
                            cut = rng.randint(1, len(chunk[0]) - 1)
                            chunk = [chunk[0][:cut], chunk[0][cut:]]
                        else:
                            is_random = True
                    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                    a = np.concatenate(chunk[:a_end])
                    if is_random:
                        target_b = target - len(a)
                        other = self.pool[rng.randint(0, len(self.pool) - 1)] if self.pool else doc
                        start = rng.randint(0, len(other) - 1)
                        parts, n = [], 0
                        for s in other[start:]:
                            parts.append(s)
                            n += len(s)
                            if n >= target_b:
                                break
                        b = np.concatenate(parts)
                        i -= len(chunk) - a_end  # the unused sentences start the next chunk
                    else:
                        b = np.concatenate(chunk[a_end:])
                    yield self._instance(a, b, is_random)
                    chunk, length = [], 0
                    target = self._target()
                i += 1
        self.pool.append(doc)
        self.pool_size += sum(len(s) for s in doc)
        while self.pool_size > self.pool_tokens and len(self.pool) > 1:
            self.pool_size -= sum(len(s) for s in self.pool.popleft())

    def finish(self) -> Iterator[Instance]:
        return iter(())


# ----------------------------------------------------------------------------- shard writer
class ShardWriter:
    """Buffers sequences and writes one shard per `shard_tokens` tokens (plus optional static masks)."""

    def __init__(self, directory: Path, split: str, dtype, shard_tokens: int, nsp: bool, masker=None) -> None:
        self.dir, self.split, self.dtype = directory, split, dtype
        self.shard_tokens, self.nsp, self.masker = shard_tokens, nsp, masker
        self.pending: list[Instance] = []
        self.buf: list[tuple] = []  # per sequence of the shard: (tokens, labels or None, b_start, nsp label)
        self.shards: list[Shard] = []
        self.buf_tokens = self.num_sequences = self.num_random_next = self.max_length = 0

    def add(self, inst: Instance) -> None:
        self.pending.append(inst)
        if len(self.pending) >= 1024:
            self._commit()

    def _commit(self) -> None:
        if not self.pending:
            return
        ids = labels = None
        if self.masker is not None:
            ids, labels = self.masker([p.tokens for p in self.pending], self.num_sequences + len(self.buf))
        for j, inst in enumerate(self.pending):
            n = len(inst.tokens)
            tokens = inst.tokens if ids is None else ids[j, :n]
            label = None if labels is None else labels[j, :n].astype(np.int32)
            self.buf.append((tokens.astype(self.dtype), label, inst.b_start, inst.nsp_label))
            self.buf_tokens += n
            if self.buf_tokens >= self.shard_tokens:
                self._flush()
        self.pending = []

    def _save(self, name: str, arr: np.ndarray) -> str:
        with open(self.dir / name, "wb") as f:  # inside prepare's atomic_dir: the whole DATA_DIR appears at once
            np.save(f, arr, allow_pickle=False)
        return name

    def _flush(self) -> None:
        if not self.buf:
            return
        stem = f"{self.split}-{len(self.shards):05d}"
        seqs, labels, b_start, nsp = zip(*self.buf)
        lens = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        tokens = self._save(f"{stem}.tokens.npy", np.concatenate(seqs))
        offsets_file = self._save(f"{stem}.offsets.npy", np.pad(np.cumsum(lens), (1, 0)))
        files = {}
        if self.nsp:
            files["b_start"] = self._save(f"{stem}.b_start.npy", np.asarray(b_start, dtype=np.int32))
            files["nsp"] = self._save(f"{stem}.nsp.npy", np.asarray(nsp, dtype=np.uint8))
            self.num_random_next += int(sum(nsp))
        if self.masker is not None:
            files["labels"] = self._save(f"{stem}.labels.npy", np.concatenate(labels))
        self.shards.append(Shard(tokens, offsets_file, len(self.buf), int(lens.sum()), **files))
        self.max_length = max(self.max_length, int(lens.max()))
        self.num_sequences += len(self.buf)
        self.buf, self.buf_tokens = [], 0

    def close(self) -> Split:
        self._commit()
        self._flush()
        return Split(
            tuple(self.shards),
            max_length=self.max_length if self.num_sequences else None,
            random_next_fraction=self.num_random_next / max(1, self.num_sequences) if self.nsp else None,
        )


def _static_masker(table: TokenTable, cfg: MaskingConfig, seed: int, split_code: int):
    def mask(seqs: list[np.ndarray], first_index: int) -> tuple[np.ndarray, np.ndarray]:
        ids, attn = pad_right(seqs, table.pad_id)
        keys = sample_keys(seed, STATIC_MASK_EPOCH + split_code, np.arange(first_index, first_index + len(seqs)))
        return mask_tokens(ids, keys, table, cfg, attn)

    return mask


# ----------------------------------------------------------------------------- main entry
def _val_threshold(fraction: float) -> int:
    return int(fraction * (1 << 64))


def _is_val(digest: bytes, seed: int, threshold: int) -> bool:
    h = hashlib.blake2b(digest, digest_size=8, key=seed.to_bytes(8, "little", signed=True)).digest()
    return int.from_bytes(h, "little") < threshold


def _peak_rss_mb() -> tuple[float, float]:
    """(this process, largest finished child) peak resident set size in MB (Linux reports KiB)."""
    scale = (1024 if sys.platform != "darwin" else 1) / 2**20
    me, kids = (resource.getrusage(who).ru_maxrss * scale for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me, kids


def prepare(cfg: PrepareConfig) -> Manifest:
    """Run the pipeline; returns the manifest (also written to `cfg.out/manifest.json`)."""
    from clozeformer.modeling.tokenizer import Tokenizer
    from clozeformer.utils.io import atomic_dir, atomic_write_json, check_output_dir

    t0 = time.perf_counter()
    tok = Tokenizer.from_pretrained(cfg.tokenizer)
    reader = CorpusReader(
        cfg.input, cfg.format, min_doc_chars=cfg.min_doc_chars, dedupe=cfg.dedupe, max_doc_chars=cfg.max_doc_chars
    )
    out = check_output_dir(cfg.out, cfg.overwrite)
    with atomic_dir(out, owner="prepare") as tmp:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a data dir is meant to be shared
        tok.save(tmp / "tokenizer")
        outputs = _split_outputs(cfg, tok, tmp)
        counts = _tokenize_into(outputs, reader, tok, cfg)
        reader.require_documents()
        splits = {split: outputs[split].close() for split in SPLITS}
        if splits["train"].num_sequences == 0:
            raise ClozeformerError(
                f"no training sequences were produced from {reader.stats.kept:,} documents "
                f"(all held out? --val-fraction {cfg.val_fraction})"
            )
        elapsed, rss = time.perf_counter() - t0, _peak_rss_mb()
        manifest = _manifest(cfg, tok, reader.stats, counts, splits)
        summary = _summary(cfg, reader.stats, counts, elapsed, rss)
        manifest.write(tmp)
        atomic_write_json(tmp / "prepare_summary.json", summary)
        atomic_write_json(tmp / "prepare_config.json", config_dict(cfg))
    _print_done(manifest, summary, reader.stats, elapsed, rss, out)
    return manifest


def _token_dtype(tok) -> np.dtype:
    return np.dtype(np.uint16 if tok.vocab_size <= 1 << 16 else np.uint32)


def _split_outputs(cfg: PrepareConfig, tok, directory: Path) -> dict[str, _SplitOutput]:
    """Each split's sequence builder and shard writer; the split's code seeds its NSP pairing and static masks."""
    table = TokenTable.from_tokenizer(tok) if cfg.static_masking else None
    ids = SpecialIds(**tok.special_ids)
    nsp = cfg.mode == "nsp"
    outputs = {}
    for code, split in enumerate(SPLITS):
        masker = _static_masker(table, cfg.masking(), cfg.seed, code) if table is not None else None
        writer = ShardWriter(directory, split, _token_dtype(tok), cfg.shard_tokens, nsp, masker)
        if nsp:
            rng = random.Random(cfg.seed * 4 + code)
            builder = NspBuilder(cfg.max_length, ids.cls, ids.sep, rng, cfg.short_seq_prob, cfg.nsp_pool_tokens)
        else:
            builder = PackedBuilder(cfg.max_length, ids.cls, ids.sep)
        outputs[split] = _SplitOutput(builder, writer, cfg.dupe_factor)
    return outputs


class _SplitOutput:
    """One split: its sequence builder (packed or NSP) feeding its shard writer."""

    def __init__(self, builder: PackedBuilder | NspBuilder, writer: ShardWriter, dupe_factor: int) -> None:
        self.builder, self.writer, self.dupe_factor = builder, writer, dupe_factor
        self.nsp = isinstance(builder, NspBuilder)

    def add_document(self, sentences: list[np.ndarray]) -> None:
        extra = (self.dupe_factor,) if self.nsp else ()
        self._write(self.builder.add_document(sentences, *extra))

    def _write(self, instances: Iterator[Instance]) -> None:
        for inst in instances:
            # NSP builds dupe_factor different pairings itself; packed copies differ by their masks only.
            for _ in range(1 if self.nsp else self.dupe_factor):
                self.writer.add(inst)

    def close(self) -> Split:
        self._write(self.builder.finish())
        return self.writer.close()


def _chunks(reader: CorpusReader, cfg: PrepareConfig) -> Iterator[tuple[list[str], list[Document]]]:
    """The corpus in chunks of ~CHUNK_CHARS of text: (split of each document, the documents)."""
    threshold = _val_threshold(cfg.val_fraction)
    meta, docs, size = [], [], 0
    for doc in reader:
        meta.append("val" if _is_val(doc.digest(), cfg.seed, threshold) else "train")
        docs.append(doc)
        size += sum(map(len, doc.units))
        if size >= CHUNK_CHARS:
            yield meta, docs
            meta, docs, size = [], [], 0
    if docs:
        yield meta, docs


def _tokenize_into(outputs: dict[str, _SplitOutput], reader: CorpusReader, tok, cfg: PrepareConfig) -> collections.Counter:
    """Tokenize the corpus on the worker pool and feed each document, in order, to its split's
    output; returns the counts of documents, sentences and tokens."""
    counts = collections.Counter()
    pool = _TokenizerPool(tok.backend.to_str(), cfg.workers)
    bar = reader.progress_bar("prepare", cfg.progress, smoothing=0.05)
    t_start = time.perf_counter()
    try:
        for meta, results in pool.map(_chunks(reader, cfg)):
            for split, (flat, lens) in zip(meta, results):
                if len(lens) == 0:
                    counts["empty_documents"] += 1
                    continue
                counts.update({f"{split}_documents": 1, "sentences": len(lens), "tokens": len(flat)})
                outputs[split].add_document(np.split(flat, np.cumsum(lens)[:-1]))
            bar.update(reader.disk_bytes_done() - bar.n)
            dt = max(time.perf_counter() - t_start, 1e-9)
            bar.set_postfix_str(
                f"{reader.stats.bytes / dt / 1e6:.1f} MB/s text, {counts['tokens'] / dt / 1e3:.0f}k tok/s", refresh=False
            )
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        bar.close()
    return counts


def _manifest(cfg: PrepareConfig, tok, stats: ReaderStats, counts: collections.Counter, splits: dict[str, Split]) -> Manifest:
    settings = {k: v for k, v in config_dict(cfg).items() if k not in ("input", "tokenizer", "out", "workers", "progress")}
    return Manifest(
        mode=cfg.mode,
        seq_len=cfg.max_length,
        vocab_size=tok.vocab_size,
        token_dtype=_token_dtype(tok).name,
        special_ids=SpecialIds(**tok.special_ids),
        splits=splits,
        static_masking=cfg.static_masking,
        dupe_factor=cfg.dupe_factor,
        tokenizer=TokenizerInfo("tokenizer", tok.fingerprint, tok.do_lower_case),
        documents=DocumentCounts(counts["train_documents"], counts["val_documents"], counts["empty_documents"]),
        sentences=counts["sentences"],
        corpus_tokens=counts["tokens"],
        reader=stats,
        settings=settings,
    )


def _summary(cfg: PrepareConfig, stats: ReaderStats, counts: collections.Counter, elapsed: float, rss) -> dict:
    """prepare_summary.json: how long it took and how much memory it used."""
    return {
        "seconds": round(elapsed, 2),
        "input_bytes": stats.bytes,
        "mb_per_s": round(stats.bytes / elapsed / 1e6, 3),
        "tokens_per_s": round(counts["tokens"] / elapsed, 1),
        "peak_rss_main_mb": round(rss[0], 1),
        "peak_rss_worker_mb": round(rss[1], 1),
        "workers": cfg.workers,
        "reader_summary": stats.summary(),
    }


def _print_done(m: Manifest, summary: dict, stats: ReaderStats, elapsed: float, rss, out: Path) -> None:
    print(stats.summary(), file=sys.stderr)
    print(
        f"prepare: {m.num_train:,} train / {m.num_val:,} val sequences "
        f"({m.train_tokens:,} / {m.val_tokens:,} tokens) in {elapsed:.1f} s, "
        f"{summary['mb_per_s']:.2f} MB/s, {summary['tokens_per_s']:,.0f} tokens/s, "
        f"peak RSS {rss[0]:.0f} MB (main) / {rss[1]:.0f} MB (largest worker) -> {out}",
        file=sys.stderr,
    )
