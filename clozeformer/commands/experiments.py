"""`clozeformer experiment NAME`: one-command tests of BERT's claims, measured, whatever they show.

    pretrain-vs-scratch  the same fine-tuning recipe from a pretrained and from a random model
    mlm-vs-clm           the same backbone and minutes (equal compute) pretrained
                         bidirectionally (`pretrain --objective mlm`) and left-to-right
                         (`--objective clm`), then identical `finetune` runs (the pooling
                         asked; by default [CLS] for MLM and the last real token for CLM)
    mlm-vs-rtd           the same backbone and minutes pretrained with the masked LM and with
                         ELECTRA's replaced-token detection (`--objective electra`, the
                         generator that did best in EXPERIMENTS run 5: one layer at full
                         width, sharing the embeddings), then identical `finetune` runs
    nsp-ablation         MLM + NSP vs MLM only, equal steps, on the same NSP-prepared data

pretrain-vs-scratch --tapt-steps N adds task-adaptive pretraining (Gururangan et al. 2020): before
fine-tuning on a task, the pretrained and the random model each continue the masked LM on that
task's training text (labels unused) for N steps, giving the arms pretrained+tapt and scratch+tapt.

Experiments orchestrate: every arm is the library's `pretrain` and `finetune` (resume, budgets,
metrics and speed included); this module only chooses the arms and writes the report.

Every variant is fine-tuned on each task with K seeds; the table reports mean +- std of the
task's main dev metric. Pretraining runs once per variant (seed 0): the seeds measure fine-tuning
variance, not pretraining variance (say so when quoting the numbers). Writes results.json,
results.md and PNG plots under --out.

Running an experiment again into the same --out reuses each fine-tuning run that finished there
with the same config from the same model on the same task files (a record beside the run holds
all three; the model is compared by content, the files by size and time): an experiment stopped
while fine-tuning picks up where it stopped, and more seeds or a new arm cost only their own runs.
--rerun trains every run again. Pretraining is not reused this way; give a finished arm's
checkpoint with --pretrained.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clozeformer.modeling.config import Pooling
from clozeformer.train.metrics_file import read_metrics
from clozeformer.utils.configs import config_dict, flag_help, print_config, save_config
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_write_json, atomic_write_text, check_dir_path
from clozeformer.utils.procs import run_in_processes, slug

EXPERIMENTS = ("pretrain-vs-scratch", "mlm-vs-clm", "mlm-vs-rtd", "nsp-ablation")


@dataclass
class ExperimentConfig:
    name: str = field(default="", metadata=flag_help("experiment", choices=list(EXPERIMENTS)))
    data: str = field(
        default="", metadata=flag_help("prepared pretraining data dir (`clozeformer prepare`; nsp-ablation needs --mode nsp)")
    )
    tasks_data: str = field(default="", metadata=flag_help("directory holding GLUE-style task dirs (SST-2/, RTE/, ...)"))
    tasks: list[str] = field(
        default_factory=lambda: ["sst2", "mrpc", "rte", "cola"], metadata=flag_help("GLUE-style tasks to fine-tune on")
    )
    out: str = field(default="experiment-run", metadata=flag_help("output directory"))
    pretrained: list[str] = field(
        default_factory=list,
        metadata=flag_help(
            "model dirs to fine-tune instead of pretraining, one per variant in table order: pretrain-vs-scratch: "
            "MLM; mlm-vs-clm: MLM CLM (a left-to-right model); mlm-vs-rtd: MLM RTD (an ELECTRA encoder); "
            "nsp-ablation: MLM+NSP MLM"
        ),
    )
    model: str = field(default="mini", metadata=flag_help("architecture preset of the pretrained models"))
    budget_minutes: float = field(
        default=10.0,
        metadata=flag_help(
            "pretraining wall-clock minutes: of each arm for mlm-vs-clm and mlm-vs-rtd (equal compute); of the "
            "first arm for nsp-ablation, whose second arm gets its step count"
        ),
    )
    budget_steps: int | None = field(
        default=None,
        metadata=flag_help(
            "pretraining optimizer steps for every variant (replaces --budget-minutes; the same on any machine; "
            "equal tokens, not equal compute, where the objectives' steps cost differently)"
        ),
    )
    jobs: int = field(
        default=1,
        metadata=flag_help(
            "independent runs (pretraining variants with --budget-steps, fine-tuning runs) at once, in separate "
            "processes with --threads threads each (default 1 thread when jobs > 1); logs under OUT/logs/"
        ),
    )
    finetune_minutes: float = field(default=2.0, metadata=flag_help("wall-clock cap per fine-tuning run"))
    seeds: int = field(default=3, metadata=flag_help("fine-tuning seeds per (variant, task)"))
    batch_size: int = field(default=32, metadata=flag_help("pretraining micro-batch"))
    lr: float | None = field(
        default=None, metadata=flag_help("pretraining peak learning rate; unset: `pretrain`'s recipe for --model")
    )
    warmup_steps: int | None = field(
        default=None, metadata=flag_help("pretraining warmup steps; unset: `pretrain`'s recipe for --model")
    )
    dtype: Literal["auto", "fp32", "bf16"] = field(
        default="auto",
        metadata=flag_help(
            "pretraining and fine-tuning number format (auto: bf16 on CPUs with AMX and on GPUs, else fp32); "
            "pin it to compare runs made on different machines",
            aliases=("precision",),
        ),
    )
    finetune_lr: float | None = field(
        default=None,
        metadata=flag_help("fine-tuning learning rate; unset: `finetune`'s default for the model (5e-4 for tiny and mini)"),
    )
    finetune_dropout: float | None = field(
        default=None, metadata=flag_help("dropout while fine-tuning (`finetune --dropout`); unset: each model's own")
    )
    finetune_pooling: Pooling | None = field(default=None, metadata=flag_help("`finetune --pooling`; unset: the model's own"))
    finetune_epochs: float = field(default=3.0, metadata=flag_help("fine-tuning epochs (the time cap may stop earlier)"))
    max_train_examples: int | None = field(default=4000, metadata=flag_help("cap on fine-tuning examples per task"))
    max_eval_examples: int | None = field(default=2000, metadata=flag_help("cap on dev examples per task"))
    threads: int | None = field(default=None, metadata=flag_help("torch CPU threads"))
    tapt_steps: int | None = field(
        default=None,
        metadata=flag_help(
            "pretrain-vs-scratch: task-adaptive pretraining, N masked-LM steps on each task's training text "
            "(labels unused) from the pretrained and from the random model before fine-tuning (arms "
            "pretrained+tapt, scratch+tapt)"
        ),
    )
    tapt_lr: float = field(default=5e-4, metadata=flag_help("task-adaptive pretraining: peak learning rate"))
    tapt_warmup_steps: int = field(default=100, metadata=flag_help("task-adaptive pretraining: warmup steps"))
    rerun: bool = field(
        default=False,
        metadata=flag_help(
            "fine-tune every run again, even those that finished in --out with the same config from the same model "
            "(reused by default)"
        ),
    )

    def __post_init__(self) -> None:
        if self.name not in EXPERIMENTS:
            raise ClozeformerError(f"unknown experiment {self.name!r}; choose one of {', '.join(EXPERIMENTS)}")
        check_dir_path(self.out)
        if not self.tasks_data or not Path(self.tasks_data).is_dir():
            raise ClozeformerError(f"--tasks-data {self.tasks_data!r}: not a directory of GLUE-style tasks")
        want = 1 if self.name == "pretrain-vs-scratch" else 2
        if self.pretrained and len(self.pretrained) != want:
            raise ClozeformerError(f"--pretrained: {self.name} takes {want} model dir(s), got {len(self.pretrained)}")
        for d in self.pretrained:
            if not (Path(d) / "config.json").is_file():
                raise ClozeformerError(f"--pretrained {d}: not a model directory (no config.json)")
        if not self.pretrained and not self.data:
            raise ClozeformerError("--data: give a prepared pretraining data dir (`clozeformer prepare`)")
        if self.seeds < 1 or self.budget_minutes <= 0 or self.finetune_minutes <= 0 or self.jobs < 1:
            raise ClozeformerError("--seeds, --budget-minutes, --finetune-minutes and --jobs must be positive")
        if self.budget_steps is not None and self.budget_steps < 1:
            raise ClozeformerError(f"--budget-steps {self.budget_steps}: must be a positive number of steps")
        if self.tapt_steps is not None:
            if self.name != "pretrain-vs-scratch":
                raise ClozeformerError(
                    f"--tapt-steps: task-adaptive pretraining is an arm of pretrain-vs-scratch, not {self.name}"
                )
            if self.tapt_steps < 1 or self.tapt_lr <= 0 or self.tapt_warmup_steps < 0:
                raise ClozeformerError("--tapt-steps and --tapt-lr must be positive, --tapt-warmup-steps >= 0")
        if self.finetune_lr is not None and self.finetune_lr <= 0:
            raise ClozeformerError(f"--finetune-lr {self.finetune_lr}: must be positive")
        if self.jobs > 1 and not self.threads:
            self.threads = 1


# ----------------------------------------------------------------------------- shared pieces


def task_dir(cfg: ExperimentConfig, task: str) -> Path:
    """The task's directory under --tasks-data: GLUE's spelling (SST-2/, CoLA/, ...) or the task's name."""
    from clozeformer.tasks.glue import GLUE_TASKS

    root = Path(cfg.tasks_data)
    name = GLUE_TASKS[task].title if task in GLUE_TASKS else task
    for cand in (root / name, root / task):
        if cand.is_dir():
            return cand
    raise ClozeformerError(f"--tasks-data {root}: no directory for task {task!r} ({name}/)")


def check_tasks(cfg: ExperimentConfig) -> None:
    """Fail before pretraining, not after it, when a task's train or dev file is missing."""
    from clozeformer.tasks.spec import get_task, resolve_files
    from clozeformer.tasks.task_config import TaskDataConfig

    for task in cfg.tasks:
        spec = get_task(task, TaskDataConfig())
        directory = task_dir(cfg, task)
        try:
            resolve_files(spec, [str(directory)], ("train", spec.eval_splits[0]))
        except ClozeformerError as e:
            raise ClozeformerError(f"--tasks {task}: {e}") from None


def finetune_config(cfg: ExperimentConfig, model_dir: Path, task: str, seed: int, out: Path) -> Any:
    """The library's fine-tuning recipe (pooled head) for one run of the experiment."""
    from clozeformer.tasks.task_config import FinetuneConfig

    return FinetuneConfig(
        task=task,
        data=[str(task_dir(cfg, task))],
        model=str(model_dir),
        out=str(out),
        epochs=cfg.finetune_epochs,
        lr=cfg.finetune_lr,
        batch_size=32,
        seed=seed,
        max_time=cfg.finetune_minutes,
        overwrite=True,
        max_train_examples=cfg.max_train_examples,
        max_eval_examples=cfg.max_eval_examples,
        threads=cfg.threads,
        dropout=cfg.finetune_dropout,
        pooling=cfg.finetune_pooling,
        dtype=cfg.dtype,
        report_to=["none"],
    )


#: written beside each finished fine-tuning run: what it was (config, starting model) and its score
RUN_RECORD = "experiment_run.json"
#: the files of a model dir that `finetune` reads: equal contents, the same starting model
MODEL_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json", "tokenizer_config.json")


def model_fingerprint(model_dir: Path) -> str:
    h = hashlib.sha256()
    for name in MODEL_FILES:
        path = model_dir / name
        if path.is_file():
            h.update(name.encode() + b"\0")
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    return h.hexdigest()


def data_fingerprint(directory: Path) -> str:
    """The task's files by name, size and modification time: an edited or replaced file changes it."""
    h = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        st = path.stat()
        h.update(f"{path.relative_to(directory)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def run_identity(ft: Any, model_sha256: str, data: str) -> dict:
    """What makes two fine-tuning runs the same run: every setting but where the model and the output
    live, the model's contents and the task's files."""
    settings = {k: v for k, v in config_dict(ft).items() if k not in ("model", "out", "overwrite")}
    return {"config": json.loads(json.dumps(settings)), "model_sha256": model_sha256, "task_files": data}


def finished_score(out: Path, identity: dict) -> float | None:
    """The recorded score of the run in OUT if it finished with this identity, else None."""
    try:
        record = json.loads((out / RUN_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict) or {k: record.get(k) for k in identity} != identity:
        return None
    return float(record["main"]) if isinstance(record.get("main"), (int, float)) else None


def finetune_standard(ft: Any, identity: dict) -> float:
    """One `finetune` run; returns the main dev metric and records it (with `identity`) beside it."""
    from clozeformer.tasks.finetune import finetune

    out = Path(ft.out)
    (out / RUN_RECORD).unlink(missing_ok=True)  # a run killed from here on leaves no record
    res = finetune(ft)
    main = float(res["best"]["main"]) if res.get("best") else float("nan")
    atomic_write_json(out / RUN_RECORD, {**identity, "main": main})
    return main


def _pretrain(cfg: ExperimentConfig, out: Path, **run: Any) -> tuple[Path, dict]:
    """One `pretrain` run with the experiments' fixed settings (seed 0, no periodic evals, one
    checkpoint kept, a fresh run dir); `run` gives the data, model source, budget and recipe."""
    from clozeformer.train.loop import pretrain
    from clozeformer.train.pretrain_config import PretrainConfig

    summary = pretrain(
        PretrainConfig(
            out=str(out),
            batch_size=cfg.batch_size,
            eval_every=0,
            eval_batches=50,
            seed=0,
            dtype=cfg.dtype,
            report_to=["none"],
            keep_last=1,
            threads=cfg.threads,
            resume=False,
            progress=cfg.jobs == 1,
            **run,
        )
    )
    return Path(summary["checkpoint"]), summary


def run_pretraining(
    cfg: ExperimentConfig, out: Path, objective: str, max_steps: int | None, **objective_options: Any
) -> tuple[Path, dict]:
    """The library's pretraining loop; budget = minutes for the first variant, steps after."""
    return _pretrain(
        cfg,
        out,
        data=cfg.data,
        model=cfg.model,
        objective=objective,
        max_time=None if max_steps else cfg.budget_minutes,
        max_steps=max_steps,
        lr=cfg.lr,
        warmup_steps=cfg.warmup_steps,
        **objective_options,
    )


#: Task-adaptive pretraining packs the task's text into sequences of the fine-tuning length.
TAPT_SEQ_LEN = 128


def prepare_task_text(cfg: ExperimentConfig, task: str, tokenizer_dir: Path, out: Path) -> Path:
    """The task's training text, labels unused (`unlabeled_text`: one example per line), written to
    OUT/text.txt and prepared with the model's tokenizer into OUT/data (2% held out)."""
    from clozeformer.data.prepare import PrepareConfig, prepare
    from clozeformer.tasks.common import Problems, unlabeled_text
    from clozeformer.tasks.spec import get_task, read_examples, resolve_files
    from clozeformer.tasks.task_config import TaskDataConfig

    spec = get_task(task, TaskDataConfig())
    path = resolve_files(spec, [str(task_dir(cfg, task))], ("train",))["train"]
    out.mkdir(parents=True, exist_ok=True)
    text = out / "text.txt"
    examples = read_examples(spec, path, Problems(), None)
    atomic_write_text(text, "".join(line + "\n" for line in unlabeled_text(examples)))
    prepare(
        PrepareConfig(
            input=[str(text)],
            tokenizer=str(tokenizer_dir),
            out=str(out / "data"),
            overwrite=True,
            max_length=TAPT_SEQ_LEN,
            format="lines",
            min_doc_chars=0,
            dedupe=False,  # the task's text as it is: a repeated example is the task's distribution
            val_fraction=0.02,
            workers=0,
            progress=False,
        )
    )
    return out / "data"


def run_tapt(cfg: ExperimentConfig, model_dir: Path, data: Path, out: Path) -> tuple[Path, dict]:
    """`pretrain --init-from model_dir` on one task's prepared text for --tapt-steps steps."""
    return _pretrain(
        cfg,
        out,
        data=str(data),
        init_from=str(model_dir),
        max_steps=cfg.tapt_steps,
        lr=cfg.tapt_lr,
        warmup_steps=cfg.tapt_warmup_steps,
    )


def tapt_arms(cfg: ExperimentConfig, variants: dict[str, Path], out: Path) -> tuple[dict[str, dict[str, Path]], dict]:
    """For each variant V and task: V+tapt, V's weights after --tapt-steps of masked LM on the task's
    text. Returns ({V+tapt: {task: model dir}}, {V+tapt: {task: what the run measured}})."""
    data = {task: prepare_task_text(cfg, task, next(iter(variants.values())), out / "tapt" / task) for task in cfg.tasks}
    keys = [(v, task) for v in variants for task in cfg.tasks]
    jobs = [(f"tapt {v} / {t}", run_tapt, (cfg, variants[v], data[t], out / "tapt" / t / slug(v))) for v, t in keys]
    dirs: dict[str, dict[str, Path]] = {}
    info: dict[str, dict[str, dict]] = {}
    for (v, task), (ckpt, s) in zip(keys, run_many(cfg, jobs, out)):
        dirs.setdefault(f"{v}+tapt", {})[task] = ckpt
        info.setdefault(f"{v}+tapt", {})[task] = {"steps": s["step"], "seconds": s["elapsed_s"], "val": s.get("val") or {}}
    return dirs, info


def reused_pretraining(model_dir: Path) -> dict:
    """What is known of a model dir given with --pretrained: a `clozeformer pretrain` checkpoint's
    step count, time and its run's last validation."""
    info: dict = {"dir": str(model_dir), "note": "given with --pretrained"}
    if (model_dir / "trainer_state.json").is_file():
        state = json.loads((model_dir / "trainer_state.json").read_text(encoding="utf-8"))
        info.update(steps=state.get("step"), seconds=state.get("elapsed_s"))
        run = model_dir.parent.parent  # RUN/checkpoints/step-N -> RUN (its metrics.jsonl)
        evals = [r for r in read_metrics(run) if r.get("kind") == "eval" and r["step"] == state.get("step")]
        if evals:
            info["val"] = evals[-1]
    return info


def pretraining_entry(model_dir: Path, summary: dict) -> dict:
    """One variant's pretraining for the report, from `pretrain`'s summary or `reused_pretraining`."""
    config = model_dir / "config.json"
    causal = config.is_file() and bool(json.loads(config.read_text(encoding="utf-8")).get("is_decoder"))
    return {
        "dir": str(model_dir),
        "steps": summary.get("step", summary.get("steps")),
        "seconds": summary.get("elapsed_s", summary.get("seconds")),
        "val": summary.get("val"),
        "note": summary.get("note"),
        "causal": causal,  # its val "MLM" accuracy is the next-token accuracy
    }


def mean_std(xs: list[float]) -> tuple[float, float]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


# ----------------------------------------------------------------------------- one run or N at a time


def run_many(cfg: ExperimentConfig, runs: list[tuple[str, Callable, tuple]], out: Path) -> list[Any]:
    """Each run is (name, fn, args); returns the results in order.

    --jobs 1: here, one after the other, output to the terminal. --jobs N: N spawned processes
    (`procs.run_in_processes`), output to OUT/logs/NAME.log and one line here as each run ends.
    """
    if not runs:
        return []
    if cfg.jobs == 1:
        results = []
        for name, fn, args in runs:
            print(f"\n== {cfg.name}: {name} ==", flush=True)
            results.append(fn(*args))
            if isinstance(results[-1], float):
                print(f"   {name}: {results[-1]:.4f}", flush=True)
        return results
    return run_in_processes(runs, cfg.jobs, cfg.threads, out / "logs")


# ----------------------------------------------------------------------------- the experiments


def run(cfg: ExperimentConfig) -> dict:
    """The experiment: its pretraining arms, every arm fine-tuned on every task and seed, the report."""
    import torch

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    print_config(cfg, f"experiment {cfg.name}")
    save_config(cfg, out / "experiment_config.json")
    check_tasks(cfg)
    plots = importlib.util.find_spec("matplotlib") is not None  # known before the work, not after
    if not plots:
        print("note: matplotlib is not installed: results.json and results.md only, no PNGs (pip install 'clozeformer[plot]')")
    t0 = time.monotonic()
    arms = {"pretrain-vs-scratch": pretrain_vs_scratch_arms, "nsp-ablation": nsp_ablation_arms}.get(cfg.name, equal_compute_arms)
    variants, pre, tapt_info = arms(cfg, out, [Path(d) for d in cfg.pretrained])
    scores = finetune_arms(cfg, variants, out)
    result = {
        "experiment": cfg.name,
        "config": json.loads((out / "experiment_config.json").read_text()),
        "pretraining": {k: {kk: vv for kk, vv in d.items() if kk != "losses"} for k, d in pre.items()},
        "scores": scores,
        "tapt": tapt_info,
        "minutes": (time.monotonic() - t0) / 60,
    }
    atomic_write_json(out / "results.json", result)
    md = results_markdown(cfg, result)
    atomic_write_text(out / "results.md", md)
    if plots:
        plot_results(out, cfg, scores, pre)
    print("\n" + md)
    return result


#: what each experiment's arms give `run`: (variant -> model dir, or task -> model dir for a +tapt
#: arm), (variant -> pretraining entry), TAPT details
Arms = tuple[dict[str, Path | dict[str, Path]], dict[str, dict], dict]


def pretrain_vs_scratch_arms(cfg: ExperimentConfig, out: Path, given: list[Path]) -> Arms:
    """An MLM model (pretrained here or given) and a random init of its exact config (+ TAPT arms)."""
    from clozeformer.train.build import save_random_init

    if given:
        pretrained, summary = given[0], reused_pretraining(given[0])
    else:
        arm = ("pretrain mlm", run_pretraining, (cfg, out / "pretrain", "mlm", cfg.budget_steps))
        ((pretrained, summary),) = run_many(cfg, [arm], out)
    variants: dict[str, Path | dict[str, Path]] = {
        "pretrained": pretrained,
        "scratch": save_random_init(pretrained, out / "random-init", seed=0),
    }
    tapt_info: dict = {}
    if cfg.tapt_steps:
        tapt, tapt_info = tapt_arms(cfg, variants, out)
        variants.update(tapt)
    return variants, {"pretrained": pretraining_entry(pretrained, summary)}, tapt_info


def nsp_ablation_arms(cfg: ExperimentConfig, out: Path, given: list[Path]) -> Arms:
    """MLM+NSP and MLM-only on the same pairs; without --budget-steps MLM gets MLM+NSP's step count."""
    from clozeformer.data.manifest import Manifest

    if not given and not Manifest.read(cfg.data).nsp:
        raise ClozeformerError(f"{cfg.data}: nsp-ablation needs NSP-prepared data (clozeformer prepare --mode nsp)")
    steps = cfg.budget_steps
    arm_a = ("pretrain mlm+nsp", run_pretraining, (cfg, out / "pretrain-mlm-nsp", "mlm_nsp", steps))

    def arm_b(max_steps: int | None) -> tuple:
        return ("pretrain mlm", run_pretraining, (cfg, out / "pretrain-mlm", "mlm", max_steps))

    if given:
        (a, sa), (b, sb) = [(d, reused_pretraining(d)) for d in given]
    elif steps:  # both budgets known: the arms are independent
        (a, sa), (b, sb) = run_many(cfg, [arm_a, arm_b(steps)], out)
    else:  # the second arm gets the first's step count
        ((a, sa),) = run_many(cfg, [arm_a], out)
        ((b, sb),) = run_many(cfg, [arm_b(int(sa["step"]))], out)
    return {"mlm+nsp": a, "mlm": b}, {"mlm+nsp": pretraining_entry(a, sa), "mlm": pretraining_entry(b, sb)}, {}


#: the ELECTRA generator of mlm-vs-rtd: run 5's better one (one layer, full width, shared embeddings)
RTD_GENERATOR = {"generator_fraction": 1.0, "generator_layers": 1}
#: the equal-compute experiments' arms, variant name -> (run dir name, objective, objective options): a CLM
#: step costs more than an MLM one (it scores every position), an ELECTRA step also runs the generator
EQUAL_COMPUTE_ARMS = {
    "mlm-vs-clm": {"mlm (bidirectional)": ("pretrain-mlm", "mlm", {}), "clm (left-to-right)": ("pretrain-clm", "clm", {})},
    "mlm-vs-rtd": {"mlm (masked LM)": ("pretrain-mlm", "mlm", {}), "rtd (ELECTRA)": ("pretrain-rtd", "electra", RTD_GENERATOR)},
}


def equal_compute_arms(cfg: ExperimentConfig, out: Path, given: list[Path]) -> Arms:
    """mlm-vs-clm and mlm-vs-rtd: two objectives with the same --budget-minutes each (equal compute;
    --budget-steps gives both the same steps: equal tokens, not equal compute, when their steps cost
    differently), or the --pretrained dirs."""
    arms = EQUAL_COMPUTE_ARMS[cfg.name]
    runs = [
        (f"pretrain {objective}", functools.partial(run_pretraining, **options), (cfg, out / name, objective, cfg.budget_steps))
        for name, objective, options in arms.values()
    ]
    done = [(d, reused_pretraining(d)) for d in given] if given else run_many(cfg, runs, out)
    names = list(arms)
    return dict(zip(names, (d for d, _ in done))), {n: pretraining_entry(d, s) for n, (d, s) in zip(names, done)}, {}


def finetune_arms(cfg: ExperimentConfig, variants: dict, out: Path) -> dict[str, dict[str, list[float]]]:
    """Every variant fine-tuned on every task with every seed; variant -> task -> scores by seed.
    Runs that finished in OUT with the same identity are reused (unless --rerun)."""
    fingerprint = functools.cache(model_fingerprint)
    keys, found, todo = [], [], []
    for task in cfg.tasks:
        task_files = data_fingerprint(task_dir(cfg, task))
        for seed in range(cfg.seeds):
            for v, dirs in variants.items():
                model_dir = dirs if isinstance(dirs, Path) else dirs[task]  # a +tapt arm: one model per task
                ft = finetune_config(cfg, model_dir, task, seed, out / "finetune" / f"{slug(v)}-{task}-{seed}")
                identity = run_identity(ft, fingerprint(model_dir), task_files)
                keys.append((v, task))
                found.append(None if cfg.rerun else finished_score(Path(ft.out), identity))
                if found[-1] is None:
                    todo.append((f"{v} / {task} / seed {seed}", finetune_standard, (ft, identity)))
    if len(todo) < len(keys):
        print(
            f"reusing {len(keys) - len(todo)} of {len(keys)} fine-tuning runs that finished in {out} with the same "
            "config and model (--rerun trains them again)",
            flush=True,
        )
    fresh = iter(run_many(cfg, todo, out))  # the runs' scores, in the order of the runs not found
    scores: dict[str, dict[str, list[float]]] = {v: {t: [] for t in cfg.tasks} for v in variants}
    for (v, task), s in zip(keys, found):
        scores[v][task].append(next(fresh) if s is None else s)
    return scores


def results_markdown(cfg: ExperimentConfig, result: dict) -> str:
    from clozeformer.tasks.spec import get_task
    from clozeformer.tasks.task_config import TaskDataConfig

    scores = result["scores"]
    variants = list(scores)
    dropout = "as saved" if cfg.finetune_dropout is None else f"{cfg.finetune_dropout:g}"
    dropout += f", pooling {cfg.finetune_pooling or 'cls'}, dtype {cfg.dtype}"
    lines = [
        f"### {cfg.name}",
        "",
        f"Backbone `{cfg.model}`; "
        + (
            "pretrained models given with --pretrained"
            if cfg.pretrained
            else f"pretraining budget {cfg.budget_steps} steps of {cfg.batch_size} sequences for every variant"
            if cfg.budget_steps
            else f"pretraining budget {cfg.budget_minutes:g} min for the first variant (the other gets its step count)"
            if cfg.name == "nsp-ablation"
            else f"pretraining budget {cfg.budget_minutes:g} min for every variant"
        )
        + f"; fine-tuning {cfg.finetune_epochs:g} epochs, <= {cfg.finetune_minutes:g} min per run, lr "
        f"{'finetune default' if cfg.finetune_lr is None else f'{cfg.finetune_lr:g}'}, dropout {dropout}, "
        f"<= {cfg.max_train_examples} train / {cfg.max_eval_examples} dev examples; "
        f"{cfg.seeds} fine-tuning seeds; mean +- std of each task's main dev metric.",
        "",
        "| task | " + " | ".join(variants) + " |",
        "|---|" + "---|" * len(variants),
    ]
    for task in cfg.tasks:
        cells = ["{:.3f} +- {:.3f}".format(*mean_std(scores[v][task])) for v in variants]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    groups = [("average", list(cfg.tasks))]
    classification = [t for t in cfg.tasks if get_task(t, TaskDataConfig()).family == "classification"]
    if 0 < len(classification) < len(cfg.tasks):
        groups.append(("average, classification tasks", classification))
    # each variant's lead over the baseline (scratch; else the last variant), in points (metric x 100)
    base = variants.index("scratch") if "scratch" in variants else len(variants) - 1
    pad = " |" * (len(variants) - 1)
    for label, tasks in groups:
        avg = [statistics.fmean(statistics.fmean(scores[v][t]) for t in tasks) for v in variants]
        lines.append(f"| **{label}** | " + " | ".join(f"**{a:.3f}**" for a in avg) + " |")
        for i, v in enumerate(variants):
            if i != base:
                lines.append(f"| {label}: {v} - {variants[base]} | {100 * (avg[i] - avg[base]):+.1f} points{pad}")
    lines += ["", "Pretraining: " + "; ".join(_pretraining_summary(k, d) for k, d in result["pretraining"].items()), ""]
    if result.get("tapt"):
        lines += [
            f"Task-adaptive pretraining: {cfg.tapt_steps} steps of {cfg.batch_size} x {TAPT_SEQ_LEN} tokens of each "
            f"task's training text, lr {cfg.tapt_lr:g}, {cfg.tapt_warmup_steps} warmup steps; val MLM accuracy on "
            "its held-out 2%:",
            "",
            "| task | " + " | ".join(result["tapt"]) + " |",
            "|---|" + "---|" * len(result["tapt"]),
        ]
        for task in cfg.tasks:
            cells = []
            for info in result["tapt"].values():
                acc, mins = info[task]["val"].get("val_mlm_acc"), info[task]["seconds"] / 60
                cells.append(("n/a" if acc is None else f"{acc:.3f}") + f" ({mins:.1f} min)")
            lines.append(f"| {task} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _pretraining_summary(variant: str, d: dict) -> str:
    parts = [f"{d['dir']}, given with --pretrained"] if d.get("note") else []
    if d.get("steps"):
        parts.append(f"{d['steps']} steps" + (f" in {d['seconds'] / 60:.1f} min" if d.get("seconds") else ""))
    val = d.get("val") or {}
    if val.get("val_mlm_acc") is not None:
        what = "next-token" if d.get("causal") else "MLM"
        parts.append(f"val {what} accuracy {val['val_mlm_acc']:.3f}")
    if val.get("val_nsp_acc") is not None:
        parts.append(f"val NSP accuracy {val['val_nsp_acc']:.3f}")
    if val.get("val_rtd_acc") is not None:  # ELECTRA: the MLM accuracy above is its generator's
        parts.append(f"val replaced-token accuracy {val['val_rtd_acc']:.3f} (all 'original': {1 - val['val_rtd_replaced']:.3f})")
    if d.get("final_loss") is not None:
        parts.append(f"final training loss {d['final_loss']:.3f}")
    return f"{variant}: " + (", ".join(parts) or "?")


def plot_results(out: Path, cfg: ExperimentConfig, scores: dict, pre: dict) -> None:
    os.environ.setdefault("MPLCONFIGDIR", str(out / ".cache" / "matplotlib"))
    from clozeformer.commands.plot import axes, save_png

    variants = list(scores)
    width = 0.8 / len(variants)
    ax = axes((1.6 + 1.4 * len(cfg.tasks), 3.6))
    for i, v in enumerate(variants):
        ms = [mean_std(scores[v][t]) for t in cfg.tasks]
        xs = [j + (i - (len(variants) - 1) / 2) * width for j in range(len(cfg.tasks))]
        ax.bar(xs, [m for m, _ in ms], width, yerr=[s for _, s in ms], capsize=3, label=v)
    ax.set_xticks(range(len(cfg.tasks)), cfg.tasks)
    ax.set(ylabel="main dev metric", title=cfg.name)
    ax.legend(fontsize=8)
    save_png(ax, out / "scores.png", dpi=110)
    curves = {k: _loss_curve(Path(d["dir"])) for k, d in pre.items() if d.get("dir")}
    curves = {k: c for k, c in curves.items() if c}
    if curves:
        ax = axes((6, 3.5))
        for k, (minutes, losses) in curves.items():
            ax.plot(minutes, losses, label=k, lw=1)
        ax.set_xlabel("minutes of pretraining")
        ax.set_ylabel("training MLM loss (CLM: next token;\nELECTRA: its generator's)", fontsize=8)
        ax.legend()
        save_png(ax, out / "pretraining_loss.png", dpi=110)


def _loss_curve(checkpoint: Path) -> tuple[list[float], list[float]] | None:
    """(minutes, training MLM loss) of the run a checkpoint (RUN/checkpoints/step-N) belongs to: the
    masked-LM part of the loss, comparable across objectives (no NSP or replaced-token term)."""
    train = [r for r in read_metrics(checkpoint.parent.parent) if r.get("kind") == "train" and "mlm_loss" in r]
    return ([r["elapsed_s"] / 60 for r in train], [r["mlm_loss"] for r in train]) if train else None


CONFIG, POSITIONAL = ExperimentConfig, ("name",)
main = run
