"""`clozeformer quickstart`: the whole road of BERT in minutes, on the bundled corpus.

    bundled text -> WordPiece vocab -> packed shards -> cloze before -> MLM pretraining (tiny)
    -> cloze after -> fine-tune QNLI from the pretrained model and from scratch -> report

Everything it writes lands under --out (default ./quickstart-run): matplotlib's cache too.
The bundled corpus and task are openly licensed slices (see NOTICE and clozeformer/assets/).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from clozeformer.commands.experiments import mean_std
from clozeformer.modeling.config import Pooling
from clozeformer.utils.configs import SEED_RANGE, check_ranges, flag_help, print_config, save_config
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import check_output_dir, mark_owned

#: cloze probes: (sentence, the word a reader expects); English from the bundled books and
#: Wikipedia's register, Chinese from 西游记 and the issue's example.
CLOZE_PROBES: list[tuple[str, str]] = [
    ("The capital of France is [MASK].", "paris"),
    ("He opened the [MASK] and walked into the room.", "door"),
    ("The sun rises in the [MASK].", "east"),
    ("It was one of the [MASK] days of the year.", "-"),
    ("美猴王自称齐天大[MASK]。", "圣"),
    ("唐僧师徒四人去西天取[MASK]。", "经"),
    ("我昨天去了[MASK][MASK]，买了一件红色的外套。", "商店"),
]


@dataclass
class QuickstartConfig:
    out: str = field(
        default="quickstart-run", metadata=flag_help("output directory, new or empty (nothing is written elsewhere)")
    )
    overwrite: bool = field(default=False, metadata=flag_help("replace an earlier quickstart's --out"))
    minutes: float = field(default=6.0, metadata=flag_help("wall-clock minutes of MLM pretraining"))
    finetune_minutes: float = field(default=1.0, metadata=flag_help("wall-clock cap per fine-tuning run"))
    model: str = field(default="tiny", metadata=flag_help("model preset for pretraining and the scratch baseline"))
    vocab_size: int = field(default=12000, metadata=flag_help("WordPiece vocabulary size (English + Chinese)"))
    max_length: int = field(default=128, metadata=flag_help("pretraining sequence length, in tokens", aliases=("seq_len",)))
    batch_size: int = field(default=32, metadata=flag_help("pretraining micro-batch"))
    lr: float | None = field(
        default=None, metadata=flag_help("pretraining peak learning rate; unset: `pretrain`'s recipe for --model")
    )
    finetune_lr: float = field(default=5e-4, metadata=flag_help("fine-tuning learning rate (tiny models like it high)"))
    finetune_pooling: Pooling = field(
        default="mean",
        metadata=flag_help(
            "sentence vector for the classifier: mean of the tokens (transfers better from a short pretraining, "
            "docs/EXPERIMENTS.md run 4), cls, max or last"
        ),
    )
    finetune_epochs: float = field(default=3.0, metadata=flag_help("fine-tuning epochs (the time cap may stop earlier)"))
    finetune_seeds: int = field(
        default=3, metadata=flag_help("fine-tuning runs per start (seeds --seed, --seed+1, ...); the report gives mean ± std")
    )
    seed: int = field(default=0, metadata=flag_help("seed for everything", **SEED_RANGE))
    threads: int | None = field(default=None, metadata=flag_help("torch CPU threads (default: all cores)"))

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.minutes <= 0 or self.finetune_minutes <= 0:
            raise ClozeformerError("--minutes and --finetune-minutes must be positive")
        if self.finetune_seeds < 1:
            raise ClozeformerError(f"--finetune-seeds {self.finetune_seeds}: must be at least 1")


def asset(*parts: str) -> Path:
    return Path(str(resources.files("clozeformer").joinpath("assets", *parts)))


def _step(title: str) -> float:
    print(f"\n== {title} ==", flush=True)
    return time.perf_counter()


def cloze(model: Any, tokenizer: Any, top_k: int = 3) -> list[dict]:
    """Top-k fillers for each probe, per [MASK], with the filled sentence."""
    from clozeformer.infer.pipelines import pipeline

    fill = pipeline("fill-mask", model, tokenizer=tokenizer, top_k=top_k)
    rows = []
    for (text, expected), result in zip(CLOZE_PROBES, fill([t for t, _ in CLOZE_PROBES])):
        guesses = [" / ".join(f"{c['token']} {c['score']:.2f}" for c in m["candidates"]) for m in result["masks"]]
        rows.append({"text": text, "expected": expected, "filled": result["sequence"], "top": guesses})
    return rows


def _print_cloze(rows: list[dict]) -> list[dict]:
    for r in rows:
        print(f"  {r['text']}\n      -> {r['filled']}    [{' | '.join(r['top'])}]")
    return rows


def _plots(out: Path, metrics: list[dict], scores: dict[str, list[float]], metric_name: str) -> list[str]:
    from clozeformer.commands.plot import axes, save_png

    made = []
    train = [m for m in metrics if isinstance(m.get("loss"), float) and "step" in m]  # null: a skipped step
    evals = [m for m in metrics if "val_mlm_acc" in m]
    if train:
        ax = axes((6, 3.5))
        ax.plot([m["step"] for m in train], [m["loss"] for m in train], lw=0.8, label="train MLM loss")
        if evals:
            ax.plot([m["step"] for m in evals], [m["val_mlm_loss"] for m in evals], "o-", label="val MLM loss")
        ax.set(xlabel="step", ylabel="loss", title="MLM pretraining loss")
        ax.legend()
        made.append(save_png(ax, out / "loss.png", dpi=110).name)
    if evals:
        ax = axes((6, 3.5))
        ax.plot([m["step"] for m in evals], [m["val_mlm_acc"] for m in evals], "o-")
        ax.set(xlabel="step", ylabel="accuracy", title="MLM accuracy on held-out text")
        made.append(save_png(ax, out / "mlm_accuracy.png", dpi=110).name)
    ax = axes((4.5, 3.5))
    means = [sum(xs) / len(xs) for xs in scores.values()]
    bars = ax.bar(list(scores), means, color=["tab:blue", "tab:gray"], alpha=0.7)
    ax.bar_label(bars, fmt="%.3f")
    for i, xs in enumerate(scores.values()):  # each seed's run
        ax.plot([i] * len(xs), xs, "k.", ms=4)
    ax.set(ylim=(0, 1), ylabel=metric_name, title="QNLI (bundled slice): fine-tuned from ...")
    return [*made, save_png(ax, out / "finetune.png", dpi=110).name]


def run(cfg: QuickstartConfig) -> dict:
    """The six steps on the bundled corpus, then the report and its plots, all under --out."""
    out = _fresh_out(cfg)
    import torch  # after MPLCONFIGDIR is set

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    print_config(cfg, "quickstart")
    save_config(cfg, out / "quickstart_config.json")
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    tok, manifest = _data(cfg, out, timings)
    _step("3/6 cloze test with a random (untrained) model")
    before = _print_cloze(cloze(_random_model(cfg, tok), tok))
    summary, checkpoint, metrics, final_eval = _pretrain(cfg, out, timings)
    (out / "pretrained").symlink_to(checkpoint.relative_to(out), target_is_directory=True)  # a name that stays put
    _step("5/6 the same cloze test after pretraining")
    after = _print_cloze(cloze(str(checkpoint), None))
    scores = _finetune_qnli(cfg, out, checkpoint, timings)
    plots = _plots(out, metrics, scores, "dev accuracy")
    timings["total"] = time.perf_counter() - t_all
    report = _report(cfg, tok.vocab_size, manifest, summary, final_eval, before, after, scores, timings, plots)
    (out / "report.md").write_text(report, encoding="utf-8")
    print(f"\nreport: {out / 'report.md'}  (plots: {', '.join(plots)}); total {timings['total'] / 60:.1f} min")
    print(f'the pretrained model: {out / "pretrained"} (try: clozeformer fill-mask --model {out / "pretrained"} "...[MASK]...")')
    return {
        "scores": scores,
        "val_mlm_acc": final_eval.get("val_mlm_acc"),
        "timings": timings,
        "checkpoint": str(checkpoint),
        "report": str(out / "report.md"),
    }


def _fresh_out(cfg: QuickstartConfig) -> Path:
    """--out, new or an earlier quickstart's emptied, after checking for matplotlib (before minutes of work)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ClozeformerError("the quickstart draws its report's plots with matplotlib: pip install 'clozeformer[plot]'")
    out = check_output_dir(cfg.out, cfg.overwrite).resolve()
    if out.is_dir() and any(out.iterdir()):  # an earlier quickstart's (check_output_dir verified it)
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    mark_owned(out, "quickstart")
    os.environ.setdefault("MPLCONFIGDIR", str(out / ".cache" / "matplotlib"))  # keep every cache inside --out
    return out


def _data(cfg: QuickstartConfig, out: Path, timings: dict) -> tuple[Any, Any]:
    """Steps 1 and 2: a WordPiece vocabulary trained on the bundled corpus (OUT/tokenizer), then the
    corpus in packed sequences (OUT/data). Returns (the tokenizer, the data's manifest)."""
    from clozeformer.commands.tokenizer import TokenizerTrainConfig, train_tokenizer
    from clozeformer.data.prepare import PrepareConfig, prepare

    corpus = [str(asset("corpus", name)) for name in ("en_wikipedia.txt.gz", "en_books.txt.gz", "zh_xiyouji.txt.gz")]
    t = _step("1/6 WordPiece vocabulary on the bundled corpus")
    tok, _ = train_tokenizer(
        TokenizerTrainConfig(
            input=corpus, out=str(out / "tokenizer"), vocab_size=cfg.vocab_size, limit_alphabet=6000, num_unused=0, progress=False
        )
    )
    tok.save(out / "tokenizer")
    timings["vocab"] = time.perf_counter() - t
    print(f"  {tok.vocab_size} tokens -> {out / 'tokenizer'} ({timings['vocab']:.0f}s)")
    t = _step("2/6 pretraining shards (packed sequences of 128 tokens)")
    manifest = prepare(
        PrepareConfig(
            input=corpus,
            tokenizer=str(out / "tokenizer"),
            out=str(out / "data"),
            max_length=cfg.max_length,
            val_fraction=0.03,
            seed=cfg.seed,
            progress=False,
            min_doc_chars=100,
        )
    )
    timings["prepare"] = time.perf_counter() - t
    print(f"  {manifest.num_train} train / {manifest.num_val} val sequences ({timings['prepare']:.0f}s)")
    return tok, manifest


def _random_model(cfg: QuickstartConfig, tok: Any) -> Any:
    """For step 3: a seeded, untrained BertForMaskedLM of the architecture `pretrain` builds."""
    import torch

    from clozeformer.modeling.bert import BertForMaskedLM
    from clozeformer.modeling.config import BertConfig
    from clozeformer.train.pretrain_config import recipe_for

    torch.manual_seed(cfg.seed)
    recipe = recipe_for(cfg.model, from_preset=True)
    config = BertConfig.preset(cfg.model, vocab_size=tok.vocab_size, position_embedding_type=recipe.position_embedding_type)
    return BertForMaskedLM(config).eval()


def _pretrain(cfg: QuickstartConfig, out: Path, timings: dict) -> tuple[dict, Path, list[dict], dict]:
    """Step 4: MLM pretraining into OUT/pretrain; returns (summary, checkpoint, metrics, last evaluation)."""
    from clozeformer.train.loop import pretrain
    from clozeformer.train.metrics_file import read_metrics
    from clozeformer.train.pretrain_config import PretrainConfig

    t = _step(f"4/6 MLM pretraining, {cfg.model}, {cfg.minutes:g} minutes")
    run_dir = out / "pretrain"
    summary = pretrain(
        PretrainConfig(
            data=str(out / "data"),
            out=str(run_dir),
            model=cfg.model,
            max_time=cfg.minutes,
            batch_size=cfg.batch_size,
            lr=cfg.lr,
            eval_every=100,
            eval_batches=20,
            seed=cfg.seed,
            report_to=["none"],
            keep_last=1,
            save_every_minutes=0.0,
            progress=True,
        )
    )
    timings["pretrain"] = time.perf_counter() - t
    checkpoint = Path(summary["checkpoint"])
    metrics = read_metrics(run_dir)
    final_eval = next((m for m in reversed(metrics) if "val_mlm_acc" in m), {})
    print(
        f"  {summary.get('step')} steps; val MLM accuracy {final_eval.get('val_mlm_acc', float('nan')):.3f}, "
        f"loss {final_eval.get('val_mlm_loss', float('nan')):.3f}; checkpoint {checkpoint}"
    )
    return summary, checkpoint, metrics, final_eval


def _finetune_qnli(cfg: QuickstartConfig, out: Path, checkpoint: Path, timings: dict) -> dict[str, list[float]]:
    """Step 6: QNLI fine-tuned from the checkpoint and from a random init of its exact config, each
    with --finetune-seeds seeds, the runs spread over the cores; dev accuracies per start and seed."""
    import torch

    from clozeformer.train.build import save_random_init
    from clozeformer.utils.procs import run_in_processes

    t = _step("6/6 fine-tune QNLI (bundled slice) from the pretrained model and from scratch")
    starts = {"pretrained": checkpoint, "scratch": save_random_init(checkpoint, out / "random-init", seed=cfg.seed)}
    seeds = [cfg.seed + i for i in range(cfg.finetune_seeds)]
    runs = [
        (f"{name}-seed{seed}", _finetune_run, (cfg, str(model), str(out / "finetune" / f"{name}-seed{seed}"), seed))
        for name, model in starts.items()
        for seed in seeds
    ]
    cores = torch.get_num_threads()  # --threads, else OMP_NUM_THREADS or the cores this process may use
    jobs = min(len(runs), cores)
    results = iter(run_in_processes(runs, jobs, max(1, cores // jobs), out / "finetune" / "logs"))
    scores = {name: [next(results) for _ in seeds] for name in starts}
    for name, xs in scores.items():
        print(f"  from {name}: dev accuracy {_mean_std(xs)} (seeds: {', '.join(f'{x:.3f}' for x in xs)})")
    timings["finetune"] = time.perf_counter() - t
    return scores


def _finetune_run(cfg: QuickstartConfig, model: str, out: str, seed: int) -> float:
    """One fine-tuning run (in a worker process); its best dev accuracy."""
    from clozeformer.tasks.finetune import finetune
    from clozeformer.tasks.task_config import FinetuneConfig

    res = finetune(
        FinetuneConfig(
            task="qnli",
            data=[str(asset("tasks", "qnli"))],
            model=model,
            out=out,
            epochs=cfg.finetune_epochs,
            lr=cfg.finetune_lr,
            batch_size=32,
            max_time=cfg.finetune_minutes,
            pooling=cfg.finetune_pooling,
            seed=seed,
            overwrite=True,
            report_to=["none"],
        )
    )
    return float(res["best"]["main"])


def _mean_std(xs: list[float]) -> str:
    return "{:.3f} ± {:.3f}".format(*mean_std(xs)) if len(xs) > 1 else f"{xs[0]:.3f}"


def _report(cfg, vocab_size, manifest, summary, final_eval, before, after, scores, timings, plots) -> str:
    lines = [
        "# clozeformer quickstart report",
        "",
        f"Model `{cfg.model}`, vocabulary {vocab_size} WordPiece tokens trained on the bundled corpus, "
        f"{manifest.num_train} training sequences of {cfg.max_length} tokens.",
        "",
        "## Pretraining (masked language model)",
        "",
        f"- {summary.get('step')} optimizer steps in {timings['pretrain'] / 60:.1f} minutes",
        f"- held-out MLM accuracy **{final_eval.get('val_mlm_acc', float('nan')):.3f}**, "
        f"loss {final_eval.get('val_mlm_loss', float('nan')):.3f}, "
        f"perplexity {final_eval.get('val_ppl', float('nan')):.1f}",
        "",
        "## Cloze test: before and after pretraining",
        "",
        "| input | random model | pretrained model |",
        "|---|---|---|",
    ]
    for b, a in zip(before, after):
        lines.append(f"| {b['text']} | {b['filled']} | {a['filled']} ({' | '.join(a['top'])}) |")
    lines += [
        "",
        "## Fine-tuning on QNLI (bundled slice: 4,000 train / 1,463 dev pairs)",
        "",
        f"{len(scores['pretrained'])} fine-tuning seeds per start, identical flags; the best dev evaluation of each run.",
        "",
        "| start | dev accuracy (mean ± std) | per seed |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {_mean_std(xs)} | {', '.join(f'{x:.3f}' for x in xs)} |" for k, xs in scores.items()]
    gap = 100 * (sum(scores["pretrained"]) - sum(scores["scratch"])) / len(scores["scratch"])
    lines += ["", f"Pretrained − scratch: **{gap:+.1f} points**.", "", "## Time", "", "| step | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in timings.items()]
    lines += [""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(lines)


CONFIG = QuickstartConfig
main = run

if __name__ == "__main__":  # pragma: no cover
    run(QuickstartConfig())
