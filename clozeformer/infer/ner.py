"""ner: named entities with type, score and character span (token classification).

    pipe("John Smith lives in Paris.")
    -> {"entities": [{"type": "PER", "text": "John Smith", "score": 0.98, "start": 0, "end": 10},
                     {"type": "LOC", "text": "Paris", "score": 0.99, "start": 20, "end": 25}],
        "truncated": False}

The model labels word pieces with IOB2 tags (B-PER, I-PER, O; config.json `id2label`). Each
word takes the label of its first piece (`aggregation="first"`, how CoNLL models are trained
and scored) or the argmax of its pieces' mean probabilities (`"average"`); its span runs from
its first piece's start to its last piece's end. Words then join into entities: B-X opens
one, I-X continues an open X (and, leniently, opens one after O or another type, as seqeval's
default mode reads it), O closes. A label without a B-/I- prefix behaves as I-. An entity's
score is the mean of its words' scores.

A text longer than the model's window is cut into overlapping windows; windows, the choice of
each word's window and its label are `clozeformer.data.spans` (`token_stride`,
`word_predictions`), the path `evaluate` scores with. `overlong="reject"` refuses such texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from clozeformer.data.spans import token_stride, word_predictions
from clozeformer.infer import options
from clozeformer.infer.backends import Batch, label_names
from clozeformer.infer.pipelines import Example, Pipeline, Window, check_text
from clozeformer.utils.errors import ClozeformerError

Aggregation = Literal["first", "average"]


def parse_tag(label: str) -> tuple[str, str | None]:
    """IOB2 label -> (prefix, type): "B-PER" -> ("B", "PER"), "O" -> ("O", None), "PER" -> ("I", "PER")."""
    if label == "O":
        return "O", None
    if len(label) > 2 and label[:2] in ("B-", "I-"):
        return label[0], label[2:]
    return "I", label


def group_entities(words: Sequence[tuple[str, float, int, int]]) -> list[dict]:
    """(label, score, start, end) per word, in order -> entities with mean score and joint span."""
    entities: list[dict] = []
    current: dict | None = None
    for label, score, start, end in words:
        prefix, kind = parse_tag(label)
        if prefix == "O":
            current = None
            continue
        if prefix == "B" or current is None or current["type"] != kind:
            current = {"type": kind, "scores": [], "start": start, "end": end}
            entities.append(current)
        current["scores"].append(score)
        current["end"] = end
    for e in entities:
        scores = e.pop("scores")
        e["score"] = sum(scores) / len(scores)
    return entities


class NerPipeline(Pipeline):
    task = "ner"
    window_key = "ner_max_seq_len"

    def __init__(
        self, runner, tokenizer, *, aggregation: Aggregation = "first", stride: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(runner, tokenizer, **kwargs)
        if aggregation not in ("first", "average"):
            raise ClozeformerError(f"aggregation={aggregation!r}: choose first or average")
        self.aggregation = aggregation
        self.stride = token_stride(self.max_length, stride)
        self.labels = label_names(self.config)
        self.backend.enable_truncation(self.max_length, stride=self.stride, strategy="longest_first")

    def preprocess(self, items: Sequence[Any]) -> list[Example]:
        texts = [check_text(i, t) for i, t in enumerate(items)]
        examples = []
        for i, (text, enc) in enumerate(zip(texts, self.backend.encode_batch(texts))):
            self.check_length(i, enc)  # raises for overlong="reject"; otherwise the windows cover it all
            windows = [Window(e.ids, e.type_ids, {"offsets": e.offsets, "word_ids": e.word_ids}) for e in (enc, *enc.overflowing)]
            examples.append(Example(windows, {"text": text}))
        return examples

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        probs = self.runner.logits(batch).softmax(-1).numpy()  # (B, T, K)
        return [probs[b, : len(w.input_ids)] for b, w in enumerate(windows)]

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        words = []
        chosen = word_predictions([w.data["word_ids"] for w in example.windows], outputs, self.aggregation)
        for _, k, score, w, tokens in chosen:
            offsets = example.windows[w].data["offsets"]
            words.append((self.labels[k], score, offsets[tokens[0]][0], offsets[tokens[-1]][1]))
        text = example.data["text"]
        entities = [
            {"type": e["type"], "text": text[e["start"] : e["end"]], "score": e["score"], "start": e["start"], "end": e["end"]}
            for e in group_entities(words)
        ]
        return {"entities": entities, "windows": len(example.windows), "truncated": False}

    def describe(self) -> dict:
        return {**super().describe(), "aggregation": self.aggregation, "stride": self.stride, "labels": self.labels}


# ----------------------------------------------------------------------------- CLI verb


@dataclass
class NerConfig(options.PipelineConfig):
    aggregation: Aggregation = field(
        default="first", metadata={"help": "a word's label: its first piece's, or the argmax of its pieces' mean"}
    )
    stride: int | None = field(
        default=None, metadata={"help": "tokens shared by consecutive windows of a long text (default: a quarter window, <= 32)"}
    )


CONFIG, POSITIONAL = NerConfig, ("inputs",)


def _as_text(record: options.Record, result: dict) -> str:
    lines = [f"{record.value}{options.mark_truncated(result)}"]
    lines += [
        f"  {e['type']}\t{e['text']}\t(chars {e['start']}-{e['end']}, score {e['score']:.3f})" for e in result["entities"]
    ] or ["  (no entities)"]
    return "\n".join(lines)


def main(cfg: NerConfig) -> int:
    return options.predict_main("ner", cfg, {"aggregation": cfg.aggregation, "stride": cfg.stride}, _as_text)
