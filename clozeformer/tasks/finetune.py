"""`clozeformer finetune`: the fine-tuning loop (its model and tokenizer: tasks/loading.py).

    read train/dev -> labels -> features -> model (pretrained dir, or a preset at random init)
    -> AdamW + linear warmup/decay -> epochs of length-grouped, dynamically padded batches
    -> evaluate each epoch (and every --eval-every steps) -> keep the best checkpoint by the
    task's main metric -> OUT/ (HF format: config.json with id2label/label2id,
    model.safetensors, vocab.txt, tokenizer_config.json) + metrics.json + finetune_config.json

Optimizer, schedule, seeding, precision and the NaN guard are the training core's
(`clozeformer.core`, `clozeformer.precision`), the same as `pretrain`'s.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from clozeformer.cliutil import add_config_args, config_dict, config_from_args, print_config, save_config
from clozeformer.config import PRESETS
from clozeformer.core import Schedule, adamw, clip_and_check, param_groups, seed_everything, set_lr
from clozeformer.device import resolve_device
from clozeformer.errors import ClozeformerError
from clozeformer.hub import model_dir
from clozeformer.io import check_output_dir, mark_owned
from clozeformer.padding import batch_indices
from clozeformer.precision import resolve_precision
from clozeformer.spans import effective_stride
from clozeformer.tasks import features as F
from clozeformer.tasks.common import Problems
from clozeformer.tasks.config import FinetuneConfig
from clozeformer.tasks.loading import build_task_model, is_preset, load_tokenizer
from clozeformer.tasks.runner import SplitData, TaskRunner, check_labels, discover_labels, format_scores
from clozeformer.tasks.spec import TaskSpec, get_task, read_examples, resolve_files
from clozeformer.tracking import Trackers

# ----------------------------------------------------------------------------- optimisation


def make_optimizer(model: torch.nn.Module, cfg: FinetuneConfig, total_steps: int) -> tuple[torch.optim.Optimizer, Schedule]:
    """The core's AdamW over BERT's weight-decay groups + linear warmup (the first
    `warmup_ratio` of the steps) then linear decay towards 0."""
    opt = adamw(param_groups(model, cfg.weight_decay), cfg.lr, eps=cfg.adam_eps)
    return opt, Schedule("linear", warmup_steps=int(cfg.warmup_ratio * total_steps))


# ----------------------------------------------------------------------------- the loop

#: consecutive NaN/Inf steps (each skipped) after which fine-tuning stops with an error
MAX_BAD_STEPS = 5


def check_out(out: str | None, overwrite: bool) -> Path:
    """The output directory, checked early by the one rule of `io.check_output_dir`.

    It is created only once the data and the model have loaded, so a run that fails on a
    data error leaves nothing behind to --overwrite.
    """
    if not out:
        raise ClozeformerError("--out is required: the directory for the fine-tuned model")
    return check_output_dir(out, overwrite)


@dataclass
class TaskData:
    """What a fine-tuning run reads before it builds its model."""

    train_examples: list
    n_train_total: int  # before --max-train-examples
    train_features: list[dict]
    evals: list[SplitData]
    labels: list[str] | None
    version_2: bool  # span QA with unanswerable questions
    runner: TaskRunner


def read_task_data(cfg: FinetuneConfig, spec: TaskSpec, files: dict, tokenizer, problems: Problems) -> TaskData:
    """Train and dev examples (train capped to a seeded subset), labels checked on every split,
    then features for all of them."""
    for split, path in files.items():
        print(f"{split}: {path}")
    train_ex = read_examples(spec, files["train"], problems, True, cfg)
    n_train_total = len(train_ex)
    if cfg.max_train_examples and len(train_ex) > cfg.max_train_examples:
        keep = np.sort(np.random.default_rng(cfg.seed).choice(len(train_ex), cfg.max_train_examples, replace=False))
        train_ex = [train_ex[i] for i in keep]
    evals = []
    for split in spec.eval_splits:
        if split in files:
            ex = read_examples(spec, files[split], problems, True, cfg)
            evals.append(SplitData(split, files[split], ex[: cfg.max_eval_examples] if cfg.max_eval_examples else ex))
    if not evals:
        print("warning: no dev file: no evaluation during training; the last checkpoint is kept", file=sys.stderr)
    labels = discover_labels(spec, train_ex)
    check_labels(spec, train_ex, labels)
    for ev in evals:
        check_labels(spec, ev.examples, labels)
    version_2 = spec.qa_metric == "squad_v2" or (
        spec.qa_metric == "auto" and any(ex.is_impossible for ex in [*train_ex, *(e for ev in evals for e in ev.examples)])
    )
    runner = TaskRunner(spec, cfg, tokenizer, labels, version_2)
    train_feats = runner.featurize(train_ex, problems, training=True)
    if not train_feats:
        raise ClozeformerError(f"{files['train']}: no usable training examples")
    for ev in evals:
        ev.features = runner.featurize(ev.examples, problems, training=False)
    return TaskData(train_ex, n_train_total, train_feats, evals, labels, version_2, runner)


def task_model(cfg: FinetuneConfig, spec: TaskSpec, data: TaskData, tokenizer):
    """The model to fine-tune, its config carrying what serving needs to read inputs as
    evaluation does (QA windows and decoding, NER window length)."""
    model = build_task_model(spec, cfg, tokenizer, data.labels)
    max_len = data.runner.max_len
    if max_len > model.config.max_position_embeddings:
        raise ClozeformerError(
            f"--max-seq-len {max_len} exceeds the model's max_position_embeddings ({model.config.max_position_embeddings})"
        )
    if spec.family == "token":  # the `ner` pipeline's windows: those evaluation reads with
        model.config.extra["ner_max_seq_len"] = max_len
    if spec.family == "qa":  # how `qa` and `serve` window and decode this model: as evaluation does
        model.config.extra.update(
            qa_version_2=data.version_2,
            qa_max_seq_len=max_len,
            qa_doc_stride=effective_stride(max_len, cfg.max_query_len, cfg.doc_stride),
            qa_max_query_len=cfg.max_query_len,
            qa_max_answer_len=cfg.max_answer_len,
            qa_n_best=cfg.n_best,
            qa_null_threshold=cfg.null_threshold,
        )
    return model


@dataclass
class TrainResult:
    steps: int
    stopped_early: bool
    seconds: float
    best: dict | None  # the evaluation kept (best main score, or the last)
    history: list[dict]


def train(
    cfg: FinetuneConfig,
    spec: TaskSpec,
    data: TaskData,
    model,
    tokenizer,
    device,
    precision,
    out: Path,
    trackers: Trackers | None = None,
) -> TrainResult:
    """The loop: length-grouped batches per epoch, the core's optimizer step with its NaN guard,
    evaluation every epoch (and --eval-every steps), the best checkpoint saved to `out`; each
    evaluation (scores, mean training loss since the last one) also goes to `trackers`."""
    from tqdm.auto import tqdm

    runner, evals, train_feats = data.runner, data.evals, data.train_features
    steps_per_epoch = F.num_batches(len(train_feats), cfg.batch_size)
    total_steps = max(1, math.ceil(cfg.epochs * steps_per_epoch))
    optimizer, schedule = make_optimizer(model, cfg, total_steps)
    scaler = torch.amp.GradScaler(device.type) if precision.needs_grad_scaler else None
    print(
        f"model {cfg.model}: {model.num_parameters() / 1e6:.2f}M parameters on {device}; {total_steps} steps "
        f"({steps_per_epoch}/epoch, warmup {schedule.warmup_steps}), batch {cfg.batch_size}, lr {cfg.lr:g}, "
        f"max_seq_len {runner.max_len}, precision {precision.name}"
    )
    history: list[dict] = []
    best: dict | None = None
    saved = False

    def save() -> None:
        nonlocal saved
        model.save_pretrained(out)
        tokenizer.save(out)
        saved = True

    def evaluate_now(step: int, epoch: float, train_loss: float | None) -> None:
        nonlocal best
        entry: dict = {"step": step, "epoch": round(epoch, 3), "train_loss": train_loss}
        if evals:
            t_eval = time.monotonic()
            entry["scores"] = {}
            for ev in evals:
                outputs = runner.infer(model, ev.features, cfg.eval_batch_size, device)
                entry["scores"][ev.name] = runner.score(ev.examples, runner.decode(ev.examples, ev.features, outputs))
            entry["eval_seconds"] = round(time.monotonic() - t_eval, 2)
            main = runner.main_score(entry["scores"][evals[0].name])
            entry["main"] = main
            print(
                f"step {step} (epoch {epoch:.2f}) loss {train_loss if train_loss is not None else float('nan'):.4f}"
                + "".join(f" | {name}: {format_scores(s)}" for name, s in entry["scores"].items())
            )
            if not cfg.save_best or best is None or main > best["main"]:
                best = entry
                save()
        history.append(entry)
        if trackers is not None:
            trackers.log({"kind": "train", "step": step, "epoch": epoch, "loss": train_loss})
            trackers.log({"kind": "eval", "step": step, **entry.get("scores", {})})
        model.train()

    seed_everything(cfg.seed)
    lengths = [F.feature_length(f) for f in train_feats]
    pad_id = tokenizer.pad_token_id
    t0 = time.monotonic()
    step, epoch, last_eval, bad_streak = 0, 0, -1, 0
    loss_sum, loss_n = 0.0, 0
    stopped_early = False
    model.train()
    # a log file (not a terminal) gets a progress line every 5 s instead of ten per second
    bar = tqdm(
        total=total_steps,
        desc=f"finetune {spec.name}",
        unit="step",
        dynamic_ncols=True,
        mininterval=0.1 if sys.stderr.isatty() else 5.0,
    )
    try:
        while step < total_steps and not stopped_early:
            batches = batch_indices(
                lengths, cfg.batch_size, shuffle=True, seed=cfg.seed + epoch, group_by_length=cfg.group_by_length
            )
            for idx in batches:
                batch = {k: v.to(device) for k, v in F.collate([train_feats[i] for i in idx], pad_id).items()}
                with precision.autocast():
                    loss = runner.forward(model, batch).loss
                (scaler.scale(loss) if scaler else loss).backward()
                if scaler:
                    scaler.unscale_(optimizer)
                loss_value = loss.item()
                _, bad = clip_and_check(model.parameters(), cfg.max_grad_norm, loss_value, scaled=scaler is not None)
                lr = cfg.lr * schedule.factor(step, total_steps)
                if not bad:
                    set_lr(optimizer, lr)
                    scaler.step(optimizer) if scaler else optimizer.step()
                if scaler:
                    scaler.update()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                bad_streak = bad_streak + 1 if bad else 0
                if bad_streak >= MAX_BAD_STEPS:
                    raise ClozeformerError(
                        f"{bad_streak} consecutive steps with a NaN/Inf loss or gradient (steps {step - bad_streak + 1}-{step}, "
                        f"none applied); stopping. Try a lower --lr, a larger --warmup-ratio or --precision fp32"
                    )
                if not bad:
                    loss_sum += loss_value
                    loss_n += 1
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.4f}", lr=f"{lr:.2e}", refresh=False)
                if cfg.max_time is not None and time.monotonic() - t0 > cfg.max_time * 60:
                    stopped_early = True
                if step >= total_steps or stopped_early:
                    break
                if cfg.eval_every and step % cfg.eval_every == 0:
                    evaluate_now(step, step / steps_per_epoch, loss_sum / max(loss_n, 1))
                    loss_sum, loss_n, last_eval = 0.0, 0, step
            epoch += 1
            if last_eval != step:
                evaluate_now(step, step / steps_per_epoch, loss_sum / max(loss_n, 1) if loss_n else None)
                loss_sum, loss_n, last_eval = 0.0, 0, step
    finally:
        bar.close()  # before any error line, so it starts a line of its own
    seconds = time.monotonic() - t0
    if stopped_early:
        print(f"stopped after {step} steps: --max-time {cfg.max_time} min reached")
    if not saved or not cfg.save_best or not evals:
        save()
    return TrainResult(step, stopped_early, seconds, best, history)


def model_card(cfg: FinetuneConfig, spec: TaskSpec, result: dict, files: dict) -> str:
    """README.md of a fine-tuned directory: task, base model, data, best dev scores, the command."""
    from clozeformer import card

    best = result["best"]
    facts = {
        "task": f"{spec.name} ({spec.title})",
        "base model": cfg.model,
        "data": {split: str(path) for split, path in files.items()},
        "training": f"{result['train_examples']:,} examples, {result['steps']:,} steps ({result['epochs']:g} epochs), "
        f"lr {cfg.lr:g}, batch {cfg.batch_size}, seed {cfg.seed}",
        f"dev scores (best, step {best['step']})": best.get("scores"),
        "labels": result["labels"],
    }
    architecture = card.architecture_of(Path(cfg.out))
    return card.render(f"{spec.title}: fine-tuned {Path(cfg.model).name}", architecture, facts, cfg.model, card.command_line())


def finetune(cfg: FinetuneConfig) -> dict:
    """Fine-tune per `cfg`; returns the metrics dict also written to OUT/metrics.json."""
    from clozeformer.io import atomic_write_json, atomic_write_text

    spec = get_task(cfg.task, cfg)
    if not cfg.model:
        raise ClozeformerError("--model is required: an HF-format BERT directory or a preset (tiny, mini, ...)")
    if not is_preset(cfg.model):
        try:
            model_dir(cfg.model)  # a local directory or a Hub model id, fetched now rather than after reading data
        except ClozeformerError as e:
            raise ClozeformerError(f"{e} (or a preset: {', '.join(PRESETS)})") from None
    files = resolve_files(spec, cfg.data, ("train", *spec.eval_splits), optional=spec.eval_splits)
    out = check_out(cfg.out, cfg.overwrite)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)  # refuse fp16 on CPU before any work is done
    tokenizer = load_tokenizer(cfg.tokenizer, cfg.model)
    problems = Problems(skip_bad_rows=cfg.skip_bad_rows)
    data = read_task_data(cfg, spec, files, tokenizer, problems)
    model = task_model(cfg, spec, data, tokenizer).to(device)
    out.mkdir(parents=True, exist_ok=True)
    mark_owned(out, "finetune", complete=False)  # a killed run leaves a directory no verb loads as a model
    save_config(cfg, out / "finetune_config.json")
    n_train = len(data.train_examples)
    print(
        f"task {spec.name} ({spec.title}, {spec.family}): {n_train} train examples"
        f"{f' (of {data.n_train_total})' if n_train < data.n_train_total else ''} -> {len(data.train_features)} features; "
        + ", ".join(f"{ev.name} {len(ev.examples)}" for ev in data.evals)
    )
    if data.labels:
        print(f"labels ({len(data.labels)}): {', '.join(data.labels[:12])}{' ...' if len(data.labels) > 12 else ''}")
    with Trackers(cfg.report_to, out, config_dict(cfg), source="clozeformer finetune") as trackers:
        run = train(cfg, spec, data, model, tokenizer, device, precision, out, trackers)
        if run.best is not None and run.best.get("scores"):
            trackers.summary({"kind": "best", "step": run.best["step"], "main": run.best["main"], **run.best["scores"]})
    problems.report()
    steps_per_epoch = F.num_batches(len(data.train_features), cfg.batch_size)
    result = {
        "task": spec.name,
        "model": cfg.model,
        "main_metric": spec.main_metric,
        "train_examples": n_train,
        "train_features": len(data.train_features),
        "eval_examples": {ev.name: len(ev.examples) for ev in data.evals},
        "parameters": model.num_parameters(),
        "steps": run.steps,
        "planned_steps": max(1, math.ceil(cfg.epochs * steps_per_epoch)),
        "epochs": round(run.steps / steps_per_epoch, 3),
        "train_seconds": round(run.seconds, 2),
        "stopped_early": run.stopped_early,
        "best": run.best,
        "history": run.history,
        "warnings": dict(problems.counts),
        "labels": data.labels,
    }
    atomic_write_json(out / "metrics.json", result)
    if run.best is not None:
        atomic_write_text(out / "README.md", model_card(cfg, spec, result, files))
    mark_owned(out, "finetune")  # last: the directory is a finished model from here on
    if run.best is not None:
        print(f"best {spec.main_metric} = {run.best['main']:.4f} at step {run.best['step']}; model saved to {out}")
    else:
        print(f"model saved to {out}")
    return result


# ----------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, FinetuneConfig)


def main(args: argparse.Namespace) -> int:
    cfg = config_from_args(FinetuneConfig, args)
    print_config(cfg)
    finetune(cfg)
    return 0
