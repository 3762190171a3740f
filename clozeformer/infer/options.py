"""What the prediction verbs (fill-mask, classify, embed, qa, ner) share.

Inputs come from the command line (one per argument) or from `--input FILE` (`-` = stdin):
plain text, one input per line (blank lines skipped), or JSONL, one object per line with the
task's fields (`text`; `text_pair` for classify; `question` + `context` for qa). Results go to
stdout, or atomically to `--out FILE`, as readable text or JSONL (`--json`; each line echoes
the input's fields next to the result). With `--verbose` the resolved config is printed to stderr
(stdout carries only results, so it can be piped); it is saved beside `--out` as `FILE.config.json`.
A bad input is reported as `FILE:LINE: reason` (or `argument N: reason`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

from clozeformer.utils.configs import print_config, save_config
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import check_output_file, decode_text, json_object


@dataclass
class RunnerOptions:
    """What every verb that runs a model takes (prediction verbs, search, serve): model, backend, batching."""

    model: str = field(
        default="",
        metadata={"help": "model directory (HF format: config.json, model.safetensors, vocab.txt) or Hub id", "required": True},
    )
    batch_size: int = field(default=32, metadata={"help": "most sequences per forward pass"})
    max_length: int | None = field(
        default=None, metadata={"help": "max tokens per sequence (default: the model's maximum, at most 512)"}
    )
    overlong: Literal["truncate", "reject"] = field(
        default="truncate",
        metadata={"help": "inputs over max_length: truncate (flagged; qa and ner use windows instead) or reject (serve: 422)"},
    )
    backend: Literal["torch", "onnx"] = field(default="torch", metadata={"help": "run in PyTorch or ONNX Runtime"})
    onnx: str | None = field(default=None, metadata={"help": "ONNX file for --backend onnx (default MODEL/model.onnx)"})
    device: str | None = field(default=None, metadata={"help": "cpu, cuda, cuda:1 (default: cuda if available)"})
    dtype: Literal["auto", "fp32", "bf16"] = field(
        default="auto", metadata={"help": "auto = bf16 only on hardware with native bf16 (GPUs), else fp32"}
    )
    threads: int | None = field(default=None, metadata={"help": "intra-op CPU threads (default: torch's choice)"})
    compile: bool = field(default=False, metadata={"help": "torch.compile the model (slow first batch)"})

    def __post_init__(self) -> None:
        if not self.model:
            raise ClozeformerError("--model DIR is required")
        if self.batch_size < 1:
            raise ClozeformerError(f"--batch-size must be >= 1, got {self.batch_size}")

    def pipeline_kwargs(self) -> dict[str, Any]:
        """The options that go to `pipeline()` as they are."""
        names = ("batch_size", "max_length", "overlong", "backend", "onnx", "device", "dtype", "threads", "compile")
        return {name: getattr(self, name) for name in names}


@dataclass
class PipelineConfig(RunnerOptions):
    """Options every prediction verb takes."""

    inputs: list[str] = field(default_factory=list, metadata={"help": "input text(s); or use --input"})
    input: str | None = field(default=None, metadata={"help": "read inputs from FILE ('-' = stdin): one per line, or JSONL"})
    format: Literal["auto", "text", "jsonl"] = field(
        default="auto",
        metadata={"help": "input file format; auto = JSONL when the name ends in .jsonl or the first line is an object"},
    )
    out: str | None = field(
        default=None, metadata={"help": "write results to FILE (atomically) instead of stdout", "aliases": ("output",)}
    )
    json: bool = field(default=False, metadata={"help": "JSONL output, one object per input"})
    progress: bool = field(default=True, metadata={"help": "progress bar when reading a file"})
    verbose: bool = field(default=False, metadata={"help": "print the resolved config (to stderr) before the results"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.inputs and self.input:
            raise ClozeformerError("give inputs as arguments or with --input FILE, not both")
        if self.out:
            check_output_file(self.out, "--out")


@dataclass
class Record:
    """One input: where it came from (for errors), what the pipeline takes, what to echo in JSONL."""

    source: str
    value: Any
    echo: dict


def show_config(cfg: Any) -> None:
    """The resolved config on stderr, with --verbose (it is saved beside --output either way)."""
    if getattr(cfg, "verbose", True):
        with contextlib.redirect_stdout(sys.stderr):
            print_config(cfg)


def read_numbered_lines(path: str) -> list[tuple[int, str]]:
    """(line number, line) of a UTF-8 text file or stdin; binary and non-UTF-8 files are errors."""
    if path == "-":
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        p = Path(path)
        if not p.is_file():
            raise ClozeformerError(f"{path}: no such input file")
        data, name = p.read_bytes(), path
    text = decode_text(data, name) if data.strip() else ""  # no inputs in an empty file: the caller says so
    return [(i + 1, line.rstrip("\r")) for i, line in enumerate(text.split("\n"))]


def echo_of(value: Any) -> dict:
    """The input's fields as JSONL output repeats them: text, text_pair, question, context."""
    if isinstance(value, str):
        return {"text": value}
    if isinstance(value, tuple):
        return {"text": value[0], "text_pair": value[1]}
    return dict(value)


def text_field(obj: dict, source: str) -> str:
    """A JSONL object's input for the one-text tasks: its `text` field."""
    return require_field(obj, "text", source)


def plain_line(line: str, source: str) -> str:
    return line


def read_records(
    cfg: PipelineConfig, from_fields: Callable[[dict, str], Any] = text_field, text_line: Callable[[str, str], Any] = plain_line
) -> list[Record]:
    """Inputs from arguments, or from `cfg.input` as text lines or JSONL objects.

    `from_fields(obj, source)` turns a JSONL object into the pipeline's input; `text_line(line,
    source)` does the same for an argument or a plain-text line (by default: the `text` field,
    the line itself). A JSONL `id` is echoed back.
    """
    if cfg.inputs and not cfg.input:
        lines, fmt = [(f"argument {i + 1}", t) for i, t in enumerate(cfg.inputs)], "text"
    else:
        if not cfg.input and sys.stdin.isatty():
            raise ClozeformerError("no inputs: give text as arguments or --input FILE ('-' for stdin)")
        cfg.input = cfg.input or "-"
        name = "<stdin>" if cfg.input == "-" else cfg.input
        lines = [(f"{name}:{n}", s) for n, s in read_numbered_lines(cfg.input) if s.strip()]
        if not lines:
            raise ClozeformerError(f"{name}: no inputs (the file is empty)")
        fmt = cfg.format
        if fmt == "auto":
            fmt = "jsonl" if name.endswith(".jsonl") or lines[0][1].lstrip().startswith("{") else "text"
    records = []
    for source, line in lines:
        if fmt == "text":
            value, echo = text_line(line, source), {}
        else:
            obj = json_object(line, source)
            value, echo = from_fields(obj, source), ({"id": obj["id"]} if "id" in obj else {})
        records.append(Record(source, value, echo | echo_of(value)))
    return records


def require_field(obj: dict, key: str, source: str) -> str:
    if key not in obj:
        raise ClozeformerError(f"{source}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, str):
        raise ClozeformerError(f"{source}: field {key!r} must be a string")
    return value


def run_predictions(records: list[Record], run: Callable[[list], Any]) -> Any:
    """`run(values)` over all records' values; a bad input is reported by its file and line."""
    from clozeformer.infer.pipelines import InputError

    try:
        return run([r.value for r in records])
    except InputError as e:
        raise ClozeformerError(f"{records[e.index].source}: {e.reason}") from None


def write_lines(cfg: PipelineConfig, lines: list[str]) -> None:
    """`lines` to stdout, or atomically to `cfg.out` with the config saved beside it."""
    out = "".join(line + "\n" for line in lines)
    if cfg.out:
        from clozeformer.utils.io import atomic_write_text

        atomic_write_text(cfg.out, out)
        save_config(cfg, cfg.out + ".config.json")
    else:
        sys.stdout.write(out)
        sys.stdout.flush()


def predict_main(
    task: str, cfg: PipelineConfig, task_options: dict, as_text, from_fields=text_field, text_line=plain_line, records=None
) -> int:
    """The whole verb: config -> inputs -> pipeline -> results. `records` replace reading the inputs
    (qa's --question/--context)."""
    from clozeformer.infer.pipelines import pipeline

    show_config(cfg)
    if records is None:
        records = read_records(cfg, from_fields, text_line)
    pipe = pipeline(task, cfg.model, **cfg.pipeline_kwargs(), **task_options)
    results = [pipe.to_json(r) for r in run_predictions(records, partial(pipe, progress=cfg.progress and cfg.input is not None))]
    as_line = (lambda r, res: json.dumps({**r.echo, **res}, ensure_ascii=False)) if cfg.json else as_text
    write_lines(cfg, [as_line(r, res) for r, res in zip(records, results)])
    if cfg.out:
        print(f"wrote {len(results)} results to {cfg.out}", file=sys.stderr)
    return 0


def mark_truncated(result: dict) -> str:
    return " [truncated]" if result.get("truncated") else ""
