"""`clozeformer finetune`: the fine-tuning loop (its model and tokenizer: tasks/loading.py).

    read train/dev -> labels -> features -> model (pretrained dir, or a preset at random init)
    -> AdamW + linear warmup/decay -> epochs of length-grouped, dynamically padded batches
    -> evaluate each epoch (and every --eval-every steps) -> keep the best checkpoint by the
    task's main metric -> OUT/ (HF format: config.json with id2label/label2id,
    model.safetensors, vocab.txt, tokenizer_config.json) + metrics.json + finetune_config.json

Optimizer, schedule, seeding, precision and the NaN guard are the training core's
(`clozeformer.train.core`, `clozeformer.train.precision`), the same as `pretrain`'s.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from clozeformer.data.padding import batch_indices
from clozeformer.data.spans import effective_stride
from clozeformer.hub import model_dir
from clozeformer.modeling.config import PRESETS
from clozeformer.tasks import embedding
from clozeformer.tasks.common import Problems
from clozeformer.tasks.loading import base_sentence_modules, build_task_model, is_preset, load_tokenizer
from clozeformer.tasks.spec import TaskSpec, get_task, read_examples, resolve_files
from clozeformer.tasks.task_config import FinetuneConfig, default_finetune_lr
from clozeformer.tasks.task_runner import SplitData, TaskRunner, check_labels, discover_labels, format_scores
from clozeformer.train.core import MAX_BAD_STEPS, Schedule, adamw, check_bad_streak, guarded_step, param_groups, seed_everything
from clozeformer.train.precision import resolve_precision
from clozeformer.train.tracking import Trackers
from clozeformer.utils.configs import config_dict, save_config
from clozeformer.utils.device import resolve_device
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_write_json, atomic_write_text, check_output_dir, mark_owned
from clozeformer.utils.progress import progress_bar

# ----------------------------------------------------------------------------- optimisation


def make_optimizer(model: torch.nn.Module, cfg: FinetuneConfig, total_steps: int) -> tuple[torch.optim.Optimizer, Schedule]:
    """The core's AdamW over BERT's weight-decay groups + linear warmup (the first
    `warmup_ratio` of the steps) then linear decay towards 0."""
    opt = adamw(param_groups(model, cfg.weight_decay), cfg.lr, eps=cfg.adam_eps)
    return opt, Schedule("linear", warmup_steps=int(cfg.warmup_ratio * total_steps))


# ----------------------------------------------------------------------------- the loop


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
    objective: embedding.Objective | None = None  # sentence embeddings: the loss and its settings


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
            evals.append(SplitData(split, read_examples(spec, files[split], problems, True, cfg)[: cfg.max_eval_examples]))
    if not evals:
        print("warning: no dev file: no evaluation during training; the last checkpoint is kept", file=sys.stderr)
    labels = discover_labels(spec, train_ex)
    for examples in [train_ex, *(ev.examples for ev in evals)]:
        check_labels(spec, examples, labels)
    objective = None
    if spec.family == "embedding":
        objective = embedding_objective(cfg, train_ex, evals)
        if evals:  # the main metric is the dev file's: Spearman for scored pairs, nDCG@10 for retrieval
            spec.metrics = embedding.metric_names(evals[0].examples)
    version_2 = spec.qa_metric == "squad_v2" or (
        spec.qa_metric == "auto" and any(ex.is_impossible for ex in [*train_ex, *(e for ev in evals for e in ev.examples)])
    )
    runner = TaskRunner(spec, cfg, tokenizer, labels, version_2)
    train_feats = runner.featurize(train_ex, problems, training=True)
    if not train_feats:
        raise ClozeformerError(f"{files['train']}: no usable training examples")
    for ev in evals:
        ev.features = runner.featurize(ev.examples, problems, training=False)
    return TaskData(train_ex, n_train_total, train_feats, evals, labels, version_2, runner, objective)


def embedding_objective(cfg: FinetuneConfig, train: list, evals: list[SplitData]) -> embedding.Objective:
    """The bi-encoder's loss for the training data's form; dev scores checked against the training range."""
    score_range = embedding.check_scores(train, (ev.examples for ev in evals))
    form = embedding.form_of(train)
    settings = dict(scale=cfg.scale, margin=cfg.margin, symmetric=cfg.symmetric, score_range=score_range)
    objective = embedding.resolve_objective(cfg.loss, form, cfg.batch_size, len(train), **settings)
    for line in embedding.describe(form, objective, train):
        print(line)
    return objective


def task_model(cfg: FinetuneConfig, spec: TaskSpec, data: TaskData, tokenizer):
    """The model to fine-tune, its config carrying what serving needs to read inputs as
    evaluation does (QA windows and decoding, NER window length)."""
    model = build_task_model(spec, cfg, tokenizer, data.labels)
    max_len = data.runner.max_len
    data.runner.check_fits(model.config)
    if spec.family == "embedding":  # the length `embed` and sentence-transformers read texts with
        model.objective, model.max_seq_length = data.objective, max_len
    if spec.family == "token":  # the `ner` pipeline's windows: those evaluation reads with
        model.config.extra["ner_max_seq_len"] = max_len
    if spec.family == "qa":  # how `qa` and `serve` window and decode this model: as evaluation does
        model.config.extra.update(
            qa_version_2=data.version_2,
            qa_max_seq_len=max_len,
            qa_doc_stride=effective_stride(max_len, cfg.max_question_length, cfg.doc_stride),
            qa_max_query_len=cfg.max_question_length,
            qa_max_answer_len=cfg.max_answer_length,
            qa_n_best=cfg.n_best,
            qa_null_threshold=cfg.null_threshold,
        )
    return model


class _Training:
    """A fine-tuning run: its optimizer, its step and loss counters, its evaluations (`history`;
    `best`: the one kept, best main score or the last), `seconds` of training once finished."""

    def __init__(self, cfg: FinetuneConfig, data: TaskData, model, tokenizer, device, precision, out: Path, trackers) -> None:
        self.cfg, self.data, self.runner, self.model, self.tokenizer = cfg, data, data.runner, model, tokenizer
        self.device, self.precision, self.out, self.trackers = device, precision, out, trackers
        self.steps_per_epoch = math.ceil(len(data.train_features) / cfg.batch_size)
        self.total_steps = max(1, math.ceil(cfg.epochs * self.steps_per_epoch))
        self.optimizer, self.schedule = make_optimizer(model, cfg, self.total_steps)
        self.scaler = torch.amp.GradScaler(device.type) if precision.needs_grad_scaler else None
        print(
            f"model {cfg.model}: {model.num_parameters() / 1e6:.2f}M parameters on {device}; {self.total_steps} steps "
            f"({self.steps_per_epoch}/epoch, warmup {self.schedule.warmup_steps}), batch {cfg.batch_size}, lr {cfg.lr:g}, "
            f"max_length {self.runner.max_len}, dtype {precision.name}"
        )
        self.history, self.best, self.saved, self.stopped_early, self.seconds = [], None, False, False, 0.0
        seed_everything(cfg.seed)
        self.lengths = [self.runner.feature_length(f) for f in data.train_features]
        # sentence embeddings train on random batches: length-grouped ones gather the many questions
        # of one passage, whose duplicates in-batch negatives mask (docs/EXPERIMENTS.md, run 18)
        self.group_by_length = cfg.group_by_length if cfg.group_by_length is not None else data.objective is None
        self.t0 = time.monotonic()
        self.epoch, self.step, self.last_eval, self.bad_streak, self.loss_sum, self.loss_n = 0, 0, -1, 0, 0.0, 0

    def save(self) -> None:
        """The model and its tokenizer to `out`."""
        self.model.save_pretrained(self.out)
        self.tokenizer.save(self.out)
        self.saved = True

    def run_epoch(self, bar) -> None:
        """An epoch of shuffled, length-grouped batches (evaluated every --eval-every steps and at its end)."""
        cfg = self.cfg
        batches = batch_indices(
            self.lengths, cfg.batch_size, shuffle=True, seed=cfg.seed + self.epoch, group_by_length=self.group_by_length
        )
        if self.data.objective is not None:
            batches = embedding.training_batches(batches, self.data.objective)
        for idx in batches:
            loss_value, lr = self.train_step(idx)
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.4f}", lr=f"{lr:.2e}", refresh=False)
            if cfg.max_time is not None and time.monotonic() - self.t0 > cfg.max_time * 60:
                self.stopped_early = True
            if self.step >= self.total_steps or self.stopped_early:
                break
            if cfg.eval_every and self.step % cfg.eval_every == 0:
                self.evaluate(self.loss_sum / max(self.loss_n, 1))
        self.epoch += 1
        if self.last_eval != self.step:
            self.evaluate(self.loss_sum / max(self.loss_n, 1) if self.loss_n else None)

    def train_step(self, idx: list[int]) -> tuple[float, float]:
        """One step on the features `idx`, skipped on a NaN/Inf loss or gradient; returns (loss, lr)."""
        cfg = self.cfg
        features = [self.data.train_features[i] for i in idx]
        batch = {k: v.to(self.device) for k, v in self.runner.collate(features).items()}
        with self.precision.autocast():
            loss = self.model(**batch).loss
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        loss_value, lr = loss.item(), cfg.lr * self.schedule.factor(self.step, self.total_steps)
        _, bad = guarded_step(self.optimizer, self.scaler, self.model.parameters(), cfg.max_grad_norm, loss_value, lr)
        self.step += 1
        self.bad_streak = self.bad_streak + 1 if bad else 0
        check_bad_streak(self.bad_streak, self.step, MAX_BAD_STEPS, "Try a lower --lr, a larger --warmup-ratio or --dtype fp32")
        if not bad:
            self.loss_sum += loss_value
            self.loss_n += 1
        return loss_value, lr

    def evaluate(self, train_loss: float | None) -> None:
        """Score the dev splits now (saving the model if it is the best so far, or always with
        --no-save-best); the entry, with `train_loss` (the mean since the last one), to the history
        and the trackers. The mean restarts."""
        step, epoch, evals = self.step, self.step / self.steps_per_epoch, self.data.evals
        entry: dict = {"step": step, "epoch": round(epoch, 3), "train_loss": train_loss}
        if evals:
            entry.update(self.dev_scores())
            print(
                f"step {step} (epoch {epoch:.2f}) loss {train_loss if train_loss is not None else float('nan'):.4f}"
                + "".join(f" | {name}: {format_scores(s)}" for name, s in entry["scores"].items())
            )
            if not self.cfg.save_best or self.best is None or entry["main"] > self.best["main"]:
                self.best = entry
                self.save()
        self.history.append(entry)
        if self.trackers is not None:
            self.trackers.log({"kind": "train", "step": step, "epoch": epoch, "loss": train_loss})
            self.trackers.log({"kind": "eval", "step": step, **entry.get("scores", {})})
        self.model.train()
        self.loss_sum, self.loss_n, self.last_eval = 0.0, 0, step

    def dev_scores(self) -> dict:
        """Every dev split's scores, the seconds they took, the task's main score on the first."""
        runner, evals, t_eval = self.runner, self.data.evals, time.monotonic()
        scores = {
            ev.name: runner.score(ev.examples, runner.predict(self.model, ev, self.cfg.eval_batch_size, self.device))
            for ev in evals
        }
        eval_seconds = round(time.monotonic() - t_eval, 2)
        return {"scores": scores, "eval_seconds": eval_seconds, "main": runner.main_score(scores[evals[0].name])}

    def train(self, name: str) -> None:
        """The loop: length-grouped batches per epoch, the core's optimizer step with its NaN guard,
        evaluation every epoch (and --eval-every steps), the best checkpoint saved to `out`; each
        evaluation (scores, mean training loss since the last one) also goes to `trackers`."""
        self.model.train()
        bar = progress_bar(self.total_steps, desc=f"finetune {name}", unit="step")
        try:
            while self.step < self.total_steps and not self.stopped_early:
                self.run_epoch(bar)
        finally:
            bar.close()  # before any error line, so it starts a line of its own
        self.seconds = time.monotonic() - self.t0
        if self.stopped_early:
            print(f"stopped after {self.step} steps: --max-time {self.cfg.max_time} min reached")
        if not self.saved or not self.cfg.save_best or not self.data.evals:
            self.save()


def model_card(cfg: FinetuneConfig, spec: TaskSpec, result: dict, files: dict) -> str:
    """README.md of a fine-tuned directory: task, base model, data, best dev scores, the command."""
    from clozeformer.modeling import card

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
    title = f"{spec.title}: fine-tuned {Path(cfg.model).name}"
    return card.render(
        title, architecture, facts, cfg.model, card.command_line(), sentence_transformers=spec.family == "embedding"
    )


def finetune(cfg: FinetuneConfig) -> dict:
    """Fine-tune per `cfg`; returns the metrics dict also written to OUT/metrics.json."""
    spec = get_task(cfg.task, cfg)
    if not cfg.model:
        raise ClozeformerError("--model is required: an HF-format BERT directory or a preset (tiny, mini, ...)")
    if not is_preset(cfg.model):
        try:
            model_dir(cfg.model)  # a local directory or a Hub model id, fetched now rather than after reading data
        except ClozeformerError as e:
            raise ClozeformerError(f"{e} (or a preset: {', '.join(PRESETS)})") from None
    if not cfg.out:
        raise ClozeformerError("--out is required: the directory for the fine-tuned model")
    # checked now, created only once the data and the model have loaded: a run that fails on a
    # data error leaves nothing behind to --overwrite
    out = check_output_dir(cfg.out, cfg.overwrite)
    files = resolve_files(spec, cfg.data, ("train", *spec.eval_splits), optional=spec.eval_splits)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    precision = resolve_precision(cfg.dtype, device)  # refuse fp16 on CPU before any work is done
    tokenizer = load_tokenizer(cfg.tokenizer, cfg.model)
    if spec.family == "embedding":  # unset: a sentence-transformers base model's own pooling and length
        modules = base_sentence_modules(cfg.model)
        cfg.pooling = cfg.pooling or (modules.pooling if modules else "mean")
        if cfg.max_length is None and modules is not None and modules.max_seq_length:
            cfg.max_length = modules.max_seq_length
    problems = Problems(skip_bad_rows=cfg.skip_bad_rows)
    data = read_task_data(cfg, spec, files, tokenizer, problems)
    model = task_model(cfg, spec, data, tokenizer).to(device)
    if cfg.lr is None:  # resolved before it is saved: finetune_config.json holds the rate used
        cfg.lr = default_finetune_lr(model.config.hidden_size)
        print(f"lr {cfg.lr:g} (--lr unset: the default for hidden size {model.config.hidden_size})")
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
        run = _Training(cfg, data, model, tokenizer, device, precision, out, trackers)
        run.train(spec.name)
        if run.best is not None and run.best.get("scores"):
            trackers.summary({"kind": "best", "step": run.best["step"], "main": run.best["main"], **run.best["scores"]})
    problems.report()
    result = {
        "task": spec.name,
        "model": cfg.model,
        "main_metric": spec.main_metric,
        "train_examples": n_train,
        "train_features": len(data.train_features),
        "eval_examples": {ev.name: len(ev.examples) for ev in data.evals},
        "parameters": model.num_parameters(),
        "steps": run.step,
        "planned_steps": run.total_steps,
        "epochs": round(run.step / run.steps_per_epoch, 3),
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


CONFIG, SHOW_CONFIG = FinetuneConfig, True  # `clozeformer finetune`
main = finetune
