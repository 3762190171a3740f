"""`clozeformer predict`: run a fine-tuned directory over a task's test (or any) files and write
predictions in the task's usual format.

| task family            | written to OUT/                                                     |
|------------------------|---------------------------------------------------------------------|
| GLUE                   | the GLUE server's submission files: CoLA.tsv, MNLI-m.tsv, AX.tsv, ... |
| other classification / regression / SWAG | predictions_<split>.tsv (`index<TAB>prediction`)  |
| token classification   | predictions_<split>.txt: the input columns + the predicted tag (conlleval layout) |
| span QA                | predictions_<split>.json {id: answer}, nbest_predictions_<split>.json (+ null_odds for v2.0) |

When the files carry labels, the scores are printed and saved in OUT/metrics.json as well.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from clozeformer.cliutil import add_dataclass_args, print_config, save_config
from clozeformer.tasks.common import Problems
from clozeformer.tasks.config import PredictConfig
from clozeformer.tasks.evaluate import config_from_args, load_finetuned, read_splits
from clozeformer.tasks.runner import format_scores, gold_labels


def predict(cfg: PredictConfig) -> dict:
    from clozeformer.io import atomic_write_json

    cfg.validate()
    spec, runner, model, device = load_finetuned(cfg, cfg.model)
    problems = Problems()
    splits = read_splits(spec, cfg, runner, cfg.split, None, problems)
    out = Path(cfg.out) if cfg.out else Path(cfg.model) / "predictions"
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out / "predict_config.json")
    result: dict = {"task": spec.name, "model": cfg.model, "files": {}, "scores": {}}
    for sd in splits:
        t0 = time.monotonic()
        outputs = runner.infer(model, sd.features, cfg.eval_batch_size, device, progress=True)
        decoded = runner.decode(sd.examples, sd.features, outputs)
        written = runner.write_predictions(out, sd.name, sd.examples, decoded)
        result["files"][sd.name] = [str(p) for p in written]
        print(f"{spec.name} {sd.name}: {len(sd.examples)} predictions in {time.monotonic() - t0:.1f}s -> "
              + ", ".join(str(p) for p in written))
        if _fully_labelled(spec, sd.examples):
            scores = runner.score(sd.examples, decoded)
            result["scores"][sd.name] = scores
            print(f"  (labelled) {format_scores(scores)}")
    problems.report()
    result["warnings"] = dict(problems.counts)
    atomic_write_json(out / "metrics.json", result)
    return result


def _fully_labelled(spec, examples) -> bool:
    if spec.family == "qa":
        return all(ex.answers or ex.is_impossible for ex in examples)
    if spec.family == "token":
        return all(ex.tags is not None for ex in examples)
    return len(gold_labels(spec, examples)) == len(examples)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=None, help="JSON/YAML file of option values (flags win)")
    add_dataclass_args(parser, PredictConfig)


def main(args: argparse.Namespace) -> int:
    cfg = config_from_args(PredictConfig, args)
    print_config(cfg)
    predict(cfg)
    return 0
