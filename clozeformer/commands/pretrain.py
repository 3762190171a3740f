"""`clozeformer pretrain`: cloze pretraining from a prepared DATA_DIR into a RUN_DIR.

    clozeformer pretrain --data data/ --model mini --out runs/mini --max-steps 10000 --lr 5e-4
    torchrun --nproc_per_node 4 -m clozeformer pretrain --data data/ --model base --out runs/base ...

Flags mirror `PretrainConfig` (clozeformer/train/pretrain_config.py); `--config run.yaml|json` holds
the same names (flat), flags win. Re-running the same command resumes from RUN_DIR's newest
checkpoint. Exit status: 0 when the budget is reached, 128 + signal number after a checkpoint
on SIGTERM / SIGINT, 2 on a user error (including too many NaN steps).
"""

from __future__ import annotations

import signal

from clozeformer.train.pretrain_config import PretrainConfig

CONFIG = PretrainConfig


def main(cfg: PretrainConfig) -> int:
    from clozeformer.train.loop import pretrain  # torch is imported only when the verb runs

    stopped = pretrain(cfg)["stopped_by"]
    return 128 + int(signal.Signals[stopped]) if stopped in signal.Signals.__members__ else 0
