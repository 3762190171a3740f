"""The training core (shared with fine-tuning, `clozeformer.tasks`) and pretraining.

    core.py             seeding, weight-decay groups, AdamW, the one lr schedule, the guarded update and NaN streak
    precision.py        fp32 / bf16 / fp16 from the hardware, TF32
    tracking.py         `--report-to`: TensorBoard, Weights & Biases, MLflow
    pretrain_config.py  PretrainConfig: every flag of `clozeformer pretrain`, the per-size recipe
    build.py            the model a run trains (preset / --model-config / --init-from / checkpoint)
    optim.py            pretraining's optimizer choice (AdamW or LAMB) and step/token/time budgets
    distributed.py      torchrun process group, DDP / FSDP2 wrapping, small collectives
    checkpoint.py       atomic checkpoints, keep-last-K, RNG state, exact resume
    metrics_file.py     metrics.jsonl, passed on to the --report-to trackers
    loop.py             pretrain(cfg): the training loop

The `pretrain` and `plot` verbs are `clozeformer/commands/`.

from clozeformer.train import PretrainConfig, pretrain
pretrain(PretrainConfig(data="data/", out="runs/tiny", model="tiny", max_steps=100))
"""

from __future__ import annotations

from typing import Any

from clozeformer.train.pretrain_config import PretrainConfig

__all__ = ["PretrainConfig", "pretrain"]


def __getattr__(name: str) -> Any:  # torch loads only when the loop is asked for
    if name == "pretrain":
        from clozeformer.train.loop import pretrain

        return pretrain
    raise AttributeError(f"module 'clozeformer.train' has no attribute {name!r}")
