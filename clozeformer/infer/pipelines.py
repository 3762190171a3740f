"""`pipeline(task, model=DIR)`: one object per task, all sharing one batch loop.

    pipe = clozeformer.pipeline("fill-mask", model="runs/mlm")
    pipe("The cat sat on the [MASK].")          # one input  -> one result (a dict)
    pipe(["a [MASK] b", "c [MASK] d"])           # a list     -> a list of results

A task is three steps; `Pipeline.run` owns everything between them:

    preprocess(items)  -> [Example]   validate + tokenize; a bad item raises InputError naming it
    forward(batch, ws) -> [output]    one model call on a padded batch; one output per window
    postprocess(ex, outs) -> result   per example, JSON-ready (plain dicts, lists, floats)

An Example holds one or more Windows (model rows): QA cuts a long context and NER a long text
into overlapping windows (nothing is lost; `overlong="reject"` refuses them instead); the other
tasks use one window and truncate (or reject) what does not fit. `run` flattens the windows of all examples, cuts
length-sorted batches padded to their own longest row (clozeformer.data.padding), and routes outputs back.
The server calls preprocess per request and `run` once per micro-batch of requests.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from tokenizers import Tokenizer as Backend

from clozeformer.data.padding import batch_indices, pad_right
from clozeformer.infer.backends import Batch, OnnxRunner, Runner, TorchRunner, load_model, read_architecture, require_task
from clozeformer.modeling.tokenizer import MAX_INPUT_CHARS_PER_WORD
from clozeformer.utils.errors import ClozeformerError

#: task -> "module:Class"; modules import on first use.
PIPELINES: dict[str, str] = {
    "fill-mask": "clozeformer.infer.fill_mask:FillMaskPipeline",
    "classify": "clozeformer.infer.classify:ClassifyPipeline",
    "embed": "clozeformer.infer.embed:EmbedPipeline",
    "qa": "clozeformer.infer.qa:QuestionAnsweringPipeline",
    "ner": "clozeformer.infer.ner:NerPipeline",
}
#: transformers' pipeline task names (and sentence-transformers' "sentence-similarity") -> ours
TASK_ALIASES: dict[str, str] = {
    "text-classification": "classify",
    "sentiment-analysis": "classify",
    "feature-extraction": "embed",
    "sentence-similarity": "embed",
    "question-answering": "qa",
    "token-classification": "ner",
}
Overlong = Literal["truncate", "reject"]


class InputError(ClozeformerError):
    """One bad input: `index` is its position in the list given, `reason` the message without it."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"input {index}: {reason}")
        self.index = index
        self.reason = reason


@dataclass
class Window:
    """One model row: token ids and types, plus what postprocess needs (offsets, positions...)."""

    input_ids: list[int]
    token_type_ids: list[int]
    data: Any = None


@dataclass
class Example:
    """One input: its windows, and what postprocess needs of the input itself."""

    windows: list[Window]
    data: dict = field(default_factory=dict)


def check_text(index: int, value: Any, name: str = "text") -> str:
    if not isinstance(value, str):
        raise InputError(index, f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InputError(index, f"{name} is empty")
    return value


#: most characters one WordPiece token can stand for, its separator included (see clip_chars)
CHARS_PER_TOKEN_BOUND = MAX_INPUT_CHARS_PER_WORD + 1


class Pipeline(ABC):
    task: ClassVar[str] = ""
    #: config.json key of the window a fine-tuned model was evaluated with (qa, ner): its default max_length
    window_key: ClassVar[str] = ""

    def __init__(
        self, runner: Runner, tokenizer, *, batch_size: int = 32, max_length: int | None = None, overlong: Overlong = "truncate"
    ) -> None:
        require_task(self.task, runner.architecture, "model")
        if batch_size < 1:
            raise ClozeformerError(f"batch_size must be >= 1, got {batch_size}")
        if overlong not in ("truncate", "reject"):
            raise ClozeformerError(f"overlong={overlong!r}: choose truncate or reject")
        limit = runner.config.max_position_embeddings
        if max_length is None and runner.config.extra.get(self.window_key):
            # a fine-tuned model reads texts in the windows its evaluation used
            max_length = min(int(runner.config.extra[self.window_key]), limit)
        if max_length is not None and not 8 <= max_length <= limit:
            raise ClozeformerError(
                f"max_length={max_length}: must be between 8 and the model's max_position_embeddings ({limit})"
            )
        self.runner = runner
        self.config = runner.config
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length or min(limit, 512)
        self.overlong = overlong
        # A private copy of the Rust tokenizer, configured once: the shared one changes its
        # truncation per call, which is not safe while the server tokenizes in other threads.
        self.backend = Backend.from_str(tokenizer.backend.to_str())
        self.backend.no_padding()
        self.backend.enable_truncation(self.max_length, strategy="longest_first")
        self.pad_id = tokenizer.pad_token_id

    # ------------------------------------------------------------------ the task's three steps
    @abstractmethod
    def preprocess(self, items: Sequence[Any]) -> list[Example]: ...

    @abstractmethod
    def forward(self, batch: Batch, windows: list[Window]) -> list[Any]: ...

    @abstractmethod
    def postprocess(self, example: Example, outputs: list[Any]) -> Any: ...

    # ------------------------------------------------------------------ shared machinery
    def pad(self, windows: Sequence[Window]) -> Batch:
        """Windows -> one Batch padded on the right to the longest."""
        ids, mask = pad_right([w.input_ids for w in windows], self.pad_id)  # (B, T) each
        types, _ = pad_right([w.token_type_ids for w in windows], 0)
        return Batch(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types))

    def clip_chars(self, index: int, text: str) -> tuple[str, bool]:
        """(text, cut): `text` cut to the characters `max_length` tokens can take up (WordPiece
        makes a word of over 100 characters one [UNK], so a token and its separator span about
        101), so a 50 MB line is not tokenized whole to keep its first 512 tokens. A cut text is
        flagged truncated, or rejected with overlong="reject"."""
        bound = self.max_length * CHARS_PER_TOKEN_BOUND
        if len(text) <= bound:
            return text, False
        if self.overlong == "reject":
            raise InputError(
                index,
                f"{len(text):,} characters, more than {self.max_length} tokens take (shorten it, or use overlong='truncate')",
            )
        return text[:bound], True

    def encode(self, items: Sequence[str | tuple[str, str]]) -> list[tuple[Any, bool]]:
        """(tokenizers Encoding, cut) per text or (text, text_pair), each text `clip_chars`-ed first."""
        clipped = [[self.clip_chars(i, t) for t in ((item,) if isinstance(item, str) else item)] for i, item in enumerate(items)]
        encs = self.backend.encode_batch([c[0][0] if len(c) == 1 else (c[0][0], c[1][0]) for c in clipped])
        return [(enc, any(cut for _, cut in c)) for enc, c in zip(encs, clipped)]

    def check_length(self, index: int, enc) -> bool:
        """Whether `enc` (a tokenizers Encoding) was truncated; raises when overlong inputs are rejected."""
        truncated = len(enc.overflowing) > 0
        if truncated and self.overlong == "reject":
            raise InputError(
                index, f"longer than the maximum of {self.max_length} tokens (shorten it, or use overlong='truncate')"
            )
        return truncated

    def __call__(self, inputs: Any, *, progress: bool = False) -> Any:
        """One input -> one result; a list of inputs -> a list of results, in order."""
        single = not isinstance(inputs, list)
        items = [inputs] if single else inputs
        try:
            examples = self.preprocess(items)
        except InputError as e:
            if single:
                raise ClozeformerError(e.reason) from None
            raise
        results = self.run(examples, progress=progress)
        return results[0] if single else results

    def run(self, examples: list[Example], progress: bool = False) -> list[Any]:
        """Forward every window in length-sorted, dynamically padded batches; results in order."""
        from clozeformer.utils.progress import progress_bar

        flat = [w for ex in examples for w in ex.windows]
        outputs: list[Any] = [None] * len(flat)
        batches = batch_indices([len(w.input_ids) for w in flat], self.batch_size, shuffle=False)
        with progress_bar(len(flat), enabled=progress, unit="seq", desc=self.task) as bar:
            for idx in batches:
                windows = [flat[j] for j in idx]
                for j, out in zip(idx, self.forward(self.pad(windows), windows)):
                    outputs[j] = out
                bar.update(len(idx))
        rest = iter(outputs)  # each example's outputs, in the order of its windows
        return [self.postprocess(ex, list(islice(rest, len(ex.windows)))) for ex in examples]

    def to_json(self, result: Any) -> Any:
        """`result` as plain JSON types (only embeddings hold numpy arrays)."""
        return result

    def describe(self) -> dict:
        return {name: getattr(self, name) for name in ("task", "max_length", "batch_size", "overlong")} | self.runner.describe()


def pipeline(
    task: str,
    model: str | Path | Runner | torch.nn.Module,
    *,
    tokenizer=None,
    device: str | None = None,
    batch_size: int = 32,
    max_length: int | None = None,
    overlong: Overlong = "truncate",
    backend: Literal["torch", "onnx"] = "torch",
    onnx: str | Path | None = None,
    dtype: str = "auto",
    compile: bool = False,
    threads: int | None = None,
    **task_options: Any,
) -> Pipeline:
    """A ready pipeline for `task`: "fill-mask", "classify", "embed", "qa", "ner", or transformers'
    name for one of them ("text-classification", "feature-extraction", "question-answering",
    "token-classification"; `TASK_ALIASES`).

    `model` is an HF-format directory (config.json with "architectures", model.safetensors,
    vocab.txt), or an already loaded model / Runner together with `tokenizer`. `backend="onnx"`
    runs `onnx` (default DIR/model.onnx) in ONNX Runtime. `threads` sets torch's (and ONNX
    Runtime's) intra-op thread count. `task_options` go to the task (`top_k`, `pooling`, ...).
    """
    from clozeformer.modeling.tokenizer import Tokenizer, check_vocab_fits

    task = TASK_ALIASES.get(task, task)
    if task not in PIPELINES:
        raise ClozeformerError(f"unknown task {task!r}; choose one of {', '.join(PIPELINES)} (or {', '.join(TASK_ALIASES)})")
    module, name = PIPELINES[task].split(":")
    cls: type[Pipeline] = getattr(importlib.import_module(module), name)
    if threads is not None:
        if threads < 1:
            raise ClozeformerError(f"threads must be >= 1, got {threads}")
        torch.set_num_threads(threads)
    if isinstance(model, (str, Path)):
        from clozeformer.hub import model_dir

        directory = model_dir(model)
        config, architecture = read_architecture(directory)
        require_task(task, architecture, str(directory))  # before loading weights
        runner: Runner
        if backend == "torch":
            runner = TorchRunner(load_model(directory)[2], device=device, dtype=dtype, compile=compile)
        elif backend == "onnx":
            runner = OnnxRunner(onnx or directory / "model.onnx", config, architecture, threads)
        else:
            raise ClozeformerError(f"--backend {backend!r}: choose torch or onnx")
        runner.source = str(directory.resolve())
        tokenizer = directory if tokenizer is None else tokenizer
    elif isinstance(model, Runner):
        runner = model
    elif isinstance(model, torch.nn.Module):
        runner = TorchRunner(model, device=device, dtype=dtype, compile=compile)
    else:
        raise ClozeformerError(f"model must be a directory, a clozeformer model or a Runner, not {type(model).__name__}")
    if tokenizer is None:
        raise ClozeformerError("pass tokenizer= with a model object (a directory brings its own vocab.txt)")
    if isinstance(tokenizer, (str, Path)):
        tokenizer = Tokenizer.from_pretrained(tokenizer)
    check_vocab_fits(tokenizer.vocab_size, runner.config.vocab_size, str(model) if isinstance(model, (str, Path)) else "model")
    try:
        return cls(runner, tokenizer, batch_size=batch_size, max_length=max_length, overlong=overlong, **task_options)
    except TypeError as e:
        raise ClozeformerError(f"{task}: {e}") from None
