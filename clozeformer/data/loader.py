"""Pretraining batches from `prepare`'s shards: seeded shuffle, rank split, dynamic masking, exact resume.

    loader = PretrainLoader(data_dir, split="train", batch_size=32, seed=0, rank=0, world_size=1,
                            masking=MaskingConfig(), shuffle=True, drop_last=True)
    for batch in loader:    # train: endless, reshuffled each epoch; val: one pass per iter()
        ...                 # input_ids, token_type_ids, attention_mask, labels (B, T) int64,
                            # next_sentence_label (B,) for NSP data; T = longest sequence in the batch

Order: epoch e visits the split in the permutation PCG64(seed, e). Global step k covers
permutation[k*G:(k+1)*G] with G = batch_size * world_size, and rank r takes the r-th slice of
batch_size. So the ranks of a step together hold exactly the batch a one-process loader with
batch size G yields at that step: 2-process DDP sees the same data as 1-process training.

Masks: sequence i in epoch e is masked with keys (seed, e, i) (see masking.py), so a mask does
not depend on rank, batch composition or history, and `state_dict()` needs only counters:
`load_state_dict` resumes with the very batch (masks included) an uninterrupted run would give.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from clozeformer.data.manifest import MANIFEST, Manifest
from clozeformer.data.masking import IGNORE_INDEX, MaskingConfig, TokenTable, mask_tokens, next_token_labels, sample_keys
from clozeformer.data.padding import pad_right
from clozeformer.utils.errors import ClozeformerError

__all__ = ["PretrainLoader", "PretrainDataset", "MaskingConfig", "read_manifest"]

VAL_EPOCH = 0  # validation masks are the same on every pass, so val losses are comparable


def read_manifest(data_dir: str | Path) -> Manifest:
    """The manifest of a prepared DATA_DIR (`Manifest.read`); ClozeformerError when it is missing or corrupt."""
    return Manifest.read(data_dir)


class PretrainDataset:
    """Random access to one split's sequences (memory-mapped, nothing loaded up front but offsets)."""

    def __init__(self, data_dir: str | Path, split: str = "train") -> None:
        if split not in ("train", "val"):
            raise ClozeformerError(f"split={split!r}: expected 'train' or 'val'")
        self.dir = Path(data_dir)
        self.manifest = Manifest.read(self.dir)
        self.split = split
        self.nsp = self.manifest.nsp
        self.static = self.manifest.static_masking
        info = self.manifest.splits.get(split)
        if info is None:
            raise ClozeformerError(f"{self.dir / MANIFEST}: no {split!r} split")
        self.tokens, self.offsets, self.b_start, self.nsp_labels, self.labels = [], [], [], [], []
        counts = []
        for sh in info.shards:
            try:
                self.tokens.append(np.load(self.dir / sh.tokens, mmap_mode="r", allow_pickle=False))
                self.offsets.append(np.load(self.dir / sh.offsets, allow_pickle=False))
                if self.nsp:
                    self.b_start.append(np.load(self.dir / sh.b_start, allow_pickle=False))
                    self.nsp_labels.append(np.load(self.dir / sh.nsp, allow_pickle=False))
                if self.static:
                    self.labels.append(np.load(self.dir / sh.labels, mmap_mode="r", allow_pickle=False))
            except (OSError, ValueError) as e:
                raise ClozeformerError(f"{self.dir}: shard {sh.tokens} is missing or corrupt ({e})") from None
            n = len(self.offsets[-1]) - 1
            if n != sh.num_sequences or self.offsets[-1][-1] != len(self.tokens[-1]):
                raise ClozeformerError(f"{self.dir / sh.tokens}: does not match its offsets/manifest (truncated?)")
            counts.append(n)
        self.starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])  # first global index per shard
        self.num_tokens = info.num_tokens

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.gather(np.array([i]))[0]

    def gather(self, indices: np.ndarray) -> list[dict[str, Any]]:
        """Rows for global sequence indices: dicts of input_ids (+ b_start, nsp, labels) as numpy."""
        shard = np.searchsorted(self.starts, indices, side="right") - 1
        rows = []
        for i, s in zip(indices.tolist(), shard.tolist()):  # one slice per sequence
            j = i - int(self.starts[s])
            a, b = int(self.offsets[s][j]), int(self.offsets[s][j + 1])
            row = {"input_ids": np.asarray(self.tokens[s][a:b], dtype=np.int64)}
            if self.nsp:
                row["b_start"] = int(self.b_start[s][j])
                row["next_sentence_label"] = int(self.nsp_labels[s][j])
            if self.static:
                row["labels"] = np.asarray(self.labels[s][a:b], dtype=np.int64)
            rows.append(row)
        return rows


class PretrainLoader:
    """Batches of a prepared split; see the module docstring for the order, masking and resume rules."""

    def __init__(
        self,
        data_dir: str | Path,
        split: str = "train",
        batch_size: int = 32,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        masking: MaskingConfig | None = None,
        shuffle: bool = True,
        drop_last: bool = True,
        causal: bool = False,
    ) -> None:
        """`causal`: no masking; labels are the next tokens (`next_token_labels`), for a
        left-to-right LM. Otherwise `masking` (default: BERT's 15%, 80/10/10)."""
        if batch_size < 1:
            raise ClozeformerError(f"batch_size={batch_size}: must be >= 1")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ClozeformerError(f"rank={rank}, world_size={world_size}: need 0 <= rank < world_size")
        self.dataset = PretrainDataset(data_dir, split)
        self.manifest = self.dataset.manifest
        self.split = split
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, int(seed), rank, world_size
        self.masking = masking or MaskingConfig()
        self.causal = causal
        self.shuffle, self.drop_last = shuffle, drop_last
        tokens = _read_tokens(Path(data_dir) / self.manifest.tokenizer_dir / "vocab.txt", self.manifest.vocab_size)
        self.table = TokenTable.from_tokens(tokens, self.manifest.special_ids.as_dict())
        self.pad_id = self.manifest.special_ids.pad
        self.vocab_size = self.manifest.vocab_size
        self.global_batch_size = batch_size * world_size
        n = len(self.dataset)
        if drop_last and n < self.global_batch_size:
            raise ClozeformerError(
                f"{data_dir}: the {split} split has {n} sequences, fewer than one global batch "
                f"({batch_size} x {world_size} ranks); use a smaller batch or drop_last=False"
            )
        if n == 0:
            raise ClozeformerError(f"{data_dir}: the {split} split is empty")
        self.steps_per_epoch = n // self.global_batch_size if drop_last else math.ceil(n / self.global_batch_size)
        self.tokens_per_epoch = self.dataset.num_tokens  # all tokens of the split, over all ranks
        self.epoch = 0
        self._batch_in_epoch = 0
        self._position = 0
        self._perm_epoch = -1
        self._perm: np.ndarray | None = None

    # ------------------------------------------------------------------ order
    def __len__(self) -> int:
        """Batches per epoch (per rank)."""
        return self.steps_per_epoch

    @property
    def position(self) -> int:
        """Batches consumed since the start (all epochs)."""
        return self._position

    def _permutation(self, epoch: int) -> np.ndarray:
        if self._perm_epoch != epoch:
            n = len(self.dataset)
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, epoch])))
            self._perm, self._perm_epoch = rng.permutation(n) if self.shuffle else np.arange(n), epoch
        return self._perm

    def batch_indices(self, epoch: int, step: int) -> np.ndarray:
        """Global sequence indices of this rank's batch at (epoch, step in epoch)."""
        perm = self._permutation(epoch)
        g0 = step * self.global_batch_size + self.rank * self.batch_size
        return perm[g0 : min(g0 + self.batch_size, (step + 1) * self.global_batch_size)]

    # ------------------------------------------------------------------ batches
    def collate(self, indices: np.ndarray, epoch: int) -> dict:
        """Pad, mask and tensorize the sequences `indices` as epoch `epoch` masks them."""
        import torch

        rows = self.dataset.gather(indices)
        ids, attn = pad_right([r["input_ids"] for r in rows], self.pad_id)  # (B, T) each
        if ids.size and int(ids.max()) >= self.vocab_size:  # a damaged shard, or one of another vocabulary
            bad = int(indices[int(np.argmax(ids.max(axis=1)))])
            raise ClozeformerError(
                f"{self.dataset.dir}: sequence {bad} of the {self.split} split holds token id {int(ids.max())}, "
                f"not below the manifest's vocab_size {self.vocab_size}: the shard is corrupt"
            )
        if self.dataset.static:
            labels, _ = pad_right([r["labels"] for r in rows], IGNORE_INDEX, ids.shape[1])
            masked = ids
            if self.causal:  # static shards store the masked text: restore it first
                ids = np.where(labels != IGNORE_INDEX, labels, ids)
        elif not self.causal:
            keys = sample_keys(self.seed, epoch, indices)
            masked, labels = mask_tokens(ids, keys, self.table, self.masking, attn)
        if self.causal:
            masked, labels = ids, next_token_labels(ids, attn)
        if self.dataset.nsp:
            b_start = np.fromiter((r["b_start"] for r in rows), dtype=np.int64, count=len(rows))
            types = ((np.arange(ids.shape[1])[None, :] >= b_start[:, None]) & (attn == 1)).astype(np.int64)
        else:
            types = np.zeros_like(ids)
        arrays = {"input_ids": masked, "token_type_ids": types, "attention_mask": attn, "labels": labels}
        batch = {k: torch.from_numpy(v) for k, v in arrays.items()}
        if self.dataset.nsp:
            batch["next_sentence_label"] = torch.tensor([r["next_sentence_label"] for r in rows], dtype=torch.long)
        return batch

    def __iter__(self) -> Iterator[dict]:
        if self.split == "val":
            return self._one_pass()
        return self._endless()

    def _one_pass(self) -> Iterator[dict]:
        for step in range(self.steps_per_epoch):
            idx = self.batch_indices(VAL_EPOCH, step)
            if len(idx):
                yield self.collate(idx, VAL_EPOCH)

    def _endless(self) -> Iterator[dict]:
        while True:
            while self._batch_in_epoch < self.steps_per_epoch:
                idx = self.batch_indices(self.epoch, self._batch_in_epoch)
                self._batch_in_epoch += 1
                self._position += 1
                if len(idx):  # only a ragged last batch (drop_last=False) can leave a rank empty
                    yield self.collate(idx, self.epoch)
            self.epoch += 1
            self._batch_in_epoch = 0

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict:
        """JSON-serialisable position. All randomness is a function of (seed, epoch, index), so
        the "rng state" is those counters: the shuffle is PCG64(seed, epoch), masks splitmix64(seed, epoch, i)."""
        return {
            "split": self.split,
            "epoch": self.epoch,
            "batch_in_epoch": self._batch_in_epoch,
            "position": self._position,
            "seed": self.seed,
            "global_batch_size": self.global_batch_size,
            "num_sequences": len(self.dataset),
            "shuffle": self.shuffle,
            "rng_state": {
                "shuffle": f"PCG64(SeedSequence([{self.seed}, epoch]))",
                "masking": f"splitmix64(seed={self.seed}, epoch, sequence index)",
                "epoch": self.epoch,
                "next_step_in_epoch": self._batch_in_epoch,
            },
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue where `state` was taken. The number of ranks may change if the global batch does not."""
        mine = self.state_dict()
        for key in ("seed", "global_batch_size", "num_sequences", "shuffle"):
            if key in state and state[key] != mine[key]:
                raise ClozeformerError(
                    f"loader state: {key} was {state[key]!r} but this loader has {mine[key]!r}; "
                    "resuming would not reproduce the data order"
                )
        try:
            epoch, step, position = int(state["epoch"]), int(state["batch_in_epoch"]), int(state["position"])
        except (KeyError, TypeError, ValueError) as e:
            raise ClozeformerError(f"loader state: missing or invalid field ({e})") from None
        if not 0 <= step <= self.steps_per_epoch:
            raise ClozeformerError(f"loader state: batch_in_epoch={step} outside 0..{self.steps_per_epoch}")
        self.epoch, self._batch_in_epoch, self._position = epoch, step, position


def _read_tokens(vocab_file: Path, vocab_size: int) -> list[str]:
    from clozeformer.modeling.tokenizer import read_vocab

    tokens = read_vocab(vocab_file)
    if len(tokens) != vocab_size:
        raise ClozeformerError(f"{vocab_file}: {len(tokens)} tokens but the manifest says vocab_size={vocab_size}")
    return tokens
