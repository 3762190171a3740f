"""What fine-tuning starts from and what `evaluate`/`predict` open, in one place.

* the task model: a pretrained directory with a new head, or a preset at random init
  (`build_task_model`), its class (`model_class`), tokenizer (`load_tokenizer`) and the
  vocabulary check between them (`check_vocab`);
* a fine-tuned directory (`load_finetuned`), its remembered settings (`inherited_values`,
  `saved_settings`: defaults <- finetune_config.json <- --config <- flags) and the
  `Session` that evaluate and predict both start from.

Verbs import this module, never each other.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clozeformer import hub
from clozeformer.modeling.config import PRESETS, BertConfig
from clozeformer.tasks.common import Problems
from clozeformer.tasks.spec import TaskSpec, get_task, read_examples, resolve_files
from clozeformer.tasks.task_config import INHERITED_FIELDS, FinetuneConfig, TaskDataConfig
from clozeformer.tasks.task_runner import SplitData, TaskRunner, check_labels
from clozeformer.utils.configs import canonical_keys, save_config
from clozeformer.utils.device import resolve_device
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import read_json_object

# ----------------------------------------------------------------------------- models and tokenizers


def is_preset(model: str) -> bool:
    return model in PRESETS and not Path(model).exists()


def load_tokenizer(tokenizer: str | None, model: str):
    from clozeformer.modeling.tokenizer import Tokenizer

    if tokenizer is not None:
        return Tokenizer.from_pretrained(tokenizer)
    if is_preset(model):
        raise ClozeformerError(f"--model {model} is a preset (random init): pass --tokenizer DIR_OR_VOCAB too")
    directory = hub.model_dir(model)
    if not (directory / "vocab.txt").is_file() and not (directory / "tokenizer.json").is_file():
        raise ClozeformerError(f"{model}: no vocab.txt or tokenizer.json in the model directory; pass --tokenizer DIR_OR_VOCAB")
    return Tokenizer.from_pretrained(directory)


def model_class(spec: TaskSpec):
    """The class fine-tuned for `spec` (sentence embeddings: the bi-encoder around a BertModel)."""
    if spec.family == "embedding":
        from clozeformer.tasks.embedding import SentenceEncoder

        return SentenceEncoder
    from clozeformer.modeling import bert as M

    return getattr(M, spec.model_class_name)


def base_sentence_modules(model: str):
    """The pooling, normalisation and length of a sentence-transformers base model (None otherwise)."""
    from clozeformer.modeling.sbert import read_modules

    return None if is_preset(model) else read_modules(hub.model_dir(model))


def head_overrides(spec: TaskSpec, labels: list[str] | None) -> dict:
    """The config.json changes that shape the task head (HF field names)."""
    if spec.family == "regression":
        return {"num_labels": 1, "problem_type": "regression"}
    if spec.family in ("classification", "token"):
        assert labels is not None
        kw = {"id2label": dict(enumerate(labels)), "label2id": {lab: i for i, lab in enumerate(labels)}}
        if spec.family == "classification":
            kw["problem_type"] = "single_label_classification"
        return kw
    return {}


def check_vocab(tokenizer, config: BertConfig, where: str) -> None:
    from clozeformer.modeling.tokenizer import check_vocab_fits

    check_vocab_fits(tokenizer.vocab_size, config.vocab_size, where)
    if tokenizer.pad_token_id != config.pad_token_id:
        raise ClozeformerError(
            f"{where}: the tokenizer's [PAD] id is {tokenizer.pad_token_id} but the model's "
            f"pad_token_id is {config.pad_token_id}: mismatched vocab"
        )


def build_task_model(spec: TaskSpec, cfg: FinetuneConfig, tokenizer, labels: list[str] | None):
    """The task model from a pretrained directory (new head) or a preset at random init; for
    sentence embeddings, the bi-encoder around either's encoder."""
    overrides = head_overrides(spec, labels)
    if cfg.dropout is not None:
        overrides.update(hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout)
    if spec.family == "embedding":
        from clozeformer.modeling.bert import BertModel
        from clozeformer.tasks.embedding import SentenceEncoder

        assert cfg.pooling is not None  # resolved by finetune (the base model's own, else mean)
        return SentenceEncoder(_start(BertModel, spec, cfg, tokenizer, overrides), cfg.pooling, cfg.normalize)
    if cfg.pooling is not None:
        overrides["classifier_pooling"] = cfg.pooling
    elif not is_preset(cfg.model):
        own = BertConfig.from_pretrained(cfg.model)
        if own.is_decoder and own.classifier_pooling == "cls":
            overrides["classifier_pooling"] = "last"  # left to right, [CLS] has seen only itself
    return _start(model_class(spec), spec, cfg, tokenizer, overrides)


def _start(cls, spec: TaskSpec, cfg: FinetuneConfig, tokenizer, overrides: dict):
    """`cls` from the pretrained directory (config `overrides` applied), or the preset at random init;
    seeded (the new head, or the whole model), its vocabulary checked, its task noted."""
    torch.manual_seed(cfg.seed)
    if is_preset(cfg.model):
        config = BertConfig.preset(cfg.model, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id, **overrides)
        model, where = cls(config), f"preset {cfg.model}"
    else:
        model, where = cls.from_pretrained(cfg.model, **overrides), str(cfg.model)
    check_vocab(tokenizer, model.config, where)
    model.config.extra["finetuning_task"] = spec.name
    return model


# ----------------------------------------------------------------------------- fine-tuned directories


def inherited_values(model_dir: str | None) -> dict:
    """Settings saved by `finetune` beside the model, as defaults for evaluate/predict."""
    if not model_dir:
        return {}
    path = hub.model_dir(model_dir) / "finetune_config.json"
    if not path.is_file():
        return {}
    saved = canonical_keys(TaskDataConfig, read_json_object(path))  # a model saved before a flag was renamed
    return {k: saved[k] for k in INHERITED_FIELDS if saved.get(k) is not None}


def load_finetuned(cfg: TaskDataConfig, model_dir: str | None):
    """(spec, runner, model, device) for a fine-tuned directory."""
    if not model_dir:
        raise ClozeformerError("--model is required: a fine-tuned model directory")
    mdir = hub.model_dir(model_dir)
    if not mdir.is_dir():
        raise ClozeformerError(f"{mdir}: expected a model directory (config.json + weights)")
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
    # a bi-encoder reads the encoder only: a published sentence-transformers model needs no pooler weights
    model = model_class(spec).from_pretrained(mdir, strict_heads=spec.family != "embedding").to(device).eval()
    if spec.family == "embedding" and cfg.max_length is None:  # a sentence-transformers model's own length
        cfg.max_length = model.max_seq_length
    version_2 = bool(config.extra.get("qa_version_2", spec.qa_metric == "squad_v2"))
    runner = TaskRunner(spec, cfg, tokenizer, labels, version_2)
    runner.check_fits(config)
    return spec, runner, model, device


def read_splits(
    spec: TaskSpec, cfg: TaskDataConfig, runner: TaskRunner, labeled: bool | None, problems: Problems
) -> list[SplitData]:
    """The examples and features of the splits `cfg.split` names (dev: all the eval splits)."""
    wanted = spec.split_group(cfg.split)
    optional = tuple(s for s in wanted if s in spec.optional_splits)
    files = resolve_files(spec, cfg.data, wanted, optional=optional)
    out = []
    for split, path in files.items():
        print(f"{split}: {path}")
        examples = read_examples(spec, path, problems, labeled, cfg)[: cfg.max_eval_examples]  # [:None]: all
        if labeled:
            check_labels(spec, examples, runner.labels)
        out.append(SplitData(split, examples, runner.featurize(examples, problems, training=False)))
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
        spec, runner, model, device = load_finetuned(cfg, cfg.model)
        problems = Problems(skip_bad_rows=cfg.skip_bad_rows)
        splits = read_splits(spec, cfg, runner, labeled, problems)
        if spec.family == "embedding" and splits:  # scored pairs: Spearman; pairs: retrieval
            from clozeformer.tasks.embedding import metric_names

            spec.metrics = metric_names(splits[0].examples)
        # beside a local model; a Hub model's snapshot is the cache's, not ours: ./NAME-<default_out>
        beside = Path(cfg.model) / default_out if Path(cfg.model).is_dir() else Path(f"{Path(cfg.model).name}-{default_out}")
        out = Path(cfg.out) if cfg.out else beside
        out.mkdir(parents=True, exist_ok=True)
        save_config(cfg, out / config_name)
        return cls(spec, runner, model, device, problems, splits, out)

    def decode(self, sd: SplitData, batch_size: int) -> Any:
        """The split's model outputs, decoded into the task's predictions."""
        return self.runner.predict(self.model, sd, batch_size, self.device, progress=True)


def saved_settings(args: argparse.Namespace) -> dict:
    """evaluate's and predict's defaults: what `--model` was fine-tuned with (below --config and flags)."""
    return inherited_values(getattr(args, "model", None))
