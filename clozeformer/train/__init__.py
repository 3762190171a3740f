"""Pretraining: the loop, optimizers and schedules, checkpoints and resume, torchrun setup.

config.py       PretrainConfig: every flag of `clozeformer pretrain`, one place for defaults
build.py        the model a run trains (preset / --model-config / --init-from / checkpoint)
optim.py        AdamW param groups, LAMB, warmup + linear/cosine/constant, step/token/time budgets
precision.py    fp32 / bf16 / fp16 from the hardware, TF32
distributed.py  torchrun process group, DDP / FSDP2 wrapping, small collectives
checkpoint.py   atomic checkpoints, keep-last-K, RNG state, exact resume
metrics.py      metrics.jsonl, passed on to the --report-to trackers (clozeformer/tracking.py)
loop.py         pretrain(cfg): the training loop
cli.py, plot.py the `pretrain` and `plot` verbs

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
