"""embed: one L2-normalised vector per text, from [CLS] or the mean of the token states.

    pipe = clozeformer.pipeline("embed", model=DIR, pooling="mean")
    pipe.embed(["a text", "another"])   # np.ndarray (N, H) float32, rows of norm 1
    pipe("a text")                      # {"embedding": np.ndarray (H,), "truncated": False}

Works with any BERT directory: it reads the encoder's last hidden states, whatever head sits
on top. Unless `pooling` is given, a sentence-transformers directory's own choice is used
(`modules.json` -> its Pooling module's `config.json`: cls, mean, max or last token; see
`clozeformer.modeling.sbert`), else [CLS]; so is its `max_seq_length`, unless `max_length` is given.
Unit-length rows make cosine similarity a dot product, which `index.py` uses for
search (`clozeformer embed --build-index INDEX --input corpus.txt`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from clozeformer.infer import options
from clozeformer.infer.backends import Batch
from clozeformer.infer.pipelines import Example, Pipeline, Window, check_text
from clozeformer.modeling.bert import pool
from clozeformer.modeling.config import POOLINGS, Pooling
from clozeformer.modeling.sbert import read_modules
from clozeformer.utils.configs import config_dict
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import check_output_dir


class EmbedPipeline(Pipeline):
    task = "embed"

    def __init__(
        self, runner, tokenizer, *, pooling: Pooling | None = None, normalize: bool | None = None, **kwargs: Any
    ) -> None:
        # a sentence-transformers directory's own pooling and text length, unless given
        modules = read_modules(getattr(runner, "source", None))
        if modules is not None:
            if modules.lowercase and not tokenizer.do_lower_case:
                raise ClozeformerError(f"{runner.source}: sentence_bert_config.json lower-cases texts, its tokenizer is cased")
            if kwargs.get("max_length") is None and modules.max_seq_length:
                kwargs["max_length"] = min(modules.max_seq_length, runner.config.max_position_embeddings)
        super().__init__(runner, tokenizer, **kwargs)
        if pooling is None:
            pooling = modules.pooling if modules else "cls"  # type: ignore[assignment]
        if pooling not in POOLINGS:
            raise ClozeformerError(f"pooling={pooling!r}: choose one of {', '.join(POOLINGS)}")
        self.pooling = pooling
        self.normalize = (modules.normalize if modules else True) if normalize is None else normalize
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
class EmbedConfig(options.PipelineConfig):
    pooling: Pooling | None = field(
        default=None,
        metadata={
            "help": "[CLS] vector, mean or max over the tokens, or the last token "
            "(unset: a sentence-transformers directory's own, else cls)"
        },
    )
    normalize: bool | None = field(
        default=None,
        metadata={"help": "L2-normalise each vector (unset: as a sentence-transformers directory does, else yes)"},
    )
    build_index: str | None = field(
        default=None, metadata={"help": "write a search index to this directory (new or empty) instead of printing vectors"}
    )
    overwrite: bool = field(default=False, metadata={"help": "replace an index directory that clozeformer wrote before"})


CONFIG, POSITIONAL = EmbedConfig, ("inputs",)


def _as_text(record: options.Record, result: dict) -> str:
    v = result["embedding"]
    head = " ".join(f"{x:+.4f}" for x in v[:4])
    return f"[{head} ... ({len(v)} dims)]{options.mark_truncated(result)}\t{record.value}"


def main(cfg: EmbedConfig) -> int:
    from clozeformer.infer.index import EmbeddingIndex
    from clozeformer.infer.pipelines import pipeline

    if cfg.build_index is None:
        return options.predict_main("embed", cfg, {"pooling": cfg.pooling, "normalize": cfg.normalize}, _as_text)
    if cfg.normalize is False:
        raise ClozeformerError("--build-index needs normalised vectors (cosine search); drop --no-normalize")
    check_output_dir(cfg.build_index, cfg.overwrite, "--build-index")
    options.show_config(cfg)
    records = options.read_records(cfg)
    pipe = pipeline("embed", cfg.model, **cfg.pipeline_kwargs(), pooling=cfg.pooling, normalize=True)
    ids = [r.echo.get("id", i) for i, r in enumerate(records)]
    index = options.run_predictions(records, lambda texts: EmbeddingIndex.build(pipe, texts, ids=ids, progress=cfg.progress))
    index.save(cfg.build_index, config=config_dict(cfg))
    print(f"indexed {len(records)} texts ({pipe.dim} dims, {pipe.pooling} pooling) into {cfg.build_index}")
    return 0
