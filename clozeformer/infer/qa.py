"""qa: extract the answer span of a question from a context (SQuAD-style span QA).

    pipe({"question": "Where does John live?", "context": "John lives in Paris."})
    -> {"answer": "Paris", "score": 0.87, "start": 14, "end": 19, "windows": 1, "truncated": False}

`start`/`end` are character offsets into the context (`context[start:end] == answer`). A
context longer than the model's window is cut into overlapping windows ([CLS] question [SEP]
context-part [SEP]; consecutive parts share `doc_stride` tokens, as in BERT's SQuAD recipe),
each window is scored, and the best span of any window wins. In a window, the span score is
p_start(i) * p_end(j) with both softmaxes over the context tokens, i <= j < i +
max_answer_length. A question longer than `max_question_length` tokens is truncated (flagged)
or rejected, by `overlong`.

With `allow_no_answer=True` (for SQuAD v2.0-style models, trained to point at [CLS] when the
context holds no answer) the softmaxes also cover [CLS], and the answer is "" (start = end = 0)
when p_start([CLS]) * p_end([CLS]), at its lowest over the windows, beats the best span.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tokenizers import Tokenizer as Backend

from clozeformer.errors import ClozeformerError
from clozeformer.infer import cli
from clozeformer.infer.pipelines import Example, InputError, Pipeline, Window, check_text
from clozeformer.infer.runners import Batch


def split_qa(index: int, item: Any) -> tuple[str, str]:
    if isinstance(item, dict):
        for key in ("question", "context"):
            if key not in item:
                raise InputError(index, f"missing field {key!r}")
        q, c = item["question"], item["context"]
    elif isinstance(item, tuple) and len(item) == 2:
        q, c = item
    else:
        raise InputError(
            index, f"expected {{'question': ..., 'context': ...}} or a (question, context) tuple, got {type(item).__name__}"
        )
    return check_text(index, q, "question"), check_text(index, c, "context")


def best_span(start_logits: torch.Tensor, end_logits: torch.Tensor, max_answer_length: int) -> tuple[int, int, float]:
    """(i, j, p_start(i) * p_end(j)) maximised over i <= j < i + max_answer_length; inputs (L,)."""
    return best_span_of_probs(start_logits.softmax(-1), end_logits.softmax(-1), max_answer_length)


def best_span_of_probs(p_start: torch.Tensor, p_end: torch.Tensor, max_answer_length: int) -> tuple[int, int, float]:
    """`best_span` on probabilities already normalised (over the context, or over [CLS] + context)."""
    scores = p_start[:, None] * p_end[None, :]  # (L, L): row = start, column = end
    L = scores.shape[0]
    ones = torch.ones(L, L, dtype=torch.bool)
    allowed = torch.triu(ones) & ~torch.triu(ones, diagonal=max_answer_length)  # 0 <= j - i < max_len
    flat = scores.masked_fill(~allowed, -1.0).argmax()
    i, j = divmod(int(flat), L)
    return i, j, float(scores[i, j])


class QuestionAnsweringPipeline(Pipeline):
    task = "qa"

    def __init__(
        self,
        runner,
        tokenizer,
        *,
        doc_stride: int = 128,
        max_answer_length: int = 30,
        max_question_length: int = 64,
        allow_no_answer: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(runner, tokenizer, **kwargs)
        room = self.max_length - max_question_length - 3  # context tokens a window has at least
        if max_question_length < 1 or room < 2:
            raise ClozeformerError(
                f"max_question_length={max_question_length} leaves no room for context in {self.max_length}-token windows"
            )
        if not 0 <= doc_stride < room:
            raise ClozeformerError(
                f"doc_stride={doc_stride} must be below the context room of a window "
                f"({room} = max_length {self.max_length} - max_question_length "
                f"{max_question_length} - 3)"
            )
        if max_answer_length < 1:
            raise ClozeformerError(f"max_answer_length must be >= 1, got {max_answer_length}")
        self.doc_stride = doc_stride
        self.max_answer_length = max_answer_length
        self.max_question_length = max_question_length
        self.allow_no_answer = allow_no_answer
        self.question_backend = Backend.from_str(self.backend.to_str())  # measures questions, uncut
        self.question_backend.no_truncation()
        # windows: truncate only the context, overflow into further windows sharing doc_stride tokens
        self.backend.enable_truncation(self.max_length, stride=doc_stride, strategy="only_second")

    def _question(self, index: int, question: str) -> tuple[str, bool]:
        """The question, cut to max_question_length tokens (or rejected when overlong='reject')."""
        enc = self.question_backend.encode(question, add_special_tokens=False)
        if len(enc.ids) <= self.max_question_length:
            return question, False
        if self.overlong == "reject":
            raise InputError(index, f"question is longer than {self.max_question_length} tokens")
        return question[: enc.offsets[self.max_question_length - 1][1]], True

    def preprocess(self, items: Sequence[Any]) -> list[Example]:
        pairs = [split_qa(i, item) for i, item in enumerate(items)]
        cut = [self._question(i, q) for i, (q, _) in enumerate(pairs)]
        encs = self.backend.encode_batch([(q, c) for (q, _), (_, c) in zip(cut, pairs)])
        examples = []
        for i, ((_, context), (_, q_cut), enc) in enumerate(zip(pairs, cut, encs)):
            windows = []
            for w in [enc, *enc.overflowing]:
                ctx = [t for t, s in enumerate(w.sequence_ids) if s == 1]  # context token indices
                if ctx:
                    windows.append(Window(w.ids, w.type_ids, {"first": ctx[0], "last": ctx[-1], "offsets": w.offsets}))
            if not windows:
                raise InputError(i, "the context has no tokens")
            examples.append(Example(windows, {"context": context, "truncated": q_cut}))
        return examples

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        start, end = self.runner.span_logits(batch)  # (B, T) each
        # per window: logits at [CLS] (position 0) followed by those of the context tokens
        return [
            (
                torch.cat([start[b, :1], start[b, w.data["first"] : w.data["last"] + 1]]),
                torch.cat([end[b, :1], end[b, w.data["first"] : w.data["last"] + 1]]),
            )
            for b, w in enumerate(windows)
        ]

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        best, null = None, None
        for w, (s, e) in zip(example.windows, outputs):
            if self.allow_no_answer:  # softmax over [CLS] + context; spans over the context part
                p_s, p_e = s.softmax(-1), e.softmax(-1)
                null = min(null if null is not None else 1.0, float(p_s[0] * p_e[0]))
                i, j, score = best_span_of_probs(p_s[1:], p_e[1:], self.max_answer_length)
            else:
                i, j, score = best_span(s[1:], e[1:], self.max_answer_length)
            if best is None or score > best[0]:
                offsets = w.data["offsets"]
                best = (score, offsets[w.data["first"] + i][0], offsets[w.data["first"] + j][1])
        score, start, end = best
        if null is not None and null > score:
            score, start, end = null, 0, 0
        return {
            "answer": example.data["context"][start:end],
            "score": score,
            "start": start,
            "end": end,
            "windows": len(example.windows),
            "truncated": example.data["truncated"],
        }

    def describe(self) -> dict:
        return {
            **super().describe(),
            "doc_stride": self.doc_stride,
            "max_answer_length": self.max_answer_length,
            "max_question_length": self.max_question_length,
            "allow_no_answer": self.allow_no_answer,
        }


# ----------------------------------------------------------------------------- CLI verb


@dataclass
class QAConfig(cli.PredictConfig):
    question: str | None = field(default=None, metadata={"help": "the question (with --context)"})
    context: str | None = field(default=None, metadata={"help": "the text holding the answer"})
    doc_stride: int = field(default=128, metadata={"help": "tokens shared by consecutive windows of a long context"})
    max_answer_length: int = field(default=30, metadata={"help": "longest answer, in tokens"})
    max_question_length: int = field(default=64, metadata={"help": "longer questions are truncated or rejected"})
    allow_no_answer: bool = field(
        default=False, metadata={"help": 'SQuAD v2.0-style models: answer "" when [CLS] (no answer) beats the best span'}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.inputs:
            raise ClozeformerError("qa takes --question and --context (or --input FILE), not text arguments")
        if (self.question is None) != (self.context is None):
            raise ClozeformerError("give both --question and --context")
        if self.question is not None and self.input:
            raise ClozeformerError("give --question/--context or --input FILE, not both")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    cli.add_arguments(parser, QAConfig)


def _from_fields(obj: dict, source: str) -> dict:
    return {"question": cli.require_field(obj, "question", source), "context": cli.require_field(obj, "context", source)}


def _text_line(line: str, source: str) -> dict:
    if "\t" not in line:
        raise ClozeformerError(f"{source}: a text line for qa is QUESTION<TAB>CONTEXT (or use JSONL)")
    q, c = line.split("\t", 1)
    return {"question": q, "context": c}


def _as_text(record: cli.Record, result: dict) -> str:
    if not result["answer"]:
        return f"(no answer)\t(score {result['score']:.3f}){cli.mark_truncated(result)}"
    return (
        f"{result['answer']}\t(score {result['score']:.3f}, chars {result['start']}-{result['end']}){cli.mark_truncated(result)}"
    )


def main(args: argparse.Namespace) -> int:
    from clozeformer.infer.pipelines import pipeline

    cfg = cli.config_from_args(QAConfig, args)
    options = {
        "doc_stride": cfg.doc_stride,
        "max_answer_length": cfg.max_answer_length,
        "max_question_length": cfg.max_question_length,
        "allow_no_answer": cfg.allow_no_answer,
    }
    if cfg.question is None:
        return cli.predict_main("qa", cfg, options, _from_fields, _text_line, _as_text)
    cli.show_config(cfg)
    value = {"question": cfg.question, "context": cfg.context}
    records = [cli.Record("--question/--context", value, dict(value))]
    pipe = pipeline("qa", cfg.model, **cfg.pipeline_kwargs(), **options)
    cli.write_results(cfg, records, cli.run_predictions(pipe, records, progress=False), _as_text)
    return 0
