"""`clozeformer plot RUN_DIR`: training curves from RUN_DIR/metrics.jsonl as PNGs.

    clozeformer plot runs/mini                       # -> runs/mini/plots/{loss,mlm_accuracy,lr,throughput}.png
    clozeformer plot runs/mini --out docs --prefix pretrain-
    clozeformer plot runs/rotary --compare runs/absolute --out docs   # validation vs wall-clock minutes
    clozeformer plot runs/rotary --compare runs/absolute --x tokens   # ... vs tokens seen

With `--compare`, the validation MLM loss and accuracy of every run are overlaid against the
wall-clock minutes of training (the time each evaluation was reached), the fair axis when
runs differ in step cost and ran alone on one machine: `compare-val_loss.png` and
`compare-val_acc.png`. `--x tokens` draws them against the training tokens instead, for runs
whose clock was shared or paused.

Train curves are drawn raw (faint) and as a moving average over `--smooth` logged steps;
evaluations on the held-out split are drawn as markers. Needs matplotlib (`pip install
clozeformer[plot]`); it is imported only here, through the Agg canvas (no display needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from clozeformer.train.metrics_file import METRICS_FILE, read_metrics
from clozeformer.utils.errors import ClozeformerError
from clozeformer.utils.io import atomic_path, check_dir_path

#: --compare's x axes: (train-record key, scale, label)
X_AXES = {
    "minutes": ("elapsed_s", 1 / 60, "wall-clock minutes of training"),
    "tokens": ("tokens", 1e-6, "training tokens (millions)"),
}


@dataclass
class PlotConfig:
    run_dir: str = field(default="", metadata={"help": "the pretraining run directory"})
    out: str | None = field(default=None, metadata={"help": "where to write the PNGs (default RUN_DIR/plots)"})
    prefix: str = field(default="", metadata={"help": "file name prefix, e.g. pretrain-"})
    smooth: int = field(default=20, metadata={"help": "moving-average window over logged train steps"})
    compare: list[str] = field(
        default_factory=list,
        metadata={"help": "other run dirs: overlay validation loss/accuracy of all runs against wall-clock minutes"},
    )
    x: str = field(default="minutes", metadata={"help": "--compare's axis: minutes (wall clock) or tokens (seen)"})

    def __post_init__(self) -> None:
        if not self.run_dir:
            raise ClozeformerError("plot: give the RUN_DIR to plot")
        if self.out:
            check_dir_path(self.out)
        if self.smooth < 1:
            raise ClozeformerError(f"--smooth must be >= 1, got {self.smooth}")
        if self.x not in X_AXES:
            raise ClozeformerError(f"--x {self.x!r}: choose {' or '.join(X_AXES)}")


def moving_average(y: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over up to `window` points (shorter at the start), same length as y."""
    c = np.cumsum(np.insert(y.astype(np.float64), 0, 0.0))
    idx = np.arange(1, len(y) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def axes(figsize: tuple[float, float] = (6.4, 4.0)):
    """The axes of a new figure on matplotlib's Agg canvas (no pyplot, no display)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ClozeformerError("plot needs matplotlib: pip install 'clozeformer[plot]'") from None
    return Figure(figsize=figsize, dpi=100).add_subplot()


def save_png(ax, path: Path, dpi: float | str = "figure") -> Path:
    """Write the figure of `ax` to `path` (atomically)."""
    ax.figure.tight_layout()
    with atomic_path(path) as tmp:
        ax.figure.savefig(tmp, format="png", dpi=dpi)
    return path


def validation_curve(run: Path, x: str = "minutes") -> list[tuple[float, float, float]]:
    """(x, val MLM loss, val MLM accuracy) per evaluation; x = the train clock in minutes, or the
    training tokens in millions, at that step."""
    if not run.is_dir():
        raise ClozeformerError(f"{run}: no such run directory")
    key, scale, _ = X_AXES[x]
    records = read_metrics(run)
    clock = {r["step"]: r[key] * scale for r in records if r.get("kind") == "train" and key in r}
    pts = [
        (clock[r["step"]], r["val_mlm_loss"], r["val_mlm_acc"])
        for r in records
        if r.get("kind") == "eval" and r.get("step") in clock and "val_mlm_loss" in r
    ]
    if not pts:
        raise ClozeformerError(f"{run / METRICS_FILE}: no evaluations logged (pretrain with --eval-every N)")
    return pts


def plot_compare(runs: list[Path], out: Path, prefix: str = "", x: str = "minutes") -> list[Path]:
    curves = {run: validation_curve(run, x) for run in runs}
    written = []
    for col, name, ylabel in ((1, "val_loss", "validation MLM loss"), (2, "val_acc", "validation MLM accuracy")):
        ax = axes()
        for run, pts in curves.items():
            ax.plot([p[0] for p in pts], [p[col] for p in pts], "o-", markersize=3, label=run.name)
        ax.set(xlabel=X_AXES[x][2], ylabel=ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
        written.append(save_png(ax, out / f"{prefix}compare-{name}.png"))
    return written


def plot_run(cfg: PlotConfig) -> list[Path]:
    run = Path(cfg.run_dir)
    out = Path(cfg.out) if cfg.out else run / "plots"
    if cfg.compare:
        return plot_compare([run, *map(Path, cfg.compare)], out, cfg.prefix, cfg.x)
    axes()  # fails early without matplotlib
    if not run.is_dir():
        raise ClozeformerError(f"{run}: no such run directory")
    records = read_metrics(run)
    train = [r for r in records if r.get("kind") == "train" and not r.get("skipped")]
    evals = [r for r in records if r.get("kind") == "eval"]
    if not train:
        raise ClozeformerError(f"{run / METRICS_FILE}: no training steps logged (is this a pretraining run dir?)")
    last_step = max(int(max(r["step"] for r in train)), 1)

    def series(recs, key):  # (steps, values) where `key` holds a number; a None key: no curve
        pts = [(r["step"], r[key]) for r in recs if isinstance(r.get(key), (int, float))]
        return tuple(map(np.array, zip(*pts))) if pts else (None, None)

    def mlm_nsp(metric):  # the MLM and NSP curves of a metric: [(train key, val key, label)]
        return [(f"{k}_{metric}", f"val_{k}_{metric}", k.upper()) for k in ("mlm", "nsp")]

    panels = [  # file, title, y label, curves
        ("loss", "loss", "cross-entropy", mlm_nsp("loss")),
        ("mlm_accuracy", "accuracy at masked positions", "accuracy", mlm_nsp("acc")),
        ("lr", "learning rate", "lr", [("lr", None, "lr")]),
        ("throughput", "throughput", "tokens / s", [("tokens_per_s", None, "tokens/s")]),
    ]
    if any("rtd_acc" in r for r in train):  # ELECTRA: the discriminator against answering "original" everywhere
        for r in evals:
            if isinstance(r.get("val_rtd_replaced"), (int, float)):
                r["val_rtd_all_original"] = 1.0 - r["val_rtd_replaced"]
        rtd = [("rtd_acc", "val_rtd_acc", "discriminator"), (None, "val_rtd_all_original", "all 'original'")]
        panels.append(("replaced_token", "replaced-token detection, every token", "accuracy", rtd))
    written = []
    for name, title, ylabel, curves in panels:
        ax = axes()
        smooth = name != "lr" and cfg.smooth > 1
        for i, (tkey, vkey, label) in enumerate(curves):
            x, y = series(train, tkey)
            if x is not None:
                if smooth:
                    ax.plot(x, y, color=f"C{i}", alpha=0.25, linewidth=0.8)
                avg = f" (avg {cfg.smooth})" if smooth else ""
                ax.plot(x, moving_average(y, cfg.smooth) if smooth else y, color=f"C{i}", label=f"train {label}{avg}")
            vx, vy = series(evals, vkey)
            if vx is not None:
                ax.plot(vx, vy, "o--", color=f"C{i}", markersize=4, label=f"val {label}")
        ax.set(title=f"{run.name}: {title}", xlabel="optimizer step", ylabel=ylabel, xlim=(0, last_step))
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        written.append(save_png(ax, out / f"{cfg.prefix}{name}.png"))
    return written


CONFIG, POSITIONAL = PlotConfig, ("run_dir",)


def main(cfg: PlotConfig) -> None:
    for path in plot_run(cfg):
        print(path)
