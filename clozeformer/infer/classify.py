"""classify: labels and probabilities for a text or a text pair (sequence classification).

An input is a string, a `(text, text_pair)` tuple, or `{"text": ..., "text_pair": ...}`.
The result follows the directory's `problem_type`, as transformers trains it:

    single-label (softmax):  {"label": "pos", "score": 0.93, "scores": {"pos": 0.93, "neg": 0.07}}
    multi-label (sigmoid):   {"labels": ["a", "c"], "scores": {"a": 0.8, "c": 0.6, "b": 0.1}}
    regression (1 output):   {"value": 3.2}
plus "truncated" on every result. Label names come from config.json `id2label`.

A pair classifier is also a cross-encoder reranker (`search --rerank`, `serve`'s /tei/rerank):
`relevance` scores a (query, text) result by its regression value or by the probability of the
label that means "relevant" (`RELEVANT_LABELS`, else the last label: "1" of 0/1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clozeformer.infer import options
from clozeformer.infer.backends import Batch, label_names
from clozeformer.infer.pipelines import Example, InputError, Pipeline, Window, check_text
from clozeformer.utils.errors import ClozeformerError


def split_pair(index: int, item: Any) -> str | tuple[str, str]:
    """A text, or a (text, text_pair) tuple, of one classify input."""
    if isinstance(item, str):
        return check_text(index, item)
    if isinstance(item, tuple) and len(item) == 2:
        a, b = item
    elif isinstance(item, dict):
        if "text" not in item:
            raise InputError(index, "missing field 'text'")
        a, b = item["text"], item.get("text_pair")
    else:
        raise InputError(index, f"expected a text, a (text, text_pair) tuple or a dict, got {type(item).__name__}")
    return check_text(index, a) if b is None else (check_text(index, a), check_text(index, b, "text_pair"))


#: label names that mean "relevant" when a classifier reranks, first match wins (QNLI's "entailment" sorts first)
RELEVANT_LABELS = ("1", "relevant", "entailment", "positive", "true", "yes", "LABEL_1")


class ClassifyPipeline(Pipeline):
    task = "classify"

    def __init__(self, runner, tokenizer, **kwargs: Any) -> None:
        super().__init__(runner, tokenizer, **kwargs)
        cfg = self.config
        if cfg.problem_type == "regression" or (cfg.num_labels == 1 and cfg.problem_type is None):
            self.kind = "regression"
        elif cfg.problem_type == "multi_label_classification":
            self.kind = "multi_label"
        else:
            self.kind = "single_label"
        self.labels = label_names(cfg)
        self.relevant = next((lab for lab in RELEVANT_LABELS if lab in self.labels), self.labels[-1])

    def preprocess(self, items: Sequence[Any]) -> list[Example]:
        encoded = self.encode([split_pair(i, item) for i, item in enumerate(items)])
        return [
            Example([Window(enc.ids, enc.type_ids)], {"truncated": self.check_length(i, enc) or cut})
            for i, (enc, cut) in enumerate(encoded)
        ]

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        logits = self.runner.logits(batch)  # (B, K)
        if self.kind == "single_label":
            return logits.softmax(-1).tolist()
        if self.kind == "multi_label":
            return logits.sigmoid().tolist()
        return logits[:, 0].tolist()

    def relevance(self, result: dict) -> float:
        """A cross-encoder's score of one (query, text) result: the regression value, else P(relevant label)."""
        return float(result["value"] if self.kind == "regression" else result["scores"][self.relevant])

    def rerank(self, query: str, texts: Sequence[str]) -> list[tuple[int, float]]:
        """(index into `texts`, relevance) pairs, most relevant first."""
        scores = [self.relevance(r) for r in self([(query, t) for t in texts])]
        return sorted(enumerate(scores), key=lambda kv: -kv[1])

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        out = outputs[0]
        truncated = example.data["truncated"]
        if self.kind == "regression":
            return {"value": out, "truncated": truncated}
        scores = dict(sorted(zip(self.labels, out), key=lambda kv: -kv[1]))
        if self.kind == "multi_label":
            return {"labels": [k for k, p in scores.items() if p >= 0.5], "scores": scores, "truncated": truncated}
        label, score = next(iter(scores.items()))
        return {"label": label, "score": score, "scores": scores, "truncated": truncated}


# ----------------------------------------------------------------------------- CLI verb


@dataclass
class ClassifyConfig(options.PipelineConfig):
    pair: str | None = field(
        default=None, metadata={"help": "second text of a pair, for one argument input (files: a TAB or a text_pair field)"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pair is not None and len(self.inputs) != 1:
            raise ClozeformerError("--pair goes with exactly one text argument")


CONFIG, POSITIONAL = ClassifyConfig, ("inputs",)


def _from_fields(obj: dict, source: str) -> Any:
    text = options.require_field(obj, "text", source)
    return (text, options.require_field(obj, "text_pair", source)) if "text_pair" in obj else text


def _as_text(record: options.Record, result: dict) -> str:
    if "value" in result:
        head = f"{result['value']:.4f}"
    elif "label" in result:
        head = f"{result['label']} {result['score']:.3f}"
    else:
        head = ",".join(result["labels"]) or "(none)"
    scores = " ".join(f"{k}={v:.3f}" for k, v in result.get("scores", {}).items())
    text = record.value if isinstance(record.value, str) else " | ".join(record.value)
    return "\t".join([head + options.mark_truncated(result)] + ([f"({scores})"] if scores else []) + [text])


def main(cfg: ClassifyConfig) -> int:
    def text_line(line: str, source: str) -> Any:
        if cfg.pair is not None:
            return (line, cfg.pair)
        if "\t" in line and cfg.input:  # a TAB in a file line separates the pair
            return tuple(line.split("\t", 1))
        return line

    return options.predict_main("classify", cfg, {}, _as_text, _from_fields, text_line)
