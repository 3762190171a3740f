"""embed: one L2-normalised vector per text, from [CLS] or the mean of the token states.

    pipe = clozeformer.pipeline("embed", model=DIR, pooling="mean")
    pipe.embed(["a text", "another"])   # np.ndarray (N, H) float32, rows of norm 1
    pipe("a text")                      # {"embedding": np.ndarray (H,), "truncated": False}

Works with any BERT directory: it reads the encoder's last hidden states, whatever head sits
on top. Unless `pooling` is given, a sentence-transformers directory's own choice is used
(`modules.json` -> its Pooling module's `config.json`: cls, mean or max), else [CLS].
Unit-length rows make cosine similarity a dot product, which `index.py` uses for
search (`clozeformer embed --build-index INDEX --input corpus.txt`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import torch
import torch.nn.functional as F

from clozeformer.cliutil import config_dict
from clozeformer.errors import ClozeformerError
from clozeformer.infer import cli
from clozeformer.infer.pipelines import Example, Pipeline, Window, check_text
from clozeformer.infer.runners import Batch
from clozeformer.io import check_output_dir

Pooling = Literal["cls", "mean", "max"]
POOLINGS = get_args(Pooling)
#: sentence-transformers' Pooling config keys -> ours
_ST_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max"}


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, H) states -> (B, H): the [CLS] row, or the mean / max over real (unpadded) tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
    if pooling == "max":
        return hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).amax(1)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def directory_pooling(directory: str | Path | None) -> str | None:
    """The pooling a sentence-transformers directory declares (`modules.json` -> the Pooling
    module's `config.json`), or None when the directory has none."""
    if not directory or not (Path(directory) / "modules.json").is_file():
        return None
    from clozeformer.io import read_json_object

    modules = json.loads((Path(directory) / "modules.json").read_text(encoding="utf-8"))
    paths = [m.get("path", "") for m in modules if isinstance(m, dict) and str(m.get("type", "")).endswith(".Pooling")]
    if not paths or not (where := Path(directory) / paths[0] / "config.json").is_file():
        return None
    config = read_json_object(where)
    modes = [ours for key, ours in _ST_MODES.items() if config.get(key)]
    others = [k for k, v in config.items() if k.startswith("pooling_mode_") and v and k not in _ST_MODES]
    if len(modes) != 1 or others:
        raise ClozeformerError(f"{where}: pooling {', '.join(modes + others) or 'none'}; clozeformer pools one of cls, mean, max")
    return modes[0]


class EmbedPipeline(Pipeline):
    task = "embed"

    def __init__(self, runner, tokenizer, *, pooling: Pooling | None = None, normalize: bool = True, **kwargs: Any) -> None:
        super().__init__(runner, tokenizer, **kwargs)
        if pooling is None:  # the directory's own (sentence-transformers), else [CLS]
            pooling = directory_pooling(getattr(runner, "source", None)) or "cls"  # type: ignore[assignment]
        if pooling not in POOLINGS:
            raise ClozeformerError(f"pooling={pooling!r}: choose cls, mean or max")
        self.pooling = pooling
        self.normalize = normalize
        self.dim = self.config.hidden_size

    def preprocess(self, items: Sequence[Any]) -> list[Example]:
        encoded = self.encode([check_text(i, t) for i, t in enumerate(items)])
        return [
            Example([Window(enc.ids, enc.type_ids)], {"truncated": self.check_length(i, enc) or cut})
            for i, (enc, cut) in enumerate(encoded)
        ]

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        return list(pool(self.runner.hidden(batch), batch.attention_mask, self.pooling).numpy())  # (B, H)

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        vector = outputs[0]
        if example.data.get("normalize", self.normalize):  # an example may ask otherwise (the server's TEI route)
            vector = F.normalize(torch.from_numpy(vector), dim=-1).numpy()
        return {"embedding": vector, "truncated": example.data["truncated"]}

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
    pooling: Pooling | None = field(
        default=None,
        metadata={"help": "[CLS] vector, mean or max over tokens (unset: a sentence-transformers directory's own, else cls)"},
    )
    normalize: bool = field(default=True, metadata={"help": "L2-normalise each vector"})
    build_index: str | None = field(
        default=None, metadata={"help": "write a search index to this directory (new or empty) instead of printing vectors"}
    )
    overwrite: bool = field(default=False, metadata={"help": "replace an index directory that clozeformer wrote before"})


CONFIG, POSITIONAL = EmbedConfig, ("inputs",)


def _as_text(record: cli.Record, result: dict) -> str:
    v = result["embedding"]
    head = " ".join(f"{x:+.4f}" for x in v[:4])
    return f"[{head} ... ({len(v)} dims)]{cli.mark_truncated(result)}\t{record.value}"


def main(cfg: EmbedConfig) -> int:
    from clozeformer.infer.index import EmbeddingIndex
    from clozeformer.infer.pipelines import pipeline

    if cfg.build_index is None:
        return cli.predict_main("embed", cfg, {"pooling": cfg.pooling, "normalize": cfg.normalize}, _as_text)
    if not cfg.normalize:
        raise ClozeformerError("--build-index needs normalised vectors (cosine search); drop --no-normalize")
    check_output_dir(cfg.build_index, cfg.overwrite, "--build-index")
    cli.show_config(cfg)
    records = cli.read_records(cfg)
    pipe = pipeline("embed", cfg.model, **cfg.pipeline_kwargs(), pooling=cfg.pooling)
    ids = [r.echo.get("id", i) for i, r in enumerate(records)]
    index = cli.run_predictions(records, lambda texts: EmbeddingIndex.build(pipe, texts, ids=ids, progress=cfg.progress))
    index.save(cfg.build_index, config=config_dict(cfg))
    print(f"indexed {len(records)} texts ({pipe.dim} dims, {pipe.pooling} pooling) into {cfg.build_index}")
    return 0
