"""`clozeformer evaluate`: score a fine-tuned directory on a task's dev (or labelled test) files.

The task, columns, max_length and QA settings default to those the model was fine-tuned with
(`MODEL/finetune_config.json`); flags override them. Labels come from the model's
`config.json` (`id2label`); a gold label the model does not know is an error naming its line.
"""

from __future__ import annotations

import time

from clozeformer.tasks.loading import Session, saved_settings
from clozeformer.tasks.task_config import EvaluateConfig
from clozeformer.tasks.task_runner import format_scores
from clozeformer.utils.io import atomic_write_json


def evaluate(cfg: EvaluateConfig) -> dict:
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
        scores = result["scores"][sd.name] = runner.score(sd.examples, run.decode(sd, cfg.eval_batch_size))
        result["examples"][sd.name] = len(sd.examples)
        result["seconds"][sd.name] = round(time.monotonic() - t0, 2)
        print(f"{spec.name} {sd.name} ({len(sd.examples)} examples): {format_scores(scores)}")
    problems.report()
    result["warnings"] = dict(problems.counts)
    atomic_write_json(out / "metrics.json", result)
    print(f"wrote {out / 'metrics.json'}")
    return result


CONFIG, DEFAULTS, SHOW_CONFIG = EvaluateConfig, saved_settings, True
main = evaluate
