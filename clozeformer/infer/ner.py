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
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from clozeformer.errors import ClozeformerError
from clozeformer.infer import cli
from clozeformer.infer.pipelines import Example, Pipeline, Window, check_text
from clozeformer.infer.runners import Batch, label_names

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

    def __init__(self, runner, tokenizer, *, aggregation: Aggregation = "first", **kwargs: Any) -> None:
        super().__init__(runner, tokenizer, **kwargs)
        if aggregation not in ("first", "average"):
            raise ClozeformerError(f"aggregation={aggregation!r}: choose first or average")
        self.aggregation = aggregation
        self.labels = label_names(self.config)

    def preprocess(self, items: Sequence[Any]) -> list[Example]:
        texts = [check_text(i, t) for i, t in enumerate(items)]
        return [Example([Window(enc.ids, enc.type_ids, {"offsets": enc.offsets, "word_ids": enc.word_ids})],
                        {"text": text, "truncated": self.check_length(i, enc)})
                for i, (text, enc) in enumerate(zip(texts, self.backend.encode_batch(texts)))]

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        probs = self.runner.logits(batch).softmax(-1)  # (B, T, K)
        return [probs[b, :len(w.input_ids)] for b, w in enumerate(windows)]

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        probs = outputs[0]  # (T, K)
        data = example.windows[0].data
        pieces: dict[int, list[int]] = {}  # word -> its token indices, in order
        for t, word in enumerate(data["word_ids"]):
            if word is not None:
                pieces.setdefault(word, []).append(t)
        words = []
        for tokens in pieces.values():
            p = probs[tokens[0]] if self.aggregation == "first" else probs[tokens].mean(0)
            k = int(p.argmax())
            words.append((self.labels[k], float(p[k]), data["offsets"][tokens[0]][0], data["offsets"][tokens[-1]][1]))
        entities = group_entities(words)
        text = example.data["text"]
        return {"entities": [{"type": e["type"], "text": text[e["start"]:e["end"]], "score": e["score"],
                              "start": e["start"], "end": e["end"]} for e in entities],
                "truncated": example.data["truncated"]}

    def describe(self) -> dict:
        return {**super().describe(), "aggregation": self.aggregation, "labels": self.labels}


# ----------------------------------------------------------------------------- CLI verb

@dataclass
class NerConfig(cli.PredictConfig):
    aggregation: Aggregation = field(default="first", metadata={
        "help": "a word's label: its first piece's, or the argmax of its pieces' mean"})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli.add_arguments(parser, NerConfig)


def _as_text(record: cli.Record, result: dict) -> str:
    lines = [f"{record.value}{cli.mark_truncated(result)}"]
    lines += [f"  {e['type']}\t{e['text']}\t(chars {e['start']}-{e['end']}, score {e['score']:.3f})"
              for e in result["entities"]] or ["  (no entities)"]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    cfg = cli.config_from_args(NerConfig, args)
    return cli.predict_main("ner", cfg, {"aggregation": cfg.aggregation},
                            lambda obj, src: cli.require_field(obj, "text", src), lambda line, src: line, _as_text)
