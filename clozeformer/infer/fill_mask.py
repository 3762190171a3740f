"""fill-mask: the top-k tokens, with probabilities, for every [MASK] of a text.

    {"sequence": "the cat sat on the mat.",           # each [MASK] replaced by its best token
     "masks": [{"start": 19, "end": 25,                # the [MASK]'s characters in the input
                "candidates": [{"token": "mat", "token_id": 4..., "score": 0.41}, ...]}],
     "truncated": false}

Several masks are predicted independently in one pass (as BERT was trained: masked tokens do
not see each other's answers). Probabilities are a softmax over the whole vocabulary, and the
vocabulary logits are computed only at the [MASK] rows (N x V instead of B x T x V).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from clozeformer.infer import options
from clozeformer.infer.backends import Batch
from clozeformer.infer.pipelines import Example, InputError, Pipeline, Window, check_text
from clozeformer.utils.errors import ClozeformerError

MASK = "[MASK]"


def display(token: str) -> str:
    """A vocabulary entry as it reads in text: the `##` continuation mark dropped."""
    return token[2:] if token.startswith("##") and len(token) > 2 else token


class FillMaskPipeline(Pipeline):
    task = "fill-mask"

    def __init__(self, runner, tokenizer, *, top_k: int = 5, **kwargs: Any) -> None:
        super().__init__(runner, tokenizer, **kwargs)
        if not 1 <= top_k <= tokenizer.vocab_size:
            raise ClozeformerError(f"top_k must be between 1 and the vocab size ({tokenizer.vocab_size}), got {top_k}")
        self.top_k = top_k
        self.mask_id = tokenizer.mask_token_id
        self.vocab_size = tokenizer.vocab_size

    def preprocess(self, items: Sequence[Any]) -> list[Example]:
        texts = [check_text(i, t) for i, t in enumerate(items)]
        examples = []
        for i, (text, (enc, cut)) in enumerate(zip(texts, self.encode(texts))):
            positions = [p for p, t in enumerate(enc.ids) if t == self.mask_id]  # token indices of [MASK]
            written = text.count(MASK)
            if not positions and not written:
                raise InputError(i, f"no {MASK} in the text; put {MASK} where a word should be predicted")
            truncated = self.check_length(i, enc) or cut
            if not positions:
                raise InputError(i, f"every {MASK} lies past the first {self.max_length} tokens")
            spans = [enc.offsets[p] for p in positions]
            data = {"text": text, "spans": spans, "truncated": truncated, "dropped_masks": written - len(positions)}
            examples.append(Example([Window(enc.ids, enc.type_ids, positions)], data))
        return examples

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        T = batch.input_ids.shape[1]
        flat = torch.tensor([b * T + p for b, w in enumerate(windows) for p in w.data])  # (N,) into B*T
        # (N, V); columns past vocab.txt (a padded embedding matrix) have no token: dropped
        probs = self.runner.mlm_logits(batch, flat)[:, : self.vocab_size].softmax(-1)
        scores, ids = probs.topk(self.top_k, dim=-1)  # (N, k) each
        sizes = [len(w.data) for w in windows]  # masks per window
        return [(s.tolist(), i.tolist()) for s, i in zip(scores.split(sizes), ids.split(sizes))]

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        scores, ids = outputs[0]  # one window: (masks, k) each
        text = example.data["text"]
        masks, filled = [], text
        for (start, end), row_scores, row_ids in zip(example.data["spans"], scores, ids):
            tokens = self.tokenizer.convert_ids_to_tokens(row_ids)
            candidates = [{"token": t, "token_id": i, "score": s} for t, i, s in zip(tokens, row_ids, row_scores)]
            masks.append({"start": start, "end": end, "candidates": candidates})
        for m in reversed(masks):  # right to left keeps the earlier spans valid
            filled = filled[: m["start"]] + display(m["candidates"][0]["token"]) + filled[m["end"] :]
        result = {"sequence": filled, "masks": masks, "truncated": example.data["truncated"]}
        if example.data["dropped_masks"]:
            result["dropped_masks"] = example.data["dropped_masks"]  # cut off by truncation
        return result


# ----------------------------------------------------------------------------- CLI verb


@dataclass
class FillMaskConfig(options.PipelineConfig):
    top_k: int = field(default=5, metadata={"help": "candidates per [MASK]"})


CONFIG, POSITIONAL = FillMaskConfig, ("inputs",)


def _as_text(record: options.Record, result: dict) -> str:
    lines = [result["sequence"] + options.mark_truncated(result)]
    for k, m in enumerate(result["masks"], 1):
        cands = ", ".join(f"{c['token']} {c['score']:.3f}" for c in m["candidates"])
        lines.append(f"  [MASK] {k} (chars {m['start']}-{m['end']}): {cands}")
    return "\n".join(lines)


def main(cfg: FillMaskConfig) -> int:
    return options.predict_main("fill-mask", cfg, {"top_k": cfg.top_k}, _as_text)
