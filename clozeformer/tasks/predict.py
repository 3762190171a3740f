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

import time

from clozeformer.tasks.loading import Session, saved_settings
from clozeformer.tasks.task_config import PredictConfig
from clozeformer.tasks.task_runner import format_scores, gold_labels
from clozeformer.utils.io import atomic_write_json


def predict(cfg: PredictConfig) -> dict:
    run = Session.open(cfg, None, "predictions", "predict_config.json")
    spec, runner, problems, out = run.spec, run.runner, run.problems, run.out
    result: dict = {"task": spec.name, "model": cfg.model, "files": {}, "scores": {}}
    for sd in run.splits:
        t0 = time.monotonic()
        decoded = run.decode(sd, cfg.eval_batch_size)
        written = runner.write_predictions(out, sd.name, sd.examples, decoded)
        result["files"][sd.name] = [str(p) for p in written]
        print(
            f"{spec.name} {sd.name}: {len(sd.examples)} predictions in {time.monotonic() - t0:.1f}s -> "
            + ", ".join(str(p) for p in written)
        )
        if _fully_labelled(spec, sd.examples):
            scores = result["scores"][sd.name] = runner.score(sd.examples, decoded)
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


CONFIG, DEFAULTS, SHOW_CONFIG = PredictConfig, saved_settings, True
main = predict
