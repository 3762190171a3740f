"""`clozeformer evaluate`: score a fine-tuned directory on a task's dev (or labelled test) files.

The task, columns, max_seq_len and QA settings default to those the model was fine-tuned with
(`MODEL/finetune_config.json`); flags override them. Labels come from the model's
`config.json` (`id2label`); a gold label the model does not know is an error naming its line.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clozeformer.cliutil import add_dataclass_args, dataclass_from_args, load_config_file, print_config, save_config
from clozeformer.errors import ClozeformerError
from clozeformer.tasks.common import Problems
from clozeformer.tasks.config import INHERITED_FIELDS, EvaluateConfig, TaskDataConfig
from clozeformer.tasks.runner import SplitData, TaskRunner, check_labels, format_scores
from clozeformer.tasks.spec import TaskSpec, get_task, resolve_files


def inherited_values(model_dir: str | None) -> dict:
    """Settings saved by `finetune` beside the model, as defaults for evaluate/predict."""
    if not model_dir:
        return {}
    path = Path(model_dir) / "finetune_config.json"
    if not path.is_file():
        return {}
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ClozeformerError(f"{path}: invalid JSON ({e})") from None
    return {k: saved[k] for k in INHERITED_FIELDS if saved.get(k) is not None}


def load_finetuned(cfg: TaskDataConfig, model_dir: str | None):
    """(spec, runner, model, device) for a fine-tuned directory."""
    import torch

    from clozeformer.config import BertConfig
    from clozeformer.device import resolve_device
    from clozeformer.tasks.finetune import check_vocab, load_tokenizer, model_class

    if not model_dir:
        raise ClozeformerError("--model is required: a fine-tuned model directory")
    mdir = Path(model_dir)
    if not mdir.is_dir():
        raise ClozeformerError(f"{mdir}: no such model directory")
    config = BertConfig.from_pretrained(mdir)
    task = cfg.task or config.extra.get("finetuning_task")
    spec = get_task(task, cfg)
    arch = (config.extra.get("architectures") or [None])[0]
    if arch is not None and arch != spec.model_class_name:
        raise ClozeformerError(
            f"{mdir}: this model is a {arch}, but task {spec.name} needs a "
            f"{spec.model_class_name}; was it fine-tuned for another task?"
        )
    labels = None
    if spec.family in ("classification", "token"):
        if not config.id2label:
            raise ClozeformerError(f"{mdir / 'config.json'}: no id2label: not fine-tuned for a classification task")
        labels = [config.id2label[i] for i in sorted(config.id2label)]
    elif spec.family == "regression" and config.num_labels != 1:
        raise ClozeformerError(f"{mdir / 'config.json'}: num_labels is {config.num_labels}; a regression model has 1")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = resolve_device(cfg.device)
    tokenizer = load_tokenizer(None, str(mdir))
    check_vocab(tokenizer, config, str(mdir))
    model = model_class(spec).from_pretrained(mdir, strict_heads=True).to(device).eval()
    version_2 = bool(config.extra.get("qa_version_2", spec.qa_metric == "squad_v2"))
    runner = TaskRunner(spec, cfg, tokenizer, labels, version_2)
    if runner.max_len > config.max_position_embeddings:
        raise ClozeformerError(
            f"--max-seq-len {runner.max_len} exceeds the model's max_position_embeddings ({config.max_position_embeddings})"
        )
    return spec, runner, model, device


def read_splits(
    spec: TaskSpec, cfg: TaskDataConfig, runner: TaskRunner, which: str, labeled: bool | None, problems: Problems
) -> list[SplitData]:
    wanted = spec.split_group(which)
    optional = tuple(s for s in wanted if s in spec.optional_splits)
    files = resolve_files(spec, cfg.data, wanted, optional=optional)
    out = []
    for split, path in files.items():
        print(f"{split}: {path}")
        examples = spec.read(path, problems, labeled)
        if cfg.max_eval_examples:
            examples = examples[: cfg.max_eval_examples]
        if labeled:
            check_labels(spec, examples, runner.labels)
        sd = SplitData(split, path, examples)
        sd.features = runner.featurize(examples, problems, training=False)
        out.append(sd)
    return out


@dataclass
class Session:
    """What evaluate and predict both start from: the model, its task runner, the read splits."""

    spec: TaskSpec
    runner: TaskRunner
    model: Any
    device: Any
    problems: Problems
    splits: list[SplitData]
    out: Path

    @classmethod
    def open(cls, cfg: TaskDataConfig, labeled: bool | None, default_out: str, config_name: str) -> Session:
        cfg.validate()
        spec, runner, model, device = load_finetuned(cfg, cfg.model)
        problems = Problems()
        splits = read_splits(spec, cfg, runner, cfg.split, labeled, problems)
        out = Path(cfg.out) if cfg.out else Path(cfg.model) / default_out
        out.mkdir(parents=True, exist_ok=True)
        save_config(cfg, out / config_name)
        return cls(spec, runner, model, device, problems, splits, out)

    def decode(self, sd: SplitData, batch_size: int) -> Any:
        """The split's model outputs, decoded into the task's predictions."""
        outputs = self.runner.infer(self.model, sd.features, batch_size, self.device, progress=True)
        return self.runner.decode(sd.examples, sd.features, outputs)


def evaluate(cfg: EvaluateConfig) -> dict:
    from clozeformer.io import atomic_write_json

    run = Session.open(cfg, True, "eval", "evaluate_config.json")
    spec, runner, problems, out = run.spec, run.runner, run.problems, run.out
    result: dict = {
        "task": spec.name,
        "model": cfg.model,
        "main_metric": spec.main_metric,
        "scores": {},
        "examples": {},
        "seconds": {},
    }
    for sd in run.splits:
        t0 = time.monotonic()
        decoded = run.decode(sd, cfg.eval_batch_size)
        scores = runner.score(sd.examples, decoded)
        result["scores"][sd.name] = scores
        result["examples"][sd.name] = len(sd.examples)
        result["seconds"][sd.name] = round(time.monotonic() - t0, 2)
        print(f"{spec.name} {sd.name} ({len(sd.examples)} examples): {format_scores(scores)}")
    problems.report()
    result["warnings"] = dict(problems.counts)
    atomic_write_json(out / "metrics.json", result)
    print(f"wrote {out / 'metrics.json'}")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="JSON/YAML file of option values (flags win)")
    add_dataclass_args(parser, EvaluateConfig)


def config_from_args(cls: type, args: argparse.Namespace) -> TaskDataConfig:
    """defaults <- MODEL/finetune_config.json <- --config file <- flags."""
    values = inherited_values(getattr(args, "model", None))
    if args.config:
        values.update(load_config_file(args.config))
    return dataclass_from_args(cls, args, values)


def main(args: argparse.Namespace) -> int:
    cfg = config_from_args(EvaluateConfig, args)
    print_config(cfg)
    evaluate(cfg)
    return 0
