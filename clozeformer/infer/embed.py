"""embed: one L2-normalised vector per text, from [CLS] or the mean of the token states.

    pipe = clozeformer.pipeline("embed", model=DIR, pooling="mean")
    pipe.embed(["a text", "another"])   # np.ndarray (N, H) float32, rows of norm 1
    pipe("a text")                      # {"embedding": np.ndarray (H,), "truncated": False}

Works with any BERT directory: it reads the encoder's last hidden states, whatever head sits
on top. Unit-length rows make cosine similarity a dot product, which `index.py` uses for
search (`clozeformer embed --build-index INDEX --input corpus.txt`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from clozeformer.cliutil import config_dict, config_from_args
from clozeformer.errors import ClozeformerError
from clozeformer.infer import cli
from clozeformer.infer.pipelines import Example, Pipeline, Window, check_text
from clozeformer.infer.runners import Batch
from clozeformer.io import check_output_dir

Pooling = Literal["cls", "mean"]


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, H) states -> (B, H): the [CLS] row, or the mean over real (unpadded) tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


class EmbedPipeline(Pipeline):
    task = "embed"

    def __init__(self, runner, tokenizer, *, pooling: Pooling = "cls", normalize: bool = True, **kwargs: Any) -> None:
        super().__init__(runner, tokenizer, **kwargs)
        if pooling not in ("cls", "mean"):
            raise ClozeformerError(f"pooling={pooling!r}: choose cls or mean")
        self.pooling = pooling
        self.normalize = normalize
        self.dim = self.config.hidden_size

    def preprocess(self, items: Sequence[Any]) -> list[Example]:
        texts = [check_text(i, t) for i, t in enumerate(items)]
        clipped = [self.clip_chars(i, t) for i, t in enumerate(texts)]
        return [
            Example([Window(enc.ids, enc.type_ids)], {"truncated": self.check_length(i, enc) or cut})
            for i, (enc, (_, cut)) in enumerate(zip(self.backend.encode_batch([t for t, _ in clipped]), clipped))
        ]

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        vectors = pool(self.runner.hidden(batch), batch.attention_mask, self.pooling)  # (B, H)
        if self.normalize:
            vectors = F.normalize(vectors, dim=-1)
        return list(vectors.numpy())

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        return {"embedding": outputs[0], "truncated": example.data["truncated"]}

    def to_json(self, result: dict) -> dict:
        return {**result, "embedding": [round(float(x), 7) for x in result["embedding"]]}

    def embed(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """(N, H) float32 matrix of the texts' embeddings, in input order."""
        results = self.run(self.preprocess(list(texts)), progress=progress)
        if not results:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([r["embedding"] for r in results]).astype(np.float32, copy=False)

    def describe(self) -> dict:
        return {**super().describe(), "pooling": self.pooling, "normalize": self.normalize}


# ----------------------------------------------------------------------------- CLI verb


@dataclass
class EmbedConfig(cli.PipelineConfig):
    pooling: Pooling = field(default="cls", metadata={"help": "[CLS] vector or mean over tokens"})
    normalize: bool = field(default=True, metadata={"help": "L2-normalise each vector"})
    build_index: str | None = field(
        default=None, metadata={"help": "write a search index to this directory (new or empty) instead of printing vectors"}
    )
    overwrite: bool = field(default=False, metadata={"help": "replace an index directory that clozeformer wrote before"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli.add_arguments(parser, EmbedConfig)


def _as_text(record: cli.Record, result: dict) -> str:
    v = result["embedding"]
    head = " ".join(f"{x:+.4f}" for x in v[:4])
    return f"[{head} ... ({len(v)} dims)]{cli.mark_truncated(result)}\t{record.value}"


def main(args: argparse.Namespace) -> int:
    from clozeformer.infer.index import EmbeddingIndex
    from clozeformer.infer.pipelines import InputError, pipeline

    cfg = config_from_args(EmbedConfig, args)
    if cfg.build_index is None:
        return cli.predict_main(
            "embed",
            cfg,
            {"pooling": cfg.pooling, "normalize": cfg.normalize},
            lambda obj, src: cli.require_field(obj, "text", src),
            lambda line, src: line,
            _as_text,
        )
    if not cfg.normalize:
        raise ClozeformerError("--build-index needs normalised vectors (cosine search); drop --no-normalize")
    check_output_dir(cfg.build_index, cfg.overwrite, "--build-index")
    cli.show_config(cfg)
    records = cli.read_records(cfg, lambda obj, src: cli.require_field(obj, "text", src), lambda line, src: line)
    pipe = pipeline("embed", cfg.model, **cfg.pipeline_kwargs(), pooling=cfg.pooling)
    ids = [r.echo.get("id", i) for i, r in enumerate(records)]
    try:
        index = EmbeddingIndex.build(pipe, [r.value for r in records], ids=ids, progress=cfg.progress)
    except InputError as e:
        raise ClozeformerError(f"{records[e.index].source}: {e.reason}") from None
    index.save(cfg.build_index, config=config_dict(cfg))
    print(f"indexed {len(records)} texts ({pipe.dim} dims, {cfg.pooling} pooling) into {cfg.build_index}")
    return 0
