"""qa: extract the answer span of a question from a context (SQuAD-style span QA).

    pipe({"question": "Where does John live?", "context": "John lives in Paris."})
    -> {"answer": "Paris", "score": 0.87, "start": 14, "end": 19, "windows": 1, "truncated": False}

`start`/`end` are character offsets into the context (`context[start:end] == answer`). A
context longer than the model's window is cut into overlapping windows ([CLS] question [SEP]
context-part [SEP]; consecutive parts share `doc_stride` tokens, as in BERT's SQuAD recipe),
each window is scored, and the answer is decoded by `clozeformer.data.spans.decode_question`, the
decoder `evaluate` scores with: n-best spans of every window ranked by start + end logit,
`score` the answer's probability among them. A question longer than `max_question_length`
tokens is truncated (flagged) or rejected, by `overlong`.

Unset options come from the model: fine-tuning stores its window and decoding settings
(`qa_*` keys of config.json), so a fine-tuned model answers here as `evaluate` scored it.
With `allow_no_answer` (SQuAD v2.0-style models, trained to point at [CLS] when the context
holds no answer) the answer is "" (start = end = 0) when the null score beats the best span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenizers import Tokenizer as Backend

from clozeformer.data.spans import QA_SETTINGS, decode_question, effective_stride
from clozeformer.infer import options
from clozeformer.infer.backends import Batch
from clozeformer.infer.pipelines import Example, InputError, Pipeline, Window, check_text
from clozeformer.utils.errors import ClozeformerError


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


class QuestionAnsweringPipeline(Pipeline):
    task = "qa"
    window_key = "qa_max_seq_len"

    def __init__(
        self,
        runner,
        tokenizer,
        *,
        doc_stride: int | None = None,
        max_answer_length: int | None = None,
        max_question_length: int | None = None,
        allow_no_answer: bool | None = None,
        n_best: int | None = None,
        null_threshold: float | None = None,
        **kwargs: Any,
    ) -> None:
        extra = runner.config.extra

        def setting(value, key):  # the caller's, else the fine-tuned model's, else the default
            return value if value is not None else extra.get(key, QA_SETTINGS[key])

        super().__init__(runner, tokenizer, **kwargs)
        self.max_question_length = int(setting(max_question_length, "qa_max_query_len"))
        self.doc_stride = effective_stride(self.max_length, self.max_question_length, int(setting(doc_stride, "qa_doc_stride")))
        self.max_answer_length = int(setting(max_answer_length, "qa_max_answer_len"))
        self.n_best = int(setting(n_best, "qa_n_best"))
        self.null_threshold = float(setting(null_threshold, "qa_null_threshold"))
        self.allow_no_answer = bool(setting(allow_no_answer, "qa_version_2"))
        if self.max_answer_length < 1 or self.n_best < 1:
            raise ClozeformerError(f"max_answer_length and n_best must be >= 1, got {self.max_answer_length} and {self.n_best}")
        self.question_backend = Backend.from_str(self.backend.to_str())  # measures questions, uncut
        self.question_backend.no_truncation()
        # windows: truncate only the context, overflow into further windows sharing doc_stride tokens
        self.backend.enable_truncation(self.max_length, stride=self.doc_stride, strategy="only_second")

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
                offsets = [tuple(o) if sid == 1 else None for o, sid in zip(w.offsets, w.sequence_ids)]
                if any(o is not None for o in offsets):
                    windows.append(Window(w.ids, w.type_ids, {"offsets": offsets}))
            if not windows:
                raise InputError(i, "the context has no tokens")
            examples.append(Example(windows, {"context": context, "truncated": q_cut}))
        return examples

    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]:
        start, end = (t.numpy() for t in self.runner.span_logits(batch))  # (B, T) each
        return [(start[b, : len(w.input_ids)], end[b, : len(w.input_ids)]) for b, w in enumerate(windows)]

    def postprocess(self, example: Example, outputs: list[Any]) -> dict:
        answer = decode_question(
            example.data["context"],
            [(w.data["offsets"], s, e) for w, (s, e) in zip(example.windows, outputs)],
            n_best=self.n_best,
            max_answer_len=self.max_answer_length,
            version_2=self.allow_no_answer,
            null_threshold=self.null_threshold,
        )
        found = {"answer": answer.text, "score": answer.probability, "start": answer.start, "end": answer.end}
        return found | {"windows": len(example.windows), "truncated": example.data["truncated"]}

    def describe(self) -> dict:
        names = ("doc_stride", "max_answer_length", "max_question_length", "allow_no_answer", "n_best", "null_threshold")
        return {**super().describe(), **{name: getattr(self, name) for name in names}}


# ----------------------------------------------------------------------------- CLI verb


@dataclass
class QAConfig(options.PipelineConfig):
    question: str | None = field(default=None, metadata={"help": "the question (with --context)"})
    context: str | None = field(default=None, metadata={"help": "the text holding the answer"})
    doc_stride: int | None = field(
        default=None, metadata={"help": "tokens shared by consecutive windows of a long context (unset: the model's, else 128)"}
    )
    max_answer_length: int | None = field(
        default=None, metadata={"help": "longest answer, in tokens (unset: the model's, else 30)"}
    )
    max_question_length: int | None = field(
        default=None, metadata={"help": "longer questions are truncated or rejected (unset: the model's, else 64)"}
    )
    allow_no_answer: bool | None = field(
        default=None,
        metadata={
            "help": 'SQuAD v2.0-style models: answer "" when [CLS] (no answer) beats the best span '
            "(unset: whether the model was fine-tuned on v2.0 data)"
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.inputs:
            raise ClozeformerError("qa takes --question and --context (or --input FILE), not text arguments")
        if (self.question is None) != (self.context is None):
            raise ClozeformerError("give both --question and --context")
        if self.question is not None and self.input:
            raise ClozeformerError("give --question/--context or --input FILE, not both")


CONFIG, POSITIONAL = QAConfig, ("inputs",)


def _from_fields(obj: dict, source: str) -> dict:
    return {"question": options.require_field(obj, "question", source), "context": options.require_field(obj, "context", source)}


def _text_line(line: str, source: str) -> dict:
    if "\t" not in line:
        raise ClozeformerError(f"{source}: a text line for qa is QUESTION<TAB>CONTEXT (or use JSONL)")
    q, c = line.split("\t", 1)
    return {"question": q, "context": c}


def _as_text(record: options.Record, result: dict) -> str:
    where = f", chars {result['start']}-{result['end']}" if result["answer"] else ""
    return f"{result['answer'] or '(no answer)'}\t(score {result['score']:.3f}{where}){options.mark_truncated(result)}"


def main(cfg: QAConfig) -> int:
    names = ("doc_stride", "max_answer_length", "max_question_length", "allow_no_answer")
    settings = {name: getattr(cfg, name) for name in names}
    records = None  # read from the arguments or --input, unless given by --question/--context
    if cfg.question is not None:
        value = {"question": cfg.question, "context": cfg.context}
        records = [options.Record("--question/--context", value, dict(value))]
    return options.predict_main("qa", cfg, settings, _as_text, _from_fields, _text_line, records)
